"""advisor as a user installs it: a wheel built from this checkout, installed on its own and run
from another folder, finds its conf/ and migrations inside the package and keeps its results in
the user's data directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FAST_OVERRIDES

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_a_built_wheel_runs_a_trial_from_any_folder(tmp_path):
    names = ("source", "wheels", "site", "elsewhere", "data")
    source, wheels, site, elsewhere, data = (tmp_path / n for n in names)
    elsewhere.mkdir()
    # built from a copy: a build leaves build/ and advisor.egg-info behind
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".whl", "build", "*.egg-info", "experiments", "*.sqlite*", "__pycache__",
        "compile-cache", "plots"))  # fmt: skip
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    build = [*pip, "wheel", str(source), "--no-deps", "-w", str(wheels)]
    built = subprocess.run(build, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    [wheel] = wheels.glob("advisor-*.whl")
    installed = subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
                               capture_output=True, text=True, timeout=600)  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADVISOR_")}
    env |= {"PYTHONPATH": str(site), "XDG_DATA_HOME": str(data), "COLUMNS": "200"}

    def python(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                              env=env, cwd=elsewhere, timeout=600)  # fmt: skip

    # every module of the package travels: each concept folder is a package of the wheel
    modules = {p.relative_to(ROOT) for p in (ROOT / "advisor").rglob("*.py")}
    assert modules == {p.relative_to(site) for p in (site / "advisor").rglob("*.py")
                       if p.parent.name not in ("_conf", "_migrations", "versions")}  # fmt: skip
    where = python("-c", "import advisor.paths as p; print(p.PACKAGE, p.CONF_DIR, p.MIGRATIONS)")
    package, conf, migrations = where.stdout.split()
    assert Path(package) == site / "advisor"  # the wheel's, not this checkout's
    assert Path(conf) == site / "advisor" / "_conf" and Path(migrations).is_dir()
    run = python("-m", "advisor", "run", "model=tiny_mlp", "device=cpu", *FAST_OVERRIDES)
    assert run.returncode == 0, run.stderr
    assert "samples/s on the CPU" in run.stdout
    assert (data / "advisor" / "advisor.sqlite").stat().st_size > 0
    assert list(elsewhere.iterdir()) == []  # nothing written where it ran
    # the dashboard's templates travel too: its pages render from the wheel's code
    assert (site / "advisor" / "service" / "templates" / "trials.html").is_file()
    page = python("-c", "from fastapi.testclient import TestClient; "
                  "from advisor.service.server import create_app; "
                  "from advisor.store.store import Store; "
                  "print(TestClient(create_app(Store())).get('/').text)")  # fmt: skip
    assert page.returncode == 0, page.stderr
    assert "tiny_mlp on cpu" in page.stdout and str(data / "advisor") in page.stdout
    assert list(elsewhere.iterdir()) == []
