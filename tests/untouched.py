"""What the tests of the reading verbs, import and export check as a user would meet them: a
failure is one line, and files advisor must leave alone (another application's database, a
folder mounted read-only or a small disk, in a namespace of the test's own) are left as they
were."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest


def one_line(done: subprocess.CompletedProcess[str], code: int | tuple[int, ...] = (1, 2)) -> str:
    """The one line a failure says: `advisor: ...`, exit 1 or 2, no traceback."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode in (code if isinstance(code, tuple) else (code,)), done.stderr
    assert len(lines) == 1 and lines[0].startswith("advisor: "), done.stderr
    return lines[0]


def files_of(folder: Path) -> dict[str, str]:
    """Each file in a folder and a hash of its bytes: what writing to it would change."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


def another_apps_database(folder: Path, journal: str = "delete") -> Path:
    """A SQLite file of another application, in its own journal mode, closed."""
    folder.mkdir(exist_ok=True)
    path = folder / "notes.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute(f"PRAGMA journal_mode={journal}")
        connection.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        connection.execute("INSERT INTO notes (text) VALUES ('mine')")
    connection.close()
    assert [p.name for p in folder.iterdir()] == ["notes.sqlite"]
    return path


def in_a_namespace(script: str) -> subprocess.CompletedProcess[str]:
    """A shell script run as root of a user and mount namespace of its own, where it may mount
    a read-only folder or a small disk that no one else sees."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    done = subprocess.run(["unshare", "-rm", "sh", "-euc", script], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    if "mount:" in done.stderr or "unshare:" in done.stderr:
        pytest.skip(f"cannot mount in a namespace here: {done.stderr.strip()}")
    return done


def tear_immutable_reads(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """Each opening of a SQLite file immutable (without locks) reads, in path's place, path as
    a writer's commit in the middle of such a read could leave it: its first page's tables
    overwritten ("database disk image is malformed"). An opening with locks reads path as it
    is."""
    torn = path.with_name(f"torn-{path.name}")
    page_size = int.from_bytes(path.read_bytes()[16:18], "big")
    data = bytearray(path.read_bytes())
    data[100:page_size] = b"\xff" * (page_size - 100)  # (after the file's 100-byte header)
    torn.write_bytes(data)
    connect = sqlite3.connect

    def tearing(database: str, *args: object, **kwargs: object) -> sqlite3.Connection:
        if "immutable=1" in str(database):
            database = f"file:{torn}?immutable=1"
        return connect(database, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite3, "connect", tearing)
