"""One sampling epoch of every trainer, owner-routed, without a model (what ``workbench sample`` runs).

Each rank ``r`` (= part ``r``) holds the CSR rows of its part, takes its seeds from the DistDGL split
(:mod:`workbench.sample.split`) and samples every step's mini-batch through an
:class:`~workbench.sample.sources.OwnerRoutedSource`; the ranks are threads of one process talking through
the in-process communicator (:func:`run_thread_ranks`), so the traffic is counted exactly as on the other
runners.

Example:
    >>> import torch
    >>> from workbench.data import load_graph
    >>> from workbench.sample import NeighborSampler, split_seeds
    >>> g = load_graph("karate")
    >>> part = (torch.arange(34) >= 17).long()
    >>> split = split_seeds(torch.arange(34), part, 2)
    >>> stats = sample_epoch(g, part, NeighborSampler(fanouts=(-1,), batch_size=100), split)
    >>> [s.num_seeds for s in stats], sum(s.sampled_edges for s in stats) == g.num_edges
    ([17, 17], True)
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Callable, Optional

import torch

from workbench.graph import Graph
from workbench.sample.base import MiniBatch, Sampler
from workbench.sample.sources import OwnerRoutedSource
from workbench.sample.split import SeedSplit

__all__ = ["RankSampleStats", "sample_epoch", "run_thread_ranks"]


@dataclasses.dataclass
class RankSampleStats:
    """What one trainer's sampling epoch cost."""

    rank: int
    num_batches: int = 0
    num_seeds: int = 0
    sampled_edges: int = 0
    input_nodes: int = 0
    """Summed over batches: the first layer's source vertices (the rows whose features are needed)."""
    remote_input_nodes: int = 0
    """Of those, the ones another part owns (fetched from their owner without a cache)."""
    seconds: float = 0.0
    bytes_by_kind: dict = dataclasses.field(default_factory=dict)
    """Bytes this rank sent, by traffic kind (``sample_req``, ``sample_resp``; ``feature*`` with a cache)."""
    cache_hits: int = 0
    """Remote input rows served by the cache (0 without one)."""
    cache_fill_rows: int = 0
    """Rows the cache's initial fill fetched (kind ``cache_fill``)."""

    @property
    def cache_misses(self) -> int:
        """Remote input rows fetched from their owners."""
        return self.remote_input_nodes - self.cache_hits

    def add(self, mb: MiniBatch, node_part: torch.Tensor) -> None:
        self.num_batches += 1
        self.num_seeds += int(mb.seeds.numel())
        self.sampled_edges += mb.num_sampled_edges
        self.input_nodes += mb.num_input_nodes
        self.remote_input_nodes += int((node_part[mb.input_gid] != self.rank).sum())


def run_thread_ranks(world_size: int, body: Callable[[Any], Any], *, timeout: float = 600.0) -> list[Any]:
    """Run ``body(comm)`` on ``world_size`` thread ranks with an in-process group; return the results by rank.

    A rank that raises aborts the group (the others stop at their next collective) and its error is re-raised.
    """
    from workbench.communicate.inprocess import CommunicationAborted, InProcessGroup

    group = InProcessGroup(world_size, timeout=timeout)
    results: list[Any] = [None] * world_size
    errors: list[Optional[BaseException]] = [None] * world_size

    def run(rank: int) -> None:
        try:
            results[rank] = body(group.communicator(rank))
        except BaseException as exc:  # noqa: BLE001 - re-raised below on the caller's thread
            errors[rank] = exc
            group.abort(exc)

    threads = [threading.Thread(target=run, args=(r,), name=f"sample-rank-{r}") for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = [e for e in errors if e is not None and not isinstance(e, CommunicationAborted)] or \
            [e for e in errors if e is not None]
    if first:
        raise first[0]
    return results


def sample_epoch(graph: Graph, node_part: torch.Tensor, sampler: Sampler, split: SeedSplit, *, epoch: int = 0,
                 keep: bool = False, cache: Any = None) -> list[RankSampleStats] | tuple[list[RankSampleStats], list[list[MiniBatch]]]:
    """Every trainer samples its ``split.num_steps(batch_size)`` mini-batches of ``epoch``, owner-routed.

    Args:
        graph: the whole graph (each rank copies out the rows of its own part).
        node_part: ``(N,)`` owner part of each vertex; the world size is ``split.num_trainers``.
        sampler: the sampling method (its batch size and seed are used).
        split: the seeds of each trainer.
        epoch: the epoch (part of every key).
        keep: also return every rank's mini-batches.
        cache: a cache method (:data:`workbench.cache.CACHES`); each trainer then pulls its input rows
            through a DistDGL-style feature store behind that cache (``graph.features``, or one zero
            column when the graph has none), and its hits are counted.

    Returns:
        Per rank :class:`RankSampleStats` (and, with ``keep``, per rank the list of mini-batches).
    """
    from workbench.layout.halo import local_index

    node_part = torch.as_tensor(node_part, dtype=torch.int64)
    world = split.num_trainers
    row_of_gid = local_index(node_part, world)
    cfg = sampler.config

    def body(comm):
        comm.set_epoch(epoch)
        source = OwnerRoutedSource.from_partition(graph, node_part, comm, row_of_gid)
        stats, kept = RankSampleStats(rank=comm.rank), []
        features = None
        if cache is not None:
            from workbench.cache import FeatureStore

            owned = torch.nonzero(node_part == comm.rank).flatten()
            rows = graph.features[owned] if graph.features is not None else torch.zeros(owned.numel(), 1)
            features = cache.wrap(FeatureStore(owned, rows, node_part, comm), graph=graph)
            stats.cache_fill_rows = features.fill_bytes // features.request_bytes
        start = time.perf_counter()
        for step, seeds in enumerate(split.batches(comm.rank, epoch=epoch, batch_size=cfg.batch_size, seed=cfg.seed)):
            mb = sampler.sample(seeds, source, epoch=epoch, step=step)
            stats.add(mb, node_part)
            if features is not None:
                features.pull(mb.input_gid)
            if keep:
                kept.append(mb)
        stats.seconds = time.perf_counter() - start
        if features is not None:
            stats.cache_hits = features.hits
        stats.bytes_by_kind = comm.counter.bytes_by_kind(epoch)
        return stats, kept

    out = run_thread_ranks(world, body)
    stats = [s for s, _ in out]
    return (stats, [k for _, k in out]) if keep else stats
