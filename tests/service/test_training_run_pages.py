"""The dashboard puts a user's training run beside the prediction it followed (issue 29): its
page shows the two side by side and the difference, and the trials page finds runs by kind."""

from __future__ import annotations

from conftest import spec_of
from fake_backend import fake_result
from fastapi.testclient import TestClient

from advisor.in_training.training_run import TrainingRun
from advisor.service.server import create_app
from advisor.store.store import Store


def test_a_training_runs_page_shows_it_beside_its_prediction(db_url):
    store = Store(db_url)
    trial = store.add(fake_result(spec_of("model=tiny_mlp", "batch_size=16"))).id
    with TrainingRun(trial, warmup=0, every=1, db_url=db_url) as run:
        run.step()
    assert run.stored is not None
    client = TestClient(create_app(store), raise_server_exceptions=False)
    page = client.get(f"/trials/{run.stored.id}").text
    assert "trials side by side" in page and f"advisor compare {trial} {run.stored.id}" in page
    assert f"training run {run.stored.id} against trial {trial}, the setting it followed" in page
    listed = client.get("/", params={"kind": "training"}).text
    assert f'href="/trials/{run.stored.id}"' in listed and f'href="/trials/{trial}"' in listed
    measured = client.get("/", params={"kind": "measured"}).text
    assert f'href="/trials/{run.stored.id}"' not in measured
    assert client.get("/", params={"kind": "guessed"}).status_code == 400
