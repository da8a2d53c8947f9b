"""What a training step minimises: the ``loss`` stage (the run's objective), one registered method per loss.

The section is called ``loss``, not ``objective``, because a partitioner's ``objective`` (``cut``, ``vol``) already
has that name.

Every trainer's steps compute their loss through the run's ``loss`` stage (``--set loss.method=NAME``), so a new
loss is one small class, not an edit of five trainers. A step hands it typed targets:

* :class:`NodeTargets` (node classification): the logits of a step's rows, their labels, the rows that carry the
  loss and the divisor. Full-graph steps take their training rows and divide by the GLOBAL number of training
  rows (so the ranks' losses add up to the single-process mean loss); a mini-batch step takes all its seeds and
  divides by the global batch size of the step; model averaging divides by its own part's training rows (each
  replica trains on its part alone).
* :class:`LinkTargets` (link prediction): the seeds' outputs with their positive and negative partners' outputs
  (ByteGNN's unsupervised DAG: seeds, one in-neighbour, uniform negatives), divided by the global batch size.

The methods (:data:`LOSSES`):

=================  ====================================================  ==========================================
method             loss                                                  needs
=================  ====================================================  ==========================================
``cross_entropy``  cross-entropy of the rows' labels (the default)       ``node labels``: every trainer
``link``           GraphSAGE's unsupervised objective (``num_negative``  ``link pairs``: mini-batch training with a
                   negatives per seed)                                   schedule (its workers sample the pairs)
=================  ====================================================  ==========================================

What a trainer cannot serve is refused before start by the one composition check (``--set loss.method=link``
without a schedule). A new objective declares the targets it takes and what it ``requires``; the docs'
architecture page adds label smoothing from outside the package, and :func:`workbench.testing.check_loss`
checks one (its ranks' shares add up to the whole loss; it trains).

Example:
    >>> import torch
    >>> logits, labels = torch.tensor([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]]), torch.tensor([0, 1, 0])
    >>> ce = LOSSES.build("cross_entropy")
    >>> full = ce.loss(NodeTargets(logits, labels))                                # every row, the mean
    >>> half = ce.loss(NodeTargets(logits, labels, torch.tensor([True, True, False]), 4))  # 2 rows of 4 global
    >>> round(float(full), 4), round(float(half), 4)
    (0.3157, 0.0635)
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar, Optional

import torch

from workbench.constraints import Interval
from workbench.stages import Stage, registry

__all__ = ["LOSSES", "Loss", "NodeTargets", "LinkTargets", "CrossEntropy", "LinkLoss", "loss_of", "node_loss",
           "link_loss"]

LOSSES = registry("loss")
"""The ``loss`` registry: what a step minimises."""


@dataclasses.dataclass(eq=False)
class NodeTargets:
    """What a node-classification objective scores in one step.

    Attributes:
        logits: ``(n, classes)`` the logits of the step's rows.
        labels: ``(n,)`` their labels.
        rows: the rows that carry the loss, a boolean mask or indices (computed once: no mask scan per epoch);
            None = every row.
        total: the divisor of the summed loss (a global count, so that the ranks' shares add up); None = the mean
            over the rows.
    """

    logits: torch.Tensor
    labels: torch.Tensor
    rows: Optional[torch.Tensor] = None
    total: Optional[int] = None

    def selected(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits, labels)`` of the rows that carry the loss."""
        if self.rows is None:
            return self.logits, self.labels
        idx = self.rows if self.rows.dtype != torch.bool else self.rows.nonzero().squeeze(1)
        return self.logits.index_select(0, idx), self.labels.index_select(0, idx)

    def reduce(self, summed: torch.Tensor, count: int) -> torch.Tensor:
        """A loss summed over ``count`` selected rows, divided as the step asks (``total``, or the mean)."""
        return summed / (self.total if self.total is not None else max(count, 1))


@dataclasses.dataclass(eq=False)
class LinkTargets:
    """What a link objective scores in one step.

    Attributes:
        h: ``(s, d)`` the seeds' outputs.
        pos: ``(s, d)`` each seed's positive partner's output.
        neg: ``(s, k, d)`` its ``k`` negative partners' outputs.
        total: the divisor of the summed loss (the global batch size).
    """

    h: torch.Tensor
    pos: torch.Tensor
    neg: torch.Tensor
    total: int


class Loss(Stage):
    """Base of the ``loss`` methods: :meth:`loss` of one step's :attr:`targets`.

    A method declares the targets it takes (``targets``; a trainer's steps build them) and what it ``requires``
    (``node labels``: every trainer; ``link pairs``: the scheduled trainer's unsupervised DAG). The loss of a step
    is this rank's share: summed over its rows and divided by ``targets.total``, the ranks' shares add up to the
    global loss (what :func:`workbench.testing.check_loss` checks)."""

    kind = "loss"
    targets: ClassVar[type] = NodeTargets
    """The targets :meth:`loss` takes: :class:`NodeTargets` or :class:`LinkTargets`."""
    requires = frozenset({"node labels"})

    def loss(self, targets) -> torch.Tensor:
        """A scalar with a gradient: this rank's share of the step's loss."""
        raise NotImplementedError


@LOSSES.register
class CrossEntropy(Loss):
    """Cross-entropy of node classification (:func:`node_loss`): every system's supervised objective."""

    name = "cross_entropy"

    @dataclasses.dataclass(kw_only=True)
    class Config(Loss.Config):
        """No options (its own class, so that a config names its method: ``CrossEntropy.Config()``)."""

    def loss(self, targets: NodeTargets) -> torch.Tensor:
        return node_loss(targets.logits, targets.labels, targets.rows, targets.total)


@LOSSES.register
class LinkLoss(Loss):
    """GraphSAGE's unsupervised link objective (:func:`link_loss`) over each seed's positive (an in-neighbour)
    and ``num_negative`` uniform negatives: ByteGNN's unsupervised training (Fig. 9's three-branch DAG, sampled by
    the schedule's workers). Its runs still report the classification accuracy of the seeds' outputs, which is not
    a target there."""

    name = "link"
    targets = LinkTargets
    requires = frozenset({"link pairs"})

    @dataclasses.dataclass(kw_only=True)
    class Config(Loss.Config):
        num_negative: Annotated[int, Interval(1, None)] = 1
        """Negatives per seed, drawn uniformly from the graph."""

    def loss(self, targets: LinkTargets) -> torch.Tensor:
        return link_loss(targets.h, targets.pos, targets.neg, targets.total)


def loss_of(config) -> Loss:
    """The ``loss`` stage of a run config (``cross_entropy`` for a config without that section)."""
    if getattr(config, "loss", None) is None:
        return CrossEntropy()
    return LOSSES.build(config.method("loss"), config.loss)


def node_loss(logits: torch.Tensor, labels: torch.Tensor, rows: Optional[torch.Tensor] = None,
              total: Optional[int] = None) -> torch.Tensor:
    """Cross-entropy of ``rows`` of ``logits`` summed and divided by ``total``.

    Args:
        logits: ``(n, classes)``.
        labels: ``(n,)``.
        rows: a boolean mask or the rows' indices; None = every row.
        total: the divisor (a global count, so that ranks' shares add up); None = the mean over the rows.

    Returns:
        A scalar with a gradient; 0 (still attached to ``logits``) when no row is selected.
    """
    logits, labels = NodeTargets(logits, labels, rows).selected()
    if not labels.numel():
        return logits.sum() * 0.0
    if total is None:
        return torch.nn.functional.cross_entropy(logits, labels)
    return torch.nn.functional.cross_entropy(logits, labels, reduction="sum") / total


def link_loss(h: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, total: int) -> torch.Tensor:
    """GraphSAGE's unsupervised objective ``-log σ(h_s·h_p) - Σ_n log σ(-h_s·h_n)`` summed over the seeds and
    divided by ``total`` (the global batch size).

    Args:
        h: ``(s, d)`` the seeds' outputs.
        pos: ``(s, d)`` each seed's positive partner's output.
        neg: ``(s, k, d)`` its ``k`` negative partners' outputs.
        total: the divisor.

    Example:
        >>> h = torch.ones(2, 3)
        >>> round(float(link_loss(h, h, -h.unsqueeze(1), 2)), 4)   # both terms log σ(3)
        0.0972
    """
    logsig = torch.nn.functional.logsigmoid
    return -(logsig((h * pos).sum(-1)).sum() + logsig(-(h.unsqueeze(1) * neg).sum(-1)).sum()) / total
