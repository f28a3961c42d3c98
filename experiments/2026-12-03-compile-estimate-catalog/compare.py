"""advisor's uncalibrated estimate of compiled catalog specs (fake tensors, this machine's CPU, a
fresh database) against the H200's earlier measurements of the same specs, public API only.

    python3 compare.py truth      # raw/truth.jsonl and raw/pool.txt from ../*/raw (the H200 side)
    PYTHONPATH=/tmp/libs517:/tmp/advisor-dd74277 python3 compare.py estimate
                                  # raw/estimates.jsonl (the CPU side; resumes where it stopped)
    python3 compare.py estimate NAME WORD...  # only the specs with all those words, into raw/NAME
    python3 compare.py table > table.md

(/tmp/libs517: transformers 5.17.0 and timm 1.0.29, the H200's; /tmp/advisor-dd74277: `git archive
dd74277` unpacked, so that the estimate's code stays fixed while the checkout moves.)

specs.txt names the chosen compiled specs, by set: "main" (measured without a memory cap) and
"capped" (gpt2, measured only under a 40 GiB cap that never acted: no allocator retry, reserved
below the cap). Each is estimated beside its eager twin (compile=false) where that was measured.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import advisor

HERE = Path(__file__).resolve().parent
EXPERIMENTS = HERE.parent
EXCLUDED = {"2026-12-03-h200-unseen-models", HERE.name}  # the development set, and this one
SETTINGS = ("model", "batch_size", "grad_accum", "precision", "optimizer", "checkpointing",
            "channels_last", "expandable_segments", "compile")  # fmt: skip
# gpt2's workload changed on 2026-12-01 (labels inside the model call, use_cache=False:
# ../2026-12-01-h200-workloads); its trials measured before then are of another step
NOT_BEFORE = {"gpt2": "2026-12-01"}
GB = 1e9
BREAKS = "torch.compile breaks the model into "  # the estimate's note on graph breaks


def spec_key(spec: dict) -> str:
    """A spec's settings as key=value, in SETTINGS' order (the measurement's and the override's
    form)."""
    return " ".join(f"{k}={json.dumps(spec[k]).strip(chr(34))}" for k in SETTINGS)


def chosen() -> list[tuple[str, str]]:
    """(set, settings) of each line of specs.txt: the compiled specs."""
    rows = []
    for line in (HERE / "specs.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            chosen_set, settings = line.split(maxsplit=1)
            rows.append((chosen_set, settings))
    return rows


def twin(settings: str) -> str:
    return settings.replace("compile=true", "compile=false")


def stored_trials() -> list[dict]:
    """Every trial of ../*/raw: JSON and JSONL files as written, and databases read through
    advisor.history from a copy (history migrates a database in place)."""
    found = []

    def walk(item: object, path: Path) -> None:
        if isinstance(item, dict):
            if {"spec", "memory", "status"} <= item.keys():
                found.append(item | {"source": str(path.relative_to(EXPERIMENTS))})
                return
            for value in item.values():
                walk(value, path)
        elif isinstance(item, list):
            for value in item:
                walk(value, path)

    raw_files = sorted(EXPERIMENTS.glob("*/raw/**/*"))
    raw_files = [p for p in raw_files if p.relative_to(EXPERIMENTS).parts[0] not in EXCLUDED]
    with tempfile.TemporaryDirectory() as copies:
        for path in raw_files:
            if path.suffix == ".json":
                # a sweep killed before it wrote its answer leaves an empty file
                with contextlib.suppress(json.JSONDecodeError):
                    walk(json.loads(path.read_text()), path)
            elif path.suffix == ".jsonl":
                for line in path.read_text().splitlines():
                    with contextlib.suppress(json.JSONDecodeError):
                        walk(json.loads(line), path)
            elif path.suffix == ".sqlite" and not path.name.endswith("optuna.sqlite"):
                copy = Path(copies) / f"{len(found)}-{path.name}"
                shutil.copy(path, copy)
                for result in advisor.history(db_url=f"sqlite:///{copy}"):
                    walk(result.to_dict(), path)
    return found


def usable(trial: dict, capped: bool) -> bool:
    """Measured on an H200, ok, under the set's cap rule, and of the workload as it is now."""
    spec, memory = trial["spec"], trial["memory"]
    environment = trial.get("environment") or {}
    if trial["status"] != "ok" or "H200" not in (environment.get("device_name") or ""):
        return False
    if (trial.get("created_at") or "") < NOT_BEFORE.get(spec["model"], ""):
        return False
    if not capped:
        return spec.get("memory_cap_bytes") is None
    cap = spec.get("memory_cap_bytes")
    return (cap is not None and memory.get("num_alloc_retries") == 0
            and memory["steady_peak_reserved_bytes"] < cap)  # fmt: skip


