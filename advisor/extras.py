"""The optional parts of advisor: which extra brings each library that the core does without,
and the one line for one that is missing (found before anything is measured)."""

from __future__ import annotations

import importlib.util

from advisor.errors import ConfigError

# library -> the extra that installs it (pip install 'advisor[EXTRA]'; 'advisor[all]': every one)
EXTRAS = {
    "torchvision": "vision",
    "transformers": "text",
    "timm": "timm",
    "matplotlib": "plots",
    "psycopg": "postgres",
    "fastapi": "serve",
    "uvicorn": "serve",
    "jinja2": "serve",
    "pyarrow": "parquet",
}


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module.partition(".")[0]) is not None
    except (ImportError, ValueError):  # blocked (None in sys.modules), or broken
        return False


def require(module: str, needed_by: str) -> None:
    """ConfigError unless the library that `module` is part of can be imported, where an extra
    brings it (other modules are the user's to install, and say so themselves)."""
    library = module.partition(".")[0]
    if library in EXTRAS and not installed(library):
        raise ConfigError(
            f"{needed_by} needs {library}, which is not installed: "
            f"pip install 'advisor[{EXTRAS[library]}]'"
        )
