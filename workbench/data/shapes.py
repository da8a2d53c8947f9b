"""Two structured generators the partition comparisons need beside SBM and the power-law ones: a 2-D mesh
(road-network-like, no degree skew) and a directed citation-like graph (edges only to older vertices).

Both are vectorised and seeded; the mesh has no node data, the citation graph none either (partitioning
and volume metrics need only the structure).

Example:
    >>> g = grid_graph(3)
    >>> g.num_nodes, g.num_edges, g.directed
    (9, 24, False)
    >>> c = citation_graph(100, out_degree=3, seed=0)
    >>> c.directed, bool((c.edges()[0] > c.edges()[1]).all())
    (True, True)
"""

from __future__ import annotations

import numpy as np
import torch

from workbench.graph import Graph

__all__ = ["grid_graph", "citation_graph"]


def grid_graph(side: int, *, name: str | None = None) -> Graph:
    """A ``side x side`` 4-neighbour mesh, undirected (both directions stored), ids row-major."""
    ids = np.arange(side * side).reshape(side, side)
    right = np.stack([ids[:, :-1].ravel(), ids[:, 1:].ravel()])
    down = np.stack([ids[:-1, :].ravel(), ids[1:, :].ravel()])
    u, v = np.concatenate([right, down], axis=1)
    src, dst = torch.from_numpy(np.concatenate([u, v])), torch.from_numpy(np.concatenate([v, u]))
    return Graph.from_edges(src, dst, side * side, directed=False, name=name or f"grid:{side}x{side}")


def citation_graph(num_nodes: int, *, out_degree: int = 5, skew: float = 2.0, seed: int = 0,
                   name: str | None = None) -> Graph:
    """Directed: vertex ``i`` cites up to ``out_degree`` distinct older vertices ``floor(i * U**skew)``
    (``skew > 1`` favours old vertices, giving a heavy-tailed in-degree); edges ``i -> j``, ``j < i``."""
    rng = np.random.default_rng(seed)
    i = np.repeat(np.arange(1, num_nodes), out_degree)
    j = np.floor(i * rng.random(i.size) ** skew).astype(np.int64)
    keys = np.unique(i * num_nodes + j)
    src, dst = torch.from_numpy(keys // num_nodes), torch.from_numpy(keys % num_nodes)
    return Graph.from_edges(src, dst, num_nodes, directed=True,
                            name=name or f"citation:{num_nodes},d={out_degree}")
