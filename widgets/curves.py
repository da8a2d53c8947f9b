"""Training curves: loss and accuracy per epoch and per rank, against epochs, wall time or bytes sent.

Example:
    >>> from widgets.synthetic import fabricate_run
    >>> view = CurvesView(fabricate_run(num_parts=2, epochs=4), x="cum_bytes")
    >>> sorted(view.plot_data()["rank"].unique().tolist())
    [0, 1]
"""

from __future__ import annotations

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn
import param

from widgets.base import PLOT_OPTS, StoreView, empty_note, rank_color
from widgets.live_plots import StreamPlot

__all__ = ["CurvesView"]

X_AXES = {"epoch": "epoch", "elapsed_s": "wall time (s)", "cum_bytes": "MB sent by the rank"}
ACC_COLUMNS = {"val_acc": "validation accuracy", "train_acc": "train accuracy", "test_acc": "test accuracy"}


class CurvesView(StoreView):
    """Loss and accuracy of every rank, live.

    Each rank's curve is a :class:`~widgets.live_plots.StreamPlot` series: a refresh sends the browser only
    the epochs that arrived since the last one.
    """

    kinds = ("epoch",)
    title = "Training curves"

    x = param.Selector(default="epoch", objects=list(X_AXES), doc="What the curves are drawn against.")
    accuracy = param.Selector(default="val_acc", objects=list(ACC_COLUMNS), doc="Which accuracy to draw.")

    def _build(self) -> list:
        x_widget = pn.widgets.RadioButtonGroup.from_param(self.param.x, options={v: k for k, v in X_AXES.items()},
                                                          color="light", margin=(4, 10))
        acc_widget = pn.widgets.Select.from_param(self.param.accuracy, options={v: k for k, v in ACC_COLUMNS.items()},
                                                  width=200, margin=(4, 10))
        self._note = empty_note("Waiting for the first epoch…")
        self._loss = StreamPlot(self._make_curve("loss"), linked_axes=False)
        self._acc = StreamPlot(self._make_curve(""), linked_axes=False)
        return [pn.Row(x_widget, acc_widget), self._note,
                pn.Row(self._loss.pane, self._acc.pane, sizing_mode="stretch_width")]

    def plot_data(self) -> pd.DataFrame:
        """The frame drawn: one row per (rank, epoch) with ``x`` and the chosen accuracy."""
        df = self.store.frame("epoch").copy()
        df["x"] = df[self.x] / 1e6 if self.x == "cum_bytes" else df[self.x]
        return df

    def series(self, df: pd.DataFrame, y: str) -> dict[int, pd.DataFrame]:
        """One frame per rank (``x``, ``y``, ``epoch``, rows without ``y`` left out), in epoch order."""
        df = df.loc[df[y].notna(), ["rank", "x", y, "epoch"]]  # sorted by rank, then epoch
        ranks = df["rank"].to_numpy()
        cuts = np.flatnonzero(ranks[1:] != ranks[:-1]) + 1
        bounds = zip(np.r_[0, cuts], np.r_[cuts, len(df)])
        cols = df[["x", y, "epoch"]]
        return {int(ranks[a]): cols.iloc[a:b].reset_index(drop=True) for a, b in bounds if b > a}

    def _make_curve(self, label: str):
        """The curve of one rank (``label``: the y axis; empty: the chosen accuracy's)."""
        def make(rank: int, data: pd.DataFrame) -> hv.Curve:
            y = data.columns[1]
            ylabel = label or ACC_COLUMNS.get(y, y)
            c = hv.Curve(data, kdims=[hv.Dimension("x", label=X_AXES[self.x])],
                         vdims=[hv.Dimension(y, label=ylabel), "epoch"], label=f"rank {rank}")
            return c.opts(color=rank_color(rank), line_width=2, tools=["hover"])
        return make

    def _show(self, plot: StreamPlot, df: pd.DataFrame, y: str, label: str, title: str, shape: tuple) -> None:
        series = self.series(df, y) if len(df) else {}
        plot.opts = dict(title=title, legend_position="right", show_legend=len(series) > 1, **PLOT_OPTS)
        plot.show(series, shape, empty=lambda: hv.Curve([], kdims=[hv.Dimension("x", label=X_AXES[self.x])],
                                                        vdims=[y]).opts(title=title, **PLOT_OPTS))

    def _update(self) -> None:
        df = self.plot_data()
        self._note.visible = df.empty
        shape = (self.x, self.accuracy, tuple(sorted(df["rank"].unique().tolist())) if len(df) else ())
        self._show(self._loss, df, "loss", "loss", "Loss per rank", shape)
        label = ACC_COLUMNS[self.accuracy]
        self._show(self._acc, df, self.accuracy, label, f"{label.capitalize()} per rank", shape)
