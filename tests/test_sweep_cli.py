"""advisor sweep and advisor recommend through the real console script, on the CPU."""

from __future__ import annotations

import json

import torch
from sqlalchemy import create_engine
from test_cli import advisor, trial_count

from advisor.store.store import Store

SWEEP = [
    "sweep",
    "model=tiny_mlp",
    "device=cpu",
    "gpu.memory=12MiB",
    "trials=4",
    "space.batch_sizes=[64,256,1024,4096]",
    "space.precision=[fp32,bf16]",
    "space.grad_accum=[1]",
    "space.compile=[false]",
    "measure.min_timed_steps=3",
    "measure.max_timed_s=0.5",
]
# the baseline inside the space: the sweep recommends from the space alone, `recommend` from
# all that is stored, so a baseline outside it (tiny_mlp's batch 32 at torch's default
# precision) that beats the space on a CPU slow at bf16 would be history's answer
IN_SPACE = ["batch_size=64", "precision=fp32"]


def test_sweep_end_to_end_then_resume_then_recommend(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("ADVISOR_STUDY_DB_URL", f"sqlite:///{tmp_path / 'optuna.sqlite'}")
    png = tmp_path / "sweep.png"
    first = advisor(*SWEEP, *IN_SPACE, f"plot={png}", "--json", db_url=db_url)
    assert first.returncode == 0, first.stderr
    answer = json.loads(first.stdout)
    best = answer["recommendation"]
    assert best["status"] == "ok" and best["memory"]["peak_reserved_bytes"] <= 0.95 * 12 * 2**20
    assert best["throughput"]["samples_per_s"] > 0
    assert answer["target"]["memory_bytes"] == 12 * 2**20
    assert answer["pareto_front"] and answer["sweep"]["stop_reason"].startswith("4 specs measured")
    assert "[1/4 measured" in first.stderr and "best" in first.stderr  # progress as it runs
    assert "measured again (a repeat of the fastest so far) " in first.stderr  # the answer's too
    # each measured setting that fit has its largest batch predicted; the best's is at least its own
    spec = best["spec"]
    ckpt = "" if spec["checkpointing"] == "none" else f", ckpt {spec['checkpointing']}"
    family = f"tiny_mlp on cpu: {spec['precision']}, {spec['optimizer']}{ckpt}"
    ours = [row for row in answer["largest_batches"] if row["setting"] == family]
    assert ours and ours[0]["by"] == "estimate"
    assert ours[0]["largest_batch"] >= best["spec"]["batch_size"]
    assert png.read_bytes()[:4] == b"\x89PNG"
    # the recommended setting measured again, and a third time if the two disagree by over 5%
    repeats = answer["repeats"]
    assert {r["spec"]["hash"] for r in repeats} == {spec["hash"]} and best in repeats
    assert 2 <= len(repeats) <= 3
    assert len(repeats) == 3 or answer["disagreement"] <= 0.05  # two that disagree get a third
    measured = trial_count(db_url)
    with create_engine(db_url).connect() as connection:
        linked = connection.exec_driver_sql("select count(*) from sweep_trials").scalar()
        distinct = connection.exec_driver_sql("select count(distinct spec_hash) from trials")
        assert distinct.scalar() == 4  # the search's 4; the rest measure them again
        searched = connection.exec_driver_sql("select count(*) from sweep_trials where not repeat")
        assert searched.scalar() == 4  # ... and are linked as repeats of the answer
    assert measured >= 4 + len(repeats) - 1
    assert linked == measured  # every trial linked to its sweep

    again = advisor(*SWEEP, *IN_SPACE, "patience=7", f"plot={png}", "--json", db_url=db_url)
    assert again.returncode == 0, again.stderr
    said = " ".join(again.stderr.split())  # (however the terminal wrapped it)
    assert f"resuming sweep {answer['sweep']['id']} (Optuna study 'tiny_mlp for " in said
    assert f"with its {measured} trials; arguments not as when begun: patience=7 now" in said
    assert json.loads(again.stdout)["sweep"]["resumed"]["now"] == ["patience=7"]
    assert trial_count(db_url) == measured  # nothing measured twice
    assert json.loads(again.stdout)["recommendation"] == best

    rec = advisor(
        "recommend", "model=tiny_mlp", "device=cpu", "gpu.memory=12MiB", "--json", db_url=db_url
    )
    assert rec.returncode == 0, rec.stderr
    from_history = json.loads(rec.stdout)
    assert from_history["recommendation"]["id"] == best["id"]
    assert from_history["measured_on"][0].startswith("CPU")
    # it says how often its answer was measured (of the newest load's: perhaps fewer)
    counted = [r["id"] for r in from_history["best_counted"]]
    assert best["id"] in counted and set(counted) <= {r["id"] for r in repeats}
    said = advisor("recommend", "model=tiny_mlp", "device=cpu", "gpu.memory=12MiB", db_url=db_url)
    times = f"measured {len(counted)} times: "
    assert (times in " ".join(said.stdout.split())) == (len(counted) > 1), said.stdout

    table = advisor("recommend", "model=tiny_mlp", "device=cpu", "gpu=t4", db_url=db_url)
    gpu_only = advisor("recommend", "model=tiny_mlp", "gpu=t4", db_url=db_url)
    assert gpu_only.returncode == 2  # CPU runs don't count for a GPU, and it says where they ran
    assert "no ok cuda trial of model 'tiny_mlp' is stored; its trials ran on cpu: device=cpu" in (
        gpu_only.stderr
    )
    assert "recommended:" in table.stdout
    assert (
        "not on t4: the memory that fits transfers (with the same torch version), the rates do not"
        in (table.stdout.replace("\n", " "))
    )


def test_recommend_says_when_history_is_too_thin(db_url, tmp_path):
    missing = tmp_path / "none.sqlite"
    nowhere = advisor("recommend", "model=gpt2", "gpu=a100_40gb", db_url=f"sqlite:///{missing}")
    assert nowhere.returncode == 2 and "no results database at" in nowhere.stderr
    assert not missing.exists()  # none made
    Store(db_url)
    result = advisor("recommend", "model=gpt2", "gpu=a100_40gb", db_url=db_url)
    assert result.returncode == 1
    assert "no recommendation: nothing measured; measure more with advisor sweep" in result.stdout


# on a host without a GPU (this one; on a GPU host these would run)
NO_GPU_CASES = [] if torch.cuda.is_available() else [
    (["model=tiny_mlp", "gpu=a100_40gb"], "advisor: no CUDA GPU here to sweep on (device=auto)"),
]  # fmt: skip


def test_sweep_bad_input_is_one_line(db_url):
    for args, message in [
        (["model=tiny_mlp", "device=cpu"], "advisor: device=cpu has no GPU memory to fit: name"),
        (["model=tiny_mlp", "device=cpu", "gpu.memory=lots"], "advisor: gpu.memory: 'lots' is not"),
        (
            ["model=tiny_mlp", "device=cpu", "gpu.memory=1GiB", "study_db_url=garbage"],
            "advisor: study_db_url: 'garbage' is not a database URL",
        ),
        (
            ["model=tiny_mlp", "device=cpu", "gpu.memory=1GiB", "plot=/no/such/folder/s.png"],
            "advisor: plot=/no/such/folder/s.png: there is no folder /no/such/folder",
        ),
        (
            [
                "model=tiny_mlp",
                "device=cpu",
                "gpu.memory=1GiB",
                "effective_batch_size=7",
                "space.grad_accum=[2,4]",
            ],
            "advisor: no grad_accum in [2, 4] divides",
        ),
    ] + NO_GPU_CASES:
        result = advisor("sweep", *args, db_url=db_url)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(message) and result.stderr.count("\n") == 1
        assert trial_count(db_url) == 0


def test_a_killed_sweep_resumes_without_measuring_anything_twice(db_url, tmp_path):
    import os
    import signal
    import subprocess
    import time

    from test_cli import ADVISOR

    env = {
        **os.environ,
        "ADVISOR_DB_URL": db_url,
        "COLUMNS": "200",
        "ADVISOR_STUDY_DB_URL": f"sqlite:///{tmp_path / 'optuna.sqlite'}",
    }
    args = [ADVISOR, *SWEEP[:4], "trials=5", *SWEEP[5:], f"plot={tmp_path / 's.png'}"]
    sweep = subprocess.Popen(
        args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 120
    while trial_count(db_url) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(sweep.pid, signal.SIGKILL)  # the sweep and the worker it was waiting for
    sweep.wait()
    before = trial_count(db_url)
    assert 2 <= before < 5

    again = advisor(
        *SWEEP[:4], "trials=5", *SWEEP[5:], f"plot={tmp_path / 's.png'}", "--json", db_url=db_url
    )
    assert again.returncode == 0, again.stderr
    assert f"with its {before} trials" in " ".join(again.stderr.split())
    with create_engine(db_url).connect() as connection:
        hashes = [h for (h,) in connection.exec_driver_sql("select spec_hash from trials")]
    # The search's 5 measurements (the budget spans both runs) are 5 specs: nothing twice. The
    # rest measure candidate answers again, on purpose.
    assert len(set(hashes)) == 5


def test_two_workers_on_the_cpu_share_one_sweep(db_url, tmp_path):
    """... and, with no plot= named, its plot goes beside a SQLite database (none for a
    database elsewhere), not into the current folder."""
    study = f"study_db_url=sqlite:///{tmp_path / 'optuna.sqlite'}"
    cwd = tmp_path / "here"
    cwd.mkdir()
    result = advisor(*SWEEP, "workers=2", study, "--json", db_url=db_url, cwd=cwd)
    assert result.returncode == 0, result.stderr
    assert "up to 2 trials at a time" in result.stderr
    answer = json.loads(result.stdout)
    assert answer["sweep"]["workers"] == 2 and answer["recommendation"]["status"] == "ok"
    assert list(cwd.iterdir()) == []
    if db_url.startswith("sqlite"):
        plot = tmp_path / "plots" / f"results-sweep-{answer['sweep']['id']}.png"
        assert answer["sweep"]["plot"] == str(plot) and plot.stat().st_size > 0
    else:
        assert answer["sweep"]["plot"] is None
    with create_engine(db_url).connect() as connection:
        hashes = [h for (h,) in connection.exec_driver_sql("select spec_hash from trials")]
    # the search's 4 measurements, shared by both workers, are 4 specs: nothing twice (the rest
    # measure candidate answers again, on purpose)
    assert len(set(hashes)) == 4


def test_workers_must_be_auto_or_a_count(db_url):
    for value, message in [
        ("0", "advisor: workers must be auto or a whole number of at least 1, got '0'"),
        ("many", "advisor: workers must be auto or a whole number of at least 1, got 'many'"),
    ]:
        result = advisor(*SWEEP[:4], f"workers={value}", db_url=db_url)
        assert result.returncode == 2 and result.stderr.startswith(message), result.stderr
        assert result.stderr.count("\n") == 1 and trial_count(db_url) == 0
