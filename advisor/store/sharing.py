"""One sweep run by several processes at once: the same command started again while it runs, on
this host (another GPU) or on others sharing one database. Each spec a process measures is
claimed first in the results database, so no other measures it too, and each process reads what
the others stored before it decides what to measure next. A claim lives while its owner's
heartbeat does; one whose owner died (its heartbeat stopped, or, on this host, its process is
gone) is taken over."""

from __future__ import annotations

import datetime
import os
import secrets
import socket
import threading
from collections.abc import Callable
from typing import Protocol

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import sessionmaker

from advisor.result import TrialResult
from advisor.store import schema
from advisor.store.store import Store
from advisor.store.tables import SweepClaimRow

HEARTBEAT_S = 10.0  # how often a process says its claims are alive
STALE_S = 60.0  # a claim whose heartbeat is older than this was left by a process that died
PRESENT = "present-"  # the key of the claim that says a process runs the sweep, from its start


class Others(Protocol):
    """Other processes running this sweep, as the search sees them."""

    owner: str  # this process, as its claims and Optuna trials name it

    # whether a trial still running, asked by `owner` at `started`, was left by one that died
    def abandoned(self, owner: str, started: datetime.datetime | None) -> bool: ...
    def take(self, key: str) -> bool: ...  # claim a spec's hash; False: another measures it
    def drop(self, key: str) -> None: ...
    def busy(self) -> set[str]: ...  # what the others are measuring now
    def news(self) -> list[tuple[TrialResult, bool]]: ...  # stored since asked, (result, reused)


class Alone:
    """No other process runs this sweep."""

    owner = ""

    def abandoned(self, owner: str, started: datetime.datetime | None) -> bool:
        return True  # any trial still running was left by an earlier, interrupted run

    def take(self, key: str) -> bool:
        return True

    def drop(self, key: str) -> None:
        pass

    def busy(self) -> set[str]:
        return set()

    def news(self) -> list[tuple[TrialResult, bool]]:
        return []


