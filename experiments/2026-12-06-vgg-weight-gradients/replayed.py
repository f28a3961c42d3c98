"""The uncalibrated fake step of VGG11 bf16 b64 channels-first (the fourth set's workload),
its steps replayed through the allocator model, with the 2-d workspace rule as it is and with
two changes the H100's snapshot shows (internal API: the question is the fake step's input):
  first: no forward workspace for the 3-channel first layer (the snapshot has none);
  split: each weight gradient's workspace with k fp32 copies of the weight and 679 bytes more
         (k 13 for weights up to 300k elements, 7 up to 600k, else 0: the snapshot's).
The truth: steady peak reserved 7,348,420,608 bytes (raw/runs of the fourth set).

    python replayed.py
"""

import sys
from pathlib import Path

import advisor.estimation.cuda_workspaces as workspaces
from advisor.config import trial_spec
from advisor.estimation.fake_step import fake_step, replayed_reserved
from advisor.verbs import configure

FOURTH = Path(__file__).resolve().parents[1] / "2026-12-06-cudnn-2d-workspaces" / "workloads.py"
TRUTH = 7_348_420_608
ruled = workspaces._cudnn_workspaces
variant = sys.argv[1] if len(sys.argv) > 1 else ""


def changed(x, w, y, stride, transposed, tf32, runs):
    rounds = ruled(x, w, y, stride, transposed, tf32, runs)
    if "first" in variant and x.size(1) < 8 and runs == ("forward",):
        rounds = []
    if "split" in variant and rounds and "weight" in runs:
        k = 13 if w.numel() <= 300_000 else 7 if w.numel() <= 600_000 else 0
        rounds = [*rounds[:-1], [rounds[-1][0] + k * w.numel() * 4 + 532]]
    return rounds


workspaces._cudnn_workspaces = changed
spec = trial_spec(
    configure(f"{FOURTH}:vgg11_bn", ["device=cuda", "precision=bf16", "batch_size=64"])
)
step = fake_step(spec)
reserved = replayed_reserved(step)
print(f"{variant or 'the rule'}: peak allocated {step.peak_allocated_bytes:,}, replayed reserve "
      f"{reserved:,} ({reserved / TRUTH - 1:+.1%} of the truth's)")  # fmt: skip
