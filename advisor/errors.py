"""advisor's errors: one tree a caller can catch. Each message is one line that says what is
wrong and what to do; the command prints it without a traceback."""

from __future__ import annotations

import contextlib
import functools
import os
import pathlib
import sys
import traceback
from typing import Any


class AdvisorError(Exception):
    """Something advisor was asked to do cannot be done as asked."""


class ConfigError(AdvisorError, ValueError):
    """A setting that cannot describe a trial or a search (exit status 2)."""


class WorkloadError(AdvisorError):
    """The user's workload breaks its contract: a missing file or function, a wrong return
    value, batch() raising, a loss that is not a scalar (exit status 2; nothing is stored)."""


class EstimateError(AdvisorError):
    """The estimate cannot run the workload's step on fake tensors (exit status 1, as for a
    trial that crashed): the step must be measured instead."""


class TrialsFolderError(AdvisorError):
    """The temporary folder trials run in cannot be used: another user's, not writable, or on
    a full disk (exit status 1; the trial was not started, what was measured before is kept)."""


class NotStored(AdvisorError, LookupError):
    """An id (a trial's, a sweep's) that the results database does not hold (exit status 2;
    the API's 404)."""


class StoreError(AdvisorError):
    """The results database cannot be opened or written (exit status 1)."""


class OlderSchema(StoreError):
    """An advisor database at an older migration, opened by a reader that must not upgrade it
    (exit status 1)."""


class TrialNotKept(StoreError):
    """A trial measured that neither the database nor the spool could take (a full disk):
    `record` holds it as an export's trial does, for the caller to keep (exit status 1)."""

    def __init__(self, message: str, record: dict[str, Any]) -> None:
        super().__init__(message)
        self.record = record


def first_line(error: BaseException) -> str:
    """What an error says, its first line only; its type's name where it says nothing."""
    said = str(error).strip()
    return said.splitlines()[0] if said else type(error).__name__


def error_line(error: BaseException) -> str:
    """An exception in one line: its type and its message's first line."""
    said = first_line(error)
    return f"{type(error).__name__}: {said}" if str(error).strip() else said


def where_in_the_users_code(error: BaseException) -> str:
    """The innermost line of the user's own code that the error passed through, as ", at
    FILE:LINE": where a workload's model asked what a fake step cannot say, such as a value
    (wav2vec2's `labels.max() >= vocab_size`). Not the user's: torch's code, advisor's, and the
    standard library's wrappers between them. FILE is relative to the import path it was found
    on (the deepest, where several hold it). "" where no frame is the user's."""
    torch = sys.modules.get("torch")  # (loaded, where an error passed through it)
    folders = [pathlib.Path(__file__).parent]  # advisor's
    if torch is not None and torch.__file__:
        folders.append(pathlib.Path(torch.__file__).parent)
    not_theirs = (*(f"{folder}{os.sep}" for folder in folders), contextlib.__file__,
                  functools.__file__)  # fmt: skip
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not f.filename.startswith(not_theirs)]  # fmt: skip
    if not frames:
        return ""
    path = pathlib.Path(frames[-1].filename)
    roots = [pathlib.Path(p) for p in sys.path if p and path.is_relative_to(p)]
    shown = path.relative_to(max(roots, key=lambda r: len(r.parts))) if roots else path
    return f", at {shown}:{frames[-1].lineno}"
