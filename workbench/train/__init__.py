"""The train stage: full-graph GNN training programs run SPMD on the ranks of a run.

* :mod:`workbench.train.full_graph`: owner-compute halo exchange on edge-cut partitions
  (:class:`FullGraphConfig`).
* :mod:`workbench.train.block_row`: CAGNET-style 1-D block-row broadcasts (:class:`BlockRowConfig`).
* :mod:`workbench.train.sancus`: SANCUS skip-broadcast with bounded staleness (:class:`SancusConfig`).
* :mod:`workbench.train.models`: GCN and GraphSAGE-mean; :mod:`workbench.train.halo`: the exchange plan.

Example:
    >>> from workbench.train import FullGraphConfig
    >>> FullGraphConfig(graph="karate", num_parts=2).build().name
    'full_graph'
"""

from __future__ import annotations

from workbench.train.block_row import BlockRowConfig, BlockRowProgram
from workbench.train.full_graph import FullGraphConfig, FullGraphProgram
from workbench.train.halo import HaloExchangePlan, build_halo_plans, predicted_halo_bytes
from workbench.train.models import GNNModel
from workbench.train.sancus import SancusConfig, SancusProgram, compare_runs, staleness_table

__all__ = ["FullGraphConfig", "FullGraphProgram", "BlockRowConfig", "BlockRowProgram", "SancusConfig",
           "SancusProgram", "GNNModel", "HaloExchangePlan", "build_halo_plans", "predicted_halo_bytes",
           "compare_runs", "staleness_table"]
