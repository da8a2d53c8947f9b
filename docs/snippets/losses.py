from typing import Annotated
import dataclasses, torch
from workbench.constraints import Interval
from workbench.train.objective import LOSSES, LinkLoss, Loss

@LOSSES.register
class LabelSmoothing(Loss):
    name = "label_smoothing"               # --set loss.method=label_smoothing

    @dataclasses.dataclass(kw_only=True)
    class Config(Loss.Config):
        smoothing: Annotated[float, Interval(0, 1, closed="left")] = 0.1
        """Probability mass spread evenly over the classes."""

    def loss(self, targets):                  # NodeTargets: a step's logits, labels, rows, divisor
        logits, labels = targets.selected()     # the rows that carry the loss
        summed = torch.nn.functional.cross_entropy(logits, labels, reduction="sum",
                                                   label_smoothing=self.config.smoothing)
        return targets.reduce(summed, labels.numel())   # / the global count: ranks' shares add up

@LOSSES.register
class MarginRanking(LinkLoss):             # LinkTargets and requires={"link pairs"}, from LinkLoss
    name = "margin"                        # --set loss.method=margin (mini-batch training with a schedule)

    @dataclasses.dataclass(kw_only=True)
    class Config(LinkLoss.Config):
        margin: Annotated[float, Interval(0, None, closed="neither")] = 1.0
        """How much higher a positive's score must be than a negative's."""

    def loss(self, targets):                  # LinkTargets: seeds' outputs, positives', negatives', divisor
        pos = (targets.h * targets.pos).sum(-1, keepdim=True)          # (seeds, 1)
        neg = (targets.h.unsqueeze(1) * targets.neg).sum(-1)           # (seeds, negatives)
        return torch.relu(self.config.margin - pos + neg).sum() / targets.total
