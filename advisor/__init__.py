"""advisor: measure where GPU memory and time go in real training steps, and recommend the
fastest training setting that fits a GPU.

    import advisor

    def workload() -> advisor.Workload: ...           # in my_model.py

    result = advisor.run("my_model.py:workload", batch_size=16, precision="bf16")
    outcome = advisor.sweep("my_model.py:workload", gpu={"memory": "24GiB"})
    print(outcome.recommendation.best)
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from advisor.errors import AdvisorError
from advisor.version import version

if TYPE_CHECKING:
    from advisor.errors import (
        AdvisorError,
        ConfigError,
        EstimateError,
        StoreError,
        TrialsFolderError,
        WorkloadError,
    )
    from advisor.estimation.estimator import Estimate
    from advisor.queries import history
    from advisor.recommendation import Recommendation
    from advisor.result import Category, Memory, Status, Throughput, TrialResult
    from advisor.spec import TrialSpec
    from advisor.verbs import SweepEvents, SweepOutcome, estimate, recommend, run, sweep
    from advisor.workload import Workload

    __version__: str

# Where each public name lives. They are imported on first use: a worker process imports this
# package too, and should not pay for Optuna, SQLAlchemy and Hydra's sweeps to measure a step.
_PUBLIC = {
    "advisor.verbs": ("SweepEvents", "SweepOutcome", "estimate", "recommend", "run", "sweep"),
    "advisor.errors": (
        "AdvisorError",
        "ConfigError",
        "EstimateError",
        "StoreError",
        "TrialsFolderError",
        "WorkloadError",
    ),
    "advisor.estimation.estimator": ("Estimate",),
    "advisor.queries": ("history",),
    "advisor.recommendation": ("Recommendation",),
    "advisor.result": ("Category", "Memory", "Status", "Throughput", "TrialResult"),
    "advisor.spec": ("TrialSpec",),
    "advisor.workload": ("Workload",),
}
_MODULE_OF = {name: module for module, names in _PUBLIC.items() for name in names}
# The verbs, called from Python: their errors say keyword arguments and advisor.run(...), where
# the command says KEY=VALUE and advisor run ... (the same messages, built once, below the faces)
_VERBS = ("estimate", "history", "recommend", "run", "sweep")

__all__ = [
    "AdvisorError",
    "Category",
    "ConfigError",
    "Estimate",
    "EstimateError",
    "Memory",
    "Recommendation",
    "Status",
    "StoreError",
    "SweepEvents",
    "SweepOutcome",
    "Throughput",
    "TrialResult",
    "TrialsFolderError",
    "TrialSpec",
    "Workload",
    "WorkloadError",
    "__version__",
    "estimate",
    "history",
    "recommend",
    "run",
    "sweep",
]


def __getattr__(name: str) -> Any:
    value: Any
    if name == "__version__":
        value = version()
    elif (module := _MODULE_OF.get(name)) is not None:
        value = getattr(importlib.import_module(module), name)
        if name in _VERBS:
            value = _in_python_words(value)
    else:
        raise AttributeError(f"module 'advisor' has no attribute {name!r}")
    globals()[name] = value
    return value


def _in_python_words(verb: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(verb)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return verb(*args, **kwargs)
        except AdvisorError as error:
            from advisor.arguments import in_python_words

            error.args = tuple(in_python_words(a) if isinstance(a, str) else a for a in error.args)
            raise

    return call
