"""Trials out of one database and into another: an export (JSON, which imports again; CSV,
for spreadsheets), written whole or not at all, and an import from an export or from another
advisor database, never written to, that stores each trial once (a trial is its spec measured
at a moment: one already here is skipped), all of them or none."""

from __future__ import annotations

import contextlib
import csv
import datetime
import io
import json
import os
import secrets
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any, BinaryIO

from sqlalchemy import insert, select, text
from sqlalchemy.exc import ArgumentError

from advisor import extras
from advisor.errors import ConfigError
from advisor.result import Environment, TrialResult
from advisor.store import rows, schema
from advisor.store.records import from_record, to_record
from advisor.store.store import READ_CHUNK, Store, default_url
from advisor.store.tables import TrialRow
from advisor.store.trial_filter import TrialFilter
from advisor.store.validation import checked

FORMAT = "advisor-trials"  # what an export says it is
FORMATS = (".json", ".csv", ".parquet")
# what an import reads of a database: its measurements on any number of GPUs (a training run
# names an id of its own database)
EVERY_MEASUREMENT = TrialFilter(gpus=None)
_IMPORT_LOCK = 0x61647631  # a PostgreSQL advisory lock: "adv1"; a second import waits for it


def export(results: Sequence[TrialResult], path: Path) -> None:
    """Write the trials to path (.json, .csv or .parquet), whole or not at all: into a file of
    its own beside path, made anew (never a file or link already there), then renamed over
    path. ConfigError in one line where it cannot be written (a read-only folder, a full
    disk); nothing is left behind."""
    if path.suffix not in FORMATS:
        raise ConfigError(
            f"out={path}: export writes .json (imports again), .csv or .parquet, not that"
        )
    if path.suffix == ".parquet":
        extras.require("pyarrow", f"out={path}")
    try:
        with _replacing(path) as file:
            if path.suffix == ".parquet":  # a column per figure, as the CSV, typed
                import pyarrow
                import pyarrow.parquet

                table = (
                    pyarrow.Table.from_pylist(_flat_rows(results)) if results else pyarrow.table({})
                )
                pyarrow.parquet.write_table(table, file)
            elif path.suffix == ".json":
                file.write(json.dumps(document([to_record(r) for r in results])).encode())
            else:
                flat = _flat_rows(results)
                columns = list(dict.fromkeys(key for row in flat for key in row))
                lines = io.StringIO(newline="")
                writer = csv.DictWriter(lines, fieldnames=columns)
                writer.writeheader()
                writer.writerows(flat)
                file.write(lines.getvalue().encode())
    except OSError as error:
        raise ConfigError(
            f"out={path} cannot be written ({error.strerror or error}); name a "
            "file in a folder you can write, with room for it"
        ) from None


def document(records: list[dict[str, Any]]) -> dict[str, Any]:
    """An export of trials' records, as JSON holds it (advisor import reads it)."""
    return {"format": FORMAT, "version": 1, "trials": records}


@contextlib.contextmanager
def _replacing(path: Path) -> Iterator[BinaryIO]:
    """A new file beside path, renamed over it once written (a link at path is replaced, not
    written through); removed if anything fails. Made with O_EXCL under a name of its own: a
    file or link already there (an OUT.part to elsewhere) is never opened, let alone written."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    while True:
        partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}.part")
        try:
            descriptor = os.open(partial, flags, 0o666)  # (less the umask, as any new file)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(descriptor, "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())  # (whole on disk before it takes path's name)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def _flat_rows(results: Sequence[TrialResult]) -> list[dict[str, Any]]:
    """One flat row per trial, every row with every column (None where a trial has none)."""
    flat = [dict(_flat(r.to_dict())) for r in results]
    columns = list(dict.fromkeys(key for row in flat for key in row))
    return [{column: row.get(column) for column in columns} for row in flat]


def import_into(source: str, url: str | None) -> tuple[int, int]:
    """Store the trials of an export (FILE.json) or of another advisor database (a SQLite file
    or a URL) that are not in the database at url yet: (stored, already here). All are read and
    checked before anything is written (a bad one is a ConfigError naming it, and nothing is
    stored), then stored in one transaction. The source is only read. Their sweeps stay
    behind: a sweep belongs to the database it ran on. Another application's SQLite file at url
    is refused (ConfigError) and left as it is."""
    trials = _trials_of(source)  # (first: a bad source leaves no new database behind)
    url = url or default_url()
    _require_advisors(url)
    store = Store(url)
    return store.retried(lambda: _store_new(store, trials))


def _require_advisors(url: str) -> None:
    """ConfigError where url names a SQLite file of another application: opening it to store
    would give it advisor's tables and switch it to WAL (what the reading verbs refuse too). A
    file that is not there, or holds no tables, becomes advisor's database."""
    try:
        file = schema.sqlite_file(url) if url.startswith("sqlite") else None
    except ArgumentError:
        return  # (Store says what is wrong with it)
    if file is None or not file.is_file():
        return
    try:
        tables = schema.tables_of(file)
    except sqlite3.Error as error:
        raise schema.why_unusable(url, error) from None
    if tables:
        todo = "import into advisor's database, or a file that is not there yet (db_url=)"
        schema.require_advisors(tables, f"the database {schema.shown(url)}", todo)


