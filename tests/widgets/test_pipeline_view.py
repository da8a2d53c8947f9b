"""The pipeline view: the simulated timeline of a prefetch run, from events or a saved log; its RunView tab."""

from __future__ import annotations

from widgets.pipeline import PipelineView
from widgets.store import PIPELINE_BAR_ITERATIONS, RunStore
from widgets.synthetic import fabricate_pipeline, fabricate_run
from widgets.views import RunView
from workbench.events import RunLog


def test_view_draws_the_window_and_the_per_iteration_lines(render):
    events = fabricate_pipeline(num_workers=3, iterations=10, tau=0, run_id="p")
    view = PipelineView(events, last_iterations=2)
    render(view)
    bars = view.window_bars()
    assert sorted(bars["iteration"].unique()) == [8, 9]
    assert set(bars["row"]) == {f"worker {w} · {lane}" for w in range(3) for lane in ("compute", "link")}
    waits = view.waits()
    assert len(waits) and set(waits["kind"]) <= {"wait_fetch", "wait_grad"}
    assert (waits["issued"] == waits["iteration"]).all()          # tau = 0: the fetch just issued
    starts = ("layer", "fetch", "boundary", "weight", "forward", "backward", "iteration")
    assert all(what.startswith(starts) for what in bars["what"])
    rects = view._gantt.element.values()[0]
    assert len(rects) > 0 and "what" in rects.dimensions("value", label="name")
    assert set(view._series.series) == {"iteration_s", "blocked_s", "sync_iteration_s"}
    assert all(len(df) == 10 for df in view._series.series.values())
    assert "τ = <b>0</b>" in view._stats.object and "blocked" in view._stats.object
    view.last_iterations = 8
    assert view.window_bars()["iteration"].nunique() == 8


def test_from_a_saved_log_and_as_a_runview_tab(tmp_path, render):
    events = fabricate_run(run_id="p", num_parts=2, epochs=6)
    with RunLog(tmp_path, "p") as log:
        for ev in events[:-1] + fabricate_pipeline(num_workers=2, iterations=6, run_id="p") + events[-1:]:
            log.emit(ev)
    view = RunView(RunStore.from_log(tmp_path / "p"), runs_dir=None)
    render(view)
    assert view.pipeline is not None and view._tabs._names[-1] == "Pipeline"
    view._tabs.active = len(view._tabs) - 1
    assert view.visible_views() == [view.progress, view.pipeline]
    assert len(view.pipeline.iteration_frame()) == 6
    out = view.save(tmp_path / "report.html")
    assert "wb-report-pipeline" in out.read_text()


def test_no_timeline_no_tab_then_it_arrives_live(render):
    store = RunStore(events=fabricate_run(run_id="s", epochs=2))
    view = RunView(store, runs_dir=None)
    render(view)
    assert view.pipeline is None and "Pipeline" not in view._tabs._names
    PipelineView(store)                                          # empty: a note, no error
    store.extend(fabricate_pipeline(num_workers=2, iterations=3, run_id="s"))
    view.refresh()
    assert view.pipeline is not None and "Pipeline" in view._tabs._names


def test_store_keeps_the_bars_of_the_latest_iterations_only():
    n = PIPELINE_BAR_ITERATIONS * 2
    store = RunStore(events=fabricate_pipeline(num_workers=1, iterations=n, num_layers=1, batch=50))
    bars = store.frame("pipeline_bar")
    assert bars["iteration"].max() == n - 1 and bars["iteration"].nunique() <= PIPELINE_BAR_ITERATIONS * 5 // 4
    assert len(store.frame("pipeline")) == n
