"""The documentation builds offline with warnings as errors, and its pages render in chromium from 127.0.0.1 only.

The build is the one ``make docs`` runs (``sphinx-build -W --keep-going``, every page: tutorials from the
committed notebooks, the generated CLI, stage and API references, the systems' reproduction tables from
``docs/reproduce/quick.json``), into a temporary folder, except that only the views of ``VIEW_NOTEBOOKS`` are
drawn (``-D wbdocs_views=...``: each runs its notebook in quick mode; the other tutorials keep their placeholders):
about 10 s for the pages and 30-40 s for the views on two cores. The pages are then served by a plain HTTP
server on 127.0.0.1 and opened in Debian's chromium: every request must stay on 127.0.0.1, no console error,
the styles applied, the content drawn, each drawn view's Bokeh canvases in its frame. Screenshots:
``test-artifacts/docs-*.png``.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.ui.conftest import ARTIFACTS, guard_requests, wait_until

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
SYSTEMS = ("distdgl", "bytegnn", "sancus", "hp_gcn", "catgnn", "psc_gcn", "g3")
#: the tutorials whose live views the test build draws (``make docs`` draws every notebook's)
VIEW_NOTEBOOKS = ("00_quickstart", "01_partitioning")
EXEC_MIME = "application/vnd.holoviews_exec.v0+json"
PLACEHOLDER = "run the cell to draw it"     # the committed output of a view (notebooks/nbval_sanitize.cfg)

# a tag that makes the browser fetch something: scripts, styles, images, fonts, frames
_FETCHING = re.compile(r"<(script|link|img|iframe|source|video|audio|embed)\b[^>]*\b(src|href)=\"([^\"]+)\"", re.I)


@pytest.fixture(scope="module")
def html(tmp_path_factory) -> Path:
    pytest.importorskip("sphinx", reason="the docs extra is not installed (make setup installs it)")
    out = tmp_path_factory.mktemp("docs") / "html"
    env = {**os.environ, "TQDM_DISABLE": "1", "WORKBENCH_QUICK": "1"}
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q",
                           "-D", f"wbdocs_views={','.join(VIEW_NOTEBOOKS)}", str(DOCS), str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"sphinx-build -W failed:\n{proc.stderr[-6000:]}"
    return out


@pytest.fixture(scope="module")
def served(html):
    """The built site on a free port of 127.0.0.1."""
    handler = functools.partial(_QuietHandler, directory=str(html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_every_page_is_built_and_loads_nothing_from_the_web(html):
    pages = {p.relative_to(html).as_posix() for p in html.rglob("*.html")}
    expected = {"index.html", "getting-started.html", "architecture.html", "data-formats.html", "sampling.html",
                "caches.html", "dashboard.html", "deployment.html", "cli.html", "benchmarks.html", "api/index.html",
                "systems/index.html", *(f"tutorials/{nb}.html" for nb in NOTEBOOKS),
                *(f"systems/{s}.html" for s in SYSTEMS)}
    assert expected <= pages, f"missing pages: {sorted(expected - pages)}"
    external = []
    for page in sorted(html.rglob("*.html")):
        for tag, _, url in _FETCHING.findall(page.read_text(encoding="utf-8")):
            if urlparse(url).scheme in ("http", "https") or url.startswith("//"):
                external.append(f"{page.relative_to(html)}: <{tag}> {url}")
    for css in html.rglob("*.css"):
        for url in re.findall(r"(?:url\(|@import\s+)[\"']?((?:https?:)?//[^\"')\s]+)", css.read_text(encoding="utf-8")):
            external.append(f"{css.relative_to(html)}: {url}")
    assert not external, "pages fetch from the web:\n" + "\n".join(external)


def test_generated_pages_hold_their_content(html):
    cli = (html / "cli.html").read_text(encoding="utf-8")
    for command in ("partition", "run", "stages", "reproduce", "info"):
        assert f'id="cli-{command}"' in cli, f"workbench {command} missing from the CLI reference"
    assert "--set NAME=VALUE" in cli
    arch = (html / "architecture.html").read_text(encoding="utf-8")
    assert "class Stripes(Partitioner)" in re.sub(r"<[^>]+>", "", arch)       # the snippet the stages test imports
    assert "wb-matrix" in arch and "model_avg" in arch                          # the composition matrix, sync included
    sancus = (html / "systems/sancus.html").read_text(encoding="utf-8")
    assert "rp-table" in sancus and "sancus.table5_e1" in sancus                # the reproduction table
    assert "Faithful" in sancus and "Simplified" in sancus                      # the recipe's docstring
    tutorial = (html / "tutorials/01_partitioning.html").read_text(encoding="utf-8")
    assert "PartitionResult" in tutorial and "nb-html" in tutorial              # a committed output, as saved
    assert "NBVAL_" not in tutorial                                             # test markup left out


def _view_cells(stem: str) -> set[int]:
    """The code cells of a notebook whose committed output is a Bokeh document's placeholder."""
    import nbformat

    nb = nbformat.read(str(ROOT / "notebooks" / f"{stem}.ipynb"), as_version=4)
    return {i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            and any(EXEC_MIME in out.get("data", {}) for out in cell.get("outputs", []))}


