"""The one graph type every stage shares.

A :class:`Graph` stores its structure as CSR over **destination** vertices: the in-neighbours of
``v`` are ``indices[indptr[v]:indptr[v + 1]]``. That is the layout message passing wants (aggregate
row ``v`` from its sources) and the layout DGL calls CSC. An undirected graph (``directed=False``)
stores both directions of every edge, so ``num_edges`` counts directed edges and
``num_undirected_edges`` counts each pair once (self-loops once).

Example:
    >>> import torch
    >>> from workbench.graph import Graph
    >>> g = Graph.from_edges(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0]), num_nodes=3)
    >>> g.num_nodes, g.num_edges, g.directed
    (3, 3, True)
    >>> g.in_degrees().tolist()
    [1, 1, 1]
"""

from __future__ import annotations

import dataclasses
import html
from typing import Any, Optional

import numpy as np
import torch

import workbench._convert as _convert
from workbench._validation import ErrorCollector

__all__ = ["Graph"]


def _as_long(x: Any) -> torch.Tensor:
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(np.ascontiguousarray(x))
    t = torch.as_tensor(x)
    return t.to(torch.int64).contiguous()


@dataclasses.dataclass(eq=False, repr=False)
class Graph:
    """A graph in destination-major CSR with optional node data.

    Attributes:
        indptr: ``(num_nodes + 1,)`` int64 row pointers over destination vertices.
        indices: ``(num_edges,)`` int64 source vertex of each stored edge, grouped by destination.
        directed: ``False`` when every edge is stored in both directions.
        features: optional ``(num_nodes, num_features)`` float32 node features.
        labels: optional ``(num_nodes,)`` int64 class labels (``-1`` = unlabelled).
        train_mask, val_mask, test_mask: optional ``(num_nodes,)`` bool split masks.
        name: a short name for summaries.
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    directed: bool = True
    features: Optional[torch.Tensor] = None
    labels: Optional[torch.Tensor] = None
    train_mask: Optional[torch.Tensor] = None
    val_mask: Optional[torch.Tensor] = None
    test_mask: Optional[torch.Tensor] = None
    name: str = "graph"

    def __post_init__(self) -> None:
        self.indptr = _as_long(self.indptr)
        self.indices = _as_long(self.indices)
        errs = ErrorCollector("Graph")
        n = self.indptr.numel() - 1
        errs.check(n >= 0 and self.indptr.dim() == 1, "indptr", "a 1-D tensor of length num_nodes + 1",
                   tuple(self.indptr.shape))
        if n >= 0:
            errs.check(int(self.indptr[0]) == 0 and int(self.indptr[-1]) == self.indices.numel(), "indptr",
                       f"a pointer array from 0 to len(indices)={self.indices.numel()}",
                       f"[{int(self.indptr[0])} .. {int(self.indptr[-1])}]")
            if self.indices.numel():
                lo, hi = int(self.indices.min()), int(self.indices.max())
                errs.check(lo >= 0 and hi < n, "indices", f"vertex ids in [0, {n})", f"ids in [{lo}, {hi}]")
        if self.features is not None:
            self.features = torch.as_tensor(self.features, dtype=torch.float32)
            errs.check(self.features.dim() == 2 and self.features.shape[0] == n, "features",
                       f"a (num_nodes={n}, F) tensor", tuple(self.features.shape))
        if self.labels is not None:
            self.labels = _as_long(self.labels)
            errs.check(self.labels.shape == (n,), "labels", f"a (num_nodes={n},) tensor", tuple(self.labels.shape))
        for mask_name in ("train_mask", "val_mask", "test_mask"):
            m = getattr(self, mask_name)
            if m is not None:
                m = torch.as_tensor(m).to(torch.bool)
                setattr(self, mask_name, m)
                errs.check(m.shape == (n,), mask_name, f"a (num_nodes={n},) bool tensor", tuple(m.shape))
        errs.raise_if_any()

    # ---------------------------------------------------------------------------------------------- build
    @classmethod
    def from_edges(cls, src: Any, dst: Any, num_nodes: Optional[int] = None, *, directed: bool = True,
                   **node_data: Any) -> "Graph":
        """Build from COO edges ``src[i] -> dst[i]``. With ``directed=False`` the edges must already hold
        both directions (see :func:`workbench.data.cleaning.symmetrize`)."""
        src, dst = _as_long(src), _as_long(dst)
        errs = ErrorCollector("Graph.from_edges")
        errs.check(src.shape == dst.shape and src.dim() == 1, "dst", f"a 1-D tensor shaped like src {tuple(src.shape)}",
                   tuple(dst.shape))
        errs.raise_if_any()
        if num_nodes is None:
            num_nodes = int(max(src.max(), dst.max())) + 1 if src.numel() else 0
        if src.numel():
            lo = int(min(src.min(), dst.min()))
            hi = int(max(src.max(), dst.max()))
            errs.check(lo >= 0 and hi < num_nodes, "num_nodes", f"larger than every vertex id (max id {hi}, min {lo})",
                       num_nodes)
            errs.raise_if_any()
        order = torch.argsort(dst * max(num_nodes, 1) + src, stable=True) if src.numel() else src
        counts = torch.bincount(dst, minlength=num_nodes)
        indptr = torch.zeros(num_nodes + 1, dtype=torch.int64)
        torch.cumsum(counts, 0, out=indptr[1:])
        return cls(indptr=indptr, indices=src[order], directed=directed, **node_data)

    # ---------------------------------------------------------------------------------------------- sizes
    @property
    def num_nodes(self) -> int:
        return self.indptr.numel() - 1

    @property
    def num_edges(self) -> int:
        """Stored (directed) edges."""
        return self.indices.numel()

    @property
    def num_undirected_edges(self) -> int:
        """Distinct unordered vertex pairs with at least one edge (self-loops counted once)."""
        src, dst = self.edges()
        lo, hi = torch.minimum(src, dst), torch.maximum(src, dst)
        return int(torch.unique(lo * max(self.num_nodes, 1) + hi).numel())

    @property
    def num_features(self) -> int:
        return 0 if self.features is None else int(self.features.shape[1])

    @property
    def num_classes(self) -> int:
        if self.labels is None or self.labels.numel() == 0:
            return 0
        return int(self.labels.max()) + 1

    # ---------------------------------------------------------------------------------------------- views
    def dst_ids(self) -> torch.Tensor:
        """Destination of each stored edge, aligned with ``indices``."""
        return torch.repeat_interleave(torch.arange(self.num_nodes), self.in_degrees())

    def edges(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(src, dst)`` of every stored edge, in CSR order."""
        return self.indices, self.dst_ids()

    def in_degrees(self) -> torch.Tensor:
        return self.indptr[1:] - self.indptr[:-1]

    def out_degrees(self) -> torch.Tensor:
        return torch.bincount(self.indices, minlength=self.num_nodes)

    def with_data(self, **changes: Any) -> "Graph":
        """A copy with node data (or ``name``) replaced; the structure is shared, not copied."""
        return dataclasses.replace(self, **changes)

    # ---------------------------------------------------------------------------------------------- convert
    def to_scipy(self, fmt: str = "csr"):
        """The aggregation matrix ``A`` with ``A[dst, src] = 1`` (so ``A @ H`` sums in-neighbours)."""
        import scipy.sparse as sp

        data = np.ones(self.num_edges, dtype=np.float32)
        mat = sp.csr_matrix((data, self.indices.numpy(), self.indptr.numpy()), shape=(self.num_nodes,) * 2)
        return mat.asformat(fmt)

    @classmethod
    def from_scipy(cls, mat, *, directed: bool = True, **node_data: Any) -> "Graph":
        """From a square sparse matrix read as ``A[dst, src]`` (the inverse of :meth:`to_scipy`)."""
        coo = mat.tocoo()
        if coo.shape[0] != coo.shape[1]:
            raise ValueError(f"The 'mat' parameter of Graph.from_scipy must be square. Got shape {coo.shape} instead.")
        return cls.from_edges(coo.col, coo.row, num_nodes=coo.shape[0], directed=directed, **node_data)

    def to_dgl(self):
        """A ``dgl.DGLGraph`` with the same edges and node data (``feat``, ``label``, masks)."""
        return _convert.to_dgl(self)

    @classmethod
    def from_dgl(cls, g, *, name: str = "dgl") -> "Graph":
        """From a homogeneous ``dgl.DGLGraph`` (node data ``feat``/``label``/``*_mask`` are carried)."""
        src, dst, n, directed, node_data = _convert.dgl_parts(g)
        return cls.from_edges(src, dst, num_nodes=n, directed=directed, name=name, **node_data)

    def to_pyg(self):
        """A ``torch_geometric.data.Data`` (``edge_index``, ``x``, ``y``, masks); see :func:`workbench.interop.to_pyg`."""
        return _convert.to_pyg(self)

    @classmethod
    def from_pyg(cls, data, *, name: str = "pyg") -> "Graph":
        """From a ``torch_geometric.data.Data`` (``edge_index``, ``x``, ``y``, masks are carried)."""
        src, dst, n, directed, node_data = _convert.pyg_parts(data)
        return cls.from_edges(src, dst, num_nodes=n, directed=directed, name=name, **node_data)

    # ---------------------------------------------------------------------------------------------- repr
    def summary(self) -> dict[str, Any]:
        deg = self.in_degrees().to(torch.float64)
        out = {
            "name": self.name,
            "num_nodes": self.num_nodes,
            "num_edges": self.num_edges,
            "directed": self.directed,
            "mean_degree": round(float(deg.mean()), 3) if self.num_nodes else 0.0,
            "max_degree": int(deg.max()) if self.num_nodes else 0,
            "num_features": self.num_features,
            "num_classes": self.num_classes,
        }
        for mask_name in ("train_mask", "val_mask", "test_mask"):
            m = getattr(self, mask_name)
            if m is not None:
                out[mask_name.replace("_mask", "_nodes")] = int(m.sum())
        return out

    def __repr__(self) -> str:
        s = self.summary()
        kind = "directed" if self.directed else "undirected"
        extra = f", features={s['num_features']}" if self.features is not None else ""
        extra += f", classes={s['num_classes']}" if self.labels is not None else ""
        return f"Graph({self.name!r}, {kind}, nodes={s['num_nodes']:,}, edges={s['num_edges']:,}{extra})"

    def info(self) -> dict[str, Any]:
        """What ``workbench info`` prints: sizes, the cleaning report (when the graph was read from a file),
        isolated vertices, feature width, classes, split sizes and degree statistics (in-degree, stored edges).

        Example:
            >>> import torch
            >>> g = Graph.from_edges(torch.tensor([0, 1]), torch.tensor([1, 0]), num_nodes=3, directed=False)
            >>> info = g.info()
            >>> info["num_undirected_edges"], info["num_isolated_nodes"], info["degree"]
            (1, 1, {'min': 0, 'mean': 0.667, 'max': 1})
        """
        deg = self.in_degrees()
        touched = (deg + self.out_degrees()) > 0
        report = getattr(self, "cleaning_report", None)
        labels = self.labels
        labelled = int((labels >= 0).sum()) if labels is not None else 0
        out: dict[str, Any] = {
            "name": self.name,
            "num_nodes": self.num_nodes,
            "num_edges": self.num_edges,
            "num_undirected_edges": self.num_undirected_edges,
            "directed": self.directed,
            "self_loops_removed": report.self_loops_removed if report is not None else None,
            "duplicates_removed": report.duplicates_removed if report is not None else None,
            "edges_added_by_symmetrization": report.edges_added_by_symmetrization if report is not None else None,
            "num_isolated_nodes": int((~touched).sum()),
            "num_features": self.num_features,
            "num_classes": self.num_classes,
            "multi_label": False,
            "num_labelled_nodes": labelled,
            "split": {k: (int(getattr(self, f"{k}_mask").sum()) if getattr(self, f"{k}_mask") is not None else None)
                      for k in ("train", "val", "test")},
            "degree": {"min": int(deg.min()) if self.num_nodes else 0,
                       "mean": round(float(deg.to(torch.float64).mean()), 3) if self.num_nodes else 0.0,
                       "max": int(deg.max()) if self.num_nodes else 0},
        }
        return out

    def _repr_html_(self) -> str:
        def fmt(v: Any) -> str:
            if isinstance(v, dict):
                return ", ".join(f"{k} {fmt(x)}" for k, x in v.items())
            if v is None:
                return "-"
            return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)

        rows = "".join(f"<tr><td style='text-align:left'>{html.escape(k)}</td>"
                       f"<td style='text-align:right'>{html.escape(fmt(v))}</td></tr>" for k, v in self.info().items())
        return f"<b>Graph</b><table>{rows}</table>"
