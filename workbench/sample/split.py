"""DistDGL's split of the training vertices over trainers, and the per-epoch seed batches.

Synchronous SGD needs every trainer to run the same number of steps per epoch (DistDGL, Zheng et al., 2020). Three
splits, all with trainer ``r`` = part ``r``:

* ``own`` (the sample stage's default): trainer ``r``'s seeds are the training vertices its part owns
  (multi-constraint METIS, ``balance_train``, keeps the counts close, but not equal). Steps per epoch =
  ``max_r ceil(n_r / batch_size)``; a trainer with fewer batches starts its (same) shuffled list again
  (step ``s`` uses its batch ``s mod ceil(n_r / batch_size)``; a part without training vertices gets
  empty batches but still takes part in every step's collectives), so small parts' seeds are over-sampled.
* ``balanced`` (DistDGL's balanced split, Fig. 7; the ``distdgl`` recipe's default): every trainer gets an
  equal share (``n // P``, one more for ``n mod P`` of them), taken from its own part first: trainer ``r``
  keeps ``min(share_r, n_r)`` of its part's training vertices (the lowest ids), and the parts' surplus, in
  the relabeled order (by part, then global id), goes to the short trainers in rank order, so a short
  trainer takes the following parts' surplus as Fig. 7's ranges take their neighbours'. The extra vertices
  go to the trainers whose parts own the most training vertices, so the local seeds
  ``sum_r min(share_r, n_r)`` are the most any equal split keeps (DistDGL's "range to the machine with the
  largest overlap" keeps fewer when a range straddles parts).
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
    >>> part = torch.tensor([0, 0, 0, 0, 0, 1, 1, 2, 2, 2])                  # training counts 5, 2, 3
    >>> [s.tolist() for s in split_seeds(torch.arange(10), part, 3, mode="balanced").seeds]
    [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np
import torch

from workbench._validation import check_choice
from workbench.sample.keyed import mix64, stream_key

__all__ = ["SeedSplit", "split_seeds", "split_ranges", "SPLIT_MODES"]

SPLIT_MODES = ("own", "balanced", "even")


@dataclasses.dataclass(eq=False)
class SeedSplit:
    """The training vertices of each trainer (trainer = rank = part)."""

    seeds: list[torch.Tensor]
    """Per trainer, the ascending global ids of its training vertices (a rank that reads its own part holds its
    own trainer's only: the others' are empty and :attr:`counts` says how many they have)."""
    mode: str = "own"
    counts: Optional[list[int]] = None
    """Per trainer, its number of seeds (``None``: the lengths of :attr:`seeds`)."""

    @property
    def num_trainers(self) -> int:
        return len(self.seeds)

    def sizes(self) -> list[int]:
        """Seeds of every trainer."""
        return list(self.counts) if self.counts is not None else [int(s.numel()) for s in self.seeds]

    def num_steps(self, batch_size: int) -> int:
        """Steps per epoch, the same for every trainer: ``max_r ceil(n_r / batch_size)``."""
        return max((math.ceil(n / batch_size) for n in self.sizes()), default=0)

    def step_sizes(self, batch_size: int) -> list[int]:
        """Per step of an epoch, the seeds of every trainer's batch together (from the counts alone)."""
        steps = np.arange(self.num_steps(batch_size))
        total = np.zeros(steps.size, dtype=np.int64)
        for n in self.sizes():
            if n:
                nb = math.ceil(n / batch_size)
                total += np.where(steps % nb == nb - 1, n - (nb - 1) * batch_size, batch_size)
        return total.tolist()

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
    own = torch.bincount(part, minlength=num_parts).tolist()
    if mode == "own":
        chunks = torch.split(ordered, own)
    elif mode == "balanced":
        chunks = _balanced(ordered, own, num_parts)
    else:
        n = ordered.numel()
        counts = [n // num_parts + (1 if r < n % num_parts else 0) for r in range(num_parts)]
        chunks = torch.split(ordered, counts)
    return SeedSplit(seeds=[torch.sort(c).values for c in chunks], mode=mode)


def split_ranges(own: list[int], mode: str = "own") -> list[list[tuple[int, int, int]]]:
    """The split of :func:`split_seeds` from the parts' training counts alone: per trainer ``r``, the pieces
    ``(q, lo, hi)`` of its seeds, ``lo:hi`` of part ``q``'s training vertices in ascending global id (so a rank
    that holds only its own part's can send each trainer its pieces).

    Example:
        >>> split_ranges([5, 2, 3], "balanced")
        [[(0, 0, 4)], [(1, 0, 2), (0, 4, 5)], [(2, 0, 3)]]
    """
    check_choice(mode, "mode", "split_ranges", SPLIT_MODES)
    p, n = len(own), sum(own)
    starts = np.concatenate([[0], np.cumsum(own)]).tolist()         # each part's place in the (part, id) order

    def pieces(lo: int, hi: int) -> list[tuple[int, int, int]]:     # lo:hi of the ordered ids, cut by part
        return [(q, max(lo, starts[q]) - starts[q], min(hi, starts[q + 1]) - starts[q])
                for q in range(p) if max(lo, starts[q]) < min(hi, starts[q + 1])]

    if mode == "own":
        return [[(r, 0, own[r])] if own[r] else [] for r in range(p)]
    if mode == "even":
        counts = [n // p + (1 if r < n % p else 0) for r in range(p)]
        bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
        return [pieces(bounds[r], bounds[r + 1]) for r in range(p)]
    share = [n // p] * p
    for r in sorted(range(p), key=lambda r: (-own[r], r))[: n % p]:
        share[r] += 1
    surplus = [(q, share[q], own[q]) for q in range(p) if own[q] > share[q]]     # the pool, in part order
    out, at = [], 0
    for r in range(p):
        kept = min(share[r], own[r])
        mine = [(r, 0, kept)] if kept else []
        need, lo = share[r] - kept, at
        at += need
        pos = 0
        for q, a, b in surplus:                                          # pool[lo:lo + need], cut by part
            x, y = max(lo, pos), min(lo + need, pos + b - a)
            if x < y:
                mine.append((q, a + x - pos, a + y - pos))
            pos += b - a
        out.append(mine)
    return out


def _balanced(ordered: torch.Tensor, own: list[int], num_parts: int) -> list[torch.Tensor]:
    """Equal shares, each from its own part first (``ordered``: the training ids by part, then id)."""
    n = ordered.numel()
    share = [n // num_parts] * num_parts
    for r in sorted(range(num_parts), key=lambda r: (-own[r], r))[: n % num_parts]:
        share[r] += 1                                                  # the extras to the fullest parts
    kept, surplus = [], []
    for r, mine in enumerate(torch.split(ordered, own)):
        kept.append(mine[: share[r]])
        surplus.append(mine[share[r]:])
    pool = torch.cat(surplus) if surplus else ordered[:0]
    lo, chunks = 0, []
    for r in range(num_parts):
        need = share[r] - kept[r].numel()
        chunks.append(torch.cat([kept[r], pool[lo: lo + need]]))
        lo += need
    return chunks
