"""Baseline partitioners: seeded random and contiguous blocks."""

from __future__ import annotations

import dataclasses

import torch

from workbench.graph import Graph
from workbench.partition.base import Partitioner, register_partitioner

__all__ = ["RandomPartitioner", "BlockPartitioner"]


@register_partitioner
class RandomPartitioner(Partitioner):
    """Balanced random partition: a seeded permutation dealt round-robin, so part sizes differ by at most one.

    The baseline every locality-aware partitioner is compared against (DistDGL's "random" method).

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> g = Graph.from_edges(torch.tensor([0, 1, 2, 3, 4]), torch.tensor([1, 2, 3, 4, 0]), 5)
        >>> RandomPartitioner(seed=0).partition(g, 2).part_sizes().tolist()
        [3, 2]
    """

    name = "random"

    @dataclasses.dataclass(kw_only=True)
    class Config(Partitioner.Config):
        pass

    def _partition(self, graph: Graph, num_parts: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.config.seed)
        perm = torch.randperm(graph.num_nodes, generator=gen)
        node_part = torch.empty(graph.num_nodes, dtype=torch.int64)
        node_part[perm] = torch.arange(graph.num_nodes) % num_parts
        return node_part


@register_partitioner
class BlockPartitioner(Partitioner):
    """Contiguous row blocks: part ``p`` owns vertex ids ``[p*N/P, (p+1)*N/P)`` (SANCUS/CAGNET style).

    Good when vertex ids already carry locality (e.g. a graph sorted by community); otherwise close to random.

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> g = Graph.from_edges(torch.tensor([0, 1, 2, 3, 4]), torch.tensor([1, 2, 3, 4, 0]), 5)
        >>> BlockPartitioner().partition(g, 2).node_part.tolist()
        [0, 0, 0, 1, 1]
    """

    name = "block"

    @dataclasses.dataclass(kw_only=True)
    class Config(Partitioner.Config):
        pass

    def _partition(self, graph: Graph, num_parts: int) -> torch.Tensor:
        n = graph.num_nodes
        # Sizes differ by at most one, larger blocks first (like numpy.array_split).
        sizes = torch.full((num_parts,), n // num_parts, dtype=torch.int64)
        sizes[: n % num_parts] += 1
        return torch.repeat_interleave(torch.arange(num_parts), sizes)