def _store_new(store: Store, results: list[TrialResult]) -> tuple[int, int]:
    """Store the trials not stored yet (one is its spec measured at a moment, in UTC whatever
    zone its time was written in): (stored, already here). All of them in one transaction, or
    none; begun IMMEDIATE (on PostgreSQL, under an advisory lock), so that an import beside it
    waits for it and then finds its trials here, rather than failing ("database is locked") or
    storing them twice."""
    skipped = 0
    with store.reading_then_writing.begin() as session:
        if store.engine.dialect.name == "postgresql":
            session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _IMPORT_LOCK})
        hashes = sorted({r.spec.hash for r in results})
        here: set[tuple[str, datetime.datetime]] = set()
        for start in range(0, len(hashes), READ_CHUNK):
            query = select(TrialRow.spec_hash, TrialRow.created_at).where(
                TrialRow.spec_hash.in_(hashes[start : start + READ_CHUNK])
            )
            here |= {(h, rows.utc(when)) for h, when in session.execute(query)}
        environments: dict[Environment, int] = {}
        new: list[dict[str, object]] = []
        for result in results:
            assert result.created_at is not None
            created = rows.moment(result.created_at)
            if (result.spec.hash, created) in here:
                skipped += 1
                continue
            here.add((result.spec.hash, created))
            if (env := result.environment) is not None and env not in environments:
                row = rows.environment_row(session, env)
                session.add(row)
                session.flush()
                environments[env] = row.id
            environment = None if env is None else environments[env]
            new.append({**rows.trial_columns(result, created), "environment_id": environment})
        if new:
            session.execute(insert(TrialRow), new)
        stored = len(new)
    return stored, skipped


def _trials_of(source: str) -> list[TrialResult]:
    path = Path(source)
    if path.suffix == ".json":
        return _from_export(path)
    if "://" in source:
        try:
            file = schema.sqlite_file(source)
        except ArgumentError:
            raise ConfigError(
                f"{source} is not a database URL: a SQLite file is "
                "sqlite:///PATH, PostgreSQL postgresql://HOST/DATABASE"
            ) from None
        if file is None and source.startswith("sqlite"):
            raise ConfigError(
                f"{source} names no file: import takes an export (.json), a "
                "SQLite file or a database URL"
            )
        if file is None:  # a server's database: read as it is (an older schema is refused)
            return _checked(Store(source, read_only=True).trials(where=EVERY_MEASUREMENT), source)
        path = file
    if not path.is_file():
        raise ConfigError(f"{path}: no such file; import takes an export (.json) or a database")
    return _checked(_from_sqlite(path), source)


def _from_sqlite(path: Path) -> list[TrialResult]:
    """The trials of an advisor SQLite database, read from a copy (opening a database of an
    older schema upgrades it: the copy is, the source is not). The source is read once, as it
    is (schema.read_once), and copied by sqlite3's backup (the file alone can miss what its
    write-ahead log holds)."""
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / "source.sqlite"
        try:
            todo = "import takes an export (.json) or advisor's database"
            schema.require_advisors(schema.tables_of(path), str(path), todo)
            with closing(sqlite3.connect(copy)) as target:
                schema.read_once(path, lambda source: source.backup(target))
                found = target.execute("SELECT version_num FROM alembic_version").fetchall()
        except sqlite3.Error as error:
            raise ConfigError(
                f"{path}: cannot be read as a SQLite database ({error}); import "
                "takes an export (.json) or a database"
            ) from None
        stamped = [revision for (revision,) in found]
        newer = schema.newer_advisors(str(path), stamped, "upgrade advisor to import it")
        if newer is not None:  # (said here, of the source: opening the copy names the copy)
            raise newer
        store = Store(f"sqlite:///{copy}")
        try:
            return store.trials(where=EVERY_MEASUREMENT)
        finally:
            store.engine.dispose()


def _checked(results: list[TrialResult], source: str) -> list[TrialResult]:
    """Each trial of a database checked (validation.checked), before any is stored."""
    kept = []
    for result in results:
        try:
            kept.append(checked(result))
        except ValueError as error:
            raise ConfigError(
                f"{source}: its trial {result.id} cannot be imported ({error}); "
                "nothing was imported: correct it there, or export the others "
                "and import that"
            ) from None
    return kept


def _from_export(path: Path) -> list[TrialResult]:
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError("not an advisor export")
        records = data["trials"]
        if not isinstance(records, list):
            raise ValueError("its trials are not a list")
    except (OSError, ValueError, KeyError, TypeError) as error:
        said = schema.said_by_database(error)
        raise ConfigError(f"{path}: cannot be imported ({said}); give an export made by "
                          "advisor export out=FILE.json, or a database") from None  # fmt: skip
    results = []
    for number, record in enumerate(records, 1):
        try:
            if not isinstance(record, dict):
                raise ValueError(f"it is {type(record).__name__}, not an object")
            results.append(checked(from_record(record)))
        except (KeyError, ValueError, TypeError) as error:
            said = f"it has no {error.args[0]!r}" if isinstance(error, KeyError) else str(error)
            raise ConfigError(
                f"{path}: trial {number} of {len(records)} cannot be imported "
                f"({said}); nothing was imported: correct it or leave it out, "
                "or export again with advisor export out=FILE.json"
            ) from None
    return results


def _flat(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """A nested dict as dotted columns: memory.device_peak_bytes, spec.batch_size."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _flat(inner, f"{prefix}{key}.")
    else:
        yield prefix.rstrip("."), value
