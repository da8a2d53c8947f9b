"""The sync stage: how the ranks' model replicas are kept together.

A run's ``sync`` section (:class:`~workbench.compose.RunConfig`) picks one method (``--set sync.method=NAME``):

=============== =============================================================================================
``allreduce``   synchronous SGD: every step's gradients are all-reduced (kind ``allreduce``) before the
                optimiser steps, so every replica takes the same step (DistDGL, SANCUS, HP-GCN, PSC-GCN, G3,
                ByteGNN). Whichever trainer the other sections choose (full graph, sampled blocks, a
                schedule, edge samples, G3 bins) runs it.
``model_avg``   CATGNN's local training with periodic model averaging: each part trains alone on its own
                standalone subgraph (owned targets plus a ``halo_hops`` halo; full batch, or mini-batches of
                any block sampler sampled inside the part), and every ``interval`` epochs the replicas are
                replaced by ``sum_k alpha_k W_k`` in ONE all-reduce (kind ``model_avg``). It trains with its own
                trainer (:class:`~workbench.train.model_averaging.ModelAveragingTrainer`): no embedding exchange,
                no feature source (so no cache), no schedule.
=============== =============================================================================================

At run time the loop (:class:`~workbench.train.loop.TrainLoop`) holds the rank's sync and calls it twice: after
every step's backward pass (:meth:`Sync.after_step`: ``allreduce`` sums the weight gradients there) and after the
epoch's last step, before the evaluation (:meth:`Sync.after_epoch`: ``model_avg`` averages the replicas there when
the epoch is due). The loop offers its replicas through ``loop.replicas()``: ``[(model, weight), ...]``, one
model and weight ``1 / world_size`` by default, every part's model with its ``alpha_k`` under model averaging.

A sync that trains its own way names its trainer (``trains_with``: its key in ``workbench.composition.TRAINERS``);
the composition check (:mod:`workbench.composition`) then refuses what that trainer cannot use, before any worker
starts.

Example:
    >>> from workbench.compose import RunConfig
    >>> cfg = RunConfig.compose(graph="karate", sync={"method": "model_avg", "interval": 5})
    >>> cfg.method("sync"), cfg.sync.interval, cfg.method("exchange"), type(cfg.build().trainer).__name__
    ('model_avg', 5, 'none', 'ModelAveragingTrainer')
    >>> cfg.replace(cache="degree", sample="neighbor").build()
    Traceback (most recent call last):
    ...
    workbench._validation.ParamError: The 'cache.method' parameter of RunConfig must be none or a method that local training per part with model averaging (CATGNN) can use: 'degree' needs batches that read their remote input rows through a feature source (what a cache wraps), provided by mini-batch training on sampled blocks, mini-batch training with a schedule, full-graph training on sampled edges. Got 'degree' instead.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, ClassVar, Optional

import torch

from workbench.constraints import Interval, Options
from workbench.stages import Stage, registry

__all__ = ["SYNCS", "Sync", "GradientAllReduce", "ModelAveraging", "WEIGHTINGS", "REPLICA_INITS", "allreduce_gradients"]

SYNCS = registry("sync")
"""Every registered sync method, by name (``--set sync.method=NAME``)."""

WEIGHTINGS = ("train", "uniform")
REPLICA_INITS = ("same", "independent")
EVAL_SAMPLES = ("full", "train")


def allreduce_gradients(model: torch.nn.Module, comm, world_size: int) -> None:
    """Sum the weight gradients over ranks in one flat all-reduce (kind ``allreduce``)."""
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    if world_size == 1:
        return
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    comm.all_reduce(flat, kind="allreduce")
    offset = 0
    for p in params:
        n = p.numel()
        p.grad.copy_(flat[offset:offset + n].view_as(p))
        offset += n


class Sync(Stage):
    """Base of the sync methods."""

    kind = "sync"
    trains_with: ClassVar[Optional[str]] = None
    """The key (:data:`workbench.composition.TRAINERS`) of the trainer a sync trains with when it is not the other
    sections' (None: theirs)."""

    def after_step(self, loop: Any) -> None:
        """After a step's backward pass, before the optimiser step (timed as ``grad_sync``)."""

    def after_epoch(self, loop: Any, epoch: int) -> None:
        """After the epoch's last step, before its evaluation (timed as ``grad_sync``)."""

    def rank_fragments(self) -> dict[str, dict]:
        """What this sync adds to the rank's result, by fragment name (``{"sync": {"num_syncs": ...}}``; default:
        none): see :meth:`Steps.rank_fragments <workbench.train.loop.Steps.rank_fragments>`."""
        return {}


