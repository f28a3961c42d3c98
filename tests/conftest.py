from __future__ import annotations

import pytest

from advisor.config import MeasureConfig, load, trial_spec
from advisor.spec import TrialSpec

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


@pytest.fixture
def db_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'results.sqlite'}"


@pytest.fixture
def study_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'optuna.sqlite'}"


@pytest.fixture(autouse=True)
def spool_dir(tmp_path, monkeypatch):
    """Trials the database refused wait in a spool: the test's own, not the user's."""
    folder = tmp_path / "spool"
    monkeypatch.setenv("ADVISOR_SPOOL_DIR", str(folder))
    return folder
