"""inductor's memory planning for a compiled spec's step, as it decided it: for each graph, its
own estimate of the bytes live at each scheduler node (torch/_inductor/memory.py,
estimate_peak_memory, which AllocateLine.should_reuse_buffer weighs a reuse against) and each
reuse it weighed with its answer. Run on a GPU, one step as advisor's trial builds and steps it
(history.py of ../2026-12-06-compiled-device-peak). Internal API (the trial's build and step;
inductor's wrapper internals, torch 2.11).

    python plan.py NAME OUT_DIR   # OUT_DIR/NAME-plan.json: a list of graphs in compile order

A graph: overall (the estimate's peak), by_node (bytes at each node), nodes (each node's
buffers), sizes (each buffer's bytes allocated and freed, as the estimate counts them),
freeable (the inputs the estimate frees, with their bytes), outputs, and reuses
([buffer, freed buffer, freed at node, allocated at node, bytes, peak between or null, answer]).
"""

import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-12-06-compiled-device-peak"))
import history  # noqa: E402

history.partitions.SPECS |= {
    "phi3_style": ("second/phi3_style.py", "precision=bf16 batch_size=8 optimizer=adamw_fused"),
}
GRAPHS: list[dict] = []


def _logging_planning() -> None:
    from torch._inductor.codegen import wrapper
    from torch._inductor.memory import estimate_peak_memory, get_freeable_input_buf
    from torch._inductor.virtualized import V
    from torch.utils._ordered_set import OrderedSet

    init, should_reuse = (
        wrapper.EfficientPeakEstimate.__init__,
        wrapper.AllocateLine.should_reuse_buffer,
    )

    def init_logged(self):
        init(self)
        nodes = V.graph.scheduler.nodes
        freeable = get_freeable_input_buf(nodes, OrderedSet(V.graph.graph_inputs.keys()))
        outputs = OrderedSet(V.graph.get_output_names())
        overall, by_node = estimate_peak_memory(nodes, freeable, outputs)
        self.logged = {
            "overall": overall, "by_node": by_node,
            "nodes": [[b.get_name() for b in n.get_outputs()] for n in nodes],
            "sizes": {b.get_name(): [b.mpi_buffer.size_alloc, b.mpi_buffer.size_free]
                      for n in nodes for b in n.get_outputs()},
            "freeable": {k: v.mpi_buffer.size_free for k, v in freeable.items()},
            "outputs": list(outputs), "reuses": [],
        }  # fmt: skip
        GRAPHS.append(self.logged)

    def should_reuse_logged(self, free_line, size):
        estimate = self.wrapper.estimate_peak
        adjacent = free_line.scheduler_node_index + 1 == self.scheduler_node_index
        between = None if adjacent else estimate.peak_between(free_line, self)
        answer = should_reuse(self, free_line, size)
        estimate.logged["reuses"].append([self.node.get_name(), free_line.node.get_name(),
            free_line.scheduler_node_index, self.scheduler_node_index, size, between, answer])  # fmt: skip
        return answer

    wrapper.EfficientPeakEstimate.__init__ = init_logged
    wrapper.AllocateLine.should_reuse_buffer = should_reuse_logged


def main(name: str, out: str) -> None:
    from advisor.trial import training

    _logging_planning()
    t = training.build(history.partitions.spec_of(name, "cuda"), torch.device("cuda"))
    history.partitions._stepped(t, steps=1)
    (Path(out) / f"{name}-plan.json").write_text(json.dumps(GRAPHS))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
