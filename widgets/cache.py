"""Feature cache: hit rate over time per rank, bytes the cache avoided, and policies compared across runs.

Reads the run's :class:`~workbench.events.CacheStats` (one per rank and epoch, emitted by
:class:`workbench.cache.CachedFeatureStore`). The comparison is fed from several stores (the dashboard
passes every run it knows): one row per run with its policy, ratio and overall hit rate, and a bar chart of
hit rate by policy and ratio. :func:`hit_rate_plot` draws :func:`workbench.cache.hit_rate_curve`'s frame
(no run needed).

Example:
    >>> from widgets.synthetic import fabricate_run
    >>> from widgets.store import RunStore
    >>> a = RunStore(events=fabricate_run(run_id="a", epochs=3, cache="degree"))
    >>> b = RunStore(events=fabricate_run(run_id="b", epochs=3, cache="random"))
    >>> view = CacheView(a, stores=lambda: {"a": a, "b": b})
    >>> view.comparison_frame()[["run_id", "policy", "ratio"]].values.tolist()
    [['a', 'degree', 0.1], ['b', 'random', 0.1]]
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import holoviews as hv
import pandas as pd
import panel as pn

from widgets.base import PLOT_OPTS, RANK_COLORS, StoreView, empty_note, rank_color
from widgets.live_plots import LivePlot
from widgets.store import RunStore

__all__ = ["CacheView", "cache_summary", "hit_rate_plot", "POLICY_COLORS"]

POLICY_COLORS = {"none": "#7f7f7f", "random": "#ff7f0e", "degree": "#1f77b4", "inclusion": "#2ca02c",
                 "lru": "#9467bd", "fifo": "#8c564b", "oracle": "#bcbd22"}


def _policy_color(policy: str, i: int = 0) -> str:
    return POLICY_COLORS.get(policy, RANK_COLORS[(i + 5) % len(RANK_COLORS)])


def cache_summary(store: RunStore) -> Optional[dict]:
    """One run's cache figures over all ranks and epochs (None when it has no cache events)."""
    c = store.frame("cache")
    if c.empty:
        return None
    hits, remote = int(c["hits"].sum()), int(c["hits"].sum() + c["misses"].sum())
    fill = c.groupby("rank")["fill_bytes"].max().sum()
    policy = next((p for p in c["policy"] if p), "?")
    ratio = c["ratio"].dropna()
    return {"run_id": store.run_id, "policy": policy, "ratio": float(ratio.iloc[-1]) if len(ratio) else float("nan"),
            "hit_rate": hits / remote if remote else float("nan"), "epochs": int(c["epoch"].nunique()),
            "MB_saved": float(c["bytes_saved"].sum()) / 1e6, "MB_refresh": float(c["refresh_bytes"].sum()) / 1e6,
            "MB_fill": float(fill) / 1e6}


def hit_rate_plot(curve: pd.DataFrame, title: str = "Hit rate against cache ratio") -> hv.Overlay:
    """Hit rate against ratio, one line per policy, from :func:`workbench.cache.hit_rate_curve`'s frame."""
    items = []
    for i, (p, part) in enumerate(curve.groupby("policy", sort=False)):
        part = part.sort_values("ratio")
        color = _policy_color(p, i)
        items.append(hv.Curve(part, "ratio", hv.Dimension("hit_rate", label="hit rate", range=(0, 1)), label=p).opts(
            color=color, line_width=2, tools=["hover"]))
        items.append(hv.Scatter(part, "ratio", hv.Dimension("hit_rate", label="hit rate"), label=p).opts(
            color=color, size=6))
    return hv.Overlay(items or [hv.Curve([], "ratio", "hit_rate")]).opts(
        title=title, legend_position="bottom_right", **PLOT_OPTS)


