"""Communicator conformance: the values and the counted bytes of every verb, on any backend.

:func:`exercise_communicator` runs on each rank (thread or process) and returns what it saw;
:func:`check_communicator_results` asserts values and accounting of all ranks' results against
:func:`expected_bytes` (the formulas of :mod:`workbench.communicate.base`, computed independently);
:func:`check_communicator` does both on thread ranks of any group class (``group_factory(world_size)`` with
``communicator(rank)`` and ``abort(exc)``, as :class:`~workbench.communicate.inprocess.InProcessGroup`).
A process backend runs :func:`exercise_communicator` on its ranks (e.g. through
:func:`workbench.testing.run_gloo_ranks`) and hands the results to :func:`check_communicator_results`.
:func:`exercise_side_communicator` runs it on the rank's side communicator (``comm.side("sample")``) on a
second thread while the first runs all-reduces on the main one; :func:`check_side_communicator_results` checks both.

Example:
    >>> from workbench.communicate.inprocess import InProcessGroup
    >>> check_communicator(InProcessGroup, world_sizes=(1, 3))
    >>> expected_bytes(2)["all_reduce"]
    48
"""

from __future__ import annotations

from typing import Any, Callable

import torch

__all__ = ["exercise_communicator", "expected_bytes", "check_communicator_results", "check_communicator",
           "exercise_side_communicator", "check_side_communicator_results"]

SIDE_ROUNDS = 40  # all-reduces the main thread runs while the side communicator is exercised

N = 6  # floats per rank-tensor (24 bytes)


def _vec(rank: int, n: int = N, scale: float = 1.0) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32) * scale + 10.0 * rank


def exercise_communicator(comm) -> dict:
    """Every verb once, in epoch 1 (kind = the verb's name). Returns the results as lists."""
    r, p = comm.rank, comm.world_size
    comm.set_epoch(1)
    out: dict = {}
    # p2p ring: blocking send to the successor (buffered or paired with the receive below)
    succ, pred = (r + 1) % p, (r - 1) % p
    if p > 1:
        if r % 2 == 0:
            comm.send(_vec(r), succ, kind="send")
            buf = comm.recv(torch.empty(N), pred, kind="send")
        else:
            buf = comm.recv(torch.empty(N), pred, kind="send")
            comm.send(_vec(r), succ, kind="send")
        out["recv"] = buf.tolist()
        # non-blocking: every rank isends to all others, irecvs from all others
        sends = [comm.isend(_vec(r, N + j), j, kind="isend") for j in range(p) if j != r]
        recvs = {j: comm.irecv(torch.empty(N + r), j, kind="isend") for j in range(p) if j != r}
        out["irecv"] = {j: w.wait().tolist() for j, w in recvs.items()}
        for w in sends:
            w.wait()
    # collectives
    b = _vec(r) if r == 0 else torch.zeros(N)
    out["broadcast"] = comm.broadcast(b, 0, kind="broadcast").tolist()
    out["all_reduce"] = comm.all_reduce(_vec(r), kind="all_reduce").tolist()
    out["all_gather"] = [t.tolist() for t in comm.all_gather(_vec(r), kind="all_gather")]
    # all_to_all with uneven 2-d sizes: rank r sends (r + j + 1, 2) rows to rank j; one empty piece
    pieces = [torch.full((r + j + 1, 2), float(10 * r + j)) for j in range(p)]
    if p > 1:
        pieces[(r + 1) % p] = torch.empty(0, 2)
    got = comm.all_to_all(pieces, kind="all_to_all")
    out["all_to_all"] = [[list(t.shape), t.flatten().tolist()] for t in got]
    # all_to_all with a dtype per destination and odd byte counts: rank r sends j an int8 (r + j + 1, 3) to even j,
    # a float64 vector of r + j + 1 to odd j
    mixed = [_mixed_piece(r, j) for j in range(p)]
    out["all_to_all_mixed"] = [[str(t.dtype), list(t.shape), t.flatten().tolist()]
                               for t in comm.all_to_all(mixed, kind="all_to_all_mixed")]
    comm.barrier()
    out["bytes_by_kind"] = comm.counter.bytes_by_kind(epoch=1)
    out["records"] = [(e.src_rank, e.dst_rank, e.kind, e.bytes, e.messages) for e in comm.counter.records()]
    return out


def _mixed_piece(src: int, dst: int) -> torch.Tensor:
    if dst % 2 == 0:
        return torch.full((src + dst + 1, 3), src - dst, dtype=torch.int8)
    return torch.arange(src + dst + 1, dtype=torch.float64) + 0.5 * src


