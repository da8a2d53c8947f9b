"""The sample stage: neighbour sampling into DGL-layout blocks, local or owner-routed as in DistDGL.

* :mod:`~workbench.sample.base`: :class:`Block`, :class:`MiniBatch`, :class:`SampleKey`, the :class:`Sampler`
  base and its registry :data:`SAMPLERS`.
* :mod:`~workbench.sample.keyed`: the counter-based randomness and the vectorised kernel (the definition of
  what the ``neighbor`` sampler draws).
* :mod:`~workbench.sample.sources`: :class:`LocalSource`, :class:`OwnerRoutedSource`.
* :mod:`~workbench.sample.split`: DistDGL's split of the training vertices and the per-epoch batches.
* :mod:`~workbench.sample.epoch`: one owner-routed sampling epoch of every trainer on thread ranks.

Example:
    >>> import torch
    >>> from workbench.data import load_graph
    >>> from workbench.sample import SAMPLERS, LocalSource
    >>> mb = SAMPLERS.build("neighbor", fanouts=(-1,)).sample(torch.tensor([0]), LocalSource(load_graph("karate")))
    >>> mb.blocks[0].num_edges == int(load_graph("karate").in_degrees()[0])
    True
"""

from __future__ import annotations

from workbench.sample.base import SAMPLERS, Block, MiniBatch, NeighborSource, SampleKey, Sampler, build_block
from workbench.sample.keyed import CSRRows, SampledEdges
from workbench.sample.samplers import DGLSampler, NeighborSampler, dgl_available
from workbench.sample.sources import LocalSource, OwnerRoutedSource, keyed_kernel, owned_rows
from workbench.sample.split import SeedSplit, split_seeds
from workbench.sample.epoch import RankSampleStats, run_thread_ranks, sample_epoch
from workbench.sample.psc import EdgeSampler, PartEdges  # registers the full-graph edge samplers (PSC-GCN)

__all__ = ["SAMPLERS", "Block", "MiniBatch", "NeighborSource", "SampleKey", "Sampler", "build_block", "CSRRows",
           "SampledEdges", "NeighborSampler", "DGLSampler", "dgl_available", "LocalSource", "OwnerRoutedSource",
           "keyed_kernel", "owned_rows", "SeedSplit", "split_seeds", "RankSampleStats",
           "run_thread_ranks", "sample_epoch", "EdgeSampler", "PartEdges"]
