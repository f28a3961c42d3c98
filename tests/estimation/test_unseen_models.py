"""The fake step of issue 27's held-out models (experiments/2026-12-03-h200-unseen-models), held
to the bytes it counted when they were measured on the H200: deterministic, so a change to the
estimate (or to the libraries that build the models) shows here, not silently in the accuracy.
Where a library's version differs from the pinned one, the figures are held within 1% instead.
Pin anew, after checking the accuracy against the H200 again:
    PYTHONPATH=tests python tests/estimation/test_unseen_models.py
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest
from conftest import spec_of

from advisor.estimation.fake_step import fake_step

FOLDER = Path(__file__).parents[2] / "experiments" / "2026-12-03-h200-unseen-models"
PINNED = Path(__file__).with_name("unseen_models.json")
LIBRARIES = ("torch", "torchvision", "transformers", "timm", "diffusers")


def held_out_specs() -> list[tuple[str, list[str]]]:
    """The held-out set's specs, eager and compiled."""
    rows = []
    for line in (FOLDER / "specs.txt").read_text().splitlines():
        if line.startswith("heldout "):
            _, name, *settings = line.split()
            rows.append((name, settings))
    return rows


def counted(name: str, settings: list[str]) -> dict[str, int]:
    spec = spec_of(f"workload={FOLDER / 'heldout' / name}.py:workload", "device=cuda", *settings)
    step = fake_step(spec)
    figures = ("peak_allocated_bytes", "activations_bytes", "params_bytes")
    return {figure: getattr(step, figure) for figure in figures}


def versions() -> dict[str, str]:
    return {name: importlib.metadata.version(name) for name in LIBRARIES}


@pytest.mark.slow
@pytest.mark.parametrize("name,settings", held_out_specs(), ids=lambda v: str(v))
def test_the_fake_step_of_a_held_out_model_counts_what_it_counted(name, settings):
    pinned = json.loads(PINNED.read_text())
    key = " ".join([name, *settings])
    assert key in pinned["specs"], f"{key} is not pinned: pin anew (see this file's docstring)"
    now = counted(name, settings)
    if versions() == pinned["versions"]:
        assert now == pinned["specs"][key]
    else:
        for figure, bytes_then in pinned["specs"][key].items():
            assert now[figure] == pytest.approx(bytes_then, rel=0.01), figure


if __name__ == "__main__":
    specs = {" ".join([n, *s]): counted(n, s) for n, s in held_out_specs()}
    # written here, not printed: a model's code may print as it is built (nanoGPT's does)
    PINNED.write_text(json.dumps({"versions": versions(), "specs": specs}, indent=1) + "\n")
