"""A measured result is never lost to a full disk (issue 30): a disk without room is refused
before anything is measured, in one line, exit status 1. A real small disk (tmpfs) in a
namespace of the test's own; the real console script."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import FAST_OVERRIDES
from test_cli import ADVISOR
from untouched import in_a_namespace

RUN = " ".join(["run", "device=cpu", "batch_size=2", *FAST_OVERRIDES])


def on_a_small_disk(tmp_path: Path, script: str) -> tuple[str, str, Path]:
    """The script run where {small} is a 4 MiB disk holding a results database ({env} names
    it, a spool folder on that disk and a temporary folder, {tmp}, elsewhere); what it printed
    to stdout and stderr, and tmp."""
    small, tmp = tmp_path / "small", tmp_path / "tmp"
    small.mkdir()
    tmp.mkdir()
    url = f"sqlite:///{small / 'results.sqlite'}"
    env = f"ADVISOR_DB_URL={url} ADVISOR_SPOOL_DIR={small / 'spool'} TMPDIR={tmp} COLUMNS=200"
    done = in_a_namespace(
        f"""
        mount -t tmpfs -o size=4m tmpfs {small}
        {sys.executable} -c 'from advisor.store.store import Store; Store("{url}")'
        """
        + script.format(env=env, small=small, tmp=tmp)
    )
    return done.stdout, done.stderr, tmp


FILL = "dd if=/dev/zero of={small}/filler bs=4k 2>/dev/null || true"


def test_a_full_disk_is_refused_before_anything_is_measured(tmp_path):
    """The check before measuring writes and rolls back, which needs no space: with 40 KiB
    free it passed, the trial was measured, its write failed, and so did the spool's on the
    same disk: a 106-line traceback, the measurement lost. With none free the database
    "cannot be opened (disk I/O error)"."""
    out, errors, tmp = on_a_small_disk(tmp_path, f"""
        {FILL}
        truncate -s -40K {{small}}/filler
        {{env}} {ADVISOR} {RUN} model=tiny_mlp 2> {{tmp}}/some.txt || echo "exit $?"
        rm {{small}}/filler
        {FILL}
        {{env}} {ADVISOR} {RUN} model=tiny_mlp 2> {{tmp}}/none.txt || echo "exit $?"
        echo "spooled: $(find {{small}} {{tmp}} -path '*spool*' -name '*.json' | wc -l)"
    """)  # fmt: skip
    assert out.splitlines() == ["exit 1", "exit 1", "spooled: 0"], out + errors
    some = one_line_of(tmp / "some.txt")
    assert "is on a full disk (" in some and "a trial is measured only where 1024 KiB" in some
    none = one_line_of(tmp / "none.txt")
    assert "cannot be written: its disk is full (disk I/O error; 0 KiB free)" in none, none
    assert "free some space, or give another db_url=" in none


def one_line_of(path: Path) -> str:
    """What a command said on stderr, held to one line with no traceback."""
    lines = path.read_text().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("advisor: "), path.read_text()
    return lines[0]
