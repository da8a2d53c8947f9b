"""Cache harness: a tiny partitioned feature table, request lists, and the conformance body of a cache method.

Every row of :func:`table` is recognisable (row ``v`` = ``[v, v + 0.5, v + 0.25, ...]``); :func:`node_part_for`
spreads its ``NUM_NODES`` vertices over the ranks; :func:`make_store` builds a rank's
:class:`~workbench.cache.kvstore.FeatureStore` from the global table; :func:`requests` gives each rank's
id lists (duplicates, owned and remote ids, empty lists). :func:`exercise_cache` wraps the store with a cache
method (a registered name, a :class:`~workbench.cache.policies.Cache` subclass or an instance), pulls the
lists for a few epochs and reports rows, sizes, stats and counted bytes: it runs on thread ranks
(:func:`workbench.testing.run_ranks`) and on gloo ranks alike. The checks on its report are
:func:`workbench.testing.check_cache`.

Example:
    >>> from workbench.testing import run_ranks
    >>> out = run_ranks(2, lambda comm: exercise_cache(comm, "degree", 0.5, epochs=1))
    >>> [r["rows_ok"] for r in out], [r["capacity"] for r in out]
    ([True, True], [18, 12])
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from workbench.cache import CACHES, FeatureStore

__all__ = ["NUM_NODES", "WIDTH", "table", "node_part_for", "degrees_for", "probabilities_for", "make_store",
           "requests", "cache_policy", "exercise_cache"]

NUM_NODES = 60
WIDTH = 3


def table(num_nodes: int = NUM_NODES, width: int = WIDTH) -> torch.Tensor:
    """Row ``v`` = ``[v, v + 0.5, v + 0.25, ...]``: every row is recognisable."""
    return torch.arange(num_nodes, dtype=torch.float32)[:, None] + torch.arange(width) / (2.0 ** torch.arange(width))


def node_part_for(world_size: int, num_nodes: int = NUM_NODES, seed: int = 0) -> torch.Tensor:
    """A seeded random owner rank per vertex."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, world_size, (num_nodes,), generator=gen)


def degrees_for(num_nodes: int = NUM_NODES) -> torch.Tensor:
    """A degree per vertex (what ``degree`` ranks by)."""
    return (torch.arange(num_nodes) * 37) % 11  # ties on purpose


def probabilities_for(num_nodes: int = NUM_NODES) -> torch.Tensor:
    """An inclusion probability per vertex, in [0, 1] (what ``inclusion`` ranks by)."""
    return ((torch.arange(num_nodes) * 13) % 17) / 16.0


def make_store(comm, node_part: torch.Tensor, feats: torch.Tensor) -> FeatureStore:
    """This rank's store of the rows it owns (``node_part == rank``), in a shuffled order."""
    owned = (node_part == comm.rank).nonzero().flatten()
    perm = torch.randperm(owned.numel(), generator=torch.Generator().manual_seed(comm.rank))
    return FeatureStore(owned[perm], feats[owned[perm]], node_part, comm)  # any order of owned rows


def requests(rank: int, step: int, num_nodes: int = NUM_NODES) -> torch.Tensor:
    """A random id list with duplicates; every third step of rank 1 is empty."""
    if rank == 1 and step % 3 == 2:
        return torch.empty(0, dtype=torch.int64)
    gen = torch.Generator().manual_seed(1000 * rank + step)
    k = int(torch.randint(1, 40, (1,), generator=gen))
    return torch.randint(0, num_nodes, (k,), generator=gen)


def cache_policy(method: Any, ratio: float, **options: Any) -> Any:
    """A cache method at ``ratio``: ``method`` is a registered name, a ``Cache`` subclass, or an instance (its
    config with ``ratio`` and ``options`` applied)."""
    if isinstance(method, str):
        return CACHES.build(method, ratio=ratio, **options)
    if isinstance(method, type):
        return method(ratio=ratio, **options)
    return type(method)(method.config.replace(ratio=ratio, **options))


def exercise_cache(comm, method: Any, ratio: float, *, epochs: int = 2, steps: int = 5,
                   seed: Optional[int] = None) -> dict:
    """Build ``method`` at ``ratio`` over this rank's store, pull ``steps`` lists per epoch; report everything.

    ``seed`` (default: the method's own) goes to methods whose config has a ``seed`` field (``random``)."""
    p = comm.world_size
    node_part, feats = node_part_for(p), table()
    store = make_store(comm, node_part, feats)
    policy = cache_policy(method, ratio)
    if seed is not None and "seed" in policy.Config.field_names():
        policy = cache_policy(policy, ratio, seed=seed)
    cached = policy.wrap(
        store, degrees=degrees_for(), probabilities=probabilities_for())
    out = {"capacity": cached.capacity, "fill_bytes": cached.fill_bytes, "cached0": cached.cached_gid.tolist(),
           "rows_ok": True, "sizes": [], "stats": [], "bytes": {}, "num_candidates": int(cached.candidates.numel())}
    for epoch in range(epochs):
        comm.set_epoch(epoch)
        for step in range(steps):
            ids = requests(comm.rank, step)
            rows = cached.pull(ids)
            out["rows_ok"] &= rows.shape == (ids.numel(), WIDTH) and torch.equal(rows, feats[ids])
            out["sizes"].append(cached.size)
        out["stats"].append(cached.epoch_stats(epoch).to_dict())
        out["bytes"][epoch] = comm.counter.bytes_by_kind(epoch)
    out["cached"] = cached.cached_gid.tolist()
    return out
