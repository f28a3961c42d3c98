"""Import and export as a user meets them (issue 30): an import stores all of a file or none of
it, checks every trial first, adds nothing the second time whatever the time zone, waits for a
concurrent import, and never writes to its source; an export appears whole or not at all and
never follows a link it did not make. Each mistake is one line. The real console script."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import spec_of
from fake_backend import fake_result
from test_cli import ADVISOR, advisor, trial_count
from untouched import (
    another_apps_database,
    files_of,
    in_a_namespace,
    one_line,
    tear_immutable_reads,
)

from advisor.store.records import to_record
from advisor.store.store import Store
from advisor.store.transfer import FORMAT, import_into

SCHEMAS = Path(__file__).parent.parent / "schemas"
SPEC = spec_of("model=tiny_mlp", "batch_size=4")
START = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)


def records(count: int) -> list[dict]:
    """Trials of one spec measured a second apart, as an export holds them."""
    trial = fake_result(SPEC)
    times = (START + datetime.timedelta(seconds=i) for i in range(count))
    return [to_record(dataclasses.replace(trial, created_at=t.isoformat())) for t in times]


def write_export(path: Path, trials: list[dict]) -> Path:
    path.write_text(json.dumps({"format": FORMAT, "version": 1, "trials": trials}))
    return path


def created_times(db_url: str) -> list[str]:
    shown = advisor("history", "limit=0", "--json", db_url=db_url)
    assert shown.returncode == 0, shown.stderr
    return sorted(r["created_at"] for r in json.loads(shown.stdout))


def test_an_import_with_one_bad_trial_stores_none_of_them(db_url, tmp_path):
    """1,500 good trials and one bad: 1,000 were stored, then a traceback."""
    bad = records(1501)
    bad[-1]["created_at"] = 5
    done = advisor("import", str(write_export(tmp_path / "bad.json", bad)), db_url=db_url)
    said = one_line(done, 2)
    assert "trial 1501" in said and "created_at" in said and "nothing was imported" in said
    assert trial_count(db_url) == 0


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("wall_s", "fast", "wall_s is 'fast', not a number"),
        ("created_at", 5, "created_at is 5, not an ISO time"),
        ("created_at", "yesterday", "created_at is 'yesterday', not an ISO time"),
        ("memory.params_bytes", 10**30, "memory.params_bytes is 1000000000000000000000000000000"),
        ("memory.params_bytes", -1, "memory.params_bytes is -1"),
        ("throughput.samples_per_s", float("nan"), "throughput.samples_per_s is nan"),
        ("wall_s", "1e309", "wall_s is inf"),  # (written as the literal 1e309: JSON's inf)
        ("status", "great", "'great' is not a valid Status"),
        ("spec", "{}", "spec is not"),
        ("memory", "x", "memory is 'x', not an object"),
        ("throughput", 5, "throughput is 5, not an object"),
        ("failure", [], "failure is [], not an object"),
        ("environment", "H200", "environment is 'H200', not an object"),
        ("memory.peak_phase", "lunch", "'lunch' is not a valid Phase"),
    ],
)
def test_a_wrong_value_is_one_line_and_nothing_is_stored(db_url, tmp_path, field, value, said):
    """Each was a traceback of 42-122 lines, or stored and later printed as Infinity; a part of
    the trial that is not an object (memory, throughput, failure, environment), an
    AttributeError's."""
    good, bad = records(2)
    *parents, name = field.split(".")
    part = bad
    for parent in parents:
        part = part[parent]
    part[name] = "@@" if value == "1e309" else value
    text = json.dumps({"format": FORMAT, "version": 1, "trials": [good, bad]})
    path = tmp_path / "bad.json"
    path.write_text(text.replace('"@@"', "1e309"))
    line = one_line(advisor("import", str(path), db_url=db_url), 2)
    assert f"{path}: trial 2 of 2 cannot be imported" in line and said in line, line
    assert trial_count(db_url) == 0


def test_a_trial_advisor_stored_imports_again_whatever_nvml_said(tmp_path):
    """Without NVML's per-process figures, a trial's NVML figure is the device's used memory
    less what was used before it (trial/device_memory.py): negative where another process
    freed memory meanwhile. The import's check wanted 0 or more, and refused the whole of
    advisor's own export (or database) for that one trial."""
    trial = fake_result(SPEC)
    assert trial.memory is not None
    memory = dataclasses.replace(trial.memory, nvml_process_bytes=-(2**20))
    ours = f"sqlite:///{tmp_path / 'ours.sqlite'}"
    Store(ours).add(dataclasses.replace(trial, memory=memory, created_at=START.isoformat()))
    out = tmp_path / "out.json"
    assert advisor("export", f"out={out}", db_url=ours).returncode == 0
    for source, into in ((out, "from-export"), (tmp_path / "ours.sqlite", "from-database")):
        theirs = f"sqlite:///{tmp_path / into}.sqlite"
        done = advisor("import", str(source), db_url=theirs)
        assert done.returncode == 0 and "1 trial(s) stored" in done.stderr, done.stderr
        shown = advisor("history", "--json", db_url=theirs)
        assert json.loads(shown.stdout)[0]["memory"]["nvml_process_bytes"] == -(2**20)


