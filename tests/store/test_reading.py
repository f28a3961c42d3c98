"""The verbs that only read (history, show, compare, sweeps, and advisor.history) over databases
they must not change (issue 30): another application's file is said to be so in one line and
left as it was, and advisor's own database on a read-only mount is read, in WAL or not. A time
past what a datetime holds is a one-line mistake too. The real console script."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from test_cli import ADVISOR, advisor
from test_history import stored
from untouched import (
    another_apps_database,
    files_of,
    in_a_namespace,
    one_line,
    tear_immutable_reads,
)

from advisor.errors import ConfigError

READING = (["history"], ["show", "1"], ["compare", "1", "2"], ["sweeps"])


def journal_mode(path: Path) -> str:
    """As the file's header says (opening it, even read-only, would leave a WAL's -shm)."""
    return {1: "delete", 2: "wal"}[path.read_bytes()[18]]


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_reading_another_apps_database_says_so_and_leaves_it(tmp_path, journal):
    """`advisor history db_url=<another app's file>` added advisor's six tables to it and
    switched it to WAL; nor is a -wal or -shm file left beside it."""
    theirs = another_apps_database(tmp_path / "theirs", journal)
    before = files_of(theirs.parent)
    for verb in READING:
        said = one_line(advisor(*verb, f"db_url=sqlite:///{theirs}"), 2)
        assert "is not an advisor results database" in said and "notes" in said, said
    assert files_of(theirs.parent) == before and journal_mode(theirs) == journal
    from advisor import history

    with pytest.raises(ConfigError, match="is not an advisor results database"):
        history(db_url=f"sqlite:///{theirs}")
    assert files_of(theirs.parent) == before


def test_reading_an_empty_database_makes_no_tables_in_it(tmp_path):
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    said = one_line(advisor("history", f"db_url=sqlite:///{empty}"), 2)
    assert "holds no advisor results" in said, said
    assert empty.read_bytes() == b"" and [p.name for p in tmp_path.iterdir()] == ["empty.sqlite"]


@pytest.mark.parametrize("wal", [True, False], ids=["wal", "rollback-journal"])
def test_a_read_only_database_is_read_by_every_reading_verb(tmp_path, wal):
    """A WAL database on a read-only mount could not be read by any verb (its -shm cannot be
    made there), though the README says a read-only database can still be read."""
    folder = tmp_path / "results"
    folder.mkdir()
    path = folder / "results.sqlite"
    store, ids, _ = stored(f"sqlite:///{path}")
    store.engine.dispose()  # (its last connection closed: the WAL is folded into the file)
    if not wal:
        with sqlite3.connect(path) as connection:
            connection.execute("PRAGMA journal_mode=DELETE")
        connection.close()
    assert journal_mode(path) == ("wal" if wal else "delete")
    assert sorted(p.name for p in folder.iterdir()) == ["results.sqlite"]  # closed cleanly
    path.chmod(0o444)
    folder.chmod(0o555)
    try:
        env = f"COLUMNS=200 ADVISOR_DB_URL=sqlite:///{path}"
        done = in_a_namespace(f"""
            mount --bind -o ro {folder} {folder}
            for verb in "history --json" "show {ids[0]} --json" "compare {ids[0]} {ids[1]}" \\
                        "sweeps --json"; do
                {env} {ADVISOR} $verb > {tmp_path}/out.txt 2>&1 || echo "failed: $verb"
                cat {tmp_path}/out.txt; echo "==="
            done
        """)
    finally:
        folder.chmod(0o755)
    history, show, compare, sweeps, _ = done.stdout.split("===\n")
    assert "failed" not in done.stdout, done.stdout + done.stderr
    assert sorted(r["id"] for r in json.loads(history)) == sorted(ids)
    assert json.loads(show)["id"] == ids[0] and "trials side by side" in compare
    assert len(json.loads(sweeps)) == 1
    assert sorted(p.name for p in folder.iterdir()) == ["results.sqlite"]


def test_a_read_that_a_writer_tore_is_read_again_with_locks(tmp_path, monkeypatch):
    """advisor's database, closed (WAL, no -wal beside it), is read once immutable, without
    locks: a writer that opened it just after it was looked at could commit in the middle of
    that read, and what SQLite then found ("database disk image is malformed") was said as a
    damaged database. It is read again, with locks."""
    path = tmp_path / "results.sqlite"
    store, ids, _ = stored(f"sqlite:///{path}")
    store.engine.dispose()
    assert journal_mode(path) == "wal" and not path.with_name(f"{path.name}-wal").exists()
    tear_immutable_reads(monkeypatch, path)
    from advisor import history

    assert sorted(r.id for r in history(db_url=f"sqlite:///{path}")) == sorted(ids)


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:30:00+01:00"])
def test_a_time_past_the_calendar_is_one_line(db_url, when):
    """`since=9999-12-31T23:59:59-01:00` was an OverflowError in history, advisor.history() and
    the server's history route (HTTP 500)."""
    stored(db_url)
    for key in ("since", "until"):
        said = one_line(advisor("history", f"{key}={when}", db_url=db_url), 2)
        assert said.startswith(f"advisor: {key} must be a time in the years 1 to 9999"), said
    from advisor import history

    with pytest.raises(ConfigError, match="since must be a time in the years 1 to 9999"):
        history(db_url=db_url, since=when)
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from advisor.service.server import create_app, open_store

    client = TestClient(create_app(open_store(db_url)))
    answer = client.get("/api/v1/trials", params={"since": when})
    assert answer.status_code == 400, answer.text
