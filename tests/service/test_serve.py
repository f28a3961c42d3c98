"""advisor serve: the JSON API and the dashboard over a real SQLite database, through FastAPI's
TestClient, and the command itself listening on a port. Every route only reads; a bad
parameter is a 4xx with a message, never a 500."""

from __future__ import annotations

import shutil
import socket
import sqlite3
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from served import serving, stored_sweep

import advisor
from advisor.queries import FILTERS, RECOMMEND_PARAMS
from advisor.recommendation import recommend
from advisor.service.server import create_app
from advisor.target import Target


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = tmp_path_factory.mktemp("served") / "advisor.sqlite"
    store, ids, sweep_id = stored_sweep(f"sqlite:///{path}")
    client = TestClient(create_app(store), raise_server_exceptions=False)
    return client, store, ids, sweep_id, path


def test_every_route_only_reads(served):
    client, _, ids, sweep_id, path = served
    operations = {path: set(methods) for path, methods in
                  client.get("/openapi.json").json()["paths"].items()}  # fmt: skip
    assert operations == {
        "/api/v1/trials": {"get"},
        "/api/v1/trials/{trial_id}": {"get"},
        "/api/v1/sweeps": {"get"},
        "/api/v1/sweeps/{sweep_id}": {"get"},
        "/api/v1/recommend": {"get"},
    }
    before = _dump(path)
    for url in ("/api/v1/trials", f"/api/v1/trials/{ids[0]}", f"/api/v1/sweeps/{sweep_id}",
                "/", f"/trials/{ids[0]}", f"/sweeps/{sweep_id}", "/sweeps"):  # fmt: skip
        for method in ("post", "put", "patch", "delete"):  # the pages too
            assert getattr(client, method)(url).status_code == 405, (method, url)
        assert client.get(url).status_code == 200, url
    assert client.get("/api/v1/recommend?model=tiny_cnn&gpu=a100_40gb").status_code == 200
    assert client.get("/recommend?model=tiny_cnn&gpu=a100_40gb").status_code == 200
    assert _dump(path) == before  # nothing written by any of it


def test_trials_take_historys_filters(served):
    client, store, ids, sweep_id, _ = served
    answer = client.get("/api/v1/trials").json()
    assert [t["id"] for t in answer["trials"]] == ids[::-1] and answer["more"] is False
    assert answer["trials"][0] == store.get(ids[-1]).to_dict()  # as history --json has it
    ok = client.get("/api/v1/trials", params={"status": "oom"}).json()["trials"]
    assert [t["id"] for t in ok] == [ids[-1]] and ok[0]["status"] == "oom"
    two = client.get("/api/v1/trials", params={"limit": "2"}).json()
    assert [t["id"] for t in two["trials"]] == ids[:-3:-1] and two["more"] is True
    since = client.get("/api/v1/trials", params={"since": "2026-12-01T10:08"}).json()
    assert [t["id"] for t in since["trials"]] == ids[:-3:-1]
    swept = client.get("/api/v1/trials", params={"sweep": sweep_id, "limit": 50}).json()
    assert len(swept["trials"]) == len(ids)

    def found(**query) -> list[int]:
        return [t["id"] for t in client.get("/api/v1/trials", params=query).json()["trials"]]

    assert found(gpu="h100") == [] and found(gpu="H200") == ids[::-1]  # "FAKE H200"
    assert found(workload="catalog.classifier") == ids[::-1] and found(workload="x.py:f") == []
    assert found(torch="fake") == ids[::-1] and found(torch="2.11") == []
    assert found(until="2026-12-01T10:02") == ids[1::-1]
    one = store.get(ids[3])
    assert found(hash=one.spec.hash) == [ids[3]]


def test_one_trial_and_one_sweep(served):
    client, store, ids, sweep_id, _ = served
    assert client.get(f"/api/v1/trials/{ids[2]}").json() == store.get(ids[2]).to_dict()
    listed = client.get("/api/v1/sweeps").json()
    assert [(s["id"], s["trials"], s["stop_reason"]) for s in listed] == [
        (sweep_id, len(ids), "patience")
    ]
    sweep = client.get(f"/api/v1/sweeps/{sweep_id}").json()
    assert [t["trial"]["id"] for t in sweep["trials"]] == ids
    best = sweep["recommendation"]["recommendation"]
    target = sweep["recommendation"]["target"]
    assert target == {"name": "a100_40gb", "memory_bytes": 40 * 2**30, "margin": 0.05}
    fastest = max((r for r in store.trials(status="ok")), key=lambda r: r.samples_per_s)
    assert best["id"] == fastest.id  # everything fits 38 GiB


