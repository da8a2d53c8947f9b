"""Explicit, reported graph cleaning: self-loops, duplicate edges, symmetrisation.

Every step is vectorised over edge keys ``dst * num_nodes + src`` (one sort, no Python loop per edge),
and :func:`clean_graph` returns a :class:`CleaningReport` that says exactly what it changed.

Example:
    >>> import torch
    >>> from workbench.graph import Graph
    >>> from workbench.data.cleaning import clean_graph
    >>> g = Graph.from_edges(torch.tensor([0, 0, 1, 2]), torch.tensor([1, 1, 1, 0]), num_nodes=3)
    >>> clean, report = clean_graph(g)
    >>> (report.self_loops_removed, report.duplicates_removed, report.edges_added_by_symmetrization)
    (1, 1, 2)
    >>> clean.num_edges, clean.directed
    (4, False)
"""

from __future__ import annotations

import dataclasses
import html
from typing import Any, Optional

import torch

from workbench.graph import Graph

__all__ = ["CleaningReport", "clean_graph", "symmetrize", "graph_from_sorted_keys", "edge_keys"]


@dataclasses.dataclass(frozen=True)
class CleaningReport:
    """What :func:`clean_graph` changed. Edge counts are stored (directed) edges."""

    num_nodes: int
    """Vertices (cleaning never adds or removes vertices)."""
    edges_in: int
    """Stored edges before cleaning."""
    self_loops_removed: int = 0
    """Edges ``v -> v`` dropped."""
    duplicates_removed: int = 0
    """Repeated ``(src, dst)`` pairs dropped (after self-loop removal)."""
    edges_added_by_symmetrization: int = 0
    """Reverse edges ``dst -> src`` added because they were missing."""
    edges_out: int = 0
    """Stored edges after cleaning."""
    directed_out: bool = True
    """Whether the cleaned graph is directed (``False`` after symmetrisation)."""
    num_isolated_nodes: int = 0
    """Vertices with no edge at all after cleaning (kept; reported for information)."""
    source: str = ""
    """Where the graph came from (a file name or spec), for messages."""

    @property
    def changed(self) -> bool:
        return bool(self.self_loops_removed or self.duplicates_removed or self.edges_added_by_symmetrization)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        where = f" of {self.source}" if self.source else ""
        return (f"Cleaning{where}: {self.edges_in:,} -> {self.edges_out:,} stored edges "
                f"(self-loops removed {self.self_loops_removed:,}, duplicates removed {self.duplicates_removed:,}, "
                f"added by symmetrization {self.edges_added_by_symmetrization:,}; "
                f"{'directed' if self.directed_out else 'undirected'}, {self.num_isolated_nodes:,} isolated vertices)")

    def _repr_html_(self) -> str:
        def fmt(v: Any) -> str:
            return html.escape(f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v))

        rows = "".join(f"<tr><td style='text-align:left'>{html.escape(k)}</td>"
                       f"<td style='text-align:right'>{fmt(v)}</td></tr>" for k, v in self.to_dict().items())
        return f"<b>CleaningReport</b><table>{rows}</table>"


