"""The house as ARCHITECTURE.md draws it, read off the code: imports run one way, down the
layers below; no module imports itself back through others; nothing inside the package imports
its face (advisor/__init__.py, which imports the verbs); no module outgrows one concept."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "advisor"

# Each part of the package (a top-level module, or a concept folder) may import only the parts
# before it. The order is ARCHITECTURE.md's layers, lowest first.
LAYERS = (
    "errors", "version", "paths", "extras",  # what everything may use
    "spec", "gpus", "result", "workload", "target", "interconnect", "communication",  # nouns
    "models", "catalog",  # the bundled models
    "store",  # the results database
    "trial",  # one setting measured, in its own process
    "optimizers",  # the bundled optimizers (conf/optimizer)
    "settings",  # the schema of the settings (conf/config.yaml)
    "config",  # Hydra: settings composed into specs
    "arguments",  # the Python API's arguments as settings
    "estimation",  # memory without a GPU
    "emit",  # a setting in a trainer's words
    "recommendation",  # the fastest setting that fits, from results
    "in_training",  # inside the user's own training: the OOM fallback
    "search",  # the sweep
    "report",  # what the terminal shows
    "queries",  # questions of the stored history
    "service",  # advisor serve
    "console", "history_cli",  # the command's output, and its verbs over what is stored
    "verbs",  # what each measuring command does
    "cli", "__main__", "__init__",  # the faces
)  # fmt: skip
MOST_LINES = 400


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = modules()


def imported(name: str) -> Iterator[tuple[int, str]]:
    """The package's modules this one imports, anywhere in it (a lazy import counts too), with
    the line; `advisor` itself where it imports the face."""
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in MODULES
                else node.module
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target not in MODULES and "." in target:
                target = target.rpartition(".")[0]
            if target in MODULES and target != name:
                yield node.lineno, target


def part(name: str) -> str:
    return name.split(".")[1] if "." in name else "__init__"


def test_every_part_has_its_layer():
    assert {part(name) for name in MODULES} == set(LAYERS)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_run_down_the_layers(name):
    here = LAYERS.index(part(name))
    upward = [
        f"{MODULES[name].name}:{line} imports {target}"
        for line, target in imported(name)
        if LAYERS.index(part(target)) > here
    ]
    assert not upward, "an import runs back up: " + "; ".join(upward)


def a_loop(graph: dict[str, set[str]]) -> list[str] | None:
    """A module that imports itself back through others, as the path round; None if none."""
    done: set[str] = set()

    def loop_from(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        for target in sorted(graph.get(name, ())):
            if found := loop_from(target, [*path, name]):
                return found
        done.add(name)
        return None

    return next((found for name in sorted(graph) if (found := loop_from(name, []))), None)


def test_no_module_imports_itself_through_others():
    found = a_loop({name: {target for _, target in imported(name)} for name in MODULES})
    assert found is None, " -> ".join(found or [])


@pytest.mark.parametrize("name", sorted(set(MODULES) - {"advisor"}))
def test_nothing_inside_imports_the_face(name):
    text = MODULES[name].read_text()
    assert "advisor" not in {target for _, target in imported(name)}
    assert "advisor.__version__" not in text and "advisor.__file__" not in text


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_module_holds_one_concept(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MOST_LINES, f"{MODULES[name]} has {lines} lines: split it along its concepts"


@pytest.mark.parametrize("folder", sorted({p.parent.name for p in PACKAGE.glob("*/__init__.py")}))
def test_each_folder_names_its_modules(folder):
    """A folder's __init__ lists its modules (`- name.py  what it offers`): all, and no other."""
    doc = ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text())) or ""
    listed = set(re.findall(r"^- (\w+)\.py\b", doc, re.MULTILINE))
    assert listed == {p.stem for p in (PACKAGE / folder).glob("*.py")} - {"__init__"}


def test_the_checks_can_fail():
    """Each check sees what it must: the loop the face once closed (runner -> advisor ->
    verbs -> runner), imports found anywhere in a module, and the layers' order."""
    assert a_loop({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    face_loop = {"advisor.trial.runner": {"advisor"}, "advisor": {"advisor.verbs"},
                 "advisor.verbs": {"advisor.trial.runner"}}  # fmt: skip
    assert a_loop(face_loop) == ["advisor", "advisor.verbs", "advisor.trial.runner", "advisor"]
    worker = {target for _, target in imported("advisor.trial.worker")}
    assert {"advisor.trial.measure", "advisor.spec", "advisor.version"} <= worker
    assert "advisor.verbs" in {target for _, target in imported("advisor")}  # (TYPE_CHECKING)
    assert LAYERS.index(part("advisor.cli")) > LAYERS.index(part("advisor.trial.worker"))
    assert part("advisor") == "__init__" and part("advisor.store.sweeps") == "store"
