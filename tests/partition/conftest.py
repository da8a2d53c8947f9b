"""Fixtures for the partition tests: factories of tiny graphs.

- ``multigraph(n, m, directed=, seed=, self_loops=True, with_masks=False)``: a random multigraph with duplicates
  and self-loops on purpose (the metrics must ignore them where defined so).
- ``planted(num_blocks, block_size, p_in, p_out, seed, train_block=None)``: a planted-partition graph.

The shared ``karate`` fixture comes from ``tests/conftest.py``.
"""

from __future__ import annotations

import networkx as nx
import pytest
import torch

from workbench.graph import Graph


def random_graph(num_nodes: int, num_edges: int, *, directed: bool, seed: int, self_loops: bool = True,
                 with_masks: bool = False) -> Graph:
    """A random multigraph (duplicates and self-loops included on purpose)."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    if not self_loops:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    if not directed:
        src, dst = torch.cat([src, dst]), torch.cat([dst, src])
    data = {}
    if with_masks:
        r = torch.rand(num_nodes, generator=gen)
        data = dict(train_mask=r < 0.5, val_mask=(r >= 0.5) & (r < 0.7), test_mask=(r >= 0.7) & (r < 0.9))
    return Graph.from_edges(src, dst, num_nodes, directed=directed, name=f"random-{seed}", **data)



def planted_graph(num_blocks: int = 4, block_size: int = 50, p_in: float = 0.2, p_out: float = 0.005,
                  seed: int = 0, train_block: int | None = None) -> Graph:
    """A planted-partition graph; with ``train_block`` all train vertices sit in that block (worst case
    for train balance unless METIS balances them)."""
    g = nx.planted_partition_graph(num_blocks, block_size, p_in, p_out, seed=seed)
    e = torch.tensor(list(g.edges())).T
    n = num_blocks * block_size
    data = {}
    if train_block is not None:
        block = torch.arange(n) // block_size
        data["train_mask"] = (block == train_block) & (torch.arange(n) % 2 == 0)
    return Graph.from_edges(torch.cat([e[0], e[1]]), torch.cat([e[1], e[0]]), n, directed=False,
                            name="planted", **data)


@pytest.fixture
def multigraph():
    return random_graph


@pytest.fixture
def planted():
    return planted_graph
