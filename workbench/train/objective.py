"""What a training step minimises: the two objectives every trainer's steps compute their loss with.

* :func:`node_loss`: cross-entropy of node classification over some rows of a step's logits. Full-graph steps
  take their training rows and divide by the GLOBAL number of training rows (so the ranks' losses add up to the
  single-process mean loss); a mini-batch step takes all its seeds and divides by the global batch size of the
  step; model averaging divides by its own part's training rows (each replica trains on its part alone).
* :func:`link_loss`: GraphSAGE's unsupervised link objective over positive and negative pairs (ByteGNN's
  unsupervised training).

Both are written once here, so a trainer chooses what to sum and what to divide by, never how the loss is
computed.

Example:
    >>> import torch
    >>> logits, labels = torch.tensor([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]]), torch.tensor([0, 1, 0])
    >>> full = node_loss(logits, labels)                               # every row, the mean
    >>> half = node_loss(logits, labels, torch.tensor([True, True, False]), 4)   # 2 rows of 4 global ones
    >>> round(float(full), 4), round(float(half), 4)
    (0.3157, 0.0635)
"""

from __future__ import annotations

from typing import Optional

import torch

__all__ = ["node_loss", "link_loss"]


def node_loss(logits: torch.Tensor, labels: torch.Tensor, rows: Optional[torch.Tensor] = None,
              total: Optional[int] = None) -> torch.Tensor:
    """Cross-entropy of ``rows`` of ``logits`` summed and divided by ``total``.

    Args:
        logits: ``(n, classes)``.
        labels: ``(n,)``.
        rows: a boolean mask or the rows' indices (computed once: no mask scan per epoch); None = every row.
        total: the divisor (a global count, so that ranks' shares add up); None = the mean over the rows.

    Returns:
        A scalar with a gradient; 0 (still attached to ``logits``) when no row is selected.
    """
    if rows is not None:
        idx = rows if rows.dtype != torch.bool else rows.nonzero().squeeze(1)
        logits, labels = logits.index_select(0, idx), labels.index_select(0, idx)
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
