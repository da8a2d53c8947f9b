"""The Time tab in a real browser: a live run that reports step times gets the tab, its stacked bars render
with data (one bar per rank and epoch, a colour and legend entry per phase), the shares line sums to 100 %,
and the figure follows the run. Screenshot: test-artifacts/dashboard-time.png."""

from __future__ import annotations

import re

from tests.ui.conftest import ARTIFACTS, open_tab, painted_pixels, plotted_rows, wait_until
from widgets.app import RunRegistry
from widgets.synthetic import SyntheticRun, fabricate_run
from widgets.timing import PHASE_COLORS


def test_time_tab_renders_and_follows_a_live_run(page, served, tmp_path):
    reg = RunRegistry(tmp_path / "runs")
    # held at epoch 8 until the tab is drawn, so the page sees a run that is still going
    run = SyntheticRun(fabricate_run(run_id="time-live", num_parts=3, epochs=30, step_times=True, cache="degree"),
                       delay=0.2, out=str(tmp_path / "runs"), run_id="time-live", start=False)
    run.pause(at_epoch=8)
    run.start()
    try:
        reg.add(run)
        page.goto(served(reg))
        page.wait_for_selector(".wb-epochs")
        session, = reg.sessions
        wait_until(lambda: session.view is not None and session.view.timing is not None)
        session = open_tab(page, reg, session, "Time", "timing")
        view = session.view.timing
        wait_until(lambda: page.locator(".wb-time-share").count() >= 5)
        wait_until(lambda: plotted_rows(view) > 0)
        # the page draws the bars in the phases' colours (the legend's swatches alone are a few hundred pixels)
        wait_until(lambda: min(painted_pixels(page, {p: PHASE_COLORS[p] for p in ("forward", "fetch", "backward")})
                               .values()) > 2000, what=lambda: painted_pixels(page, PHASE_COLORS))
        shares = page.locator(".wb-time-share").all_inner_texts()
        percents = [int(m) for text in shares for m in re.findall(r"(\d+)\s*%", text)]
        assert sum(percents) == 100, shares   # whole percents that sum to 100 ("<1 %" counts 0)
        assert run.status == "running"
        first = int(view.epoch_frame()["epoch"].max())
        run.resume()
        # it follows the run: bars of later epochs, patched into the same figure
        wait_until(lambda: view._bars.updates > 0 and int(view.epoch_frame()["epoch"].max()) >= first + 3)
        run.wait(timeout=60)
        wait_until(lambda: view.up_to_date() and int(view.bar_frame()[0]["epoch"].max()) == 29)
        page.wait_for_timeout(1500)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dashboard-time.png"), full_page=True)
        dominant = page.locator(".wb-time-dominant").first.inner_text()
        assert dominant == max(view.shares(), key=view.shares().get)
    finally:
        run.stop()
        run.wait(timeout=30)
