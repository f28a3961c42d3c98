"""Which of the twelve compiled specs take CUDA's math path for attention, and in which dtype:
each spec's eager fake step, the math path counted (internal API: the question is the
emulation's; the kernel is picked the same eagerly and compiled).

    python math_path_probe.py > raw/math-path-probe.txt
"""

import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "2026-12-03-compiled-estimate-same-torch"))

from estimate import unseen  # noqa: E402

from advisor.config import trial_spec  # noqa: E402
from advisor.estimation import cuda_emulation, fake_step  # noqa: E402
from advisor.verbs import configure  # noqa: E402

seen: collections.Counter[str] = collections.Counter()
math_attention = cuda_emulation._math_attention


def counted(q, *args, **kwargs):
    seen[str(q.dtype)] += 1
    return math_attention(q, *args, **kwargs)


cuda_emulation._math_attention = counted
for run, workload, settings in unseen():
    seen.clear()
    eager = [s for s in settings if s != "compile=true"]
    fake_step.fake_step(trial_spec(configure(workload, ["device=cuda", *eager])))
    print(run, dict(seen), flush=True)
