"""A compiled step on fake tensors: inductor's buffers (advisor/estimation/inductor_buffers.py)
and the step through dynamo, AOTAutograd and inductor's partitioner (compiled_step.py)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import spec_of
from torch._inductor import inductor_prims
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn import functional as F

from advisor.estimation.compiled_step import _padded_on_a_gpu
from advisor.estimation.cuda_workspaces import TRANSPOSE_WORKSPACE_EXTRA, CudaTemporaries
from advisor.estimation.fake_step import fake_step, step_between
from advisor.estimation.inductor_buffers import Happens, _estimated_memory, _events, count_buffers
from advisor.estimation.inductor_kernels import KernelGraph
from advisor.estimation.storage_bytes import StorageBytes

EDGES = Path(__file__).parents[1] / "workloads" / "estimate_edges.py"
ROWS, COLUMNS = 64, 32
BYTES = ROWS * COLUMNS * 4


def counted(
    function: Callable[..., Any],
    *shapes: tuple[int, ...],
    backward: bool = False,
    held: tuple[int, ...] = (),
    dtype: torch.dtype = torch.float32,
    cuda: bool = False,
) -> tuple[StorageBytes, dict[torch.fx.Node, Any]]:
    """The counter after the graph of `function` on fake inputs of the shapes was counted (its
    inputs counted first, as the step had made them), and the graph's values, kept alive; with
    cuda, the counter makes CUDA's kernels' temporaries (cuDNN's, as a GPU's step would)."""
    temporaries = CudaTemporaries(tf32=True, channels_last=False) if cuda else None
    counter = StorageBytes(1, temporaries)
    with FakeTensorMode():
        inputs = [torch.randn(*shape, dtype=dtype) for shape in shapes]
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
    (sin, _), (matmul, _), (sin_freed, freed), (matmul_freed, _), (cos, _) = counter.trace
    assert (sin_freed, freed) == (sin, -1)  # sin's buffer dies once the matmul has read it
    # cos is written in place of the product (its storage is the returned tensor's from there)
    assert matmul_freed == matmul and cos not in (sin, matmul)
    assert counter.peak == 2 * BYTES + COLUMNS * COLUMNS * 4 + BYTES  # x, w; sin and the product


def test_a_pointwise_kernel_writes_in_place_of_a_buffer_it_reads_for_the_last_time():
    """inductor's in-place updates: the sine of a product is written into the product, which
    nothing reads after it (eager would allocate a buffer for the sine)."""
    counter, _values = counted(lambda x, w: (x @ w).sin() @ w, (ROWS, COLUMNS), (COLUMNS, COLUMNS))
    (product, _), (result, _), (product_freed, _) = counter.trace  # the sine's is the product's
    assert allocations(counter) == [BYTES, BYTES] and product_freed == product != result


def test_a_freed_buffer_is_not_taken_where_inductors_estimate_would_rise_above_its_peak():
    """inductor's memory planning weighs a reuse against its own estimate, which counts the
    second sine beside the first product it is written in place of: the second matmul taking
    the first sine's buffer, freed once the first matmul read it, would make three buffers
    there against a peak of two. torch 2.11's inductor, on a CPU, allocates it anew
    (experiments/2026-12-07-inductor-estimate, cpu_inductor.py)."""
    counter, _values = counted(
        lambda x, w: ((x.sin() @ w).sin() @ w).cos(), (ROWS, COLUMNS), (COLUMNS, COLUMNS)
    )
    (sine, _), (product, _), (sine_freed, _), (second, _), *_ = counter.trace
    assert sine_freed == sine and second not in (sine, product)
    # the first sine's, the first product's (the second sine's), the second product's, and
    # the cosine written in place of it (counted as the returned tensor it is)
    assert allocations(counter) == [BYTES] * 4
    assert counter.peak == BYTES + COLUMNS * COLUMNS * 4 + 2 * BYTES  # x and w, two buffers


def test_a_returned_tensor_is_made_in_a_freed_buffer_which_lives_until_then():
    """A graph's output reuses a freed buffer as any of its buffers does: the sine's buffer,
    free once the first matmul read it, lives on past the row sums to become the second
    matmul's product, the graph's output (eager frees it at once)."""
    counter, _values = counted(
        lambda x, w: ((p := x.sin() @ w).sum(1), p @ w), (ROWS, COLUMNS), (COLUMNS, COLUMNS)
    )
    (sine, _), (product, _), (_sums, _), (sine_freed, size), (_output, _), *_ = counter.trace
    assert (sine_freed, size) == (sine, -1) and product != sine  # freed only after the sums


def test_a_reduction_read_by_one_pointwise_kernel_runs_in_it_and_its_input_lives_until_then():
    """inductor's epilogue fusion: each column sum, read only by the add at the end, runs in
    the add's kernel: neither sum is allocated, and the first product, which the first sum
    reads, lives until the add (summed at once, it would die there and the cosine take its
    buffer), as T5's encoder layers' inputs to their position bias's gradient did."""
    counter, _values = counted(
        lambda x, w: (x @ w).sum(0) * 2 + (x.cos() @ w).sum(0), (ROWS, COLUMNS), (COLUMNS, COLUMNS)
    )
    (product, _), (cosine, _), (second, _), (cosine_freed, _), (_, size), *frees = counter.trace
    assert allocations(counter) == [BYTES, BYTES, BYTES, COLUMNS * 4]  # no sum's own
    assert cosine_freed == cosine and size == COLUMNS * 4
    assert [number for number, _ in frees] == [product, second]  # after the add
    assert counter.peak == BYTES + COLUMNS * COLUMNS * 4 + 3 * BYTES  # x, w; three buffers


