"""Imports point one way: notebooks -> reproduce -> recipes/widgets -> workbench; DGL only where it is wrapped."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_IN_CORE = {"widgets", "recipes", "reproduce", "panel", "holoviews", "ipywidgets", "bokeh"}


def _imports(path: Path, top_level_only: bool = False) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else ast.walk(tree)
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


CORE_FILES = sorted((ROOT / "workbench").rglob("*.py"))


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_core_never_imports_views_or_recipes(path):
    bad = _imports(path) & FORBIDDEN_IN_CORE
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_core_imports_dgl_only_inside_functions(path):
    assert "dgl" not in _imports(path, top_level_only=True), f"{path.relative_to(ROOT)} imports dgl at import time"


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_core_imports_pyg_only_inside_functions(path):
    assert "torch_geometric" not in _imports(path, top_level_only=True), f"{path.relative_to(ROOT)} imports PyG"


def test_graph_never_imports_interop():
    """``interop -> graph -> _convert``: ``Graph.to_dgl`` and friends convert through :mod:`workbench._convert`."""
    assert not _module_imports(ROOT / "workbench" / "graph.py", "workbench.graph", _modules("workbench")) & {
        "workbench.interop"}


@pytest.mark.parametrize("path", sorted((ROOT / "recipes").glob("*.py")), ids=lambda p: p.name)
def test_recipes_do_not_import_views(path):
    assert not _imports(path) & {"widgets", "panel", "holoviews", "ipywidgets"}


@pytest.mark.parametrize("path", sorted((ROOT / "recipes").rglob("*.py")), ids=lambda p: p.name)
def test_recipes_never_import_the_reproduction(path):
    """``reproduce`` runs the recipes' configs and judges the papers' claims; a recipe only returns configs."""
    assert "reproduce" not in _imports(path), f"{path.relative_to(ROOT)} imports reproduce"


def test_recipes_is_one_module_per_system():
    """``recipes/`` holds modules of config functions, no subpackage (the claims are the package ``reproduce``)."""
    assert not [p.parent.name for p in (ROOT / "recipes").glob("*/__init__.py")]


@pytest.mark.parametrize("path", sorted((ROOT / "reproduce").rglob("*.py")), ids=lambda p: p.name)
def test_reproduce_does_not_import_views(path):
    assert not _imports(path) & {"widgets", "panel", "holoviews", "ipywidgets", "bokeh"}


def test_notebooks_only_import_and_call():
    """A notebook cell that defines a long function belongs in the package."""
    for nb_path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(nb_path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            src = "".join(cell["source"])
            tree = ast.parse("\n".join(line for line in src.splitlines() if not line.lstrip().startswith(("%", "!"))))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    length = node.end_lineno - node.lineno + 1
                    assert length <= 6, f"{nb_path.name}: {node.name} is {length} lines; move it into the package"


def test_test_module_names_are_unique():
    """pytest's default import mode needs unique basenames across test folders (they have no __init__)."""
    names = [p.name for p in (ROOT / "tests").rglob("test_*.py")]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


# ------------------------------------------------------------------------------------------------ import cycles

def _modules(package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``package`` (a package is its ``__init__``)."""
    out = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _module_imports(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """The modules of ``modules`` that ``name`` imports, by every import statement anywhere in it (inside
    functions and ``if TYPE_CHECKING:`` too). ``from a.b import c`` is module ``a.b.c`` when that is a module,
    else ``a.b``; relative imports are resolved; a name that is no module counts as its closest enclosing one."""
    is_package = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_sees_a_cycle_through_a_package_init():
    graph = {"p": {"p.a"}, "p.a": {"p.b"}, "p.b": {"p"}, "q": {"p"}}
    assert _cycles(graph) == [["p", "p.a", "p.b"]]


@pytest.mark.parametrize("package", ["workbench", "widgets", "recipes", "reproduce"])
def test_imports_point_one_way(package):
    """No import cycle between the modules of ``package``, counting imports inside functions: a module that
    needs another's piece and is needed by it shares that piece through a module below both."""
    modules = _modules(package)
    graph = {name: _module_imports(path, name, modules) for name, path in modules.items()}
    assert _cycles(graph) == []


def test_no_module_class_strings():
    """A class is reached by an import or a registry, never through a ``"package.module:Class"`` string that
    ``importlib`` resolves later: such a string hides a real import (and a real cycle) from the check above.
    (Entry points in ``pyproject.toml`` are metadata, not code.)"""
    import re

    spec = re.compile(r"^(workbench|widgets|recipes|reproduce)(\.\w+)+:\w+$")
    found = [f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
             for package in ("workbench", "widgets", "recipes", "reproduce") for path in sorted((ROOT / package).rglob("*.py"))
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and spec.match(node.value)]
    assert not found, found


MAX_LINES = 600


@pytest.mark.parametrize("package", ["workbench", "widgets", "recipes", "reproduce"])
def test_modules_are_at_most_600_lines(package):
    """A module longer than this holds more than one idea: split it along a seam that means something."""
    long = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / package).rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long


def _class_bases() -> dict[str, set[str]]:
    """Base class name -> the names of the core's classes that derive from it (read from the source)."""
    bases: dict[str, set[str]] = {}
    for path in CORE_FILES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
                    bases.setdefault(name, set()).add(node.name)
    return bases


def test_one_training_program_and_one_loop():
    """Every run is the one ``TrainingProgram`` (the other ``Program``s probe the network or test the runners),
    ``TrainLoop`` has no subclasses, and no ``Steps`` class derives from another: a trainer plugs in as a
    ``Trainer`` with its ``Steps``."""
    bases = _class_bases()
    assert bases.get("Program") == {"TrainingProgram", "NetProbe", "TinyProgram"}
    assert "TrainLoop" not in bases
    assert {"FullGraphTrainer", "MiniBatchTrainer", "ModelAveragingTrainer"} <= bases["Trainer"]
    # no steps class derives from another: what varies is given to them (a full-graph step, the objective, an
    # exchange's hooks, a schedule's pipeline of batches)
    assert bases["Steps"] >= {"FullGraphSteps", "MiniBatchSteps", "AveragingSteps"}
    assert not {"FullGraphSteps", "MiniBatchSteps", "AveragingSteps"} & set(bases)


def test_no_trainer_class_derives_from_another():
    """A trainer class derives from ``Trainer`` only: what differs between two ways to train that share one
    (full-graph training with and without an edge sampler, mini-batch training with and without a schedule) is a
    field of the trainer's record (``workbench.composition.TrainerSpec``: its words, capabilities, the component
    it gives the class), never a subclass. Checked in the source, and on every registered record."""
    from workbench.compose import load_stage_modules
    from workbench.composition import TRAINERS
    from workbench.train.program import Trainer

    bases = _class_bases()
    trainers = bases["Trainer"]
    assert {"FullGraphTrainer", "MiniBatchTrainer", "ModelAveragingTrainer"} <= trainers
    assert not trainers & set(bases), {t: bases[t] for t in trainers & set(bases)}
    load_stage_modules()
    assert {"full_graph", "minibatch", "scheduled", "edge_sampled", "model_averaging"} <= set(TRAINERS)
    for key, spec in TRAINERS.items():
        assert spec.key == key and spec.cls.__bases__ == (Trainer,), (key, spec.cls.__mro__)
    assert TRAINERS["edge_sampled"].cls is TRAINERS["full_graph"].cls
    assert TRAINERS["scheduled"].cls is TRAINERS["minibatch"].cls