@SYNCS.register
class GradientAllReduce(Sync):
    """Synchronous SGD: the gradients of every step all-reduced (kind ``allreduce``), one step on every replica."""

    name = "allreduce"

    @dataclasses.dataclass(kw_only=True)
    class Config(Sync.Config):
        pass

    def after_step(self, loop: Any) -> None:
        allreduce_gradients(loop.model, loop.comm, loop.ctx.world_size)


@SYNCS.register
class ModelAveraging(Sync):
    """CATGNN (§3.3): parts train alone; every ``interval`` epochs ``W = sum_k alpha_k W_k``."""

    name = "model_avg"
    trains_with = "model_averaging"

    @dataclasses.dataclass(kw_only=True)
    class Config(Sync.Config):
        interval: Annotated[int, Interval(1, None)] = 1
        """Average the models every this many epochs (and after the last one)."""
        halo_hops: Annotated[int, Interval(0, 3)] = 1
        """Halo depth K of each part's subgraph: 0 (no full neighbourhood), 1 (CATGNN's default), 2, 3."""
        weighting: Annotated[str, Options(*WEIGHTINGS)] = "train"
        """Averaging weights: 'train' (share of training vertices, CATGNN) or 'uniform'."""
        replica_init: Annotated[str, Options(*REPLICA_INITS)] = "same"
        """'same' seed on every part (identical replicas, as a broadcast from rank 0 would give, without its
        traffic) or 'independent' (seed + part id, the reference code's choice)."""
        eval_sample: Annotated[str, Options(*EVAL_SAMPLES)] = "full"
        """A partition folder's evaluation in mini-batch mode: 'full' (every in-neighbour: exact, the paper's
        full-neighbour inference; on a power-law graph a batch reaches much of its part's 2-hop neighbourhood,
        about a full-batch pass over the part each epoch) or 'train' (the sampler's fan-outs, one key for every
        batch, as DistDGL evaluates: as cheap as a training step per vertex)."""

    def __init__(self, config: Optional["ModelAveraging.Config"] = None, **options: Any):
        super().__init__(config, **options)
        self.num_syncs = 0

    def due(self, epoch: int, epochs: int) -> bool:
        """Whether the replicas are averaged after ``epoch`` (every ``interval`` epochs and after the last).

        Example:
            >>> [e for e in range(7) if ModelAveraging(interval=3).due(e, 7)]
            [2, 5, 6]
        """
        return (epoch + 1) % self.config.interval == 0 or epoch + 1 == epochs

    def after_epoch(self, loop: Any, epoch: int) -> None:
        if self.due(epoch, loop.config.epochs):
            self.average(loop.replicas(), loop.comm, loop.ctx.world_size)

    def average(self, replicas: list, comm: Any, world_size: int) -> None:
        """``W = sum_k alpha_k W_k`` over every replica of every rank: one all-reduce of the weighted flat
        parameters (kind ``model_avg``), copied into each replica."""
        flat = None
        for model, alpha in replicas:
            v = torch.cat([p.detach().reshape(-1) for p in model.parameters()]) * alpha
            flat = v if flat is None else flat + v
        if world_size > 1:
            comm.all_reduce(flat, kind="model_avg")
        for model, _ in replicas:
            offset = 0
            with torch.no_grad():
                for p in model.parameters():
                    p.copy_(flat[offset:offset + p.numel()].view_as(p))
                    offset += p.numel()
        self.num_syncs += 1

    def rank_fragments(self) -> dict[str, dict]:
        return {"sync": {"num_syncs": self.num_syncs}}
