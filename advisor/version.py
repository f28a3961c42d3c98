"""advisor's version, as installed (importlib.metadata), or a checkout's. Its own module so that
code inside the package never imports the package's face (advisor/__init__.py) to read it."""

from __future__ import annotations

import functools


@functools.cache
def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed  # (50 ms to import: on first use)

    try:
        return installed("advisor")
    except PackageNotFoundError:  # run from a checkout without installing (the GPU machine)
        return "0.1.0+checkout"
