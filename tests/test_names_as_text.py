"""What users name (a workload, an optimizer, a GPU, a host, a sweep's target: anything an
import can store) is shown as text: never read as Rich markup in the terminal, never as HTML,
a link or an attribute on the dashboard (issue 30: a workload named
[link=javascript:alert(1)]w[/link] served <a href="javascript:alert(1)"> on its sweep's page,
and one holding [/] was a traceback from run, history, compare and recommend)."""

from __future__ import annotations

import dataclasses
import html.parser
import io
import itertools
import re
import urllib.parse

import pytest
from conftest import FAST_OVERRIDES
from fake_backend import ENVIRONMENT, fake_result
from fastapi.testclient import TestClient
from rich.console import Console
from served import with_categories
from test_cli import advisor

from advisor.config import load, trial_spec
from advisor.recommendation import against, recommend
from advisor.report import plots, sweep_report, tables
from advisor.report.progress import SweepDisplay
from advisor.result import Failure, Status, TrialResult
from advisor.search.steps import Settled, Step, SweepProgress
from advisor.search.study import Resumed
from advisor.service.server import create_app
from advisor.store.store import Store
from advisor.store.sweeps import Sweep
from advisor.target import Target

HOSTILE = (
    "[link=javascript:alert(1)]w[/link]",
    '[link=x" autofocus onfocus="alert(1)]y[/link]',
    "a[/]b",
    "[bold red]x",
    "<img src=x onerror=alert(1)>",
    '" autofocus onfocus="alert(1)',
    r"$\undefined$ 50%",  # matplotlib's mathtext, in a plot's title
)


def named(name: str, batch: int = 64) -> TrialResult:
    """A trial whose workload, optimizer, GPU and host are all called `name`."""
    spec = trial_spec(load(["model=tiny_cnn", "device=cuda", f"batch_size={batch}"]))
    model, optimizer = (
        dataclasses.replace(part, name=name) for part in (spec.model, spec.optimizer)
    )
    spec = dataclasses.replace(spec, model=model, optimizer=optimizer)
    env = dataclasses.replace(ENVIRONMENT, device_name=name, host=name)
    result = with_categories(fake_result(spec))
    return dataclasses.replace(result, environment=env, memory_snapshot=f"/nowhere/{name}.pickle")


def crashed() -> TrialResult:
    """A trial that crashed saying every name."""
    failure = Failure(message="\n".join(HOSTILE))
    return dataclasses.replace(named(HOSTILE[0]), status=Status.crashed, memory=None,
                               throughput=None, failure=failure)  # fmt: skip


def planted(db_url: str) -> tuple[Store, list[int], int]:
    """A trial named by each of HOSTILE, one that crashed saying all of them, and a sweep of
    them all whose target and stop are named so too."""
    store = Store(db_url)
    trials = [named(name, 64 + i) for i, name in enumerate(HOSTILE)]
    ids = [store.add(result).id or 0 for result in [*trials, crashed()]]
    sweep = store.open_sweep(Sweep("n" * 32, HOSTILE[0], HOSTILE[-1], 40 * 2**30, 0.05, None))
    for trial_id in ids:
        store.link(sweep.id or 0, trial_id, reused=False)
    store.finish_sweep(sweep.id or 0, HOSTILE[1])
    return store, ids, sweep.id or 0


@pytest.mark.parametrize("name", HOSTILE)
def test_the_report_hands_names_to_rich_as_text(tmp_path, name):
    """On any console, markup read or not: rich's own default reads it."""
    result, other = named(name), named(name, 32)
    target = Target(name, 40 * 2**30, 0.05)
    rec = recommend([result, other], target)
    step = Step(result.spec, Settled.measured, result, feasible=True)
    sweep = Sweep("n" * 32, name, name, 2**30, 0.05, None, stop_reason=name)
    renderables = [
        tables.history_table([result, crashed()]), tables.trial_view(result),
        tables.trial_view(crashed()), tables.compare_table([result, other]),
        tables.sweeps_table([(sweep, 2)]),
        sweep_report.recommendation_report(rec, None),
        sweep_report.baseline_line(other, against(other, result), rec),
        sweep_report.sweep_step_line(SweepProgress(best=result), step, 3),
        sweep_report.measured_again_line(result, "a repeat of the fastest so far"),
        sweep_report.largest_batches_table(
            sweep_report.largest_batches({"a": (result.spec, 64, "measured")}), target),
    ]  # fmt: skip
    console = Console(file=io.StringIO(), width=300, record=True)
    for renderable in renderables:
        console.print(renderable)
        assert name in console.export_text(), renderable
    display = Console(file=io.StringIO(), width=300, force_terminal=True, record=True)
    with SweepDisplay(display, trials=3, minutes=None) as shown:
        resumed = Resumed(1, f"{name} for {name}", None, 3, (f"model={name}",), ())
        shown.started(1, f"{name} on {name} for {name}", resumed=resumed, workers=1)
        shown.measuring(0, result.spec)
        shown.bar.refresh()
    shown_text = display.export_text()
    assert f"sweep 1: {name} on {name}" in shown_text and f"{name} on cuda" in shown_text
    assert f"study '{name} for {name}'" in shown_text.replace("\n", "")
    assert f"model={name} then" in shown_text.replace("\n", "")
    plots.save_memory_png(result, 40 * 2**30, tmp_path / "breakdown.png")  # $: not mathtext
    plots.save_sweep_png([result, other], rec, tmp_path / "sweep.png")


