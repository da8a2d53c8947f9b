"""Sphinx configuration of the workbench's documentation (``make docs`` -> ``docs/_build/html``).

The stack, and why
------------------
The site must build offline from the package mirror that ``make setup`` installs from, and every page must
load its scripts, styles and fonts from the site itself (no CDN), as the notebooks and the dashboard do.

* **Sphinx with its alabaster theme.** The mirror carries Sphinx and alabaster but not the PyData theme,
  furo, myst-parser, myst-nb or nbsphinx (the stack dask, pandas and HoloViz use), and a fresh ``make setup``
  must not depend on reaching pypi.org. Alabaster ships its CSS in the package and loads no web font;
  Sphinx's own search (``searchtools.js``) runs offline. Moving to the PyData theme later is a change of
  ``html_theme`` and of the sidebar templates, once the mirror has it.
* **Pages in reStructuredText** (no myst-parser to read Markdown pages).
* **Tutorials from the notebooks' committed outputs**, through a small extension
  (``_ext/wbdocs_notebooks.py``): it reads each ``.ipynb`` with nbformat, turns its headings into sections,
  its Markdown into HTML (markdown-it-py), its code into highlighted blocks and shows each output as it
  was saved (HTML tables, text, streams); ``make test`` already checks with nbval that the committed outputs
  are what the code prints. Live Panel / HoloViews views are not stored in the notebooks (their JavaScript
  is megabytes per view): ``_ext/wbdocs_views.py`` runs each notebook that has views once in quick mode
  (nbclient) and shows every view as embedded Bokeh with the site's own copy of BokehJS, no server needed;
  its docstring says why not images, and what it costs (about 100 s for all notebooks on two cores, cached
  in ``_build/views-cache`` until the code or a notebook changes). ``-D wbdocs_views=NAME,...`` draws only
  some notebooks' views (the test suite draws two).
* **No MathJax** (it would come from a CDN): the notebooks' few ``$...$`` formulas are shown as text with
  Unicode symbols and sub/superscripts, and no docstring uses ``:math:``.
* **The systems' reproduction tables** come from ``reproduce/quick.json``, the output of
  ``workbench reproduce --quick --json`` committed with its date and machine (``make docs-data`` refreshes
  it, about 45 s on two cores), so a docs build runs no training.
* **The Benchmarks page's latest runs** come from the records under ``benchmarks/``, each written by a benchmark
  run with ``--save docs/benchmarks/NAME.json`` (command, date, machine, load average, results, headline rows;
  ``_ext/wbdocs_benchmarks.py``), so the page shows what was measured, not a copy typed by hand.
* **The CLI reference** is printed by ``workbench.cli.build_parser()`` at build time
  (``_ext/wbdocs_cli.py``), so it cannot drift from the parsers.

Warnings are errors (``-W --keep-going``); none is suppressed (see the docstring hooks at the end).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))          # workbench, widgets, recipes, reproduce from this checkout
sys.path.insert(0, str(DOCS / "_ext"))

# Help text is wrapped to $COLUMNS by argparse, and a progress bar must never reach the build log.
os.environ["COLUMNS"] = "100"
os.environ.setdefault("TQDM_DISABLE", "1")

project = "GNN workbench"
author = "the workbench's authors"
copyright = "the workbench's authors"
try:
    from workbench import __version__ as release
except Exception:  # the API pages will fail loudly; the rest of the site still builds
    release = "0.1.0"
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",        # the docstrings are Google style (Args/Returns/Raises/Example)
    "wbdocs_notebooks",           # .. notebook:: ../../notebooks/NAME.ipynb
    "wbdocs_views",               # the notebooks' live views, drawn at build time (wbdocs_views = "all")
    "wbdocs_cli",                 # .. workbench-cli::
    "wbdocs_reproduce",           # .. reproduce-table:: SYSTEM, .. reproduce-summary::
    "wbdocs_stages",              # .. stage-methods::, .. composition-matrix::, .. event-types::
    "wbdocs_recipes",             # .. recipe-functions:: recipes.NAME
    "wbdocs_benchmarks",          # .. benchmark-records:: (docs/benchmarks/*.json, written by --save)
]

root_doc = "index"
exclude_patterns = ["_build", "snippets"]
templates_path: list[str] = []
html_static_path = ["_static"]
html_css_files = ["workbench.css"]
html_theme = "alabaster"
html_title = f"GNN workbench {release}"
html_theme_options = {
    "page_width": "1240px",           # below this width the sidebar goes on top (alabaster)
    "sidebar_width": "250px",
    "description": "Distributed GNN training you can watch: partition, sample, cache, communicate, train.",
    "fixed_sidebar": True,
    "show_relbars": True,
    "github_button": False,
    "font_family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif",
    "head_font_family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif",
    "code_font_family": "ui-monospace, 'DejaVu Sans Mono', monospace",
}
html_sidebars = {"**": ["about.html", "navigation.html", "relations.html", "searchbox.html"]}
html_show_sourcelink = False
html_copy_source = False
pygments_style = "sphinx"
# "default": Python where it lexes, plain text where it does not, without a warning (some docstrings' ``::``
# blocks are tables or file trees, not code).
highlight_language = "default"

# ---------------------------------------------------------------------------------------------- autodoc
autodoc_default_options = {"member-order": "bysource", "show-inheritance": True}   # ":members:" where wanted
autodoc_typehints = "description"       # signatures stay short; types go beside each argument
autodoc_class_signature = "separated"
autodoc_preserve_defaults = True        # `width=1`, not a dataclass field's repr
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_attr_annotations = True

# Cross-references in the docstrings name objects by their short names (`:func:`fold_bytes_per_epoch``) or
# private modules the reference does not document; a missing target is shown as plain code, not a link.
nitpicky = False

# No warning is suppressed. What autodoc met in the existing docstrings (which these pages may not edit) is
# handled as each docstring is read, by the hooks below: a dataclass's generated signature standing in for a
# docstring, one simple table whose text runs into a column margin, and set sizes written |V_p|.
suppress_warnings: list[str] = []


def _dataclass_signature_docstring(obj) -> bool:
    """A dataclass without a docstring gets ``Name(*, field: type = default, ...)`` as its ``__doc__``: the
    signature, which autodoc shows anyway (and whose ``*`` reST reads as unclosed emphasis)."""
    import dataclasses

    doc = getattr(obj, "__doc__", None) or ""
    return (isinstance(obj, type) and dataclasses.is_dataclass(obj)
            and doc.startswith(f"{obj.__name__}(") and "__doc__" in vars(obj))


def _literal_if_malformed_table(lines: list[str]) -> None:
    """A simple table whose text runs into a column margin is an error in docutils (one in
    ``workbench.composition``'s docstring); show such a table as preformatted text instead, as written."""
    from docutils.parsers.rst.tableparser import SimpleTableParser, TableMarkupError
    from docutils.statemachine import StringList
    import re

    border = re.compile(r"^(\s*)=+( +=+)+\s*$")
    i = 0
    while i < len(lines):
        m = border.match(lines[i])
        if not m:
            i += 1
            continue
        borders = [j for j in range(i, len(lines)) if border.match(lines[j])][:3]
        end = borders[-1] if len(borders) == 3 else None
        if end is None:
            break
        indent = m.group(1)
        block = [line[len(indent):] for line in lines[i:end + 1]]
        try:
            SimpleTableParser().parse(StringList(block))
        except TableMarkupError:
            lines[i:end + 1] = [f"{indent}::", ""] + [f"{indent}    {line}" for line in block] + [""]
            end = i + len(block) + 2
        i = end + 1


_BARS = re.compile(r"(?<![\\|\w`])\|([^|\s`][^|`]*?)\|(?![\w|_`])")
_LITERAL = re.compile(r"(``.+?``)")
_TABLE_LINE = re.compile(r"^\s*(\|(\s|$)|\+[-=])")   # a line block, or a grid table's row or border


def _escape_set_sizes(lines: list[str]) -> None:
    """Docstrings write set sizes and norms as ``|V_p|``, ``|N_i|`` (the papers' notation), which reST reads as
    substitution references (an error: none is defined). Escape the bars, outside inline literals and outside
    table rows and line blocks (``| ...``)."""
    for i, line in enumerate(lines):
        if "|" not in line or _TABLE_LINE.match(line):
            continue
        parts = _LITERAL.split(line)
        lines[i] = "".join(p if p.startswith("``") else _BARS.sub(r"\\|\1\\|", p) for p in parts)


def _process_docstring(app, what, name, obj, options, lines):
    if what == "class" and _dataclass_signature_docstring(obj):
        lines.clear()
    _literal_if_malformed_table(lines)
    _escape_set_sizes(lines)


def setup(app):
    app.connect("autodoc-process-docstring", _process_docstring)
