"""Communication volume: bytes per kind and epoch, per rank pair, measured against modelled time for a
network preset, and the running total against a baseline run from the run log folder.

Bytes per epoch and kind come from the ranks' ``EpochEnd.bytes_by_kind`` (exact for every epoch); the
rank-pair heatmap and the modelled time from the per-link ``Traffic`` records, which a long run logs
summed over windows of epochs (``num_epochs`` > 1, see ``traffic_detail``): totals stay exact, and the
modelled time of a window is spread evenly over its epochs.

Example:
    >>> from widgets.synthetic import fabricate_run
    >>> view = TrafficView(fabricate_run(num_parts=2, epochs=3), runs_dir=None)
    >>> int(view.pair_frame()["bytes"].sum()) == int(view.store.frame("traffic")["bytes"].sum())
    True
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Optional

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn
import param

from widgets.base import PLOT_OPTS, StoreView, empty_note, kind_color
from widgets.live_plots import LivePlot, StreamPlot
from widgets.store import RunStore, list_runs

__all__ = ["TrafficView", "network_model", "modelled_per_epoch"]


def network_model() -> tuple[dict, Optional[Callable[..., Any]]]:
    """``(NETWORK_PRESETS, modelled_seconds)`` from ``workbench.communicate.netmodel``, or ``({}, None)``."""
    try:
        from workbench.communicate.netmodel import NETWORK_PRESETS, modelled_seconds
    except Exception:
        return {}, None
    return dict(NETWORK_PRESETS), modelled_seconds


def modelled_per_epoch(traffic: pd.DataFrame, net: Any) -> pd.Series:
    """Modelled seconds per epoch (the slowest sender) from a traffic frame: the vectorised form of
    ``workbench.communicate.netmodel.modelled_seconds`` (a window record spreads evenly over its epochs).

    Example:
        >>> from workbench.communicate.netmodel import NETWORK_PRESETS
        >>> t = pd.DataFrame({"epoch": [0, 1], "src_rank": [0, 0], "bytes": [1_250_000_000, 2_500_000_000],
        ...                   "messages": [0, 0], "num_epochs": [1, 2]})
        >>> modelled_per_epoch(t, NETWORK_PRESETS["10GbE"]).round(3).to_dict()
        {0: 1.0, 1: 1.0, 2: 1.0}
    """
    if traffic.empty:
        return pd.Series(dtype=float)
    n = traffic["num_epochs"].fillna(1).to_numpy(dtype=np.int64) if "num_epochs" in traffic else \
        np.ones(len(traffic), dtype=np.int64)
    n = np.maximum(n, 1)
    seconds = (traffic["messages"].to_numpy(dtype=float) * net.latency_s
               + traffic["bytes"].to_numpy(dtype=float) / net.bandwidth_Bps) / n
    rows = np.repeat(np.arange(len(traffic)), n)
    offsets = np.arange(len(rows)) - np.repeat(np.cumsum(n) - n, n)   # 0..n-1 within each record
    frame = pd.DataFrame({"epoch": traffic["epoch"].to_numpy(dtype=np.int64)[rows] + offsets,
                          "src": traffic["src_rank"].to_numpy(dtype=np.int64)[rows], "s": seconds[rows]})
    return frame.groupby(["epoch", "src"])["s"].sum().groupby(level="epoch").max()


class TrafficView(StoreView):
    """Where the bytes go, how long the network model says they take, and how a run compares."""

    kinds = ("traffic", "epoch")
    title = "Communication"

    network = param.Selector(default=None, objects=[], check_on_set=False, allow_None=True,
                             doc="Network preset of the modelled time.")
    baseline = param.Selector(default="", objects=[""], check_on_set=False,
                              doc="An earlier run to compare the running total with.")
    kind = param.Selector(default="all", objects=["all"], check_on_set=False,
                          doc="Traffic kind of the rank-pair heatmap.")

    def __init__(self, source: Any, *, runs_dir: str | os.PathLike | None = "runs", **params: Any):
        self.runs_dir = Path(runs_dir) if runs_dir else None
        presets, self._model = network_model()
        self._networks = presets
        self._presets = list(presets)
        params.setdefault("network", "10GbE" if "10GbE" in self._presets else (self._presets[0] if self._presets
                                                                               else None))
        self._baseline_store: Optional[RunStore] = None
        super().__init__(source, **params)

    # -- data ---------------------------------------------------------------------------------------------
    def kind_frame(self) -> pd.DataFrame:
        """Bytes per (epoch, kind), all ranks together: from ``EpochEnd.bytes_by_kind`` (exact per epoch),
        or from the per-link records of a log without it."""
        k = self.store.frame("epoch_kind")
        if not k.empty:
            return k.groupby(["epoch", "kind"], as_index=False)["bytes"].sum()
        t = self.store.frame("traffic")
        if t.empty:
            return pd.DataFrame(columns=["epoch", "kind", "bytes"])
        return t.groupby(["epoch", "kind"], as_index=False)["bytes"].sum()

    def pair_frame(self) -> pd.DataFrame:
        """Bytes per (src_rank, dst_rank) over the run (of the chosen kind)."""
        t = self.store.frame("traffic")
        if self.kind != "all":
            t = t[t["kind"] == self.kind]
        n = max(int(self.store.world_size or 0), int(t[["src_rank", "dst_rank"]].max().max()) + 1 if len(t) else 0)
        if n == 0:
            return pd.DataFrame(columns=["src_rank", "dst_rank", "bytes"])
        full = pd.MultiIndex.from_product([range(n), range(n)], names=["src_rank", "dst_rank"])
        out = t.groupby(["src_rank", "dst_rank"])["bytes"].sum().reindex(full, fill_value=0).reset_index()
        out["src_rank"] = out["src_rank"].astype(str)
        out["dst_rank"] = out["dst_rank"].astype(str)
        return out

    def time_frame(self) -> pd.DataFrame:
        """Per epoch: measured communication seconds (slowest rank) and modelled seconds for the preset."""
        e = self.store.frame("epoch")
        if e.empty:
            return pd.DataFrame(columns=["epoch", "measured_s", "modelled_s"])
        out = e.groupby("epoch", as_index=False)["comm_s"].max().rename(columns={"comm_s": "measured_s"})
        out["modelled_s"] = float("nan")
        net = self._networks.get(self.network) if self.network else None
        if net is not None:
            modelled = modelled_per_epoch(self.store.frame("traffic"), net)
            out["modelled_s"] = modelled.reindex(out["epoch"].astype(int), fill_value=0.0).to_numpy(dtype=float)
        return out

    def cumulative_frame(self) -> pd.DataFrame:
        """Running total of bytes sent per epoch for this run and the baseline (column ``run``)."""
        frames = []
        for label, store in (("this run", self.store), ("baseline", self._baseline_store)):
            if store is None:
                continue
            tot = store.epoch_totals()
            if len(tot):
                frames.append(pd.DataFrame({"epoch": tot["epoch"].astype(int),
                                            "MB": tot["cum_bytes"].astype(float) / 1e6,
                                            "run": f"{label} ({store.run_id})"}))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["epoch", "MB", "run"])

    def baseline_choices(self) -> list[str]:
        if self.runs_dir is None:
            return []
        return [r["path"] for r in list_runs(self.runs_dir) if r["run_id"] != self.store.run_id][:50]

    # -- rendering ----------------------------------------------------------------------------------------
    def _build(self) -> list:
        self.param.network.objects = self._presets or [None]
        self._net_widget = pn.widgets.Select.from_param(self.param.network, width=140, margin=(4, 10),
                                                        disabled=self._model is None)
        self._base_widget = pn.widgets.Select.from_param(self.param.baseline, width=260, margin=(4, 10))
        self._kind_widget = pn.widgets.Select.from_param(self.param.kind, width=140, margin=(4, 10))
        refresh = pn.widgets.Button(label="↻ runs", color="light", width=70, margin=(22, 4))
        refresh.on_click(lambda *_: self._refresh_baselines())
        self._note = empty_note("No traffic yet.")
        self._kinds = LivePlot()
        self._pairs = LivePlot()
        self._times = StreamPlot(self._time_curve)
        self._cum = StreamPlot(self._cum_curve)
        self._refresh_baselines()
        return [pn.Row(self._kind_widget, self._net_widget, self._base_widget, refresh), self._note,
                pn.Row(self._kinds.pane, self._pairs.pane, sizing_mode="stretch_width"),
                pn.Row(self._times.pane, self._cum.pane, sizing_mode="stretch_width")]

    def _refresh_baselines(self) -> None:
        choices = self.baseline_choices()
        options = {"(none)": ""} | {Path(c).name: c for c in choices}
        self.param.baseline.objects = list(options.values())
        if hasattr(self, "_base_widget"):
            self._base_widget.options = options

    @param.depends("baseline", watch=True)
    def _load_baseline(self) -> None:
        self._baseline_store = None
        if self.baseline:
            try:
                self._baseline_store = RunStore.from_log(self.baseline)
            except (OSError, ValueError):
                self._baseline_store = None

    def _update(self) -> None:
        t = self.store.frame("traffic")
        kinds = sorted(t["kind"].dropna().unique().tolist()) if len(t) else []
        if self.param.kind.objects != ["all"] + kinds:
            self.param.kind.objects = ["all"] + kinds
            self._kind_widget.options = ["all"] + kinds
        self._note.visible = t.empty
        kf = self.kind_frame()
        cmap = {k: kind_color(k, i) for i, k in enumerate(kinds)}
        style = "empty" if kf.empty else ("areas" if kf["epoch"].nunique() > 60 else "bars")
        if style == "empty":  # an empty stacked, colour-mapped Bars does not render
            bars = hv.Bars([], "epoch", "bytes")
        elif style == "areas":  # many epochs: stacked areas (thousands of bars are slow to draw)
            wide = kf.pivot_table(index="epoch", columns="kind", values="bytes", fill_value=0).sort_index()
            areas = [hv.Area((wide.index.values, wide[k].values), "epoch", "bytes", label=k).opts(
                color=cmap.get(k, "#999999"), line_width=0) for k in wide.columns]
            bars = hv.Area.stack(hv.Overlay(areas)).opts(legend_position="right")
        else:
            bars = hv.Bars(kf, kdims=["epoch", "kind"], vdims=[hv.Dimension("bytes")]).opts(
                stacked=True, color="kind", cmap=cmap, legend_position="right", line_color=None)
        self._kinds.show(bars.opts(title="Bytes sent per epoch, by kind", tools=["hover"], xlabel="epoch",
                                   **PLOT_OPTS), shape=(style, tuple(kinds)))
        pf = self.pair_frame()
        self._pairs.show(hv.HeatMap(pf, kdims=[hv.Dimension("dst_rank", label="to rank"),
                                                   hv.Dimension("src_rank", label="from rank")],
                                        vdims=["bytes"]).opts(
            title=f"Bytes per rank pair ({self.kind})", cmap="Oranges", colorbar=True, tools=["hover"],
            invert_yaxis=True, **PLOT_OPTS), shape=(self.kind, len(pf)))
        # the two line plots stream: only epochs every rank has finished (their maxima and sums are final)
        complete = self._complete_epochs()
        tf = self.time_frame()
        tf = tf[tf["epoch"] < complete]
        title = "Communication time per epoch"
        series = {"measured": tf[["epoch", "measured_s"]]}
        if self._model is not None and self.network:
            series[f"modelled ({self.network})"] = tf[["epoch", "modelled_s"]]
        else:
            title += " (no network model available)"
        self._times.opts = dict(title=title, legend_position="top_right", **PLOT_OPTS)
        self._times.show(series if len(tf) else {}, shape=title + str(self.network),
                         empty=lambda: hv.Curve([], "epoch", hv.Dimension("measured_s", label="seconds")).opts(
                             title=title, **PLOT_OPTS))
        cf = self.cumulative_frame()
        runs = {run: part[["epoch", "MB"]] for run, part in cf.groupby("run", sort=True)}
        runs = {run: part[part["epoch"] < complete] if run.startswith("this") else part for run, part in runs.items()}
        runs = {run: part for run, part in runs.items() if len(part)}
        title = "Bytes sent so far" + (" vs baseline" if self._baseline_store else "")
        self._cum.opts = dict(title=title, legend_position="top_left", **PLOT_OPTS)
        self._cum.show(runs, shape=(title, tuple(runs)),
                       empty=lambda: hv.Curve([], "epoch", "MB").opts(title=title, **PLOT_OPTS))

    def _complete_epochs(self) -> int:
        """Epochs whose per-epoch aggregates are final: those every rank finished (all of them once the run
        has ended)."""
        return 1 << 62 if self.store.done else self.store.epochs_done

    @staticmethod
    def _time_curve(name: str, data: pd.DataFrame) -> hv.Curve:
        measured = name == "measured"
        return hv.Curve(data, "epoch", hv.Dimension(data.columns[1], label="seconds"), label=name).opts(
            color="#1f77b4" if measured else "#d62728", line_dash="solid" if measured else "dashed", line_width=2,
            tools=["hover"])

    @staticmethod
    def _cum_curve(run: str, data: pd.DataFrame) -> hv.Curve:
        this = run.startswith("this")
        return hv.Curve(data, "epoch", hv.Dimension("MB", label="MB sent (all ranks)"), label=run).opts(
            line_width=2, tools=["hover"], color="#1f77b4" if this else "#7f7f7f",
            line_dash="solid" if this else "dashed")

    def _version(self) -> tuple:
        base = self._baseline_store.version() if self._baseline_store is not None else ()
        return super()._version() + (self.network, self.baseline, self.kind) + base
