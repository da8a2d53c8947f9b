"""The steps of a full-graph rank: one step per epoch, every layer on the whole part, through the exchange.

The full-graph trainer runs these steps in the one loop (:class:`~workbench.train.full_graph.FullGraphTrainer`,
PSC-GCN's sampled edges included: :mod:`workbench.train.edge_sampled`). What varies is given to them, not
subclassed:

* the ``step``, how one forward runs: :class:`WholePartStep` (each layer's aggregation through the exchange), or
  G3's bins (:class:`~workbench.train.bins_program.BinnedStep`: each layer bin by bin after its halo exchange);
* the objective (the run's ``loss`` stage);
* the exchange's own evaluation and events (:meth:`~workbench.train.exchange.RankExchange.evaluation_logits`,
  :meth:`~workbench.train.exchange.RankExchange.epoch_events`: the ``prefetch`` exchange's whole-graph accuracy
  and its cache, sample and pipeline-cost events), which the ``whole_part`` evaluator
  (:mod:`workbench.train.evaluation`) and the steps call.

This module sits below the trainers and the steps' components, so they import it and not each other.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from workbench.summary import merge_fragments
from workbench.train.exchange import RankExchange
from workbench.train.loop import StepOutput, Steps
from workbench.train.objective import NodeTargets

__all__ = ["FullGraphSteps", "WholePartStep"]


class WholePartStep:
    """How one full-graph forward runs: every layer's aggregation on the whole part through the exchange."""

    def logits(self, model: Any, x: torch.Tensor, exchange: RankExchange, node_ids: Optional[torch.Tensor]):
        return model(x, exchange.aggregate, node_ids)

    def after_backward(self) -> None:
        """After the step's backward pass (before the exchange's own hook)."""

    def rank_fragments(self) -> dict[str, dict]:
        """The step's fragments of the rank's result (G3's bin timings: ``step``). Default: none."""
        return {}


class FullGraphSteps(Steps):
    """The steps of a full-graph rank: one step per epoch through the exchange's aggregation. Every owned row's
    logits are computed, so they are scored whole (``evaluate.method=whole_part`` by default).

    Args:
        ctx: the rank's context.
        exchange: the rank's exchange.
        shard: the rank's shard (its owned rows' features, labels and masks; the global training count).
        objective: the run's ``loss`` stage.
        step: how the forward runs (default :class:`WholePartStep`).
    """

    evaluation = "whole_part"

    def __init__(self, ctx, *, exchange: RankExchange, shard: Any, objective: Any = None, step: Any = None):
        super().__init__(ctx, comm=exchange.comm, exchange_kinds=exchange.kinds, objective=objective)
        self.exchange = exchange
        self.step = step if step is not None else WholePartStep()
        self.num_train_global = shard.num_train_global
        dev = ctx.device
        self.x, self.labels = shard.data.features.to(dev), shard.data.labels.to(dev)
        self.masks = torch.stack([m.to(dev) for m in shard.data.masks])    # (3, num_owned): train/val/test
        self.train_rows = self.masks[0].nonzero().squeeze(1)              # found once, not every epoch
        gid = shard.data.global_nid
        self.node_ids = gid.to(dev) if gid is not None else None          # dropout masks are keyed by them

    def on_epoch_start(self, epoch: int) -> None:
        self.exchange.epoch = epoch

    def forward(self, batch: Any) -> StepOutput:
        logits = self.step.logits(self.model, self.x, self.exchange, self.node_ids)
        loss = self.objective.loss(NodeTargets(logits, self.labels, self.train_rows, self.num_train_global))
        return StepOutput(loss, logits, self.labels, self.masks)

    def training_forward_differs(self) -> bool:
        """Whether the training forward's logits are not the model's: dropout, or an active staleness policy whose
        blocks may be stale."""
        return getattr(self.model, "dropout", 0.0) > 0 or self.exchange.policy.active

    def fresh_logits(self) -> torch.Tensor:
        """Every owned row's logits from one more forward in eval mode, every block fresh; its exchange is
        evaluation traffic (kinds ``eval_*``), not the training epoch's."""
        self.model.eval()
        with torch.no_grad(), self.exchange.evaluation():
            logits = self.model(self.x, self.exchange.aggregate, self.node_ids)
        self.model.train()
        return logits

    def after_backward(self, batch: Any, out: StepOutput) -> None:
        self.step.after_backward()
        self.exchange.after_backward(self.model)

    def on_epoch_end(self, epoch: int, metrics: dict, outputs: list[StepOutput]) -> None:
        for event in self.exchange.epoch_events(epoch):
            self.ctx.log(event)

    def rank_fragments(self) -> dict[str, dict]:
        """The exchange's fragments (its own figures; ``staleness`` when a staleness policy is on) and the step's."""
        return merge_fragments(self.exchange.rank_fragments(), self.step.rank_fragments())