def truth() -> None:
    trials = stored_trials()
    newest: dict[tuple[bool, str], dict] = {}
    repeats: dict[tuple[bool, str], set[tuple[str, int, int]]] = {}  # every measurement of it
    for trial in trials:
        for capped in (False, True):
            if usable(trial, capped):
                key = (capped, spec_key(trial["spec"]))
                memory = trial["memory"]
                repeats.setdefault(key, set()).add((
                    trial.get("created_at") or trial["source"],  # a trial kept in two files
                    memory["steady_peak_allocated_bytes"],
                    memory["steady_peak_reserved_bytes"] + memory["context_bytes"],
                ))  # fmt: skip
                seen = newest.get(key)
                if seen is None or (trial.get("created_at") or "") > (seen.get("created_at") or ""):
                    newest[key] = trial
    with open(HERE / "raw" / "pool.txt", "w") as pool:
        for (capped, key), trial in sorted(newest.items()):
            if "compile=true" in key:
                has_twin = (capped, twin(key)) in newest
                pool.write(f"{'capped' if capped else 'main'} {key}"
                           f"{' (eager twin measured)' if has_twin else ''}"
                           f"  # {trial.get('created_at')} {trial['source']}\n")  # fmt: skip
    with open(HERE / "raw" / "truth.jsonl", "w") as out:
        for chosen_set, settings in chosen():
            for key in (settings, twin(settings)):
                trial = newest.get((chosen_set == "capped", key))
                if trial is not None:
                    seen = repeats[(chosen_set == "capped", key)]
                    spread = {
                        "measurements": len(seen),
                        "allocated_range": [min(a for _, a, _ in seen), max(a for _, a, _ in seen)],
                        "device_range": [min(d for _, _, d in seen), max(d for _, _, d in seen)],
                    }
                    row = {"set": chosen_set, "settings": key, "spread": spread} | trial
                    out.write(json.dumps(row) + "\n")
                elif key == settings:
                    print(f"no usable measurement of {chosen_set} {key}", file=sys.stderr)


def measured() -> dict[str, dict]:
    rows = [json.loads(line) for line in (HERE / "raw" / "truth.jsonl").read_text().splitlines()]
    return {row["settings"]: row for row in rows}


def estimate_all(name: str = "estimates.jsonl", *only: str) -> None:
    """Estimate every spec of specs.txt and its eager twin into raw/NAME; with ONLY, just the
    specs whose settings hold all of those words (a spot check)."""
    path = HERE / "raw" / name
    done = set()
    if path.exists():
        done = {json.loads(line)["settings"] for line in path.read_text().splitlines()}
    truths = measured()
    with tempfile.TemporaryDirectory() as empty, open(path, "a") as out:
        for chosen_set, settings in chosen():
            for key in (settings, twin(settings)):
                if key in done or key not in truths or not all(w in key.split() for w in only):
                    continue
                db_url = f"sqlite:///{empty}/{len(done)}.sqlite"  # no history: uncalibrated
                values = dict(item.split("=", 1) for item in key.split())
                model = values.pop("model")
                row = {"set": chosen_set, "settings": key, "advisor": advisor.__file__}
                started = time.perf_counter()
                try:
                    estimate = advisor.estimate(
                        model=model,
                        overrides=[*(f"{k}={v}" for k, v in values.items()), "gpu=h200",
                                   f"db_url={db_url}"],
                    )  # fmt: skip
                except Exception as error:  # kept in the table: an estimate that cannot answer
                    row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0]}"
                else:
                    row |= estimate.to_dict()
                out.write(json.dumps(row | {"seconds": time.perf_counter() - started}) + "\n")
                out.flush()
                done.add(key)


def label(settings: str) -> str:
    """A spec's short name: its settings less the defaults they all share."""
    values = dict(item.split("=", 1) for item in settings.split())
    words = [values["model"], f"b{values['batch_size']}", values["precision"], values["optimizer"]]
    if values["grad_accum"] != "1":
        words.append(f"ga{values['grad_accum']}")
    if values["checkpointing"] != "none":
        words.append(f"ckpt={values['checkpointing']}")
    if values["channels_last"] == "true":
        words.append("channels_last")
    if values["expandable_segments"] == "true":
        words.append("expandable")
    return " ".join(words)


