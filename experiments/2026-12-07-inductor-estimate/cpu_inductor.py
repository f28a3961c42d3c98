"""What torch's inductor itself decides, on a CPU, for the small graphs that
tests/estimation/test_compiled_step.py holds the fake step to: each compiled function's
wrapper code, its allocations, kernels and reuses only. Internal API (torch._inductor.utils,
run_and_get_code; torch 2.11). The wrapper's memory planning is the one a GPU's code runs.

    python cpu_inductor.py > raw/cpu-inductor.txt
"""

import torch
from torch._inductor.utils import run_and_get_code

ROWS, COLUMNS = 64, 32


def twice_through_a_matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return ((x.sin() @ w).sin() @ w).cos()


def a_sum_between_the_matmuls(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    p = x.sin() @ w
    return p.sum(1), p @ w


def chain_times_its_sum(length: int):
    def chain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        z = x + y
        for _ in range(length):
            z = z.sin()
        return z * z.sum(0)

    chain.__name__ = f"chain_of_{length}_sines_times_its_sum"
    return chain


def wrapper_lines(function, *shapes: tuple[int, ...]) -> list[str]:
    torch._dynamo.reset()
    inputs = [torch.randn(*shape) for shape in shapes]
    _, (code, *_) = run_and_get_code(torch.compile(function), *inputs)
    call = code[code.index("def call(") : code.index("return (", code.index("def call("))]
    kept = ("empty_strided", "extern_kernels", "cpp_fused", "# reuse", "del buf")
    return [line.strip() for line in call.splitlines() if any(k in line for k in kept)]


if __name__ == "__main__":
    print(f"torch {torch.__version__}")
    cases = [
        (twice_through_a_matmul, [(ROWS, COLUMNS), (COLUMNS, COLUMNS)]),
        (a_sum_between_the_matmuls, [(ROWS, COLUMNS), (COLUMNS, COLUMNS)]),
        (chain_times_its_sum(10), [(ROWS, COLUMNS), (ROWS, COLUMNS)]),
        (chain_times_its_sum(40), [(ROWS, COLUMNS), (ROWS, COLUMNS)]),
    ]
    for function, shapes in cases:
        print(f"\n## {function.__name__}")
        print("\n".join(wrapper_lines(function, *shapes)))
