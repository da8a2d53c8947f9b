"""The notebooks' live views in the tutorials, drawn at build time as embedded Bokeh that needs no server.

A notebook cell whose result is a Panel or HoloViews view (``widgets.RunView(run)``, ``view.staleness``,
``hv.Bars(...) + hv.Bars(...)``) is stored without its Bokeh document (``notebooks/_strip.py``: megabytes of
JavaScript and random ids), so its committed output is a placeholder. Here such a cell's output becomes the view
itself, as a person running the notebook saw it.

Embedded Bokeh, not a static image
----------------------------------
Each view is saved by Panel (``save(resources=INLINE)``, the path ``RunView.save`` and ``workbench report``
take) and shown in an ``<iframe>`` on the tutorial page. Why this and not a PNG:

* the reader keeps what the plots are for: hover tooltips with the numbers (most plots ask for the hover tool),
  zoom and pan, the legend's muting, the dashboard's tabs (each is opened once before saving, so every tab
  holds its content). Controls that call back into Python (selectors, sliders) keep the value they had: it is a
  snapshot, and the page says so under each view;
* drawing an image needs a browser at build time (chromium and playwright on every machine that runs
  ``make docs``, and seconds per view to start it and wait for the canvas); saving a Bokeh document needs
  nothing but the packages the notebooks use, about 0.1-0.5 s per view;
* size: Panel's inline resources are about 3 MB of JavaScript per file, the same for every view. They are
  moved out of each file into ``_views/_resources/<hash>.js`` (content-addressed, written once for the whole
  site, cached by the browser after the first view), so a view costs its document (tens to a few hundred kB,
  about the size of a PNG of it) and the site grows by the shared 3 MB once. Nothing is fetched from
  outside the site's origin (the tests check every page and every request);
* the ``<iframe>`` keeps Panel's page styles and the theme's apart; it loads when scrolled near
  (``loading="lazy"``) and ``_static/wbviews.js`` fits its height to the drawn view.

Where the data comes from
-------------------------
From running the notebook itself, in quick mode (``WORKBENCH_QUICK=1``, the mode of the committed outputs),
in a Jupyter kernel (nbclient) started in a temporary folder (its ``runs/`` and temporary files go there
and are deleted with it). After the last cell, every value of ``Out`` that is a Panel or HoloViews object or a Bokeh
model is saved: the state at the end of the notebook, which is what a notebook's outputs show once it has
run (Panel outputs are live, so a view launched before its run finished shows the whole run). Running the
notebook, rather than a second script per view, means the views cannot drift from the code the page shows,
and a notebook that no longer runs fails the build (a warning, an error under ``-W``).

Cost, and the cache
-------------------
Running a notebook in quick mode takes 6-18 s on two cores (about 100 s for all ten). The files are kept
in a cache beside the output folder (``docs/_build/views-cache`` for ``make docs``), under a key made of the
notebook's code, the sources of ``workbench``, ``widgets``, ``recipes`` and ``reproduce``, this file and the Panel,
Bokeh and HoloViews versions: a rebuild after a change to the text runs nothing (``wbdocs_views_cache`` names another
folder). ``wbdocs_views`` (``-D
wbdocs_views=00_quickstart,01_partitioning``) chooses which notebooks' views are drawn: ``all`` (the default),
``none`` or notebook names; the others keep the placeholder. The test suite draws those of
``00_quickstart`` and ``01_partitioning`` (about 30 s, see ``tests/ui/test_docs.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from html import escape
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("workbench", "widgets", "recipes", "reproduce")
VIEWS_DIR = "_views"            # in the output folder: _views/<notebook>/cell-<index>.html
RESOURCES = "_resources"        # _views/_resources/<sha256>.js|css, shared by every view
HOIST_MIN_CHARS = 10_000        # inline scripts and styles above this size move to a shared file
EXECUTION_TIMEOUT_S = 600

# Runs in the notebook's kernel after its last cell: saves every view among the cells' results.
_SAVE_VIEWS = r"""
def __wbdocs_save_views(folder):
    import panel as pn
    import widgets  # noqa: F401  (inlines the components' stylesheets: widgets.offline)
    from bokeh.model import Model
    from bokeh.resources import INLINE
    from panel.viewable import Viewable, Viewer
    try:
        from holoviews.core.dimension import Dimensioned
    except ImportError:
        Dimensioned = ()
    for count, obj in sorted(Out.items()):
        if not isinstance(obj, (Viewable, Viewer, Dimensioned, Model)):
            continue
        view = pn.panel(obj)
        for tabs in view.select(pn.Tabs):  # a tab may be filled when first opened: open each one once
            active = tabs.active
            for i in range(len(tabs)):
                tabs.active = i
            tabs.active = active
        view.save(f"{folder}/{count}.html", resources=INLINE, title=type(obj).__name__)   # count: In[count]

