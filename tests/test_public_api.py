"""advisor's public surface: what `import advisor` offers, and that it costs a worker nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

import advisor


def test_every_public_name_resolves_to_where_it_lives():
    from advisor import _MODULE_OF

    assert set(advisor.__all__) == {*_MODULE_OF, "__version__"}
    for name in advisor.__all__:
        assert getattr(advisor, name) is not None
    assert callable(advisor.run) and callable(advisor.estimate)  # functions, not the modules
    assert issubclass(advisor.WorkloadError, advisor.AdvisorError)


def test_importing_advisor_imports_neither_optuna_nor_sqlalchemy():
    """The worker imports the package for each trial; it should pay only for what it uses."""
    code = "import sys, advisor; print(sorted({'optuna', 'sqlalchemy'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr


@pytest.mark.parametrize(
    "call, said, not_said",
    [
        (lambda: advisor.run("tiny_mlp", device="cpu", gpu={"memory": "1GiB"}),
         'gpu={"memory": ...} does not apply to run', "gpu.memory="),
        (lambda: advisor.run("tiny_mlp", colour="blue"), "README lists them", "--help"),
        (lambda: advisor.run("tiny_mlp", device="cpu", batch_size="x"),
         'batch_size="x": batch_size takes a whole number', "batch_size=x"),
        (lambda: advisor.sweep("tiny_mlp", device="cpu"),
         'device="cpu" has no GPU memory to fit: name a budget, e.g. gpu={"memory": "64MiB"}',
         "gpu.memory=64MiB"),
        (lambda: advisor.estimate("tiny_mlp", memory_snapshot="a.pickle"),
         'advisor.run(..., memory_snapshot="FILE.pickle")', "advisor run"),
        (lambda: advisor.run("tiny_mlp", device="cpu", model={"depth": 3}),
         'add it with overrides=["+model.depth=VALUE"]', "+model.depth=VALUE "),
    ],
)  # fmt: skip
def test_the_python_face_speaks_python(call, said, not_said):
    """advisor.run(..., gpu={"memory": "1GiB"}) was told 'gpu.memory= does not apply': the
    command's words, where a Python caller writes keyword arguments."""
    with pytest.raises(advisor.AdvisorError) as raised:
        call()
    assert said in str(raised.value) and not_said not in str(raised.value)


def test_the_command_keeps_its_words():
    from advisor import verbs

    with pytest.raises(advisor.ConfigError, match="gpu.memory= does not apply to run"):
        verbs.run(overrides=["model=tiny_mlp", "device=cpu", "gpu.memory=1GiB"])


@pytest.mark.parametrize(
    "command, python",
    [
        ("no CUDA GPU here to sweep on (device=auto): sweep on the CPU, with a tiny model (advisor "
         "sweep model=tiny_cnn device=cpu gpu.memory=64MiB trials=6), or ask advisor recommend",
         'no CUDA GPU here to sweep on (device="auto"): sweep on the CPU, with a tiny model '
         '(advisor.sweep(model="tiny_cnn", device="cpu", gpu={"memory": "64MiB"}, trials=6)), '
         "or ask advisor.recommend(...)"),
        ("estimate with advisor estimate ... gpu=NAME",
         "estimate with advisor.estimate(..., gpu=NAME)"),
        ("lr= is not a setting (did you mean optimizer.lr=?)",
         'lr= is not a setting (did you mean optimizer={"lr": ...}?)'),
        ("space.precision=[bf16,fp16] with compile=true, memory_cap=BYTES and timeout_s=null.",
         'space={"precision": ["bf16", "fp16"]} with compile=True, memory_cap=BYTES and '
         "timeout_s=None."),
        # the user's own words (their optimizer's arguments, a URL's query) are left as they are
        ("adamw (foreach=True, lr='abc') raised TypeError: set optimizer.NAME=VALUE",
         'adamw (foreach=True, lr=\'abc\') raised TypeError: set optimizer={"NAME": VALUE}'),
        ("sqlite:////tmp/a.sqlite?mode=ro cannot be read: mode=ro size=3",
         "sqlite:////tmp/a.sqlite?mode=ro cannot be read: mode=ro size=3"),
    ],
)  # fmt: skip
def test_command_words_in_python(command, python):
    from advisor.arguments import in_python_words

    assert in_python_words(command) == python