def test_the_server_and_python_recommend_alike(served):
    """One recommend answers the server, the command line and Python: the same stored trials,
    the same target, the same setting."""
    client, _, _, _, path = served
    for query, keywords in (({"gpu": "t4"}, {"gpu": "t4"}),
                            ({"memory": "12GiB", "margin": "0.1"},
                             {"gpu": {"memory": "12GiB"}, "margin": 0.1})):  # fmt: skip
        served_answer = client.get("/api/v1/recommend", params={"model": "tiny_cnn", **query})
        python = advisor.recommend("tiny_cnn", db_url=f"sqlite:///{path}", **keywords)
        assert python.best is not None
        assert served_answer.json()["recommendation"]["id"] == python.best.id


def test_no_trial_at_the_effective_batch_asked_is_no_recommendation_not_an_error(served):
    client, *_ = served
    query = {"model": "tiny_cnn", "gpu": "t4", "effective_batch_size": "3"}
    answer = client.get("/api/v1/recommend", params=query)
    assert answer.status_code == 200 and answer.json()["recommendation"] is None


def test_recommend_from_history_for_a_gpu_or_a_budget(served):
    client, store, *_ = served
    budget = {"memory": "12GiB", "margin": "0.1"}
    for query, name, memory in (({"gpu": "t4"}, "t4", 16_106_127_360),
                                (budget, "12GiB", 12 * 2**30)):  # fmt: skip
        answer = client.get("/api/v1/recommend", params={"model": "tiny_cnn", **query}).json()
        margin = float(query.get("margin", 0.05))
        assert answer["target"] == {"name": name, "memory_bytes": memory, "margin": margin}
        allowed = memory * (1 - margin)
        expected = recommend(store.trials(status="ok"), Target(name, memory, margin))
        assert answer["recommendation"]["id"] == expected.best.id
        assert answer["recommendation"]["memory"]["device_peak_bytes"] <= allowed
    faster = [r for r in store.trials(status="ok") if r.memory.device_peak_bytes > 12 * 2**30]
    assert (
        max(r.samples_per_s for r in faster)
        > answer["recommendation"]["throughput"]["samples_per_s"]
    )  # the budget is what chose it: faster settings over 12 GiB exist


@pytest.mark.parametrize(
    "url, status, said",
    [
        ("/api/v1/trials?status=fast", 400, "unknown status 'fast'"),
        ("/api/v1/trials?limit=-1", 400, "limit must be from 1 to 10000 here"),
        ("/api/v1/trials?limit=0", 400, "limit must be from 1 to 10000 here"),
        ("/api/v1/trials?limit=x", 400, "limit must be a whole number, got 'x'"),
        ("/api/v1/trials?model=%00", 400, "model: a NUL character is not allowed"),
        ("/api/v1/trials?since=yesterday", 400, "since must be an ISO date"),
        ("/api/v1/trials?sweep=x", 400, "sweep must be a sweep's id"),
        (f"/api/v1/trials?sweep={2**63}", 400, "sweep must be a sweep's id"),  # no SQL integer
        ("/api/v1/trials?colour=red", 400, "unknown filter 'colour'"),
        ("/api/v1/trials/0", 422, "trial_id"),
        ("/api/v1/trials/99999999999999999999", 422, "trial_id"),
        ("/api/v1/trials/abc", 422, "trial_id"),
        ("/api/v1/trials/999", 404, "no trial 999 is stored"),
        ("/api/v1/sweeps/9", 404, "no sweep 9 is stored"),
        ("/api/v1/recommend", 400, "recommend needs model=NAME"),
        ("/api/v1/recommend?model=gpt2&gpu=t4", 400, "no ok cuda trial of model 'gpt2'"),
        ("/api/v1/recommend?model=tiny_cnn&gpu=t4&device=cpu", 400, "its trials ran on cuda"),
        ("/api/v1/recommend?model=tiny_cnn&gpu=v100", 400, "unknown gpu 'v100'"),
        ("/api/v1/recommend?model=tiny_cnn&memory=lots", 400, "gpu memory:"),
        ("/api/v1/recommend?model=tiny_cnn&gpu=t4&margin=2", 400, "margin must be a fraction"),
        ("/api/v1/recommend?model=tiny_cnn&gpu=t4&device=tpu", 400, "device must be cuda"),
        ("/api/v1/nothing", 404, "Not Found"),
    ],
)
def test_a_bad_parameter_is_a_4xx_with_its_reason(served, url, status, said):
    client = served[0]
    answer = client.get(url)
    assert answer.status_code == status and said in answer.json()["detail"], answer.text


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    route=st.sampled_from(["/api/v1/trials", "/api/v1/recommend", "/", "/recommend"]),
    query=st.dictionaries(st.sampled_from([*FILTERS, *RECOMMEND_PARAMS, "x"]), TEXT, max_size=4),
    trial=st.one_of(st.integers(-(2**70), 2**70), TEXT),
)
def test_no_request_is_a_500(served, route, query, trial):
    client = served[0]
    trial = urllib.parse.quote(str(trial), safe="")  # as a browser sends it
    for answer in (client.get(route, params=query), client.get(f"/api/v1/trials/{trial}"),
                   client.get(f"/sweeps/{trial}")):  # fmt: skip
        assert answer.status_code < 500, (answer.request.url, answer.text)


