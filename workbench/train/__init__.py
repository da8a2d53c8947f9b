"""The train stage: one training loop, the exchange and model stages, and the full-graph program.

* :mod:`workbench.train.loop`: :class:`TrainLoop` (the one epoch loop, with hooks) and shared pieces.
* :mod:`workbench.train.exchange`: the ``exchange`` stage registry; methods ``halo``
  (:mod:`workbench.train.full_graph`) and ``block_row`` (:mod:`workbench.train.block_row`, CAGNET 1-D).
* :mod:`workbench.train.staleness`: SANCUS/SkipG staleness as a policy of any exchange
  (:mod:`workbench.train.sancus`: the SANCUS composition and its analysis helpers).
* :mod:`workbench.train.models`: the ``model`` stage (GCN, GraphSAGE-mean); :mod:`workbench.train.halo`: the plan.
* :mod:`workbench.train.sync`: the ``sync`` stage (``allreduce``; CATGNN's ``model_avg``:
  :mod:`workbench.train.model_averaging`).
* :mod:`workbench.train.timing`: each rank's time per epoch by step phase (logged as ``StepTimes``).

Example:
    >>> from workbench.train import FullGraphConfig
    >>> FullGraphConfig(graph="karate", num_parts=2).build().name
    'full_graph'
"""

from __future__ import annotations

from workbench.train.block_row import BlockRowBroadcast, BlockRowConfig
from workbench.train.exchange import EXCHANGES, Exchange, RankExchange
from workbench.train.full_graph import FullGraphConfig, FullGraphLoop, FullGraphProgram, OwnerComputeHalo
from workbench.train.halo import HaloExchangePlan, build_halo_plans, predicted_halo_bytes
from workbench.train.loop import StepOutput, TrainLoop, TrainLoopConfig
from workbench.train.models import MODELS, GNNModel
from workbench.train.sancus import SancusConfig, compare_runs, staleness_table
from workbench.train.staleness import StalenessPolicy
from workbench.train.prefetch import PrefetchExchange, PrefetchProgram  # noqa: E402 (registers ``prefetch``)
from workbench.train.sync import SYNCS, Sync  # noqa: E402 (registers ``allreduce`` and ``model_avg``)

__all__ = ["FullGraphConfig", "FullGraphProgram", "FullGraphLoop", "BlockRowConfig", "SancusConfig", "TrainLoop",
           "TrainLoopConfig", "StepOutput", "EXCHANGES", "Exchange", "RankExchange", "OwnerComputeHalo",
           "BlockRowBroadcast", "StalenessPolicy", "MODELS", "GNNModel", "HaloExchangePlan", "build_halo_plans",
           "predicted_halo_bytes", "compare_runs", "staleness_table", "SYNCS", "Sync"]
