"""The cache tab in a real browser: a run with cache events gets the tab, its three plots render, and the
policy comparison covers the other runs of the registry. Screenshot: test-artifacts/dashboard-cache.png."""

from __future__ import annotations

from tests.ui.conftest import ARTIFACTS, plotted_rows, wait_until
from widgets.app import RunRegistry
from widgets.store import RunStore
from widgets.synthetic import fabricate_run


def _run_select(page):
    """The dashboard's run picker (the select listing the run ids; the form has selects too)."""
    return page.locator("select", has=page.locator("option", has_text="cache-degree-20")).first


def _visible_canvases(page) -> int:
    """Canvases with a size on screen (the locator pierces Bokeh's shadow roots)."""
    return page.evaluate("""() => {
        const seen = [];
        const walk = (root) => {
            for (const el of root.querySelectorAll('*')) {
                if (el.tagName === 'CANVAS') { const r = el.getBoundingClientRect(); if (r.width > 50 && r.height > 50) seen.push(el); }
                if (el.shadowRoot) walk(el.shadowRoot);
            }
        };
        walk(document);
        return seen.length;
    }""")


def test_cache_tab_renders_its_plots(page, served, tmp_path):
    reg = RunRegistry(tmp_path / "runs")
    for run_id, policy, ratio in [("cache-random", "random", 0.1), ("cache-lru", "lru", 0.1),
                                  ("cache-degree-20", "degree", 0.2), ("cache-degree", "degree", 0.1)]:
        reg.add(RunStore(events=fabricate_run(run_id=run_id, num_parts=3, epochs=8, cache=policy,
                                              cache_ratio=ratio)))
    reg.add(RunStore(events=fabricate_run(run_id="plain", num_parts=2, epochs=3)))
    url = served(reg)
    page.goto(url)
    page.wait_for_selector(".wb-epochs")
    session, = reg.sessions
    wait_until(lambda: session.view is not None)
    if session.view.cache is None:  # the newest run is shown first; pick a cached one
        _run_select(page).select_option("cache-degree")
        wait_until(lambda: session.view.store.run_id == "cache-degree")
    page.get_by_text("Cache", exact=True).first.click()
    view = session.view.cache
    wait_until(lambda: page.locator(".wb-cache-policy").count() == 1)
    wait_until(lambda: _visible_canvases(page) >= 3)
    wait_until(lambda: plotted_rows(view) > 0)
    cmp = view.comparison_frame()
    assert set(cmp["run_id"]) == {"cache-random", "cache-lru", "cache-degree-20", "cache-degree"}
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard-cache.png"), full_page=True)
    # a run without cache events has no cache tab
    _run_select(page).select_option("plain")
    wait_until(lambda: session.view.store.run_id == "plain")
    assert session.view.cache is None
    wait_until(lambda: page.get_by_text("Cache", exact=True).count() == 0)
