"""The scheduler view: timelines of C_util, Q_size and DAGs in flight, DAG latencies, trainer idle time.

Reads a run's :class:`~workbench.events.ScheduleStats` and :class:`~workbench.events.ScheduleTrace` (one each
per rank and epoch, from the schedule stage). :func:`compare_schedules` draws several runs side by side
(throughput, trainer idle fraction, DAG latency) for a notebook comparing schedulers.

Example:
    >>> from workbench.events import ScheduleStats, ScheduleTrace
    >>> from widgets.store import RunStore
    >>> store = RunStore(events=[
    ...     ScheduleStats(run_id="r", epoch=0, policy="fixed-depth", seeds=64, seconds=0.5, seeds_per_s=128.0,
    ...                   dag_latency_ms=[10.0, 12.0], launch_s=[0.0, 0.1]),
    ...     ScheduleTrace(run_id="r", epoch=0, policy="fixed-depth", t=[0.0, 0.05], cpu_util=[40.0, 90.0],
    ...                   q_size=[0, 1], in_flight=[1, 2], busy_workers=[1, 2])])
    >>> schedule_summary(store)["seeds_per_s"], len(ScheduleView(store).trace_frame())
    (128.0, 2)
"""

from __future__ import annotations

from typing import Any, Optional

import holoviews as hv
import pandas as pd
import panel as pn

from widgets.base import PLOT_OPTS, RANK_COLORS, StoreView, as_store, empty_note
from widgets.live_plots import LivePlot
from widgets.store import RunStore

__all__ = ["ScheduleView", "schedule_summary", "compare_schedules", "timeline_plot"]

SIGNALS = {"cpu_util": "C_util (%)", "q_size": "Q_size", "in_flight": "DAGs in flight", "busy_workers": "busy workers"}
SIGNAL_COLORS = {"cpu_util": "#e45756", "q_size": "#4c78a8", "in_flight": "#f58518", "busy_workers": "#54a24b"}


def schedule_summary(store: RunStore) -> Optional[dict]:
    """One run's scheduling figures over all ranks and epochs (None without schedule events)."""
    s = store.frame("schedule")
    if s.empty:
        return None
    secs = s.groupby("epoch")["seconds"].max().sum()
    return {"run_id": store.run_id, "policy": next((p for p in s["policy"] if p), "?"),
            "ready_queue": next((q for q in s["ready_queue"] if q), "?"),
            "seeds_per_s": float(s["seeds"].sum() / secs) if secs > 0 else 0.0,
            "trainer_idle_fraction": float(s["trainer_idle_fraction"].mean()),
            "cpu_util_mean": float(s["cpu_util_mean"].mean()),
            "dag_latency_ms": float(s["dag_latency_ms_mean"].mean()), "epochs": int(s["epoch"].nunique())}


def timeline_plot(trace: pd.DataFrame, title: str = "Scheduler timeline") -> hv.Overlay:
    """C_util (left axis, %) and Q_size, DAGs in flight, busy workers (counts) against time."""
    items = []
    for col, label in SIGNALS.items():
        if col == "cpu_util":
            continue
        # one shared "count" dimension: the three counts share one y axis (multi_y gives each dimension its own)
        counts = trace[["t", col]].rename(columns={col: "count"})
        items.append(hv.Curve(counts, "t", "count", label=label).opts(
            color=SIGNAL_COLORS[col], line_width=2, interpolation="steps-post", tools=["hover"]))
    cpu = hv.Curve(trace, "t", hv.Dimension("cpu_util", label="C_util (%)", range=(0, 100)), label=SIGNALS["cpu_util"])
    items.append(cpu.opts(color=SIGNAL_COLORS["cpu_util"], line_width=1, alpha=0.7))
    return hv.Overlay(items).opts(title=title, legend_position="right", multi_y=True, **PLOT_OPTS)


