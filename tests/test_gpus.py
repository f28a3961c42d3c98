"""Which GPU NVML is asked about: CUDA's index through CUDA_VISIBLE_DEVICES."""

import pytest

from advisor import gpus
from advisor.target import Target


@pytest.mark.parametrize(
    ("cuda_index", "visible", "expected"),
    [
        (0, None, 0),  # no variable: the numbering is the same
        (1, None, 1),
        (0, "1", 1),  # a lane of a multi-GPU host: cuda:0 is the host's second GPU
        (1, "3,2", 2),
        (0, " 2 , 0", 2),
        (0, "GPU-8f6e1c2a-0000-1111-2222-333344445555", "GPU-8f6e1c2a-0000-1111-2222-333344445555"),
        (1, "0", None),  # fewer GPUs visible than asked for
        (0, "", None),  # none visible
        (0, "-1", None),
        (1, "0,-1,2", None),  # CUDA stops at the first invalid entry
        (0, "MIG-1c2a3b4d-0000-1111-2222-333344445555", None),  # a slice: no memory of its own here
    ],
)
def test_nvml_device_follows_cuda_visible_devices(cuda_index, visible, expected):
    assert gpus.nvml_device(cuda_index, visible) == expected


def test_no_nvml_means_no_local_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpus.local_gpu() is None
    assert gpus.device_used_bytes() is None


def test_a_size_is_said_in_the_unit_that_shows_it():
    # (a sweep for a 12 MiB budget skipped a spec "estimated at 0.0 GiB without running")
    sizes = [gpus.size_text(n) for n in (14.2 * 2**20, 3 * 2**30, 1536, 12)]
    assert sizes == ["14.2 MiB", "3.00 GiB", "1.5 KiB", "12 B"]


def test_a_budget_keeps_its_name_and_is_shown_by_its_size():
    """A budget's name is in its sweep's key, as it was (64MB: "61.0352MiB"), so that its sweep
    resumes; what the sweep's lines, the estimate and the plot show is its size."""
    budget = Target.budget(64 * 10**6, 0.05)
    assert (budget.name, budget.label, budget.is_budget) == ("61.0352MiB", "61.0 MiB", True)
    gpu = Target("h100_80gb", 80 * 10**9, 0.05)
    assert (gpu.label, gpu.is_budget) == ("h100_80gb", False)
