"""Stored trials already read, kept for the process. A stored trial never changes, so a
recommendation from 2,000 trials re-reads none of them, whichever Store of the database asks:
advisor.recommend() opens one a call. A trial is known by its id, spec hash and time together,
so a database deleted and made again at the same URL is never answered from the old one. The
trials stay for the process (up to CACHED_TRIALS, about 100 MB), not for a Store."""

from __future__ import annotations

import datetime
import threading

from advisor.result import TrialResult

CACHED_TRIALS = 50_000  # trials kept (about 2 KB each), then it starts again

TrialKey = tuple[int, str, datetime.datetime]  # a stored trial's id, spec hash and time, as read


class ReadTrials:
    def __init__(self, most: int = CACHED_TRIALS) -> None:
        self.most = most
        self._kept: dict[tuple[str, TrialKey], TrialResult] = {}  # by (database URL, key)
        self._lock = threading.Lock()  # (the dashboard reads in several threads)

    def known(self, url: str, keys: list[TrialKey]) -> dict[TrialKey, TrialResult]:
        """Those of these trials read before."""
        with self._lock:
            return {key: self._kept[url, key] for key in keys if (url, key) in self._kept}

    def keep(self, url: str, read: dict[TrialKey, TrialResult]) -> None:
        with self._lock:
            if len(self._kept) + len(read) > self.most:
                self._kept.clear()
            if len(read) <= self.most:  # (a bigger read is used once, not kept)
                self._kept.update(((url, key), trial) for key, trial in read.items())


TRIALS_READ = ReadTrials()
