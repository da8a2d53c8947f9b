"""Streaming partitioners in bounded memory (CATGNN/SPRING and the edge-streaming baselines).

``stream_partition(path, P, method=...)`` reads an edge file in chunks and keeps only per-vertex state
(degrees, owners, replica bitsets, cluster volumes); every method is also a registered partitioner, so
``partition(graph, P, method="spring")`` streams an in-memory graph's edge list through the same kernels.

Example:
    >>> import torch
    >>> from workbench.graph import Graph
    >>> from workbench.partition import partition
    >>> g = Graph.from_edges(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 0]), 4)
    >>> partition(g, 2, method="spring").node_part.tolist()  # the 4-cycle cut into {0, 3} and {1, 2}
    [0, 1, 1, 0]
"""

from __future__ import annotations

from workbench.partition.streaming.base import StreamMetrics, StreamPartition, StreamingPartitioner, stream_partition
from workbench.partition.streaming.methods import (STREAMING_METHODS, ClusteringPartitioner, DBHPartitioner,
                                                   GreedyPartitioner, HashPartitioner, HDRFPartitioner,
                                                   SpringPartitioner, TwoPSLPartitioner)
from workbench.partition.streaming.stream import EdgeFileStream, GraphEdgeStream

__all__ = ["STREAMING_METHODS", "StreamMetrics", "StreamPartition", "StreamingPartitioner", "stream_partition",
           "EdgeFileStream", "GraphEdgeStream", "ClusteringPartitioner", "DBHPartitioner", "GreedyPartitioner",
           "HashPartitioner", "HDRFPartitioner", "SpringPartitioner", "TwoPSLPartitioner"]
