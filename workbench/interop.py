"""Converters between :class:`~workbench.graph.Graph` and ``dgl.DGLGraph``.

DGL is imported inside the functions only, so the core imports without it. A DGL edge ``i`` goes
``src[i] -> dst[i]``; the workbench stores the same edge in row ``dst`` of its destination-major CSR.
Node data travels under DGL's usual names: ``feat``, ``label``, ``train_mask``, ``val_mask``, ``test_mask``.

Example:
    >>> from workbench.data import load_graph
    >>> g = load_graph("karate")
    >>> back = from_dgl(to_dgl(g), name="karate")  # doctest: +SKIP
    >>> back.num_edges == g.num_edges  # doctest: +SKIP
    True
"""

from __future__ import annotations

from typing import Any

import torch

from workbench._validation import ParamError, param_error
from workbench.graph import Graph

__all__ = ["to_dgl", "from_dgl", "NODE_DATA_NAMES"]

# Graph attribute -> DGL ndata key.
NODE_DATA_NAMES = {
    "features": "feat",
    "labels": "label",
    "train_mask": "train_mask",
    "val_mask": "val_mask",
    "test_mask": "test_mask",
}
# Other spellings accepted when reading (first match wins).
_ALIASES = {
    "features": ("feat", "features", "x"),
    "labels": ("label", "labels", "y"),
    "train_mask": ("train_mask",),
    "val_mask": ("val_mask", "valid_mask"),
    "test_mask": ("test_mask",),
}


def to_dgl(g: Graph):
    """A homogeneous ``dgl.DGLGraph`` with the same edges (``src -> dst``) and node data.

    Edge ids follow the workbench's CSR order (grouped by destination).

    Example:
        >>> import torch
        >>> g = Graph.from_edges(torch.tensor([0, 1]), torch.tensor([1, 2]), num_nodes=3)
        >>> to_dgl(g).edges()  # doctest: +SKIP
        (tensor([0, 1]), tensor([1, 2]))
    """
    import dgl

    src, dst = g.edges()
    dg = dgl.graph((src, dst), num_nodes=g.num_nodes, idtype=torch.int64)
    for attr, key in NODE_DATA_NAMES.items():
        value = getattr(g, attr)
        if value is not None:
            dg.ndata[key] = value
    return dg


def from_dgl(dg: Any, *, name: str = "dgl") -> Graph:
    """A :class:`Graph` from a homogeneous ``dgl.DGLGraph``.

    The graph is marked undirected (``directed=False``) exactly when every edge's reverse is present.

    Raises:
        ParamError: ``dg`` is not a homogeneous DGL graph, or its node data has the wrong shape.

    Example:
        >>> import dgl, torch  # doctest: +SKIP
        >>> from_dgl(dgl.graph((torch.tensor([0]), torch.tensor([1])))).num_edges  # doctest: +SKIP
        1
    """
    ntypes = getattr(dg, "ntypes", None)
    etypes = getattr(dg, "canonical_etypes", None)
    if ntypes is None or len(ntypes) != 1 or etypes is None or len(etypes) > 1:
        raise ParamError([param_error("dg", "from_dgl", "a homogeneous dgl.DGLGraph (one node and edge type)",
                                      f"{type(dg).__name__} with ntypes={ntypes}")])
    src, dst = dg.edges()
    src, dst = src.to(torch.int64), dst.to(torch.int64)
    n = int(dg.num_nodes())
    node_data = {}
    for attr, keys in _ALIASES.items():
        for key in keys:
            if key in dg.ndata:
                node_data[attr] = dg.ndata[key]
                break
    if "labels" in node_data and node_data["labels"].dim() == 2 and node_data["labels"].shape[1] == 1:
        node_data["labels"] = node_data["labels"][:, 0]
    return Graph.from_edges(src, dst, num_nodes=n, directed=not _is_symmetric(src, dst, n), name=name,
                            **node_data)


def _is_symmetric(src: torch.Tensor, dst: torch.Tensor, n: int) -> bool:
    if src.numel() == 0:
        return False
    n = max(n, 1)
    fwd, _ = torch.sort(dst * n + src)
    rev, _ = torch.sort(src * n + dst)
    return bool(torch.equal(fwd, rev))
