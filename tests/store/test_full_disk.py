"""A measured result is never lost to a full disk (issue 30): a disk without room is refused
before anything is measured; a disk that fills while a trial runs sends its result to the spool,
to the temporary folder where the spool's own folder is on that disk too, and, where nothing can
be written, to stdout as an export. Each case is one line that says where the result went, exit
status 1. A real small disk (tmpfs) in a namespace of the test's own; the real console script."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
from conftest import FAST_OVERRIDES, spec_of
from fake_backend import fake_result
from test_cli import ADVISOR
from untouched import in_a_namespace

from advisor.store import spool
from advisor.store.records import to_record
from advisor.store.store import Store

FILLS_DISK = Path(__file__).parent.parent / "workloads" / "fills_disk.py"
RUN = " ".join(["run", "device=cpu", "batch_size=2", *FAST_OVERRIDES])


def on_a_small_disk(tmp_path: Path, script: str) -> tuple[str, str, Path]:
    """The script run where {small} is a 4 MiB disk holding a results database ({env} names
    it, a spool folder on that disk and a temporary folder, {tmp}, elsewhere); what it printed
    to stdout and stderr, and tmp."""
    small, tmp = tmp_path / "small", tmp_path / "tmp"
    small.mkdir()
    tmp.mkdir()
    url = f"sqlite:///{small / 'results.sqlite'}"
    env = f"ADVISOR_DB_URL={url} ADVISOR_SPOOL_DIR={small / 'spool'} TMPDIR={tmp} COLUMNS=200"
    done = in_a_namespace(
        f"""
        mount -t tmpfs -o size=4m tmpfs {small}
        {sys.executable} -c 'from advisor.store.store import Store; Store("{url}")'
        """
        + script.format(env=env, small=small, tmp=tmp)
    )
    return done.stdout, done.stderr, tmp


FILL = "dd if=/dev/zero of={small}/filler bs=4k 2>/dev/null || true"


def test_a_full_disk_is_refused_before_anything_is_measured(tmp_path):
    """The check before measuring writes and rolls back, which needs no space: with 40 KiB
    free it passed, the trial was measured, its write failed, and so did the spool's on the
    same disk: a 106-line traceback, the measurement lost. With none free the database
    "cannot be opened (disk I/O error)"."""
    out, errors, tmp = on_a_small_disk(tmp_path, f"""
        {FILL}
        truncate -s -40K {{small}}/filler
        {{env}} {ADVISOR} {RUN} model=tiny_mlp 2> {{tmp}}/some.txt || echo "exit $?"
        rm {{small}}/filler
        {FILL}
        {{env}} {ADVISOR} {RUN} model=tiny_mlp 2> {{tmp}}/none.txt || echo "exit $?"
        echo "spooled: $(find {{small}} {{tmp}} -path '*spool*' -name '*.json' | wc -l)"
    """)  # fmt: skip
    assert out.splitlines() == ["exit 1", "exit 1", "spooled: 0"], out + errors
    some = one_line_of(tmp / "some.txt")
    assert "is on a full disk (" in some and "a trial is measured only where 1024 KiB" in some
    none = one_line_of(tmp / "none.txt")
    assert "cannot be written: its disk is full (disk I/O error; 0 KiB free)" in none, none
    assert "free some space, or give another db_url=" in none


def test_a_result_whose_disk_fills_while_measuring_waits_and_is_stored(tmp_path):
    """The disk fills as the trial runs (the workload writes to it): the database and the spool
    folder on it both refuse the result, which waits in the temporary folder, named in one
    line; stored, once, when the database is next opened with room again."""
    out, errors, tmp = on_a_small_disk(tmp_path, f"""
        FILL_DISK={{small}}/filler {{env}} {ADVISOR} {RUN} workload={FILLS_DISK}:workload \\
            2> {{tmp}}/said.txt || echo "exit $?"
        echo "in the spool's folder: $(find {{small}}/spool -type f | wc -l)"
        find {{tmp}} -path '*advisor-spool-*' -name '*.json' -exec cp {{{{}}}} {{tmp}}/kept.json \\;
        rm {{small}}/filler
        {{env}} {ADVISOR} history --json > {{tmp}}/history.json
        {{env}} {ADVISOR} history --json > {{tmp}}/again.json
        echo "still waiting: $(find {{tmp}} -path '*advisor-spool-*' -name '*.json' | wc -l)"
    """)  # fmt: skip
    said = one_line_of(tmp / "said.txt")
    assert "cannot be written: its disk is full" in said, said
    assert out.splitlines() == ["exit 1", "in the spool's folder: 0", "still waiting: 0"], (
        out + errors
    )
    kept = json.loads((tmp / "kept.json").read_text())
    assert f"the trial is kept in {tmp}/advisor-spool-" in said and kept["spec_hash"] in said
    [stored] = json.loads((tmp / "history.json").read_text())
    assert stored["status"] == "ok" and stored["spec"]["model"] == "fills_disk"
    assert same_trial(stored, kept)
    assert len(json.loads((tmp / "again.json").read_text())) == 1


def test_a_sweeps_result_whose_disk_fills_waits_and_is_stored_in_its_sweep(tmp_path):
    """A sweep's trial writes through the same store: its result waits in the temporary folder,
    the sweep ends in one line that says where, and the next opening stores it in its sweep."""
    out, errors, tmp = on_a_small_disk(tmp_path, f"""
        FILL_DISK={{small}}/filler ADVISOR_STUDY_DB_URL=sqlite:///{{tmp}}/optuna.sqlite {{env}} \\
            {ADVISOR} sweep workload={FILLS_DISK}:workload device=cpu gpu.memory=64MiB trials=1 \\
            {" ".join(FAST_OVERRIDES)} 2> {{tmp}}/said.txt || echo "exit $?"
        rm {{small}}/filler
        {{env}} {ADVISOR} sweeps --json > {{tmp}}/sweeps.json
        echo "still waiting: $(find {{tmp}} -path '*advisor-spool-*' -name '*.json' | wc -l)"
    """)  # fmt: skip
    said = (tmp / "said.txt").read_text()
    assert "Traceback" not in said and out.splitlines() == ["exit 1", "still waiting: 0"], (
        out + errors + said
    )
    last = said.strip().splitlines()[-1]
    assert last.startswith("advisor: ") and "cannot be written: its disk is full" in last, said
    assert f"the trial is kept in {tmp}/advisor-spool-" in last, last
    [sweep] = json.loads((tmp / "sweeps.json").read_text())
    assert sweep["trials"] == 1, sweep


def test_a_result_with_nowhere_to_go_is_printed_and_imports(tmp_path):
    """The database's disk full, the spool folder on it, and the temporary folder's spool
    read-only: the result is printed on stdout, as an export, and one line says so; imported
    once the disk has room, it is the trial measured."""
    out, errors, tmp = on_a_small_disk(tmp_path, f"""
        mkdir -m 700 {{tmp}}/advisor-spool-$(id -u)
        mount --bind -o ro {{tmp}}/advisor-spool-$(id -u) {{tmp}}/advisor-spool-$(id -u)
        FILL_DISK={{small}}/filler {{env}} {ADVISOR} {RUN} workload={FILLS_DISK}:workload \\
            > {{tmp}}/printed.json 2> {{tmp}}/said.txt || echo "exit $?"
        echo "left on the disk: $(find {{small}}/spool -type f | wc -l)"
        rm {{small}}/filler
        {{env}} {ADVISOR} import {{tmp}}/printed.json 2>&1
        {{env}} {ADVISOR} history --json > {{tmp}}/history.json
    """)  # fmt: skip
    said = one_line_of(tmp / "said.txt")
    assert "cannot be written: its disk is full" in said, said
    assert out.splitlines() == [
        "exit 1",
        "left on the disk: 0",
        "1 trial(s) stored, 0 already here",
    ], out + errors
    assert "nor can the spool keep the trial (" in said and "No space left on device" in said
    assert "Read-only file system" in said, said
    assert said.endswith("so it is printed on stdout, as an export: save it as FILE.json, and "
                         "store it with advisor import FILE.json")  # fmt: skip
    [printed] = json.loads((tmp / "printed.json").read_text())["trials"]
    [stored] = json.loads((tmp / "history.json").read_text())
    assert printed["status"] == "ok" and same_trial(stored, printed)


def same_trial(stored: dict, record: dict) -> bool:
    """A trial as history shows it is the one a record (the spool's, an export's) held."""
    return (
        stored["spec"]["hash"] == record["spec_hash"]
        and stored["throughput"] == record["throughput"]
        and all(stored["memory"][key] == value for key, value in record["memory"].items())
    )


def one_line_of(path: Path) -> str:
    """What a command said on stderr, held to one line with no traceback."""
    lines = path.read_text().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("advisor: "), path.read_text()
    return lines[0]


def test_the_spools_fallback_is_this_users_own_folder(db_url, tmp_path, monkeypatch):
    """Where the spool's folder cannot be written, a result waits in the temporary folder,
    in a folder of this user's alone: one that others may write is neither written nor read
    (they could put trials into this user's database)."""
    monkeypatch.setenv("ADVISOR_SPOOL_DIR", str(tmp_path / "in-the-way"))
    (tmp_path / "in-the-way").write_text("a file where the spool's folder would be")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    measured = dataclasses.replace(
        fake_result(spec_of("model=tiny_mlp")), created_at="2026-12-01T12:00:00+00:00"
    )
    shared = spool.fallback(db_url).parent
    shared.mkdir(parents=True)
    shared.chmod(0o777)
    planted = spool.fallback(db_url) / "0-planted.json"
    planted.parent.mkdir()
    planted.write_text(json.dumps({**to_record(measured), "sweep_id": None}))
    assert spool.pending(db_url) == []
    with pytest.raises(OSError, match="is not this user's own folder"):
        spool.save(db_url, measured, None)
    shared.chmod(0o700)
    planted.unlink()
    kept = spool.save(db_url, measured, None)
    assert kept.parent == spool.fallback(db_url)
    assert [waiting.path for waiting in spool.pending(db_url)] == [kept]
    assert Store(db_url).unspooled == 1 and spool.pending(db_url) == []


def in_a_small_temporary_folder(tmp_path: Path, script: str) -> tuple[str, Path]:
    """The script run where {tmp}, the temporary folder (TMPDIR), is a 4 MiB disk and the
    results database ({env} names it) is elsewhere, with room; what it printed to stdout, and
    the folder the script's files went to ({said})."""
    tmp, said = tmp_path / "tmp", tmp_path / "said"
    tmp.mkdir()
    said.mkdir()
    env = f"ADVISOR_DB_URL=sqlite:///{tmp_path / 'results.sqlite'} TMPDIR={tmp} COLUMNS=200"
    done = in_a_namespace(
        f"mount -t tmpfs -o size=4m tmpfs {tmp}\n" + script.format(env=env, tmp=tmp, said=said)
    )
    return done.stdout + done.stderr, said


FILLS_THEN_RUNS = """
import subprocess, sys, advisor
from advisor.trial import runner  # (its folder is chosen now: the temporary folder has room)
subprocess.run(["sh", "-c", "dd if=/dev/zero of={tmp}/filler bs=4k 2>/dev/null || true"])
try:
    advisor.run(model="tiny_mlp", overrides=sys.argv[1:])
except advisor.AdvisorError as error:
    print(type(error).__name__, error)
"""


def test_a_full_temporary_folder_is_refused_before_anything_is_measured(tmp_path):
    """The trials run in the temporary folder, chosen when advisor starts (Python passes over
    a TMPDIR that is full then). Filled after that, as in a long sweep, it is one line that
    names it before anything is measured, exit 1 (it was an OSError's traceback); the
    command's and Python's errors are the same."""
    script = FILLS_THEN_RUNS.format(tmp=tmp_path / "tmp")
    out, said = in_a_small_temporary_folder(tmp_path, f"""
        {{env}} {sys.executable} -c '{script}' {RUN.removeprefix("run ")}
        {{env}} {ADVISOR} history --json > {{said}}/history.json
    """)  # fmt: skip
    assert out.startswith("TrialsFolderError the temporary folder "), out
    assert f"folder {tmp_path / 'tmp'} is on a full disk (0 KiB free; a trial needs 1024" in out
    assert out.strip().endswith(
        "the trial was not started; free some space, or set TMPDIR to a folder on another disk"
    )
    assert json.loads((said / "history.json").read_text()) == []


def test_a_trial_whose_temporary_folder_fills_while_measuring_is_stored(tmp_path):
    """The workload fills the temporary folder's disk during its first step: the result's
    file had its room taken before the trial started, so the result is stored."""
    out, said = in_a_small_temporary_folder(tmp_path, f"""
        FILL_DISK={{tmp}}/filler {{env}} {ADVISOR} {RUN} workload={FILLS_DISK}:workload \\
            --json > {{said}}/run.json 2> {{said}}/run.txt || echo "exit $?"
        echo "the filler took over 2 MiB: $(($(stat -c %s {{tmp}}/filler) > 2 << 20))"
        {{env}} {ADVISOR} history --json > {{said}}/history.json
    """)  # fmt: skip
    assert out.splitlines() == ["the filler took over 2 MiB: 1"], (
        out + (said / "run.txt").read_text()
    )
    [stored] = json.loads((said / "history.json").read_text())
    assert stored["status"] == "ok" and stored["spec"]["model"] == "fills_disk"
