"""The dashboard on real measurements: the H200 sweeps of experiments/2026-12-01-h200-sweep-fast
(resnet50, sweep-5; gpt2 at 40 GiB, gpt2-1) merged into one database with `advisor import`,
served by `advisor serve`, and driven in Debian's chromium through Playwright; the screenshots
land beside this file. Public command line only.

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


def main() -> None:
    work = Path(tempfile.mkdtemp())
    db = work / "advisor.sqlite"
    with sqlite3.connect(RAW / "sweep-5" / "advisor.sqlite") as src, sqlite3.connect(db) as dst:
        src.backup(dst)  # sweep-5's sweep (its id 1) comes along; gpt2-1's trials are imported
    url = f"sqlite:///{db}"
    print(advisor("import", str(RAW / "gpt2-1" / "advisor.sqlite"), f"db_url={url}"))
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "advisor", "serve", "--port", str(port),
                               f"db_url={url}"])  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/api/v1/sweeps", timeout=5).close()
                break
            except OSError:
                time.sleep(0.3)
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
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
