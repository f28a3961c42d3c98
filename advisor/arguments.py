"""The Python API's arguments as the command line's settings: keyword settings as Hydra
overrides, and a workload (a bundled model's name, a source, or the function itself) as the
model= or workload= override that a worker process can follow; and back, an error's words for
the command line (gpu.memory=24GiB, advisor run ...) as Python's."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

from advisor.errors import WorkloadError
from advisor.settings import Config
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


# The settings, as the command names them (a word=VALUE of another kind, in a message quoting
# the user's code, is left as it is)
SETTINGS = frozenset(field.name for field in dataclasses.fields(Config))
_VALUE = r"(?:\[[^\]\s]*\]|[^\s,;)?]*)"  # a list, or up to a space or the sentence's mark
_SETTING = rf"(\+?)([a-z_]\w*)((?:\.\w+)*)=({_VALUE})"  # +, the setting, .sub.keys, value
_VERB = r"\badvisor (run|sweep|estimate|recommend|history)"
_WORDS = re.compile(rf"{_VERB}((?: (?:\.\.\.|{_SETTING}))*)|(?<![^\s(]){_SETTING}")


def in_python_words(message: str) -> str:
    """A message worded for the command line, worded for Python: batch_size=x -> batch_size="x",
    gpu.memory=64MiB -> gpu={"memory": "64MiB"}, +model.foo=VALUE -> overrides=[...],
    `advisor sweep model=tiny_cnn ...` -> `advisor.sweep(model="tiny_cnn", ...)`, no --help."""
    return _WORDS.sub(_in_python, message.replace("--help and README list", "README lists"))


def _in_python(match: re.Match[str]) -> str:
    verb, given = match.group(1, 2)
    if verb is None:
        return _keyword(*match.group(7, 8, 9, 10))
    words = [
        _keyword(*setting.groups()) if (setting := re.fullmatch(_SETTING, word)) else word
        for word in given.split()
    ]
    return f"advisor.{verb}({', '.join(words) or '...'})"


def _keyword(plus: str, head: str, dotted: str, value: str) -> str:
    """One KEY=VALUE as a keyword argument; a trailing ':' or '.' is the sentence's."""
    tail = value[len(value.rstrip(":.")) :]
    value = value[: len(value) - len(tail)]
    if head not in SETTINGS:
        return f"{plus}{head}{dotted}={value}{tail}"
    if plus:  # a builder's argument the YAML lacks: only an override adds it
        return f"overrides=[{json.dumps(f'+{head}{dotted}={value}')}]{tail}"
    if not dotted:
        return f"{head}={_python_value(value)}{tail}"
    nested = _python_value(value) if value else "..."
    for key in reversed(dotted.split(".")[1:]):
        nested = f"{{{json.dumps(key)}: {nested}}}"
    return f"{head}={nested}{tail}"


PYTHONS = {"true": "True", "false": "False", "null": "None"}


def _python_value(text: str) -> str:
    """An override's value as Python writes it: a placeholder (BYTES, NAME), a number, or what
    Python already wrote (True, 'abc') stays; true/false/null, lists and text are converted."""
    if text in ("", "...", "True", "False", "None") or re.fullmatch(r"[A-Z_]+|['\"].*", text):
        return text
    if re.fullmatch(r"-?\d+(\.\d*)?([eE][-+]?\d+)?", text):
        return text
    if text in PYTHONS:
        return PYTHONS[text]
    if text.startswith("[") and text.endswith("]"):
        return "[" + ", ".join(_python_value(item) for item in text[1:-1].split(",") if item) + "]"
    return json.dumps(text)
