"""The harness's pytest fixtures, as a plugin: ``pytest_plugins = ["workbench.testing.fixtures"]`` in a conftest.

- ``karate`` (session): Zachary's karate club (34 vertices, one-hot features, 2 classes, masks);
- ``small_sbm`` (session): a 200-vertex, 4-block SBM (16 features, 4 classes, masks), seed 0;
- ``random_graph``: the factory :func:`workbench.testing.graphs.random_graph` ``(n, m, seed=0, directed=False)``;
- ``multigraph``, ``planted``: the factories :func:`~workbench.testing.graphs.multigraph` and
  :func:`~workbench.testing.graphs.planted_graph`;
- ``tiny``: the factory :func:`~workbench.testing.graphs.tiny_graph`;
- ``dask_client`` (module): a ``distributed.Client`` on an embedded ``LocalCluster`` with 2 single-threaded
  worker processes on 127.0.0.1 (:func:`workbench.testing.ranks.local_cluster`), shared by a module's tests;
- ``edges_to_part_zero``: the name of a vertex-cut partitioner, registered for the test, that puts every edge
  in part 0 (its owners leave every other part empty); removed afterwards.

Graphs of session fixtures are shared across tests: treat them as read-only (``g.with_data(...)`` makes a copy
with other node data).

Example:
    >>> from workbench.testing import fixtures
    >>> sorted(n for n in dir(fixtures) if n in ("karate", "dask_client"))
    ['dask_client', 'karate']
"""

from __future__ import annotations

import pytest

from workbench.graph import Graph
from workbench.testing import graphs as _graphs
from workbench.testing.ranks import local_cluster


@pytest.fixture(scope="session")
def karate() -> Graph:
    return _graphs.karate()


@pytest.fixture(scope="session")
def small_sbm() -> Graph:
    return _graphs.small_sbm()


@pytest.fixture
def random_graph():
    """Factory fixture: ``random_graph(n, m, seed=0, directed=False) -> Graph``."""
    return _graphs.random_graph


@pytest.fixture
def multigraph():
    """Factory fixture: ``multigraph(n, m, directed=, seed=, self_loops=True, with_masks=False) -> Graph``."""
    return _graphs.multigraph


@pytest.fixture
def planted():
    """Factory fixture: ``planted(num_blocks, block_size, p_in, p_out, seed, train_block=None) -> Graph``."""
    return _graphs.planted_graph


@pytest.fixture
def tiny():
    """Factory fixture: ``tiny(num_nodes=60, num_blocks=3, ..., directed=False, seed=0) -> Graph``."""
    return _graphs.tiny_graph


@pytest.fixture(scope="module")
def dask_client():
    with local_cluster(2) as client:
        yield client


@pytest.fixture()
def edges_to_part_zero():
    import dataclasses

    import torch

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
