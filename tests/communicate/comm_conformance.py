"""A conformance check run over every communicator backend: values and counted bytes of every verb.

``exercise(comm)`` runs on each rank (thread or process) and returns what it saw; ``expected_bytes``
is the accounting formula of :mod:`workbench.communicate.base`, computed independently.
"""

from __future__ import annotations

import torch

N = 6  # floats per rank-tensor (24 bytes)


def _vec(rank: int, n: int = N, scale: float = 1.0) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32) * scale + 10.0 * rank


def exercise(comm) -> dict:
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
    comm.barrier()
    out["bytes_by_kind"] = comm.counter.bytes_by_kind(epoch=1)
    out["records"] = [(e.src_rank, e.dst_rank, e.kind, e.bytes, e.messages) for e in comm.counter.records()]
    return out


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
    return {k: v for k, v in exp.items() if v}


def check(results: list[dict]) -> None:
    """Assert values and accounting of ``exercise`` results from all ranks."""
    p = len(results)
    total: dict = {}
    for res in results:
        for k, v in res["bytes_by_kind"].items():
            total[k] = total.get(k, 0) + v
    total = {k: v for k, v in total.items() if v}  # an empty all_to_all piece records 0 bytes
    assert total == expected_bytes(p), (total, expected_bytes(p))
    want_sum = sum(_vec(r) for r in range(p)).tolist()
    for r, res in enumerate(results):
        assert res["broadcast"] == _vec(0).tolist()
        assert res["all_reduce"] == want_sum
        assert res["all_gather"] == [_vec(j).tolist() for j in range(p)]
        for j, (shape, flat) in enumerate(res["all_to_all"]):
            rows = 0 if (p > 1 and r == (j + 1) % p) else j + r + 1
            assert shape == [rows, 2]
            assert flat == [float(10 * j + r)] * (2 * rows)
        if p > 1:
            assert res["recv"] == _vec((r - 1) % p).tolist()
            assert res["irecv"] == {j: _vec(j, N + r).tolist() for j in range(p) if j != r}
    # bit-identical all_reduce across ranks
    assert len({tuple(res["all_reduce"]) for res in results}) == 1


def gloo_rank_main(rank: int, world_size: int, port: int, out_dir: str) -> None:
    """Body of one spawned gloo rank: run :func:`exercise` and pickle the result to ``out_dir/<rank>.pkl``."""
    import os
    import pickle

    from workbench.communicate.torchdist import TorchDistCommunicator, init_process_group, shutdown_process_group

    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    init_process_group("gloo", f"tcp://127.0.0.1:{port}", rank, world_size, timeout_s=60)
    try:
        res = exercise(TorchDistCommunicator())
        with open(os.path.join(out_dir, f"{rank}.pkl"), "wb") as f:
            pickle.dump(res, f)
    finally:
        shutdown_process_group()
