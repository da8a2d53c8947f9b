"""Small figures for the notebooks' result tables: a metric against a parameter, one line per method, with the
paper's numbers marked.

The notebooks that compare partitioners, byte counts or pipeline variants compute pandas tables; these
functions draw the same tables (HoloViews, bokeh backend, resources inline through :mod:`widgets`) so the
trend is visible beside the numbers. Every function takes a tidy frame (one row per measurement) and returns
a HoloViews object that renders in a notebook and in a :class:`panel` layout alike.

* :func:`line_plot` - ``y`` against ``x``, one line per ``by``, optional log axes and reference marks;
* :func:`bar_plot` - ``y`` per category ``x``, with the same marks;
* :func:`paper_mark` - a labelled horizontal line (a number a paper reports);
* :func:`volume_vs_parts` - Demirci et al. (HP/GP/RP): total and maximum send volume against P, one row per graph;
* :func:`normalised_vs_parts` - the same normalised to random partitioning, the paper's Table 2 geo-means
  marked at their P;
* :func:`degree_ccdf`, :func:`split_bars` - the in-degree distribution (log-log CCDF) and the split sizes of
  graphs, for "what did I load";
* :func:`training_curves` - loss and accuracies per epoch of a run summary.

Example:
    >>> import pandas as pd
    >>> df = pd.DataFrame({"P": [4, 8, 4, 8], "method": ["a", "a", "b", "b"], "rows": [10, 20, 5, 9]})
    >>> fig = line_plot(df, "P", "rows", by="method", logx=True, marks={"paper": 12})
    >>> sorted({type(e).__name__ for e in fig})
    ['Curve', 'HLine', 'Text']
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import holoviews as hv
import numpy as np
import pandas as pd

from widgets.base import PLOT_OPTS, RANK_COLORS

__all__ = ["line_plot", "bar_plot", "paper_mark", "volume_vs_parts", "normalised_vs_parts", "degree_ccdf",
           "split_bars", "training_curves", "METHOD_COLORS"]

#: colours of the partitioners and pipeline variants the notebooks compare (others cycle through RANK_COLORS)
METHOD_COLORS = {"random": "#bab0ac", "RP": "#bab0ac", "metis": "#4c78a8", "GP": "#4c78a8", "hypergraph": "#f58518",
                 "HP": "#f58518", "stochastic-hypergraph": "#e45756", "g3": "#f58518", "block": "#79706e",
                 "sequential": "#bab0ac", "inter": "#4c78a8", "intra": "#54a24b", "multi-level": "#f58518"}
#: the marks of a paper's numbers
PAPER_COLOR = "#d62728"


def _log_ticks(values: Any, pad: float = 1.15) -> dict:
    """Ticks at the measured values of a log x axis, printed as numbers (Bokeh's log formatter would print every
    tick as the nearest power of ten: 4 and 8 both as 10^1), and the range padded by the factor ``pad`` so the
    first and last ticks show."""
    ticks = sorted({float(v) for v in values if float(v) > 0})
    if not ticks:
        return {}
    out = dict(xlim=(ticks[0] / pad, ticks[-1] * pad))
    return dict(out, xticks=ticks, xformatter="%g") if len(ticks) <= 12 else out


def _ylim_with(values: Any, marks: Optional[Mapping[str, float]], *, logy: bool = False, zero: bool = False) -> dict:
    """A y range holding the data and the marks (HoloViews leaves reference lines out of the range, so a paper's
    number far above the measured ones would not show)."""
    if not marks:
        return {}
    v = [*np.asarray(values, float).tolist(), *map(float, marks.values())]
    v = [a for a in v if np.isfinite(a) and (a > 0 or not logy)]
    if not v:
        return {}
    lo, hi = (0.0 if zero else min(v)), max(v)
    if logy:
        return dict(ylim=(lo / 1.3, hi * 1.3))
    pad = 0.08 * (hi - lo or abs(hi) or 1.0)
    return dict(ylim=(lo if zero else lo - pad, hi + pad))


def _color(name: Any, i: int) -> str:
    return METHOD_COLORS.get(str(name), RANK_COLORS[i % len(RANK_COLORS)])


def paper_mark(value: float, label: str, *, x: Any = None) -> hv.Overlay:
    """A dashed horizontal line at ``value`` labelled ``label`` (from ``x``, a number or a category; None: no text).

    Example:
        >>> len(paper_mark(11.66, "paper: up to 11.66x", x=1.0))
        2
    """
    line = hv.HLine(float(value)).opts(color=PAPER_COLOR, line_dash="dashed", line_width=1.5)
    if x is None:
        return hv.Overlay([line])
    text = hv.Text(x, float(value), f" {label}", halign="left" if not isinstance(x, str) else "center",
                   valign="bottom").opts(
        text_color=PAPER_COLOR, text_font_size="9pt")
    return hv.Overlay([line, text])


def line_plot(frame: pd.DataFrame, x: str, y: str, *, by: Optional[str] = None, title: str = "",
              logx: bool = False, logy: bool = False, xlabel: Optional[str] = None, ylabel: Optional[str] = None,
              marks: Optional[Mapping[str, float]] = None, points: bool = False, **opts: Any) -> hv.Overlay:
    """``y`` against ``x`` from a tidy frame, one line per value of ``by``.

    Args:
        frame: one row per measurement.
        x, y: column names.
        by: the column whose values get one line each (None: one line).
        title: the figure's title.
        logx, logy: log axes (the x ticks are the measured values).
        xlabel, ylabel: axis labels (default: the column names).
        marks: ``{label: value}`` horizontal reference lines (a paper's numbers), drawn dashed in red.
        points: also draw the points (a series of one point always gets its point). Every glyph costs
            rendering time (about 20-30 ms in a notebook), so lines alone by default.
        **opts: more HoloViews options (``height``, ``width``, ``legend_position``, ...).

    Example:
        >>> df = pd.DataFrame({"L": [2, 3, 4], "ratio": [1.5, 2.5, 4.0]})
        >>> len(line_plot(df, "L", "ratio")), len(line_plot(df, "L", "ratio", points=True))
        (1, 2)
    """
    xdim, ydim = hv.Dimension(x, label=xlabel or x), hv.Dimension(y, label=ylabel or y)
    groups = [(None, frame)] if by is None else list(frame.groupby(by, sort=False))
    items = []
    for i, (name, part) in enumerate(groups):
        part = part.sort_values(x)
        label = "" if name is None else str(name)
        color = _color(name, i)
        items.append(hv.Curve(part, xdim, [ydim, *([by] if by else [])], label=label).opts(
            color=color, line_width=2, tools=["hover"]))
        if len(part) == 1 or points:
            items.append(hv.Scatter(part, xdim, ydim, label=label).opts(color=color, size=6))
    xs = np.asarray(frame[x], float) if len(frame) else np.array([1.0])
    for label, value in (marks or {}).items():
        items.extend(paper_mark(value, label, x=float(xs.min())))
    base = dict(PLOT_OPTS, title=title, logx=logx, logy=logy, legend_position="right", show_grid=True,
                **_ylim_with(frame[y] if len(frame) else [], marks, logy=logy))
    if logx:
        base.update(_log_ticks(frame[x]))
    base.update(opts)
    return hv.Overlay(items or [hv.Curve([], xdim, ydim)]).opts(**base)


def bar_plot(frame: pd.DataFrame, x: str, y: str, *, title: str = "", ylabel: Optional[str] = None,
             marks: Optional[Mapping[str, float]] = None, **opts: Any) -> hv.Overlay:
    """``y`` per category ``x`` (bars coloured by category), with ``marks`` as in :func:`line_plot`.

    Example:
        >>> df = pd.DataFrame({"variant": ["sequential", "multi-level"], "speed-up": [1.0, 1.4]})
        >>> len(bar_plot(df, "variant", "speed-up", marks={"paper: 11.66x": 11.66}))
        3
    """
    ydim = hv.Dimension(y, label=ylabel or y)
    colors = [_color(v, i) for i, v in enumerate(frame[x])]
    items = [hv.Bars(frame, x, ydim).opts(color=x, cmap=colors or ["#4c78a8"], tools=["hover"], show_legend=False)]
    first = frame[x].iloc[0] if len(frame) else None
    for label, value in (marks or {}).items():
        items.extend(paper_mark(value, label, x=first))
    base = dict(PLOT_OPTS, title=title, show_grid=True, **_ylim_with(frame[y], marks, zero=True))
    base.update(opts)
    return hv.Overlay(items).opts(**base)


def volume_vs_parts(df: pd.DataFrame, metrics: Sequence[str] = ("comm_volume_rows", "max_send_volume_rows"),
                    cols: int = 2) -> hv.Layout:
    """One panel per graph: each metric (rows per SpMM) against P on log-log axes, one colour per method, the
    first metric solid, the second dashed (then dotted, dash-dot).

    ``df`` is :func:`workbench.partition.compare.compare_methods`'s frame (columns graph, P, method, metrics).

    Example:
        >>> df = pd.DataFrame({"graph": ["g"] * 4, "P": [4, 4, 8, 8], "method": ["random", "metis"] * 2,
        ...                    "comm_volume_rows": [40, 10, 60, 20], "max_send_volume_rows": [12, 4, 9, 3]})
        >>> len(volume_vs_parts(df)), len(volume_vs_parts(df)[0])   # one graph: 2 methods x 2 metrics
        (1, 4)
    """
    names = {"comm_volume_rows": "total", "max_send_volume_rows": "max", "total_messages": "messages",
             "max_part_messages": "max messages"}
    dashes = ["solid", "dashed", "dotted", "dashdot"]
    figs = []
    for gname, g in df.groupby("graph", sort=False):
        items = []
        for i, (method, part) in enumerate(g.groupby("method", sort=False)):
            part = part.sort_values("P")
            for j, m in enumerate(metrics):
                label = f"{_SHORT.get(method, method)} {names.get(m, m)}"
                items.append(hv.Curve(part, "P", [hv.Dimension(m, label="rows per SpMM"), "method"], label=label).opts(
                    color=_color(method, i), line_dash=dashes[j % len(dashes)], line_width=2, tools=["hover"]))
        figs.append(hv.Overlay(items).opts(**dict(
            PLOT_OPTS, title=f"{gname}: send volume per SpMM", logx=True, logy=True, height=240,
            legend_position="right", show_grid=True, **_log_ticks(df["P"]))))
    return hv.Layout(figs).cols(cols)


_SHORT = {"random": "RP", "metis": "GP", "hypergraph": "HP", "stochastic-hypergraph": "SHP"}


def normalised_vs_parts(df: pd.DataFrame, paper: Optional[Mapping[str, Sequence[float]]] = None, paper_P: int = 512,
                        metrics: Sequence[str] = ("comm_volume_rows", "max_send_volume_rows"),
                        keys: Sequence[str] = ("comm_volume_rows", "max_send_volume_rows", "total_messages",
                                               "max_part_messages")) -> hv.Layout:
    """Each metric normalised to random partitioning (Table 2's layout) against P: the geo-mean over graphs
    per method (thick) and each graph (thin), with the paper's geo-means marked as stars at ``paper_P``.

    Args:
        df: :func:`~workbench.partition.compare.compare_methods`'s frame (must include method ``random``).
        paper: ``{method: values in keys order}`` (e.g. :data:`workbench.partition.volume.PAPER_TABLE2`).
        paper_P: the P the paper's numbers were measured at (drawn on the same log-x axis).
        metrics: the metrics to draw, one panel each.
        keys: the order of ``paper``'s values.

    Example:
        >>> df = pd.DataFrame({"graph": ["g"] * 4, "P": [4, 4, 8, 8], "method": ["random", "hypergraph"] * 2,
        ...                    "comm_volume_rows": [40, 10, 60, 20], "max_send_volume_rows": [12, 4, 9, 3]})
        >>> fig = normalised_vs_parts(df, paper={"hypergraph": (0.13, 0.21)}, keys=("comm_volume_rows",
        ...                                                                          "max_send_volume_rows"))
        >>> len(fig)
        2
    """
    base = df[df.method == "random"].set_index(["graph", "P"])
    n = df[df.method != "random"].copy()
    for m in metrics:
        n[m] = n[m].to_numpy() / base[m].reindex(pd.MultiIndex.from_frame(n[["graph", "P"]])).to_numpy()
    figs = []
    for m in metrics:
        items = []
        for i, (method, part) in enumerate(n.groupby("method", sort=False)):
            color, short = _color(method, i), _SHORT.get(method, method)
            for gname, g in part.groupby("graph", sort=False):
                g = g.sort_values("P")
                items.append(hv.Curve(g, "P", [hv.Dimension(m, label="÷ random"), "graph"]).opts(
                    color=color, alpha=0.35, line_width=1, tools=["hover"]))
            geo = part[part[m] > 0].groupby("P")[m].apply(lambda v: float(np.exp(np.log(v).mean()))).reset_index()
            items.append(hv.Curve(geo, "P", hv.Dimension(m, label="÷ random"), label=f"{short} geo-mean").opts(
                color=color, line_width=3, tools=["hover"]))
            if paper and method in paper and m in keys:
                value = paper[method][list(keys).index(m)]
                items.append(hv.Scatter([(paper_P, value)], "P", hv.Dimension(m, label="÷ random"),
                                        label=f"{short} paper (P={paper_P})").opts(
                    color=color, marker="star", size=16, line_color=PAPER_COLOR, tools=["hover"]))
        items.append(hv.HLine(1.0).opts(color=METHOD_COLORS["random"], line_dash="dotted"))
        xs = [*map(float, df["P"]), *([float(paper_P)] if paper else [])]
        figs.append(hv.Overlay(items).opts(**dict(
            PLOT_OPTS, title=f"{m.replace('_rows', '').replace('_', ' ')} ÷ random (thin: each graph)", logx=True,
            ylim=(0, None), legend_position="right", height=280, show_grid=True, **_log_ticks(xs, pad=1.5))))
    return hv.Layout(figs).cols(len(metrics))


def degree_ccdf(graphs: Mapping[str, Any], *, direction: str = "in") -> hv.Overlay:
    """The fraction of vertices with degree ≥ d against d (log-log), one line per graph.

    Args:
        graphs: ``{name: Graph}`` (anything with ``in_degrees()`` / ``out_degrees()``, or a degree array).
        direction: ``in`` or ``out``.

    Example:
        >>> fig = degree_ccdf({"star": np.array([3, 1, 1, 1]), "ring": np.array([2, 2, 2, 2])})
        >>> len(fig)   # the ring is one point: a curve and its point
        3
    """
    rows = []
    for name, g in graphs.items():
        deg = np.asarray(g if not hasattr(g, "in_degrees") else
                         (g.in_degrees() if direction == "in" else g.out_degrees()))
        deg = np.sort(deg[deg > 0])
        if not deg.size:
            continue
        values, first = np.unique(deg, return_index=True)
        rows.append(pd.DataFrame({"graph": name, "degree": values, "fraction": 1.0 - first / deg.size}))
    frame = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame({"graph": [], "degree": [], "fraction": []})
    return line_plot(frame, "degree", "fraction", by="graph", logx=True, logy=True, xlabel=f"{direction}-degree d",
                    ylabel="fraction of vertices with degree ≥ d", title=f"{direction}-degree distribution (CCDF)",
                    legend_position="bottom_left")


def split_bars(graphs: Mapping[str, Any]) -> hv.Bars:
    """Train / val / test / unlabelled vertices per graph (grouped bars).

    Example:
        >>> import torch
        >>> from types import SimpleNamespace as G
        >>> g = G(num_nodes=4, train_mask=torch.tensor([1, 1, 0, 0]).bool(), val_mask=torch.tensor([0, 0, 1, 0]).bool(),
        ...       test_mask=torch.tensor([0, 0, 0, 1]).bool())
        >>> split_bars({"g": g}).data["vertices"].tolist()
        [2, 1, 1, 0]
    """
    rows = []
    for name, g in graphs.items():
        masks = {s: getattr(g, f"{s}_mask", None) for s in ("train", "val", "test")}
        counts = {s: 0 if m is None else int(np.asarray(m).sum()) for s, m in masks.items()}
        counts["none"] = int(g.num_nodes) - sum(counts.values())
        rows += [{"graph": name, "split": s, "vertices": c} for s, c in counts.items()]
    frame = pd.DataFrame(rows, columns=["graph", "split", "vertices"])
    split = hv.Dimension("split", values=["train", "val", "test", "none"])   # this order, not alphabetical
    return hv.Bars(frame, ["graph", split], "vertices").opts(**dict(
        PLOT_OPTS, title="vertices per split", tools=["hover"], multi_level=True, color="split",
        cmap=["#4c78a8", "#f58518", "#54a24b", "#bab0ac"], show_legend=False, xrotation=0))


def training_curves(summary: Mapping[str, Any], title: str = "") -> hv.Layout:
    """Loss and train / val / test accuracy per epoch of a run summary (``losses``, ``accuracy_by_epoch``).

    Example:
        >>> s = {"losses": [1.0, 0.5], "accuracy_by_epoch": {"train": [0.5, 0.9], "val": [0.4, 0.8]}}
        >>> len(training_curves(s))
        2
    """
    loss = pd.DataFrame({"epoch": range(len(summary["losses"])), "loss": summary["losses"]})
    acc = pd.DataFrame([{"epoch": e, "split": k, "accuracy": v}
                        for k, vals in (summary.get("accuracy_by_epoch") or {}).items() for e, v in enumerate(vals)],
                       columns=["epoch", "split", "accuracy"])
    return hv.Layout([line_plot(loss, "epoch", "loss", title=f"{title} loss".strip(), height=240),
                      line_plot(acc, "epoch", "accuracy", by="split", title=f"{title} accuracy".strip(), height=240,
                                ylim=(0, 1))]).cols(2)
