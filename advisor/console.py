"""What the `advisor` command prints to and how it fails: results on stdout, the rest (progress,
notes, errors) on stderr; the argument types its verbs share; and the one-line failure a user's
mistake gets instead of a traceback."""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from typing import Annotated, NoReturn

import typer
from rich.console import Console

# markup=False: advisor writes no Rich markup, and what it prints holds what users named (a
# workload, a path, a GPU): "a[/]b" is printed as itself, not read as a closing tag (issue 30)
err = Console(stderr=True, markup=False)
out = Console(markup=False)

Overrides = Annotated[
    list[str] | None,
    typer.Argument(help="Hydra overrides, KEY=VALUE", show_default=False),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON to stdout instead of tables.")]


def fail(message: str, code: int = 2) -> NoReturn:
    err.print(f"advisor: {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def replace_unencodable() -> None:
    """A stream whose encoding cannot say what advisor prints (≤, █, a name's own letters;
    PYTHONIOENCODING=ascii, a legacy code page) gets ? in its place, not a UnicodeEncodeError
    after the work is done."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="replace")


@contextlib.contextmanager
def prints_to_stderr() -> Iterator[None]:
    """While a verb runs the user's code in this process (a workload file imported, its model
    built on fake tensors), what that code prints goes to stderr: stdout holds the results
    alone, and --json's is read by programs (nanoGPT's model prints its size when built)."""
    with contextlib.redirect_stdout(sys.stderr):
        yield


def only_db_url(options: list[str] | None) -> str | None:
    """The db_url=URL of a command that takes nothing else."""
    url = None
    for item in options or []:
        key, sep, value = item.partition("=")
        if key != "db_url" or not sep:
            fail(f"unknown option {item!r}; this command takes db_url=URL only")
        url = value
    return url
