"""Trials out of one database and into another: an export (JSON, which imports again; CSV,
for spreadsheets), and an import from an export or from another advisor database that stores
each trial once (a trial is its spec measured at a moment: one already here is skipped)."""

from __future__ import annotations

import csv
import json
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from advisor import extras
from advisor.errors import ConfigError
from advisor.result import TrialResult
from advisor.store import schema
from advisor.store.records import from_record, to_record
from advisor.store.store import Store

FORMAT = "advisor-trials"  # what an export says it is
FORMATS = (".json", ".csv", ".parquet")


def export(results: Sequence[TrialResult], path: Path) -> None:
    """Write the trials to path (.json, .csv or .parquet), whole or not at all."""
    if path.suffix not in FORMATS:
        raise ConfigError(
            f"out={path}: export writes .json (imports again), .csv or .parquet, not that"
        )
    if path.suffix == ".parquet":
        extras.require("pyarrow", f"out={path}")
    partial = path.with_suffix(path.suffix + ".part")
    if path.suffix == ".parquet":  # a column per figure, as the CSV, typed
        import pyarrow
        import pyarrow.parquet

        table = pyarrow.Table.from_pylist(_rows(results)) if results else pyarrow.table({})
        pyarrow.parquet.write_table(table, partial)
    else:
        with partial.open("w", newline="") as file:
            if path.suffix == ".json":
                json.dump({"format": FORMAT, "version": 1,
                           "trials": [to_record(r) for r in results]}, file)  # fmt: skip
            else:
                rows = _rows(results)
                columns = list(dict.fromkeys(key for row in rows for key in row))
                writer = csv.DictWriter(file, fieldnames=columns)
                writer.writeheader()
                writer.writerows(rows)
    partial.replace(path)


def _rows(results: Sequence[TrialResult]) -> list[dict[str, Any]]:
    """One flat row per trial, every row with every column (None where a trial has none)."""
    rows = [dict(_flat(r.to_dict())) for r in results]
    columns = list(dict.fromkeys(key for row in rows for key in row))
    return [{column: row.get(column) for column in columns} for row in rows]


def import_into(store: Store, source: str) -> tuple[int, int]:
    """Store the trials of an export (FILE.json) or of another advisor database (a SQLite file
    or a URL) that are not here yet: (stored, already here). Their sweeps stay behind: a sweep
    belongs to the database it ran on."""
    return store.add_new(_trials_of(source))


def _trials_of(source: str) -> Iterator[TrialResult]:
    path = Path(source)
    if path.suffix == ".json":
        yield from _from_export(path)
        return
    if "://" in source:
        yield from Store(source).trials()
        return
    if not path.is_file():
        raise ConfigError(f"{source}: no such file; import takes an export (.json) or a database")
    with tempfile.TemporaryDirectory() as folder:  # a copy: opening a database can upgrade it
        copy = Path(folder) / "source.sqlite"
        try:  # (sqlite3's backup: the file alone can miss what its write-ahead log holds)
            with closing(sqlite3.connect(path)) as src, closing(sqlite3.connect(copy)) as dst:
                src.backup(dst)
        except sqlite3.Error as error:
            raise ConfigError(f"{source}: cannot be read as a SQLite database ({error})") from None
        yield from Store(f"sqlite:///{copy}").trials()


def _from_export(path: Path) -> Iterator[TrialResult]:
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError("not an advisor export")
        records = data["trials"]
        results = [from_record(record) for record in records]
    except (OSError, ValueError, KeyError, TypeError) as error:
        said = schema.said_by_database(error)
        raise ConfigError(f"{path}: cannot be imported ({said}); give an export made by "
                          "advisor export out=FILE.json, or a database") from None  # fmt: skip
    yield from results


def _flat(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """A nested dict as dotted columns: memory.device_peak_bytes, spec.batch_size."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _flat(inner, f"{prefix}{key}.")
    else:
        yield prefix.rstrip("."), value
