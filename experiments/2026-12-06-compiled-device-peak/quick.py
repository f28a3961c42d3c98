"""The twelve compiled held-out specs' uncalibrated peak allocated and device peak, without the
largest batch that the public estimate also searches for (a compiled fake step for each of its
tries: 14 minutes for two specs on this 2-core machine). Internal API (the fake step and the
uncalibrated corrections, as estimator.estimate uses them); the figures are the public
estimate's (../2026-12-03-compiled-estimate-same-torch/estimate.py makes those).

    python quick.py OUT.jsonl [PROCESSES]    # then: python quick.py table OUT.jsonl
    python quick.py catalog OUT.jsonl [PROCESSES]  # the catalog's 31 compiled specs
    python quick.py catalog-table OUT.jsonl
"""

import json
import multiprocessing
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-12-03-compiled-estimate-same-torch"))
import estimate as public  # noqa: E402


def catalog() -> list[tuple[str, str, list[str]]]:
    """(settings, model, settings as overrides) of each compiled spec of the catalog's set."""
    rows = []
    for settings in public.truths():
        if "compile=true" in settings.split():
            values = dict(item.split("=", 1) for item in settings.split())
            model = values.pop("model")
            rows.append((settings, model, [f"{k}={v}" for k, v in values.items()]))
    return rows


def figures(spec: tuple[str, str, list[str]]) -> dict:
    from advisor.config import trial_spec
    from advisor.estimation.corrections import Corrections
    from advisor.estimation.fake_step import fake_step
    from advisor.verbs import configure

    run, workload, settings = spec
    trial = trial_spec(configure(workload, ["device=cuda", *settings, "gpu=h200"]))
    step = fake_step(trial)
    corrections = Corrections.of(trial, [])
    device = corrections.steady_reserved(trial, step) + corrections.context
    peak = int(corrections.allocated(step.peak_allocated_bytes, trial.batch_size))
    memory = {"peak_allocated_bytes": peak, "device_peak_bytes": device}
    return {"run": run, "settings": run, "memory": memory}


def main(out: str, processes: str = "1", specs=public.unseen) -> None:
    context = multiprocessing.get_context("spawn")
    with context.Pool(int(processes), maxtasksperchild=1) as pool, open(out, "w") as sink:
        for row in pool.imap_unordered(figures, specs()):
            print(json.dumps(row), file=sink, flush=True)


if __name__ == "__main__":
    verb, *args = sys.argv[1:]
    if verb == "table":
        public.table_unseen(args[0])
    elif verb == "catalog":
        main(*args, specs=catalog)
    elif verb == "catalog-table":
        public.table(args[0])
    else:
        main(verb, *args)
