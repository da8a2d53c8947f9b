"""Converters between :class:`~workbench.graph.Graph` and ``dgl.DGLGraph`` or ``torch_geometric.data.Data``.

DGL and PyG are imported inside the functions only, so the core imports without them. The conversions
themselves live in :mod:`workbench._convert`, which needs no ``Graph`` class: ``Graph.to_dgl``/``from_dgl``/
``to_pyg``/``from_pyg`` call it, and this module gives the same conversions as functions (imports point one way:
``interop -> graph -> _convert``). A DGL edge ``i`` goes ``src[i] -> dst[i]``; the workbench stores the same edge
in row ``dst`` of its destination-major CSR. Node data travels under DGL's usual names: ``feat``, ``label``,
``train_mask``, ``val_mask``, ``test_mask``.

Example:
    >>> from workbench.data import load_graph
    >>> g = load_graph("karate")
    >>> back = from_dgl(to_dgl(g), name="karate")  # doctest: +SKIP
    >>> back.num_edges == g.num_edges  # doctest: +SKIP
    True
"""

from __future__ import annotations

from typing import Any

from workbench._convert import NODE_DATA_NAMES, PYG_NAMES, to_dgl, to_pyg
from workbench.graph import Graph

__all__ = ["to_dgl", "from_dgl", "to_pyg", "from_pyg", "NODE_DATA_NAMES", "PYG_NAMES"]


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
    return Graph.from_dgl(dg, name=name)


def from_pyg(data: Any, *, name: str = "pyg") -> Graph:
    """A :class:`Graph` from a ``torch_geometric.data.Data`` (``edge_index``, optional ``x``, ``y``,
    ``train_mask``/``val_mask``/``test_mask``). Undirected exactly when every edge's reverse is present.

    Raises:
        ParamError: ``data`` has no ``(2, E)`` integer ``edge_index``, or node data of the wrong shape.

    Example:
        >>> from workbench.data import load_graph
        >>> g = load_graph("karate")
        >>> back = from_pyg(to_pyg(g), name="karate")
        >>> back.num_edges == g.num_edges and not back.directed
        True
    """
    return Graph.from_pyg(data, name=name)
