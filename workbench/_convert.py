"""The half of the DGL/PyG converters that needs no :class:`~workbench.graph.Graph` class: graph-like -> DGL/PyG,
and DGL/PyG -> edge arrays plus node data (checked).

:mod:`workbench.graph` (whose ``to_dgl``/``from_dgl``/``to_pyg``/``from_pyg`` methods call in here) and
:mod:`workbench.interop` (the public converter functions) both build on this module, which imports neither:
imports point one way, ``interop -> graph -> _convert``. DGL and PyG are imported inside the functions only, so
the core imports without them. A DGL edge ``i`` goes ``src[i] -> dst[i]``; the workbench stores the same edge in
row ``dst`` of its destination-major CSR. Node data travels under DGL's usual names: ``feat``, ``label``,
``train_mask``, ``val_mask``, ``test_mask``.
"""

from __future__ import annotations

from typing import Any

import torch

from workbench._validation import ParamError, param_error

__all__ = ["to_dgl", "to_pyg", "dgl_parts", "pyg_parts", "NODE_DATA_NAMES", "PYG_NAMES"]

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
# Graph attribute -> torch_geometric.data.Data attribute.
PYG_NAMES = {"features": "x", "labels": "y", "train_mask": "train_mask", "val_mask": "val_mask",
             "test_mask": "test_mask"}

Parts = tuple[torch.Tensor, torch.Tensor, int, bool, dict]
"""``(src, dst, num_nodes, directed, node_data)``: what ``Graph.from_edges`` takes."""


def to_dgl(g: Any):
    """A homogeneous ``dgl.DGLGraph`` with the same edges (``src -> dst``) and node data.

    Edge ids follow the workbench's CSR order (grouped by destination).

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
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


def dgl_parts(dg: Any) -> Parts:
    """The edges, vertex count, direction and node data of a homogeneous ``dgl.DGLGraph``.

    The graph is marked undirected (``directed=False``) exactly when every edge's reverse is present.

    Raises:
        ParamError: ``dg`` is not a homogeneous DGL graph (named as ``from_dgl``'s parameter).
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
    return src, dst, n, not _is_symmetric(src, dst, n), node_data


def _is_symmetric(src: torch.Tensor, dst: torch.Tensor, n: int) -> bool:
    if src.numel() == 0:
        return False
    n = max(n, 1)
    fwd, _ = torch.sort(dst * n + src)
    rev, _ = torch.sort(src * n + dst)
    return bool(torch.equal(fwd, rev))


def to_pyg(g: Any):
    """A ``torch_geometric.data.Data`` with ``edge_index`` (row 0 = source, row 1 = destination, in the
    workbench's CSR order), ``x``, ``y`` and the split masks; ``num_nodes`` is set explicitly.

    Example:
        >>> from workbench.data import load_graph
        >>> data = to_pyg(load_graph("karate"))
        >>> data.num_nodes, data.edge_index.shape, data.x.shape
        (34, torch.Size([2, 156]), torch.Size([34, 34]))
    """
    from torch_geometric.data import Data

    src, dst = g.edges()
    data = Data(edge_index=torch.stack([src, dst]), num_nodes=g.num_nodes)
    for attr, key in PYG_NAMES.items():
        value = getattr(g, attr)
        if value is not None:
            data[key] = value
    return data


def pyg_parts(data: Any) -> Parts:
    """The edges, vertex count, direction and node data of a ``torch_geometric.data.Data`` (``edge_index``,
    optional ``x``, ``y``, ``train_mask``/``val_mask``/``test_mask``). Undirected exactly when every edge's
    reverse is present.

    Raises:
        ParamError: ``data`` has no ``(2, E)`` integer ``edge_index`` (named as ``from_pyg``'s parameter).
    """
    ei = getattr(data, "edge_index", None)
    if not isinstance(ei, torch.Tensor) or ei.dim() != 2 or ei.shape[0] != 2 or ei.is_floating_point():
        raise ParamError([param_error("data", "from_pyg", "a torch_geometric Data with a (2, E) integer edge_index",
                                      f"{type(data).__name__} with edge_index "
                                      f"{tuple(ei.shape) if isinstance(ei, torch.Tensor) else ei}")])
    src, dst = ei[0].to(torch.int64).cpu(), ei[1].to(torch.int64).cpu()
    n = getattr(data, "num_nodes", None)
    n = int(n) if n is not None else (int(ei.max()) + 1 if ei.numel() else 0)
    node_data = {}
    for attr, key in PYG_NAMES.items():
        value = data[key] if key in data else None
        if value is not None:
            node_data[attr] = value.cpu()
    if "labels" in node_data and node_data["labels"].dim() == 2 and node_data["labels"].shape[1] == 1:
        node_data["labels"] = node_data["labels"][:, 0]
    return src, dst, n, not _is_symmetric(src, dst, n), node_data