def test_tutorial_views_are_drawn_into_the_site(html):
    for stem in VIEW_NOTEBOOKS:
        page = (html / f"tutorials/{stem}.html").read_text(encoding="utf-8")
        drawn = {int(i) for i in re.findall(rf'<iframe class="wb-view" src="\.\./_views/{stem}/cell-(\d+)\.html"',
                                            page)}
        assert _view_cells(stem) <= drawn, f"{stem}: views not drawn: {sorted(_view_cells(stem) - drawn)}"
        assert PLACEHOLDER not in page
        for i in drawn:
            view = (html / f"_views/{stem}/cell-{i}.html").read_text(encoding="utf-8")
            assert 'type="application/json"' in view and len(view) < 2_000_000        # a Bokeh document...
            for src in re.findall(r'<script[^>]*\bsrc="([^"]+)"', view):                 # ...and BokehJS, shared
                assert src.startswith("../_resources/") and (html / "_views" / src[3:]).is_file(), src
    quickstart = (html / "tutorials/00_quickstart.html").read_text(encoding="utf-8")
    assert "_views/00_quickstart/cell-5.html" in quickstart       # the RunView: its output is not compared, only a repr
    others = [nb for nb in NOTEBOOKS if nb not in VIEW_NOTEBOOKS and _view_cells(nb)]
    if others:   # left out by -D wbdocs_views: the committed placeholder
        assert PLACEHOLDER in (html / f"tutorials/{others[0]}.html").read_text(encoding="utf-8")


def _open(browser, url: str):
    """Open ``url``; return what left 127.0.0.1, the console errors and the page (kept open for checks)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    _, external = guard_requests(context)
    page = context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("requestfailed", lambda r: errors.append(f"failed: {r.url}") if "127.0.0.1" in r.url else None)
    page.goto(url, wait_until="networkidle")
    return context, page, external, errors


def _check_styled(page):
    """Every stylesheet loaded and applied: the theme's sidebar is laid out beside the body."""
    sheets = page.evaluate("[...document.querySelectorAll('link[rel=stylesheet]')].map(l => [l.href, !!l.sheet])")
    assert sheets and all(ok for _, ok in sheets), f"stylesheets not loaded: {sheets}"
    box = page.locator("div.sphinxsidebar").bounding_box()
    assert box and box["width"] > 150, f"the sidebar is not laid out: {box}"


