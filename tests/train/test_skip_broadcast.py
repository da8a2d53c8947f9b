"""The skip-broadcast communicator wrapper (lives in workbench.communicate; tested with the trainer)."""

from __future__ import annotations

import threading

import torch

from workbench.communicate.inprocess import InProcessGroup
from workbench.communicate.skip_broadcast import SkipBroadcastCommunicator


def _spmd(world_size, body):
    group = InProcessGroup(world_size, timeout=20)
    out = [None] * world_size
    errors = []

    def run(rank):
        try:
            out[rank] = body(SkipBroadcastCommunicator(group.communicator(rank)))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
            group.abort(exc)

    ts = [threading.Thread(target=run, args=(r,)) for r in range(world_size)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    return out


def test_flags_agree_when_ranks_disagree_and_gradients_pass():
    def body(comm):
        seen = []
        for epoch in range(3):
            comm.set_epoch(epoch)
            # only rank 2 asks for root 1 at epoch 2: everybody must execute that round
            flags = comm.agree(0, torch.tensor([False, comm.rank == 2 and epoch == 2, False]))
            seen.append(flags)
            for root in range(3):
                buf = torch.full((2,), 10.0 * epoch + root) if comm.rank == root else torch.zeros(2)
                comm.broadcast(buf, src=root, kind="bcast_fwd", layer=0)
                g = torch.full((1,), float(epoch)) if comm.rank == root else torch.zeros(1)
                assert float(comm.broadcast(g, src=root, kind="bcast_bwd", layer=0)) == epoch
        return seen, {k: v.rows.tolist() for k, v in comm.cache.blocks.items()}, dict(comm.versions), comm.counter

    out = _spmd(3, body)
    flags, cache, versions, counter = out[0]
    assert flags[0] == [True] * 3                  # never broadcast -> ACTIVE
    assert flags[1] == [False] * 3 and flags[2] == [False, True, False]
    assert versions == {(0, 0): 0, (0, 1): 2, (0, 2): 0}
    assert cache[(0, 1)] == [21.0, 21.0] and cache[(0, 2)] == [2.0, 2.0]
    bwd = sum(b for (e, s, d, k, l), (b, m) in counter._records.items() if k == "bcast_bwd")
    assert bwd > 0 and "control" in counter.bytes_by_kind()
    # every rank holds the same flags
    assert all(o[0] == flags for o in out)


def test_a_side_communicator_of_the_wrapper_is_the_inner_ones_and_plain():
    """``comm.side("sample")`` on the wrapper (a sampling thread beside a staleness run): every verb on it moves and
    counts as the inner communicator's side does, beside the wrapper's own all-reduces (the conformance check)."""
    from workbench.testing.communicator import check_side_communicator_results, exercise_side_communicator

    def body(comm):
        assert not isinstance(comm.side("sample"), SkipBroadcastCommunicator)
        return exercise_side_communicator(comm)

    check_side_communicator_results(_spmd(2, body))
