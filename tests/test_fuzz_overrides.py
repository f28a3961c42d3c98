"""Property-based fuzzing of the command line's overrides (hypothesis): whatever a user types
after `advisor run` or `advisor sweep`, it is either a setting advisor can run or a ConfigError
or WorkloadError of one line (exit status 2, nothing stored); never another exception, which
the command would show as a traceback. Checked through verbs.plan and trial_spec, which is what
both verbs do before they open a database or start a worker."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, find, given, settings
from hypothesis import strategies as st

from advisor import verbs
from advisor.config import trial_spec
from advisor.errors import ConfigError, WorkloadError

KEYS = [
    "model", "workload", "batch_size", "grad_accum", "checkpointing", "precision", "optimizer",
    "channels_last", "compile", "expandable_segments", "memory_cap", "timeout_s", "device",
    "db_url", "plot", "trials", "minutes", "patience", "workers", "margin",
    "effective_batch_size", "study_db_url", "gpu", "gpu.memory", "gpu.name",
    "space.batch_sizes", "space.grad_accum", "space.precision", "space.optimizers",
    "space.compile", "measure.warmup_steps", "measure.max_timed_steps", "measure.max_timed_s",
    "measure.target_precision", "model.block", "model.module._target_", "colour", "+extra",
]  # fmt: skip
NUMBERS = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["0", "-1", "1e20", "2**70", "1GiB", "lots", "nan", "inf"]),
)
WORDS = st.one_of(
    st.sampled_from(
        [
            "auto",
            "cpu",
            "cuda",
            "bf16",
            "fp8",
            "none",
            "blocks",
            "true",
            "null",
            "tiny_mlp",
            "nonesuch",
            "h200",
            "sqlite:///:memory:",
            "garbage",
            "os.system",
            "builtins.open",
            "x.py:f",
            "[]",
            "[0,-1]",
            "[bf16,fp9]",
            "{a: 1}",
            "'quoted'",
            '"',
            "${oops}",
            "a=b",
            "",
        ]
    ),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
)
LISTS = st.lists(st.one_of(NUMBERS, WORDS), max_size=4).map(
    lambda items: "[" + ",".join(str(i) for i in items) + "]"
)
OVERRIDE = st.one_of(
    st.tuples(st.sampled_from(KEYS), st.one_of(NUMBERS, WORDS, LISTS)).map(
        lambda kv: f"{kv[0]}={kv[1]}"
    ),
    st.sampled_from(KEYS),  # a key and no value
    st.sampled_from(KEYS).map(lambda key: f"~{key}"),
)
# A tiny model on the CPU underneath, so what is valid is quick to describe.
BASE = ["model=tiny_mlp", "device=cpu", "gpu.memory=64MiB", "space.compile=[false]"]


def settled(overrides: list[str]) -> str:
    """'ok', or the error's kind; fails on anything a user would see as a traceback."""
    try:
        trial_spec(verbs.configure(overrides=[*BASE, *overrides]))
        verbs.plan(overrides=[*BASE, *overrides])
    except (ConfigError, WorkloadError) as error:
        message = str(error)
        assert message and "\n" not in message and "Traceback" not in message, message
        return type(error).__name__
    return "ok"


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OVERRIDE, min_size=1, max_size=4))
@example(["model=\n"])  # (found by a CI run: the unknown value was said with its newline)
def test_any_overrides_are_a_setting_or_one_line(overrides):
    settled(overrides)


@pytest.mark.parametrize("outcome", ["ok", "ConfigError", "WorkloadError"])
def test_the_fuzzing_reaches_every_outcome(outcome):
    """The strategies make settings advisor can run as well as each kind of error (a fuzzer
    that only ever made errors would prove little): hypothesis finds one of each."""
    lists = st.lists(OVERRIDE, min_size=1, max_size=4)
    # a fixed search: a fresh clone's random one found no WorkloadError in 2000 examples
    found = find(
        lists,
        lambda overrides: settled(overrides) == outcome,
        settings=settings(max_examples=2000, database=None, deadline=None, derandomize=True),
    )
    assert settled(found) == outcome
