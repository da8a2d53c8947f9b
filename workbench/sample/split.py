"""DistDGL's split of the training vertices over trainers, and the per-epoch seed batches.

Synchronous SGD needs every trainer to run the same number of steps per epoch (digest 000 §2.6). Two
splits, both with trainer ``r`` = part ``r``:

* ``own`` (default, DistDGL's locality rule): trainer ``r``'s seeds are the training vertices its part
  owns (multi-constraint METIS, ``balance_train``, keeps the counts close). Steps per epoch =
  ``max_r ceil(n_r / batch_size)``; a trainer with fewer batches starts its (same) shuffled list again
  (step ``s`` uses its batch ``s mod ceil(n_r / batch_size)``; a part without training vertices gets
  empty batches but still takes part in every step's collectives).
* ``even`` (DGL's ``node_split(force_even=True)``): the training ids in part order (DistDGL's relabeled
  order: by part, then global id) are cut into ``P`` contiguous chunks whose sizes differ by at most one,
  chunk ``r`` to trainer ``r``; exact balance for a little locality.

Each epoch shuffles a trainer's seeds by the keys ``mix(v ^ K)`` with ``K = stream_key(seed, epoch, -1, -1)``
(distinct vertices get distinct keys, so it is a permutation, and it does not depend on the rank).

Example:
    >>> import torch
    >>> split = split_seeds(torch.tensor([0, 1, 2, 5]), torch.tensor([0, 0, 0, 1, 1, 1]), 2)
    >>> [s.tolist() for s in split.seeds], split.num_steps(2)
    ([[0, 1, 2], [5]], 2)
    >>> [b.numel() for b in split.batches(1, epoch=0, batch_size=2, seed=0)]
    [1, 1]
    >>> [s.tolist() for s in split_seeds(torch.tensor([0, 1, 2, 5]), torch.tensor([0, 0, 0, 1, 1, 1]), 2,
    ...                                  mode="even").seeds]
    [[0, 1], [2, 5]]
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from workbench._validation import check_choice
from workbench.sample.keyed import mix64, stream_key

__all__ = ["SeedSplit", "split_seeds", "SPLIT_MODES"]

SPLIT_MODES = ("own", "even")


@dataclasses.dataclass(eq=False)
class SeedSplit:
    """The training vertices of each trainer (trainer = rank = part)."""

    seeds: list[torch.Tensor]
    """Per trainer, the ascending global ids of its training vertices."""
    mode: str = "own"

    @property
    def num_trainers(self) -> int:
        return len(self.seeds)

    def num_steps(self, batch_size: int) -> int:
        """Steps per epoch, the same for every trainer: ``max_r ceil(n_r / batch_size)``."""
        return max((math.ceil(s.numel() / batch_size) for s in self.seeds), default=0)

    def batches(self, rank: int, *, epoch: int, batch_size: int, seed: int) -> list[torch.Tensor]:
        """Trainer ``rank``'s ``num_steps(batch_size)`` seed batches of ``epoch`` (unique ids in each)."""
        own = self.seeds[rank]
        steps = self.num_steps(batch_size)
        if own.numel() == 0:
            return [own.clone() for _ in range(steps)]
        keys = mix64(own.numpy().astype(np.uint64) ^ np.uint64(stream_key(seed, epoch, -1, -1)))
        shuffled = own[torch.from_numpy(np.argsort(keys, kind="stable"))]
        mine = list(torch.split(shuffled, batch_size))
        return [mine[s % len(mine)] for s in range(steps)]


def split_seeds(train_gid: torch.Tensor, node_part: torch.Tensor, num_parts: int, mode: str = "own") -> SeedSplit:
    """Split the training vertices ``train_gid`` over ``num_parts`` trainers (see the module docstring)."""
    check_choice(mode, "mode", "split_seeds", SPLIT_MODES)
    train_gid = torch.as_tensor(train_gid, dtype=torch.int64)
    node_part = torch.as_tensor(node_part, dtype=torch.int64)
    part = node_part[train_gid]
    order = torch.argsort(part * max(node_part.numel(), 1) + train_gid)   # by (part, global id)
    ordered, part = train_gid[order], part[order]
    if mode == "own":
        counts = torch.bincount(part, minlength=num_parts).tolist()
    else:
        n = ordered.numel()
        counts = [n // num_parts + (1 if r < n % num_parts else 0) for r in range(num_parts)]
    chunks = [torch.sort(c).values for c in torch.split(ordered, counts)]
    return SeedSplit(seeds=chunks, mode=mode)