@pytest.mark.parametrize(
    ("function", "as_wide"),
    [
        (lambda x, w: ((s := (x @ w).sum(0)) * 2, s), 2),
        (lambda x, w: ((s := (x @ w).sum(0)) * 2, (x.cos() @ w)[0] + s), 3),
        (lambda x, w: (p := x @ w) - p.sum(0), 1),
    ],
    ids=["returned", "read-by-two-kernels", "read-by-a-wider-kernel"],
)
def test_a_reduction_returned_or_read_otherwise_keeps_its_own_buffer(function, as_wide):
    counter, _values = counted(function, (ROWS, COLUMNS), (COLUMNS, COLUMNS))
    # the column sum's own buffer, beside the outputs as wide as it (each a buffer)
    assert allocations(counter).count(COLUMNS * 4) == as_wide


def test_a_kernel_takes_in_reductions_over_one_loop_only():
    """Two column sums of products with different rows each read by the add: inductor fuses
    reductions into one kernel only where they loop alike, so the second keeps its buffer."""
    counter, _values = counted(
        lambda x, y, w: (x @ w).sum(0) * 2 + (y @ w).sum(0),
        (ROWS, COLUMNS), (2 * ROWS, COLUMNS), (COLUMNS, COLUMNS),
    )  # fmt: skip
    assert allocations(counter).count(COLUMNS * 4) == 2  # the second sum's, and the add's


