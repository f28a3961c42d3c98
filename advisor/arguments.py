"""The Python API's arguments as the command line's settings: keyword settings as Hydra
overrides, and a workload (a bundled model's name, a source, or the function itself) as the
model= or workload= override that a worker process can follow."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping
from typing import Any

from advisor.errors import WorkloadError
from advisor.workload import Workload

# A workload as the Python API takes it: a bundled model's name ("resnet50"), a source
# ("path/to/file.py:function", "package.module:function"), or the function itself.
WorkloadLike = str | Callable[[], Workload] | None


def as_overrides(settings: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Keyword settings as Hydra overrides: batch_size=8 -> 'batch_size=8', gpu={'memory':
    '24GiB'} -> 'gpu.memory=24GiB', space={'precision': ['bf16']} -> 'space.precision=[bf16]'."""
    items = []
    for key, value in settings.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            items.extend(as_overrides(value, f"{name}."))
        else:
            items.append(f"{name}={_hydra_value(value)}")
    return items


def _hydra_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_hydra_value(v) for v in value) + "]"
    return str(getattr(value, "value", value))


def workload_override(workload: WorkloadLike) -> str:
    if isinstance(workload, Workload):
        raise WorkloadError(
            f"pass the function that returns workload {workload.name!r}, not the Workload: each "
            "trial calls it again in a process of its own"
        )
    if isinstance(workload, str):
        return f"workload={workload}" if ":" in workload else f"model={workload}"
    assert workload is not None
    return f"workload={source_of(workload)}"


def source_of(function: Callable[..., Any]) -> str:
    """Where a worker process finds a function: package.module:function, or its file."""
    name = getattr(function, "__qualname__", "")
    if not name or "<" in name:
        raise WorkloadError(
            f"{name or function!r} is not a module-level function; define the function that "
            "returns the Workload at the top level of a module or file"
        )
    module = getattr(function, "__module__", None) or ""
    main = sys.modules.get("__main__")
    # A script, or a module imported from its folder, is found by its file; a module inside a
    # package by its name (loaded as a file, its relative imports would fail).
    if "." not in module:
        path = inspect.getsourcefile(function) or (
            getattr(main, "__file__", None) if main else None
        )
        if path is None:
            raise WorkloadError(f"{name} has no source file; put it in a .py file")
        return f"{path}:{name}"
    return f"{module}:{name}"
