"""A compiled spec's step, graph by graph: the H200's allocations (from the whole allocator
histories of ../2026-12-06-compiled-device-peak, whose frames name the model's line each
buffer of inductor's code was made for) beside the buffers the fake step counts for the same
graphs (inductor_buffers.py), each with its model line. Internal API (the fake step and the
module's graph model): the question is theirs.

    python sequences.py real NAME OUT.json      # the H200's step, from the history
    python sequences.py fake NAME OUT.json      # the fake step's graphs (this machine's torch)
    python sequences.py compare REAL.json FAKE.json [MIB]   # counts by (line, size) that differ
    python sequences.py show REAL.json FAKE.json GRAPH [MIB] [N]  # both sequences, in order

A sequence's events: A allocated, F freed (and, fake only: R made in a freed buffer, I written
in place of another, X a backward's input released, W an extern kernel's workspaces).
"""

import collections
import gzip
import json
import pickle
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
HISTORY = HERE.parent / "2026-12-06-compiled-device-peak"
sys.path.insert(0, str(HISTORY))


def _model_line(filename: str, line: int) -> str:
    return f"{filename.split('/')[-1]}:{line}"


def _outside(filename: str) -> bool:
    """A frame of the model's code: not torch's, advisor's, or inductor's generated code."""
    return not (
        "site-packages/torch/" in filename
        or "/advisor/" in filename
        or len(filename.split("/")[-1]) > 50
    )


def real(name: str, out: str) -> None:
    from compare import last_step

    with gzip.open(HISTORY / "raw" / f"{name}-history.pickle.gz") as file:
        step = last_step(pickle.load(file))
    graphs: dict[str, list] = {}
    for event in step:
        frames = event.get("frames", [])
        code = [f for f in frames if len(f["filename"].split("/")[-1]) > 50 and f["name"] == "call"]
        graph = code[0]["filename"].split("/")[-1][:8] if code else "eager"
        model = [f for f in frames if _outside(f["filename"])]
        line = _model_line(model[0]["filename"], model[0]["line"]) if model else ""
        graphs.setdefault(graph, []).append(
            (event["action"][0].upper(), event["size"], line, code[0]["line"] if code else 0)
        )
    Path(out).write_text(json.dumps({"graphs": graphs}))


def fake(name: str, out: str) -> None:
    from history import partitions

    from advisor.estimation import compiled_step
    from advisor.estimation import inductor_buffers as buffers
    from advisor.estimation.fake_step import fake_step

    graphs = []
    counted = compiled_step.count_buffers

    def line_of(node) -> str:
        trace = (node.meta.get("stack_trace") or "") if node is not None else ""
        frames = re.findall(r'File "([^"]+)", line (\d+), in (\w+)', trace)
        frames = [f for f in frames if _outside(f[0])]
        return _model_line(frames[-1][0], int(frames[-1][1])) if frames else str(node.target)

    def recorded(gm, env, counter, *, backward, held):
        graph = buffers._Graph(gm, env)
        events = buffers._events(graph, backward, held)
        reused = buffers._reuses(graph, events)
        happens = buffers.Happens
        sequence = []
        for index, e in enumerate(events):
            size = graph.storage[e.key].nbytes() if e.key in graph.storage else 0
            if e.kind in (happens.ALLOCATED, happens.COUNTED):
                tag = "R" if e.key in reused.taken else "A"
                sequence.append((tag, size, line_of(e.member), str(e.member.target)))
            elif e.kind is happens.WRITTEN_IN_PLACE:
                sequence.append(("I", size, line_of(e.member), str(e.member.target)))
            elif e.kind in (happens.FREED, happens.HANDED_OVER):
                if index not in reused.frees_removed:
                    sequence.append(("F", size, "", ""))
            elif e.kind is happens.RELEASED:
                sequence.append(("X", size, line_of(graph.owner[e.key]), ""))
            elif e.kind is happens.WORKSPACES:
                sequence.append(("W", 0, line_of(e.member), str(e.member.target)))
        graphs.append({"backward": backward, "sequence": sequence})
        return counted(gm, env, counter, backward=backward, held=held)

    compiled_step.count_buffers = recorded
    fake_step(partitions.spec_of(name, "cuda"))
    Path(out).write_text(json.dumps({"graphs": graphs}))


def _pairs(real_path: str, fake_path: str) -> list[tuple[str, list, list]]:
    real_graphs = json.loads(Path(real_path).read_text())["graphs"]
    fake_graphs = json.loads(Path(fake_path).read_text())["graphs"]
    compiled = [g for g in real_graphs if g != "eager"]
    return [
        ("backward" if f["backward"] else "forward", real_graphs[g], f["sequence"])
        for g, f in zip(compiled, fake_graphs, strict=True)
    ]


def compare(real_path: str, fake_path: str, mib: str = "4") -> None:
    for kind, real_events, fake_events in _pairs(real_path, fake_path):
        counts = [
            collections.Counter((e[2], round(e[1] / 2**20, 2)) for e in events if e[0] == "A")
            for events in (real_events, fake_events)
        ]
        print(
            f"{kind}: allocations, real {sum(counts[0].values())}, fake {sum(counts[1].values())}"
        )
        for key in sorted(set(counts[0]) | set(counts[1]), key=lambda k: (-k[1], k[0])):
            if counts[0][key] != counts[1][key] and key[1] >= float(mib):
                print(
                    f"  {key[1]:9.2f} MiB {key[0]:28s} real {counts[0][key]:3d} fake {counts[1][key]:3d}"
                )


def show(real_path: str, fake_path: str, graph: str, mib: str = "60", n: str = "60") -> None:
    kind, real_events, fake_events = _pairs(real_path, fake_path)[int(graph)]
    for label, events in (("real", real_events), ("fake", fake_events)):
        print(f"{kind}, {label} (at least {mib} MiB, the first {n}):")
        shown = [e for e in events if e[1] >= float(mib) * 2**20][: int(n)]
        for e in shown:
            where = e[3] if label == "fake" else f"@{e[3]}"  # the op, or inductor's code line
            print(f"  {e[0]} {e[1] / 2**20:8.2f} {e[2]} {where}")


if __name__ == "__main__":
    commands = {"real": real, "fake": fake, "compare": compare, "show": show}
    commands[sys.argv[1]](*sys.argv[2:])
