"""GNN workbench: composable stages for distributed GNN training (partition, sample, cache, communicate, train).

The core never imports DGL at module import time, nor ``widgets``, ``recipes`` or Panel.

Example:
    >>> import workbench as wb
    >>> g = wb.load_graph("karate")
    >>> g.num_nodes
    34
"""

__version__ = "0.1.0"

from workbench.graph import Graph  # noqa: E402


def load_graph(spec, **kwargs):
    """Load or generate a graph from a spec string (a path, ``karate``, ``sbm:num_nodes=1000,seed=0``...).

    See :func:`workbench.data.load_graph`.
    """
    from workbench.data import load_graph as _load

    return _load(spec, **kwargs)


__all__ = ["Graph", "load_graph", "__version__"]
