"""The pipeline view: the simulated timeline of fetch against compute in a pipelined (prefetch) run.

Reads a run's :class:`~workbench.events.PipelineTimeline` events (the discrete-event account of
:mod:`workbench.sim.pipeline_time`, simulated on the client as the run's iterations complete). A Gantt
chart of the latest iterations has two lanes per worker: **compute** (forward and backward of each layer)
and **link** (the fetch of each layer's boundary rows, the boundary gradients, the weight all-reduce). Red
bars on the compute lane are the waits: the layer could not start until the fetch (or the gradients)
issued ``tau`` iterations earlier had arrived; light grey, the wait for the barrier (the link drains, then
every worker's all-reduce), which is where a communication-bound iteration with ``tau >= 1`` spends its
time. Hovering a bar tells its layer, kind, bytes and seconds, and for a wait which transfer blocked it. Below, per iteration: the simulated iteration time, the seconds
the slowest worker was blocked, and the synchronous exact iteration for reference (only ratios mean
anything: the bandwidth is scaled so that the synchronous iteration communicates ``comm_ratio`` times its
compute).

Example:
    >>> from widgets.synthetic import fabricate_pipeline
    >>> view = PipelineView(fabricate_pipeline(num_workers=2, iterations=6, tau=1), last_iterations=2)
    >>> bars = view.window_bars()
    >>> sorted(bars["iteration"].unique().tolist()), sorted(bars["row"].unique().tolist())[:2]
    ([4, 5], ['worker 0 · compute', 'worker 0 · link'])
"""

from __future__ import annotations

import holoviews as hv
import pandas as pd
import panel as pn
import param

from widgets.base import PLOT_OPTS, StoreView, empty_note
from widgets.live_plots import LivePlot, StreamPlot

__all__ = ["PipelineView", "KIND_STYLE", "bar_frame"]

#: colour and legend label of each bar kind (waits in red: the transfers that blocked compute)
KIND_STYLE = {
    "fwd": ("#4c78a8", "forward"), "bwd": ("#9ecae9", "backward"),
    "fetch": ("#f58518", "fetch (boundary rows)"), "grad": ("#b279a2", "boundary gradients"),
    "allreduce": ("#8c8c8c", "all-reduce"),
    "wait_fetch": ("#d62728", "blocked on a fetch"), "wait_grad": ("#ff9896", "blocked on gradients"),
    "wait_allreduce": ("#dedede", "waiting for the barrier"),
}
_LINK = ("fetch", "grad", "allreduce")
SERIES = {"iteration_s": ("simulated iteration", "#4c78a8"), "blocked_s": ("blocked (slowest worker)", "#d62728"),
          "sync_iteration_s": ("synchronous exact iteration", "#8c8c8c")}


def _what(r) -> str:
    layer = f"layer {int(r.layer)}"
    if r.kind == "fetch":
        return f"fetch of {layer}'s boundary rows, issued at iteration {r.issued}, used at {r.issued} + tau"
    if r.kind == "grad":
        return f"boundary gradients of {layer}, sent at iteration {r.issued}"
    if r.kind == "allreduce":
        return "weight-gradient all-reduce (the barrier)"
    if r.kind == "wait_allreduce":
        return f"iteration {r.iteration}: compute done, waiting for the link to drain and every worker's all-reduce"
    if r.kind.startswith("wait"):
        what = "fetch" if r.kind == "wait_fetch" else "gradients"
        return f"{layer} of iteration {r.iteration} blocked: waiting for the {what} issued at iteration {r.issued}"
    return f"{'forward' if r.kind == 'fwd' else 'backward'} of {layer}"


def bar_frame(bars: pd.DataFrame) -> pd.DataFrame:
    """The bars with their lane (``row``: ``worker w · compute`` or ``· link``), rectangle corners
    (``y0``/``y1``: two lanes per worker, worker 0 on top) and a hover text (``what``)."""
    df = bars.copy()
    if df.empty:
        return df.assign(row=[], y0=[], y1=[], what=[], label=[])
    link = df["kind"].isin(_LINK)
    lane = df["worker"].astype(int) * 2 + link.astype(int)
    df["row"] = [f"worker {w} · {'link' if k else 'compute'}" for w, k in zip(df["worker"], link)]
    df["y0"] = lane + 0.12
    df["y1"] = lane + 0.88
    df["what"] = [_what(r) for r in df.itertuples()]
    df["label"] = [KIND_STYLE.get(k, ("", k))[1] for k in df["kind"]]
    df["nbytes"] = df["nbytes"].astype(float)
    return df


