"""The OOM fallback in a user's own loop (issue 29): a step that runs out of memory under
advisor's cap on the CPU is run again, whole, at a smaller micro batch with more accumulation;
every sample counts once; with two ranks on gloo, both fall back together."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import spec_of
from fake_backend import fake_result

from advisor.errors import ConfigError
from advisor.in_training.oom_fallback import OOMFallback, Split
from advisor.recommendation import recommend
from advisor.target import target_for

LOOP = Path(__file__).parent / "fallback_loop.py"
# The cap is on the address space, which glibc's malloc spends on its own: gloo's threads would
# each reserve a 64 MiB arena, and once a large block is freed malloc raises its threshold for
# mmap and puts the next ones (16 MiB) in its heap, whose holes the cap counts (the loop then
# fell back to a micro batch of 1 at step 6, where 4 fits). A fixed threshold and one arena.
ENV = {**os.environ, "MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": str(2**20)}


def steps_of(said: dict) -> list[tuple[int, int]]:
    return [(s["micro_batch"], s["accumulation"]) for s in said["splits"]]


def test_a_loop_that_runs_out_of_memory_falls_back_and_loses_no_sample(tmp_path):
    """Step 5's samples are 512 times longer: 32 a micro batch runs out of the cap, so does 16,
    and 4 (8 micro batches) fits, from then on. The 4 fits only because the failed tries'
    memory was given back: held (a retry inside the except block, whose traceback keeps the
    forward's tensors), every split down to 1 ran out."""
    out = tmp_path / "said.json"
    subprocess.run([sys.executable, str(LOOP), str(out)], env=ENV, check=True, timeout=300)
    said = json.loads(out.read_text())
    assert steps_of(said) == [(32, 1)] * 4 + [(4, 8)] * 4
    assert [(f["step"], f["was"]["micro_batch"], f["now"]["micro_batch"])
            for f in said["fell_back"]] == [(5, 32, 16), (5, 16, 4)]  # fmt: skip
    assert all("can't allocate memory" in f["message"] for f in said["fell_back"])
    # every sample of every step counted once: none lost with the failed tries, none twice
    assert said["counted"] == [list(range(32 * step, 32 * (step + 1))) for step in range(8)]
    assert said["weights"] == [[1.0]] * 4 + [[4 / 32] * 8] * 4  # the mean over the step


def test_two_ranks_fall_back_together(tmp_path):
    """Only rank 1's samples grow long: it runs out of memory, rank 0 does not, and both take
    the same smaller split before either steps (an all-reduce of the flag): no rank waits
    alone in the gradients' all-reduce, and both finish every step."""
    init = tmp_path / "init"
    loops = [
        subprocess.Popen(
            [sys.executable, str(LOOP), str(tmp_path / f"{rank}.json"), str(rank), "2", str(init)],
            env=ENV,
        )  # fmt: skip
        for rank in (0, 1)
    ]
    try:
        assert [loop.wait(timeout=300) for loop in loops] == [0, 0]
    finally:
        for loop in loops:
            loop.kill()
    first, second = (json.loads((tmp_path / f"{rank}.json").read_text()) for rank in (0, 1))
    assert steps_of(first) == steps_of(second) == [(32, 1)] * 4 + [(4, 8)] * 4
    assert [f["message"] for f in first["fell_back"]] == ["another rank ran out of memory"] * 2
    assert all("can't allocate memory" in f["message"] for f in second["fell_back"])
    for said in (first, second):
        assert said["counted"] == [list(range(32 * step, 32 * (step + 1))) for step in range(8)]


def test_the_splits_follow_the_ranking_then_halve():
    """The recommendation's split, then a runner-up that differs in micro batch only and is
    smaller (another precision, or another effective batch, is not a fallback the loop can
    take), then halvings to 1."""
    target = target_for(None, "40GiB", 0.05, spec_of("model=tiny_mlp").device)

    def measured(batch: int, accum: int, rate: float, precision: str = "default"):
        spec = spec_of("model=tiny_mlp", f"batch_size={batch}", f"grad_accum={accum}",
                       f"precision={precision}")  # fmt: skip
        result = fake_result(spec)
        return dataclasses.replace(
            result, throughput=dataclasses.replace(result.throughput, samples_per_s=rate)
        )

    rec = recommend(
        [measured(64, 1, 900), measured(32, 2, 800), measured(16, 4, 850, "bf16"),
         measured(16, 1, 750), measured(8, 8, 700)], target,
    )  # fmt: skip
    fallback = OOMFallback.from_recommendation(rec)
    assert [(s.micro_batch, s.accumulation) for s in fallback.splits] == [
        (64, 1), (32, 2), (8, 8), (4, 16), (2, 32), (1, 64)
    ]  # fmt: skip


def test_splits_and_steps_that_cannot_be_run_are_one_line():
    with pytest.raises(ConfigError, match=r"must keep a step's samples; they hold \[16, 32\]"):
        OOMFallback([Split(32, 1), Split(8, 2)])
    with pytest.raises(ConfigError, match="each of the fallback's splits needs a smaller micro"):
        OOMFallback([Split(8, 4), Split(16, 2)])
    fallback = OOMFallback([Split(4, 2)])
    with pytest.raises(ConfigError, match="takes 8 samples on each rank, not 5"):
        fallback.step(torch.zeros(5), lambda micro, weight: None, lambda: None, lambda: None)


def test_an_error_that_is_not_out_of_memory_is_the_loops_own():
    """Only running out of memory falls back: any other error is raised as it is, at once."""
    fallback = OOMFallback([Split(4, 1), Split(2, 2)])

    def broken(micro: torch.Tensor, weight: float) -> None:
        raise ValueError("a bug in the loss")

    with pytest.raises(ValueError, match="a bug in the loss"):
        fallback.step(torch.zeros(4), broken, lambda: None, lambda: None)
    assert fallback.split == Split(4, 1) and fallback.fell_back == []
