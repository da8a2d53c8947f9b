"""Imports point one way: notebooks -> recipes/widgets -> workbench; DGL only where it is wrapped."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_IN_CORE = {"widgets", "recipes", "panel", "holoviews", "ipywidgets", "bokeh"}


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


def test_graph_and_interop_do_not_import_each_other_at_load_time():
    for path, other in (("interop.py", "workbench.graph"), ("graph.py", "workbench.interop")):
        body = ast.parse((ROOT / "workbench" / path).read_text()).body
        assert not any(isinstance(n, ast.ImportFrom) and n.module == other for n in body), path


@pytest.mark.parametrize("path", sorted((ROOT / "recipes").glob("*.py")), ids=lambda p: p.name)
def test_recipes_do_not_import_views(path):
    assert not _imports(path) & {"widgets", "panel", "holoviews", "ipywidgets"}


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
