from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from conftest import spec_of
from sqlalchemy import create_engine, inspect

from advisor.result import (
    Environment,
    Failure,
    Memory,
    Phase,
    Status,
    Throughput,
    TimingStop,
    TrialResult,
)
from advisor.store import rows
from advisor.store.schema import MIGRATIONS
from advisor.store.store import Store
from advisor.store.tables import Base

ENV = Environment("NVIDIA H200", 150754820096, "580.1", "13.0", "2.11.0", "0.1.0", "3.12.3", "h")


def an_ok_result(batch_size: int = 64) -> TrialResult:
    memory = Memory(
        context_bytes=641_728_512,
        params_bytes=102_228_128,
        buffers_bytes=212_904,
        activations_bytes=5_000_000_000,
        grads_bytes=102_228_128,
        optimizer_state_bytes=204_456_256,
        inputs_bytes=38_535_680,
        peak_allocated_bytes=6_000_000_000,
        peak_reserved_bytes=7_000_000_000,
        steady_peak_allocated_bytes=5_900_000_000,
        steady_peak_reserved_bytes=6_900_000_000,
        peak_phase=Phase.backward,
        device_peak_bytes=7_641_728_512,
        nvml_process_bytes=7_700_000_000,
        num_alloc_retries=0,
    )
    throughput = Throughput(1234.5, None, 0.0518, 0.0004, 40, 3, 1.6e12, 0.31, 0.0002,
                            TimingStop.precise, 4.1, 9.5, 0.8, 2.2)  # fmt: skip
    return TrialResult(
        spec=spec_of(f"batch_size={batch_size}", "precision=bf16"),
        status=Status.ok,
        environment=ENV,
        memory=memory,
        throughput=throughput,
        failure=None,
        wall_s=12.5,
    )


def test_round_trip(db_url):
    store = Store(db_url)
    ok = store.add(an_ok_result())
    oom = store.add(
        dataclasses.replace(
            an_ok_result(4096),
            status=Status.oom,
            memory=None,
            throughput=None,
            failure=Failure(Phase.backward, 3 * 2**30, "CUDA out of memory"),
        )
    )
    again = Store(db_url)  # a fresh connection reads what was committed
    assert again.get(ok.id) == ok
    assert again.get(oom.id) == oom
    assert [r.id for r in again.trials()] == [oom.id, ok.id]  # newest first
    assert [r.id for r in again.trials(status="oom")] == [oom.id]
    assert again.trials(model="gpt2") == []
    assert [r.id for r in again.trials(spec_hash=ok.spec.hash)] == [ok.id]
    assert ok.to_dict()["memory"]["allocator_overhead_bytes"] == 1_000_000_000


def test_a_trial_and_its_link_to_the_sweep_are_stored_together(db_url):
    from advisor.store.sweeps import Sweep

    store = Store(db_url)
    sweep = store.open_sweep(Sweep("key", "resnet50", "24GiB", 24 * 2**30, 0.05, None))
    cut = dataclasses.replace(
        an_ok_result(),
        throughput=dataclasses.replace(an_ok_result().throughput, stopped=TimingStop.cut),
    )
    stored = store.add(cut, sweep.id)
    assert store.sweep_trials(sweep.id) == [(stored, False)]
    assert store.get(stored.id).throughput.stopped is TimingStop.cut
    store.link(sweep.id, stored.id, False)  # linked once only
    assert len(store.sweep_trials(sweep.id)) == 1


def test_environments_are_shared_between_trials(db_url):
    store = Store(db_url)
    store.add(an_ok_result(32))
    store.add(an_ok_result(64))
    with create_engine(db_url).connect() as connection:
        assert connection.exec_driver_sql("select count(*) from environments").scalar() == 1


def test_a_trial_read_once_is_not_read_again_by_another_store(db_url):
    """advisor.recommend() opens a Store a call; the trials it read are the process's."""
    Store(db_url).add(an_ok_result(32))
    first, again = Store(db_url).trials(), Store(db_url).trials()
    assert len(first) == 1 and again[0] is first[0]


def test_a_specs_columns_worked_out_once_cannot_be_changed_by_a_caller():
    """They are kept for each spec and handed to every caller: one that changed them changed
    the columns of every later trial of that spec stored in the process."""
    spec = an_ok_result(32).spec
    columns = rows.spec_columns(spec)
    with pytest.raises(TypeError):
        columns["batch_size"] = 64  # type: ignore[index]
    assert rows.spec_columns(spec)["batch_size"] == 32


def test_a_database_made_again_at_the_same_url_is_not_answered_from_the_old_one(tmp_path):
    url = f"sqlite:///{tmp_path / 'again.sqlite'}"
    Store(url).add(an_ok_result(32))
    Store(url).add(an_ok_result(32))
    before = Store(url).trials()  # ids 2 and 1, now read
    for file in tmp_path.glob("again.sqlite*"):
        file.unlink()
    Store(url).add(an_ok_result(64))  # id 1 again, another spec
    Store(url).add(an_ok_result(32))  # id 2 again, the same spec at another time
    after = Store(url).trials()
    assert [(t.id, t.spec.batch_size) for t in after] == [(2, 32), (1, 64)]
    assert after[0].created_at != before[0].created_at


def test_migration_from_an_empty_database_matches_the_tables(tmp_path):
    url = f"sqlite:///{tmp_path / 'empty.sqlite'}"
    Store(url)
    engine = create_engine(url)
    assert {"trials", "environments", "alembic_version"} <= set(inspect(engine).get_table_names())
    with engine.connect() as connection:
        context = MigrationContext.configure(connection)
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        assert (
            context.get_current_revision() == ScriptDirectory.from_config(config).get_current_head()
        )
        assert compare_metadata(context, Base.metadata) == []


def test_a_process_killed_mid_write_leaves_no_trial(db_url):
    Store(db_url)  # the schema exists; the child dies inside its first trial's transaction
    child = textwrap.dedent(
        f"""
        import os, signal, sys
        sys.path[:0] = {[str(p) for p in (Path(__file__).parent, Path(__file__).parent.parent)]!r}
        from sqlalchemy import event
        from sqlalchemy.orm import Session
        from advisor.store.store import Store
        from test_store import an_ok_result

        # SIGKILL once the rows are flushed to the database, before the commit.
        event.listen(Session, "after_flush", lambda *a: os.kill(os.getpid(), signal.SIGKILL))
        Store({db_url!r}).add(an_ok_result())
        """
    )
    killed = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    store = Store(db_url)
    assert store.trials() == []
    with create_engine(db_url).connect() as connection:
        assert connection.exec_driver_sql("select count(*) from environments").scalar() == 0
    assert store.add(an_ok_result()).id is not None  # and the database still takes writes
