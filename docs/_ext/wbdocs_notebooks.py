"""``.. notebook:: PATH``: a Jupyter notebook rendered from its committed outputs, as Sphinx sections.

The notebook is read with nbformat and written out as reStructuredText that is parsed in place (as
``.. include::`` does), so its headings become the page's title and sections (navigation, search, the
local table of contents), while

* Markdown text becomes HTML (markdown-it-py, CommonMark with tables; links to sibling ``.ipynb`` files point
  at their pages); ``$...$`` becomes text with Unicode symbols and sub/superscripts (:func:`_tex_to_html`),
  since MathJax would come from a CDN;
* code cells become highlighted Python blocks (``# NBVAL_...`` lines, which steer the notebook tests, are
  left out);
* outputs are shown as saved: ``text/html`` as is, otherwise ``text/plain``; streams and errors as text;
* a cell whose result is a live Panel or HoloViews view (stored as a placeholder) shows the view, drawn by
  running the notebook in quick mode (``_ext/wbdocs_views.py``, which says why and what it costs).

Nothing else runs at build time. Every notebook in ``notebooks/`` must have a page: a notebook without one is a
build warning (an error under ``-W``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from html import escape
from pathlib import Path

import nbformat
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin
from sphinx.util import logging
from wbdocs_views import views_for

logger = logging.getLogger(__name__)

_TITLE_CHARS = "=-~^\""
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_NBVAL = re.compile(r"^\s*#\s*NBVAL_\w+.*$")


_TEX_SYMBOLS = {r"\varepsilon": "ε", r"\epsilon": "ε", r"\tau": "τ", r"\rho": "ρ", r"\alpha": "α", r"\beta": "β",
                r"\gamma": "γ", r"\delta": "δ", r"\lambda": "λ", r"\sigma": "σ", r"\sum": "∑", r"\prod": "∏",
                r"\in": "∈", r"\le": "≤", r"\leq": "≤", r"\ge": "≥", r"\geq": "≥", r"\cdot": "·", r"\times": "×",
                r"\mathbb E": "𝔼", r"\|": "‖", r"\,": "\u2009", r"\approx": "≈"}
_TEX_COMMAND = re.compile("|".join(re.escape(k) for k in sorted(_TEX_SYMBOLS, key=len, reverse=True)) + r"(?![A-Za-z])")


def _tex_to_html(tex: str) -> str:
    """Inline TeX as text, without MathJax: common symbols as Unicode, ``_x``/``^{..}`` as sub- and superscripts,
    ``\\hat Z`` as Ẑ; anything else is left as written."""
    text = _TEX_COMMAND.sub(lambda m: _TEX_SYMBOLS[m.group(0)], tex)
    text = re.sub(r"\\hat\s*\{?(\w)\}?", "\\1\u0302", text)
    text = escape(text)
    text = re.sub(r"_\{([^{}]*)\}|_(\w)", lambda m: f"<sub>{m.group(1) or m.group(2)}</sub>", text)
    text = re.sub(r"\^\{([^{}]*)\}|\^(\w)", lambda m: f"<sup>{m.group(1) or m.group(2)}</sup>", text)
    return text


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    dollarmath_plugin(md, allow_space=True, double_inline=True,
                      renderer=lambda content, options: _tex_to_html(content))

    def link_open(tokens, idx, options, env):
        href = tokens[idx].attrGet("href") or ""
        if re.match(r"^[\w.-]+\.ipynb(#.*)?$", href):
            tokens[idx].attrSet("href", re.sub(r"\.ipynb", ".html", href, count=1))
        return md.renderer.renderToken(tokens, idx, options, env)

    md.add_render_rule("link_open", link_open)
    return md


_MD = _markdown()


def _rst_inline(text: str) -> str:
    """Markdown inline text of a heading as reST: code spans as literals, everything else escaped."""
    out = []
    for i, part in enumerate(re.split(r"`([^`]+)`", text)):
        if i % 2:
            out.append(f"``{part}``")
        else:
            part = re.sub(r"(\*\*|__)(.+?)\1", r"\2", part)
            out.append(re.sub(r"([\\*`_|<>\[\]])", r"\\\1", part))
    return re.sub(r"``\s*``", "", "".join(out)).strip() or "Notebook"


def _indent(text: str, n: int = 3) -> list[str]:
    return [(" " * n + line) if line.strip() else "" for line in text.splitlines()]


def _raw_html(html: str, cls: str) -> list[str]:
    return ["", ".. raw:: html", "", *_indent(f'<div class="{cls}">\n{html}\n</div>'), ""]


def _code(text: str, language: str, cls: str) -> list[str]:
    if not text.strip():
        return []
    return ["", f".. code-block:: {language}", f"   :class: {cls}", "", *_indent(text), ""]


class _Sections:
    """Markdown heading depth -> reST title level, never skipping a level (docutils refuses that)."""

    def __init__(self) -> None:
        self.stack: list[int] = []   # markdown depths of the open sections

    def title(self, depth: int, text: str) -> list[str]:
        while self.stack and self.stack[-1] >= depth:
            self.stack.pop()
        self.stack.append(depth)
        level = min(len(self.stack), len(_TITLE_CHARS)) - 1
        title = _rst_inline(text)
        return ["", title, _TITLE_CHARS[level] * max(len(title), 4), ""]


def _markdown_cell(source: str, sections: _Sections) -> list[str]:
    lines, chunk, fenced = [], [], False

    def flush() -> None:
        text = "\n".join(chunk).strip()
        chunk.clear()
        if text:
            lines.extend(_raw_html(_MD.render(text), "nb-markdown"))

    for line in source.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else _HEADING.match(line)
        if heading:
            flush()
            lines.extend(sections.title(len(heading.group(1)), heading.group(2)))
        else:
            chunk.append(line)
    flush()
    return lines


def _output(out) -> list[str]:
    kind = out.get("output_type")
    if kind == "stream":
        return _code(_ANSI.sub("", out.get("text", "")).rstrip("\n"), "none", "nb-output nb-stream")
    if kind == "error":
        return _code(_ANSI.sub("", "\n".join(out.get("traceback", []))), "none", "nb-output nb-error")
    data = out.get("data", {})
    if "text/html" in data:
        return _raw_html(data["text/html"], "nb-output nb-html")
    for mime in ("image/svg+xml", "image/png", "image/jpeg"):
        if mime in data:
            body = data[mime] if mime == "image/svg+xml" else \
                f'<img alt="output" src="data:{mime};base64,{data[mime].strip()}">'
            return _raw_html(body, "nb-output nb-image")
    if "text/plain" in data:
        return _code(data["text/plain"], "none", "nb-output nb-text")
    return []


def notebook_to_rst(path: Path, views: Mapping[int, str] | None = None) -> list[str]:
    """The reST lines of a notebook's page (title from its first heading).

    ``views`` maps a code cell's index to the HTML that shows its view, in place of the cell's saved result.
    """
    nb = nbformat.read(str(path), as_version=4)
    views = views or {}
    sections = _Sections()
    lines: list[str] = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            lines.extend(_markdown_cell(cell.source, sections))
        elif cell.cell_type == "code":
            source = "\n".join(line for line in cell.source.splitlines() if not _NBVAL.match(line)).strip("\n")
            lines.extend(_code(source, "python", "nb-input"))
            for out in cell.get("outputs", []):
                if index in views and out.get("output_type") == "execute_result":
                    continue   # the placeholder or text repr of the view shown below
                lines.extend(_output(out))
            if index in views:
                lines.extend(_raw_html(views[index], "nb-output nb-view"))
    if not sections.stack:
        lines[:0] = sections.title(1, path.stem)
    lines += ["", ".. rst-class:: nb-source", "",
              f"   Source: ``notebooks/{path.name}`` (outputs as committed, views drawn when these pages were built; "
              "run it with ``make lab``)", ""]
    return lines


class NotebookDirective(Directive):
    required_arguments = 1
    has_content = False
    option_spec = {"class": directives.class_option}

    def run(self):
        env = self.state.document.settings.env
        rel, path = env.relfn2path(self.arguments[0])
        env.note_dependency(rel)
        views = views_for(env.app, Path(path), env.docname)
        self.state_machine.insert_input(StringList(notebook_to_rst(Path(path), views), source=str(path)), str(path))
        return []


def _check_every_notebook_has_a_page(app, env):
    root = Path(app.srcdir).parent / "notebooks"
    used = set()
    for doc in env.found_docs:
        src = Path(env.doc2path(doc))
        if src.suffix == ".rst":
            used.update(re.findall(r"notebook::\s*\S*?([\w.-]+\.ipynb)", src.read_text(encoding="utf-8")))
    for nb in sorted(root.glob("*.ipynb")):
        if nb.name not in used:
            logger.warning("notebook %s has no tutorial page (add docs/tutorials/%s.rst with "
                           "'.. notebook:: ../../notebooks/%s')", nb.name, nb.stem, nb.name)


def setup(app):
    app.add_directive("notebook", NotebookDirective)
    app.connect("env-updated", _check_every_notebook_has_a_page)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
