"""The notebooks as committed: with the outputs of a quick-mode run, which ``make test`` compares (nbval).

* kernelspec ``python3``; no saved widget state; each notebook under 1 MB and as ``notebooks/_strip.py``
  leaves it (no JavaScript loader, no Bokeh document, no execution timestamps: re-stripping changes nothing);
* every cell with outputs has an execution count (nbval compares no "unrun" cell), and a cell that opts out
  with ``# NBVAL_IGNORE_OUTPUT`` says why on the next line;
* at least 80 % of the code cells that produce output are compared;
* the comparison bites: a copy of a notebook with one number of a committed output changed fails nbval, on
  that cell only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SANITIZE = ROOT / "notebooks" / "nbval_sanitize.cfg"
MAX_BYTES = 1_000_000


def _strip_module():
    spec = importlib.util.spec_from_file_location("notebooks_strip", ROOT / "notebooks" / "_strip.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _code(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def _is_check_cell(cell) -> bool:
    return "NBVAL_CHECK_OUTPUT" in cell.source or "nbval-check-output" in cell.get("metadata", {}).get("tags", [])


def test_there_is_a_quickstart():
    assert any(p.name == "00_quickstart.ipynb" for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_committed_with_small_comparable_outputs(path, tmp_path):
    assert path.stat().st_size < MAX_BYTES, f"{path.name}: {path.stat().st_size} bytes"
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
    assert "widgets" not in nb.metadata, "saved widget state: run `make notebooks`"
    ignored = _strip_module().ignored
    for i, cell in enumerate(_code(nb)):
        if cell.get("outputs"):
            assert cell.get("execution_count") is not None, f"code cell {i} has outputs but execution_count is null"
        assert not any(o.output_type == "error" for o in cell.get("outputs", [])), f"code cell {i} stored an error"
        lines = cell.source.splitlines()
        if ignored(cell) and lines and "NBVAL_" in lines[0]:
            assert len(lines) > 1 and lines[1].startswith("# ") and len(lines[1]) > 10, \
                f"code cell {i} ignores its output without a comment line saying why"
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    assert not _strip_module().strip(copy), f"{path.name}: notebooks/_strip.py refuses it"
    assert json.loads(copy.read_text()) == json.loads(path.read_text()), \
        f"{path.name} is not as notebooks/_strip.py leaves it: run `make notebooks`"


def test_most_output_cells_are_compared():
    """A cell produces output if it has stored outputs or opts out of the comparison (a JavaScript loader
    stores nothing); it is compared unless it opts out. Figures and views count as compared: nbval compares
    their text repr (nbval_sanitize.cfg reduces the Bokeh document itself to one line)."""
    ignored = _strip_module().ignored
    producing = compared = 0
    report = []
    for path in NOTEBOOKS:
        cells = [c for c in _code(nbformat.read(path, as_version=4)) if c.get("outputs") or ignored(c)]
        n = sum(not ignored(c) for c in cells)
        assert n, f"{path.name} compares no output"
        producing, compared = producing + len(cells), compared + n
        report.append(f"{path.name}: {n}/{len(cells)}")
    assert compared >= 0.8 * producing, f"{compared}/{producing} output cells compared: " + ", ".join(report)


def test_quickstart_is_short_and_has_a_check_cell():
    nb = nbformat.read(NOTEBOOKS[0].parent / "00_quickstart.ipynb", as_version=4)
    code = _code(nb)
    assert len(code) < 10 and _is_check_cell(code[-1])


def _truncated_copy(tmp_path: Path) -> tuple[Path, int, str]:
    """01_partitioning up to its metrics table, with METIS's edge cut in the committed table raised by one:
    ``(copy, code cell index of the table, the changed line)``."""
    nb = nbformat.read(ROOT / "notebooks" / "01_partitioning.ipynb", as_version=4)
    code = _code(nb)
    index = next(i for i, c in enumerate(code) if "metrics().summary()" in c.source)
    nb.cells = nb.cells[: nb.cells.index(code[index]) + 1]
    out = next(o for o in code[index].outputs if o.output_type == "execute_result")
    lines = out.data["text/plain"].splitlines()
    row = next(k for k, line in enumerate(lines) if line.startswith("metis "))
    lines[row] = re.sub(r"\d+", lambda m: str(int(m.group()) + 1), lines[row], count=1)  # the edge cut, + 1
    out.data["text/plain"] = "\n".join(lines)
    copy = tmp_path / "01_partitioning_mutated.ipynb"
    nbformat.write(nb, copy)
    return copy, index, lines[row]


def test_nbval_fails_on_a_changed_number(tmp_path):
    copy, index, changed = _truncated_copy(tmp_path)
    env = {**os.environ, "WORKBENCH_QUICK": "1", "TQDM_DISABLE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
         "--nbval-sanitize-with", str(SANITIZE), "--nbval-cell-timeout=300", copy.name],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    # the changed cell fails on its outputs, and every cell before it (executed and compared) passes
    assert re.search(rf"\b1 failed, {index} passed\b", out), out[-3000:]
    assert f"::Cell {index}" in out and "Cell outputs differ" in out, out[-3000:]
    assert changed.split()[1] in out, out[-3000:]
