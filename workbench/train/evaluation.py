"""How an epoch is scored: the ``evaluate`` stage, one registered method per way to evaluate.

After an epoch's training steps the one loop asks the run's evaluator for the epoch's global loss and
train/val/test accuracy (:meth:`Evaluator.evaluate`: the rank's :class:`~workbench.train.loop.Steps`, the epoch,
its steps' outputs). Every figure is global: the loss is the sum of the ranks' shares and the accuracies come
from one small all-reduce of correct/total counts (kind ``metrics``; :func:`global_metrics`).

The methods (:data:`EVALUATORS`):

==============  ==========================================================  ==========================================
method          how                                                         needs
==============  ==========================================================  ==========================================
``auto``        the trainer's own way (the default): ``whole_part`` for     nothing
                full-graph training, ``sampled`` for mini-batch training,
                ``per_part`` for model averaging
``outputs``     the training steps' own logits: no second forward, no       nothing
                evaluation traffic (a mini-batch run then scores only its
                training seeds: val/test accuracy ``None``)
``whole_part``  every owned row's logits: the training forward's, or one    ``whole-part logits``: full-graph training,
                more forward in eval mode with every block fresh            edge-sampled training
                (``fresh``: ``auto`` when dropout or staleness makes the
                training forward differ from the model's, or ``always``)
``sampled``     the training seeds' logits, then the rank's validation      ``sampled evaluation``: mini-batch
                (every epoch) and test (last epoch) vertices sampled with   training
                the training fan-outs (traffic kinds ``eval_*``)
``per_part``    the averaged model over the parts (CATGNN: rank 0 over a    ``one model per part``: model averaging
                folder's parts, or the whole graph)
==============  ==========================================================  ==========================================

A new evaluator is one small class registered here, from outside the package too (the docs' architecture page
adds one that scores with a fresh forward only every few epochs); what a trainer cannot serve is refused before
start by the one composition check (``--set evaluate.method=whole_part`` with a sampler).

Example:
    >>> import torch
    >>> from workbench.communicate.inprocess import InProcessGroup
    >>> comm = InProcessGroup(1).communicator(0)
    >>> logits, labels = torch.tensor([[2.0, 0.0], [0.0, 2.0], [2.0, 0.0]]), torch.tensor([0, 1, 1])
    >>> yes, no = torch.ones(3, dtype=torch.bool), torch.zeros(3, dtype=torch.bool)
    >>> global_metrics(comm, 1, torch.tensor(0.5), logits, labels, (yes, no, no))
    {'loss': 0.5, 'train_acc': 0.6666666666666666, 'val_acc': None, 'test_acc': None}
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Optional

import torch

from workbench.constraints import Options
from workbench.stages import Stage, registry

__all__ = ["EVALUATORS", "Evaluator", "AutoEvaluation", "OutputsEvaluation", "WholePartEvaluation",
           "SampledEvaluation", "evaluator_of", "global_metrics", "evaluate_outputs"]

EVALUATORS = registry("evaluate")
"""The ``evaluate`` registry: how an epoch is scored."""


def global_metrics(comm, world_size: int, loss: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor,
                   masks: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> dict[str, Optional[float]]:
    """Global loss and train/val/test accuracy from one all-reduce of 7 numbers (kind ``metrics``)."""
    hit = logits.detach().argmax(dim=1) == labels
    m = masks if isinstance(masks, torch.Tensor) else torch.stack(list(masks))     # (3, num_rows)
    counts = torch.stack([(m & hit).sum(1), m.sum(1)], 1).reshape(-1)             # hit, total per split
    t = torch.cat([loss.detach().reshape(1).to(torch.float64), counts.to(torch.float64)])
    # NCCL reduces device tensors only: t stays on the logits' device
    if world_size > 1:
        comm.all_reduce(t, kind="metrics")
    t = t.cpu()
    acc = [float(t[1 + 2 * k] / t[2 + 2 * k]) if t[2 + 2 * k] > 0 else None for k in range(3)]
    return {"loss": float(t[0]), "train_acc": acc[0], "val_acc": acc[1], "test_acc": acc[2]}


def evaluate_outputs(comm, world_size: int, outputs: list) -> dict[str, Optional[float]]:
    """Global loss and train/val/test accuracy of an epoch from its steps' outputs (one step: its own figures;
    several: the mean step loss and every step's rows) through :func:`global_metrics`."""
    if len(outputs) == 1:
        o = outputs[0]
        return global_metrics(comm, world_size, o.loss, o.logits, o.labels, o.masks)
    if not outputs:
        return {"loss": 0.0, "train_acc": None, "val_acc": None, "test_acc": None}
    loss = torch.stack([o.loss.detach() for o in outputs]).mean()
    logits = torch.cat([o.logits.detach() for o in outputs])
    labels = torch.cat([o.labels for o in outputs])
    masks = tuple(torch.cat([o.masks[k] for o in outputs]) for k in range(3))
    return global_metrics(comm, world_size, loss, logits, labels, masks)


