from __future__ import annotations

import threading
import time

import pytest
import torch

from workbench._validation import ParamError
from workbench.communicate.inprocess import CommunicationAborted, CommunicationTimeout, InProcessGroup
from workbench.testing import check_communicator_results, exercise_communicator


def run_ranks(group: InProcessGroup, body):
    results, errors = [None] * group.world_size, [None] * group.world_size

    def target(rank):
        try:
            results[rank] = body(group.communicator(rank))
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors[rank] = exc
            group.abort(exc)

    threads = [threading.Thread(target=target, args=(r,), daemon=True) for r in range(group.world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a rank hung"
    return results, errors


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_every_verb_values_and_bytes(world_size):
    results, errors = run_ranks(InProcessGroup(world_size), exercise_communicator)
    assert errors == [None] * world_size
    check_communicator_results(results)


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_a_side_communicator_runs_beside_the_main_one(world_size):
    """``comm.side("sample")``: a second group of the same ranks; one thread runs every verb on it while another
    runs all-reduces on the main one; its bytes land in the rank's one counter, its calls and seconds do not."""
    from workbench.testing.communicator import check_side_communicator_results, exercise_side_communicator

    results, errors = run_ranks(InProcessGroup(world_size), exercise_side_communicator)
    assert errors == [None] * world_size
    check_side_communicator_results(results)


def test_aborting_a_group_wakes_its_side_groups():
    group = InProcessGroup(2)
    side = group.side_group("sample")
    assert group.side_group("sample") is side and group.side_group("other") is not side
    woke = []

    def wait():
        try:
            side.communicator(0).all_reduce(torch.ones(1))   # rank 1 never comes
        except CommunicationAborted as exc:
            woke.append(exc)

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    time.sleep(0.05)
    group.abort(ValueError("boom"))
    t.join(5)
    assert woke and not t.is_alive()
    assert group.side_group("late").aborted          # a side group made after the abort is born aborted


def test_all_reduce_is_deterministic_and_bit_identical():
    torch.manual_seed(0)
    data = [torch.randn(1000) for _ in range(3)]

    def body(comm):
        return comm.all_reduce(data[comm.rank].clone())

    runs = [run_ranks(InProcessGroup(3), body)[0] for _ in range(2)]
    for res in runs:
        assert all(torch.equal(res[0], t) for t in res)
    assert torch.equal(runs[0][0], runs[1][0])
    assert torch.equal(runs[0][0], data[0] + data[1] + data[2])


def test_tensors_are_copied_not_aliased():
    def body(comm):
        t = torch.ones(4) * comm.rank
        got = comm.all_gather(t)
        t.add_(100)  # must not change what the others gathered
        got[comm.rank].add_(1000)  # nor may writing our copy change theirs
        comm.barrier()
        return got

    results, errors = run_ranks(InProcessGroup(2), body)
    assert errors == [None, None]
    assert results[0][1].tolist() == [1.0] * 4
    assert results[1][0].tolist() == [0.0] * 4


def test_failing_rank_aborts_the_others_quickly():
    def body(comm):
        if comm.rank == 1:
            raise ValueError("boom")
        comm.all_reduce(torch.ones(2))  # would wait forever without the abort

    t0 = time.monotonic()
    _, errors = run_ranks(InProcessGroup(3), body)
    assert time.monotonic() - t0 < 5
    assert isinstance(errors[1], ValueError)
    assert isinstance(errors[0], CommunicationAborted) and isinstance(errors[2], CommunicationAborted)


def test_recv_times_out():
    group = InProcessGroup(2, timeout=0.2)
    with pytest.raises(CommunicationTimeout):
        group.communicator(0).recv(torch.empty(1), 1)


def test_collective_times_out_when_a_rank_never_arrives():
    group = InProcessGroup(2, timeout=0.2)
    with pytest.raises(CommunicationTimeout):
        group.communicator(0).barrier()


def test_bad_group_parameters():
    with pytest.raises(ParamError, match="'world_size' parameter of InProcessGroup"):
        InProcessGroup(0)