def test_a_max_pools_gradient_is_computed_where_it_is_read():
    """inductor lowers a max pool's backward, and the indices it makes of the forward's
    offsets, into the kernels that read them: no buffer of either (a fallback would allocate
    both, the indices in int64)."""

    def gradient(grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        offsets = torch.zeros_like(grad, dtype=torch.int8)
        to_indices = inductor_prims._low_memory_max_pool_offsets_to_indices
        indices = to_indices(offsets, [3, 3], [32, 32], [2, 2], [1, 1], [1, 1])
        pool = torch.ops.aten.max_pool2d_with_indices_backward
        return pool(grad, x, [3, 3], [2, 2], [1, 1], [1, 1], False, indices).sin()

    counter, _values = counted(gradient, (4, 8, 16, 16), (4, 8, 32, 32))
    assert allocations(counter) == [4 * 8 * 32 * 32 * 4]  # the sine's, returned


def test_a_convolutions_output_reuses_no_buffer_and_its_workspace_is_counted_after_it():
    """A convolution (an extern kernel that allocates its own output) takes no freed buffer,
    and its cuDNN workspace comes after its output, as in eager: for a channels-first bf16
    3x3, the transposing workspace of input, weight and output (cuda_workspaces.py)."""
    batch, channels, side = 4, 64, 32
    image, kernel = batch * channels * side * side * 2, channels * channels * 9 * 2
    workspace = image + kernel + image + TRANSPOSE_WORKSPACE_EXTRA
    counter, _values = counted(
        lambda x, w: F.conv2d(F.conv2d(x.sin(), w, padding=1).cos(), w, padding=1).cos(),
        (batch, channels, side, side), (channels, channels, 3, 3),
        dtype=torch.bfloat16, cuda=True,
    )  # fmt: skip
    # the sine's; the first convolution's output and workspace (the inner cosine is written
    # in its place); the second's output, though the sine's buffer was free; its workspace;
    # the result
    assert allocations(counter) == [image, image, workspace, image, workspace, image]
    sine, first, workspace_1, second, workspace_2, _ = (n for n, size in counter.trace if size >= 0)
    frees = [number for number, size in counter.trace if size < 0]
    assert frees == [workspace_1, sine, workspace_2, first, second]


def test_pointwise_buffers_reading_one_buffer_are_made_by_one_kernel():
    """As gpt2's two padded copies of its logits' gradient, one for each matmul of backward:
    inductor fuses them horizontally, so both are live before either matmul runs (one after
    the other, the peak would be a square less)."""
    square = COLUMNS * COLUMNS * 4
    counter, _values = counted(
        lambda x, w, v: ((x * 2) @ w).sum() + ((x.t() * 3) @ v).sum(),
        (COLUMNS, COLUMNS), (COLUMNS, COLUMNS), (COLUMNS, COLUMNS),
    )  # fmt: skip
    (doubled, first), (tripled, second), *_ = counter.trace
    assert doubled != tripled and first == second == square
    assert 6 * square <= counter.peak < 7 * square  # x, w, v; both copies; a product


def test_a_wide_16_bit_matmul_is_padded_and_a_narrow_or_fp32_one_is_not():
    with FakeTensorMode():
        hidden, weight = torch.empty(8192, 768), torch.empty(768, 50257)
        small, projection = torch.empty(8, 50257), torch.empty(50257, 768)

        def padded(a, b, dtype):
            return _padded_on_a_gpu(None, a.to(dtype), b.to(dtype), torch.ops.aten.mm)

        assert padded(hidden, weight, torch.bfloat16)  # gpt2's logits, 50257 wide
        assert not padded(hidden, weight[:, :50256], torch.bfloat16)  # aligned
        assert not padded(hidden, weight, torch.float32)  # the H200 timed it unpadded
        assert not padded(small, projection, torch.bfloat16)  # memory bound


def test_a_transposed_operand_is_padded_only_where_the_matmul_is_wider_than_512():
    """A weight gradient reads the logits' gradient transposed: padding it is a transposing
    copy, which lost to the unpadded matmul at Whisper's width of 512 and won at gpt2's 768."""
    with FakeTensorMode():
        gradient = torch.empty(4096, 51865, dtype=torch.bfloat16)

        def padded(width: int) -> bool:
            hidden = torch.empty(4096, width, dtype=torch.bfloat16)
            return _padded_on_a_gpu(None, gradient.t(), hidden, torch.ops.aten.mm)

        assert not padded(512)
        assert padded(768)
        # the input's gradient reads the logits' gradient untransposed: no transposing copy,
        # so padded though the width is 512
        weight = torch.empty(51865, 512, dtype=torch.bfloat16)
        assert _padded_on_a_gpu(None, gradient, weight, torch.ops.aten.mm)
        # the forward's logits read the weight transposed (the second operand), across 4096
        # tokens: padded; across 512 tokens, not
        tokens = torch.empty(4096, 512, dtype=torch.bfloat16)
        assert _padded_on_a_gpu(None, tokens, weight.t(), torch.ops.aten.mm)
        assert not _padded_on_a_gpu(None, tokens[:512], weight.t(), torch.ops.aten.mm)


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_a_compiled_step_pads_a_wide_head_for_cuda_only(device):
    """inductor's padding reaches the fake step's partitioner for a CUDA spec (a 50257-wide
    head in bf16: a copy of its gradient padded to 50264 in backward), not for the CPU's."""
    spec = spec_of(f"workload={EDGES}:wide_head", f"device={device}", "batch_size=512",
                   "precision=bf16", "compile=true")  # fmt: skip
    sizes = {size for _, size in fake_step(spec).trace}
    assert (512 * 50264 * 2 in sizes) is (device == "cuda")
    assert 512 * 50257 * 2 in sizes  # the gradient itself, either way


def test_a_fused_node_reading_more_than_eight_buffers_is_computed_into_one():
    def total(*xs: torch.Tensor) -> torch.Tensor:
        return sum(xs[1:], xs[0]).sum()

    counter, _values = counted(total, *[(ROWS, COLUMNS)] * 10)
    # the running sum, once (eager: nine), then the reduction's scalar
    assert allocations(counter) == [BYTES, 4]


@pytest.mark.parametrize(("length", "as_wide"), [(10, 1), (40, 2)])
def test_a_pointwise_chain_of_over_30_operations_reading_two_buffers_is_computed_into_one(
    length: int, as_wide: int
) -> None:
    """inductor's lowering computes a pointwise chain into a buffer once its kernel would
    compute over 30 operations and read more than one buffer, whoever reads it (ir.py,
    has_exceeded_max_reads): the DDPM UNet's group norms' input gradients, which their sums and
    the pointwise kernel after the sums both read. A short chain is computed in both. torch
    2.11's inductor, on a CPU, does both (experiments/2026-12-07-inductor-estimate,
    cpu_inductor.py)."""

    def chain_times_its_sum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        z = x + y
        for _ in range(length):
            z = z.sin()
        return z * z.sum(0)

    counter, _values = counted(chain_times_its_sum, (ROWS, COLUMNS), (ROWS, COLUMNS))
    # the output, and the chain's own buffer where it is computed once
    assert allocations(counter).count(BYTES) == as_wide
    assert allocations(counter).count(COLUMNS * 4) == 1  # the sum's


def test_inductors_estimate_counts_a_buffer_written_in_place_apart_from_the_one_it_takes():
    """inductor weighs each reuse against its own estimate of the graph's peak, made before the
    planning that writes a buffer in place of another: there the sine of a product counts
    beside the product, at the kernel that writes it."""
    with FakeTensorMode():
        x, w = torch.randn(ROWS, COLUMNS), torch.randn(COLUMNS, COLUMNS)
        gm = make_fx(lambda x, w: (x @ w).sin() @ w)(x, w)
        interpreter = torch.fx.Interpreter(gm, garbage_collect_values=False)
        interpreter.run(x, w)
        graph = KernelGraph(gm, interpreter.env)
        events = _events(graph, backward=False, held=set())
    kinds = [e.kind for e in events if e.kind is not Happens.WORKSPACES]
    assert kinds[:2] == [Happens.ALLOCATED, Happens.WRITTEN_IN_PLACE]
    # before the first kernel; the product; the sine beside it; the sine and the output
    assert _estimated_memory(graph, events) == [0, BYTES, 2 * BYTES, 2 * BYTES]


def test_a_node_computed_once_is_fused_into_the_one_kernel_as_wide_that_reads_it():
    """inductor computes once a node that several read and that reads over 4 buffers (a batch
    norm's: input, mean, inverse deviation, weight, bias), then its scheduler fuses it into the
    one kernel as wide that reads it (SiLU's), and drops its buffer: compiled EfficientNet-B0's
    forward made no fp32 buffer of its batch norms on the H200. Read by a reduction as well,
    it keeps its buffer, as the H200's backward kept a batch norm's recomputed output."""

    def norm(x: torch.Tensor, *stats: torch.Tensor) -> torch.Tensor:
        mean, inverse, weight, bias = stats
        return (x - mean) * inverse * weight + bias

    def silu_of_norm(*args: torch.Tensor) -> torch.Tensor:
        return (y := norm(*args)) * torch.sigmoid(y)

    def silu_and_sum_of_norm(*args: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (y := norm(*args)) * torch.sigmoid(y), y.sum(0)

    def silu_of_transposed_norm(*args: torch.Tensor) -> torch.Tensor:
        return (y := norm(*args)) * torch.sigmoid(y.t()).t()

    def silu_of_norm_twice(*args: torch.Tensor) -> torch.Tensor:
        return (y := norm(*args)) * torch.sigmoid(y).expand(2, ROWS, COLUMNS)

    shapes = [(ROWS, COLUMNS)] + [(COLUMNS,)] * 4
    counter, _values = counted(silu_of_norm, *shapes)
    assert allocations(counter) == [BYTES]  # the output alone
    counter, _values = counted(silu_and_sum_of_norm, *shapes)
    assert allocations(counter) == [BYTES, BYTES, COLUMNS * 4]  # the norm's, the output, the sum
    # read otherwise than it was written (transposed), or by a wider kernel: the norm's is kept
    counter, _values = counted(silu_of_transposed_norm, *shapes)
    assert allocations(counter) == [BYTES, BYTES]
    counter, _values = counted(silu_of_norm_twice, *shapes)
    assert allocations(counter) == [BYTES, 2 * BYTES]


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


def test_the_precisions_emulation_leaves_a_count_over_a_mask_in_the_graph():
    """torch 2.11's dynamo cannot trace bool() of a tuple: the emulation's look at cumsum's
    arguments broke pythia-160m's compiled graph in three where the H100's real compile made one
    (experiments/2026-12-06-compiled-partitions). torch 2.14's dynamo traces it: this guards
    the GPU machine's torch 2.11 (it failed there before the fix), not this machine's."""
    step = fake_step(
        spec_of(f"workload={EDGES}:counted_mask", "device=cuda", "batch_size=64",
                "precision=bf16", "compile=true")
    )  # fmt: skip
    assert step.compiled_graphs == 1


class _LossMadeInTheForward(torch.nn.Module):
    """A head whose forward builds its loss module, as Whisper's does."""

    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Linear(32, 64)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.CrossEntropyLoss()(self.head(x), y)


def test_a_loss_module_built_in_the_compiled_forward_runs_its_nll_loss_as_autocast_does():
    """dynamo makes such a loss a graph node of its own, past the emulation's mode: its
    nll_loss ran in bf16, where CUDA's autocast runs it in fp32 (Whisper's backward graph then
    was not the H100's)."""
    from advisor.estimation.compiled_step import compiled
    from advisor.estimation.cuda_emulation import step_precision

    spec = spec_of("model=tiny_mlp", "device=cuda", "precision=bf16", "compile=true")
    counter = StorageBytes(512)
    with FakeTensorMode(allow_non_fake_inputs=True), counter:
        model = _LossMadeInTheForward()
        x, y = torch.randn(8, 32), torch.randint(64, (8,))
        with compiled(model, counter, gpu=True, cuda_autocast=True), step_precision(spec, set()):
            assert model(x, y).dtype == torch.float32


FIRST_AND_AGAIN = """
import sys
from advisor.config import load, trial_spec
from advisor.estimation.fake_step import fake_step
spec = trial_spec(load(["device=cuda", f"workload={sys.argv[1]}:layer_drop", "batch_size=64",
                        "compile=true"]))
print(*(fake_step.__wrapped__(spec).activations_bytes for _ in range(2)))
"""


def test_a_graph_broken_step_counts_the_same_in_a_fresh_process_and_again():
    """Python's cycle collector, run mid-step when the process's earlier objects passed its
    threshold, made the first step count 4608 B less (fake_step.py: _no_cycle_collection)."""
    ran = subprocess.run([sys.executable, "-c", FIRST_AND_AGAIN, str(EDGES)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    first, again = ran.stdout.split()[-2:]
    assert first == again


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_checkpointed_layers_compile_into_one_graph(precision):
    """As in a real run: dynamo traces torch's checkpoint as one region and backward recomputes
    it from the graph; the precision's emulation must not break the graph at each block."""
    step = fake_step(
        spec_of(f"workload={EDGES}:checkpointed_layers", "device=cuda", "batch_size=64",
                f"precision={precision}", "checkpointing=blocks", "compile=true")
    )  # fmt: skip
    assert step.compiled_graphs == 1
