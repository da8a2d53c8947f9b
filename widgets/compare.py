"""Compare runs: a table of headline figures and overlaid curves for runs chosen from the run log.

Example:
    >>> from widgets.synthetic import fabricate_run
    >>> from widgets.store import RunStore
    >>> a = RunStore(events=fabricate_run(run_id="a", epochs=3))
    >>> b = RunStore(events=fabricate_run(run_id="b", epochs=3, byte_scale=2.0))
    >>> view = CompareView(lambda: {"a": a, "b": b}, selected=["a", "b"])
    >>> view.table()["run_id"].tolist()
    ['a', 'b']
"""

from __future__ import annotations

import time
from typing import Any, Callable

import holoviews as hv
import pandas as pd
import panel as pn

from widgets.base import PLOT_OPTS, RANK_COLORS, StoreView, empty_note
from widgets.live_plots import LivePlot
from widgets.offline import Viewer
from widgets.store import RunStore

__all__ = ["CompareView"]

MIN_REDRAW_S = StoreView.min_redraw_s  # least seconds between two redraws while compared runs go


class CompareView(Viewer):
    """Headline figures of every run and loss / bytes curves of the chosen ones.

    Args:
        stores: a function returning ``{run_id: RunStore}`` (newest first), e.g. ``RunRegistry.all_stores``.
        selected: run ids drawn at first.
    """

    def __init__(self, stores: Callable[[], dict[str, RunStore]], selected: list[str] | None = None, **params: Any):
        super().__init__(**params)
        self._stores = stores
        self.choose = pn.widgets.MultiChoice(label="Runs to compare", options=[], value=list(selected or []),
                                             sizing_mode="stretch_width", max_items=8)
        self._table = pn.pane.DataFrame(pd.DataFrame(), index=False, sizing_mode="stretch_width", max_rows=30,
                                        float_format="{:.4g}".format, classes=["wb-runs"])
        self._loss = LivePlot()
        self._bytes = LivePlot()
        self._next_ok = 0.0
        self._note = empty_note("Choose runs above to overlay their curves.")
        self._last: Any = None
        self.choose.param.watch(lambda *_: self.refresh(force=True), "value")
        self.refresh(force=True)

    def table(self) -> pd.DataFrame:
        rows = [s.headline() for s in self._stores().values()]
        cols = ["run_id", "recipe", "status", "world_size", "epochs", "final_loss", "best_val_acc", "total_mb_sent",
                "error"]
        return pd.DataFrame(rows, columns=cols)

    def refresh(self, force: bool = False) -> bool:
        stores = self._stores()
        ver = tuple((k, s.version()) for k, s in stores.items())
        if not force and (ver == self._last or time.monotonic() < self._next_ok):
            return False
        self._last = ver
        self._next_ok = time.monotonic() + MIN_REDRAW_S
        ids = list(stores)
        if self.choose.options != ids:
            self.choose.options = ids
            if not self.choose.value:
                self.choose.value = ids[:2]
                return True  # the value watcher re-rendered
        self._table.object = self.table()
        chosen = [r for r in self.choose.value if r in stores]
        self._note.visible = not chosen
        loss, sent = {}, {}
        for i, run_id in enumerate(chosen):
            tot = stores[run_id].epoch_totals()
            color = RANK_COLORS[i % len(RANK_COLORS)]
            loss[run_id] = hv.Curve(tot, "epoch", "loss").opts(color=color, line_width=2, tools=["hover"])
            mb = tot.assign(MB=tot["cum_bytes"].astype(float) / 1e6)
            sent[run_id] = hv.Curve(mb, "epoch", hv.Dimension("MB", label="MB sent (all ranks)")).opts(
                color=color, line_width=2, tools=["hover"])
        self._loss.show((hv.NdOverlay(loss, kdims=["run"]) if loss else _empty("loss")).opts(
            title="Mean loss per epoch", legend_position="top_right", **PLOT_OPTS), shape=tuple(chosen))
        self._bytes.show((hv.NdOverlay(sent, kdims=["run"]) if sent else _empty("MB")).opts(
            title="Bytes sent so far", legend_position="top_left", **PLOT_OPTS), shape=tuple(chosen))
        return True

    def __panel__(self) -> pn.viewable.Viewable:
        return pn.Column(self._table, self.choose, self._note, pn.Row(self._loss.pane, self._bytes.pane, sizing_mode="stretch_width"),
                         sizing_mode="stretch_width")


def _empty(y: str) -> hv.Overlay:
    return hv.Overlay([hv.Curve([], "epoch", y)])
