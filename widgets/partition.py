"""Partition view: part sizes and halos, the part-by-part communication heatmap, and a drawing.

The drawing is vertex-level, coloured by part, for graphs up to :data:`MAX_DRAW_NODES` vertices when the
graph and each vertex's part are known (passed in, or rebuilt from the run's graph spec on a background
thread and checked against the logged part sizes); otherwise it is the part-level quotient graph (one
node per part, edge width = feature rows exchanged), so a big graph never hangs the page.

Example:
    >>> from widgets.synthetic import fabricate_run
    >>> view = PartitionView(fabricate_run(num_parts=3, epochs=1))
    >>> view.comm_frame().shape
    (9, 3)
"""

from __future__ import annotations

import html
import threading
from typing import Any, Optional

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn

from workbench.events import PartitionComputed
from widgets.base import PLOT_OPTS, StoreView, empty_note, rank_color

__all__ = ["PartitionView", "partition_event", "spring_layout", "MAX_DRAW_NODES"]

#: largest graph drawn vertex by vertex
MAX_DRAW_NODES = 2000

_LAYOUT_CACHE: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
_LAYOUT_LOCK = threading.Lock()


def spring_layout(src: np.ndarray, dst: np.ndarray, num_nodes: int, iterations: int = 60,
                  seed: int = 0) -> np.ndarray:
    """Fruchterman-Reingold positions ``(num_nodes, 2)``, vectorised (dense; meant for small graphs)."""
    rng = np.random.default_rng(seed)
    pos = rng.random((num_nodes, 2)).astype(np.float32)
    if num_nodes < 2:
        return pos
    k = np.float32(1.0 / np.sqrt(num_nodes))
    t = 0.1
    for _ in range(iterations):
        delta = pos[:, None, :] - pos[None, :, :]                 # (n, n, 2)
        dist2 = np.maximum((delta ** 2).sum(-1), 1e-6)            # (n, n)
        disp = (delta * (k * k / dist2)[:, :, None]).sum(1)       # repulsion
        d = pos[src] - pos[dst]                                   # (num_edges, 2)
        dn = np.sqrt(np.maximum((d ** 2).sum(-1), 1e-9))[:, None]
        pull = d * dn / k                                         # attraction along edges
        np.add.at(disp, src, -pull)
        np.add.at(disp, dst, pull)
        disp -= (pos - pos.mean(0)) * (k * 4)                    # gravity: components stay together
        length = np.maximum(np.sqrt((disp ** 2).sum(-1)), 1e-9)[:, None]
        pos += disp / length * np.minimum(length, t)
        t *= 0.95
    lo, hi = np.percentile(pos, 1, axis=0), np.percentile(pos, 99, axis=0)
    return np.clip((pos - lo) / np.maximum(hi - lo, 1e-9), -0.05, 1.05)  # outliers pinned to the frame


