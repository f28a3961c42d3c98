"""Where advisor's own files are: conf/ and the schema's migrations (at the top of a checkout;
inside the package, as advisor/_conf and advisor/_migrations, once installed from a wheel), and
where results go by default (a checkout's db/, else the user's data directory)."""

from __future__ import annotations

from pathlib import Path

import platformdirs

PACKAGE = Path(__file__).resolve().parent
CHECKOUT = PACKAGE.parent  # the repository's top level, when advisor runs from one


def _packaged(inside: str, in_checkout: str) -> Path:
    packaged = PACKAGE / inside
    return packaged if packaged.is_dir() else CHECKOUT / in_checkout


CONF_DIR = _packaged("_conf", "conf")
MIGRATIONS = _packaged("_migrations", "db/migrations")


def results_dir() -> Path:
    """Where the default databases go: db/ in a checkout, else the user's data directory."""
    if (CHECKOUT / "db" / "migrations").is_dir() and not (PACKAGE / "_conf").is_dir():
        return CHECKOUT / "db"
    return Path(platformdirs.user_data_dir("advisor"))
