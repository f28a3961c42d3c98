"""Where a sweep's Optuna study lives: the key that names it (the same command on the same kind
of machine gives the same key, so running it again resumes) and its storage, apart from the
results database's tables."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path

import optuna
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError

from advisor.errors import ConfigError
from advisor.memory_model import Target
from advisor.space import Space

STARTUP_TRIALS = 8  # TPE samples at random until the study has this many trials
CREATE_WAITS_S = (0.5, 2.0)  # a study storage that failed to open is tried again after these


def sweep_key(space: Space, target: Target, device_name: str, torch_version: str) -> str:
    """The same command on the same kind of machine gives the same key: that is how it resumes."""
    what = {
        "model": [space.base.model.identity, space.base.model.versions],  # not its folder
        "device": space.base.device.value,
        "axes": space.axes,
        "fixed": space.fixed,
        "batch_sizes": space.batch_sizes,
        "optimizers": {k: v.optimizer.builder for k, v in space.optimizers.items()},
        "effective_batch_size": space.effective_batch_size,
        "target": dataclasses.asdict(target),
        "environment": [device_name, torch_version],
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:32]


def open_study(url: str, key: str, seed: int = 0) -> optuna.Study:
    """The sweep's Optuna study, in a storage of its own (created, or loaded to resume)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError(
            f"study_db_url: {url!r} is not a database URL; give one like sqlite:///optuna.sqlite"
        ) from None
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    for wait_s in CREATE_WAITS_S:
        try:
            return _create(url, key, seed)
        except (IntegrityError, OperationalError):
            # another process creating the same storage at once (Optuna's own tables and
            # version row race, as advisor's did): the second try finds them made
            time.sleep(wait_s)
    return _create(url, key, seed)


def _create(url: str, key: str, seed: int) -> optuna.Study:
    return optuna.create_study(
        storage=url,
        study_name=key,
        direction="maximize",
        sampler=optuna.samplers.TPESampler(
            seed=seed, multivariate=True, n_startup_trials=STARTUP_TRIALS
        ),
        load_if_exists=True,
    )
