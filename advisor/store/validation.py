"""A trial checked before it is stored from elsewhere (an import): every field of the type its
dataclass declares, every number finite, none below 0 (but the one advisor itself stores so)
and none past what the database holds, text no longer than its column, and when it was
measured an ISO time, made UTC. SQLite keeps any value in any column: an export's `wall_s:
"fast"` or 1e309 was stored as it came and later printed as Infinity in --json, or failed the
import halfway in a traceback."""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, NoReturn

from advisor.result import Environment, TrialResult
from advisor.spec import TrialSpec
from advisor.store import rows
from advisor.store.tables import EnvironmentRow, TrialRow

LARGEST_INTEGER = 2**63 - 1  # SQL's BIGINT
# What advisor itself stores below 0: where NVML has no figure per process, the trial's is the
# device's used memory less what was used before the trial (trial/device_memory.py:
# context_bytes_of), below 0 where another process freed memory meanwhile
SIGNED = frozenset({"memory.nvml_process_bytes"})


def checked(result: TrialResult) -> TrialResult:
    """The trial, its created_at in UTC; ValueError naming the first field that is wrong and
    how (`memory.params_bytes is -1, not a whole number from 0 to 2**63-1`)."""
    when = result.created_at
    try:
        created = rows.moment(when) if isinstance(when, str) else None
    except ValueError:
        created = None
    if created is None:
        raise ValueError(
            f"created_at is {when!r}, not an ISO time in the years 1 to 9999 "
            "(2026-12-01T14:00:00+00:00)"
        )
    _check(result, TrialResult, "")
    return dataclasses.replace(result, created_at=created.isoformat())


def _check(value: Any, hint: Any, name: str) -> None:
    """ValueError unless value is of the type hint: a dataclass field by field, X | None, a
    tuple, an Enum, bool, int, float or str (the types of a trial's fields)."""
    nullable, hint, origin = _plan(hint)
    if value is None and nullable:
        return
    if hint in (TrialSpec, Environment) and isinstance(value, hint) and _hashable(value):
        _shared_checked(value, name)  # (once for each: an import's trials share a few)
    elif dataclasses.is_dataclass(hint):
        if not isinstance(value, hint):  # type: ignore[arg-type]
            _wrong(value, name, f"a {hint.__name__}")  # type: ignore[union-attr]
        for field, inner in _hints(hint).items():  # type: ignore[arg-type]
            _check(getattr(value, field), inner, f"{name}.{field}" if name else field)
    elif origin is tuple:
        inner = typing.get_args(hint)
        if not isinstance(value, tuple):
            _wrong(value, name, "a list")
        each = [inner[0]] * len(value) if inner[-1] is Ellipsis else list(inner)
        if len(each) != len(value):
            _wrong(value, name, f"a list of {len(each)}")
        for i, (item, item_hint) in enumerate(zip(value, each, strict=True)):
            _check(item, item_hint, f"{name}[{i}]")
    elif isinstance(hint, type) and issubclass(hint, enum.Enum):
        if not isinstance(value, hint):
            _wrong(value, name, f"one of {', '.join(str(e.value) for e in hint)}")
    elif hint is bool:
        if not isinstance(value, bool):
            _wrong(value, name, "true or false")
    elif hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            _wrong(value, name, "a whole number")
        lowest = -LARGEST_INTEGER - 1 if name in SIGNED else 0
        if not lowest <= value <= LARGEST_INTEGER:
            _wrong(value, name, f"a whole number from {'-2**63' if lowest else 0} to 2**63-1")
    elif hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            _wrong(value, name, "a number")
        if not (math.isfinite(value) and value >= 0):
            _wrong(value, name, "a finite number of 0 or more")
    elif hint is str:
        if not isinstance(value, str):
            _wrong(value, name, "text")
    else:  # a field of a type added since: check it here
        raise TypeError(f"{name}: no check for a field of type {hint}")


def _wrong(value: Any, name: str, wanted: str) -> NoReturn:
    raise ValueError(f"{name or 'the trial'} is {value!r}, not {wanted}")


@functools.cache
def _plan(hint: Any) -> tuple[bool, Any, Any]:
    """A type hint as (whether None is allowed, the type, its origin): X | None is (True, X)."""
    nullable = False
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        nullable = type(None) in typing.get_args(hint)
        [hint] = [h for h in typing.get_args(hint) if h is not type(None)]  # (all are X | None)
    return nullable, hint, typing.get_origin(hint)


@functools.lru_cache(maxsize=4096)
def _shared_checked(value: TrialSpec | Environment, name: str) -> None:
    """A spec or an environment checked field by field, and its text against its columns
    (PostgreSQL refuses text longer than a column); once for each (they are frozen)."""
    cls: type = type(value)
    for field, inner in _hints(cls).items():
        _check(getattr(value, field), inner, f"{name}.{field}")
    if isinstance(value, TrialSpec):
        _fits(TrialRow, rows.spec_columns(value))
    else:
        _fits(EnvironmentRow, dataclasses.asdict(value))


def _hashable(value: Any) -> bool:
    """Whether a frozen dataclass can be hashed (not where a field holds a list, say: then it
    is checked field by field, which names that field)."""
    try:
        hash(value)
    except TypeError:
        return False
    return True


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """A dataclass's fields and their types (the annotations are text until resolved)."""
    hints = typing.get_type_hints(cls)
    return {field.name: hints[field.name] for field in dataclasses.fields(cls)}


def _fits(table: Any, values: Mapping[str, Any]) -> None:
    """ValueError for text longer than its column of the table. (A trial's other text columns
    hold Enum values, or are Text.)"""
    for column in table.__table__.columns:
        value, length = values.get(column.key), getattr(column.type, "length", None)
        if length is not None and isinstance(value, str) and len(value) > length:
            raise ValueError(
                f"{column.key} is {len(value)} characters long, more than the "
                f"{length} that the database keeps"
            )
