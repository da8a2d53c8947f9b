"""Shared tiny-graph fixtures (fast: each builds in milliseconds).

- ``karate``: Zachary's karate club (34 vertices, undirected, one-hot features, 2 classes, masks).
- ``small_sbm``: a 200-vertex, 4-block SBM (undirected, 16 features, 4 classes, masks), seed 0.
- ``random_graph(n, m, seed, directed=False)``: a factory for a cleaned random graph with about ``m``
  undirected edges (no self-loops, no duplicates), 8 features, 3 classes and masks.
- ``edges_to_part_zero``: the name of a vertex-cut partitioner registered for the test that puts every edge
  in part 0 (its owners leave every other part empty), removed afterwards.

Graphs are shared across tests: treat them as read-only (use ``g.with_data(...)`` to change node data).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from workbench.graph import Graph


@pytest.fixture(scope="session")
def karate() -> Graph:
    from workbench.data import load_graph

    return load_graph("karate")


@pytest.fixture(scope="session")
def small_sbm() -> Graph:
    from workbench.data import load_graph

    return load_graph("sbm:num_nodes=200,num_blocks=4,avg_degree=8,num_features=16,seed=0")


def make_random_graph(n: int, m: int, seed: int = 0, *, directed: bool = False) -> Graph:
    """A cleaned uniform random graph with ``n`` vertices and up to ``m`` distinct edges (pairs if undirected)."""
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


@pytest.fixture
def random_graph():
    """Factory fixture: ``random_graph(n, m, seed=0, directed=False) -> Graph``."""
    return make_random_graph


@pytest.fixture()
def edges_to_part_zero():
    import dataclasses

    from workbench.partition import PARTITIONERS, Partitioner, register_partitioner

    @register_partitioner
    class EdgesToPartZero(Partitioner):
        name = "test-edges-to-zero"
        kind = "vertex-cut"

        @dataclasses.dataclass(kw_only=True)
        class Config(Partitioner.Config):
            pass

        def _partition(self, graph, num_parts):
            return torch.zeros(graph.num_edges, dtype=torch.int64)

    try:
        yield EdgesToPartZero.name
    finally:
        PARTITIONERS.pop(EdgesToPartZero.name, None)
