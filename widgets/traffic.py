"""Communication volume: bytes per kind and epoch, per rank pair, measured against modelled time for a
network preset, the running total against a baseline run from the run log folder, and what the run's epochs
would take on other networks (:mod:`widgets.whatif`), beside the baseline's.

Bytes per epoch and kind come from the ranks' ``EpochEnd.bytes_by_kind`` (exact for every epoch); the
rank-pair heatmap and the modelled time from the per-link ``Traffic`` records, which a long run logs
summed over windows of epochs (``num_epochs`` > 1, see ``traffic_detail``): totals stay exact, and a window
is modelled as that many epochs of its mean traffic. The modelled time is the transport model of
:func:`workbench.communicate.netmodel.transport_seconds` (the epoch's exchanges in order, each host's link full
duplex, the algorithms' latency rounds); a run started with ``--network`` also shows the ``modelled_comm_s`` its
summary holds, on the link it was given.

Example:
    >>> from widgets.synthetic import fabricate_run
    >>> view = TrafficView(fabricate_run(num_parts=2, epochs=3), runs_dir=None)
    >>> int(view.pair_frame()["bytes"].sum()) == int(view.store.frame("traffic")["bytes"].sum())
    True
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any, Callable, Optional

import holoviews as hv
import pandas as pd
import panel as pn
import param

from widgets.base import PLOT_OPTS, StoreView, empty_note, kind_color
from widgets.live_plots import LivePlot, StreamPlot
from widgets.store import RunStore, list_runs
from widgets.whatif import (GRID_BPS, NETWORK_PRESETS, CommCoefficients, WhatIf, crossovers, format_rate,
                            preset_label, sweep_seconds, whatif_table)

__all__ = ["TrafficView", "network_model"]


def network_model() -> tuple[dict, Optional[Callable[..., Any]]]:
    """``(NETWORK_PRESETS, transport_seconds)`` from ``workbench.communicate.netmodel``."""
    from workbench.communicate.netmodel import transport_seconds

    return dict(NETWORK_PRESETS), transport_seconds


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
        self._coefficients = CommCoefficients()            # this run's, kept up to date as traffic arrives
        self._baseline_coefficients = CommCoefficients()
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
        """Per epoch: measured communication seconds (slowest rank), modelled seconds for the preset (the
        transport model of the epoch's counted traffic) and, for a run started with ``--network``, the
        ``modelled_comm_s`` of its summary (``run_modelled_s``; nan otherwise)."""
        e = self.store.frame("epoch")
        if e.empty:
            return pd.DataFrame(columns=["epoch", "measured_s", "modelled_s", "run_modelled_s"])
        out = e.groupby("epoch", as_index=False)["comm_s"].max().rename(columns={"comm_s": "measured_s"})
        out["modelled_s"] = float("nan")
        net = self._networks.get(self.network) if self.network else None
        if net is not None:
            c = self._coefficients
            c.update(self.store.frame("traffic"), self.store.world_size or None)
            out["modelled_s"] = [c.seconds(int(k), net) for k in out["epoch"]]
        run_model = (self.store.summary or {}).get("modelled_comm_s") or []
        out["run_modelled_s"] = [float(run_model[int(k)]) if int(k) < len(run_model) else float("nan")
                                 for k in out["epoch"]]
        return out

    def run_network(self) -> Optional[str]:
        """The ``--network`` spec the run was started with (from its summary), or None."""
        net = (self.store.summary or {}).get("network")
        if not net:
            return None
        return str(net.get("spec") or net.get("name")) if isinstance(net, dict) else str(net)

    def whatif_runs(self) -> list[WhatIf]:
        """This run and the baseline (when one is chosen), as :class:`~widgets.whatif.WhatIf` over their
        complete epochs."""
        runs = [WhatIf(self.store, coefficients=self._coefficients)]
        if self._baseline_store is not None:
            runs.append(WhatIf(self._baseline_store, coefficients=self._baseline_coefficients))
        return [r for r in runs if len(r)]

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
        self._whatif = LivePlot()
        self._whatif_table = pn.pane.HTML("", sizing_mode="stretch_width", margin=(4, 10),
                                          stylesheets=[_TABLE_CSS])
        self._refresh_baselines()
        return [pn.Row(self._kind_widget, self._net_widget, self._base_widget, refresh), self._note,
                pn.Row(self._kinds.pane, self._pairs.pane, sizing_mode="stretch_width"),
                pn.Row(self._times.pane, self._cum.pane, sizing_mode="stretch_width"),
                pn.Row(self._whatif.pane, self._whatif_table, sizing_mode="stretch_width")]

    def _refresh_baselines(self) -> None:
        choices = self.baseline_choices()
        options = {"(none)": ""} | {Path(c).name: c for c in choices}
        self.param.baseline.objects = list(options.values())
        if hasattr(self, "_base_widget"):
            self._base_widget.options = options

    @param.depends("baseline", watch=True)
    def _load_baseline(self) -> None:
        self._baseline_store = None
        self._baseline_coefficients = CommCoefficients()
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
        run_net = self.run_network()
        if run_net is not None and tf["run_modelled_s"].notna().any():   # the run's own --network
            series[f"modelled (--network {run_net})"] = tf[["epoch", "run_modelled_s"]]
        self._times.opts = dict(title=title, legend_position="top_right", **PLOT_OPTS)
        self._times.show(series if len(tf) else {}, shape=(title, str(self.network), tuple(series)),
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
        self._draw_whatif()

    def _draw_whatif(self) -> None:
        """Modelled epoch time against link bandwidth, this run and the baseline, the presets marked, the
        crossovers drawn; the table of the presets beside it."""
        runs = self.whatif_runs()
        title = "What-if: modelled epoch time by network"
        if not runs:
            self._whatif.show(hv.Curve([], "Gbit/s", "ms").opts(title=title, **PLOT_OPTS), shape="empty")
            self._whatif_table.object = ("<p class='wb-whatif-empty' style='color:#666'><i>The what-if needs an "
                                         "epoch every rank finished.</i></p>")
            return
        gbit = GRID_BPS * 8 / 1e9
        layers, colors = [], ["#1f77b4", "#7f7f7f"]
        for i, run in enumerate(runs):
            color = colors[i % 2]
            label = ("this run: " if i == 0 else "baseline: ") + run.label
            layers.append(hv.Curve((gbit, sweep_seconds(run) * 1e3), hv.Dimension("Gbit/s", label="link bandwidth"),
                                   hv.Dimension("ms", label="modelled epoch (ms)"), label=label).opts(
                color=color, line_width=2, line_dash="solid" if i == 0 else "dashed", tools=["hover"]))
            pts = [(net.bandwidth_Bps * 8 / 1e9, run.epoch_seconds(net) * 1e3, preset_label(name))
                   for name, net in NETWORK_PRESETS.items()]
            layers.append(hv.Scatter(pts, "Gbit/s", ["ms", "network"]).opts(color=color, size=7, tools=["hover"]))
        own = runs[0].measured()
        if own is not None:
            x = own["network"].bandwidth_Bps * 8 / 1e9
            layers.append(hv.Scatter([(x, own["measured_s"] * 1e3, f"measured on --network {own['spec']}")],
                                     "Gbit/s", ["ms", "network"], label="measured (this run's link)").opts(
                color="#d62728", marker="diamond", size=11, tools=["hover"]))
        if len(runs) == 2:
            for x in crossovers(*runs):
                layers.append(hv.VLine(x * 8 / 1e9).opts(color="#2ca02c", line_dash="dotted", line_width=2))
        ticks = [(n.bandwidth_Bps * 8 / 1e9, preset_label(k)) for k, n in NETWORK_PRESETS.items()]
        overlay = hv.Overlay(layers).opts(title=title, logx=True, logy=True, xticks=[(0.1, "100M"), *ticks],
                                          legend_position="top_right", **PLOT_OPTS)
        self._whatif.show(overlay, shape=("whatif", tuple(r.run_id for r in runs), own is not None,
                                          len(layers)))
        self._whatif_table.object = whatif_table(runs) + (
            f"<p class='wb-whatif-own'>This run's link (<code>--network {html.escape(own['spec'])}</code>, "
            f"{format_rate(own['network'].bandwidth_Bps)}): measured epoch {own['measured_s'] * 1e3:.3g} ms, "
            f"modelled {own['modelled_s'] * 1e3:.3g} ms.</p>" if own is not None else "")

    def _complete_epochs(self) -> int:
        """Epochs whose per-epoch aggregates are final: those every rank finished (all of them once the run
        has ended)."""
        return 1 << 62 if self.store.done else self.store.epochs_done

    @staticmethod
    def _time_curve(name: str, data: pd.DataFrame) -> hv.Curve:
        # measured: solid blue; the preset's model: dashed red; the run's own --network model: dash-dot purple
        color, dash = {"measured": ("#1f77b4", "solid")}.get(
            name, ("#9467bd", "dashdot") if name.startswith("modelled (--network") else ("#d62728", "dashed"))
        return hv.Curve(data, "epoch", hv.Dimension(data.columns[1], label="seconds"), label=name).opts(
            color=color, line_dash=dash, line_width=2, tools=["hover"])

    @staticmethod
    def _cum_curve(run: str, data: pd.DataFrame) -> hv.Curve:
        this = run.startswith("this")
        return hv.Curve(data, "epoch", hv.Dimension("MB", label="MB sent (all ranks)"), label=run).opts(
            line_width=2, tools=["hover"], color="#1f77b4" if this else "#7f7f7f",
            line_dash="solid" if this else "dashed")

    def _version(self) -> tuple:
        base = self._baseline_store.version() if self._baseline_store is not None else ()
        return super()._version() + (self.network, self.baseline, self.kind) + base + (self.store.status,)


_TABLE_CSS = """
table.wb-whatif { border-collapse: collapse; font-size: 90%; margin-top: 30px; }
table.wb-whatif th, table.wb-whatif td { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left; }
"""
