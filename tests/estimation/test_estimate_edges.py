"""The fake step at the edges of what fake tensors can run (tests/workloads/estimate_edges.py):
each either estimated as CUDA would run it or said in one line."""

from __future__ import annotations

from pathlib import Path

import torch
from conftest import spec_of
from test_cli import advisor
from torch._subclasses.fake_tensor import FakeTensorMode

from advisor.estimation.fake_step import fake_step
from advisor.estimation.real_draws import CountsWithinMinlength, RealScalarDraws

EDGES = Path(__file__).parents[1] / "workloads" / "estimate_edges.py"


def test_a_model_whose_builder_reads_tensor_values_is_built_on_the_cpu_and_estimated():
    """torchvision's RegNet takes its widths from tensor values, which the meta device has not:
    its estimate ended in a traceback ("Cannot copy out of meta tensor")."""
    step = fake_step(spec_of(f"workload={EDGES}:widths_from_values", "device=cuda"))
    assert step.params_bytes == 512 * 4  # two weights and two biases, each one 512 B block


def test_experts_in_fp32_are_multiplied_as_cuda_does_where_the_meta_function_refuses():
    """transformers' experts run torch's grouped matmul in fp32 (autocast leaves the weights
    so): CUDA runs it, torch's meta function takes 16 bits only, and the estimate of a Mixtral
    ended in a traceback. Emulated: the output, and in backward a gradient of each input."""
    for precision in ("default", "bf16"):
        spec = spec_of(f"workload={EDGES}:experts", "device=cuda", "batch_size=48",
                       f"precision={precision}")  # fmt: skip
        allocated = [size for _, size in fake_step(spec).trace if size > 0]
        hidden_rows = 48 * 32 * 4  # (rows, hidden) in fp32: the first product, its relu
        assert allocated.count(hidden_rows) >= 2
        assert allocated.count(4 * 16 * 32 * 4) >= 2  # the two experts' weight gradients


def test_a_layer_drop_draw_is_compared_as_in_a_real_run():
    """LayerDrop compares one random number with its rate in Python, which a fake number cannot
    answer: the estimates of BART, OPT and Whisper under transformers 5.17 ended there."""
    step, plain = (
        fake_step(spec_of(f"workload={EDGES}:{name}", "device=cuda", "batch_size=64"))
        for name in ("layer_drop", "widths_from_values")
    )
    assert step.activations_bytes == plain.activations_bytes  # a rate of 0 drops no layer


def test_a_count_of_experts_has_its_minlength_as_in_a_real_run():
    """bincount's length depends on the values, which fake tensors have not: the estimate of
    a Mixtral under transformers 5.17 (its load-balancing loss counts the chosen experts) ended
    there. With a minlength above every value, as a router's experts are, that is the length."""
    step = fake_step(spec_of(f"workload={EDGES}:router_counts", "device=cuda", "batch_size=64"))
    assert step.activations_bytes > 0
    with FakeTensorMode(), CountsWithinMinlength():
        chosen = torch.randint(4, (128,))
        assert torch.bincount(chosen, minlength=8).shape == (8,)
        for weights, summed in ((torch.float32, torch.float32), (torch.bfloat16, torch.float64)):
            ones = torch.ones(128, dtype=weights)
            assert torch.bincount(chosen, ones, minlength=8).dtype == summed


def test_a_step_fake_tensors_cannot_run_is_said_in_one_line(db_url):
    result = advisor("estimate", f"workload={EDGES}:data_dependent", "gpu=h200", db_url=db_url)
    assert result.returncode == 1
    assert result.stderr.startswith("advisor: data_dependent: its step raised on fake tensors")
    assert "nonzero" in result.stderr and result.stderr.count("\n") == 1
    # and where, in the model's own code: the line that asked for the values' count
    asked = (
        EDGES.read_text().splitlines().index("        return super().forward(x[x.sum(dim=1) > 0])")
    )
    assert f"estimate_edges.py:{asked + 1};" in result.stderr


def test_draws_of_more_than_one_number_stay_fake():
    """Only torch.rand([]) is drawn for real; torch.rand(3) and (2, 3) are ordinary tensors."""
    with RealScalarDraws():
        shapes = [torch.rand(*size).shape for size in ((3,), (2, 3), ([],))]
    assert shapes == [torch.Size([3]), torch.Size([2, 3]), torch.Size([])]
