"""The train stage: one program, one training loop, the trainers that plug into it, the exchange and model stages.

* :mod:`workbench.train.program`: :class:`TrainingProgram` (the one program) and :class:`Trainer` (how a run trains:
  full graph, sampled blocks, local parts with model averaging; a schedule's batches and sampled edges are
  components of the mini-batch and full-graph trainers, :mod:`workbench.train.edge_sampled`).
* :mod:`workbench.train.loop`: :class:`TrainLoop` (the one epoch loop) and the :class:`Steps` a trainer plugs in.
* :mod:`workbench.train.exchange`: the ``exchange`` stage registry; methods ``halo``
  (:mod:`workbench.train.full_graph`) and ``block_row`` (:mod:`workbench.train.block_row`, CAGNET 1-D).
* :mod:`workbench.train.staleness`: SANCUS/SkipG staleness as a policy of any exchange
  (:mod:`workbench.train.sancus`: the SANCUS composition and its analysis helpers).
* :mod:`workbench.train.models`: the ``model`` stage (GCN, GraphSAGE-mean); :mod:`workbench.layout.halo`: the plan.
* :mod:`workbench.train.sync`: the ``sync`` stage (``allreduce``; CATGNN's ``model_avg``:
  :mod:`workbench.train.model_averaging`).
* :mod:`workbench.train.objective`: the losses a step minimises (node classification, the link objective).
* :mod:`workbench.train.evaluation`: the ``evaluate`` stage (how an epoch is scored: whole parts, sampled, per part).
* :mod:`workbench.train.step`: the ``step`` stage (how one full-graph forward runs: whole parts, or G3's bins).
* :mod:`workbench.train.timing`: each rank's time per epoch by step phase (logged as ``StepTimes``).

Example:
    >>> from workbench.compose import RunConfig
    >>> RunConfig.compose(graph="karate", num_parts=2).build().name
    'full_graph'
"""

from __future__ import annotations

from workbench.train.block_row import BlockRowBroadcast
from workbench.train.evaluation import EVALUATORS, Evaluator, WholePartEvaluation
from workbench.train.exchange import EXCHANGES, Exchange, RankExchange
from workbench.train.full_graph import FullGraphSteps, FullGraphTrainer, OwnerComputeHalo
from workbench.layout.halo import HaloExchangePlan, build_halo_plans, predicted_halo_bytes
from workbench.train.loop import StepOutput, Steps, TrainLoop, TrainLoopConfig
from workbench.train.models import MODELS, GNNModel
from workbench.train.sancus import compare_runs, staleness_table
from workbench.train.staleness import StalenessPolicy
from workbench.train.program import Trainer, TrainingProgram
from workbench.train.prefetch import PrefetchExchange  # noqa: E402 (registers ``prefetch``)
from workbench.train.edge_sampled import SampledEdges  # noqa: E402 (registers the ``edge_sampled`` trainer)
from workbench.train.sync import SYNCS, Sync  # noqa: E402 (registers ``allreduce`` and ``model_avg``)
from workbench.train.step import STEPS, Binned, Step, WholePart  # noqa: E402 (registers ``whole_part``, ``binned``)

__all__ = ["FullGraphTrainer", "FullGraphSteps", "TrainingProgram", "Trainer", "Steps",
           "SampledEdges", "TrainLoop",
           "TrainLoopConfig", "StepOutput", "EXCHANGES", "Exchange", "RankExchange", "OwnerComputeHalo",
           "BlockRowBroadcast", "StalenessPolicy", "MODELS", "GNNModel", "HaloExchangePlan", "build_halo_plans",
           "predicted_halo_bytes", "compare_runs", "staleness_table", "SYNCS", "Sync", "EVALUATORS", "Evaluator",
           "WholePartEvaluation", "STEPS", "Step", "WholePart", "Binned"]
