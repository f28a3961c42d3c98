"""torch's MemTracker (torch.distributed._tools.mem_tracker) on fake CPU tensors, as a user
would run it (CPU autocast, the model's own attention), on the same H200 trials as
accuracy.py: python3 memtracker.py > memtracker.md"""

from __future__ import annotations

import statistics

import torch
from accuracy import GiB, trials
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker

from advisor.estimate import steady_device_peak
from advisor.spec import Checkpointing, Precision
from advisor.workload import build_model, checkpoint_blocks, compute_loss, make_batch


def memtracker_peak(spec) -> int:
    cpu = torch.device("cpu")
    dtype = {Precision.bf16: torch.bfloat16, Precision.fp16: torch.float16}.get(spec.precision)
    meta_model = build_model(spec, torch.device("meta"))  # some initialisers read values back
    if spec.channels_last:
        meta_model = meta_model.to(memory_format=torch.channels_last)
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = meta_model.to_empty(device=cpu)
        if hasattr(model, "tie_weights"):
            model.tie_weights()
        if spec.checkpointing is Checkpointing.blocks:
            checkpoint_blocks(model, spec.model.block)
        optimizer = torch.optim.AdamW(model.parameters(), foreach=True)
        inputs, labels = make_batch(spec, cpu)
        tracker = MemTracker()
        tracker.track_external(model, optimizer)
        with tracker:
            for step in range(2):  # the second step has the optimizer state from the start
                with torch.autocast(
                    "cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None
                ):
                    loss = compute_loss(spec.model.loss, model(inputs), labels)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                if step == 0:
                    tracker.reset_mod_stats()
        return int(tracker.get_tracker_snapshot("peak")[cpu]["Total"])


def main() -> None:
    rows, alloc, device = [], [], []
    failed = []
    for r in trials():
        s = r.spec
        try:
            peak = memtracker_peak(s)
        except NotImplementedError as error:  # e.g. checkpointing calls a block's forward twice
            failed.append(
                f"{s.model.name} {s.precision.value} ckpt={s.checkpointing.value} "
                f"cl={s.channels_last} b{s.batch_size}: {str(error).splitlines()[0][:90]}"
            )
            continue
        m = r.memory
        a = peak / m.steady_peak_allocated_bytes - 1
        d = peak / steady_device_peak(r) - 1
        alloc.append(a)
        device.append(d)
        rows.append(
            f"| {s.model.name} {s.precision.value} ckpt={s.checkpointing.value} "
            f"cl={s.channels_last} b{s.batch_size} | {peak / GiB:.2f} "
            f"| {m.steady_peak_allocated_bytes / GiB:.2f} ({a:+.1%}) "
            f"| {steady_device_peak(r) / GiB:.2f} ({d:+.1%}) |"
        )
    print(f"# torch MemTracker (fake CPU tensors) against the H200: {len(rows)} trials\n")
    print(
        "| spec | MemTracker peak GiB | measured steady peak alloc (error) "
        "| measured steady device peak (error) |"
    )
    print("|---|---|---|---|")
    print("\n".join(rows))
    if failed:
        print(f"\nMemTracker failed on {len(failed)} specs:\n")
        print("\n".join(f"- {line}" for line in failed))
    print("\n| against | median abs | worst abs | worst under |")
    print("|---|---|---|---|")
    for name, errors in (("steady peak allocated", alloc), ("steady device peak", device)):
        print(
            f"| {name} | {statistics.median(abs(e) for e in errors):.1%} "
            f"| {max(abs(e) for e in errors):.1%} | {min(errors):+.1%} |"
        )


if __name__ == "__main__":
    main()
