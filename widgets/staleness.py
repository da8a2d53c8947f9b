"""Staleness timeline: ranks x epochs per layer, ACTIVE (broadcast fresh) or STALE (peers reuse a cache).

After SANCUS (Peng et al., VLDB 2022), Fig. 14: each cell is one rank in one epoch; hovering shows the
age in epochs of the cached blocks that rank used, and the variation gap when the run reports it.

Both plots follow the chosen epoch window (``last_epochs``): their x range is the window's epochs.
The "oldest cached block" plot draws at most :data:`MAX_AGE_POINTS` points: a longer window is cut into
equal buckets of consecutive epochs and each bucket shows its **maximum** age (so peaks survive; the
plot title says the bucket width).

Example:
    >>> from widgets.synthetic import fabricate_run
    >>> view = StalenessView(fabricate_run(num_parts=2, epochs=4, num_layers=2), layer="0")
    >>> view.plot_data()["row"].unique().tolist()
    ['rank 0', 'rank 1']
"""

from __future__ import annotations

from typing import Optional

import holoviews as hv
import pandas as pd
import panel as pn
import param

from widgets.base import PLOT_OPTS, StoreView, empty_note
from widgets.live_plots import LivePlot

__all__ = ["StalenessView", "STATE_COLORS", "MAX_AGE_POINTS"]

STATE_COLORS = {"ACTIVE": "#2ca02c", "STALE": "#ff7f0e"}
#: most points of the "oldest cached block" plot; longer windows show the maximum per bucket of epochs
MAX_AGE_POINTS = 400


class StalenessView(StoreView):
    """Which rank broadcast fresh embeddings in which epoch, and how old the blocks it used were."""

    kinds = ("staleness",)
    title = "Staleness"

    layer = param.Selector(default="all", objects=["all"], check_on_set=False,
                           doc="Layer to show ('all': one row per rank and layer).")
    last_epochs = param.Selector(default=60, objects=[30, 60, 120, 250, 0],
                                 doc="How many of the latest epochs the timeline shows (0: all).")

    def _build(self) -> list:
        self._layer_widget = pn.widgets.Select.from_param(self.param.layer, width=160, margin=(4, 10))
        window = pn.widgets.Select.from_param(self.param.last_epochs, label="Epochs shown", width=160, margin=(4, 10),
                                              options={"last 30": 30, "last 60": 60, "last 120": 120,
                                                       "last 250": 250, "all": 0})
        self._note = empty_note("No staleness events yet (a run without a staleness-aware exchange "
                                "sends fresh blocks every epoch).")
        self._stats = pn.pane.HTML("", margin=(4, 10))
        # unlinked: Panel links the axes of plots with the same dimension (epoch) by default
        self._heat = LivePlot(linked_axes=False)
        self._ages = LivePlot(linked_axes=False)
        return [pn.Row(self._layer_widget, window, self._stats), self._note, self._heat.pane, self._ages.pane]

    def plot_data(self) -> pd.DataFrame:
        """Rows of the chosen layer(s), with a ``row`` label (``rank r`` or ``rank r · L l``) and ``ages_text``."""
        df = self.store.frame("staleness").copy()
        if df.empty:
            return df.assign(row=[], ages_text=[])
        if self.layer != "all":
            df = df[df["layer"] == int(self.layer)]
        many_layers = self.layer == "all" and df["layer"].nunique() > 1
        df["row"] = [f"rank {r} · L{l}" if many_layers else f"rank {r}" for r, l in zip(df["rank"], df["layer"])]
        df["ages_text"] = [", ".join(map(str, a)) for a in df["ages"]]
        df["gap"] = df["gap"].astype(float)
        return df.sort_values(["rank", "layer", "epoch"])

    def window(self, df: Optional[pd.DataFrame] = None) -> tuple[int, int]:
        """``(first, last)`` epoch shown: the latest ``last_epochs`` epochs (all when 0); ``(0, 0)`` when empty."""
        df = self.plot_data() if df is None else df
        if df.empty:
            return 0, 0
        last, first = int(df["epoch"].max()), int(df["epoch"].min())
        return (max(first, last - int(self.last_epochs) + 1) if self.last_epochs else first), last

    def ages_data(self, df: Optional[pd.DataFrame] = None) -> tuple[pd.DataFrame, int]:
        """``(frame, bucket)``: the oldest cached block used (``max_age``) per bucket of ``bucket`` epochs of
        the window (``epoch`` = the bucket's first epoch), at most :data:`MAX_AGE_POINTS` rows."""
        df = self.plot_data() if df is None else df
        if df.empty:
            return pd.DataFrame(columns=["epoch", "max_age"]), 1
        first, last = self.window(df)
        df = df[df["epoch"] >= first]
        bucket = max(1, -(-(last - first + 1) // MAX_AGE_POINTS))   # ceil
        start = first + (df["epoch"].to_numpy() - first) // bucket * bucket
        ages = df.assign(epoch=start).groupby("epoch", as_index=False)["max_age"].max()
        return ages, bucket

    def _update(self) -> None:
        layers = sorted(self.store.frame("staleness")["layer"].dropna().unique().tolist())
        options = ["all"] + [str(int(l)) for l in layers]
        if self.param.layer.objects != options:
            self.param.layer.objects = options
            self._layer_widget.options = options
        df = self.plot_data()
        self._note.visible = df.empty
        self._heat.visible = self._ages.visible = not df.empty
        if df.empty:
            self._stats.object = ""
            return
        stale = (df["state"] != "ACTIVE").mean()
        self._stats.object = (f"<span style='color:#666'>stale cells: <b>{stale:.0%}</b> &nbsp;·&nbsp; "
                              f"oldest block used: <b>{int(df['max_age'].max())}</b> epochs</span>")
        ages, bucket = self.ages_data(df)
        first, last = self.window(df)
        xlim = (first - 0.5, last + 0.5)   # the heat map's cells are one epoch wide
        df = df[df["epoch"] >= first]  # the cell timeline of thousands of epochs is unreadable and slow to draw
        rows = sorted(df["row"].unique(), key=lambda r: [int(t) for t in r.replace("L", " ").split() if t.isdigit()])
        # text columns as numpy objects: HoloViews grids a HeatMap's value columns with .values.reshape, which
        # pandas 3's pyarrow-backed str columns do not support
        df = df.astype({"state": object, "ages_text": object})
        heat = hv.HeatMap(df, kdims=[hv.Dimension("epoch"), hv.Dimension("row", label="rank")],
                          vdims=[hv.Dimension("active"), "state", hv.Dimension("ages_text", label="ages of cached blocks"),
                                 "max_age", "gap"])
        self._heat.show(heat.opts(
            title="ACTIVE (green) / STALE (orange) per rank and epoch", cmap=[STATE_COLORS["STALE"],
                                                                              STATE_COLORS["ACTIVE"]],
            clim=(0, 1), colorbar=False, tools=["hover"], line_color="white" if last - first < 150 else None,
            line_width=1, invert_yaxis=True, xlim=xlim, **{**PLOT_OPTS, "height": max(160, 40 + 26 * len(rows))}),
            shape=(self.layer, tuple(rows)))
        title = ("Oldest cached block used, per epoch" if bucket == 1 else
                 f"Oldest cached block used: maximum per {bucket} epochs")
        self._ages.show(hv.Area(ages, "epoch", hv.Dimension("max_age", label="epochs")).opts(
            title=title, color="#ff7f0e", alpha=0.5, tools=["hover"], xlim=xlim,
            **{**PLOT_OPTS, "height": 180}), shape=("ages", title))