def test_times_are_stored_in_utc_and_importing_again_adds_nothing(db_url, tmp_path):
    """`+02:00` was stored shifted by two hours, and each import of it (or of a time that names
    no zone) added another copy."""
    trials = records(3)
    trials[0]["created_at"] = "2026-12-01T12:00:00+02:00"
    trials[1]["created_at"] = "2026-12-01T12:00:00"  # no zone: UTC, as history's since= reads it
    trials[2]["created_at"] = "2026-12-01T05:30:00-05:00"
    path = write_export(tmp_path / "zones.json", trials)
    first = advisor("import", str(path), db_url=db_url)
    assert first.returncode == 0 and "3 trial(s) stored, 0 already here" in first.stderr
    for _ in range(2):
        again = advisor("import", str(path), db_url=db_url)
        assert again.returncode == 0 and "0 trial(s) stored, 3 already here" in again.stderr
    assert created_times(db_url) == [
        "2026-12-01T10:00:00+00:00", "2026-12-01T10:30:00+00:00", "2026-12-01T12:00:00+00:00"
    ]  # fmt: skip
    # the same moments written in other zones are the same trials
    trials[0]["created_at"] = "2026-12-01T10:00:00Z"
    trials[1]["created_at"] = "2026-12-01T13:00:00+01:00"
    moved = advisor("import", str(write_export(tmp_path / "utc.json", trials)), db_url=db_url)
    assert "0 trial(s) stored, 3 already here" in moved.stderr, moved.stderr


def test_two_imports_at_once_store_each_trial_once(tmp_path):
    """The second import's write did not begin IMMEDIATE: one failed with a 116-line
    "database is locked" traceback. Now it waits for the first (up to 19 s, its retries
    included; the first's write takes about a second) and then finds its trials here."""
    db_url = f"sqlite:///{tmp_path / 'results.sqlite'}"
    path = write_export(tmp_path / "many.json", records(4000))
    env = {**os.environ, "ADVISOR_DB_URL": db_url}
    both = [subprocess.Popen([ADVISOR, "import", str(path)], env=env, text=True,
                             stderr=subprocess.PIPE) for _ in range(2)]  # fmt: skip
    said = [(p.wait(), p.stderr.read()) for p in both]  # type: ignore[union-attr]
    for code, stderr in said:
        assert code == 0 and len(stderr.strip().splitlines()) == 1, stderr
    assert trial_count(db_url) == 4000
    assert sorted(stderr.split(" trial(s)")[0] for _, stderr in said) == ["0", "4000"]


def an_older_database(folder: Path) -> Path:
    """An advisor database of schema 0005 (three trials), which opening would upgrade."""
    folder.mkdir()
    return Path(shutil.copy(SCHEMAS / "0005.sqlite", folder / "old.sqlite"))


def a_current_database(folder: Path) -> Path:
    """An advisor database as advisor leaves it: the newest schema, in WAL, closed."""
    folder.mkdir()
    path = folder / "advisor.sqlite"
    assert advisor("import", str(write_export(folder.parent / "3.json", records(3))),
                   db_url=f"sqlite:///{path}").returncode == 0  # fmt: skip
    assert path.read_bytes()[18] == 2 and [p.name for p in folder.iterdir()] == [path.name]
    return path


@pytest.mark.parametrize("as_url", [False, True], ids=["path", "url"])
@pytest.mark.parametrize("made", [an_older_database, a_current_database], ids=["0005", "head"])
def test_an_import_never_writes_to_its_source(db_url, tmp_path, as_url, made):
    """`advisor import sqlite:///other.sqlite` upgraded its source and switched it to WAL; a
    WAL source had a -wal and a -shm file left beside it."""
    source = made(tmp_path / "theirs")
    before = files_of(source.parent)
    name = f"sqlite:///{source}" if as_url else str(source)
    done = advisor("import", name, db_url=db_url)
    assert done.returncode == 0 and "3 trial(s) stored, 0 already here" in done.stderr, done.stderr
    assert files_of(source.parent) == before


def test_a_source_of_a_newer_advisor_is_named_in_its_line(db_url, tmp_path):
    """The line named the temporary copy the import reads (/tmp/.../source.sqlite) and said to
    give another db_url=, which names where the trials go, not where they come from."""
    source = a_current_database(tmp_path / "theirs")
    with sqlite3.connect(source) as connection:
        connection.execute("UPDATE alembic_version SET version_num = '0999'")
    connection.close()
    said = one_line(advisor("import", str(source), db_url=db_url), 1)
    assert said.startswith(f"advisor: {source} was written by a newer advisor (schema 0999"), said
    assert "upgrade advisor to import it" in said and "source.sqlite" not in said, said
    assert "db_url" not in said and trial_count(db_url) == 0


