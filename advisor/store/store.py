"""The results database: opening (and migrating) it, writing trials, and queries that return
TrialResults. SQLite (WAL) by default; any SQLAlchemy URL works."""

from __future__ import annotations

import dataclasses
import datetime
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Row, Select, func, select, true
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from advisor.errors import ConfigError, StoreError, TrialNotKept
from advisor.paths import results_dir
from advisor.result import Environment, Kind, TrialResult
from advisor.spec import TrialSpec
from advisor.store import rows, schema, spool
from advisor.store.read_cache import TRIALS_READ
from advisor.store.records import to_record
from advisor.store.sweeps import Sweep, link_trial, sweep_of, sweep_row
from advisor.store.tables import EnvironmentRow, SweepRow, SweepTrialRow, TrialRow
from advisor.store.trial_filter import TrialFilter

WRITE_WAITS_S = (1.0, 3.0)  # a write that fails is tried again after these
_T = TypeVar("_T")
URL_VARIABLE = "ADVISOR_DB_URL"
STUDY_URL_VARIABLE = "ADVISOR_STUDY_DB_URL"

READ_CHUNK = 5_000  # ids in one IN (...) (SQLite's limit on parameters is 32,766)


def default_url() -> str:
    """ADVISOR_DB_URL if set, else advisor.sqlite in results_dir() (a checkout's db/, else
    the user's data directory)."""
    return os.environ.get(URL_VARIABLE) or f"sqlite:///{results_dir() / 'advisor.sqlite'}"


def study_url() -> str:
    """Where Optuna keeps sweeps' studies: ADVISOR_STUDY_DB_URL, else optuna.sqlite beside the
    default results database; never the results database itself (Optuna's tables are its own)."""
    return os.environ.get(STUDY_URL_VARIABLE) or f"sqlite:///{results_dir() / 'optuna.sqlite'}"


def existing(url: str | None, read_only: bool = False) -> Store:
    """The results database for a verb that only reads. It is opened read-only first, so that
    a database that is not advisor's (another application's file, an empty one) is said to be
    so and left as it was, and a read-only one (a WAL file on a read-only mount too) is read. A
    SQLite file that is not there is a ConfigError, not a new empty database (a mistyped db_url=
    left one behind). Unless read_only: advisor's own database of an older schema is upgraded,
    and what the spool kept for it stored, as any opening does where it can write."""
    url = url or default_url()
    file = schema.sqlite_file(url) if url.startswith("sqlite") else None
    if file is not None and not file.is_file():
        raise ConfigError(
            f"no results database at {file}; measure a trial first, or name one with db_url="
        )
    if file is not None:  # (read once: a -wal and -shm are not left beside another's file)
        try:
            tables = schema.tables_of(file)
        except sqlite3.Error as error:
            raise schema.why_unusable(url, error) from None
        schema.require_advisors(tables, f"the database {schema.shown(url)}", schema.READ_ELSEWHERE)
    try:
        reader = Store(url, read_only=True)
    except schema.OlderSchema:
        if read_only:
            raise
        return Store(url)
    if read_only or not spool.pending(url):
        return reader
    try:
        writer = Store(url)
    except StoreError:  # (a read-only database: its spooled trials wait for a writable opening)
        return reader
    reader.engine.dispose()
    return writer


