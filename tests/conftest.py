from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import make_url

from advisor.config import load, trial_spec
from advisor.spec import TrialSpec
from advisor.trial.timing import MeasureConfig

# Few timed steps: the tests check what is measured, not how fast.
FAST = MeasureConfig(warmup_steps=3, min_timed_steps=3, max_timed_steps=5, max_timed_s=2.0)
FAST_OVERRIDES = ["measure.min_timed_steps=3", "measure.max_timed_steps=5", "measure.max_timed_s=2"]


def spec_of(*overrides: str) -> TrialSpec:
    return trial_spec(load(["device=cpu", *overrides]))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# The store and sweep tests run against PostgreSQL as well as SQLite where this names a server
# (.ci/run starts one): postgresql://USER@HOST:PORT/postgres, a database each test may create.
POSTGRES_VARIABLE = "ADVISOR_TEST_POSTGRES_URL"
BOTH_BACKENDS = (
    "test_store", "test_search", "test_sweep_cli", "test_database_faults", "test_shared_sweep",
)  # fmt: skip


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    module = metafunc.module.__name__.rpartition(".")[2]
    if (
        "db_url" in metafunc.fixturenames
        and module in BOTH_BACKENDS
        and os.environ.get(POSTGRES_VARIABLE)
    ):
        metafunc.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)


@pytest.fixture
def db_url(request, tmp_path) -> Iterator[str]:
    """A new, empty results database: a SQLite file, or a PostgreSQL database of its own."""
    if getattr(request, "param", "sqlite") == "sqlite":
        yield f"sqlite:///{tmp_path / 'results.sqlite'}"
        return
    import psycopg  # (only where a server is named: the dev extra brings it)

    admin = os.environ[POSTGRES_VARIABLE]
    name = f"advisor_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    yield make_url(admin).set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def study_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'optuna.sqlite'}"


@pytest.fixture(autouse=True)
def spool_dir(tmp_path, monkeypatch):
    """Trials the database refused wait in a spool: the test's own, not the user's."""
    folder = tmp_path / "spool"
    monkeypatch.setenv("ADVISOR_SPOOL_DIR", str(folder))
    return folder
