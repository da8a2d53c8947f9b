"""Staleness timeline: ranks x epochs per layer, ACTIVE (broadcast fresh) or STALE (peers reuse a cache).

After SANCUS (Peng et al., VLDB 2022), Fig. 14: each cell is one rank in one epoch; hovering shows the
age in epochs of the cached blocks that rank used, and the variation gap when the run reports it.

Example:
    >>> from widgets.synthetic import fabricate_run
    >>> view = StalenessView(fabricate_run(num_parts=2, epochs=4, num_layers=2), layer="0")
    >>> view.plot_data()["row"].unique().tolist()
    ['rank 0', 'rank 1']
"""

from __future__ import annotations

import holoviews as hv
import pandas as pd
import panel as pn
import param

from widgets.views import PLOT_OPTS, LivePlot, StoreView, empty_note

__all__ = ["StalenessView", "STATE_COLORS"]

STATE_COLORS = {"ACTIVE": "#2ca02c", "STALE": "#ff7f0e"}


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
        self._heat = LivePlot()
        self._ages = LivePlot()
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
        ages = df.groupby(["epoch"], as_index=False)["max_age"].max()
        if self.last_epochs:  # the cell timeline of thousands of epochs is unreadable and slow to draw
            df = df[df["epoch"] > df["epoch"].max() - int(self.last_epochs)]
        rows = sorted(df["row"].unique(), key=lambda r: [int(t) for t in r.replace("L", " ").split() if t.isdigit()])
        heat = hv.HeatMap(df, kdims=[hv.Dimension("epoch"), hv.Dimension("row", label="rank")],
                          vdims=[hv.Dimension("active"), "state", hv.Dimension("ages_text", label="ages of cached blocks"),
                                 "max_age", "gap"])
        self._heat.show(heat.opts(
            title="ACTIVE (green) / STALE (orange) per rank and epoch", cmap=[STATE_COLORS["STALE"],
                                                                              STATE_COLORS["ACTIVE"]],
            clim=(0, 1), colorbar=False, tools=["hover"], line_color="white", line_width=1,
            invert_yaxis=True, **{**PLOT_OPTS, "height": max(160, 40 + 26 * len(rows))}),
            shape=(self.layer, tuple(rows)))
        self._ages.show(hv.Area(ages, "epoch", hv.Dimension("max_age", label="epochs")).opts(
            title="Oldest cached block used, per epoch", color="#ff7f0e", alpha=0.5, tools=["hover"],
            **{**PLOT_OPTS, "height": 180}), shape="ages")