def edge_keys(src: torch.Tensor, dst: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """One int64 key per edge, ordered destination-major: ``dst * num_nodes + src``."""
    return dst.to(torch.int64) * max(num_nodes, 1) + src.to(torch.int64)


def graph_from_sorted_keys(keys: torch.Tensor, num_nodes: int, *, directed: bool, **node_data: Any) -> Graph:
    """Build a :class:`Graph` from ascending destination-major edge keys without another sort."""
    n = max(num_nodes, 1)
    dst = torch.div(keys, n, rounding_mode="floor")
    src = keys - dst * n
    indptr = torch.zeros(num_nodes + 1, dtype=torch.int64)
    if keys.numel():
        torch.cumsum(torch.bincount(dst, minlength=num_nodes), 0, out=indptr[1:])
    return Graph(indptr=indptr, indices=src, directed=directed, **node_data)


def symmetrize(src: Any, dst: Any, num_nodes: Optional[int] = None, *, dedupe: bool = True
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Add the reverse ``dst -> src`` of every edge whose reverse is missing.

    Args:
        src, dst: edge endpoints (1-D integer tensors or arrays).
        num_nodes: number of vertices (default: max id + 1).
        dedupe: also drop repeated edges (the result is then a set of distinct directed edges,
            sorted destination-major). With ``dedupe=False`` the input edges are kept as they are and
            only missing reverses are appended (each once).

    Returns:
        ``(src, dst)`` holding both directions of every edge.

    Example:
        >>> import torch
        >>> s, d = symmetrize(torch.tensor([0, 1]), torch.tensor([1, 2]))
        >>> sorted(zip(s.tolist(), d.tolist()))
        [(0, 1), (1, 0), (1, 2), (2, 1)]
    """
    src = torch.as_tensor(src).to(torch.int64)
    dst = torch.as_tensor(dst).to(torch.int64)
    if num_nodes is None:
        num_nodes = int(max(src.max(), dst.max())) + 1 if src.numel() else 0
    n = max(num_nodes, 1)
    keys = edge_keys(src, dst, n)
    rev = edge_keys(dst, src, n)
    if dedupe:
        allk = torch.unique(torch.cat([keys, rev]))
        d = torch.div(allk, n, rounding_mode="floor")
        return allk - d * n, d
    missing = torch.unique(rev[~torch.isin(rev, keys)])
    d = torch.div(missing, n, rounding_mode="floor")
    return torch.cat([src, missing - d * n]), torch.cat([dst, d])


def clean_graph(g: Graph, *, remove_self_loops: bool = True, dedupe: bool = True, symmetrize: bool = True,
                source: str = "") -> tuple[Graph, CleaningReport]:
    """Remove self-loops, drop duplicate edges and add missing reverse edges, and say how many.

    Node data (features, labels, masks, name) is kept; vertices are never removed.

    Args:
        g: the graph to clean.
        remove_self_loops: drop edges ``v -> v``.
        dedupe: drop repeated ``(src, dst)`` pairs.
        symmetrize: add missing reverse edges; the result is then undirected (``directed=False``).
        source: a name for the report (file or spec).

    Returns:
        ``(cleaned graph, CleaningReport)``.

    Example:
        >>> import torch
        >>> g = Graph.from_edges(torch.tensor([0, 1, 1]), torch.tensor([1, 2, 2]), num_nodes=3)
        >>> _, report = clean_graph(g, symmetrize=False)
        >>> report.duplicates_removed, report.edges_out
        (1, 2)
    """
    n = g.num_nodes
    src, dst = g.edges()
    edges_in = src.numel()
    loops = 0
    if remove_self_loops:
        keep = src != dst
        loops = int(edges_in - keep.sum())
        if loops:
            src, dst = src[keep], dst[keep]
    keys = edge_keys(src, dst, n)
    dups = 0
    if dedupe:
        before = keys.numel()
        keys = torch.unique(keys)  # sorted destination-major
        dups = before - keys.numel()
    added = 0
    if symmetrize:
        nn = max(n, 1)
        d = torch.div(keys, nn, rounding_mode="floor")
        rev = (keys - d * nn) * nn + d
        missing = rev[~torch.isin(rev, keys)]
        if not dedupe:
            missing = torch.unique(missing)
        added = missing.numel()
        keys = torch.cat([keys, missing])
    if symmetrize or not dedupe:
        keys, _ = torch.sort(keys)
    directed = g.directed and not symmetrize
    node_data = {f.name: getattr(g, f.name) for f in dataclasses.fields(g)
                 if f.name not in ("indptr", "indices", "directed")}
    out = graph_from_sorted_keys(keys, n, directed=directed, **node_data)
    deg = out.in_degrees() + out.out_degrees()
    report = CleaningReport(num_nodes=n, edges_in=edges_in, self_loops_removed=loops, duplicates_removed=dups,
                            edges_added_by_symmetrization=added, edges_out=out.num_edges, directed_out=directed,
                            num_isolated_nodes=int((deg == 0).sum()), source=source or g.name)
    return out, report
