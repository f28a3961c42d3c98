"""Opening the results database: the engine, the schema brought to the newest migration (safely
when several processes create one database at once), a reader's opening that cannot write, and
what a database that cannot be used is told as: locked, damaged, read-only, written by a newer
advisor, or not advisor's at all, each in one line."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DatabaseError

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory

from advisor.errors import ConfigError, OlderSchema, StoreError, first_line
from advisor.paths import MIGRATIONS
from advisor.version import version

BUSY_TIMEOUT_S = 5.0  # how long a SQLite writer waits for another's lock before "locked"
# a PostgreSQL advisory lock taken while migrating: concurrent creators wait for each other
_SCHEMA_LOCK = 0x61647669  # "advi"
# The newest migration in MIGRATIONS (a test holds them equal). A database at it is opened
# without importing alembic, which takes 100-200 ms: most of what `advisor history` waited for.
HEAD = "0012"
ADVISORS = {"alembic_version", "trials"}  # the tables that make a database advisor's
READ_ELSEWHERE = "measure a trial first, or name advisor's database with db_url="
# A trial is measured only where the SQLite file's disk has this much free: a trial's write
# adds 20-30 KiB to the WAL, and a write rolled back (check_writable) needs none, so a full
# disk passed that check and the measurement was lost after it (issue 30)
SPACE_FLOOR_BYTES = 1 << 20
_T = TypeVar("_T")


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names (a file: URI's path without its query); None for another
    database, or SQLite in memory."""
    parsed = make_url(url)
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or database in ("", ":memory:"):
        return None
    return Path(database.removeprefix("file:").partition("?")[0])


def engine_for(url: str, read_only: bool = False) -> Engine:
    """An engine for the URL. SQLite: WAL (readers never block the writer), foreign keys, and
    transactions that SQLAlchemy begins itself (pysqlite's own leave DDL outside them, so two
    processes creating one database raced: "table alembic_version already exists", or
    "table environments already exists"). read_only: the file is opened so that it cannot be
    written (read_only_connection): not switched to WAL, not made where it is missing, nor its
    folder."""
    parsed = make_url(url)
    if parsed.drivername == "postgresql":  # psycopg 3 (advisor[postgres]), not psycopg2
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed)
    file = sqlite_file(url)
    if file is not None and read_only:
        engine = create_engine(url, creator=lambda: read_only_connection(file))
    else:
        if file is not None:
            file.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def _pragmas(connection: Any, _: Any) -> None:
        connection.isolation_level = None  # BEGIN is emitted below, for DDL too
        cursor = connection.cursor()
        if not read_only:  # (switching to WAL writes the file's header)
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        # IMMEDIATE takes the write lock at once (waiting BUSY_TIMEOUT_S for it), where a
        # plain BEGIN would fail on a read lock it cannot upgrade
        connection.exec_driver_sql(f"BEGIN {connection.get_execution_options().get('begin', '')}")

    return engine


def read_only_connection(file: Path) -> sqlite3.Connection:
    """A connection to a SQLite file that cannot write it, nor create it (mode=ro). A WAL
    database in a folder that cannot be written (a read-only mount) cannot be opened so: its
    shared-memory file cannot be made there. It is then opened immutable, SQLite's way to read
    such a file: as the file is, without locks (no writer can use that mount either)."""
    connection = _connect(file, "mode=ro")
    try:
        connection.execute("SELECT 1 FROM sqlite_master LIMIT 1")  # (opened at the first read)
    except sqlite3.OperationalError as error:
        connection.close()
        if error.sqlite_errorname != "SQLITE_CANTOPEN" or not file.is_file():
            raise
        return _connect(file, "immutable=1")
    return connection


def read_once(file: Path, read: Callable[[sqlite3.Connection], _T]) -> _T:
    """read(connection) for one read of a SQLite file as it is now (what it holds, an import's
    copy), not for a reader that must see what is written later (the server); the connection
    cannot write, and is closed after. A WAL database that no process has open (no -wal beside
    it: all it holds is in the file) is read immutable, where mode=ro would leave an empty -wal
    and -shm beside it. That read takes no lock: a writer that opened the file just after it was
    looked at could commit in its middle and tear it ("database disk image is malformed"), so
    it is read again with mode=ro, which locks, before the file is said to be damaged."""
    if _in_wal(file) and not file.with_name(f"{file.name}-wal").exists():
        try:
            with closing(_connect(file, "immutable=1")) as connection:
                return read(connection)
        except sqlite3.DatabaseError:
            pass  # (torn, or damaged: read with locks, it says which)
    with closing(read_only_connection(file)) as connection:
        return read(connection)


