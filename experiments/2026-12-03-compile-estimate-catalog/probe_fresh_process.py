"""A compiled resnet50 estimate as the first compile of a fresh process, through the public API.

    python3 probe_fresh_process.py first SETTINGS        # as a user's process runs it
    python3 probe_fresh_process.py lowering SETTINGS...  # torch._inductor.lowering imported first

`first` prints the error and the exception the estimate hides behind it (its __context__). In
compare.py's runs a compiled gpt2 estimate came first in the process; `lowering` checks that
the resnet50 bytes do not depend on that, beyond the import.
"""

from __future__ import annotations

import importlib
import json
import sys
import tempfile
import traceback

import advisor


def estimate(settings: str) -> dict:
    values = dict(item.split("=", 1) for item in settings.split())
    model = values.pop("model")
    with tempfile.TemporaryDirectory() as empty:
        overrides = [*(f"{k}={v}" for k, v in values.items()), "gpu=h200"]
        result = advisor.estimate(
            model=model, overrides=[*overrides, f"db_url=sqlite:///{empty}/f"]
        )
    memory = result.to_dict()["memory"]
    return {
        "settings": settings,
        "advisor": advisor.__file__,
        "peak_allocated_bytes": memory["peak_allocated_bytes"],
        "device_peak_bytes": memory["device_peak_bytes"],
    }


if __name__ == "__main__":
    how, *specs = sys.argv[1:]
    if how == "lowering":
        importlib.import_module("torch._inductor.lowering")
    for spec in specs:
        try:
            print(json.dumps(estimate(spec)), flush=True)
        except Exception as error:
            print(f"{type(error).__name__}: {error}")
            print("".join(traceback.format_exception(error.__context__)[-12:]))
