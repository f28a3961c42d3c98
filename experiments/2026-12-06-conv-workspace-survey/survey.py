"""cuDNN's convolution workspaces layer by layer, on the GPU this runs on: for each distinct
conv2d of the survey's nets (layers.py), channels-first, each precision, the temporaries
(allocated and freed inside the call) of forward, backward's input gradient (where the net's
input to that layer takes one) and backward's weight gradient, each run as its own call as
ATen's cuDNN path runs them. Read from the caching allocator's trace (torch.cuda.memory's
snapshot, as "Understanding CUDA Memory Usage" documents it). cuDNN's benchmark on, as
`advisor run` has it (trial/worker.py): each call runs twice, and the second's temporaries are
the plan the benchmark chose (the first's largest, the benchmark's own search, is kept apart).
SURVEY_BENCHMARK=0: cuDNN's heuristics pick, as torch's default has it.

    python survey.py OUT.jsonl [SECONDS]          # the survey's nets (layers.SURVEY)
    python survey.py OUT.jsonl SECONDS check      # the checking set's specs (specs.txt), each
                                                  # layer in the precision its spec runs it
"""

import json
import os
import sys
import time
from pathlib import Path

import torch
from layers import SURVEY, distinct, distinct_of

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32,
          "fp32": torch.float32}  # fmt: skip
# a spec's precision -> how cuDNN runs its convolutions (advisor's Precision.cudnn_tf32)
CONVOLUTIONS = {"bf16": "bf16", "fp16": "fp16", "default": "tf32", "tf32": "tf32", "fp32": "fp32"}
ORDER = [((64,), ("bf16", "tf32", "fp32")), ((32, 128), ("bf16", "tf32")), ((32, 128), ("fp32",))]


def temporaries(call):
    """The sizes allocated and freed inside call, in order, and its result."""
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history("all", context=None, stacks="python",
                                             clear_history=True)  # fmt: skip
    result = call()
    torch.cuda.synchronize()
    trace = torch.cuda.memory._snapshot()["device_traces"][0]
    torch.cuda.memory._record_memory_history(None)
    alive, freed = {}, []
    for event in trace:
        if event["action"] == "alloc":
            alive[event["addr"]] = event["size"]
        elif event["action"] == "free_requested" and event["addr"] in alive:
            freed.append(alive.pop(event["addr"]))
    return freed, result


def chosen(call):
    """The temporaries of call once cuDNN's benchmark has chosen its plan, the benchmark's own."""
    if not torch.backends.cudnn.benchmark:
        return temporaries(call)
    searched, _ = temporaries(call)
    made, result = temporaries(call)
    return made, result, searched


def probe(layer: dict, precision: str) -> dict:
    dtype = DTYPES[precision]
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    x = torch.randn(layer["x"], device="cuda", dtype=dtype)
    w = torch.randn(layer["w"], device="cuda", dtype=dtype)
    b = torch.randn(layer["w"][0], device="cuda", dtype=dtype) if layer["bias"] else None
    geometry = (layer["stride"], layer["padding"], layer["dilation"], False, [0, 0],
                layer["groups"])  # fmt: skip
    runs, searches = {}, {}
    runs["forward"], y, *searches["forward"] = chosen(
        lambda: torch.ops.aten.convolution(x, w, b, *geometry)
    )
    g = torch.randn_like(y)
    bias_sizes = [layer["w"][0]] if layer["bias"] else None

    def backward(mask):
        return lambda: torch.ops.aten.convolution_backward(g, x, w, bias_sizes, *geometry, mask)

    if layer["input_grad"]:
        runs["input"], _, *searches["input"] = chosen(backward([True, False, False]))
    runs["weight"], _, *searches["weight"] = chosen(backward([False, True, False]))
    return {"precision": precision, **{k: v for k, v in layer.items() if k != "nets"},
            "nets": layer["nets"][:3], "runs": runs,
            "searched": {run: found[0] for run, found in searches.items() if found}}  # fmt: skip


def checking_set() -> list[tuple[tuple[int, ...], tuple[str, ...], list[dict]]]:
    """specs.txt's (net, batch) pairs grouped by how cuDNN runs their convolutions."""
    pairs: dict[str, list[tuple[str, int]]] = {}
    for line in (Path(__file__).parent / "specs.txt").read_text().splitlines():
        if line[:2] in ("a ", "b "):
            _, net, *settings = line.split()
            given = dict(setting.split("=") for setting in settings)
            pair = (net, int(given["batch_size"]))
            pairs.setdefault(CONVOLUTIONS[given["precision"]], []).append(pair)
    return [((), (precision,), distinct_of(found)) for precision, found in pairs.items()]


def main() -> None:
    path, seconds = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 480.0
    start = time.monotonic()
    order = checking_set() if sys.argv[3:] == ["check"] else [
        (batches, precisions, distinct(SURVEY, batches)) for batches, precisions in ORDER
    ]  # fmt: skip
    device = torch.cuda.get_device_name()
    torch.backends.cudnn.benchmark = os.environ.get("SURVEY_BENCHMARK", "1") == "1"
    header = {"device": device, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
              "benchmark": torch.backends.cudnn.benchmark}  # fmt: skip
    with open(path, "w") as out:
        out.write(json.dumps(header) + "\n")
        for batches, precisions, found in order:
            for precision in precisions:
                for layer in found:
                    if time.monotonic() - start > seconds:
                        print("stopped at the deadline", file=sys.stderr)
                        return
                    out.write(json.dumps(probe(layer, precision)) + "\n")
                    out.flush()
                print(f"{batches} {precision}: {len(found)} layers, "
                      f"{time.monotonic() - start:.0f} s", file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main()