class Store:
    def __init__(self, url: str | None = None, read_only: bool = False) -> None:
        """Open the results database, migrating it to the newest schema and storing what the
        spool kept for it; read_only: neither (one of an older schema is refused)."""
        self.url = url or default_url()
        try:
            try:
                self.engine = schema.engine_for(self.url, read_only)
            except ImportError as error:  # the URL's driver is not installed
                raise StoreError(
                    f"the results database {schema.shown(self.url)} needs a driver that is not "
                    f"installed ({error}): pip install 'advisor[postgres]' for PostgreSQL"
                ) from None
            except ArgumentError:
                raise ConfigError(
                    f"db_url={self.url} is not a database URL: a SQLite file is sqlite:///PATH, "
                    "PostgreSQL postgresql://HOST/DATABASE"
                ) from None
            if read_only:
                schema.require_current(self.engine)
            else:
                schema.upgrade(self.engine)
        except (SQLAlchemyError, OSError) as error:
            raise schema.why_unusable(self.url, error) from None
        self._session = sessionmaker(self.engine, expire_on_commit=False)
        # a write that reads first begins IMMEDIATE on SQLite: in WAL, a transaction that read
        # before another writer committed fails its write at once ("database is locked")
        immediate = self.engine.execution_options(begin="IMMEDIATE")
        self.reading_then_writing = sessionmaker(immediate, expire_on_commit=False)
        self._environment: dict[int, Environment] = {}
        self._lock = threading.Lock()  # (the dashboard reads in several threads)
        self.unspooled = 0 if read_only else self._store_spooled()

    def check_writable(self) -> None:
        """Before a trial is measured: StoreError (one line) unless its result can be stored:
        the database takes a write, and a SQLite file's disk has schema.SPACE_FLOOR_BYTES free
        (the write is rolled back, so it passes on a full disk)."""
        try:
            schema.check_writable(self.engine)
        except SQLAlchemyError as error:
            raise schema.why_unusable(self.url, error) from None
        if (full := schema.full_disk(self.url)) is not None:
            raise full

    def compile_cache(self) -> Path | None:
        """Where torch.compile's cache lives for these results, shared by every trial: beside a
        SQLite file; None (torch's own default) for a database elsewhere."""
        file = self._file()
        return file.parent / "compile-cache" if file else None

    def sweep_plot(self, sweep_id: int) -> Path | None:
        """Where a sweep's plot goes when none is named: plots/DATABASE-sweep-ID.png beside a
        SQLite file (never the current folder); None for a database elsewhere."""
        file = self._file()
        return file.parent / "plots" / f"{file.stem}-sweep-{sweep_id}.png" if file else None

    def _file(self) -> Path | None:
        file = schema.sqlite_file(self.url)
        return file.resolve() if file else None

    def add(
        self, result: TrialResult, sweep_id: int | None = None, repeat: bool = False
    ) -> TrialResult:
        """Store one trial with its environment, and its link to the sweep that measured it,
        in one transaction: all of it, or nothing (a sweep killed in between would otherwise
        have a trial it does not know it measured); `repeat`: the sweep measured its answer
        again, not a spec of its search. A write that fails is tried again; if it
        still fails, the result goes to the spool (stored on the next open) and StoreError
        says where; where the spool cannot take it either, TrialNotKept holds it."""
        now = datetime.datetime.now(datetime.UTC)
        result = dataclasses.replace(result, created_at=result.created_at or now.isoformat())
        try:
            return _tried_again(lambda: self._insert(result, sweep_id, repeat))
        except OperationalError as error:
            why = schema.why_unusable(self.url, error, _retried_wait_s())
            try:
                kept = spool.save(self.url, result, sweep_id, repeat)
            except OSError as refused:
                raise TrialNotKept(
                    f"{why}; nor can the spool keep the trial ({refused})", to_record(result)
                ) from None
            raise StoreError(
                f"{why}; the trial is kept in {kept} and stored the next time advisor opens "
                "this database"
            ) from None

    def _insert(
        self, result: TrialResult, sweep_id: int | None, repeat: bool = False
    ) -> TrialResult:
        assert result.created_at is not None
        created = rows.moment(result.created_at)
        with self._session.begin() as session:
            row = rows.trial_row(result, created)
            if result.environment is not None:
                row.environment = rows.environment_row(session, result.environment)
            session.add(row)
            session.flush()
            trial_id = row.id
            if sweep_id is not None:
                link_trial(session, sweep_id, trial_id, reused=False, repeat=repeat)
        return dataclasses.replace(result, id=trial_id)

    def _store_spooled(self) -> int:
        """Store what the spool kept for this database (once: a trial already stored, the same
        spec measured at the same moment, is not stored again); how many were stored. What
        still cannot be written stays for the next time."""
        stored = 0
        for kept in spool.pending(self.url):
            try:
                if not self.stored_already(kept.result):
                    self._insert(kept.result, kept.sweep_id, kept.repeat)
                    stored += 1
            except OperationalError:
                break  # the database still refuses writes: they all wait
            except SQLAlchemyError as error:  # this one never will be (its sweep is gone, say)
                spool.set_aside(kept.path, schema.said_by_database(error))
                continue
            kept.path.unlink()
        return stored

    def stored_already(self, result: TrialResult) -> bool:
        """Whether this trial (its spec, measured at the same moment) is stored here."""
        assert result.created_at is not None
        query = select(TrialRow.id).where(
            TrialRow.spec_hash == result.spec.hash,
            TrialRow.created_at == rows.moment(result.created_at),
        )
        with self._session() as session:
            return session.scalar(query) is not None

    def trials(
        self,
        model: str | None = None,
        status: str | None = None,
        spec_hash: str | None = None,
        limit: int | None = None,
        where: TrialFilter | None = None,
    ) -> list[TrialResult]:
        """Stored trials, newest first: those of the model, status and spec hash given, and
        those `where` lets through (by default, advisor's measurements only)."""
        query = select(*rows.TRIAL_COLUMNS).order_by(TrialRow.created_at.desc(), TrialRow.id.desc())
        if model is not None:
            query = query.where(TrialRow.model == model)
        if status is not None:
            query = query.where(TrialRow.status == status)
        if spec_hash is not None:
            query = query.where(TrialRow.spec_hash == spec_hash)
        query = (where or TrialFilter()).apply(query)
        if limit is not None:
            query = query.limit(limit)
        return self._results(query)

    def get(self, trial_id: int) -> TrialResult | None:
        found = self._results(select(*rows.TRIAL_COLUMNS).where(TrialRow.id == trial_id))
        return found[0] if found else None

    def _results(self, query: Select[Any]) -> list[TrialResult]:
        """The trials a query of rows.TRIAL_COLUMNS selects, in its order. Those read before in
        this process are taken from memory (read_cache); the rest are read as plain rows (ORM
        objects took twice as long), with their environments."""
        key_columns = (TrialRow.id, TrialRow.spec_hash, TrialRow.created_at)
        with self._session() as session:
            keys = [
                (i, h, when)
                for i, h, when in session.execute(query.with_only_columns(*key_columns))
            ]
            known = TRIALS_READ.known(self.url, keys)
            missing = [key[0] for key in keys if key not in known]
            fetched: list[Row[Any]] = []
            for start in range(0, len(missing), READ_CHUNK):
                part = missing[start : start + READ_CHUNK]
                fetched += session.execute(select(*rows.TRIAL_COLUMNS).where(TrialRow.id.in_(part)))
            environments = self._environments(session, {row.environment_id for row in fetched})
        read = {(row.id, row.spec_hash, row.created_at):
                rows.trial_of(row._mapping, environments.get(row.environment_id))
                for row in fetched}  # fmt: skip
        TRIALS_READ.keep(self.url, {k: r for k, r in read.items() if r.kind is Kind.measured})
        return [known[key] if key in known else read[key] for key in keys]

    def _environments(self, session: Session, ids: set[int | None]) -> dict[int, Environment]:
        """The environments of these ids, read once each (they never change either)."""
        with self._lock:
            wanted = {i for i in ids if i is not None} - self._environment.keys()
        if wanted:
            query = select(EnvironmentRow).where(EnvironmentRow.id.in_(wanted))
            read = {env.id: Environment(**{name: getattr(env, name) for name in
                                           rows.ENVIRONMENT_FIELDS})
                    for env in session.scalars(query)}  # fmt: skip
            with self._lock:
                self._environment.update(read)
        with self._lock:
            return {i: self._environment[i] for i in ids if i in self._environment}

    def model_names(self) -> list[str]:
        """The names of the models with stored trials."""
        query = select(TrialRow.model).distinct().order_by(TrialRow.model)
        with self._session() as session:
            return list(session.scalars(query))

    def measured_before(self, spec: TrialSpec, device_name: str, torch: str) -> TrialResult | None:
        """The newest ok or oom result of this spec on this kind of device and torch version;
        for a spec under a cap, else of its setting measured without one: below the cap that
        trial ran as it would have under it, and above it the sweep judges the setting over the
        target without trying it under the cap."""
        hashes = [spec.hash] if spec.memory_cap_bytes is None else [spec.hash, spec.uncapped.hash]
        for spec_hash in hashes:
            query = (
                select(*rows.TRIAL_COLUMNS)
                .join(EnvironmentRow, TrialRow.environment_id == EnvironmentRow.id)
                .where(TrialRow.spec_hash == spec_hash, TrialRow.status.in_(["ok", "oom"]))
                .where(TrialRow.kind == Kind.measured.value)  # (a training run is no trial's)
                .where(EnvironmentRow.device_name == device_name, EnvironmentRow.torch == torch)
                .order_by(TrialRow.created_at.desc(), TrialRow.id.desc())
                .limit(1)
            )
            found = self._results(query)
            if found:
                return found[0]
        return None

    def open_sweep(self, sweep: Sweep) -> Sweep:
        """The stored sweep with this key (to resume it, or to join it where another process
        runs it), or this one, stored anew."""
        return self.retried(lambda: self._open_sweep(sweep))

    def _open_sweep(self, sweep: Sweep) -> Sweep:
        query = select(SweepRow).where(SweepRow.key == sweep.key)
        try:
            with self.reading_then_writing.begin() as session:
                row = session.scalar(query)
                if row is None:
                    row = sweep_row(sweep, datetime.datetime.now(datetime.UTC))
                    session.add(row)
                    session.flush()
                return sweep_of(row)
        except IntegrityError:  # another process stored it first: join that one
            with self._session() as session:
                row = session.scalar(query)
                assert row is not None
                return sweep_of(row)

    def link(self, sweep_id: int, trial_id: int, reused: bool) -> None:
        """Record that a sweep used a trial (once; using it again changes nothing)."""
        try:
            with self._session.begin() as session:
                link_trial(session, sweep_id, trial_id, reused)
        except IntegrityError:  # another process of the sweep linked it first
            pass

    def sweep_trials(self, sweep_id: int, repeats: bool = True) -> list[tuple[TrialResult, bool]]:
        """The trials a sweep used, in order (without the answer's repeats where not
        `repeats`), each with whether it was reused from history."""
        query = (
            select(*rows.TRIAL_COLUMNS)
            .join(SweepTrialRow, SweepTrialRow.trial_id == TrialRow.id)
            .where(SweepTrialRow.sweep_id == sweep_id)
            .where(true() if repeats else SweepTrialRow.repeat.is_(False))
            .order_by(SweepTrialRow.position)
        )
        links = select(SweepTrialRow.trial_id, SweepTrialRow.reused).where(
            SweepTrialRow.sweep_id == sweep_id
        )
        used = self._results(query)  # first: a link stored meanwhile is then in the links
        with self._session() as session:
            reused = {trial_id: flag for trial_id, flag in session.execute(links)}
        return [(r, reused[r.id]) for r in used if r.id is not None]

    def sweeps(self) -> list[tuple[Sweep, int]]:
        """Every stored sweep, newest first, with how many trials it used."""
        used = func.count(SweepTrialRow.trial_id)
        query = (
            select(SweepRow, used)
            .outerjoin(SweepTrialRow, SweepTrialRow.sweep_id == SweepRow.id)
            .group_by(SweepRow.id)
            .order_by(SweepRow.id.desc())
        )
        with self._session() as session:
            return [(sweep_of(row), count) for row, count in session.execute(query)]

    def finish_sweep(self, sweep_id: int, stop_reason: str) -> None:
        def write() -> None:
            with self.reading_then_writing.begin() as session:
                row = session.get(SweepRow, sweep_id)
                assert row is not None
                row.stop_reason = stop_reason

        self.retried(write)

    def retried(self, write: Callable[[], _T]) -> _T:
        """A sweep's write (its claims too) or a training run's, tried again as a trial's is:
        another writer may hold the lock past the busy timeout; StoreError in one line if it
        still fails."""
        try:
            return _tried_again(write)
        except OperationalError as error:
            raise schema.why_unusable(self.url, error, _retried_wait_s()) from None


def _retried_wait_s() -> float:
    """How long a write tried again waits for SQLite's lock in all: each try's busy timeout,
    and the waits between."""
    return schema.BUSY_TIMEOUT_S * (len(WRITE_WAITS_S) + 1) + sum(WRITE_WAITS_S)


def _tried_again(write: Callable[[], _T]) -> _T:
    """write(), tried again after each of WRITE_WAITS_S while it fails with OperationalError
    (locked, busy, gone); the last failure is raised."""
    for wait_s in WRITE_WAITS_S:
        try:
            return write()
        except OperationalError:
            time.sleep(wait_s)
    return write()