class PipelineView(StoreView):
    """Simulated fetch against compute of a pipelined run: the timeline of the latest iterations per worker
    (waits in red), and per iteration the simulated and blocked seconds (module docstring)."""

    kinds = ("pipeline", "pipeline_bar")
    title = "Pipeline"

    last_iterations = param.Selector(default=4, objects=[1, 2, 4, 8, 16],
                                     doc="How many of the latest simulated iterations the timeline shows.")

    def _build(self) -> list:
        window = pn.widgets.Select.from_param(self.param.last_iterations, label="Iterations shown", width=160,
                                              margin=(4, 10), options={"last 1": 1, "last 2": 2, "last 4": 4,
                                                                       "last 8": 8, "last 16": 16})
        self._note = empty_note("No pipeline timeline yet (a prefetch run reports one as its iterations complete).")
        self._stats = pn.pane.HTML("", margin=(4, 10), css_classes=["wb-pipeline-stats"])
        self._gantt = LivePlot(linked_axes=False)
        self._series = StreamPlot(self._series_element, opts=dict(
            title="Simulated seconds per iteration", legend_position="right", **{**PLOT_OPTS, "height": 220}),
            linked_axes=False)
        return [pn.Row(window, self._stats), self._note, self._gantt.pane, self._series.pane]

    @staticmethod
    def _series_element(name: str, df: pd.DataFrame) -> hv.Element:
        label, color = SERIES[name]
        curve = hv.Curve(df, "iteration", hv.Dimension(name, label="simulated s"), label=label)
        return curve.opts(color=color, line_width=2, tools=["hover"],
                          line_dash="dashed" if name == "sync_iteration_s" else "solid")

    def iteration_frame(self) -> pd.DataFrame:
        """One row per simulated iteration (the store's ``pipeline`` frame, sorted)."""
        return self.store.frame("pipeline").sort_values("iteration", kind="stable").reset_index(drop=True)

    def window_bars(self) -> pd.DataFrame:
        """The bars of the latest ``last_iterations`` iterations, with lanes and hover text (:func:`bar_frame`)."""
        bars = self.store.frame("pipeline_bar")
        if bars.empty:
            return bar_frame(bars)
        last = int(bars["iteration"].max())
        return bar_frame(bars[bars["iteration"] > last - int(self.last_iterations)])

    def waits(self) -> pd.DataFrame:
        """The waits in the window: which fetch or gradients (``issued``) blocked which layer, for how long."""
        bars = self.window_bars()
        cols = ["iteration", "worker", "kind", "layer", "issued", "seconds", "nbytes"]
        return bars[bars["kind"].isin(["wait_fetch", "wait_grad"])][cols].reset_index(drop=True) if len(bars) else \
            pd.DataFrame(columns=cols)

    def _gantt_element(self, df: pd.DataFrame, its: pd.DataFrame) -> tuple[hv.Overlay, tuple]:
        workers = int(df["worker"].max()) + 1
        vdims = [hv.Dimension("label", label="kind"), "layer", "iteration", "issued",
                 hv.Dimension("nbytes", label="bytes"), hv.Dimension("seconds", label="seconds"), "what"]
        layers = []
        for kind, (color, label) in KIND_STYLE.items():
            part = df[df["kind"] == kind]
            if len(part):
                rect = hv.Rectangles(part, kdims=["start", "y0", "end", "y1"], vdims=vdims, label=label)
                layers.append(rect.opts(color=color, line_color="white", line_width=1, tools=["hover"],
                                        hover_tooltips=[("", "@what"), ("bytes", "@nbytes{0,0}"),
                                                        ("seconds", "@seconds{0.000000}")]))
        first = int(df["iteration"].min())
        starts = its[its["iteration"] >= first]["start_s"].tolist()
        layers.append(hv.VLines(starts).opts(color="#444", line_dash="dotted", line_width=1))
        ticks = [(2 * w + k + 0.5, f"worker {w} · {'link' if k else 'compute'}")
                 for w in range(workers) for k in (0, 1)]
        overlay = hv.Overlay(layers).opts(
            title=f"Simulated timeline of the last {int(self.last_iterations)} iterations (dotted: iteration starts)",
            legend_position="right", yticks=ticks, invert_yaxis=True, xlabel="simulated s", ylabel="",
            **{**PLOT_OPTS, "height": 90 + 56 * workers})
        return overlay, (workers, tuple(sorted(df["kind"].unique())), int(self.last_iterations))

    def _update(self) -> None:
        its = self.iteration_frame()
        self._note.visible = its.empty
        self._gantt.visible = self._series.visible = not its.empty
        if its.empty:
            self._stats.object = ""
            return
        bars = self.window_bars()
        recent = its.tail(int(self.last_iterations))
        sync = recent["sync_iteration_s"].iloc[-1]
        mean = float(recent["iteration_s"].mean())
        blocked = float(recent["blocked_s"].sum() / max(recent["iteration_s"].sum(), 1e-300))
        speed = (f" · synchronous exact <b>{sync:.3g}</b> s (<b>{sync / mean:.2f}×</b>)"
                 if pd.notna(sync) and mean > 0 else "")
        self._stats.object = (f"<span style='color:#444'>τ = <b>{int(its['tau'].iloc[-1])}</b> · iteration "
                              f"<b>{int(its['iteration'].iloc[-1])}</b> · simulated <b>{mean:.3g}</b> s per iteration"
                              f"{speed} · blocked <b class='wb-pipeline-blocked'>{blocked:.0%}</b> of it "
                              f"(last {len(recent)})</span>")
        if len(bars):
            element, shape = self._gantt_element(bars, its)
            self._gantt.show(element, shape=shape)
        series = {name: its[["iteration", name]].reset_index(drop=True) for name in SERIES
                  if its[name].notna().any()}
        self._series.show(series, shape=tuple(series))

