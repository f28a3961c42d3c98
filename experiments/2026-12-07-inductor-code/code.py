"""inductor's own code for a compiled spec's step, beside the allocator's whole history of the
same run: which buffer of the generated wrapper each allocation is, and where inductor frees
it. Run on a GPU, as advisor's trial builds and steps it (history.py of
../2026-12-06-compiled-device-peak, three steps). Internal API (the trial's build and step).

    TORCHINDUCTOR_CACHE_DIR=DIR python code.py NAME OUT_DIR
        # OUT_DIR/NAME-history.pickle.gz, NAME-steps.json, NAME-code/ (each wrapper: "def call("),
        # NAME-pad.jsonl (each matmul inductor's pad_mm asked about: its shapes, timings, answer)

The history's frames name the wrapper's file and line: the file kept is that file. pad_mm
decides by timing on the GPU whether to pad a matmul whose sizes are not multiples of 8; the
fake step decides it by a rule (advisor/estimation/compiled_step.py, _padded_on_a_gpu).
"""

import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-12-06-compiled-device-peak"))
import history  # noqa: E402

history.partitions.SPECS |= {
    "phi3_style": ("second/phi3_style.py", "precision=bf16 batch_size=8 optimizer=adamw_fused"),
}


def _logging_pad_mm(log: Path) -> None:
    """Each should_pad answer and each timing behind one, appended to log as JSON lines."""
    from torch._inductor.fx_passes import pad_mm

    should_pad, is_padded_faster = pad_mm.should_pad, pad_mm.is_padded_faster

    def described(t):
        return {"shape": list(t.shape), "stride": list(t.stride()), "dtype": str(t.dtype)}

    def logged(record: dict) -> None:
        with log.open("a") as file:
            file.write(json.dumps(record, default=str) + "\n")

    def should_pad_logged(match, mat1, mat2, op, input=None):
        answer = should_pad(match, mat1, mat2, op, input)
        logged({"op": str(op), "mat1": described(mat1), "mat2": described(mat2),
                "pre_padded": [pad_mm.should_exclude_padding_time(match, a)
                               for a in ("mat1", "mat2") if a in match.kwargs],
                "pad": answer})  # fmt: skip
        return answer

    def is_padded_faster_logged(key, ori_time, pad_time):
        answer = is_padded_faster(key, ori_time, pad_time)
        logged({"key": key, "ori_ms": ori_time, "pad_ms": pad_time, "faster": answer})
        return answer

    pad_mm.should_pad, pad_mm.is_padded_faster = should_pad_logged, is_padded_faster_logged


def main(name: str, out: str) -> None:
    _logging_pad_mm(Path(out) / f"{name}-pad.jsonl")
    history.main(name, out, out)
    code = Path(out) / f"{name}-code"
    code.mkdir(exist_ok=True)
    for path in Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]).rglob("*.py"):
        if "def call(" in path.read_text(errors="replace"):
            shutil.copy(path, code / path.name)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
