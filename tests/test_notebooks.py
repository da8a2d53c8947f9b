"""Static checks over every notebook: runnable by nbval in the current env, and committed clean.

* kernelspec ``python3``; no saved widget state (``metadata.widgets``);
* outputs only in ``# NBVAL_CHECK_OUTPUT`` cells (or cells tagged ``nbval-check-output``), and those
  have a non-null ``execution_count`` (nbval refuses "unrun reference cells" with outputs).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def _is_check_cell(cell) -> bool:
    return "NBVAL_CHECK_OUTPUT" in cell.source or "nbval-check-output" in cell.get("metadata", {}).get("tags", [])


def test_there_is_a_quickstart():
    assert any(p.name == "00_quickstart.ipynb" for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_clean(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
    assert "widgets" not in nb.metadata, "saved widget state: strip metadata.widgets"
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not cell.get("outputs"):
            continue
        assert _is_check_cell(cell), f"cell {i} keeps outputs but is not a NBVAL_CHECK_OUTPUT cell"
        assert cell.get("execution_count") is not None, f"cell {i} has outputs but execution_count is null"


def test_quickstart_is_short_and_has_a_check_cell():
    nb = nbformat.read(NOTEBOOKS[0].parent / "00_quickstart.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert len(code) < 10 and _is_check_cell(code[-1])
