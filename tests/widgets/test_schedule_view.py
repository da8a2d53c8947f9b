"""The scheduler view: timelines, DAG latencies, throughput; its tab appears once schedule events arrive."""

from __future__ import annotations

from widgets.schedule import ScheduleView, compare_schedules, schedule_summary
from widgets.store import RunStore
from widgets.synthetic import fabricate_run
from widgets.views import RunView
from workbench.events import ScheduleStats, ScheduleTrace


def _schedule_events(run_id, policy, epochs=2, rate=100.0):
    out = []
    for e in range(epochs):
        out.append(ScheduleStats(run_id=run_id, epoch=e, policy=policy, ready_queue="priority", seeds=100,
                                 seconds=100 / rate, seeds_per_s=rate, trainer_idle_fraction=0.25,
                                 dag_latency_ms=[5.0, 7.0, 6.0], dag_latency_ms_mean=6.0, launch_s=[0.0, 0.1, 0.2]))
        out.append(ScheduleTrace(run_id=run_id, epoch=e, policy=policy, t=[0.0, 0.05, 0.1], cpu_util=[20.0, 80.0, 60.0],
                                 q_size=[0, 1, 0], in_flight=[1, 2, 1], busy_workers=[1, 2, 2]))
    return out


def test_schedule_view_and_its_tab(render):
    store = RunStore(events=fabricate_run(run_id="s", epochs=2))
    view = RunView(store, runs_dir=None)
    render(view)
    assert view.scheduler is None and len(view._tabs) == 4
    store.extend(_schedule_events("s", "launch-score"))
    view.refresh()
    assert view.scheduler is not None and view._tabs._names[4] == "Scheduler"
    view._tabs.active = 4
    assert view.visible_views() == [view.progress, view.scheduler]
    sv = ScheduleView(store)
    render(sv)
    assert len(sv.trace_frame()) == 3 and len(store.frame("schedule_dag")) == 6
    assert schedule_summary(store)["seeds_per_s"] == 100.0


def test_compare_schedules():
    runs = {"launch-score": _schedule_events("a", "launch-score", rate=200.0),
            "fixed-depth": _schedule_events("b", "fixed-depth", rate=100.0)}
    table, plots = compare_schedules(runs)
    assert table.set_index("run")["seeds_per_s"].to_dict() == {"launch-score": 200.0, "fixed-depth": 100.0}
    assert len(plots) == 5
