"""``workbench report``: a saved run as one HTML file that renders offline, opened from ``file://``."""

from __future__ import annotations

from urllib.parse import urlparse

from tests.ui.conftest import ARTIFACTS, guard_requests, wait_until
from workbench.cli import main
from workbench.events import RunLog
from widgets.synthetic import fabricate_run

#: the report's sections with plots (the progress section is text)
PLOT_SECTIONS = ("curves", "partition", "staleness", "traffic")

#: canvases of non-zero size under every element with class ``cls``, through open shadow roots
COUNT_IN_SECTION = """(cls) => {
  const count = (node) => {
    let n = (node.tagName === 'CANVAS' && node.width > 0 && node.height > 0) ? 1 : 0;
    if (node.shadowRoot) n += count(node.shadowRoot);
    for (const child of node.children || []) n += count(child);
    return n;
  };
  const found = [];
  const find = (node) => {
    if (node.classList && node.classList.contains(cls)) found.push(node);
    if (node.shadowRoot) find(node.shadowRoot);
    for (const child of node.children || []) find(child);
  };
  find(document.body);
  return found.length ? found.map(count).reduce((a, b) => a + b, 0) : -1;
}"""

#: the text of the status badge (inside the progress pane's shadow root)
STATUS_TEXT = """() => {
  const find = (node) => {
    if (node.classList && node.classList.contains('wb-status')) return node.textContent;
    for (const root of [node.shadowRoot, node].filter(Boolean))
      for (const child of root.children || []) { const t = find(child); if (t !== null) return t; }
    return null;
  };
  return find(document.body) || '';
}"""


def _saved_run(root, run_id="reported", epochs=12):
    log = RunLog(root, run_id, recipe="sancus")
    for event in fabricate_run(num_parts=3, epochs=epochs, run_id=run_id):
        log.emit(event)
    log.close()
    return root / run_id


def test_report_opens_offline_with_every_view(browser, tmp_path, capsys):
    run_dir = _saved_run(tmp_path / "runs")
    out = tmp_path / "report.html"
    assert main(["report", str(run_dir), "--out", str(out)]) == 0
    assert f"Report: {out}" in capsys.readouterr().out
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    # the file itself is file://; anything over the network fails the test
    _, external = guard_requests(context, lambda url: urlparse(url).scheme in ("file", "data", "blob"))
    page = context.new_page()
    page.goto(out.as_uri())
    wait_until(lambda: page.evaluate(COUNT_IN_SECTION, "wb-report-traffic") > 0, timeout=60)
    counts = {name: page.evaluate(COUNT_IN_SECTION, f"wb-report-{name}") for name in PLOT_SECTIONS}
    status = page.evaluate(STATUS_TEXT)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
    context.close()
    print(f"report {out.stat().st_size / 1e6:.1f} MB, canvases per view {counts}, external requests {len(external)}")
    assert not external, f"the report requested: {external}"
    assert all(n > 0 for n in counts.values()), f"views without a rendered plot: {counts}"
    assert "finished" in status


def test_report_of_a_folder_without_a_log_is_one_error(tmp_path, capsys):
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert "The 'run_dir' parameter of workbench report" in err and "Traceback" not in err
    assert not (tmp_path / "r.html").exists()