def test_a_source_that_a_writer_tore_is_read_again_with_locks(db_url, tmp_path, monkeypatch):
    """A closed WAL source is read immutable, without locks (none is left beside it), which a
    writer's commit in the middle of it could tear: that was said as a damaged database."""
    source = a_current_database(tmp_path / "theirs")
    tear_immutable_reads(monkeypatch, source)
    assert import_into(str(source), db_url) == (3, 0)


@pytest.mark.parametrize("as_url", [False, True], ids=["path", "url"])
@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_importing_another_apps_database_says_so_and_leaves_it(db_url, tmp_path, as_url, journal):
    source = another_apps_database(tmp_path / "theirs", journal)
    before = files_of(source.parent)
    name = f"sqlite:///{source}" if as_url else str(source)
    said = one_line(advisor("import", name, db_url=db_url), 2)
    assert "is not an advisor results database" in said, said
    assert files_of(source.parent) == before and trial_count(db_url) == 0


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_importing_into_another_apps_database_says_so_and_leaves_it(tmp_path, journal):
    """`advisor import x.json db_url=sqlite:///notes.sqlite` gave another application's file
    advisor's tables and switched it to WAL. An empty file, or none, still becomes advisor's."""
    theirs = another_apps_database(tmp_path / "theirs", journal)
    before = files_of(theirs.parent)
    export = write_export(tmp_path / "in.json", records(2))
    said = one_line(advisor("import", str(export), db_url=f"sqlite:///{theirs}"), 2)
    assert "is not an advisor results database (its tables: notes)" in said, said
    assert files_of(theirs.parent) == before
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    for fresh in (empty, tmp_path / "new" / "results.sqlite"):
        done = advisor("import", str(export), db_url=f"sqlite:///{fresh}")
        assert done.returncode == 0 and "2 trial(s) stored" in done.stderr, done.stderr


def test_importing_from_a_url_to_no_file_creates_none(db_url, tmp_path):
    missing = tmp_path / "theirs" / "typo.sqlite"
    said = one_line(advisor("import", f"sqlite:///{missing}", db_url=db_url), 2)
    assert "no such file" in said and not missing.parent.exists()


def test_an_export_never_follows_a_link_it_did_not_make(db_url, tmp_path):
    """A pre-existing OUT.part symlink was followed, and its target overwritten."""
    advisor("import", str(write_export(tmp_path / "in.json", records(2))), db_url=db_url)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "out.json.part").symlink_to(victim)
    done = advisor("export", f"out={tmp_path / 'out.json'}", db_url=db_url)
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "keep me" and (tmp_path / "out.json.part").is_symlink()
    assert len(json.loads((tmp_path / "out.json").read_text())["trials"]) == 2
    # an OUT that is a link is replaced as a link, not written through
    out = tmp_path / "linked.json"
    out.symlink_to(victim)
    assert advisor("export", f"out={out}", db_url=db_url).returncode == 0
    assert victim.read_text() == "keep me" and not out.is_symlink()


def test_an_export_that_cannot_be_written_is_one_line_and_leaves_nothing(db_url, tmp_path):
    """A read-only folder, /sys and a full disk each left OUT.part behind, and a traceback."""
    advisor("import", str(write_export(tmp_path / "in.json", records(300))), db_url=db_url)
    shut = tmp_path / "shut"
    shut.mkdir()
    small = tmp_path / "small"
    small.mkdir()
    env = f"ADVISOR_DB_URL='{db_url}' COLUMNS=200"
    done = in_a_namespace(f"""
        mount --bind -o ro {shut} {shut}
        mount -t tmpfs -o size=16k tmpfs {small}
        for out in {shut}/out.json {small}/out.json {small}/out.csv {small}/out.parquet; do
            {env} {ADVISOR} export out=$out 2>&1 && exit 9 || echo "exit $?"
        done
        echo "left in small: $(ls -A {small})"
    """)
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 9, done.stdout + done.stderr
    for said, code in zip(lines[0:8:2], lines[1:8:2], strict=True):
        assert said.startswith("advisor: out=") and "cannot be written" in said, said
        assert code == "exit 2", code
    assert "Read-only file system" in lines[0] and "No space left" in lines[2]
    assert lines[8] == "left in small:" and list(shut.iterdir()) == []
    sys_done = advisor("export", "out=/sys/advisor-export.json", db_url=db_url)
    assert "cannot be written" in one_line(sys_done, 2)
    assert not list(Path("/sys").glob("*.part")) and not list(Path("/sys").glob(".*.part"))
