"""Tiny seeded graphs for tests: each builds in milliseconds, the same graph for the same arguments.

- :func:`tiny_graph`: a planted-partition graph with community labels, noisy features and a 50/25/25 split
  (what the training tests train on);
- :func:`random_graph`: a cleaned uniform random graph (no self-loops, no duplicates) with features, labels
  and masks;
- :func:`multigraph`: a random multigraph with duplicates and self-loops on purpose (partition metrics);
- :func:`planted_graph`: networkx's planted-partition graph, optionally with every train vertex in one block;
- :func:`karate` and :func:`small_sbm`: the built-in karate club and a 200-vertex, 4-block SBM.

Example:
    >>> g = tiny_graph(num_nodes=30, seed=1)
    >>> g.num_nodes, g.features.shape[1], int(g.train_mask.sum())
    (30, 6, 15)
    >>> tiny_graph(num_nodes=30, seed=1).num_edges == g.num_edges
    True
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from workbench.graph import Graph

__all__ = ["tiny_graph", "random_graph", "multigraph", "planted_graph", "karate", "small_sbm", "SMALL_SBM"]

SMALL_SBM = "sbm:num_nodes=200,num_blocks=4,avg_degree=8,num_features=16,seed=0"
"""The graph spec of :func:`small_sbm`."""


def tiny_graph(num_nodes: int = 60, num_blocks: int = 3, p_in: float = 0.25, p_out: float = 0.02,
               num_features: int = 6, directed: bool = False, seed: int = 0) -> Graph:
    """A small planted-partition graph with community labels, noisy features and a 50/25/25 split."""
    gen = torch.Generator().manual_seed(seed)
    block = torch.arange(num_nodes) % num_blocks
    same = block[:, None] == block[None, :]
    prob = torch.where(same, torch.tensor(p_in), torch.tensor(p_out))
    adj = torch.rand(num_nodes, num_nodes, generator=gen) < prob
    adj.fill_diagonal_(False)
    if not directed:
        adj = torch.triu(adj, 1)
        adj = adj | adj.T
    dst, src = adj.nonzero(as_tuple=True)
    feats = torch.randn(num_nodes, num_features, generator=gen) + torch.nn.functional.one_hot(
        block, num_features).float() * 1.5
    perm = torch.randperm(num_nodes, generator=gen)
    train = torch.zeros(num_nodes, dtype=torch.bool)
    val = torch.zeros_like(train)
    test = torch.zeros_like(train)
    train[perm[: num_nodes // 2]] = True
    val[perm[num_nodes // 2: 3 * num_nodes // 4]] = True
    test[perm[3 * num_nodes // 4:]] = True
    return Graph.from_edges(src, dst, num_nodes, directed=directed, features=feats, labels=block,
                            train_mask=train, val_mask=val, test_mask=test, name="tiny")


def random_graph(n: int, m: int, seed: int = 0, *, directed: bool = False) -> Graph:
    """A cleaned uniform random graph with ``n`` vertices and up to ``m`` distinct edges (pairs if undirected),
    8 features, 3 classes and a 50/25/25 split.

    Example:
        >>> g = random_graph(20, 40, seed=3)
        >>> g.num_nodes, g.directed, g.features.shape
        (20, False, torch.Size([20, 8]))
    """
    from workbench.data.cleaning import clean_graph
    from workbench.data.synthetic import random_split

    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = rng.integers(0, n, m)
    tr, va, te = random_split(n, 0.5, 0.25, 0.25, rng=rng)
    g = Graph.from_edges(src, dst, num_nodes=n, directed=True,
                         features=torch.from_numpy(rng.standard_normal((n, 8), dtype=np.float32)),
                         labels=torch.from_numpy(rng.integers(0, 3, n)), train_mask=tr, val_mask=va, test_mask=te,
                         name=f"random(n={n},m={m},seed={seed})")
    return clean_graph(g, symmetrize=not directed)[0]


def multigraph(num_nodes: int, num_edges: int, *, directed: bool, seed: int, self_loops: bool = True,
               with_masks: bool = False) -> Graph:
    """A random multigraph (duplicates and self-loops included on purpose: metrics must ignore them where
    defined so); ``with_masks`` adds about 50/20/20 % train/val/test masks."""
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
                  seed: int = 0, train_block: Optional[int] = None) -> Graph:
    """A planted-partition graph (networkx); with ``train_block`` all train vertices sit in that block (the
    worst case for train balance unless the partitioner balances them)."""
    import networkx as nx

    g = nx.planted_partition_graph(num_blocks, block_size, p_in, p_out, seed=seed)
    e = torch.tensor(list(g.edges()), dtype=torch.int64).reshape(-1, 2).T
    n = num_blocks * block_size
    data = {}
    if train_block is not None:
        block = torch.arange(n) // block_size
        data["train_mask"] = (block == train_block) & (torch.arange(n) % 2 == 0)
    return Graph.from_edges(torch.cat([e[0], e[1]]), torch.cat([e[1], e[0]]), n, directed=False,
                            name="planted", **data)


def karate() -> Graph:
    """Zachary's karate club: 34 vertices, undirected, one-hot features, 2 classes, masks."""
    from workbench.data import load_graph

    return load_graph("karate")


def small_sbm() -> Graph:
    """A 200-vertex, 4-block SBM (undirected, 16 features, 4 classes, masks), seed 0 (:data:`SMALL_SBM`)."""
    from workbench.data import load_graph

    return load_graph(SMALL_SBM)
