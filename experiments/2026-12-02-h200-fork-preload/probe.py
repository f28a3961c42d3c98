"""Is it safe for the fork server to import torch._dynamo (and a workload catalog) before it
forks a trial that uses CUDA? Every trial imports torch._dynamo while building its model (a
module built under `with torch.device(...)` imports it), about 800 modules.

python3 probe.py preload   # the parent imports torch._dynamo, then forks a CUDA child
python3 probe.py control   # the parent asks torch for the device count first, then forks
                           # (on the H200 hosts torch counts through NVML: CUDA not started)
python3 probe.py transformers  # as preload, and the parent imports transformers' gpt2 too
python3 probe.py libraries  # as preload, and the parent imports the server's LIBRARY_MODULES
                            # (transformers.modeling_utils, torchvision.models)
python3 probe.py started   # the parent starts CUDA (a tensor on the GPU), then forks: the
                           # child's CUDA must fail, or the probe could not tell

Prints one JSON line: the parent's import time, whether torch had started CUDA in the parent,
and the child's exit code and what it said.
"""

import importlib
import json
import os
import sys
import time

import torch

import advisor.worker  # noqa: F401  (what the fork server imports today)


def child() -> None:
    try:
        x = torch.randn(1024, 1024, device="cuda")
        y = (x @ x).sum().item()
        compiled = torch.compile(lambda t: torch.nn.functional.gelu(t) * 2)
        z = compiled(x).sum().item()
        start = time.perf_counter()  # what a gpt2 trial's builder does first, in every mode
        from transformers import AutoModelForCausalLM, GPT2Config

        gpt2 = AutoModelForCausalLM.from_config(GPT2Config(n_layer=2, use_cache=False)).cuda()
        loss = gpt2(input_ids=torch.zeros(2, 16, dtype=torch.long, device="cuda"),
                    labels=torch.zeros(2, 16, dtype=torch.long, device="cuda")).loss.item()  # fmt: skip
        built_s = round(time.perf_counter() - start, 2)
        start = time.perf_counter()  # and a resnet trial's
        import torchvision

        resnet = torchvision.models.resnet18().cuda()
        logits = resnet(torch.randn(2, 3, 64, 64, device="cuda")).sum().item()
        resnet_s = round(time.perf_counter() - start, 2)
        print(json.dumps({"child": "ok", "matmul_sum": y, "compiled_sum": z, "gpt2_loss": loss,
                          "gpt2_import_and_build_s": built_s, "resnet_logits": logits,
                          "resnet_import_and_build_s": resnet_s}), flush=True)  # fmt: skip
        os._exit(0)
    except Exception as error:  # the answer is what it said
        print(json.dumps({"child": "failed", "error": f"{type(error).__name__}: {error}"[:300]}),
              flush=True)  # fmt: skip
        os._exit(3)


def main(mode: str) -> None:
    start = time.perf_counter()
    if mode in ("preload", "transformers", "libraries"):  # (importlib: an import statement
        importlib.import_module("torch._dynamo")  # would make torch a local name)
        importlib.import_module("advisor.catalog")
        if mode == "transformers":
            importlib.import_module("transformers.models.gpt2.modeling_gpt2")
        if mode == "libraries":
            from advisor.fork_server import LIBRARY_MODULES

            for module in LIBRARY_MODULES.values():
                importlib.import_module(module)
    elif mode == "control":
        torch.cuda.device_count()
    else:
        assert mode == "started", mode
        torch.zeros(1, device="cuda")
    imported_s = time.perf_counter() - start
    parent = {"mode": mode, "import_s": round(imported_s, 2),
              "cuda_initialized_in_parent": torch.cuda.is_initialized(),
              "modules": len(sys.modules)}  # fmt: skip
    pid = os.fork()
    if pid == 0:
        child()
    _, status = os.waitpid(pid, 0)
    parent["child_exit"] = os.waitstatus_to_exitcode(status)
    print(json.dumps(parent), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