class Evaluator(Stage):
    """Base of the ``evaluate`` methods: :meth:`evaluate` scores an epoch on a rank.

    A method declares what it ``requires`` of the trainer's steps (``whole-part logits``, ``sampled evaluation``,
    ``one model per part``); the composition check refuses a run whose trainer lacks it, before anything loads.
    Its evaluation runs in the loop's ``evaluate`` phase; traffic it causes should be in the communicator's
    ``eval_`` phase (``with steps.ctx.comm.phase("eval_"):``), so it stays out of the training bytes."""

    kind = "evaluate"

    def evaluate(self, steps: Any, epoch: int, outputs: list) -> dict[str, Optional[float]]:
        """``{"loss", "train_acc", "val_acc", "test_acc"}`` of the epoch, the same on every rank (``None``: no
        row of that split was scored)."""
        raise NotImplementedError


@EVALUATORS.register
class OutputsEvaluation(Evaluator):
    """The epoch scored on its training steps' own logits (:func:`evaluate_outputs`): no second forward and no
    evaluation traffic. Under dropout or staleness these are the training forward's, not the model's, accuracies;
    a mini-batch run scores only its training seeds (val/test accuracy ``None``)."""

    name = "outputs"

    @dataclasses.dataclass(kw_only=True)
    class Config(Evaluator.Config):
        """No options."""

    def evaluate(self, steps: Any, epoch: int, outputs: list) -> dict[str, Optional[float]]:
        return evaluate_outputs(steps.comm, steps.ctx.world_size, outputs)


@EVALUATORS.register
class WholePartEvaluation(Evaluator):
    """Every owned row's logits: the training forward's when it is the model's, else one more forward in eval mode
    with every block fresh (SANCUS's accuracy is the model's, not the stale training forward's); its exchange is
    evaluation traffic (kinds ``eval_*``). An exchange that evaluates its own way comes first (the ``prefetch``
    exchange's whole-graph forward, ``exchange.full_eval``)."""

    name = "whole_part"
    requires = frozenset({"whole-part logits"})

    @dataclasses.dataclass(kw_only=True)
    class Config(Evaluator.Config):
        fresh: Annotated[str, Options("auto", "always")] = "auto"
        """When to run the fresh forward: ``auto`` only when dropout or an active staleness policy makes the
        training forward differ from the model's; ``always`` every epoch (SANCUS's recipes, so that the CAGNET
        baseline is scored the same way)."""

    def evaluate(self, steps: Any, epoch: int, outputs: list) -> dict[str, Optional[float]]:
        own = steps.exchange.evaluation_logits(steps.model, steps.x)   # an exchange that evaluates its own way
        if own is not None:
            return global_metrics(steps.comm, steps.ctx.world_size, outputs[0].loss, own, steps.labels, steps.masks)
        if self.config.fresh == "always" or steps.training_forward_differs():
            outputs = [dataclasses.replace(outputs[0], logits=steps.fresh_logits())]
        return evaluate_outputs(steps.comm, steps.ctx.world_size, outputs)


@EVALUATORS.register
class SampledEvaluation(Evaluator):
    """The training seeds' logits (train accuracy), then this rank's validation vertices every epoch and its test
    vertices in the last epoch, sampled with the training fan-outs (traffic kinds ``eval_*``, timed as
    ``evaluate``). The loss is the mean over the epoch's steps of the global step loss."""

    name = "sampled"
    requires = frozenset({"sampled evaluation"})

    @dataclasses.dataclass(kw_only=True)
    class Config(Evaluator.Config):
        """No options (the evaluation batches take the training sampler's fan-outs and batch size)."""

    def evaluate(self, steps: Any, epoch: int, outputs: list) -> dict[str, Optional[float]]:
        parts = [(torch.cat([o.logits for o in outputs]), torch.cat([o.labels for o in outputs]), 0)] \
            if outputs else []
        parts.append((*steps.evaluate_split(steps.shard.val_split, epoch), 1))
        if epoch == steps.config.epochs - 1:
            parts.append((*steps.evaluate_split(steps.shard.test_split, epoch), 2))
        logits = torch.cat([p[0] for p in parts])
        labels = torch.cat([p[1] for p in parts])
        which = torch.cat([torch.full((p[1].numel(),), p[2], device=logits.device) for p in parts])
        masks = tuple(which == k for k in range(3))
        loss = torch.stack([o.loss.detach() for o in outputs]).mean() if outputs else torch.zeros(())
        return global_metrics(steps.comm, steps.ctx.world_size, loss, logits, labels, masks)


@EVALUATORS.register
class AutoEvaluation(Evaluator):
    """The trainer's own evaluation (the default): the method its steps name (``Steps.evaluation``:
    ``whole_part``, ``sampled`` or ``per_part``) with that method's defaults."""

    name = "auto"

    @dataclasses.dataclass(kw_only=True)
    class Config(Evaluator.Config):
        """No options (the chosen method's defaults)."""

    def __init__(self, config: Optional[Stage.Config] = None, **options: Any):
        super().__init__(config, **options)
        self._chosen: Optional[Evaluator] = None

    def evaluate(self, steps: Any, epoch: int, outputs: list) -> dict[str, Optional[float]]:
        if self._chosen is None:
            self._chosen = EVALUATORS.build(type(steps).evaluation)
        return self._chosen.evaluate(steps, epoch, outputs)


def evaluator_of(config: Any) -> Evaluator:
    """The ``evaluate`` stage of a run config (``auto`` for a config without that section)."""
    if getattr(config, "evaluate", None) is None:
        return AutoEvaluation()
    return EVALUATORS.build(config.method("evaluate"), config.evaluate)