def summary(name: str, errors: list[float]) -> str:
    if not errors:
        return f"- {name}: none"
    return (f"- {name}: {len(errors)} specs, median |error| "
            f"{statistics.median(abs(x) for x in errors):.1%}, worst over {max(errors):+.1%}, "
            f"worst under {min(errors):+.1%}, within [-2%, +5%]: "
            f"{sum(-0.02 <= x <= 0.05 for x in errors)} of {len(errors)}")  # fmt: skip


def table() -> None:
    truths = measured()
    estimates = [json.loads(line) for line in (HERE / "raw" / "estimates.jsonl")
                 .read_text().splitlines()]  # fmt: skip
    errors: dict[tuple[str, bool], tuple[list[float], list[float]]] = {}
    inside: dict[tuple[str, bool], list[bool]] = {}
    print("# Uncalibrated estimate against the H200, compiled catalog specs and eager controls")
    print("\nerror = estimate / measured - 1. Device peak: measured steady peak reserved + context."
          " Range: is the measured device peak inside the range the estimate states"
          " (`device_peak_range_bytes`)? Graphs: the estimate's note when its dynamo trace broke"
          " the model into several graphs. Measured: when, and the experiment (newest"
          " measurement; n = how many, spread = max - min of their peak allocated).")  # fmt: skip
    for chosen_set in dict.fromkeys(e["set"] for e in estimates):
        print(f"\n## set {chosen_set}\n")
        print("| spec | compile | measured peak allocated GB | estimate | error "
              "| measured device peak GB | estimate | error | range | graphs | estimate s "
              "| measured |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for e in (e for e in estimates if e["set"] == chosen_set):
            compiled = "compile=true" in e["settings"]
            m = truths[e["settings"]]
            mm = m["memory"]
            true_alloc = mm["steady_peak_allocated_bytes"]
            true_device = mm["steady_peak_reserved_bytes"] + mm["context_bytes"]
            spread = m["spread"]["allocated_range"]
            where = f"{(m.get('created_at') or '')[:16]} {m['source'].split('/')[0][11:]}"
            where += f", n={m['spread']['measurements']}"
            where += f", spread {(spread[1] - spread[0]) / GB:.3f}"
            start = f"| {label(e['settings'])} | {'yes' if compiled else 'no'} "
            start += f"| {true_alloc / GB:.2f}"
            if "error" in e:
                print(f"{start} | failed: {e['error'][:90]} | | {true_device / GB:.2f} | | | | "
                      f"| {e['seconds']:.0f} | {where} |")  # fmt: skip
                continue
            em = e["memory"]
            a = em["peak_allocated_bytes"] / true_alloc - 1
            d = em["device_peak_bytes"] / true_device - 1
            low, high = e["device_peak_range_bytes"]
            within = low <= true_device <= high
            notes = [n.split(":")[0] for n in e["unmodelled"]]
            breaks = next((n.removeprefix(BREAKS) for n in notes if n.startswith(BREAKS)), "")
            alloc, device = errors.setdefault((chosen_set, compiled), ([], []))
            alloc.append(a)
            device.append(d)
            inside.setdefault((chosen_set, compiled), []).append(within)
            print(f"{start} | {em['peak_allocated_bytes'] / GB:.2f} | {a:+.1%} "
                  f"| {true_device / GB:.2f} | {em['device_peak_bytes'] / GB:.2f} | {d:+.1%} "
                  f"| {'in' if within else '**out**'} | {breaks} | {e['seconds']:.0f} "
                  f"| {where} |")  # fmt: skip
    print("\n## Summary\n")
    for (chosen_set, compiled), (alloc, device) in errors.items():
        kind = "compiled specs" if compiled else "eager controls"
        within = inside[(chosen_set, compiled)]
        print(f"set {chosen_set}, {kind}:\n")
        print(summary("peak allocated", alloc))
        print(summary("device peak", device))
        print(f"- measured device peak inside the estimate's stated range: "
              f"{sum(within)} of {len(within)}\n")  # fmt: skip
    failed = [e["settings"] for e in estimates if "error" in e]
    print(f"Estimates that failed: {len(failed)}" + "".join(f"\n- {f}" for f in failed))


if __name__ == "__main__":
    {"truth": truth, "estimate": estimate_all, "table": table}[sys.argv[1]](*sys.argv[2:])