__wbdocs_save_views(%r)
"""


def _chosen(app) -> set[str] | None:
    """The notebooks ``wbdocs_views`` names (None: all of them)."""
    choice = str(app.config.wbdocs_views).strip()
    if choice == "all":
        return None
    return {n.strip().removesuffix(".ipynb") for n in choice.split(",") if n.strip()} - {"none"}


def selected(app, stem: str) -> bool:
    """Whether ``wbdocs_views`` asks for the views of notebook ``stem``."""
    chosen = _chosen(app)
    return chosen is None or stem in chosen


def _check_choice(app) -> None:
    chosen = _chosen(app)
    known = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    unknown = sorted((chosen or set()) - set(known))
    if unknown:
        logger.warning("The 'wbdocs_views' setting must be 'all', 'none' or notebook names among %s. "
                       "Got %s instead.", ", ".join(known), ", ".join(unknown))


def views_for(app, notebook: Path, docname: str) -> dict[int, str]:
    """Cell index -> the HTML that shows that cell's view, for the cells of ``notebook`` with a view.

    Draws the views (or takes them from the cache) into ``_views/<notebook>/`` of the output folder. Empty
    when ``wbdocs_views`` leaves the notebook out, when it has no view, or when it could not run (a warning).
    """
    if app.builder.format != "html" or not selected(app, notebook.stem):
        return {}
    try:
        files = _drawn(app, notebook)
    except Exception as exc:  # noqa: BLE001 - any failure of the notebook is reported, with its message
        logger.warning("%s: its views could not be drawn (the page keeps the placeholders): %s",
                       notebook.name, str(exc).strip()[-2000:], location=docname)
        return {}
    up = "../" * docname.count("/")
    html = {}
    for index, (name, title) in files.items():
        src = f"{up}{VIEWS_DIR}/{notebook.stem}/{name}"
        html[index] = (
            f'<iframe class="wb-view" src="{src}" title="{escape(title)}" loading="lazy" '
            f'onload="wbFitView(this)"></iframe>\n'
            f'<p class="nb-view-note">Drawn when this page was built, by running the notebook in quick mode: '
            f'a snapshot where hover, zoom and tabs work and controls that need Python keep their values. '
            f'<a href="{src}">Open it alone</a>.</p>')
    return html


def _key(notebook: Path) -> str:
    """What the drawn views depend on: the notebook's code, the packages' sources, this file, the versions."""
    import nbformat

    h = hashlib.sha256()
    nb = nbformat.read(str(notebook), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            h.update(cell.source.encode() + b"\0")
    sources = [Path(__file__)] + sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))
    for path in sources:
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    for dist in ("panel", "bokeh", "holoviews"):
        try:
            h.update(f"{dist}={version(dist)}".encode())
        except PackageNotFoundError:
            pass
    return h.hexdigest()[:20]


def _drawn(app, notebook: Path) -> dict[int, tuple[str, str]]:
    """Cell index -> (file name, title) of the views in ``_views/<notebook>/``, drawn or from the cache."""
    cache = Path(app.config.wbdocs_views_cache or Path(app.outdir).parent / "views-cache")
    entry = cache / notebook.stem / _key(notebook)
    index_file = entry / "views.json"   # written last: the entry is complete
    files = _complete(entry, cache / RESOURCES) if index_file.is_file() else None
    if files is None:
        for old in (cache / notebook.stem).glob("*"):   # an earlier key: the code or the notebook changed
            shutil.rmtree(old, ignore_errors=True)
        entry.mkdir(parents=True, exist_ok=True)
        views = _draw(notebook, entry, cache / RESOURCES)
        index_file.write_text(json.dumps({str(k): v for k, v in views.items()}), encoding="utf-8")
        files = _complete(entry, cache / RESOURCES)
        assert files is not None, f"{entry}: views drawn but not found"
    out = Path(app.outdir) / VIEWS_DIR
    for name, (text, resources) in files.items():
        for res in resources:
            if not (out / RESOURCES / res).is_file():
                _write_atomic(out / RESOURCES / res, (cache / RESOURCES / res).read_text(encoding="utf-8"))
        _write_atomic(out / notebook.stem / name, text)
    return {int(k): tuple(v) for k, v in json.loads(index_file.read_text(encoding="utf-8")).items()}


def _complete(entry: Path, resources: Path) -> dict[str, tuple[str, list[str]]] | None:
    """File name -> (text, the shared resources it loads) of a cache entry's views; None if any file is missing."""
    files = {}
    for name, _ in json.loads((entry / "views.json").read_text(encoding="utf-8")).values():
        if not (entry / name).is_file():
            return None
        text = (entry / name).read_text(encoding="utf-8")
        needed = re.findall(rf'"\.\./{RESOURCES}/([0-9a-f]+\.(?:js|css))"', text)
        if not all((resources / res).is_file() for res in needed):
            return None
        files[name] = (text, needed)
    return files


