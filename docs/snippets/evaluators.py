from typing import Annotated
import dataclasses
from workbench.constraints import Interval
from workbench.train.evaluation import EVALUATORS, Evaluator, WholePartEvaluation

@EVALUATORS.register
class EveryFew(Evaluator):
    name = "every_few"                     # --set evaluate.method=every_few
    requires = WholePartEvaluation.requires   # every owned row's logits: full-graph training

    @dataclasses.dataclass(kw_only=True)
    class Config(Evaluator.Config):
        every: Annotated[int, Interval(1, None)] = 5
        """A fresh forward every this many epochs (and in the last); the training forward's logits between."""

    def __init__(self, config=None, **options):
        super().__init__(config, **options)
        self.fresh = EVALUATORS.build("whole_part", fresh="always")   # eval mode, every block fresh
        self.cheap = EVALUATORS.build("outputs")                      # no second forward, no traffic

    def evaluate(self, steps, epoch, outputs):   # the rank's steps, the epoch, its steps' outputs
        due = epoch % self.config.every == 0 or epoch == steps.config.epochs - 1
        return (self.fresh if due else self.cheap).evaluate(steps, epoch, outputs)
