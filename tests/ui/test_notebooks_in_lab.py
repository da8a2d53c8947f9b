"""Every notebook as a person sees it: JupyterLab on 127.0.0.1, opened in chromium, all cells run.

One JupyterLab server for the module (a free port, a token, a temporary copy of ``notebooks/`` and
temporary Jupyter config, data, runtime and settings folders, so nothing leaks in or out). For each
notebook the test runs every cell, waits for the kernel to go idle and checks that

* no cell raised (no ``error`` output in the notebook model);
* every cell that displays a view (a Panel/HoloViews output) shows rendered plots in its own output
  area: Bokeh 3 draws in shadow DOM, so canvases are counted through shadow roots;
* the quickstart's live view grows while the run goes (its cells up to the view run first; the kernel is
  then idle, and the epochs shown on the page must rise before the run ends);
* no request leaves 127.0.0.1 (every request is recorded; the others are refused and fail the test).

Screenshots go to ``test-artifacts/lab-<notebook>*.png``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.ui.conftest import ARTIFACTS, CHROMIUM, free_port, guard_requests, wait_until

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
#: the cell of each notebook that starts a run and shows its live view: cells up to it run first
LIVE_CELL = {"00_quickstart.ipynb": "widgets.RunView(run)"}
#: output mime type of a displayed Panel/HoloViews object (the extension's own output has another)
VIEW_MIME = "application/vnd.holoviews_exec.v0+json"
LOCAL_HOSTS = {"127.0.0.1"}
_SHUTDOWNS: list = []   # the threads shutting down each notebook's kernel

#: counts <canvas> elements of non-zero size under a node, through open shadow roots (Bokeh 3)
COUNT_CANVASES = """(root) => {
  let n = 0;
  const walk = (node) => {
    if (node.tagName === 'CANVAS' && node.width > 0 && node.height > 0) n++;
    if (node.shadowRoot) walk(node.shadowRoot);
    for (const child of node.children || []) walk(child);
  };
  walk(root);
  return n;
}"""

#: the figures BokehJS drew inside a node (through shadow roots): title, y-axis label and data rows of each
PLOTS_IN = """(root) => {
  const inside = (el) => { for (let n = el; n; n = n.parentNode || (n.host || null)) { if (n === root) return true; }
                           return false; };
  const out = [];
  if (!window.Bokeh || !Bokeh.index) return out;
  for (const view of Bokeh.index.all_views()) {
    const m = view.model;
    if (!m || !m.renderers || !m.left || !view.el || !inside(view.el)) continue;
    let rows = 0;
    const count = (r) => (r && r.data_source && r.data_source.get_length) ? (r.data_source.get_length() || 0) : 0;
    for (const r of m.renderers) rows += count(r) + count(r.node_renderer) + count(r.edge_renderer);  // glyphs, graphs
    const shown = view.el.isConnected && view.el.getBoundingClientRect().width > 0;
    out.push({title: m.title ? (m.title.text || '') : '', ylabel: m.left.length ? (m.left[0].axis_label || '') : '',
              rows, shown});
  }
  return out;
}"""

#: the open notebook's state: kernel status, and per cell its type, execution count and outputs' mime types
NOTEBOOK_STATE = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.content || !panel.sessionContext) return null;
  const cells = panel.content.widgets.map((cell) => {
    const json = cell.model.toJSON();
    const outputs = (json.outputs || []).map((o) => ({
      type: o.output_type, mimes: Object.keys(o.data || {}),
      error: o.output_type === 'error' ? `${o.ename}: ${o.evalue}` : null}));
    return {type: json.cell_type, count: json.execution_count ?? null, outputs,
            running: cell.node.querySelector('.jp-InputPrompt')?.textContent.includes('*') || false};
  });
  return {status: panel.sessionContext.kernelDisplayStatus, cells};
}"""

