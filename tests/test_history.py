"""advisor history's filters: workload, GPU, torch version, dates and sweep, beside the model
and status; and a limit that says when more rows match than it shows."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
import subprocess

import pytest
from fake_backend import ENVIRONMENT, fake_result
from rich.console import Console
from test_cli import ADVISOR, advisor

from advisor.config import load, trial_spec
from advisor.report.tables import compare_table
from advisor.result import Environment
from advisor.store.store import Store
from advisor.store.sweeps import Sweep
from advisor.store.trial_filter import TrialFilter

UTC = datetime.UTC


def stored(db_url: str):
    """Four trials: two GPUs, two torch versions, two days; the last two in a sweep."""
    store = Store(db_url)
    h200 = ENVIRONMENT
    a100 = dataclasses.replace(ENVIRONMENT, device_name="NVIDIA A100-SXM4-40GB", torch="2.10.0")
    h200_new = dataclasses.replace(ENVIRONMENT, device_name="NVIDIA H200", torch="2.11.0")
    rows = []
    for i, (batch, env, day) in enumerate(
        [(16, a100, 29), (32, a100, 30), (64, h200_new, 30), (128, h200, 1)]
    ):
        spec = trial_spec(load(["model=tiny_mlp", "device=cpu", f"batch_size={batch}"]))
        when = datetime.datetime(2026, 12 if day == 1 else 11, day, 10, i, tzinfo=UTC)
        result = dataclasses.replace(fake_result(spec), environment=env,
                                     created_at=when.isoformat())  # fmt: skip
        rows.append(store.add(result))
    sweep = store.open_sweep(Sweep("s" * 32, "tiny_mlp", "t", 2**30, 0.05, None))
    for r in rows[2:]:
        store.link(sweep.id or 0, r.id or 0, reused=False)
    return store, [r.id for r in rows], sweep.id


def test_each_filter_finds_its_trials(db_url):
    store, ids, sweep_id = stored(db_url)

    def found(**where) -> list[int | None]:
        return [r.id for r in store.trials(where=TrialFilter(**where))]

    assert found() == ids[::-1]  # newest first
    assert found(gpu="a100") == [ids[1], ids[0]]  # any case, part of the name
    assert found(gpu="H200") == [ids[3], ids[2]]  # "FAKE H200" and "NVIDIA H200"
    assert found(torch="2.10") == [ids[1], ids[0]]  # by its parts: 2.10.0
    assert found(torch="2.11") == [ids[2]] and found(torch="2.1") == []
    day = datetime.datetime(2026, 11, 30, tzinfo=UTC)
    assert found(since=day) == [ids[3], ids[2], ids[1]]
    assert found(since=day, until=day + datetime.timedelta(days=1)) == [ids[2], ids[1]]
    assert found(sweep_id=sweep_id) == [ids[3], ids[2]]
    assert found(workload="advisor.catalog.classifier") == ids[::-1]  # a bundled one's source
    assert found(workload="catalog.classifier") == ids[::-1]  # its end
    assert found(workload="catalog") == []  # the end of the source, not any part of the JSON
    assert found(workload="tiny_mlp") == []  # a name is model=, not a source


def test_history_in_python_takes_the_commands_filters(db_url):
    from advisor import ConfigError, Status, history

    _, ids, sweep_id = stored(db_url)
    assert [r.id for r in history(db_url=db_url)] == ids[::-1]  # all, not the command's 20
    assert [r.id for r in history(db_url=db_url, status=Status.ok, sweep=sweep_id)] == [
        ids[3], ids[2]
    ]  # fmt: skip
    since = datetime.datetime(2026, 11, 30, tzinfo=UTC)
    assert [r.id for r in history(db_url=db_url, since=since)] == [ids[3], ids[2], ids[1]]
    assert [r.id for r in history(db_url=db_url, gpu="a100", since="2026-11-30")] == [ids[1]]
    assert [r.id for r in history(db_url=db_url, sweep=sweep_id, limit=1)] == [ids[3]]
    with pytest.raises(ConfigError, match="unknown filter 'device'"):
        history(db_url=db_url, device="h200")
    with pytest.raises(ConfigError, match="gpus must be a number of GPUs, got 'h200'"):
        history(db_url=db_url, gpus="h200")  # (a job's GPUs, not the device's name: gpu=)
    assert [r.id for r in history(db_url=db_url, gpus=1, limit=1)] == [ids[3]]
    assert history(db_url=db_url, gpus=8) == []
    with pytest.raises(ConfigError, match="gpus must be a number of GPUs, 1 or more, got '0'"):
        history(db_url=db_url, gpus=0)


def test_the_command_filters_and_says_when_it_shows_fewer_than_match(db_url):
    _, ids, sweep_id = stored(db_url)
    run = advisor("history", "gpu=a100", "since=2026-11-30", "--json", db_url=db_url)
    assert run.returncode == 0, run.stderr
    assert [r["id"] for r in json.loads(run.stdout)] == [ids[1]]
    assert "more match" not in run.stderr
    few = advisor("history", "limit=2", f"sweep={sweep_id}", "--json", db_url=db_url)
    assert len(json.loads(few.stdout)) == 2 and "more match" not in few.stderr
    cut = advisor("history", "limit=3", "--json", db_url=db_url)
    assert len(json.loads(cut.stdout)) == 3
    assert "the newest 3 shown; more match (limit=0 for all)" in cut.stderr
    for bad, said in [("since=yesterday", "since must be an ISO date or time"),
                      ("sweep=one", "sweep must be a sweep's id"),
                      ("gpus=h200", "gpus must be a number of GPUs, got 'h200'"),
                      ("device=h200", "unknown filter 'device=h200'")]:  # fmt: skip
        wrong = advisor("history", bad, db_url=db_url)
        assert wrong.returncode == 2 and wrong.stderr.startswith(f"advisor: {said}")
        assert len(wrong.stderr.strip().splitlines()) == 1


def test_the_history_table_reads_at_80_columns(db_url):
    """Piped output and a default terminal are 80 columns: each trial's date, status, rate and
    code stay whole on its first line and its setting whole on the next; the device joins the
    first line where it fits (else the caption says where it is), and the setting joins it on
    a terminal wide enough for all."""
    from rich.console import Console

    from advisor.report.tables import history_table
    from advisor.report.terminal import describe, rate
    from advisor.result import TimingStop

    store, ids, _ = stored(db_url)
    results = [store.get(i) for i in ids]
    for width in (80, 110, 160):
        console = Console(width=width, record=True)
        console.print(history_table(results, console.width))
        lines = console.export_text().splitlines()
        assert max(map(len, lines)) <= width
        rows = [line for line in lines if line.strip().split(" ")[0].isdigit()]
        assert len(rows) == len(results)  # each trial's first line: id, date, status, rate, code
        for row, r in zip(rows, results, strict=True):
            assert r.created_at[:16].replace("T", " ") in row and " ok " in row
            assert rate(r.throughput) in row and r.spec.model.fingerprint[:8] in row
            # (NVIDIA A100-SXM4-40GB leaves the figures no room at 80 columns)
            assert (r.environment.device_name in row) == (width > 80)
            assert (describe(r) in row) == (width == 160)
        text = "\n".join(lines)
        assert ("device: on a wider terminal, or with --json" in text) == (width == 80)
        assert "≤" not in text  # no rate is a cut's bound: nothing to explain
        if width < 160:  # each setting whole, on the line after its trial's figures
            settings = [lines[lines.index(row) + 1].strip() for row in rows]
            assert settings == [describe(r) for r in results]
    # every knob set: the longest setting, whose words once ended in "expandable_segme…"
    knobs = ["model=resnet50", "device=cpu", "batch_size=64", "grad_accum=4", "precision=bf16",
             "optimizer=adamw_fused", "checkpointing=blocks", "channels_last=true",
             "compile=true", "expandable_segments=true"]  # fmt: skip
    busiest = dataclasses.replace(results[0], spec=trial_spec(load(knobs)))
    console = Console(width=80, record=True)
    console.print(history_table([busiest], console.width))
    text = console.export_text()
    assert "…" not in text and "device peak" in text
    assert "expandable_segments" in text and "adamw_fused" in text
    t = results[0].throughput
    cut = dataclasses.replace(results[0], throughput=dataclasses.replace(t, stopped=TimingStop.cut))
    console = Console(width=160, record=True)
    console.print(history_table([cut, *results[1:]], console.width))
    text = console.export_text()
    assert f"≤{rate(t)}" in text and "≤: timing cut short" in text


def test_history_show_compare_sweeps_and_recommend_read_at_80_columns(db_url):
    """A newcomer's terminal, 80 columns: a tiny model's parameters were "0.0 MiB", history
    hid the code column README speaks of, and phrases broke mid-way ("10 timed / steps")."""
    store = Store(db_url)
    spec = trial_spec(load(["model=tiny_mlp", "device=cpu"]))
    fake = fake_result(spec)
    kib = dataclasses.replace(fake.memory, params_bytes=852 * 2**10, grads_bytes=852 * 2**10)
    trial = store.add(dataclasses.replace(fake, memory=kib))
    other = store.add(fake_result(trial_spec(load(["model=tiny_mlp", "device=cpu",
                                                   "batch_size=64"]))))  # fmt: skip
    sweep = store.open_sweep(Sweep("w" * 32, "tiny_mlp", "64MiB", 64 * 2**20, 0.05, None))
    store.link(sweep.id or 0, trial.id or 0, reused=False)
    env = {**os.environ, "COLUMNS": "80", "ADVISOR_DB_URL": db_url}
    shown = {}
    for verb in (
        ["history"],
        ["show", str(trial.id)],
        ["compare", str(trial.id), str(other.id)],
        ["sweeps"],
        ["recommend", "model=tiny_mlp", "device=cpu", "gpu.memory=80GiB"],
    ):
        done = subprocess.run([ADVISOR, *verb], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        assert max(map(len, done.stdout.splitlines())) <= 80, done.stdout
        assert "0.0 MiB" not in done.stdout
        shown[verb[0]] = done.stdout
    code = spec.model.fingerprint[:8]
    assert "code" in shown["history"].splitlines()[1] and code in shown["history"]
    assert re.search(r"parameters +│ +852\.0 KiB", shown["show"])
    assert "10 timed steps after 3 warm-up" in shown["show"]  # (each phrase whole on a line)
    assert f"code {code}" in shown["show"]  # (its phrase whole on one line)
    assert "expandable segments" in shown["compare"]


def test_show_and_sweeps(db_url):
    _, ids, sweep_id = stored(db_url)
    shown = advisor("show", str(ids[2]), db_url=db_url)
    assert shown.returncode == 0, shown.stderr
    assert "activations" in shown.stdout and "measured on NVIDIA H200" in shown.stdout
    assert "torch 2.11.0" in shown.stdout
    as_json = json.loads(advisor("show", str(ids[2]), "--json", db_url=db_url).stdout)
    assert as_json["id"] == ids[2]
    missing = advisor("show", "999", db_url=db_url)
    assert missing.returncode == 2 and missing.stderr.startswith("advisor: no trial 999 in ")
    listed = json.loads(advisor("sweeps", "--json", db_url=db_url).stdout)
    assert [(s["id"], s["model"], s["trials"]) for s in listed] == [(sweep_id, "tiny_mlp", 2)]


def test_compare_marks_what_differs(db_url):
    _, ids, _ = stored(db_url)
    shown = advisor("compare", str(ids[1]), str(ids[2]), db_url=db_url)
    assert shown.returncode == 0, shown.stderr
    marked = {line.split("│")[2].strip() for line in shown.stdout.splitlines()
              if line.startswith("│ ≠")}  # fmt: skip
    # batch 32 against 64, torch 2.10.0 against 2.11.0, an A100 against an H200, two days
    assert marked == {"batch", "samples/s", "peak allocated", "peak reserved", "device peak",
                      "device name", "torch", "stored (UTC)"}  # fmt: skip
    one = advisor("compare", str(ids[1]), db_url=db_url)
    assert one.returncode == 2
    assert one.stderr.endswith(
        f"compare takes two trial ids or more (advisor history lists them); got {ids[1]}\n"
    )


def test_compare_names_no_cuda_for_a_trial_on_the_cpu():
    """torch's CUDA build once showed as "cuda 13.0" beside a trial that ran on the CPU."""
    specs = [trial_spec(load(["model=tiny_mlp", f"device={d}"])) for d in ("cuda", "cpu")]
    on_gpu = Environment("NVIDIA H200", 2**37, "580.1", "13.0", "2.11.0", "0.1.0", "3.12", "h")
    on_cpu = dataclasses.replace(on_gpu, device_name="AMD EPYC", device_memory_bytes=None,
                                 driver=None)  # fmt: skip
    pairs = enumerate(zip(specs, [on_gpu, on_cpu], strict=True))
    trials = [dataclasses.replace(fake_result(spec), id=i, environment=env)
              for i, (spec, env) in pairs]  # fmt: skip
    console = Console(width=200, record=True)
    console.print(compare_table(trials))
    [cuda] = [line for line in console.export_text().splitlines() if " cuda " in line]
    assert [cell.strip() for cell in cuda.split("│")][-3:-1] == ["13.0", "-"]