class Page(html.parser.HTMLParser):
    """A page's text as a reader sees it, and its elements' attributes."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.text = ""
        self.elements: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.feed(markup)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text += data


def injected(page: Page) -> list[str]:
    """What a name could only have brought: an element, a handler, autofocus or a script's
    link."""
    found = [f"<{tag}>" for tag, _ in page.elements if tag in ("img", "iframe", "object")]
    for tag, attrs in page.elements:
        for key, value in attrs:
            if key.startswith("on") or key == "autofocus":
                found.append(f"<{tag} {key}>")
            if key.endswith("href") and re.match(r"\s*(javascript|data):", value or "", re.I):
                found.append(f"<{tag} {key}={value}>")
    return found


def test_every_page_shows_names_as_text(tmp_path):
    store, ids, sweep_id = planted(f"sqlite:///{tmp_path / 'names.sqlite'}")
    app = create_app(store)
    client = TestClient(app, raise_server_exceptions=False)
    values = {"trial_id": ids, "sweep_id": [sweep_id]}
    urls: dict[str, tuple[str, ...]] = {}  # each URL: the names it must show
    for route in app.routes:  # every page and answer there is, a new one too
        if "GET" not in getattr(route, "methods", ()):
            continue
        params = re.findall(r"{(\w+)}", route.path)
        assert set(params) <= values.keys(), f"{route.path}: give this test its {params}"
        for chosen in itertools.product(*(values[p] for p in params)):
            urls[route.path.format(**dict(zip(params, chosen, strict=True)))] = ()
    urls |= {"/": HOSTILE, "/sweeps": HOSTILE[:1], f"/sweeps/{sweep_id}": HOSTILE[:1],
             "/recommend": HOSTILE}  # fmt: skip
    urls |= {f"/trials/{i}": (name,) for i, name in zip(ids, HOSTILE, strict=False)}
    for name in HOSTILE:
        query = urllib.parse.urlencode({"model": name, "memory": "40GiB"})
        urls[f"/recommend?{query}"] = (name,)
        urls[f"/api/v1/recommend?{query}"] = ()
        urls[f"/?{urllib.parse.urlencode({'model': name})}"] = (name,)
        urls[f"/?{urllib.parse.urlencode({'status': name})}"] = ()  # said back, as its repr
    assert len(urls) > 30
    wrong = []  # every page's faults at once
    for url, names in urls.items():
        answer = client.get(url)
        if answer.status_code >= 500:
            wrong.append((url, answer.status_code))
        elif "text/html" in answer.headers.get("content-type", ""):
            page = Page(answer.text)
            wrong += [(url, found) for found in injected(page)]
            wrong += [(url, f"{name} not shown") for name in names if name not in page.text]
    assert not wrong, "\n".join(map(str, wrong))


@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
def test_the_terminal_prints_names_as_they_are(tmp_path, monkeypatch, encoding):
    """history, show, compare and sweeps, and on a terminal that says ASCII only (what it
    cannot say becomes ?, not a UnicodeEncodeError)."""
    monkeypatch.setenv("PYTHONIOENCODING", encoding)
    db_url = f"sqlite:///{tmp_path / 'names.sqlite'}"
    _, ids, _ = planted(db_url)
    shows = [("show", str(i), (name,)) for i, name in zip(ids, HOSTILE, strict=False)]
    # compare two at a time: side by side, each name stays on one line
    pairs = [
        ("compare", str(ids[i]), str(ids[i + 1]), HOSTILE[i : i + 2])
        for i in range(0, len(HOSTILE), 2)
    ]
    commands = [("history", HOSTILE), ("sweeps", HOSTILE[:1]), *shows, *pairs]
    wrong = []
    for *args, names in commands:
        done = advisor(*args, db_url=db_url)
        if done.returncode != 0 or "Traceback" in done.stderr:
            wrong.append((args, done.returncode, done.stderr[-300:]))
        wrong += [(args, f"{name} not shown") for name in names if name not in done.stdout]
    assert not wrong, "\n".join(map(str, wrong))


def test_a_workload_named_in_markup_is_measured_and_recommended(tmp_path, monkeypatch):
    """The name reaches run's status line, its report, history and recommend, all as text."""
    name = " ".join((HOSTILE[2], HOSTILE[0], HOSTILE[3]))  # [/] first: nothing to close
    workload = tmp_path / "named.py"
    workload.write_text(
        "import torch\nimport advisor\n\n\n"
        "def batch(batch_size, device):\n"
        "    return torch.randn(batch_size, 8, device=device), "
        "torch.randint(2, (batch_size,), device=device)\n\n\n"
        "def workload():\n"
        f"    return advisor.Workload(name={name!r}, model=lambda: torch.nn.Linear(8, 2), "
        "batch=batch)\n"
    )
    db_url = f"sqlite:///{tmp_path / 'named.sqlite'}"
    source = f"workload={workload}:workload"
    run = advisor("run", source, "device=cpu", "batch_size=2", *FAST_OVERRIDES, db_url=db_url)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert name in run.stdout
    for args in (["history"], ["show", "1"], ["compare", "1", "1"],
                 ["recommend", source, "device=cpu", "gpu.memory=1GiB"]):  # fmt: skip
        for encoding in ("utf-8", "ascii"):
            monkeypatch.setenv("PYTHONIOENCODING", encoding)
            done = advisor(*args, db_url=db_url)
            assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
            assert name in done.stdout, (args, done.stdout)
