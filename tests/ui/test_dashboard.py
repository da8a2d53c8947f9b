"""The served dashboard in a real browser: a run started from the page, views that grow while it goes,
two tabs on one run, an invalid setting refused in the form, and a screenshot in test-artifacts/."""

from __future__ import annotations

import re
import time

import holoviews as hv
import pytest

from tests.ui.conftest import ARTIFACTS, open_tab, plotted_rows, wait_until
from widgets.app import RunRegistry
from widgets.synthetic import SyntheticRun, fabricate_run
from widgets.views import LivePlot, StreamPlot

TAB_VIEWS = {"Training curves": "curves", "Partition": "partition", "Staleness": "staleness",
             "Communication": "traffic"}


def _epochs_shown(page) -> int:
    text = page.locator(".wb-epochs").first.inner_text()
    return int(text)


def _canvases(page) -> int:
    return page.locator("canvas").count()


def _updates(view) -> int:
    """How many times a view's live plots were updated in place (not built anew)."""
    return sum(p.updates for p in vars(view).values() if isinstance(p, (LivePlot, StreamPlot)))


def _slow_launcher(tmp_path, epochs=2000, delay=0.25):
    """Runs long enough (about 8 min) that the test stops them itself: a walk through every tab on a
    slow machine must not outlast the run, or the views stop growing and the test waits in vain."""
    def launcher(cfg, **kw):
        return SyntheticRun(fabricate_run(num_parts=kw.get("workers", 2), epochs=epochs), delay=delay,
                            out=str(tmp_path / "runs"), run_id=f"ui-{int(time.time() * 1000)}")

    return launcher


def test_live_run_grows_in_every_view(page, served, tmp_path):
    reg = RunRegistry(tmp_path / "runs", launcher=_slow_launcher(tmp_path))
    url = served(reg)
    page.goto(url)
    page.get_by_text("Start run").first.click()
    wait_until(lambda: len(reg.live_stores()) == 1)
    store = reg.live_stores()[0]
    wait_until(lambda: store.epochs_done >= 2)
    page.wait_for_selector(".wb-epochs")
    wait_until(lambda: _epochs_shown(page) >= 2)
    first_dom, first_store = _epochs_shown(page), len(store.frame("epoch"))
    session, = reg.sessions
    for tab, attr in TAB_VIEWS.items():
        page.get_by_text(tab, exact=True).first.click()
        wait_until(lambda: _canvases(page) >= 2)
        view = getattr(session.view, attr)
        wait_until(lambda: plotted_rows(view) > 0)
        if attr != "partition":  # the partition is computed once; the others grow while the run goes
            before, patched = plotted_rows(view), _updates(view)
            wait_until(lambda: plotted_rows(view) > before)
            wait_until(lambda: _updates(view) > patched)  # new epochs patch the figures in place
    wait_until(lambda: _epochs_shown(page) > first_dom + 2)  # the page follows the run
    assert len(store.frame("epoch")) > first_store
    assert store.status == "running"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard-live.png"), full_page=True)
    # stop from the page: the run ends as stopped, the page says so, the app keeps working
    page.get_by_text("Stop", exact=False).last.click()
    wait_until(lambda: store.status == "stopped")
    wait_until(lambda: page.locator(".wb-status[data-status='stopped']").count() == 1)


def test_two_tabs_on_one_run_agree_and_closing_one_keeps_the_run(browser, served, tmp_path):
    reg = RunRegistry(tmp_path / "runs")
    run = SyntheticRun(fabricate_run(num_parts=2, epochs=30), delay=0.2, out=str(tmp_path / "runs"), run_id="twotabs")
    reg.add(run)
    url = served(reg)
    ctx = browser.new_context(viewport={"width": 1300, "height": 900})
    ctx.route("**/*", lambda route: route.continue_() if "127.0.0.1" in route.request.url else route.abort())
    a, b = ctx.new_page(), ctx.new_page()
    a.goto(url), b.goto(url)
    for pg in (a, b):
        pg.wait_for_selector(".wb-epochs", timeout=90_000)
    a.close()  # closing a tab does not stop the run
    wait_until(lambda: run.status == "finished", timeout=60)
    wait_until(lambda: _epochs_shown(b) == 30)
    assert reg.store("twotabs").epochs_done == 30
    ctx.close()