class PartitionView(StoreView):
    """Sizes, halos, communication heatmap and a drawing of the run's partition."""

    kinds = ("partition", "run")
    title = "Partition"

    def __init__(self, source: Any, *, graph: Any = None, node_part: Any = None,
                 max_draw_nodes: int = MAX_DRAW_NODES, rebuild: bool = True, **params: Any):
        if hasattr(source, "comm_rows_matrix") and hasattr(source, "node_part"):  # a PartitionResult
            graph = graph if graph is not None else source.graph
            node_part = node_part if node_part is not None else source.node_part
            source = [partition_event(source)]
        self._graph, self._node_part = graph, node_part
        self.max_draw_nodes = max_draw_nodes
        self._rebuild = rebuild
        self._drawing: Optional[tuple[np.ndarray, np.ndarray, np.ndarray]] = None
        self._drawing_state = "none"   # none | computing | ready | unavailable
        self._drawing_version = 0
        super().__init__(source, **params)

    # -- data ---------------------------------------------------------------------------------------------
    def sizes_frame(self) -> pd.DataFrame:
        """Rows ``part``, ``what`` (inner / halo), ``vertices``."""
        ev = self.store.partition
        if ev is None:
            return pd.DataFrame(columns=["part", "what", "vertices"])
        rows = [{"part": str(p), "what": "inner", "vertices": int(n)} for p, n in enumerate(ev.part_sizes)]
        rows += [{"part": str(p), "what": "halo", "vertices": int(n)} for p, n in enumerate(ev.halo_sizes)]
        return pd.DataFrame(rows)

    def comm_frame(self) -> pd.DataFrame:
        """Rows ``src_part``, ``dst_part``, ``rows`` from the event's ``comm_rows`` matrix."""
        ev = self.store.partition
        if ev is None or not ev.comm_rows:
            return pd.DataFrame(columns=["src_part", "dst_part", "rows"])
        m = np.asarray(ev.comm_rows, dtype=np.int64)
        p, q = np.meshgrid(np.arange(m.shape[0]), np.arange(m.shape[1]), indexing="ij")
        return pd.DataFrame({"src_part": p.ravel().astype(str), "dst_part": q.ravel().astype(str),
                             "rows": m.ravel()})

    def _version(self) -> tuple:
        return super()._version() + (self._drawing_version,)

    # -- drawing ------------------------------------------------------------------------------------------
    def _want_drawing(self) -> None:
        """Start computing a vertex-level drawing (background thread) when the graph is small enough."""
        ev = self.store.partition
        if self._drawing_state != "none" or ev is None:
            return
        num_nodes = int(ev.metrics.get("num_nodes") or sum(ev.part_sizes) or 0)
        if num_nodes > self.max_draw_nodes or (self._graph is None and not self._rebuild):
            self._drawing_state = "unavailable"
            return
        self._drawing_state = "computing"
        # Not a daemon: the work is bounded (small graphs only), and a daemon thread still inside torch when
        # the interpreter exits aborts the process.
        threading.Thread(target=self._compute_drawing, args=(ev,), daemon=False, name="partition-layout").start()

    def _compute_drawing(self, ev: Any) -> None:
        try:
            graph, node_part = self._graph, self._node_part
            if graph is None:
                graph, node_part = _rebuild_partition(self.store.config, ev)
            if graph is None or node_part is None:
                self._drawing_state = "unavailable"
                return
            node_part = np.asarray(node_part, dtype=np.int64)
            src, dst = (np.asarray(t, dtype=np.int64) for t in graph.edges())
            keep = src < dst if not getattr(graph, "directed", False) else src != dst
            src, dst = src[keep], dst[keep]
            key = (getattr(graph, "name", ""), graph.num_nodes, len(src), hash(node_part.tobytes()))
            with _LAYOUT_LOCK:
                cached = _LAYOUT_CACHE.get(key)
            if cached is None:
                pos = spring_layout(src, dst, graph.num_nodes)
                cached = (pos, np.stack([src, dst], 1), node_part)
                with _LAYOUT_LOCK:
                    _LAYOUT_CACHE[key] = cached
            self._drawing = cached
            self._drawing_state = "ready"
        except Exception:
            self._drawing_state = "unavailable"
        finally:
            self._drawing_version += 1

    def _vertex_drawing(self) -> hv.Overlay:
        pos, edges, node_part = self._drawing
        segs = np.concatenate([pos[edges[:, 0]], pos[edges[:, 1]]], axis=1)
        e = hv.Segments(segs, kdims=["x0", "y0", "x1", "y1"]).opts(color="#999999", alpha=0.25, line_width=0.5)
        pts = pd.DataFrame({"x": pos[:, 0], "y": pos[:, 1], "part": node_part.astype(str),
                            "vertex": np.arange(len(pos))})
        colors = {str(p): rank_color(p) for p in np.unique(node_part)}
        nodes = hv.Points(pts, kdims=["x", "y"], vdims=["part", "vertex"]).opts(
            color="part", cmap=colors, size=5 if len(pos) < 500 else 3, tools=["hover"], line_color=None)
        return (e * nodes).opts(title=f"Graph coloured by part ({len(pos)} vertices)", xaxis=None, yaxis=None,
                                show_legend=False, **{**PLOT_OPTS, "height": 340})

    def _quotient_drawing(self) -> hv.Overlay:
        ev = self.store.partition
        k = ev.num_parts or len(ev.part_sizes)
        ang = 2 * np.pi * np.arange(k) / max(k, 1)
        xy = np.stack([np.cos(ang), np.sin(ang)], 1)
        m = np.asarray(ev.comm_rows or np.zeros((k, k)), dtype=float)
        sym = m + m.T
        i, j = np.triu_indices(k, 1)
        w = sym[i, j]
        top = w.max() if len(w) and w.max() > 0 else 1.0
        segs = pd.DataFrame({"x0": xy[i, 0], "y0": xy[i, 1], "x1": xy[j, 0], "y1": xy[j, 1],
                             "rows": w, "width": 1 + 9 * w / top})
        edges = hv.Segments(segs[segs.rows > 0], kdims=["x0", "y0", "x1", "y1"], vdims=["rows", "width"]).opts(
            line_width="width", color="#888888", alpha=0.6, tools=["hover"])
        sizes = np.asarray(ev.part_sizes or [1] * k, dtype=float)
        pts = pd.DataFrame({"x": xy[:, 0], "y": xy[:, 1], "part": [str(p) for p in range(k)],
                            "vertices": sizes.astype(int), "size": 12 + 28 * sizes / max(sizes.max(), 1)})
        nodes = hv.Points(pts, kdims=["x", "y"], vdims=["part", "vertices", "size"]).opts(
            color="part", cmap={str(p): rank_color(p) for p in range(k)}, size="size", tools=["hover"],
            line_color="white")
        labels = hv.Labels(pts, kdims=["x", "y"], vdims=["part"]).opts(text_color="white", text_font_size="9pt")
        return (edges * nodes * labels).opts(
            title="Parts and the rows they exchange (quotient graph)", xaxis=None, yaxis=None, show_legend=False,
            padding=0.25, **{**PLOT_OPTS, "height": 340})

    # -- rendering ----------------------------------------------------------------------------------------
    def _build(self) -> list:
        self._note = empty_note("Waiting for the partition…")
        self._figures = pn.pane.HTML("", margin=(4, 10), sizing_mode="stretch_width")
        self._sizes = pn.pane.HoloViews(None, sizing_mode="stretch_width")
        self._heat = pn.pane.HoloViews(None, sizing_mode="stretch_width")
        self._draw = pn.pane.HoloViews(None, sizing_mode="stretch_width")
        self._draw_note = empty_note("")
        return [self._note, self._figures, pn.Row(self._sizes, self._heat, sizing_mode="stretch_width"),
                self._draw_note, self._draw]

    def _update(self) -> None:
        ev = self.store.partition
        self._note.visible = ev is None
        if ev is None:
            return
        self._want_drawing()
        m = ev.metrics or {}
        keys = [("method", ev.method), ("parts", ev.num_parts), ("vertices", m.get("num_nodes")),
                ("edge cut", m.get("edge_cut")), ("cut ratio", m.get("cut_ratio")),
                ("replication", m.get("replication_factor")),
                ("replication, completed", m.get("replication_factor_completed")),   # streaming results
                ("vertex balance", m.get("vertex_balance")),
                ("edge balance", m.get("edge_balance")), ("rows / layer", m.get("comm_volume_rows"))]
        cells = "".join(f"<div class='wb-fig'><div style='color:#666;font-size:11px'>{html.escape(k)}</div>"
                        f"<div style='font-size:15px;font-weight:600'>{html.escape(_fmt(v))}</div></div>"
                        for k, v in keys if v is not None)
        self._figures.object = f"<div style='display:flex;gap:18px;flex-wrap:wrap'>{cells}</div>"
        sizes = self.sizes_frame()
        self._sizes.object = hv.Bars(sizes, kdims=["part", "what"], vdims=["vertices"]).opts(
            title="Vertices per part: inner and halo", color="what", cmap={"inner": "#4c78a8", "halo": "#f58518"},
            tools=["hover"], show_legend=True, legend_position="right", **PLOT_OPTS)
        comm = self.comm_frame()
        heat = hv.HeatMap(comm, kdims=[hv.Dimension("dst_part", label="to part"),
                                       hv.Dimension("src_part", label="from part")], vdims=["rows"]).opts(
            title="Feature rows sent per layer (part → part)", cmap="Blues", colorbar=True, tools=["hover"],
            invert_yaxis=True, **PLOT_OPTS)
        if ev.num_parts <= 12 and len(comm):
            dark = comm["rows"] > comm["rows"].max() / 2  # white text on dark cells
            for part, color in ((comm[dark], "white"), (comm[~dark], "#333333")):
                heat = heat * hv.Labels(part, kdims=["dst_part", "src_part"], vdims=["rows"]).opts(
                    text_font_size="8pt", text_color=color)
        self._heat.object = heat
        if self._drawing_state == "ready" and self._drawing is not None:
            self._draw_note.visible = False
            self._draw.object = self._vertex_drawing()
        else:
            self._draw_note.visible = self._drawing_state == "computing"
            self._draw_note.object = "*Computing a layout of the graph…*"
            self._draw.object = self._quotient_drawing()


