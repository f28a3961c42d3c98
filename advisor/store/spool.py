"""Trials measured but not stored: when the database refuses the write even after retries, the
result waits here as a JSON file, and is stored the next time advisor opens that database.

A folder per database URL, under the user's data directory (a SQLite file's own folder may be
the one that cannot be written).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
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
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        parsed = parsed.set(database=str(Path(parsed.database).resolve()))
    key = parsed.render_as_string(hide_password=False)
    return Path(root) / "spool" / hashlib.sha256(key.encode()).hexdigest()[:16]


def save(url: str, result: TrialResult, sweep_id: int | None, repeat: bool = False) -> Path:
    """Keep a result for later; written whole or not at all (a temp file, then a rename)."""
    where = folder(url)
    where.mkdir(parents=True, exist_ok=True)
    record = {**to_record(result), "sweep_id": sweep_id, "repeat": repeat}
    name = f"{record['created_at'].replace(':', '')}-{record['spec_hash']}.json"
    path = where / name
    partial = path.with_suffix(".part")
    partial.write_text(json.dumps(record))
    partial.replace(path)
    return path


def pending(url: str) -> list[Spooled]:
    """The results waiting for this database, oldest first."""
    where = folder(url)
    if not where.is_dir():
        return []
    found = []
    for path in sorted(where.glob("*.json")):
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
