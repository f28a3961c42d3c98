"""Fake steps of one spec at several batches, timed, with their figures (internal API: the
question is the fake step's). raw/qwen-steps.txt came from an earlier form without the
replayed reserve and the drawn-step check; raw/gpt2-steps-*.txt from this one.

    python steps.py MODEL B1,B2,B3 SETTING=VALUE...   # e.g. gpt2 8,16,160 precision=bf16 compile=true
"""

import dataclasses
import sys
import time

from advisor.config import trial_spec
from advisor.estimation.fake_step import fake_step, replayed_reserved, step_between
from advisor.verbs import configure

model, batches, *overrides = sys.argv[1:]
spec = trial_spec(configure(model, ["device=cuda", *overrides]))
steps = {}
for b in [int(x) for x in batches.split(",")]:
    t = time.perf_counter()
    s = steps[b] = fake_step(dataclasses.replace(spec, batch_size=b))
    print(
        f"b={b}: {time.perf_counter() - t:.1f} s peak {s.peak_allocated_bytes} trace {len(s.trace)} sum {sum(x for _, x in s.trace if x > 0)} graphs {s.compiled_graphs} reserved {replayed_reserved(s)}",
        flush=True,
    )
bs = sorted(steps)
print("between", step_between(steps[bs[0]], steps[bs[1]], bs[0], bs[2]) is not None)