class ScheduleView(StoreView):
    """The run's scheduler traces: timelines of the latest epoch, DAG latencies, throughput and idle time per epoch.

    Args:
        source: the run (store, handle, run folder or events).
        epoch: the epoch whose timeline is drawn (None: the latest).
    """

    kinds = ("schedule", "schedule_trace")
    title = "Scheduler"

    def __init__(self, source: Any, *, epoch: Optional[int] = None, **params: Any):
        self._epoch = epoch
        super().__init__(source, **params)

    def _build(self) -> list:
        self._note = empty_note("No scheduler events yet (a run with a schedule stage reports one per rank and epoch).")
        self._stats = pn.pane.HTML("", margin=(4, 10), css_classes=["wb-schedule-stats"])
        self._timeline = LivePlot()
        self._latency = LivePlot()
        self._epochs = LivePlot()
        return [self._stats, self._note, self._timeline.pane,
                pn.Row(self._latency.pane, self._epochs.pane, sizing_mode="stretch_width")]

    def trace_frame(self, epoch: Optional[int] = None) -> pd.DataFrame:
        """The trace samples of ``epoch`` (default: the view's epoch, else the latest) on rank 0."""
        t = self.store.frame("schedule_trace")
        if t.empty:
            return t
        e = epoch if epoch is not None else (self._epoch if self._epoch is not None else int(t["epoch"].max()))
        return t[(t["epoch"] == e) & (t["rank"] == t["rank"].min())]

    def _update(self) -> None:
        s = self.store.frame("schedule")
        self._note.visible = s.empty
        summary = schedule_summary(self.store)
        self._stats.object = "" if summary is None else (
            f"<span style='color:#444'>policy <b class='wb-schedule-policy'>{summary['policy']}</b> · ready queue "
            f"<b>{summary['ready_queue']}</b> · <b>{summary['seeds_per_s']:.4g}</b> seeds/s · trainer idle "
            f"<b>{summary['trainer_idle_fraction']:.1%}</b> · C_util {summary['cpu_util_mean']:.3g} % · DAG latency "
            f"{summary['dag_latency_ms']:.3g} ms</span>")
        trace = self.trace_frame()
        self._timeline.show(timeline_plot(trace, "C_util, Q_size, DAGs in flight (latest epoch)") if len(trace)
                            else hv.Curve([], "t", "count"), shape=("timeline", len(trace) > 0))
        d = self.store.frame("schedule_dag")
        lat = (hv.Scatter(d, "launch_s", [hv.Dimension("latency_ms", label="DAG latency (ms)"), "epoch", "rank"])
               .opts(color="epoch", cmap="viridis", size=5, tools=["hover"]) if len(d)
               else hv.Scatter([], "launch_s", "latency_ms"))
        self._latency.show(lat.opts(title="DAG latency against launch time", **PLOT_OPTS), shape=("lat", len(d) > 0))
        if len(s):
            per = s.groupby("epoch", as_index=False).agg(seeds_per_s=("seeds_per_s", "sum"),
                                                         idle=("trainer_idle_fraction", "mean"))
            bars = hv.Curve(per, "epoch", hv.Dimension("seeds_per_s", label="seeds/s (all trainers)")).opts(
                color=RANK_COLORS[0], line_width=2, tools=["hover"]) * hv.Scatter(per, "epoch", "seeds_per_s").opts(
                color=RANK_COLORS[0], size=6)
        else:
            bars = hv.Curve([], "epoch", "seeds_per_s")
        self._epochs.show(bars.opts(title="Throughput per epoch", **PLOT_OPTS), shape=("epochs", len(s) > 0))


def compare_schedules(runs: dict[str, Any]) -> tuple[pd.DataFrame, hv.Layout]:
    """``(table, plots)`` of several runs (name -> handle, store, folder or events): one row per run and
    bars of throughput, trainer idle fraction and DAG latency, then each run's timeline."""
    stores = {name: as_store(r) for name, r in runs.items()}
    rows = []
    for name, st in stores.items():
        s = schedule_summary(st)
        if s is not None:
            rows.append({"run": name, **{k: v for k, v in s.items() if k != "run_id"}})
    table = pd.DataFrame(rows)
    if table.empty:
        return table, hv.Layout([hv.Bars([], "run", "seeds_per_s")])
    opts = dict(PLOT_OPTS, height=220, responsive=False, width=330)   # fixed width: run names stay readable
    bars = [hv.Bars(table, "run", hv.Dimension(col, label=label)).opts(title=label, color=color, tools=["hover"], **opts)
            for col, label, color in (("seeds_per_s", "seeds/s", "#4c78a8"),
                                      ("trainer_idle_fraction", "trainer idle fraction", "#e45756"),
                                      ("dag_latency_ms", "mean DAG latency (ms)", "#f58518"))]
    lines = []
    for name, st in stores.items():
        t = st.frame("schedule_trace")
        if len(t):
            t = t[(t["epoch"] == t["epoch"].max()) & (t["rank"] == t["rank"].min())]
            lines.append(timeline_plot(t, f"{name}: timeline (last epoch)").opts(
                height=260, responsive=False, width=330, legend_position="top", legend_cols=2))
    return table, hv.Layout(bars + lines).cols(3)
