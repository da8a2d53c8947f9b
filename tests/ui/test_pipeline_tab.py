"""The pipeline tab in a real browser: a live run that reports a simulated timeline gets the tab, its Gantt
chart and per-iteration lines render with data and follow the run. Screenshot: test-artifacts/dashboard-pipeline.png."""

from __future__ import annotations

from tests.ui.conftest import ARTIFACTS, open_tab, plotted_rows, wait_until
from widgets.app import RunRegistry
from widgets.synthetic import SyntheticRun, fabricate_pipeline, fabricate_run
from workbench.events import EpochEnd, RunFinished


def _with_timeline(run_id: str, epochs: int, workers: int) -> list:
    """A fabricated run whose timeline (one iteration per epoch) arrives after each epoch's last rank."""
    timeline = fabricate_pipeline(num_workers=workers, iterations=epochs, tau=0, run_id=run_id, batch=1)
    out = []
    for ev in fabricate_run(run_id=run_id, num_parts=workers, epochs=epochs, recipe="psc_gcn"):
        if isinstance(ev, RunFinished):
            out.extend(timeline)          # whatever is left (none: one per epoch)
            timeline = []
        out.append(ev)
        if isinstance(ev, EpochEnd) and ev.rank == workers - 1 and timeline:
            out.append(timeline.pop(0))
    return out


def test_pipeline_tab_renders_and_follows_a_live_run(page, served, tmp_path):
    reg = RunRegistry(tmp_path / "runs")
    # held at epoch 10 until the tab is drawn: on a slow machine a run of a few seconds could end before the
    # page opens the tab, and a finished run cannot show that the view follows it
    run = SyntheticRun(_with_timeline("psc-live", epochs=40, workers=3), delay=0.25, out=str(tmp_path / "runs"),
                       run_id="psc-live", start=False)
    run.pause(at_epoch=10)
    run.start()
    try:
        reg.add(run)
        url = served(reg)
        page.goto(url)
        page.wait_for_selector(".wb-epochs")
        session, = reg.sessions
        wait_until(lambda: session.view is not None and session.view.pipeline is not None)
        session = open_tab(page, reg, session, "Pipeline", "pipeline")
        view = session.view.pipeline
        wait_until(lambda: page.locator(".wb-pipeline-stats").count() == 1)
        wait_until(lambda: plotted_rows(view) > 0)
        first = int(view.iteration_frame()["iteration"].max())
        assert run.status == "running" and first < 39
        run.resume()
        # it follows the run: three iterations more, patched into the figures in place
        wait_until(lambda: view._series.updates + view._gantt.updates > 0 and
                   int(view.iteration_frame()["iteration"].max()) >= first + 3)
        wait_until(lambda: page.locator(".wb-pipeline-blocked").count() == 1)
        assert page.locator(".wb-pipeline-blocked").first.inner_text().endswith("%")
        assert len(view.waits()) > 0          # synchronous (tau = 0): fetches block
        page.wait_for_timeout(800)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dashboard-pipeline.png"), full_page=True)
    finally:
        run.stop()
        run.wait(timeout=30)
