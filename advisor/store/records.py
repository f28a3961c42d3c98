"""A trial as a self-contained JSON record: everything the store keeps of it (its whole spec,
workload included, unlike the public to_dict), so that it can be stored again elsewhere. The
spool keeps trials this way, and exports are lists of them."""

from __future__ import annotations

import dataclasses
from typing import Any

from advisor.errors import error_line
from advisor.result import (
    Environment,
    Status,
    TrialResult,
    failure_from_dict,
    memory_from_dict,
    throughput_from_dict,
)
from advisor.spec import TrialSpec, plain


def to_record(result: TrialResult) -> dict[str, Any]:
    def parts(value: Any) -> Any:
        return None if value is None else plain(dataclasses.asdict(value))

    assert result.created_at is not None, "a record keeps when the trial was measured"
    return {
        "spec": result.spec.to_json(),
        "spec_hash": result.spec.hash,
        "status": result.status.value,
        "environment": parts(result.environment),
        "memory": parts(result.memory),
        "throughput": parts(result.throughput),
        "failure": parts(result.failure),
        "wall_s": result.wall_s,
        "created_at": result.created_at,
        "memory_snapshot": result.memory_snapshot,
    }


def from_record(record: dict[str, Any]) -> TrialResult:
    """The trial a record holds; KeyError, ValueError or TypeError for one that is not."""
    memory, throughput, failure, environment = (
        _object(record, part) for part in ("memory", "throughput", "failure", "environment")
    )
    try:
        spec = TrialSpec.from_json(record["spec"])
    except (KeyError, ValueError, TypeError) as error:  # (a KeyError alone would say 'model')
        raise ValueError(f"spec is not a trial's setting ({error_line(error)})") from None
    return TrialResult(
        spec=spec,
        status=Status(record["status"]),
        environment=None if environment is None else Environment(**environment),
        memory=None if memory is None else memory_from_dict(memory),
        throughput=None if throughput is None else throughput_from_dict(throughput),
        failure=None if failure is None else failure_from_dict(failure),
        wall_s=record["wall_s"],
        created_at=record["created_at"],
        memory_snapshot=record.get("memory_snapshot"),  # (not in exports before schema 0007)
    )


def _object(record: dict[str, Any], part: str) -> dict[str, Any] | None:
    """A part of the record: an object, or null; ValueError for anything else (the part's
    reader would call its methods: an AttributeError)."""
    value = record[part]
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"{part} is {value!r}, not an object")
    return value
