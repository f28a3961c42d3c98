"""What is live at the peak of a compiled spec's steady step, real beside fake: each real
allocation named by the buffer of inductor's wrapper that made it, and the sizes live at each
step's peak that differ. Internal API (the fake step's trace): the question is its.

    python peak.py HISTORY CODE_DIR FAKE.pickle [MIB]

HISTORY and CODE_DIR: a run of code.py (raw/code.tar.gz holds this folder's); FAKE.pickle: the
fake step kept by compare.py of ../2026-12-06-compiled-device-peak. Sizes under MIB (8) are
left out.
"""

import collections
import gzip
import pickle
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "2026-12-06-compiled-device-peak"))
from compare import last_step  # noqa: E402

MIB = 2**20


def real_peak(snapshot: dict) -> tuple[int, int, list[dict], list[dict]]:
    """The steady step's peak: its bytes, the event, the allocations live there, the step."""
    trace = [e for e in snapshot["device_traces"][0] if e["action"] in ("alloc", "free_completed")]
    step = last_step(snapshot)
    live: dict[int, dict] = {}
    for event in trace[: len(trace) - len(step)]:  # what the step found live
        if event["action"] == "alloc":
            live[event["addr"]] = event
        else:
            live.pop(event["addr"], None)
    now = sum(e["size"] for e in live.values())
    peak = (now, -1, list(live.values()))
    for index, event in enumerate(step):
        if event["action"] == "alloc":
            live[event["addr"]] = event
            now += event["size"]
            if now > peak[0]:
                peak = (now, index, list(live.values()))
        elif event["addr"] in live:
            now -= live.pop(event["addr"])["size"]
    return (*peak, step)


def namer(code_dir: str):
    """An allocation's maker: the wrapper's buffer (file:buffer), or the model's line."""
    codes = {p.name[:12]: p.read_text().splitlines() for p in Path(code_dir).glob("*.py")}

    def name(event: dict) -> str:
        frames = event.get("frames", [])
        for frame in frames:
            file = frame["filename"].split("/")[-1]
            if len(file) > 50 and frame["name"] == "call" and file[:12] in codes:
                line = codes[file[:12]][frame["line"] - 1].strip()
                made = re.match(r"(\w+) = ", line)
                return f"{file[:6]}:{made.group(1) if made else line[:40]}"
        outside = [f for f in frames if "site-packages/torch/" not in f["filename"]]
        return f"{outside[0]['filename'].split('/')[-1]}:{outside[0]['line']}" if outside else "?"

    return name


def fake_peak(fake) -> tuple[int, collections.Counter]:
    """The fake step's peak and the sizes live there: what it found live (parameters, buffers,
    the batch, the optimizer's state) and its trace's storages."""
    found = list(fake.persistent) + list(fake.param_sizes) * round(fake.state_ratio)
    live: dict[int, int] = {}
    now = sum(found)
    peak = (now, {})
    for number, size in fake.trace:
        if size >= 0:
            live[number] = size
            now += size
            if now > peak[0]:
                peak = (now, dict(live))
        elif number in live:
            now -= live.pop(number)
    sizes = collections.Counter(round(s / MIB, 2) for s in [*found, *peak[1].values()])
    return peak[0], sizes


def main(history: str, code_dir: str, fake_path: str, mib: str = "8") -> None:
    with gzip.open(history) as file:
        bytes_real, at, live, step = real_peak(pickle.load(file))
    name = namer(code_dir)
    print(f"real: peak {bytes_real / MIB:.1f} MiB at event {at} of {len(step)}, "
          f"made by {name(step[at])}")  # fmt: skip
    rows = collections.Counter((round(e["size"] / MIB, 2), name(e)) for e in live)
    for (size, maker), count in sorted(rows.items(), key=lambda kv: -kv[0][0] * kv[1]):
        if size >= float(mib):
            print(f"  {size:9.2f} x{count:3d}  {maker}")
    bytes_fake, faked = fake_peak(pickle.loads(Path(fake_path).read_bytes()))
    print(f"fake: peak {bytes_fake / MIB:.1f} MiB")
    real = collections.Counter(round(e["size"] / MIB, 2) for e in live)
    print("sizes live at the peaks that differ (MiB: real, fake; the difference):")
    for size in sorted(set(real) | set(faked), reverse=True):
        if real[size] != faked[size] and size >= float(mib):
            print(
                f"  {size:9.2f} {real[size]:4d} {faked[size]:4d}  {(faked[size] - real[size]) * size:+.1f}"
            )


if __name__ == "__main__":
    main(*sys.argv[1:])