def test_index_and_a_tutorial_render_offline_in_chromium(browser, served):
    ARTIFACTS.mkdir(exist_ok=True)
    shots = {"index": ("index.html", "GNN workbench"),
             "tutorial": ("tutorials/01_partitioning.html", "Partitioning a graph"),
             "system": ("systems/sancus.html", "SANCUS")}
    for name, (path, title) in shots.items():
        context, page, external, errors = _open(browser, served + path)
        try:
            assert title in page.locator("div.body h1").first.inner_text()
            _check_styled(page)
            if name == "index":
                assert page.locator("div.sphinxsidebar a", has_text="Tutorials").count() > 0
            if name == "tutorial":
                assert page.locator("div.nb-input .highlight span").count() > 20      # highlighted code
                assert page.locator("div.nb-html table").count() >= 3                  # the committed HTML outputs
                assert page.locator("div.nb-stream pre").count() >= 1                  # a printed output
            if name == "system":
                assert page.locator("table.rp-table tbody tr").count() >= 5
                assert page.locator("table.rp-table div.rp-line").count() >= 3         # the number lines
            page.screenshot(path=str(ARTIFACTS / f"docs-{name}.png"), full_page=name == "index")
            if name == "tutorial":   # further down: a committed table output under its code cell
                page.locator("div.nb-html table").nth(1).scroll_into_view_if_needed()
                page.screenshot(path=str(ARTIFACTS / "docs-tutorial-outputs.png"))
            if name == "system":     # further down: the reproduced claims
                page.evaluate("document.getElementById('reproduced-claims').scrollIntoView()")
                page.screenshot(path=str(ARTIFACTS / "docs-system-claims.png"))
            assert not external, f"{path} requested:\n" + "\n".join(sorted(set(external)))
            assert not errors, f"{path} console errors:\n" + "\n".join(errors)
        finally:
            context.close()


def test_search_works_offline(browser, served):
    context, page, external, errors = _open(browser, served + "search.html?q=halo")
    try:
        page.wait_for_selector("ul.search li", timeout=90_000)
        assert page.locator("ul.search li").count() >= 3
        page.screenshot(path=str(ARTIFACTS / "docs-search.png"))
        assert not external and not errors, (external, errors)
    finally:
        context.close()


#: the boxes of the canvases shown in a document (non-zero size, not in a hidden tab), through open shadow roots
SHOWN_CANVASES = """() => {
  const found = [];
  const walk = (node) => {
    if (node.tagName === 'CANVAS') {
      const r = node.getBoundingClientRect();
      if (node.width > 0 && node.height > 0 && r.width > 0 && r.height > 0
          && node.checkVisibility({visibilityProperty: true}))
        found.push([Math.round(r.left), Math.round(r.top), Math.round(r.width), Math.round(r.height)].join());
    }
    if (node.shadowRoot) walk(node.shadowRoot);
    for (const child of node.children || []) walk(child);
  };
  walk(document.body);
  return found;
}"""


def _shown_canvases(frame) -> list[str]:
    content = frame.element_handle().content_frame()
    return content.evaluate(SHOWN_CANVASES) if content is not None else []


def test_tutorial_views_render_offline_in_chromium(browser, served):
    """Each drawn view of the tutorials renders in its frame, served like the rest of the site."""
    ARTIFACTS.mkdir(exist_ok=True)
    for stem in VIEW_NOTEBOOKS:
        context, page, external, errors = _open(browser, served + f"tutorials/{stem}.html")
        try:
            frames = page.locator("iframe.wb-view")
            assert frames.count() >= len(_view_cells(stem))
            for i in range(frames.count()):
                frame = frames.nth(i)
                frame.evaluate("(e) => e.scrollIntoView()")
                wait_until(lambda: len(_shown_canvases(frame)) > 0, timeout=60,
                           what=lambda: f"{stem}: no canvas drawn in {frame.get_attribute('src')}")
                wait_until(lambda: frame.bounding_box()["height"] > 150, timeout=30,      # fitted to the view
                           what=lambda: f"{stem}: frame of {frame.get_attribute('src')} is {frame.bounding_box()}")
                frame.evaluate("(e) => { e.scrollIntoView(); window.scrollBy(0, -120); }")   # with its code
                page.wait_for_timeout(300)
                page.screenshot(path=str(ARTIFACTS / f"docs-view-{stem}-{i}.png"))
            if stem == "00_quickstart":   # the run view's tabs switch in the page, without a server
                frames.first.evaluate("(e) => e.scrollIntoView()")
                curves = _shown_canvases(frames.first)
                page.frame_locator("iframe.wb-view").first.get_by_text("Staleness", exact=True).click()
                wait_until(lambda: _shown_canvases(frames.first) and _shown_canvases(frames.first) != curves)
                page.wait_for_timeout(300)
                page.screenshot(path=str(ARTIFACTS / f"docs-view-{stem}-tab.png"))
            assert not external, f"{stem} requested:\n" + "\n".join(sorted(set(external)))
            assert not errors, f"{stem} console errors:\n" + "\n".join(errors)
        finally:
            context.close()
