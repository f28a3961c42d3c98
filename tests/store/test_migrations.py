"""Databases of each earlier schema, as committed in tests/schemas (made by make.py there),
upgrade to the newest on open with every row intact."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine

from advisor.result import Kind, Phase, Status
from advisor.store.schema import HEAD, MIGRATIONS
from advisor.store.store import Store
from advisor.store.tables import Base
from advisor.store.trial_filter import TrialFilter

SCHEMAS = Path(__file__).parent.parent / "schemas"


def head() -> str | None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(config).get_current_head()


def test_the_head_a_database_is_opened_by_without_alembic_is_alembics_own():
    """schema.HEAD saves importing alembic on every open: a migration added without it would
    leave databases at the previous schema."""
    assert head() == HEAD


def test_every_earlier_schema_has_a_committed_database():
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    earlier = {r.revision for r in ScriptDirectory.from_config(config).walk_revisions()} - {head()}
    assert {p.stem for p in SCHEMAS.glob("*.sqlite")} == earlier


@pytest.mark.parametrize("revision", sorted(p.stem for p in SCHEMAS.glob("*.sqlite")))
def test_a_database_of_an_earlier_schema_upgrades_with_its_rows_intact(revision, tmp_path):
    path = tmp_path / "old.sqlite"
    shutil.copy(SCHEMAS / f"{revision}.sqlite", path)
    url = f"sqlite:///{path}"
    with sqlite3.connect(path) as before:
        assert before.execute("SELECT version_num FROM alembic_version").fetchone() == (revision,)
    store = Store(url)  # opening upgrades it
    ok, oom, crashed = sorted(store.trials(), key=lambda r: r.id or 0)
    assert [r.status for r in (ok, oom, crashed)] == [Status.ok, Status.oom, Status.crashed]
    assert [r.created_at for r in (ok, oom, crashed)] == [
        f"2026-11-30T10:0{i}:00+00:00" for i in (1, 2, 3)
    ]
    assert ok.spec.model.name == "resnet50" and ok.spec.model.image_input
    assert ok.spec.batch_size == 64 and ok.spec.optimizer.name == "adamw"
    assert ok.memory.params_bytes == 102_228_128 and ok.memory.device_peak_bytes == 5_899_014_912
    assert ok.throughput.samples_per_s == 2400.5 and ok.throughput.timed_steps == 20
    assert ok.throughput.stopped is None and ok.throughput.setup_s is None  # unknown before 0004
    assert ok.memory.buffers_bytes == (212_992 if revision >= "0003" else 0)
    assert ok.environment.device_name == "NVIDIA H200" and ok.environment.torch == "2.11.0"
    assert oom.failure.phase is Phase.forward and oom.failure.requested_bytes == 3_288_334_336
    assert crashed.failure.message.endswith("RuntimeError: boom") and crashed.memory is None
    # each trial's source is read from its spec (0008), so history's workload= finds them
    found = store.trials(where=TrialFilter(workload="catalog:torchvision_classifier"))
    assert len(found) == (3 if revision >= "0003" else 0)  # before 0003 a trial had no source
    assert ok.memory_snapshot is None  # none before 0007
    assert ok.throughput.machine_load is None  # unknown before 0009
    assert {(r.kind, r.follows) for r in (ok, oom, crashed)} == {(Kind.measured, None)}  # 0010
    assert ok.spec.gpus == 1 and ok.spec.strategy is None  # one GPU before 0011
    assert ok.throughput.collectives is None and ok.throughput.all_gather_bytes is None  # 0012
    if revision >= "0002":
        assert [(r.id, reused) for r, reused in store.sweep_trials(1)] == [
            (1, False), (2, False), (3, False)
        ]  # fmt: skip
    with create_engine(url).connect() as connection:
        context = MigrationContext.configure(connection)
        assert context.get_current_revision() == head()
        assert compare_metadata(context, Base.metadata) == []
        if revision < "0003":  # unknown, not invented
            row = connection.exec_driver_sql("SELECT buffers_bytes, fingerprint FROM trials")
            assert set(row) == {(None, None)}
    # and it takes new trials
    assert store.add(ok).id == 4
