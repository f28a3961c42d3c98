"""A compiled step on fake tensors: inductor's buffers (advisor/estimation/inductor_buffers.py)
and the step through dynamo, AOTAutograd and inductor's partitioner (compiled_step.py)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import spec_of
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from advisor.estimation.fake_step import fake_step, step_between
from advisor.estimation.inductor_buffers import count_buffers
from advisor.estimation.storage_bytes import StorageBytes

EDGES = Path(__file__).parents[1] / "workloads" / "estimate_edges.py"
ROWS, COLUMNS = 64, 32
BYTES = ROWS * COLUMNS * 4


def counted(function, *shapes: tuple[int, ...], backward: bool = False, held=()):
    """The counter after the graph of `function` on fake inputs of the shapes was counted (its
    inputs counted first, as the step had made them), and the graph's values, kept alive."""
    counter = StorageBytes(1)
    with FakeTensorMode():
        inputs = [torch.randn(*shape) for shape in shapes]
        gm = make_fx(function)(*inputs)
        for tensor in inputs:
            counter.count(tensor)
        counter.trace, counter.peak = [], counter.live
        with counter.paused():
            interpreter = torch.fx.Interpreter(gm, garbage_collect_values=False)
            interpreter.run(*inputs)
        held_ids = {id(inputs[i].untyped_storage()) for i in held}
        count_buffers(gm, interpreter.env, counter, backward=backward, held=held_ids)
    return counter, interpreter.env


def allocations(counter: StorageBytes) -> list[int]:
    return [size for _, size in counter.trace if size >= 0]


def test_a_pointwise_chain_is_one_kernel_whose_output_alone_is_allocated():
    counter, _values = counted(lambda x: ((x * 2 + 1).sin() * 3).exp(), (ROWS, COLUMNS))
    assert allocations(counter) == [BYTES]  # eager would allocate four


def test_what_an_extern_kernel_reads_is_a_buffer_freed_after_it():
    counter, _values = counted(
        lambda x, w: (x.sin() @ w).cos(), (ROWS, COLUMNS), (COLUMNS, COLUMNS)
    )
    (sin, _), (matmul, _), (sin_freed, freed), (cos, _), (matmul_freed, _) = counter.trace
    assert (sin_freed, freed) == (sin, -1)  # sin's buffer dies once the matmul has read it
    assert matmul_freed == matmul and cos not in (sin, matmul)
    assert counter.peak == 2 * BYTES + COLUMNS * COLUMNS * 4 + BYTES  # x, w; sin and the product


def test_a_fused_node_reading_more_than_eight_buffers_is_computed_into_one():
    def total(*xs: torch.Tensor) -> torch.Tensor:
        return sum(xs[1:], xs[0]).sum()

    counter, _values = counted(total, *[(ROWS, COLUMNS)] * 10)
    # the running sum, once (eager: nine), then the reduction's scalar
    assert allocations(counter) == [BYTES, 4]


def test_a_backward_graph_frees_its_inputs_after_their_last_reader_unless_held():
    for held, alive in (((), 0), ((0,), BYTES)):
        counter, _values = counted(  # the values kept, as ctx keeps the saved tensors
            lambda saved: saved.sum(), (ROWS, COLUMNS), backward=True, held=held
        )
        assert counter.live == alive + 4  # the sum's scalar, and the input if held


def test_compiled_the_backward_recomputes_what_eager_keeps():
    """Eager keeps the MLP's hidden product, its sigmoid and their product for backward;
    inductor's partitioner keeps one hidden tensor less, recomputing the rest in backward."""
    eager, compiled = (
        fake_step(
            spec_of(f"workload={EDGES}:mlp", "device=cuda", "batch_size=512", f"compile={flag}")
        )  # fmt: skip
        for flag in ("false", "true")
    )
    hidden = 512 * 256 * 4
    assert eager.activations_bytes - compiled.activations_bytes == hidden
    assert compiled.params_bytes == eager.params_bytes
    assert compiled.top_modules == []  # the modules' code ran only in the tracing


def test_a_compiled_step_at_another_batch_is_drawn_from_two():
    spec = spec_of(f"workload={EDGES}:mlp", "device=cuda", "batch_size=64", "compile=true")
    first, second, third = (
        fake_step(dataclasses.replace(spec, batch_size=b)) for b in (64, 128, 96)
    )
    drawn = step_between(first, second, 64, 96)
    assert drawn is not None and drawn.trace == third.trace


def test_a_layer_drop_draw_breaks_the_compiled_graph_and_is_compared_as_in_a_real_run():
    """The draw is compared in Python: dynamo gives up on the frame there, as on a GPU, and
    compiles each layer's frame on its own."""
    step, plain = (
        fake_step(
            spec_of(f"workload={EDGES}:{name}", "device=cuda", "batch_size=64", "compile=true")
        )  # fmt: skip
        for name in ("layer_drop", "widths_from_values")
    )
    assert step.compiled_graphs == 2 and plain.compiled_graphs == 1
    assert step.params_bytes == plain.params_bytes


FIRST_AND_AGAIN = """
import sys
from advisor.config import load, trial_spec
from advisor.estimation.fake_step import _run_fake_step
spec = trial_spec(load(["device=cuda", f"workload={sys.argv[1]}:layer_drop", "batch_size=64",
                        "compile=true"]))
print(*(_run_fake_step(spec).activations_bytes for _ in range(2)))
"""


GRAPH_BROKEN_AGAIN = (
    "known: in a fresh process, a model whose graph breaks counts 4608 B more from its second "
    "compiled step on; not found yet"
)


@pytest.mark.xfail(strict=True, reason=GRAPH_BROKEN_AGAIN)
def test_a_graph_broken_step_counts_the_same_in_a_fresh_process_and_again():
    ran = subprocess.run([sys.executable, "-c", FIRST_AND_AGAIN, str(EDGES)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    first, again = ran.stdout.split()[-2:]
    assert first == again
