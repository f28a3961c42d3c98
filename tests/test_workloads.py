"""Users' own workloads, end to end on the CPU: the command line and the Python API take them,
a changed workload is measured again, and a broken one gets one line with nothing stored."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FAST_OVERRIDES
from test_cli import advisor, trial_count

import advisor as api
from advisor.store.store import Store
from advisor.trial import fork_server

TESTS = Path(__file__).parent
ROOT = TESTS.parent
BERT = TESTS / "workloads" / "bert_classifier.py"
# A small space: two batches, everything else fixed, two measured specs at most.
SMALL_SPACE = [
    "trials=2", "space.batch_sizes=[2,4]", "space.precision=[fp32]", "space.compile=[false]",
    "space.checkpointing=[none]", "space.grad_accum=[1]", "space.channels_last=[false]",
    "space.optimizers=[adamw]", "gpu.memory=1GiB", "device=cpu", "batch_size=2", "precision=fp32",
]  # fmt: skip


def user_workloads(tmp_path: Path) -> list[tuple[str, Path]]:
    """(workload=..., the folder it runs from): a transformers classifier with an attention
    mask, a conv net with its own loss (the README's example), a file in the current folder."""
    here = tmp_path / "project"
    here.mkdir()
    shutil.copy(BERT, here / "classifier_here.py")
    return [
        (f"{BERT}:workload", ROOT),
        ("examples/own_model.py:workload", ROOT),
        ("classifier_here.py:workload", here),
    ]


@pytest.mark.slow
def test_user_workloads_run_sweep_and_estimate_from_the_command_line(tmp_path, db_url):
    study = f"study_db_url=sqlite:///{tmp_path / 'optuna.sqlite'}"
    for source, folder in user_workloads(tmp_path):
        run = advisor("run", f"workload={source}", "device=cpu", "batch_size=2", "--json",
                      *FAST_OVERRIDES, db_url=db_url, cwd=folder)  # fmt: skip
        assert run.returncode == 0, run.stderr
        measured = json.loads(run.stdout)
        assert measured["status"] == "ok" and measured["memory"]["params_bytes"] > 0
        assert len(measured["spec"]["fingerprint"]) == 16

        sweep = advisor("sweep", f"workload={source}", *SMALL_SPACE, study, "--json",
                        f"plot={tmp_path / 'sweep.png'}", *FAST_OVERRIDES, db_url=db_url,
                        cwd=folder)  # fmt: skip
        assert sweep.returncode == 0, sweep.stderr
        outcome = json.loads(sweep.stdout)
        assert outcome["baseline"]["spec"]["batch_size"] == 2  # the settings given, first
        assert outcome["recommendation"]["spec"]["model"] == measured["spec"]["model"]

        estimate = advisor("estimate", f"workload={source}", "batch_size=2", "gpu.memory=8GiB",
                           "--json", db_url=db_url, cwd=folder)  # fmt: skip
        assert estimate.returncode == 0, estimate.stderr
        assert json.loads(estimate.stdout)["memory"]["params_bytes"] > 0
    assert trial_count(db_url) >= 6


@pytest.mark.slow
def test_the_python_api_on_a_user_workload(tmp_path, db_url):
    settings = dict(device="cpu", db_url=db_url, measure={"max_timed_steps": 5, "max_timed_s": 2})
    result = api.run(f"{BERT}:workload", batch_size=2, precision="fp32", **settings)
    assert isinstance(result, api.TrialResult) and result.status is api.Status.ok
    assert result.memory.buffers_bytes == 1024  # BERT's position_ids and token_type_ids
    estimate = api.estimate(f"{BERT}:workload", batch_size=2, gpu={"memory": "8GiB"},
                            db_url=db_url)  # fmt: skip
    assert estimate.fits and estimate.step.params_bytes >= result.memory.params_bytes
    outcome = api.sweep(
        f"{BERT}:workload",
        overrides=[o for o in SMALL_SPACE if not o.startswith("device=")],
        study_db_url=f"sqlite:///{tmp_path / 'optuna.sqlite'}",
        **settings,
    )
    # reused, not measured again (the baseline shown is its setting's median measurement: the
    # answer's repeats measure it again when it is the answer too)
    linked = Store(db_url).sweep_trials(outcome.sweep_id)
    assert (result.id, True) in [(r.id, reused) for r, reused in linked]
    assert outcome.baseline is not None and outcome.baseline.spec.hash == result.spec.hash
    assert outcome.recommendation.best is not None
    rec = api.recommend(f"{BERT}:workload", device="cpu", gpu={"memory": "8GiB"}, db_url=db_url)
    assert rec.best is not None and rec.best.spec.model.name == "bert_classifier"


def test_the_python_api_takes_the_function_itself(db_url):
    from builders import tiny_workload

    result = api.run(tiny_workload, device="cpu", batch_size=4, db_url=db_url,
                     measure={"max_timed_steps": 5, "max_timed_s": 2})  # fmt: skip
    assert result.status is api.Status.ok and result.spec.model.name == "tiny_workload"
    with pytest.raises(api.WorkloadError, match="pass the function that returns"):
        api.run(tiny_workload(), device="cpu", db_url=db_url)


def test_an_edited_workload_is_measured_again(tmp_path, db_url):
    source = tmp_path / "mine.py"
    shutil.copy(BERT, source)
    fixed = [o for o in SMALL_SPACE if not o.startswith(("trials", "space.batch_sizes"))]
    settings = dict(db_url=db_url, study_db_url=f"sqlite:///{tmp_path / 'optuna.sqlite'}",
                    measure={"max_timed_steps": 5, "max_timed_s": 2})  # fmt: skip
    sweep = [f"workload={source}:workload", "space.batch_sizes=[2]", "trials=1", *fixed]
    first = api.sweep(overrides=sweep, **settings)
    measured = trial_count(db_url)  # the setting and its repeats (the answer is measured twice)
    assert measured == len(first.repeats) >= 2
    again = api.sweep(overrides=sweep, **settings)
    assert trial_count(db_url) == measured  # the same code: reused, not measured again
    assert again.recommendation.best.id == first.recommendation.best.id
    source.write_text(source.read_text().replace("hidden_size=64", "hidden_size=32"))
    with pytest.raises(api.ConfigError, match="ran other code or arguments"):  # not "only 0"
        api.recommend(f"{source}:workload", device="cpu", gpu={"memory": "8GiB"}, db_url=db_url)
    edited = api.sweep(overrides=sweep, **settings)
    assert trial_count(db_url) == measured + len(edited.repeats)  # the edit: a new experiment
    new, old = edited.recommendation.best, first.recommendation.best
    assert new.spec.model.code != old.spec.model.code and new.spec.hash != old.spec.hash
    assert new.memory.params_bytes < old.memory.params_bytes


@pytest.mark.parametrize(
    "workload,message",
    [
        ("nowhere/missing.py:workload", "workload file nowhere/missing.py does not exist"),
        ("tests/workloads/broken.py:absent", "has no function 'absent'"),
        ("tests/workloads/broken.py:not_a_workload", "returned Linear; it must return an"),
        ("tests/workloads/broken.py:batch_raises", "batch(1, cpu) raised ValueError: no data"),
        ("tests/workloads/broken.py:loss_not_scalar", "the loss must be a scalar tensor, got"),
        ("no_such_package.models:workload", "cannot import no_such_package.models"),
        ("tests/workloads/broken.py:wrong_block", "has no module of class 'Bottleneck'"),
    ],
)
def test_a_broken_workload_gets_one_line_and_nothing_is_stored(workload, message, db_url):
    for verb, search in (("run", []), ("sweep", ["gpu.memory=1GiB", "trials=1"])):
        result = advisor(verb, f"workload={workload}", "device=cpu", "batch_size=2", *search,
                         *FAST_OVERRIDES, db_url=db_url, cwd=ROOT)  # fmt: skip
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("advisor: ") and message in result.stderr
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert trial_count(db_url) == 0


def test_the_worker_does_not_import_from_the_current_folder(tmp_path, db_url):
    """A numpy.py in the current folder was imported by the worker: now only a workload file's
    own folder is put on its path."""
    (tmp_path / "numpy.py").write_text(
        "import sys\nopen(__file__ + '.imported', 'a').write(sys.argv[0] + '\\n')\n"
        "raise ImportError('the current folder was imported from')\n"
    )
    run = advisor("run", "model=tiny_mlp", "device=cpu", "batch_size=2", *FAST_OVERRIDES,
                  "--json", db_url=db_url, cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["status"] == "ok"
    assert not (tmp_path / "numpy.py.imported").exists()


@pytest.mark.skipif(not fork_server.PRELOAD, reason="the fork server preloads on Linux only")
def test_a_workloads_model_library_is_imported_before_its_trial_is_forked(tmp_path, db_url):
    """The fork server imports transformers' model code once, for a workload that uses it:
    each gpt2 trial imported some 2,100 modules for itself (3.3 s on an H200 host). A lazy
    `import transformers` in the file alone does not import it."""
    seen = tmp_path / "seen.txt"
    (tmp_path / "uses_transformers.py").write_text(f"""
import sys

import torch
import transformers  # noqa: F401

import advisor


def model():
    open({str(seen)!r}, "w").write(str("transformers.modeling_utils" in sys.modules))
    return torch.nn.Linear(4, 2)


def batch(n, device):
    return torch.randn(n, 4, device=device), torch.zeros(n, dtype=torch.long, device=device)


def workload():
    return advisor.Workload("uses_transformers", model, batch)
""")
    result = api.run(f"{tmp_path / 'uses_transformers.py'}:workload", device="cpu", batch_size=2,
                     db_url=db_url, measure={"max_timed_steps": 3, "max_timed_s": 1})  # fmt: skip
    assert result.status is api.Status.ok, result.failure
    assert "transformers" in dict(result.spec.model.versions)
    assert seen.read_text() == "True"


TALKATIVE = TESTS / "workloads" / "talkative.py"


@pytest.mark.parametrize(
    "verb",
    [
        ["run", "device=cpu", *FAST_OVERRIDES],
        ["estimate", "gpu.memory=1GiB"],
        ["sweep", *SMALL_SPACE, "trials=1"],
    ],
)
def test_what_a_workload_prints_stays_off_the_json(verb, db_url):
    """--json's stdout is the JSON alone: the workload's own prints go to stderr."""
    done = advisor(*verb, f"workload={TALKATIVE}:workload", "batch_size=2", "--json",
                   db_url=db_url)  # fmt: skip
    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)
    assert "number of parameters" in done.stderr


def test_a_model_that_raises_in_its_forward_says_so_in_one_line(db_url):
    done = advisor("run", f"workload={TALKATIVE}:raises_in_forward", "device=cpu",
                   "batch_size=2", "--json", db_url=db_url)  # fmt: skip
    assert done.returncode == 1
    assert json.loads(done.stdout)["status"] == "crashed"
    last = done.stderr.strip().splitlines()[-1]
    assert (
        last == "advisor: the trial crashed: ValueError: decoder_start_token_id has to be defined"
    )


def test_an_estimate_builds_the_model_once_for_all_its_fake_steps(db_url):
    """The largest-batch search takes a dozen fake steps; each gets a copy of one model built
    on the meta device (and the workload's check builds one more): 78 builds before."""
    done = advisor("estimate", f"workload={TALKATIVE}:workload", "batch_size=2", "device=cuda",
                   "gpu.memory=1GiB", db_url=db_url)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("number of parameters") == 2