#: the reproduced-claims table in the open notebook: rows, the cells' text alignment, number lines and how
#: many of them show a dot (a box of non-zero size inside a line of non-zero width)
CLAIMS_TABLE = """() => {
  const t = window.jupyterapp.shell.currentWidget.content.node.querySelector('table.rp-table');
  if (!t) return null;
  const lines = [...t.querySelectorAll('div.rp-line')];
  const drawn = lines.filter((l) => l.getBoundingClientRect().width > 100 &&
    [...l.children].some((c) => c.getBoundingClientRect().width >= 8 && c.getBoundingClientRect().height >= 8));
  const align = [...new Set([...t.querySelectorAll('td, th')].map((c) => getComputedStyle(c).textAlign))];
  return {rows: t.querySelectorAll('tbody tr').length, lines: lines.length, drawn: drawn.length, align};
}"""

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is not installed")


def _settings(folder: Path) -> None:
    """User settings of the temporary JupyterLab: every cell stays in the DOM (no windowing), no news."""
    for plugin, values in {
        "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
        "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
        "@jupyterlab/extensionmanager-extension/plugin": {"enabled": False},
    }.items():
        path = folder / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """``(url, token, root)``: JupyterLab serving a temporary copy of ``notebooks/`` on 127.0.0.1."""
    pytest.importorskip("jupyterlab")
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "notebooks"
    shutil.copytree(REPO / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "runs"))
    _settings(tmp / "settings")
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp / "config"), "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
           "JUPYTER_DATA_DIR": str(tmp / "data"), "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"), "IPYTHONDIR": str(tmp / "ipython"),
           "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "WORKBENCH_QUICK": "1", "TQDM_DISABLE": "1"}
    env.pop("PANEL_INLINE", None)  # the package must inline by itself
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
           "--LabApp.news_url=", "--ServerApp.open_browser=False"]
    if os.getuid() == 0:
        cmd.append("--allow-root")
    log = open(tmp / "lab.log", "w")
    proc = subprocess.Popen(cmd, env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"jupyter lab exited:\n{(tmp / 'lab.log').read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2):
                return True
        except OSError:
            return False

    try:
        wait_until(up, timeout=90, interval=0.5)
        yield url, token, root
        for thread in _SHUTDOWNS:
            thread.join(timeout=60)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _shutdown_kernels(url: str, token: str) -> threading.Thread:
    """Shut down the sessions open now (their kernels) in a thread: the next notebook opens meanwhile, and its own
    session, made later, is not among them. Returns the thread (the module's teardown joins it)."""
    req = urllib.request.Request(f"{url}/api/sessions?token={token}")
    with urllib.request.urlopen(req, timeout=10) as r:
        ids = [s["id"] for s in json.load(r)]

    def delete() -> None:
        for sid in ids:
            urllib.request.urlopen(urllib.request.Request(f"{url}/api/sessions/{sid}?token={token}",
                                                          method="DELETE"), timeout=30).close()

    thread = threading.Thread(target=delete, name="lab-shutdown-kernels", daemon=True)
    thread.start()
    return thread


def _state(page) -> dict | None:
    return page.evaluate(NOTEBOOK_STATE)


def _idle_and_done(page, upto: int | None = None) -> bool:
    """Whether the kernel is idle with every code cell (up to ``upto``) run; a cell that raised fails at
    once (JupyterLab runs no cell after it, so waiting would only reach the timeout, minutes later)."""
    st = _state(page)
    if st is None or st["status"] != "idle":
        return False
    cells = list(enumerate(st["cells"]))[: None if upto is None else upto + 1]
    errors = [(i, o["error"]) for i, c in cells for o in c["outputs"] if o["error"]]
    assert not errors, f"cells raised: {errors}"
    return all(c["count"] is not None and not c["running"] for _, c in cells if c["type"] == "code")


def _cell_canvases(page, index: int) -> int:
    return page.evaluate(f"(i) => ({COUNT_CANVASES})(window.jupyterapp.shell.currentWidget.content.widgets[i].node)",
                         index)


def _cell_plots(page, index: int) -> list[dict]:
    """The figures drawn in a cell's output: title, y label, data rows, whether on screen."""
    return page.evaluate(f"(i) => ({PLOTS_IN})(window.jupyterapp.shell.currentWidget.content.widgets[i].node)", index)


def _epochs_shown(page, index: int) -> int | None:
    text = page.evaluate("""(i) => {
      const node = window.jupyterapp.shell.currentWidget.content.widgets[i].node;
      const find = (n) => { if (n.classList && n.classList.contains('wb-epochs')) return n.textContent;
        for (const root of [n.shadowRoot, n].filter(Boolean)) for (const c of root.children || []) {
          const t = find(c); if (t !== null) return t; }
        return null; };
      return find(node);
    }""", index)
    return int(text) if text not in (None, "") else None


def _run(page, command: str) -> None:
    page.evaluate("(c) => window.jupyterapp.commands.execute(c)", command)


@pytest.fixture
def lab_page(browser, lab):
    """A page on the lab server that records every request, and refuses any that leaves 127.0.0.1."""
    url, token, root = lab
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(90_000)
    requests, external = guard_requests(context, lambda u: urlparse(u).hostname in LOCAL_HOSTS)
    page = context.new_page()
    page.on("websocket", lambda ws: requests.append(ws.url) if urlparse(ws.url).hostname in LOCAL_HOSTS
            else external.append(ws.url))
    page.requests, page.external = requests, external
    # the browser's errors (a patch the page could not apply names the model it did not know): in the report
    page.console_errors = []
    page.on("console", lambda m: m.type == "error" and page.console_errors.append((m.text.splitlines() or [""])[0][:200]))
    page.on("pageerror", lambda e: page.console_errors.append((str(e).splitlines() or [""])[0][:200]))
    yield page
    context.close()
    _SHUTDOWNS.append(_shutdown_kernels(url, token))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_and_renders_in_jupyterlab(lab_page, lab, path):
    url, token, root = lab
    page, started = lab_page, time.monotonic()
    page.goto(f"{url}/lab/workspaces/{path.stem}/tree/{path.name}?reset&token={token}")
    wait_until(lambda: _state(page) is not None and _state(page)["status"] == "idle", timeout=120, interval=0.5)
    cells = _state(page)["cells"]
    snapshots = []
    live = LIVE_CELL.get(path.name)
    if live is not None:  # run up to the live view, then watch it grow while the kernel is idle
        index = next(i for i, c in enumerate(page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.content.widgets.map(c => c.model.sharedModel.source)"))
            if live in c)
        page.evaluate("(i) => { window.jupyterapp.shell.currentWidget.content.activeCellIndex = i; }", index)
        _run(page, "notebook:run-all-above")
        _run(page, "notebook:run-cell")
        wait_until(lambda: _idle_and_done(page, upto=index), timeout=300, interval=0.5)
        end = time.monotonic() + 240
        while time.monotonic() < end:
            snapshots.append(_epochs_shown(page, index))
            if _run_finished(page, index):
                snapshots.append(_epochs_shown(page, index))
                break
            time.sleep(0.25)
        print(f"{path.name}: live view after {time.monotonic() - started:.1f} s, epochs shown {snapshots}")
        page.screenshot(path=str(_artifact(path, "live")))
        page.evaluate("(i) => { window.jupyterapp.shell.currentWidget.content.activeCellIndex = i; }", index + 1)
        _run(page, "notebook:run-all-below")
    else:
        _run(page, "notebook:run-all-cells")
    wait_until(lambda: _idle_and_done(page), timeout=600, interval=0.5)
    state = _state(page)
    errors = [(i, o["error"]) for i, c in enumerate(state["cells"]) for o in c["outputs"] if o["error"]]
    view_cells = [i for i, c in enumerate(state["cells"])
                  if any(o["type"] == "execute_result" and VIEW_MIME in o["mimes"] for o in c["outputs"])]
    # let the last outputs draw: every view cell has drawn a canvas (asserted below), or 20 s have passed
    try:
        wait_until(lambda: all(_cell_canvases(page, i) for i in view_cells), timeout=20, interval=0.25)
    except AssertionError:
        pass
    canvases = {i: _cell_canvases(page, i) for i in view_cells}
    plots = {i: _cell_plots(page, i) for i in view_cells}
    _screenshots(page, path, view_cells)
    rows = {i: [p["rows"] for p in ps if p["shown"]] for i, ps in plots.items()}
    report = (f"{path.name}: {len(cells)} cells, view cells {view_cells}, canvases {canvases}, data rows {rows}, "
              f"{len(page.requests)} requests, external {len(page.external)}, browser errors {page.console_errors}, "
              f"{time.monotonic() - started:.1f} s")
    print(report)
    (ARTIFACTS / f"lab-{path.stem}.txt").write_text(report + "\n")
    assert not errors, f"cells raised: {errors}"
    assert not page.external, "requests left 127.0.0.1:\n" + "\n".join(sorted(set(page.external)))
    if path.name in ("00_quickstart.ipynb", "01_partitioning.ipynb"):
        assert view_cells, "the notebook displays views, but no cell output is one"
    empty = [i for i, n in canvases.items() if n == 0]
    assert not empty, f"cells {empty} display a view but render no plot (canvases per cell: {canvases})"
    # every figure on screen draws data once the notebook has run (an axis with nothing on it is a defect:
    # the server holds rows the page never received); a view that is still catching up gets 20 s
    def blank() -> dict:
        return {i: [p["title"] or p["ylabel"] for p in _cell_plots(page, i) if p["shown"] and not p["rows"]]
                for i in view_cells}
    wait_until(lambda: not any(blank().values()), timeout=20,
               what=lambda: f"figures drawn with no data: {blank()}; browser errors: {page.console_errors}")
    # a view that failed to draw says so in its cell and draws again on its next refresh (at most 5 s later)
    wait_until(lambda: not any("could not render" in _cell_text(page, i) for i in view_cells), timeout=20)
    # a system notebook's reproduced-claims table reads as in the docs: cells left-aligned, a number line drawn
    # per claim (an untrusted output loses inline SVG and <style>: the lines are positioned <div>s)
    table = page.evaluate(CLAIMS_TABLE)
    if table is not None:
        # the page with the table's top at the top: an element screenshot of a table taller than the notebook's
        # scrolled pane came out as its visible part beside grey or blank bands
        page.locator("table.rp-table").first.evaluate("t => t.scrollIntoView({block: 'start'})")
        page.screenshot(path=str(_artifact(path, "claims")))
        assert table["rows"] >= 5 and table["align"] == ["left"], table
        assert table["lines"] >= 3 and table["drawn"] == table["lines"], f"number lines not drawn: {table}"
    if live is not None:
        seen = [s for s in snapshots if s is not None]
        assert seen and seen[0] < max(seen), f"the live view did not grow while the run went (epochs shown: {seen})"


def _cell_text(page, index: int) -> str:
    """The text a person reads in a cell's output, through Bokeh's and Panel's shadow roots."""
    return page.evaluate("""(i) => {
      const out = [];
      const walk = (root) => { for (const el of root.childNodes) {
          if (el.nodeType === Node.TEXT_NODE) out.push(el.textContent);
          else { if (el.shadowRoot) walk(el.shadowRoot); walk(el); } } };
      walk(window.jupyterapp.shell.currentWidget.content.widgets[i].node);
      return out.join(' ');
    }""", index)


def _run_finished(page, index: int) -> bool:
    return page.evaluate("""(i) => {
      const node = window.jupyterapp.shell.currentWidget.content.widgets[i].node;
      const walk = (n) => { if (n.classList && n.classList.contains('wb-status'))
          return ['finished', 'failed', 'stopped'].includes(n.dataset.status);
        for (const root of [n.shadowRoot, n].filter(Boolean)) for (const c of root.children || []) {
          if (walk(c)) return true; }
        return false; };
      return walk(node);
    }""", index)


def _artifact(path: Path, suffix: str = "") -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS / f"lab-{path.stem}{'-' + suffix if suffix else ''}.png"


def _screenshots(page, path: Path, view_cells: list[int]) -> None:
    """The page at the top, and each view cell's output on its own."""
    page.evaluate("() => window.jupyterapp.shell.currentWidget.content.activeCellIndex = 0")
    page.screenshot(path=str(_artifact(path)))
    for i in view_cells:
        cell = page.locator(".jp-Notebook .jp-Cell").nth(i)
        cell.scroll_into_view_if_needed()
        cell.screenshot(path=str(_artifact(path, f"cell{i}")))
