from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
from conftest import spec_of

from advisor.errors import ConfigError
from advisor.spec import Precision, TrialSpec


def test_equal_settings_hash_equal_and_round_trip():
    a = spec_of("model=gpt2", "batch_size=8", "precision=bf16")
    b = spec_of("precision=bf16", "batch_size=8", "model=gpt2")
    assert a == b and a.hash == b.hash
    assert TrialSpec.from_json(a.to_json()) == a
    assert TrialSpec.from_json(a.to_json()).hash == a.hash


@pytest.mark.parametrize(
    "override",
    [
        "batch_size=9",
        "grad_accum=2",
        "precision=fp16",
        "checkpointing=blocks",
        "optimizer=adamw_fused",
        "compile=true",
        "expandable_segments=true",
        "memory_cap=2000000",
        "model.seq_len=512",
        "+model.config.n_layer=6",
    ],
)
def test_every_knob_changes_the_hash(override):
    base = spec_of("model=gpt2", "batch_size=8", "precision=bf16")
    changed = spec_of("model=gpt2", "batch_size=8", "precision=bf16", override)
    assert changed.hash != base.hash


def test_hash_is_the_same_in_another_process():
    spec = spec_of("model=resnet50", "batch_size=64", "precision=bf16")
    code = (
        "from advisor.spec import TrialSpec; import sys; "
        "print(TrialSpec.from_json(sys.stdin.read()).hash)"
    )
    other = subprocess.run(
        [sys.executable, "-c", code], input=spec.to_json(), capture_output=True, text=True
    )
    assert other.stdout.strip() == spec.hash


def test_spec_is_frozen_and_hashable():
    spec = spec_of()
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.batch_size = 2  # type: ignore[misc]
    assert len({spec, spec_of()}) == 1


@pytest.mark.parametrize(
    "field,value", [("batch_size", 0), ("grad_accum", -1), ("batch_size", 1.5)]
)
def test_bad_sizes_are_refused(field, value):
    with pytest.raises(ConfigError, match=field):
        dataclasses.replace(spec_of(), **{field: value})


def test_effective_batch():
    spec = spec_of("batch_size=16", "grad_accum=4", "precision=bf16")
    assert spec.effective_batch_size == 64 and spec.precision is Precision.bf16