def expected_bytes(p: int) -> dict:
    """The base.py formulas, summed over all ranks (float32 = 4 bytes)."""
    n = 4 * N
    exp = {"broadcast": (p - 1) * n, "all_reduce": p * (2 * (p - 1) * n // p),
           "all_gather": p * (p - 1) * n}
    if p > 1:
        exp["send"] = p * n
        exp["isend"] = sum(4 * (N + j) for r in range(p) for j in range(p) if j != r)
        a2a = 0
        for r in range(p):
            for j in range(p):
                if j != r and j != (r + 1) % p:
                    a2a += 4 * 2 * (r + j + 1)
        exp["all_to_all"] = a2a
        exp["all_to_all_mixed"] = sum(_mixed_piece(r, j).nbytes for r in range(p) for j in range(p) if j != r)
    return {k: v for k, v in exp.items() if v}


def check_communicator_results(results: list[dict]) -> None:
    """Assert values and accounting of :func:`exercise_communicator` results from all ranks (by rank)."""
    p = len(results)
    total: dict = {}
    for res in results:
        for k, v in res["bytes_by_kind"].items():
            total[k] = total.get(k, 0) + v
    total = {k: v for k, v in total.items() if v}  # an empty all_to_all piece records 0 bytes
    assert total == expected_bytes(p), f"bytes counted by kind {total}, the formulas give {expected_bytes(p)}"
    want_sum = sum(_vec(r) for r in range(p)).tolist()
    for r, res in enumerate(results):
        assert res["broadcast"] == _vec(0).tolist(), f"broadcast on rank {r}: {res['broadcast']}"
        assert res["all_reduce"] == want_sum, f"all_reduce on rank {r}: {res['all_reduce']} != {want_sum}"
        assert res["all_gather"] == [_vec(j).tolist() for j in range(p)], f"all_gather on rank {r}"
        for j, (shape, flat) in enumerate(res["all_to_all"]):
            rows = 0 if (p > 1 and r == (j + 1) % p) else j + r + 1
            assert shape == [rows, 2], f"all_to_all piece from {j} on rank {r}: shape {shape}, not {[rows, 2]}"
            assert flat == [float(10 * j + r)] * (2 * rows), f"all_to_all piece from {j} on rank {r}: values"
        for j, (dtype, shape, flat) in enumerate(res["all_to_all_mixed"]):
            want = _mixed_piece(j, r)
            assert [dtype, shape, flat] == [str(want.dtype), list(want.shape), want.flatten().tolist()], \
                f"all_to_all_mixed piece from {j} on rank {r}: {dtype} {shape} {flat}"
        if p > 1:
            assert res["recv"] == _vec((r - 1) % p).tolist(), f"send/recv on rank {r}"
            assert res["irecv"] == {j: _vec(j, N + r).tolist() for j in range(p) if j != r}, f"isend/irecv on rank {r}"
    # bit-identical all_reduce across ranks
    assert len({tuple(res["all_reduce"]) for res in results}) == 1, "all_reduce differs between ranks"


def check_communicator(group_factory: Callable[[int], Any], world_sizes: tuple[int, ...] = (1, 2, 3, 4)) -> None:
    """:func:`exercise_communicator` on thread ranks of ``group_factory(world_size)`` for each world size,
    then :func:`check_communicator_results`; an AssertionError names the group and the world size."""
    from workbench.testing.ranks import run_ranks

    name = getattr(group_factory, "__name__", repr(group_factory))
    for p in world_sizes:
        results = run_ranks(p, exercise_communicator, group=group_factory(p))
        try:
            check_communicator_results(results)
        except AssertionError as exc:
            raise AssertionError(f"communicator {name} with {p} ranks: {exc}") from exc


def exercise_side_communicator(comm) -> dict:
    """:func:`exercise_communicator` on ``comm.side("sample")`` in a second thread, while this thread runs
    :data:`SIDE_ROUNDS` all-reduces (kind ``main``, epoch 0) on ``comm``; the side's results, plus the main sums,
    the main counter's bytes by kind of epoch 0 and its collective calls (its own only)."""
    import threading

    comm.set_epoch(0)
    side = comm.side("sample")
    out: dict = {}

    def body() -> None:
        try:
            out["side"] = exercise_communicator(side)
        except BaseException as exc:  # noqa: BLE001 - raised below, in the rank's thread
            out["error"] = exc

    thread = threading.Thread(target=body, name="side-exercise")
    thread.start()
    sums = [comm.all_reduce(_vec(comm.rank, scale=float(i)), kind="main").tolist() for i in range(SIDE_ROUNDS)]
    thread.join(60)
    if "error" in out:
        raise out["error"]
    assert not thread.is_alive(), "the side communicator's thread hung"
    res = out["side"]
    res["main_sums"] = sums
    res["main_bytes_by_kind"] = comm.counter.bytes_by_kind(epoch=0)
    res["main_calls"] = len(comm.counter.calls)
    res["same_side"] = comm.side("sample") is side
    return res


def check_side_communicator_results(results: list[dict]) -> None:
    """Assert :func:`exercise_side_communicator` results: the side's verbs as :func:`check_communicator_results`
    (their bytes counted in the rank's one counter, under epoch 1), the main thread's all-reduces, their bytes under
    epoch 0 and kind ``main`` only, and the main counter's calls: the main thread's all-reduces alone."""
    check_communicator_results(results)
    p = len(results)
    for r, res in enumerate(results):
        for i, got in enumerate(res["main_sums"]):
            assert got == sum(_vec(j, scale=float(i)) for j in range(p)).tolist(), f"main all_reduce {i} on rank {r}"
        want = {"main": SIDE_ROUNDS * (2 * (p - 1) * 4 * N // p)} if p > 1 else {}
        assert res["main_bytes_by_kind"] == want, f"rank {r}: main bytes {res['main_bytes_by_kind']} != {want}"
        assert res["main_calls"] == SIDE_ROUNDS and res["same_side"], f"rank {r}"