def _connect(file: Path, mode: str) -> sqlite3.Connection:
    uri = f"file:{quote(str(file.absolute()))}?{mode}"
    return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)


def _in_wal(file: Path) -> bool:
    """Whether a SQLite file's header says WAL (bytes 18 and 19 are 2; 1 for a rollback journal)."""
    try:
        with file.open("rb") as opened:
            return opened.read(20)[18:20] == b"\x02\x02"
    except OSError:
        return False


def tables_of(file: Path) -> list[str]:
    """The tables a SQLite file holds, read once (read_once: nothing is left beside it);
    sqlite3.Error for a file that is no database."""
    query = "SELECT name FROM sqlite_master WHERE type = 'table'"
    found = read_once(file, lambda connection: connection.execute(query).fetchall())
    return sorted(name for (name,) in found)


def require_advisors(tables: list[str], what: str, todo: str) -> None:
    """ConfigError unless these are an advisor database's tables: another application's
    database, or an empty one, is said to be so (`what`: how it is named) and left as it is."""
    if set(tables) >= ADVISORS:
        return
    if not tables:
        raise ConfigError(f"{what} holds no advisor results (it has no tables); {todo}")
    listed = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
    raise ConfigError(
        f"{what} is not an advisor results database (its tables: {listed}); it "
        f"is left as it is: {todo}"
    )


def upgrade(engine: Engine) -> None:
    """Bring the schema to the newest migration, creating it in an empty database. A database
    at the newest migration is only read (a read-only one opens for reading); one whose
    migration this advisor does not know is refused."""
    if _stamped(engine) == HEAD:
        return
    from alembic import command

    config, script = _migrations()
    with engine.connect() as connection:
        if _current(connection, script) == script.get_current_head():
            return
    with engine.connect() as connection:
        connection.execution_options(begin="IMMEDIATE")
        with connection.begin():
            if engine.dialect.name == "postgresql":
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK}
                )
            if _current(connection, script) == script.get_current_head():
                return  # another process created it while this one waited
            config.attributes["connection"] = connection
            command.upgrade(config, "head")


def require_current(engine: Engine) -> None:
    """For a reader that must not write: ConfigError for a database that is not advisor's (an
    empty one too), StoreError for one of a newer advisor, OlderSchema for an older schema."""
    if _stamped(engine) == HEAD:
        return
    tables = inspect(engine).get_table_names()
    require_advisors(tables, f"the database {shown(str(engine.url))}", READ_ELSEWHERE)
    _, script = _migrations()
    with engine.connect() as connection:
        current = _current(connection, script)
    if current != script.get_current_head():
        raise OlderSchema(
            f"the results database {shown(str(engine.url))} is at schema {current or 'none'}, "
            f"not {script.get_current_head()}, and is only read here: open it once with "
            "advisor history to upgrade it"
        )


def _stamped(engine: Engine) -> str | None:
    """The one migration alembic_version names, read plainly; None when there is no such
    table, or not one row (alembic then looks: an empty database, branches)."""
    try:
        with engine.connect() as connection:
            found = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    except DatabaseError as error:
        said = said_by_database(error).lower()
        if "no such table" in said or "does not exist" in said:  # SQLite's words, PostgreSQL's
            return None
        raise  # (a server that cannot be reached is not tried twice)
    return found[0][0] if len(found) == 1 else None


def _migrations() -> tuple[AlembicConfig, ScriptDirectory]:
    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory

    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config, ScriptDirectory.from_config(config)


