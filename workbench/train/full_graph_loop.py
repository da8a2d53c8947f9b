"""The steps of a full-graph rank: one step per epoch, every layer through the exchange's aggregation.

The full-graph trainer (:class:`~workbench.train.full_graph.FullGraphTrainer`) runs them in the one loop on every
rank (G3's :class:`~workbench.train.bins_program.BinnedFullGraphSteps` compute each layer bin by bin; PSC-GCN's
:class:`~workbench.train.prefetch.PrefetchSteps` add the prefetch exchange's events); this module sits below
them all, so they import it and not each other.
"""

from __future__ import annotations

from typing import Any

import torch

from workbench.train.exchange import RankExchange
from workbench.train.loop import StepOutput, Steps
from workbench.train.objective import NodeTargets

__all__ = ["FullGraphSteps"]


class FullGraphSteps(Steps):
    """The steps of a full-graph rank: one step per epoch through the exchange's aggregation."""

    def __init__(self, ctx, *, exchange: RankExchange, shard: Any, objective: Any = None):
        super().__init__(ctx, comm=exchange.comm, exchange_kinds=exchange.kinds, objective=objective)
        self.exchange = exchange
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
        logits = self.model(self.x, self.exchange.aggregate, self.node_ids)
        loss = self.objective.loss(NodeTargets(logits, self.labels, self.train_rows, self.num_train_global))
        return StepOutput(loss, logits, self.labels, self.masks)

    def evaluate(self, epoch: int, outputs: list[StepOutput]) -> dict:
        # accuracy without dropout and, under a staleness policy, with every block fresh (SANCUS's accuracy is
        # the model's, not the stale training forward's): one more forward pass, eval mode, whose exchange is
        # evaluation traffic (kinds eval_*), not the training epoch's
        policy = self.exchange.policy
        if (getattr(self.model, "dropout", 0.0) > 0 or policy.active
                or getattr(policy.config, "eval_pass", "auto") == "always"):
            self.model.eval()
            with torch.no_grad(), self.exchange.evaluation():
                logits = self.model(self.x, self.exchange.aggregate, self.node_ids)
            self.model.train()
            o = outputs[0]
            outputs = [StepOutput(o.loss, logits, o.labels, o.masks)]
        return super().evaluate(epoch, outputs)

    def after_backward(self, batch: Any, out: StepOutput) -> None:
        self.exchange.after_backward(self.model)

    def extra_result(self) -> dict:
        return self.exchange.result()
