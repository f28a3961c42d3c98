"""What a real torch.compile (inductor, on the GPU) keeps for backward in a compiled spec's step,
beside what the fake step's compile keeps: each graph inductor's partitioner makes, and each
forward graph's outputs by storage (the user's and those saved for backward) with their sizes;
for the real step, the allocator's figures at each phase of the trial's own step. Internal API
(the trial's build and step, the fake step's partitioner): the question is inductor's.

    python partitions.py real NAME OUT.json    # on a GPU, as advisor's trial builds and steps it
    python partitions.py fake NAME OUT.json    # advisor's fake step, its partitioner's graphs
    python partitions.py eager NAME OUT.json   # on a GPU, not compiled: the attention kernels

READABLE=dir keeps each graph's code there; SNAPSHOT=dir (real) the allocator's history of the
third step as a memory snapshot (pytorch.org/memory_viz).

NAME is one of SPECS: the compiled held-out specs of ../2026-12-03-h200-compile-unseen (their
settings but compile, which the command gives).
"""

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

HERE = Path(__file__).resolve().parent
MODELS = HERE.parent / "2026-12-03-h200-unseen-models"
READABLE = Path(os.environ["READABLE"]) if os.environ.get("READABLE") else None
SNAPSHOT = Path(os.environ["SNAPSHOT"]) if os.environ.get("SNAPSHOT") else None
SPECS = {
    "bart_base": ("second/bart_base.py", "precision=bf16 batch_size=32"),
    "swin_t": ("heldout/swin_t.py", "precision=bf16 batch_size=128"),
    "whisper_base": ("heldout/whisper_base.py", "precision=bf16 batch_size=32"),
    "unet_ddpm": ("heldout/unet_ddpm.py", "precision=bf16 batch_size=64"),
    "pythia_160m": ("heldout/pythia_160m.py", "precision=bf16 batch_size=16"),
    "resnet50d": ("second/resnet50d.py", "precision=bf16 batch_size=256 channels_last=true"),
    "efficientnet_b0": ("heldout/efficientnet_b0.py", "precision=bf16 batch_size=256 channels_last=true"),
    "roberta_classifier": ("heldout/roberta_classifier.py", "precision=bf16 batch_size=128"),
}  # fmt: skip


def spec_of(name: str, device: str):
    from advisor.config import trial_spec
    from advisor.verbs import configure

    path, settings = SPECS[name]
    overrides = [f"device={device}", "compile=true", *settings.split()]
    return trial_spec(configure(f"{MODELS / path}:workload", overrides))


def _plain(n):
    """A size as JSON: a symbolic one (a recompile made the batch dynamic) as its hint."""
    if isinstance(n, torch.SymInt):
        return n.node.hint if n.node.hint is not None else str(n)
    return n


def described(gm: torch.fx.GraphModule, backward: bool, name: str) -> dict:
    """The graph's node count and (a forward's) outputs by storage, largest first; its code,
    where READABLE names a folder (one file a graph)."""
    if READABLE:
        READABLE.mkdir(parents=True, exist_ok=True)
        kind = "backward" if backward else "forward"
        file = READABLE / f"{name}-{len(list(READABLE.glob(f'{name}-*.txt'))):02d}-{kind}.txt"
        file.write_text(gm.print_readable(print_output=False))
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
                            "shape": [_plain(n) for n in t.shape],
                            "bytes": _plain(t.untyped_storage().nbytes())})  # fmt: skip
    outputs.sort(key=lambda o: -o["bytes"])
    return {"backward": backward, "nodes": len(gm.graph.nodes),
            "saved_bytes": sum(o["bytes"] for o in outputs), "outputs": outputs}  # fmt: skip


def _stepped(t, steps: int = 3, history: bool = False) -> list[list[dict]]:
    """The trial's own steps, with the allocator's figures as each phase begins (allocated, and
    the peak of the phase before); with history, the last step's allocations are recorded."""
    from advisor.trial import training

    record = []
    for number in range(steps):
        phases: list[dict] = []
        if history and number == steps - 1:
            torch.cuda.memory._record_memory_history(max_entries=1_000_000)

        def mark(phase, phases=phases) -> None:
            phases.append({"phase": phase.value, "allocated": torch.cuda.memory_allocated(),
                           "peak_before": torch.cuda.max_memory_allocated()})  # fmt: skip
            torch.cuda.reset_peak_memory_stats()

        torch.cuda.reset_peak_memory_stats()
        training.train_step(t, mark)
        torch.cuda.synchronize()
        mark(SimpleNamespace(value="end"))
        record.append(phases)
    return record