def shown(url: str) -> str:
    """A database URL as it may be shown: without its password."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def check_writable(engine: Engine) -> None:
    """Prove the write path before a trial is measured: take the write lock and write (a row
    rewritten as itself, rolled back). Raises what the database raises."""
    with engine.connect() as connection:
        connection.execution_options(begin="IMMEDIATE")
        with connection.begin() as transaction:
            connection.execute(text("UPDATE alembic_version SET version_num = version_num"))
            transaction.rollback()


def _current(connection: Connection, script: ScriptDirectory) -> str | None:
    from alembic.runtime.migration import MigrationContext

    heads = MigrationContext.configure(connection).get_current_heads()
    url = connection.engine.url.render_as_string(hide_password=True)
    todo = "upgrade advisor, or give another db_url=..."
    if (newer := newer_advisors(f"the results database {url}", heads, todo, script)) is not None:
        raise newer
    return heads[0] if heads else None


def newer_advisors(
    what: str, revisions: Sequence[str], todo: str, script: ScriptDirectory | None = None
) -> StoreError | None:
    """The one line for a database stamped with a migration this advisor does not know, which
    a newer advisor wrote (`what`: how it is named; `todo`: what to do; `script`: the
    migrations, where the caller has them); None where it knows them all."""
    if all(revision == HEAD for revision in revisions):
        return None  # (without importing alembic)
    script = script or _migrations()[1]
    known = {revision.revision for revision in script.walk_revisions()}
    newer = [revision for revision in revisions if revision not in known]
    if not newer:
        return None
    return StoreError(
        f"{what} was written by a newer advisor (schema {newer[0]}; advisor {version()} knows "
        f"up to {script.get_current_head()}): {todo}"
    )


def free_bytes(url: str) -> int | None:
    """The space left on a SQLite file's disk (for this user); None for another database, or
    where it cannot be told."""
    try:
        file = sqlite_file(url)
        disk = os.statvfs(file.resolve().parent) if file else None
    except (ArgumentError, OSError, AttributeError):  # (no folder yet; no statvfs on Windows)
        return None
    if disk is None or disk.f_blocks == 0:  # (no disk at all: /proc, /sys say 0 of 0 free)
        return None
    return disk.f_bavail * disk.f_frsize


def full_disk(url: str) -> StoreError | None:
    """Before a trial is measured: the one line for a SQLite file whose disk has less than
    SPACE_FLOOR_BYTES free; None where it has enough (or it is another database, whose disk
    cannot be seen from here)."""
    free = free_bytes(url)
    if free is None or free >= SPACE_FLOOR_BYTES:
        return None
    return StoreError(
        f"the results database {shown(url)} is on a full disk ({free // 1024} KiB free; a "
        f"trial is measured only where {SPACE_FLOOR_BYTES // 1024} KiB are, so that its result "
        "can be stored): free some space, or give another db_url=..."
    )


def why_unusable(url: str, error: BaseException, waited_s: float | None = None) -> StoreError:
    """The one line for a database that cannot be opened or written, by what the driver said
    (a full disk is said as such, whatever SQLite calls it: "disk I/O error" where it could not
    make its -shm); `waited_s`: how long a SQLite writer waited for the lock in all (its
    retries included; default, the busy timeout)."""
    said = said_by_database(error)
    lowered = said.lower()
    free = free_bytes(url)
    if "locked" in lowered or "could not obtain lock" in lowered:
        waited_s = BUSY_TIMEOUT_S if waited_s is None else waited_s
        waited = f" (waited {waited_s:g} s)" if url.startswith("sqlite") else ""
        what = f"is locked by another writer{waited}"
        todo = "wait for it to finish, or give another db_url=..."
    elif "not a database" in lowered or "malformed" in lowered:
        what = "is damaged or not a SQLite database"
        todo = "move it aside (advisor starts a new one), or give another db_url=..."
    elif "readonly" in lowered or "read-only" in lowered or "permission denied" in lowered:
        what = "cannot be written (read-only)"
        todo = "make it writable, or give another db_url=..."
    elif "disk is full" in lowered or (free is not None and free < SPACE_FLOOR_BYTES):
        what = "cannot be written: its disk is full"
        said += "" if free is None else f"; {free // 1024} KiB free"
        todo = "free some space, or give another db_url=..."
    else:
        what = "cannot be opened"
        todo = "check it, or give another with db_url=..."
    return StoreError(f"the results database {shown(url)} {what} ({said}): {todo}")


def said_by_database(error: BaseException) -> str:
    """The first line of what the database driver said (SQLAlchemy's message repeats the SQL)."""
    return first_line(getattr(error, "orig", None) or error)
