"""A results database written before the code was moved into concept folders (2026-12-03, by
`advisor run model=tiny_mlp device=cpu` and `model=tiny_cnn batch_size=8 precision=bf16` on
torch 2.14.1): the bundled models' dotted paths and code are part of each spec's hash, so its
trials must still be the same experiments as the settings built today."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from conftest import spec_of

import advisor
from advisor.store.store import Store

WRITTEN_BEFORE = Path(__file__).parent / "stored" / "bundled-models-2026-12-03.sqlite"
TORCH_THEN = "2.14.1"  # the version is part of a spec's workload, and so of its hash


@pytest.fixture
def db_url(tmp_path) -> str:
    copy = tmp_path / "before.sqlite"  # (opening it migrates it: never the committed file)
    shutil.copy(WRITTEN_BEFORE, copy)
    return f"sqlite:///{copy}"


needs_the_same_torch = pytest.mark.skipif(
    torch.__version__.split("+")[0] != TORCH_THEN,
    reason=f"its specs name torch {TORCH_THEN}",
)


@needs_the_same_torch
@pytest.mark.parametrize(
    "overrides",
    [("model=tiny_mlp",), ("model=tiny_cnn", "batch_size=8", "precision=bf16")],
)
def test_a_stored_trial_is_the_setting_built_today(db_url, overrides):
    spec = spec_of(*overrides)
    stored = Store(db_url).trials(model=spec.model.name)
    assert [r.spec.hash for r in stored] == [spec.hash]
    assert stored[0].spec.model.code == spec.model.code


@needs_the_same_torch
def test_recommend_answers_from_the_trials_stored_before(db_url):
    answer = advisor.recommend("tiny_mlp", device="cpu", gpu={"memory": "1GiB"}, db_url=db_url)
    assert answer.best is not None
    assert answer.best.spec.hash == spec_of("model=tiny_mlp").hash