def _draw(notebook: Path, entry: Path, resources: Path) -> dict[int, tuple[str, str]]:
    """Run ``notebook`` in quick mode and save its views into ``entry`` (resources hoisted into ``resources``)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(str(notebook), as_version=4)
    with tempfile.TemporaryDirectory(prefix="wbdocs-views-") as work:
        raw = Path(work) / "views"
        raw.mkdir()
        nb.cells.append(nbformat.v4.new_code_cell(_SAVE_VIEWS % str(raw)))
        # the notebooks' own temporary folders (tempfile.mkdtemp) go into ``work`` too, deleted with it
        env = {**os.environ, "WORKBENCH_QUICK": "1", "TQDM_DISABLE": "1", "TMPDIR": work,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        client = NotebookClient(nb, timeout=EXECUTION_TIMEOUT_S, kernel_name="python3",
                                resources={"metadata": {"path": work}})   # runs in the folder ``work``
        log = Path(work) / "kernel.log"   # the kernel process's own messages, shown if it fails
        try:
            with log.open("w") as stderr:
                client.execute(env=env, stderr=stderr)
        except Exception as exc:
            raise RuntimeError(f"{exc}\n{log.read_text(errors='replace')[-1000:]}".strip()) from exc
        counts = {cell.get("execution_count"): i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"}
        views = {}
        for path in raw.glob("*.html"):
            index = counts[int(path.stem)]
            name = f"cell-{index}.html"
            title = f"{notebook.stem}, cell {index}: {_first_line(nb.cells[index].source)}"
            text = hoist(path.read_text(encoding="utf-8"), resources, f"../{RESOURCES}/")
            _write_atomic(entry / name, text)
            views[index] = (name, title)
    return dict(sorted(views.items()))


def _first_line(source: str) -> str:
    lines = [line for line in source.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return (lines[-1].strip() if lines else "view")[:80]


_BLOCK = re.compile(r"<(script|style)\b([^>]*)>", re.I)
_WEB_LINK = re.compile(r"<link\b[^>]*\bhref=\"(?:https?:)?//[^\"]*\"[^>]*>", re.I)   # Panel's favicon links


def hoist(html: str, folder: Path, prefix: str) -> str:
    """``html`` with each big inline script and style moved to ``folder/<sha256>.js|css`` (referenced as
    ``prefix + name``, same origin), and without links to the web (Panel's favicons, which a frame never
    uses).

    The scan follows the HTML parser: a script's text runs to the first ``</script>``, so the ``<script``
    strings inside BokehJS are not mistaken for tags.
    """
    lower = html.lower()
    out, pos = [], 0
    while (m := _BLOCK.search(html, pos)) is not None:
        kind, attrs = m.group(1).lower(), m.group(2)
        close = lower.find(f"</{kind}>", m.end())
        if close < 0:
            break
        body = html[m.end():close]
        out.append(_WEB_LINK.sub("", html[pos:m.start()]))
        script_type = re.search(r"\btype=[\"']?([\w/+-]+)", attrs)
        javascript = kind == "script" and "src=" not in attrs.lower() and \
            (script_type is None or script_type.group(1).lower() in ("text/javascript", "application/javascript"))
        if len(body) >= HOIST_MIN_CHARS and (javascript or kind == "style"):
            ext = "js" if javascript else "css"
            name = f"{hashlib.sha256(body.encode()).hexdigest()[:24]}.{ext}"
            if not (folder / name).is_file():
                _write_atomic(folder / name, body)
            out.append(f'<script type="text/javascript" src="{prefix}{name}"></script>' if javascript
                       else f'<link rel="stylesheet" href="{prefix}{name}">')
        else:
            out.append(html[m.start():close + len(kind) + 3])
        pos = close + len(kind) + 3
    out.append(_WEB_LINK.sub("", html[pos:]))
    return "".join(out)


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def setup(app):
    app.add_config_value("wbdocs_views", "all", "env", types=[str])
    app.add_config_value("wbdocs_views_cache", "", "env", types=[str])
    app.add_js_file("wbviews.js")
    app.connect("builder-inited", _check_choice)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
