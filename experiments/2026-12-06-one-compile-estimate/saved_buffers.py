"""The buffers over 800 MB of each compiled graph of gpt2 bf16 b8 compiled (internal API: which
node made each, and whether inductor's kernels would make it a buffer).

    python saved_buffers.py | grep BUF | sort | uniq
"""

import advisor.estimation.inductor_buffers as buffers
from advisor.config import trial_spec
from advisor.estimation.fake_step import fake_step
from advisor.verbs import configure

counted_graph = buffers._Graph.__init__


def reporting_graph(self, gm, env):
    counted_graph(self, gm, env)
    for key, storage in self.storage.items():
        if storage.nbytes() > 8e8:
            node = self.owner[key]
            kind = "buffer" if self.is_buffer.get(node) else "fused"
            print("BUF", storage.nbytes(), node.format_node()[:300], kind, flush=True)


buffers._Graph.__init__ = reporting_graph
settings = ["device=cuda", "precision=bf16", "compile=true", "batch_size=8"]
fake_step(trial_spec(configure("gpt2", settings)))
