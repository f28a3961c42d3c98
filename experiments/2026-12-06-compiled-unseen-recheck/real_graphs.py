"""What a real torch.compile (inductor, on the GPU) keeps for backward in a compiled T5-small
step (transformers' T5, the held-out workload), beside what the fake step's compile keeps: each
graph inductor compiles, its attention operators, and the forward graph's outputs (the user's
and those saved for backward) with their sizes. Not advisor's API: the question is inductor's.

    python real_graphs.py real OUT.json     # on a GPU: torch.compile as advisor's trial does
    python real_graphs.py fake OUT.json     # advisor's fake step, its partitioner's graphs
"""

import json
import os
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
WORKLOAD = HERE.parent / "2026-12-03-h200-unseen-models/heldout/t5_small.py"
BATCH = 8
READABLE = Path(os.environ["READABLE"]) if os.environ.get("READABLE") else None


def described(gm: torch.fx.GraphModule, backward: bool) -> dict:
    """The graph's attention operators, and (a forward's) outputs by storage, largest first;
    its code, where READABLE names a folder (one file a graph)."""
    if READABLE:
        name = f"{len(list(READABLE.glob('*.txt'))):02d}-{'backward' if backward else 'forward'}"
        (READABLE / f"{name}.txt").write_text(gm.print_readable(print_output=False))
    ops: dict[str, int] = {}
    for node in gm.graph.nodes:
        name = str(node.target)
        if node.op == "call_function" and any(w in name for w in ("scaled_dot", "softmax", "bmm")):
            ops[name] = ops.get(name, 0) + 1
    outputs, seen = [], set()
    if not backward:
        for value in next(n for n in gm.graph.nodes if n.op == "output").args[0]:
            t = getattr(value, "meta", {}).get("val")
            if not isinstance(t, torch.Tensor):
                continue
            key = id(t.untyped_storage())
            if key in seen:
                continue
            seen.add(key)
            outputs.append({"node": value.name, "op": str(value.target), "dtype": str(t.dtype),
                            "shape": list(t.shape), "bytes": t.untyped_storage().nbytes()})  # fmt: skip
    outputs.sort(key=lambda o: -o["bytes"])
    return {"backward": backward, "ops": ops, "nodes": len(gm.graph.nodes),
            "saved_bytes": sum(o["bytes"] for o in outputs), "outputs": outputs}  # fmt: skip


def real(out: str) -> None:
    import importlib.util

    import torch._inductor.compile_fx as compile_fx
    from torch._dynamo.utils import counters

    graphs = []
    partition = compile_fx.min_cut_rematerialization_partition  # (partition_fn's, by name)

    def recorded(gm, joint_inputs, **kwargs):
        forward, backward = partition(gm, joint_inputs, **kwargs)
        graphs.extend([described(forward, False), described(backward, True)])
        return forward, backward

    compile_fx.min_cut_rematerialization_partition = recorded
    spec = importlib.util.spec_from_file_location("t5_small", WORKLOAD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.build().cuda().train()
    step = torch.compile(model)
    batch = module.batch(BATCH, torch.device("cuda"))
    peaks = []
    for _ in range(3):
        torch.cuda.reset_peak_memory_stats()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step(**batch).loss
        after_forward = torch.cuda.memory_allocated()
        loss.backward()
        peaks.append({"after_forward": after_forward, "peak": torch.cuda.max_memory_allocated()})
        model.zero_grad(set_to_none=True)
    Path(out).write_text(json.dumps({"graphs": graphs, "peaks": peaks,
                                     "counters": dict(counters["inductor"])}, indent=1))  # fmt: skip


def fake(out: str) -> None:
    from torch._dynamo.utils import counters

    from advisor.config import trial_spec
    from advisor.estimation import compiled_step, fake_step
    from advisor.verbs import configure

    graphs = []
    partitioned = compiled_step._partitioned

    def recorded(gm, joint_inputs, **kwargs):
        forward, backward = partitioned(gm, joint_inputs, **kwargs)
        graphs.extend([described(forward, False), described(backward, True)])
        return forward, backward

    compiled_step._partitioned = recorded
    settings = ["device=cuda", "precision=bf16", f"batch_size={BATCH}", "compile=true"]
    spec = trial_spec(configure(f"{WORKLOAD}:workload", settings))
    step = fake_step.fake_step(spec)
    Path(out).write_text(json.dumps({"graphs": graphs, "peak": step.peak_allocated_bytes,
                                     "activations": step.activations_bytes,
                                     "counters": dict(counters["inductor"])}, indent=1))  # fmt: skip


if __name__ == "__main__":
    {"real": real, "fake": fake}[sys.argv[1]](sys.argv[2])
