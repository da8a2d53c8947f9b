"""The partition stage: partitioners, typed results, exact metrics and the DistDGL export.

Example:
    >>> import torch
    >>> from workbench.graph import Graph
    >>> from workbench.partition import partition
    >>> g = Graph.from_edges(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 0]), 4)
    >>> result = partition(g, 2, method="random", seed=0)
    >>> result.metrics().num_parts
    2
"""

from __future__ import annotations

from workbench.partition.base import (
    PARTITIONERS,
    PartitionResult,
    Partitioner,
    Relabeling,
    get_partitioner,
    partition,
    register_partitioner,
)
from workbench.partition.metrics import PartitionMetrics, compute_metrics
from workbench.partition.simple import BlockPartitioner, RandomPartitioner
from workbench.partition.metis import MetisPartitioner
from workbench.partition.distdgl import export_distdgl
from workbench.partition.bytegnn import ByteGNNPartitioner
from workbench.partition.gnn_metrics import SamplingMetrics, sampling_metrics
from workbench.partition.hypergraph import HypergraphPartitioner, StochasticHypergraphPartitioner
from workbench.partition.g3 import G3Partitioner
from workbench.partition.kaminpar import KaMinParPartitioner
import workbench.partition.streaming  # noqa: F401,E402  (registers the streaming partitioners)

__all__ = [
    "PARTITIONERS",
    "PartitionResult",
    "PartitionMetrics",
    "Partitioner",
    "Relabeling",
    "RandomPartitioner",
    "BlockPartitioner",
    "MetisPartitioner",
    "compute_metrics",
    "export_distdgl",
    "G3Partitioner",
    "KaMinParPartitioner",
    "get_partitioner",
    "partition",
    "register_partitioner",
    "ByteGNNPartitioner",
    "SamplingMetrics",
    "sampling_metrics",
    "HypergraphPartitioner",
    "StochasticHypergraphPartitioner",
]
