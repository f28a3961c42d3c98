"""emit= on the real console script: the recommendation as a trainer's configuration on stdout
(the report on stderr), in --json, and a trainer it does not know refused in one line."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import spec_of
from fake_backend import fake_result
from test_cli import advisor, trial_count
from torch.nn import functional as F

from advisor.errors import ConfigError
from advisor.recommendation import recommend
from advisor.store.store import Store
from advisor.target import Target
from advisor.trial.training import build_model, workload_of

RECOMMEND = ["recommend", "model=tiny_cnn", "device=cpu", "gpu.memory=80GiB"]


def stored(db_url: str) -> list[int]:
    """Three measured settings of tiny_cnn on the CPU: enough to recommend from."""
    store = Store(db_url)
    specs = [spec_of("model=tiny_cnn", f"batch_size={b}", "grad_accum=2", "channels_last=true",
                     "optimizer=sgd_momentum") for b in (2, 4, 8)]  # fmt: skip
    return [store.add(fake_result(spec)).spec.batch_size for spec in specs]


def test_recommend_emit_torch_prints_lines_that_train(db_url):
    stored(db_url)
    done = advisor(*RECOMMEND, "emit=torch", db_url=db_url)
    assert done.returncode == 0, done.stderr
    assert "recommended" in done.stderr.lower()  # the report, on stderr
    best = Store(db_url).trials(model="tiny_cnn")[0].spec
    model = build_model(workload_of(best.model), torch.device("cpu"))
    namespace = {"model": model, "compute_loss": lambda m, b: F.cross_entropy(m(b[0]), b[1])}
    exec(compile(done.stdout, "<stdout>", "exec"), namespace)  # stdout: the Python alone
    before = [p.detach().clone() for p in model.parameters()]
    size = namespace["BATCH_SIZE"]
    for _ in range(2):
        micro = [(torch.randn(size, 3, 32, 32), torch.randint(10, (size,)))] * namespace[
            "GRAD_ACCUM"
        ]
        namespace["train_step"](micro)
    assert all(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))
    assert isinstance(namespace["optimizer"], torch.optim.SGD)


def test_recommend_emit_in_json(db_url):
    sizes = stored(db_url)
    done = advisor(*RECOMMEND, "emit=hf", "--json", db_url=db_url)
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    best = payload["recommendation"]["spec"]
    emitted = payload["emit"]
    assert emitted["trainer"] == "hf" and emitted["library"].startswith("transformers ")
    assert emitted["arguments"]["per_device_train_batch_size"] == best["batch_size"] in sizes
    assert emitted["arguments"]["optim_args"] == "momentum=0.9"
    assert "args = TrainingArguments(" in emitted["text"]


@pytest.mark.parametrize("verb", [RECOMMEND, ["sweep", "model=tiny_mlp", "device=cpu",
                                              "gpu.memory=1GiB"]])  # fmt: skip
def test_an_unknown_emit_is_one_line_exit_2(db_url, verb):
    done = advisor(*verb, "emit=keras", db_url=db_url)
    assert done.returncode == 2
    assert done.stderr == (
        "advisor: unknown emit 'keras'; choose one of: hf, lightning, accelerate, torch\n"
    )
    assert done.stdout == "" and trial_count(db_url) == 0  # (said before anything ran)


def test_a_recommendation_without_an_answer_has_nothing_to_emit():
    answer = recommend([], Target("cpu", 2**30, 0.05))
    with pytest.raises(ConfigError, match="^nothing to emit: nothing measured"):
        answer.emit("torch")
