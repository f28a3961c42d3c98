"""The dashboard on real measurements: the H200 sweeps of experiments/2026-12-01-h200-sweep-fast
(resnet50, sweep-5; gpt2 at 40 GiB, gpt2-1) merged into one database with `advisor import`,
served by `advisor serve`, and driven in Debian's chromium through Playwright; then the Optuna
study of the README's CPU sweep, run here, in optuna-dashboard (pip install optuna-dashboard). The screenshots land beside
this file. Public command line only.

    python experiments/2026-12-01-dashboard/shoot.py
"""

from __future__ import annotations

import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

HERE = Path(__file__).parent
RAW = HERE.parent / "2026-12-01-h200-sweep-fast" / "raw"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


def advisor(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True,
                          text=True, check=True)  # fmt: skip
    return done.stdout + done.stderr


def wait_for(url: str) -> None:
    for _ in range(100):
        try:
            urllib.request.urlopen(url, timeout=5).close()
            return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"nothing answered at {url}")


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return probe.getsockname()[1]


def optuna_dashboard(work: Path) -> None:
    """A study as this advisor writes it (sweep-5's predates readable names and PRUNED specs),
    from the README's CPU sweep, as optuna-dashboard shows it: its history, its trials."""
    study = work / "optuna.sqlite"
    print(advisor("sweep", "model=tiny_cnn", "device=cpu", "gpu.memory=64MiB", "trials=6",
                  f"db_url=sqlite:///{work}/cpu.sqlite", f"study_db_url=sqlite:///{study}"))  # fmt: skip
    port = free_port()
    server = subprocess.Popen([str(Path(sys.executable).parent / "optuna-dashboard"), f"sqlite:///{study}", "--port", str(port)],
                              stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for(f"http://127.0.0.1:{port}/api/studies")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/dashboard/studies/1")
            page.wait_for_timeout(4000)  # its charts draw after the page loads
            page.screenshot(path=HERE / "optuna-dashboard.png", full_page=True)
            page.goto(f"http://127.0.0.1:{port}/dashboard/studies/1/trials")
            page.wait_for_timeout(3000)
            page.screenshot(path=HERE / "optuna-dashboard-trials.png", full_page=True)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    work = Path(tempfile.mkdtemp())
    db = work / "advisor.sqlite"
    with sqlite3.connect(RAW / "sweep-5" / "advisor.sqlite") as src, sqlite3.connect(db) as dst:
        src.backup(dst)  # sweep-5's sweep (its id 1) comes along; gpt2-1's trials are imported
    url = f"sqlite:///{db}"
    print(advisor("import", str(RAW / "gpt2-1" / "advisor.sqlite"), f"db_url={url}"))
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "advisor", "serve", "--port", str(port),
                               f"db_url={url}"])  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(base + "/api/v1/sweeps")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(base + "/?model=resnet50&status=ok&limit=30")
            page.screenshot(path=HERE / "trials.png", full_page=True)
            page.click("#trials tbody tr:first-child a")
            page.screenshot(path=HERE / "trial.png", full_page=True)
            page.goto(base + "/sweeps")
            page.click("#sweeps tbody tr:first-child a")
            page.locator("#sweep-plot svg").wait_for()
            page.screenshot(path=HERE / "sweep.png", full_page=True)
            page.goto(base + "/recommend")
            page.select_option("select[name=model]", "resnet50")
            page.select_option("select[name=gpu]", "a100_40gb")
            page.click("button[type=submit]")
            page.locator("#recommendation").wait_for()
            page.screenshot(path=HERE / "recommend.png", full_page=True)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    optuna_dashboard(work)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