def test_export_then_import_merges_each_trial_once(db_url, tmp_path):
    store, ids, _ = stored(db_url)
    out = tmp_path / "h200.json"
    done = advisor("export", f"out={out}", "gpu=h200", db_url=db_url)
    assert done.returncode == 0, done.stderr
    assert "2 trial(s) written" in done.stderr
    other = f"sqlite:///{tmp_path / 'other.sqlite'}"
    first = advisor("import", str(out), db_url=other)
    assert first.returncode == 0 and "2 trial(s) stored, 0 already here" in first.stderr
    again = advisor("import", str(out), db_url=other)
    assert "0 trial(s) stored, 2 already here" in again.stderr
    # from the whole database: the other two are new there, the H200's are not
    source = db_url.removeprefix("sqlite:///")
    merged = advisor("import", source, db_url=other)
    assert "2 trial(s) stored, 2 already here" in merged.stderr
    theirs = {(r.spec.hash, r.created_at, r.samples_per_s) for r in store.trials()}
    mine = {(r.spec.hash, r.created_at, r.samples_per_s) for r in Store(other).trials()}
    assert mine == theirs and len(mine) == 4  # the same trials, figures and times


def test_a_csv_export_has_a_column_per_figure_and_a_bad_import_is_one_line(db_url, tmp_path):
    import csv

    stored(db_url)
    out = tmp_path / "all.csv"
    assert advisor("export", f"out={out}", db_url=db_url).returncode == 0
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 4 and {"spec.batch_size", "memory.device_peak_bytes"} <= set(rows[0])
    assert sorted(int(r["spec.batch_size"]) for r in rows) == [16, 32, 64, 128]
    (tmp_path / "junk.json").write_text('{"not": "an export"}')
    for args, said in [(["import", str(tmp_path / "junk.json")], "cannot be imported"),
                       (["import", str(tmp_path / "none.sqlite")], "no such file"),
                       (["export", "out=x.xlsx"], "export writes .json"),
                       (["export"], "export needs out=FILE.json")]:  # fmt: skip
        bad = advisor(*args, db_url=db_url)
        assert bad.returncode == 2 and said in bad.stderr, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1


def test_a_parquet_export_has_the_csvs_columns_typed(db_url, tmp_path):
    import pyarrow.parquet

    stored(db_url)
    out = tmp_path / "all.parquet"
    assert advisor("export", f"out={out}", "gpu=a100", db_url=db_url).returncode == 0
    table = pyarrow.parquet.read_table(out)
    assert table.num_rows == 2 and not (tmp_path / "all.parquet.part").exists()
    assert sorted(table.column("spec.batch_size").to_pylist()) == [16, 32]
    assert str(table.schema.field("throughput.samples_per_s").type) == "double"
    assert str(table.schema.field("memory.device_peak_bytes").type) == "int64"


def test_the_verbs_that_read_make_no_database(tmp_path):
    """A mistyped db_url= is said in one line; no empty database is left behind."""
    missing = tmp_path / "typo.sqlite"
    for args in (["history"], ["show", "1"], ["compare", "1", "2"], ["sweeps"],
                 ["export", f"out={tmp_path}/all.json"]):  # fmt: skip
        done = advisor(*args, f"db_url=sqlite:///{missing}")
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.strip() == (f"advisor: no results database at {missing}; measure a "
                                       "trial first, or name one with db_url=")  # fmt: skip
    assert list(tmp_path.iterdir()) == []
