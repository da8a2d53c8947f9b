"""DistDGL's split of the training vertices and the per-epoch batches."""

from __future__ import annotations

import math

import pytest
import torch

from workbench._validation import ParamError
from workbench.sample import split_seeds


@pytest.fixture
def setup():
    gen = torch.Generator().manual_seed(0)
    node_part = torch.randint(0, 3, (300,), generator=gen)
    train = torch.nonzero(torch.rand(300, generator=gen) < 0.4).flatten()
    return train, node_part


def test_own_split_uses_each_parts_training_vertices(setup):
    train, node_part = setup
    split = split_seeds(train, node_part, 3)
    for r in range(3):
        assert torch.equal(split.seeds[r], train[node_part[train] == r])
    b = 16
    steps = split.num_steps(b)
    assert steps == max(math.ceil(s.numel() / b) for s in split.seeds)
    for r in range(3):
        batches = split.batches(r, epoch=0, batch_size=b, seed=0)
        assert len(batches) == steps                                  # every trainer runs the same steps
        assert all(torch.unique(x).numel() == x.numel() <= b for x in batches)
        own = math.ceil(split.seeds[r].numel() / b)
        first = torch.cat(batches[:own])
        assert torch.equal(torch.sort(first).values, split.seeds[r])  # each seed once per pass
        for s in range(own, steps):                                   # shorter trainers start again
            assert torch.equal(batches[s], batches[s % own])


def test_even_split_is_dgl_force_even(setup):
    train, node_part = setup
    split = split_seeds(train, node_part, 3, mode="even")
    sizes = [s.numel() for s in split.seeds]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == train.numel()
    order = torch.argsort(node_part[train] * 1000 + train)           # relabeled order: by part, then id
    ordered = train[order]
    lo = 0
    for r in range(3):
        assert torch.equal(split.seeds[r], torch.sort(ordered[lo:lo + sizes[r]]).values)
        lo += sizes[r]
    assert sizes == [train.numel() // 3 + (1 if r < train.numel() % 3 else 0) for r in range(3)]


@pytest.mark.parametrize("skew", [0.0, 0.5, 0.9])
def test_balanced_split_is_equal_and_takes_its_own_part_first(skew):
    """DistDGL's Fig. 7: equal shares (within one vertex), each trainer's share from its own part first, and
    the local seeds the most any equal split keeps: sum_r min(share_r, n_r) with the extra vertices on the
    fullest parts (checked against every choice of the trainers that get one more)."""
    from itertools import combinations

    gen = torch.Generator().manual_seed(1)
    P, N = 4, 400
    node_part = torch.randint(0, P, (N,), generator=gen)
    node_part[torch.rand(N, generator=gen) < skew] = 0                # skewed: part 0 owns most training ids
    train = torch.nonzero(torch.rand(N, generator=gen) < 0.3).flatten()
    split = split_seeds(train, node_part, P, mode="balanced")
    sizes = [s.numel() for s in split.seeds]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == train.numel()
    assert torch.equal(torch.sort(torch.cat(split.seeds)).values, train)          # a partition of the ids
    own = torch.bincount(node_part[train], minlength=P).tolist()
    local = [int((node_part[s] == r).sum()) for r, s in enumerate(split.seeds)]
    assert local == [min(sizes[r], own[r]) for r in range(P)]                     # own part first
    n = train.numel()
    best = max(sum(min(n // P + (r in extra), own[r]) for r in range(P))
               for extra in combinations(range(P), n % P))
    assert sum(local) == best                                                     # maximal locality
    even = split_seeds(train, node_part, P, mode="even")
    assert sum(local) >= sum(int((node_part[s] == r).sum()) for r, s in enumerate(even.seeds))
    if skew:
        assert split.num_steps(16) < split_seeds(train, node_part, P).num_steps(16)   # no repeated batches


def test_shuffle_is_seeded_by_seed_and_epoch(setup):
    train, node_part = setup
    split = split_seeds(train, node_part, 3)
    run = lambda seed, epoch: torch.cat(split.batches(0, epoch=epoch, batch_size=8, seed=seed))  # noqa: E731
    assert torch.equal(run(0, 0), run(0, 0))
    assert not torch.equal(run(0, 0), run(0, 1))
    assert not torch.equal(run(0, 0), run(1, 0))


def test_bad_mode_lists_the_valid_ones(setup):
    with pytest.raises(ParamError, match=r"must be one of \['own', 'balanced', 'even'\]"):
        split_seeds(*setup, 3, mode="uneven")
