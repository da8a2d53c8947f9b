"""Training curves: loss and accuracy per epoch and per rank, against epochs, wall time or bytes sent.

Example:
    >>> from widgets.synthetic import fabricate_run
    >>> view = CurvesView(fabricate_run(num_parts=2, epochs=4), x="cum_bytes")
    >>> sorted(view.plot_data()["rank"].unique().tolist())
    [0, 1]
"""

from __future__ import annotations

import holoviews as hv
import pandas as pd
import panel as pn
import param

from widgets.views import PLOT_OPTS, LivePlot, StoreView, empty_note, rank_color

__all__ = ["CurvesView"]

X_AXES = {"epoch": "epoch", "elapsed_s": "wall time (s)", "cum_bytes": "MB sent by the rank"}
ACC_COLUMNS = {"val_acc": "validation accuracy", "train_acc": "train accuracy", "test_acc": "test accuracy"}


class CurvesView(StoreView):
    """Loss and accuracy of every rank, live."""

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
        self._loss = LivePlot(linked_axes=False)
        self._acc = LivePlot(linked_axes=False)
        return [pn.Row(x_widget, acc_widget), self._note,
                pn.Row(self._loss.pane, self._acc.pane, sizing_mode="stretch_width")]

    def plot_data(self) -> pd.DataFrame:
        """The frame drawn: one row per (rank, epoch) with ``x`` and the chosen accuracy."""
        df = self.store.frame("epoch").copy()
        df["x"] = df[self.x] / 1e6 if self.x == "cum_bytes" else df[self.x]
        return df

    def _curves(self, df: pd.DataFrame, y: str, label: str, title: str) -> hv.Overlay:
        xlabel = X_AXES[self.x]
        curves = {}
        for rank, part in df.groupby("rank"):
            part = part[["x", y, "epoch"]].dropna(subset=[y])
            c = hv.Curve(part, kdims=[hv.Dimension("x", label=xlabel)], vdims=[hv.Dimension(y, label=label), "epoch"])
            curves[int(rank)] = c.opts(color=rank_color(rank), line_width=2, tools=["hover"])
        if not curves:
            return hv.Curve([], kdims=[hv.Dimension("x", label=xlabel)], vdims=[y]).opts(title=title, **PLOT_OPTS)
        overlay = hv.NdOverlay(curves, kdims=[hv.Dimension("rank")])
        return overlay.opts(title=title, legend_position="right", show_legend=len(curves) > 1, **PLOT_OPTS)

    def _update(self) -> None:
        df = self.plot_data()
        self._note.visible = df.empty
        shape = (self.x, self.accuracy, tuple(sorted(df["rank"].unique().tolist())) if len(df) else ())
        self._loss.show(self._curves(df, "loss", "loss", "Loss per rank"), shape)
        label = ACC_COLUMNS[self.accuracy]
        self._acc.show(self._curves(df, self.accuracy, label, f"{label.capitalize()} per rank"), shape)