def real(name: str, out: str) -> None:
    import torch._inductor.compile_fx as compile_fx
    from torch._dynamo.utils import counters

    from advisor.trial import training

    graphs = []
    partition = compile_fx.min_cut_rematerialization_partition  # (partition_fn's, by name)

    def recorded(gm, joint_inputs, **kwargs):
        forward, backward = partition(gm, joint_inputs, **kwargs)
        graphs.extend([described(forward, False, name), described(backward, True, name)])
        return forward, backward

    compile_fx.min_cut_rematerialization_partition = recorded
    t = training.build(spec_of(name, "cuda"), torch.device("cuda"))
    steps = _stepped(t, history=SNAPSHOT is not None)
    if SNAPSHOT:
        import gzip
        import pickle

        SNAPSHOT.mkdir(parents=True, exist_ok=True)
        with gzip.open(SNAPSHOT / f"{name}-step3.pickle.gz", "wb") as file:
            pickle.dump(torch.cuda.memory._snapshot(), file)
    Path(out).write_text(json.dumps({"name": name, "graphs": graphs, "steps": steps,
                                     "reserved": torch.cuda.max_memory_reserved(),
                                     "counters": dict(counters["inductor"])}, indent=1))  # fmt: skip


def eager(name: str, out: str) -> None:
    """The attention kernels an eager step of the spec runs on the GPU, with q's and the
    output's strides, and the allocator's figures at each phase (as real's)."""
    import dataclasses

    from torch.utils._python_dispatch import TorchDispatchMode

    from advisor.trial import training

    calls = []

    class Attention(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if "scaled_dot_product" in str(func) and "backward" not in str(func):
                first = out[0] if isinstance(out, tuple) else out
                calls.append({"op": str(func), "q_stride": list(args[0].stride()),
                              "q_dtype": str(args[0].dtype), "out_stride": list(first.stride()),
                              "mask": None if len(args) < 4 or not isinstance(args[3], torch.Tensor)
                              else [str(args[3].dtype), list(args[3].shape)]})  # fmt: skip
            return out

    spec = dataclasses.replace(spec_of(name, "cuda"), compile=False)
    t = training.build(spec, torch.device("cuda"))
    with Attention():  # (the first step: the kernels are the same in each)
        steps = _stepped(t, steps=1)
    steps += _stepped(t, steps=2)
    Path(out).write_text(json.dumps({"name": name, "attention": calls[:4],
                                     "attention_calls": len(calls), "steps": steps}, indent=1))  # fmt: skip


def fake(name: str, out: str) -> None:
    from torch._dynamo.utils import counters

    from advisor.estimation import compiled_step, fake_step

    graphs = []
    partitioned = compiled_step._partitioned

    def recorded(gm, joint_inputs, **kwargs):
        forward, backward = partitioned(gm, joint_inputs, **kwargs)
        graphs.extend([described(forward, False, name), described(backward, True, name)])
        return forward, backward

    compiled_step._partitioned = recorded
    step = fake_step.fake_step(spec_of(name, "cuda"))
    Path(out).write_text(json.dumps({"name": name, "graphs": graphs,
                                     "passes_peak": step.passes_peak_bytes,
                                     "update_peak": step.update_peak_bytes,
                                     "activations": step.activations_bytes,
                                     "params": step.params_bytes, "grads": step.grads_bytes,
                                     "optimizer_state": step.optimizer_state_bytes,
                                     "inputs": step.inputs_bytes,
                                     "counters": dict(counters["inductor"])}, indent=1))  # fmt: skip


if __name__ == "__main__":
    {"real": real, "fake": fake, "eager": eager}[sys.argv[1]](sys.argv[2], sys.argv[3])
