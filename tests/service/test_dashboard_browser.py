"""The dashboard in a real browser: `advisor serve` on a port, Debian's chromium driven by
Playwright through the trials table and its filters, a trial's breakdown, a sweep's plot and
the recommendation form. Screenshots go to ADVISOR_SCREENSHOTS where it names a folder (the
experiments keep them), else to the test's own folder. Skipped, saying why, without chromium."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from served import serving, stored_sweep

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).is_file(), reason="no chromium here (Debian: apt-get install chromium)"
)
# as the machine's notes say: without the background-networking flags chromium keeps trying to
# reach hosts a closed network refuses
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update",
         "--disable-sync"]  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("browsed") / "advisor.sqlite"
    store, ids, sweep_id = stored_sweep(f"sqlite:///{path}")
    with serving(path) as (base, _):
        yield base, store, ids, sweep_id


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser.new_page(viewport={"width": 1280, "height": 900})
        browser.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = os.environ.get("ADVISOR_SCREENSHOTS")
    return Path(folder) if folder else tmp_path_factory.mktemp("screenshots")


def test_trials_filtered_then_one_trials_breakdown(server, page, shots):
    base, store, ids, _ = server
    page.goto(base + "/")
    rows = page.locator("#trials tbody tr")
    assert rows.count() == len(ids)
    page.fill("input[name=status]", "ok")
    page.click("button[type=submit]")
    page.wait_for_url("**/?*status=ok*")
    ok = [r.id for r in store.trials(status="ok")]
    assert rows.count() == len(ok)
    assert set(rows.locator("td:nth-child(4)").all_inner_texts()) == {"ok"}
    page.screenshot(path=shots / "trials.png", full_page=True)
    page.click(f"#trials a[href='/trials/{ok[0]}']")
    page.wait_for_url(f"**/trials/{ok[0]}")
    assert page.locator("#breakdown .part").count() == 6
    activations = page.locator("#breakdown .part[title^='activations']").bounding_box()
    bar = page.locator("#breakdown").bounding_box()
    share = store.get(ok[0]).memory.activations_bytes / (40 * 2**30)
    assert bar and activations and activations["width"] == pytest.approx(bar["width"] * share,
                                                                         abs=3)  # fmt: skip
    page.screenshot(path=shots / "trial.png", full_page=True)


def test_a_sweeps_plot_and_the_recommendation_form(server, page, shots):
    base, store, _, sweep_id = server
    page.goto(base + "/sweeps")
    page.click(f"#sweeps a[href='/sweeps/{sweep_id}']")
    plot = page.locator("#sweep-plot svg")
    plot.wait_for()
    box = plot.bounding_box()
    assert box and box["width"] > 400 and box["height"] > 250  # drawn, not an empty element
    assert "recommended:" in page.inner_text("body")
    page.screenshot(path=shots / "sweep.png", full_page=True)
    page.goto(base + "/recommend")
    page.select_option("select[name=model]", "tiny_cnn")
    page.fill("input[name=memory]", "12GiB")
    page.click("button[type=submit]")
    page.wait_for_url("**/recommend?*memory=12GiB*")
    said = page.inner_text("#recommendation")
    assert "recommended:" in said and "fits under 11.40 GiB" in said
    page.screenshot(path=shots / "recommend.png", full_page=True)
    page.fill("input[name=memory]", "a lot")
    page.click("button[type=submit]")
    assert "gpu memory:" in page.inner_text("[role=alert]")
