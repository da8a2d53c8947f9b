"""The Communication tab's what-if in a real browser: a saved run that had ``--network`` shows its modelled
communication beside the measured one, and with a baseline chosen in the page the what-if draws both runs'
modelled epoch against link bandwidth, the crossover and the table of presets.
Screenshot: test-artifacts/dashboard-whatif.png."""

from __future__ import annotations

from tests.ui.conftest import ARTIFACTS, open_tab, plotted_rows, wait_until
from widgets.app import RunRegistry
from widgets.store import RunStore
from widgets.synthetic import fabricate_run
from widgets.whatif import WhatIf, crossovers
from workbench.events import EpochEnd, RunFinished, RunLog
from workbench.runtime.launch import modelled_comm

NETWORK = "1gbit,50us,eff=0.956"


def _save(runs_dir, run_id: str, recipe: str, network: str | None = None, **kw) -> None:
    """A fabricated run's log; with ``network`` its summary holds what ``launch(network=...)`` adds."""
    events = fabricate_run(run_id=run_id, recipe=recipe, num_parts=3, epochs=12, **kw)
    if network is not None:
        end = events.pop()
        comm = [max(e.comm_s for e in events if isinstance(e, EpochEnd) and e.epoch == k) for k in range(12)]
        summary = {**end.summary, "comm_s": comm, **modelled_comm(events, network, 3, 12)}
        events.append(RunFinished(run_id=run_id, time=end.time, status="finished", summary=summary))
    with RunLog(runs_dir, run_id, recipe=recipe) as log:
        for ev in events:
            log.emit(ev)


def test_the_what_if_compares_two_runs_across_networks(page, served, tmp_path):
    runs = tmp_path / "runs"
    # full_graph-like: sends 2000x the bytes, computes less; sancus-like: skips broadcasts, computes more
    _save(runs, "full-graph", "full_graph", NETWORK, byte_scale=2000.0)
    _save(runs, "sancus", "sancus", epoch_s=0.6)
    reg = RunRegistry(runs)
    reg.add(RunStore.from_log(runs / "full-graph"))       # shown first
    page.goto(served(reg))
    page.wait_for_selector(".wb-epochs")
    session, = reg.sessions
    wait_until(lambda: session.view is not None and session.view.store.run_id == "full-graph")
    session = open_tab(page, reg, session, "Communication", "traffic")
    view = session.view.traffic
    wait_until(lambda: plotted_rows(view) > 0)
    # the run's own --network model beside the measured communication
    wait_until(lambda: f"modelled (--network {view.run_network()})" in view._times.series)
    wait_until(lambda: page.locator(".wb-whatif-own").count() == 1)
    assert "measured epoch" in page.locator(".wb-whatif-own").first.inner_text()
    # a baseline chosen in the page: both runs, the crossover
    baseline = page.locator("select", has=page.locator("option", has_text="(none)")).first
    baseline.select_option(label="sancus")
    wait_until(lambda: page.locator(".wb-whatif-crossover").count() == 1, timeout=30)
    text = page.locator(".wb-whatif-crossover").first.inner_text()
    (x,) = crossovers(WhatIf(RunStore.from_log(runs / "full-graph")), WhatIf(RunStore.from_log(runs / "sancus")))
    assert f"Crossover at {x * 8 / 1e9:.3g} Gbit/s" in text and "below it sancus is faster" in text, text
    cells = page.locator("table.wb-whatif tr[data-network]")
    assert cells.count() == 5
    assert "1GbE" in cells.first.inner_text() and "NVLink" in cells.last.inner_text()
    wait_until(lambda: any(getattr(el, "label", "") == "baseline: sancus" for el in view._whatif.element))
    page.wait_for_timeout(1500)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard-whatif.png"), full_page=True)
