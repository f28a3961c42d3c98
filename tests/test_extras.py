"""The core runs with torch alone; a bundled model or a plot whose library (an extra) is not
installed is one line naming the extra, before anything is measured or stored."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import FAST_OVERRIDES
from test_cli import advisor, trial_count

EXTRAS = ("torchvision", "transformers", "matplotlib", "timm")


@pytest.fixture
def without_extras(tmp_path, monkeypatch):
    """Python as if the extras' libraries were not installed (None in sys.modules blocks an
    import), in advisor and in its workers."""
    site = tmp_path / "blocked"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        f"import sys\nfor name in {EXTRAS!r}:\n    sys.modules[name] = None\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(site))


@pytest.mark.parametrize(
    "args, said",
    [
        (["estimate", "model=resnet50", "batch_size=2", "gpu=t4"],
         "model=resnet50 needs torchvision, which is not installed: pip install 'advisor[vision]'"),
        (["run", "model=tiny_gpt2", "device=cpu"],
         "model=tiny_gpt2 needs transformers, which is not installed: pip install 'advisor[text]'"),
        (["run", "model=convnext_tiny", "device=cpu"], "pip install 'advisor[vision]'"),
        (["run", "model=tiny_mlp", "device=cpu", "plot=x.png"],
         "plot=x.png needs matplotlib, which is not installed: pip install 'advisor[plots]'"),
    ],
)  # fmt: skip
def test_a_missing_extra_is_one_line_and_nothing_is_stored(without_extras, db_url, args, said):
    result = advisor(*args, db_url=db_url)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("advisor: ") and line.endswith(said)
    assert trial_count(db_url) == 0


def test_the_core_measures_a_model_with_torch_alone(without_extras, db_url):
    result = advisor("run", "model=tiny_mlp", "device=cpu", *FAST_OVERRIDES, db_url=db_url)
    assert result.returncode == 0, result.stderr
    assert trial_count(db_url) == 1


def test_historys_verbs_read_without_importing_torch(db_url, tmp_path, monkeypatch):
    """history, show, compare, sweeps and export only read: they start without torch (its
    import was 2.4 s of the 3.2 s that advisor history took), and so does serve's app."""
    from served import stored_sweep

    store, ids, sweep_id = stored_sweep(db_url)
    site = tmp_path / "no-torch"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    for args in (["history", "limit=3"], ["show", str(ids[0])], ["compare", str(ids[0]),
                 str(ids[1])], ["sweeps"], ["export", f"out={tmp_path}/all.json"]):  # fmt: skip
        done = advisor(*args, db_url=db_url)
        assert done.returncode == 0, (args, done.stderr)
    assert "tiny_cnn on cuda" in advisor("history", db_url=db_url).stdout
    served = subprocess.run([sys.executable, "-c", "import advisor.service.server"],
                            capture_output=True, text=True)  # fmt: skip
    assert served.returncode == 0, served.stderr
    measuring = advisor("run", "model=tiny_mlp", "device=cpu", db_url=db_url)
    assert "No module named 'torch'" in measuring.stderr or "import of torch" in measuring.stderr
    assert measuring.returncode != 0  # (torch is blocked indeed: measuring needs it)