class SharedSweep:
    """Others, through the results database."""

    def __init__(
        self,
        store: Store,
        sweep_id: int,
        seen: Callable[[TrialResult], TrialResult] = lambda result: result,
    ) -> None:
        self.store, self.sweep_id = store, sweep_id
        self.seen = seen  # what the search sees of a stored trial (a rank's as its whole job)
        self.host = this_host()
        token = secrets.token_hex(8)
        self.owner = f"{self.host}:{os.getpid()}:{token}"
        # writes begin IMMEDIATE on SQLite, so that reading a claim and writing one are one step
        self._session = store.reading_then_writing
        self._read = sessionmaker(store.engine)
        self._seen: set[int] = set()  # trial ids already handed out by news()
        self._stop = threading.Event()
        self._heart = threading.Thread(target=self._beat, daemon=True)
        # present before this process asks Optuna for a trial (see abandoned()); the presence
        # of processes that died is cleared, as no later one takes their keys
        self.take(PRESENT + token)
        self._clear_dead_presence()
        self._heart.start()

    def abandoned(self, owner: str, started: datetime.datetime | None) -> bool:
        """Whether a trial still running was left by a process that died: on this host, its
        process is gone; elsewhere, it is older than STALE_S and its owner holds no live claim.
        A trial that names no owner was asked a moment ago, or by one killed between asking and
        naming itself: it is abandoned when older than STALE_S, or when no other process is
        present (each is present before it asks, and the trial was read before this call; an
        advisor from before presence, sharing the sweep, would lose the trial it just asked).
        `started` is Optuna's, in the asking host's local time: hosts' clocks must agree."""
        started = started or datetime.datetime.now()
        young = (datetime.datetime.now() - started).total_seconds() < STALE_S
        if owner.count(":") != 2:
            return not young or not self._others_present()
        host, pid, _ = owner.rsplit(":", 2)
        if host == self.host:
            return not _process_exists(pid, owner == self.owner)
        now = _now()
        try:
            with self._read() as session:
                rows = session.scalars(select(SweepClaimRow).where(SweepClaimRow.owner == owner))
                return not young and not any(self._alive(row, now) for row in rows)
        except OperationalError as error:
            raise schema.why_unusable(self.store.url, error) from None

    def take(self, key: str) -> bool:
        """Claim a key (a spec's hash) for this process; False while another process that is
        alive holds it. A lock held past the busy timeout is waited out as a trial's write
        waits; StoreError in one line if it still fails."""
        return self.store.retried(lambda: self._take(key))

    def _take(self, key: str) -> bool:
        now = _now()
        try:
            with self._session.begin() as session:
                row = session.get(SweepClaimRow, (self.sweep_id, key))
                if row is not None and row.owner != self.owner and self._alive(row, now):
                    return False
                if row is not None:
                    session.delete(row)
                    session.flush()
                session.add(SweepClaimRow(sweep_id=self.sweep_id, key=key, owner=self.owner,
                                          heartbeat_at=now))  # fmt: skip
        except IntegrityError:  # another process claimed it between the read and the write
            return False
        return True

    def _clear_dead_presence(self) -> None:
        now = _now()
        theirs = (SweepClaimRow.sweep_id == self.sweep_id, SweepClaimRow.key.startswith(PRESENT),
                  SweepClaimRow.owner != self.owner)  # fmt: skip
        try:
            with self._session.begin() as session:
                for row in session.scalars(select(SweepClaimRow).where(*theirs)).all():
                    if not self._alive(row, now):
                        session.delete(row)
        except OperationalError:
            pass  # locked now: a dead process's presence counts as absent all the same

    def drop(self, key: str) -> None:
        mine = (SweepClaimRow.sweep_id == self.sweep_id, SweepClaimRow.key == key,
                SweepClaimRow.owner == self.owner)  # fmt: skip
        try:
            with self._session.begin() as session:
                session.execute(delete(SweepClaimRow).where(*mine))
        except OperationalError:
            pass  # a database gone or locked now: the claim goes stale and is taken over

    def busy(self) -> set[str]:
        """The keys that live other processes hold (spec hashes, answer-...)."""
        return {key for key in self._held_by_others() if not key.startswith(PRESENT)}

    def _others_present(self) -> bool:
        return any(key.startswith(PRESENT) for key in self._held_by_others())

    def _held_by_others(self) -> set[str]:
        now = _now()
        query = select(SweepClaimRow).where(SweepClaimRow.sweep_id == self.sweep_id)
        try:
            with self._read() as session:
                rows = session.scalars(query).all()
        except OperationalError as error:
            raise schema.why_unusable(self.store.url, error) from None
        return {r.key for r in rows if r.owner != self.owner and self._alive(r, now)}

    def news(self) -> list[tuple[TrialResult, bool]]:
        """The search's trials of the sweep (each with whether it was reused from history; not
        the answer's repeats) not handed out before, this process's own included: the caller
        knows its own."""
        new = [(self.seen(r), reused)
               for r, reused in self.store.sweep_trials(self.sweep_id, repeats=False)
               if r.id not in self._seen]  # fmt: skip
        self._seen.update(r.id for r, _ in new if r.id is not None)
        return new

    def close(self) -> None:
        """Stop the heartbeat and give up every claim (the process is done with the sweep)."""
        self._stop.set()
        self._heart.join()
        try:
            with self._session.begin() as session:
                session.execute(delete(SweepClaimRow).where(SweepClaimRow.owner == self.owner))
        except OperationalError:
            pass  # a database gone or locked now: the claims go stale and are taken over

    def _alive(self, row: SweepClaimRow, now: datetime.datetime) -> bool:
        beat = row.heartbeat_at
        if beat.tzinfo is None:  # SQLite hands back naive datetimes (stored as UTC)
            beat = beat.replace(tzinfo=datetime.UTC)
        if (now - beat).total_seconds() > STALE_S:
            return False
        host, pid, _ = row.owner.rsplit(":", 2)
        return host != self.host or _process_exists(pid, row.owner == self.owner)

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                with self._session.begin() as session:
                    session.execute(
                        update(SweepClaimRow)
                        .where(SweepClaimRow.owner == self.owner)
                        .values(heartbeat_at=_now())
                    )
            except SQLAlchemyError:
                pass  # locked or gone for now; the next beat tries again, well before STALE_S


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def this_host() -> str:
    """This host as claims name it: its name and its process-id namespace, so that containers
    sharing a host name (one per GPU, say) do not take each other's process ids for their own."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return f"{socket.gethostname()}/{namespace}"


def _process_exists(pid: str, mine: bool) -> bool:
    """Whether the process that `pid` names on this host still runs (a claim of this process's
    own is alive; a restarted container is another host: another process-id namespace)."""
    if mine or not pid.isdigit():
        return mine
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True
