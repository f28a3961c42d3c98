"""Trials measured but not stored: when the database refuses the write even after retries, the
result waits here as a JSON file, and is stored the next time advisor opens that database.

A folder per database URL, under the user's data directory (a SQLite file's own folder may be
the one that cannot be written); where that folder cannot be written either (the default
database and the spool share a disk, and a full disk refuses both), one of this user's own
under the temporary folder, where the trial's worker has just written the result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import stat
import tempfile
from pathlib import Path

import platformdirs
from sqlalchemy.engine import make_url

from advisor.result import TrialResult
from advisor.store.records import from_record, to_record

_log = logging.getLogger(__name__)
SPOOL_VARIABLE = "ADVISOR_SPOOL_DIR"  # where spooled trials wait (tests point it elsewhere)


@dataclasses.dataclass(frozen=True)
class Spooled:
    path: Path
    result: TrialResult  # with created_at: when it was measured
    sweep_id: int | None  # the sweep it is to be linked to
    repeat: bool  # ... as a repeat of its answer


def folder(url: str) -> Path:
    """The spool of one database, whatever folder the URL was given from (a SQLite path is
    made absolute)."""
    root = os.environ.get(SPOOL_VARIABLE) or platformdirs.user_data_dir("advisor")
    return Path(root) / "spool" / _key(url)


def fallback(url: str) -> Path:
    """Where one database's trials wait when its spool folder cannot be written: under the
    temporary folder (TMPDIR's, read as it is set: tempfile would move on to another where it
    cannot write, and then no later opening would look there)."""
    temporary = os.environ.get("TMPDIR") or tempfile.gettempdir()
    return Path(temporary) / f"advisor-spool-{os.getuid()}" / _key(url)


def _key(url: str) -> str:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        parsed = parsed.set(database=str(Path(parsed.database).resolve()))
    key = parsed.render_as_string(hide_password=False)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def save(url: str, result: TrialResult, sweep_id: int | None, repeat: bool = False) -> Path:
    """Keep a result for later, in the database's spool folder, else in its fallback; written
    whole or not at all (a temp file, then a rename; a part written to a full disk is removed).
    OSError, saying what each place said, where neither can take it."""
    record = {**to_record(result), "sweep_id": sweep_id, "repeat": repeat}
    name = f"{record['created_at'].replace(':', '')}-{record['spec_hash']}.json"
    try:
        return _write(folder(url) / name, json.dumps(record))
    except OSError as error:
        refused = f"{folder(url)}: {error.strerror or error}"
    try:
        _make_private(fallback(url).parent)
        return _write(fallback(url) / name, json.dumps(record))
    except OSError as error:
        raise OSError(f"{refused}; {fallback(url)}: {error.strerror or error}") from None


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".part")
    try:
        partial.write_text(text)
        partial.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise
    return path


def _make_private(root: Path) -> None:
    """The fallback's root, this user's alone (made so where missing): in a shared /tmp,
    another user who made it first could put trials into this user's database."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _private(root):
        raise OSError(f"{root} is not this user's own folder")


def _private(root: Path) -> bool:
    info = root.lstat()
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


def pending(url: str) -> list[Spooled]:
    """The results waiting for this database, in its spool folder and its fallback, oldest
    first."""
    found = []
    places = [folder(url)]
    if fallback(url).parent.is_dir() and _private(fallback(url).parent):
        places.append(fallback(url))
    waiting = [path for where in places if where.is_dir() for path in where.glob("*.json")]
    for path in sorted(waiting, key=lambda path: path.name):
        try:
            record = json.loads(path.read_text())
            found.append(
                Spooled(path, from_record(record), record["sweep_id"], record.get("repeat", False))
            )
        except (ValueError, KeyError, TypeError) as error:  # damaged, or not advisor's
            set_aside(path, f"{type(error).__name__}: {error}")
    return found


def set_aside(path: Path, why: str) -> None:
    """A spooled trial that cannot be stored: renamed to .bad, with why beside it, and logged
    once (a warning reaches stderr); the rest of the spool does not wait on it."""
    path.rename(path.with_suffix(".bad"))
    path.with_suffix(".why").write_text(why + "\n")
    _log.warning(
        "advisor: a spooled trial cannot be stored (%s); set aside as %s",
        why,
        path.with_suffix(".bad"),
    )