class CacheView(StoreView):
    """Hit rate per rank and epoch, bytes avoided and refetched, and a comparison of policies over runs.

    Args:
        source: the run (store, handle, run folder or events).
        stores: a function returning ``{run_id: RunStore}`` of runs to compare (e.g.
            ``RunRegistry.all_stores``); by default only this run.
    """

    kinds = ("cache",)
    title = "Cache"

    def __init__(self, source: Any, *, stores: Optional[Callable[[], dict[str, RunStore]]] = None, **params: Any):
        self._stores = stores
        super().__init__(source, **params)

    def _build(self) -> list:
        self._note = empty_note("No cache events yet (a run with a feature cache reports one per rank and epoch).")
        self._stats = pn.pane.HTML("", margin=(4, 10), css_classes=["wb-cache-stats"])
        self._hits = LivePlot()
        self._bytes = LivePlot()
        self._compare = LivePlot()
        self._table = pn.pane.DataFrame(pd.DataFrame(), index=False, sizing_mode="stretch_width", max_rows=20,
                                        float_format="{:.4g}".format, classes=["wb-cache-runs"])
        return [self._stats, self._note, pn.Row(self._hits.pane, self._bytes.pane, sizing_mode="stretch_width"),
                pn.Row(self._compare.pane, self._table, sizing_mode="stretch_width")]

    # -- data ---------------------------------------------------------------------------------------------
    def bytes_frame(self) -> pd.DataFrame:
        """Per epoch, all ranks: MB the cache avoided and MB its refreshes moved (long form, column ``what``)."""
        c = self.store.frame("cache")
        if c.empty:
            return pd.DataFrame(columns=["epoch", "what", "MB"])
        g = c.groupby("epoch", as_index=False)[["bytes_saved", "refresh_bytes"]].sum()
        long = g.melt(id_vars="epoch", value_vars=["bytes_saved", "refresh_bytes"], var_name="what", value_name="MB")
        long["MB"] = long["MB"].astype(float) / 1e6
        long["what"] = long["what"].map({"bytes_saved": "avoided", "refresh_bytes": "refresh"})
        return long

    def comparison_frame(self) -> pd.DataFrame:
        """One row per run with cache events: policy, ratio, overall hit rate, MB avoided, refreshed, filled."""
        stores = self._stores() if self._stores is not None else {self.store.run_id: self.store}
        rows = [s for s in (cache_summary(st) for st in stores.values()) if s is not None]
        cols = ["run_id", "policy", "ratio", "hit_rate", "epochs", "MB_saved", "MB_refresh", "MB_fill"]
        return pd.DataFrame(rows, columns=cols)

    # -- rendering ----------------------------------------------------------------------------------------
    def _update(self) -> None:
        c = self.store.frame("cache")
        self._note.visible = c.empty
        summary = cache_summary(self.store)
        self._stats.object = "" if summary is None else (
            f"<span style='color:#444'>policy <b class='wb-cache-policy'>{summary['policy']}</b> · ratio "
            f"<b>{summary['ratio']:.3g}</b> · hit rate <b>{summary['hit_rate']:.1%}</b> · avoided "
            f"<b>{summary['MB_saved']:.3g} MB</b> · fill {summary['MB_fill']:.3g} MB · refresh "
            f"{summary['MB_refresh']:.3g} MB</span>")
        curves = {}
        for rank, part in c.groupby("rank"):
            curves[int(rank)] = hv.Curve(part, "epoch", [hv.Dimension("hit_rate", label="hit rate", range=(0, 1)),
                                                        "hits", "misses"]).opts(
                color=rank_color(rank), line_width=2, tools=["hover"])
        hits = (hv.NdOverlay(curves, kdims=["rank"]) if curves
                else hv.Overlay([hv.Curve([], "epoch", "hit_rate")]))
        self._hits.show(hits.opts(title="Hit rate per rank and epoch", legend_position="right",
                                  show_legend=len(curves) > 1, **PLOT_OPTS), shape=tuple(curves))
        bf = self.bytes_frame()
        bars = (hv.Bars(bf, kdims=["epoch", "what"], vdims=[hv.Dimension("MB", label="MB (all ranks)")]).opts(
            stacked=True, color="what", cmap={"avoided": "#54a24b", "refresh": "#e45756"},
            legend_position="right", line_color=None, xrotation=0) if len(bf) else hv.Bars([], "epoch", "MB"))
        self._bytes.show(bars.opts(title="Bytes the cache avoided, and refresh bytes, per epoch", tools=["hover"],
                                   **PLOT_OPTS), shape=("bytes", len(bf) > 0))
        cmp = self.comparison_frame()
        self._table.object = cmp
        if len(cmp):
            cmp = cmp.assign(ratio=cmp["ratio"].map(lambda r: f"{r:.3g}"))
            policies = sorted(cmp["policy"].unique())
            by = cmp.groupby(["ratio", "policy"], as_index=False)["hit_rate"].mean()
            chart = hv.Bars(by, kdims=["ratio", "policy"], vdims=[hv.Dimension("hit_rate", label="hit rate",
                                                                               range=(0, 1))]).opts(
                color="policy", cmap={p: _policy_color(p, i) for i, p in enumerate(policies)}, line_color=None,
                legend_position="right")
            shape = ("cmp", tuple(policies), tuple(by["ratio"].unique()))
        else:
            chart, shape = hv.Bars([], "ratio", "hit_rate"), ("cmp",)
        self._compare.show(chart.opts(title="Hit rate by policy and ratio (runs)", tools=["hover"], **PLOT_OPTS),
                           shape=shape)

    def _version(self) -> tuple:
        stores = self._stores() if self._stores is not None else {}
        return super()._version() + tuple((k, s.version("cache")) for k, s in stores.items())