def test_invalid_setting_is_refused_in_the_page(page, served, tmp_path):
    reg = RunRegistry(tmp_path / "runs")
    url = served(reg)
    page.goto(url)
    page.wait_for_selector("text=New run")
    box = page.locator(".wb-field-num_parts input").first  # empty = the number of workers
    box.fill("many")
    box.press("Enter")
    page.get_by_text("Start run").first.click()
    msg = page.get_by_text(re.compile(r"Refused: .*'num_parts'.* Got 'many' instead"))
    msg.first.wait_for(state="visible")
    assert page.get_by_text("Traceback").count() == 0
    assert reg.live_stores() == []


@pytest.mark.slow
def test_real_run_from_the_form(page, served, tmp_path):
    """A real run of the runtime (local runner, karate, a few epochs) started from the page."""
    pytest.importorskip("workbench.runtime.launch")
    reg = RunRegistry(tmp_path / "runs")
    url = served(reg)
    page.goto(url)
    page.wait_for_selector("text=New run")
    graph = page.locator(".wb-field-graph input").first
    graph.fill("karate")
    graph.press("Enter")
    page.get_by_text("Start run").first.click()
    wait_until(lambda: len(reg.live_stores()) == 1, timeout=60)
    store = reg.live_stores()[0]
    wait_until(lambda: store.done, timeout=120)
    assert store.status == "finished", store.error
    wait_until(lambda: page.locator(".wb-status[data-status='finished']").count() == 1)
    assert store.partition is not None and store.epochs_done >= 1
    # each process's peak resident memory, once the run ended (the local runner's ranks share the client's)
    rss = page.locator(".wb-peak-rss").first
    wait_until(lambda: rss.count() and rss.is_visible())
    assert re.fullmatch(r"peak resident memory: client [\d,]+ MiB · ranks [\d,]+, [\d,]+ MiB \(largest [\d,]+ "
                        r"MiB\)", rss.inner_text()), rss.inner_text()
    # the page says "finished" only with the curves of the whole run beside it: the run's end is drawn in
    # the refresh that shows its status, whatever the figures' redraw throttle (a short run used to end
    # while the curves still waited for their first epoch, or showed the first few)
    session, = reg.sessions
    curves = session.view.curves
    assert session.view.store is store and curves.up_to_date(), (
        f"the page says finished, the curves are behind (drew {sum(map(len, curves._loss.series.values()))} "
        f"of {len(store.frame('epoch'))} rows)")
    page.get_by_text("Training curves", exact=True).first.click()
    note = page.get_by_text("Waiting for the first epoch")
    wait_until(lambda: note.count() == 0 or not note.first.is_visible(), timeout=30,
               what=lambda: f"the curves still wait for the first epoch (store: {store.epochs_done} epochs, "
                            f"view's store {curves.store!r}, the run's {store!r})")
    rows = len(store.frame("epoch"))  # one per rank and epoch
    wait_until(lambda: sum(map(len, curves._loss.series.values())) == rows and plotted_rows(curves) >= rows,
               timeout=30, what=lambda: f"{plotted_rows(curves)} rows plotted, the run has {rows}")
    wait_until(lambda: _canvases(page) >= 2)
    # a second tab fed by the run's events: the communication view draws the bytes sent
    session = open_tab(page, reg, session, "Communication", "traffic")
    wait_until(lambda: plotted_rows(session.view.traffic) > 0, timeout=30)
    page.get_by_text("Training curves", exact=True).first.click()
    wait_until(lambda: _canvases(page) >= 2)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard-real-run.png"), full_page=True)