def test_the_dashboards_pages(served):
    client, store, ids, sweep_id, _ = served
    trials = client.get("/", params={"status": "ok"}).text
    ok = [r.id for r in store.trials(status="ok")]
    assert all(f'href="/trials/{i}"' in trials for i in ok)
    assert f'href="/trials/{ids[-1]}"' not in trials  # the OOM is filtered out
    assert trials.count("≤") == 1  # the rate of the trial whose timing was cut is a bound
    page = client.get(f"/trials/{ids[2]}").text
    assert page.count('class="part"') == 6  # the six categories the trial has
    assert "activations" in page and "device peak" in page
    sweep = client.get(f"/sweeps/{sweep_id}").text
    assert "<svg" in sweep and "Pareto front" in sweep and "budget 38.00 GiB" in sweep
    form = client.get("/recommend").text
    assert "<option>tiny_cnn</option>" in form and "<option>a100_40gb</option>" in form
    answered = client.get("/recommend", params={"model": "tiny_cnn", "gpu": "a100_40gb"}).text
    assert "recommended:" in answered
    bad = client.get("/", params={"limit": "many"})
    assert bad.status_code == 400 and "limit must be a whole number" in bad.text
    missing = client.get("/trials/999")
    assert missing.status_code == 404 and "no trial 999 is stored" in missing.text


def test_advisor_serve_listens_and_says_what_is_wrong(served, tmp_path):
    path = served[4]
    missing = _advisor("serve", f"db_url=sqlite:///{tmp_path / 'none.sqlite'}")
    assert missing.returncode == 2 and "no results database at" in missing.stderr
    assert not (tmp_path / "none.sqlite").exists()  # serving creates no database
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        busy = _advisor("serve", "--port", str(port), f"db_url=sqlite:///{path}")
        assert busy.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in busy.stderr
    with serving(path) as (base, told):
        body = urllib.request.urlopen(f"{base}/api/v1/sweeps", timeout=5).read().decode()
    assert '"model":"tiny_cnn"' in body and f"read-only on {base}/" in told[0]


def _advisor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def _dump(path) -> list[str]:
    with sqlite3.connect(path) as connection:
        return list(connection.iterdump())


def test_the_documented_parameters_are_the_ones_read(served):
    """The OpenAPI document lists, for each route, the parameters queries.py reads."""
    paths = served[0].get("/openapi.json").json()["paths"]
    names = {path: [p["name"] for p in ops["get"].get("parameters", [])]
             for path, ops in paths.items()}  # fmt: skip
    assert names["/api/v1/trials"] == list(FILTERS)
    assert names["/api/v1/recommend"] == list(RECOMMEND_PARAMS)


def test_since_and_until_with_a_zone_are_the_same_instant(served):
    client, store, ids, *_ = served  # stored 10:00 to 10:09 UTC, a minute apart
    utc = client.get("/api/v1/trials", params={"since": "2026-12-01T10:08"}).json()["trials"]
    zoned = client.get("/api/v1/trials", params={"since": "2026-12-01T12:08+02:00"}).json()
    assert [t["id"] for t in zoned["trials"]] == [t["id"] for t in utc] == ids[:-3:-1]


def test_serving_reads_a_database_as_it_is(tmp_path):
    """An older schema is refused, not upgraded (a database's error: exit 1, as before its
    class derived from StoreError and the command looked up only StoreError's own); a missing
    file is not created; the database URL's password is never shown."""
    from advisor.errors import ConfigError, OlderSchema
    from advisor.service.server import open_store
    from advisor.store import schema

    old = tmp_path / "old.sqlite"
    shutil.copy(Path(__file__).parent.parent / "schemas" / "0007.sqlite", old)
    before = old.read_bytes()
    said = f"is at schema 0007, not {schema.HEAD}, and is only read here"
    with pytest.raises(OlderSchema, match=said):
        open_store(f"sqlite:///{old}")
    with socket.create_server(("127.0.0.1", 0)) as free:
        port = free.getsockname()[1]
    refused = _advisor("serve", "--port", str(port), f"db_url=sqlite:///{old}")
    assert refused.returncode == 1 and "is only read here" in refused.stderr, refused.stderr
    assert old.read_bytes() == before
    with pytest.raises(ConfigError, match="no results database at"):
        open_store(f"sqlite:///{tmp_path}/none.sqlite")
    assert not (tmp_path / "none.sqlite").exists()
    with pytest.raises(ConfigError, match="is not a database URL: a SQLite file is sqlite:///"):
        open_store(str(tmp_path / "plain-path.sqlite"))
    shown = schema.shown("postgresql://advisor:s3cret@db.example/advisor")
    assert "s3cret" not in shown and shown.startswith("postgresql://advisor:***@")
