"""Keeps the outputs of executed notebooks small and comparable (``make notebooks`` runs it after nbconvert).

``python notebooks/_strip.py notebooks/*.ipynb`` rewrites each notebook in place:

* a Bokeh document (a HoloViews figure or Panel view: its output carries the HoloViews exec/load mime types) is
  bulky and full of random ids. In a compared cell it keeps its text/plain repr, and its HTML becomes what
  ``nbval_sanitize.cfg`` reduces every Bokeh document to, so nbval compares the repr; in a
  ``# NBVAL_IGNORE_OUTPUT`` cell it keeps only the repr, and drops an output with no text/plain at all (the
  JavaScript loaders of ``hv.extension()`` and ``pn.extension()``). ipywidgets views are treated the same way;
* no saved widget state (``metadata.widgets``), no per-cell execution timestamps, no empty display outputs;
* ``language_info`` without the interpreter's patch version (re-saving on another machine changes nothing).

It refuses (exit status 1) a compared cell whose output it would have to drop (nbval would then see an output
the notebook does not hold) and any notebook over 1 MB.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

SANITIZE = Path(__file__).with_name("nbval_sanitize.cfg")
EXEC, LOAD = "application/vnd.holoviews_exec.v0+json", "application/vnd.holoviews_load.v0+json"
WIDGET_VIEW, WIDGET_STATE = "application/vnd.jupyter.widget-view+json", "application/vnd.jupyter.widget-state+json"
BULKY = {LOAD, "application/javascript", WIDGET_VIEW, WIDGET_STATE}
MAX_BYTES = 1_000_000
MAX_OUTPUT_CHARS = 80_000   # a compared cell's output (PSC-GCN's claims table, its notes with the measured runs: 57k)
LANGUAGE_INFO = {"name": "python", "pygments_lexer": "ipython3"}


def _rules() -> list[tuple[str, str]]:
    # the format nbval reads (nbval.plugin.get_sanitize_patterns)
    return re.findall(r"^regex: (.*)$\n^replace: (.*)$", SANITIZE.read_text(), flags=re.MULTILINE)


def _sanitize(text: str, rules) -> str:
    for regex, replace in rules:
        text = re.sub(regex, replace, text)
    return text


def ignored(cell) -> bool:
    markers = ("NBVAL_IGNORE_OUTPUT", "NBVAL_SKIP")
    tags = cell.get("metadata", {}).get("tags", [])
    return any(line.strip().lstrip("#").strip() in markers for line in cell.source.splitlines()) or \
        any(t in ("nbval-ignore-output", "nbval-skip") for t in tags)


def _strip_cell(cell, name: str, index: int, rules) -> list[str]:
    problems, outputs = [], []
    compared = not ignored(cell)
    for n, out in enumerate(cell.get("outputs", [])):
        if out.output_type not in ("display_data", "execute_result"):
            outputs.append(out)
            continue
        data = out.get("data", {})
        if not data:
            continue  # Panel's comm set-up: an output with nothing in it
        rich = EXEC in data or any(k in BULKY for k in data)
        if not compared and "text/plain" not in data:
            continue  # nothing to read in it (a loader's HTML and JavaScript)
        if rich and not compared:
            out.data, out.metadata = {"text/plain": data["text/plain"]}, {}
        elif rich:
            dropped = sorted(k for k in data if k in BULKY)
            if dropped:
                problems.append(f"{name}: code cell {index} is compared but shows {dropped}; mark it "
                                "# NBVAL_IGNORE_OUTPUT (with why)")
                continue
            html = _sanitize(data.get("text/html", ""), rules)
            if len(html) > 1000:
                problems.append(f"{name}: code cell {index}: a Bokeh document that nbval_sanitize.cfg does not reduce")
            out.data = {k: (html if k == "text/html" else v) for k, v in data.items()}
            # the exec renderer needs an id; a fixed one keeps re-saved notebooks free of churn
            out.metadata = {EXEC: {"id": f"stored-{cell.get('id', index)}-{len(outputs)}"}} if EXEC in data else {}
        size = sum(len(v) if isinstance(v, str) else len(str(v)) for v in out.data.values())
        if compared and size > MAX_OUTPUT_CHARS:
            problems.append(f"{name}: code cell {index} stores {size} characters of output")
        outputs.append(out)
    cell.outputs = outputs
    return problems


def strip(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    rules = _rules()
    nb.metadata.pop("widgets", None)
    nb.metadata["language_info"] = dict(LANGUAGE_INFO)
    problems = []
    index = -1
    for cell in nb.cells:
        cell.get("metadata", {}).pop("execution", None)
        if cell.cell_type != "code":
            continue
        index += 1
        problems += _strip_cell(cell, path.name, index, rules)
    nbformat.validate(nb)
    nbformat.write(nb, path)
    if path.stat().st_size > MAX_BYTES:
        problems.append(f"{path.name}: {path.stat().st_size} bytes (over 1 MB)")
    return problems


def main(paths: list[str]) -> int:
    problems = [p for path in paths for p in strip(Path(path))]
    print("\n".join(problems) or f"stripped {len(paths)} notebooks", file=sys.stderr if problems else sys.stdout)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