def partition_event(result: Any, run_id: str = "") -> PartitionComputed:
    """The :class:`PartitionComputed` event describing a ``PartitionResult`` (to view it without a run)."""
    num_parts = int(result.num_parts)
    halos = [int(len(result.halo_nodes(p))) for p in range(num_parts)]
    node_part = np.asarray(result.node_part, dtype=np.int64)
    return PartitionComputed(run_id=run_id, method=str(result.method), num_parts=num_parts,
                             metrics=dict(result.metrics().to_dict()),
                             part_sizes=np.bincount(node_part, minlength=num_parts).tolist(), halo_sizes=halos,
                             comm_rows=np.asarray(result.comm_rows_matrix()).tolist())


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int) and abs(v) >= 10000:
        return f"{v:,}"
    return str(v)


def _rebuild_partition(config: dict, ev: Any) -> tuple[Any, Optional[np.ndarray]]:
    """Reload a small run's graph from its spec and partition it again with the logged method and seed.

    The result is used only if it reproduces the logged part sizes exactly (else: no drawing)."""
    spec = config.get("graph") if config else None
    if not isinstance(spec, str) or not spec:
        return None, None
    try:
        from workbench.data import load_graph
        from workbench.partition import partition
    except ImportError:
        return None, None
    graph = load_graph(spec)
    if graph.num_nodes > MAX_DRAW_NODES:
        return None, None
    nested = config.get("partition") if isinstance(config.get("partition"), dict) else {}   # a composed RunConfig
    seed = config.get("seed", nested.get("seed", 0))
    res = partition(graph, int(ev.num_parts), method=ev.method or "metis", seed=int(seed or 0))
    node_part = np.asarray(res.node_part, dtype=np.int64) if res.node_part is not None else None
    if node_part is None:
        return None, None
    counts = np.bincount(node_part, minlength=int(ev.num_parts)).tolist()
    if list(map(int, ev.part_sizes)) and counts != list(map(int, ev.part_sizes)):
        return None, None
    return graph, node_part
