"""The socket mesh: framed messages in order, every dtype and shape, the ring all-reduce, and clear errors."""

from __future__ import annotations

import threading

import pytest
import torch
import torch.distributed as dist

from workbench.communicate.inprocess import CommunicationError
from workbench.communicate.sockets import SocketMesh


def _meshes(p: int, timeout_s: float = 10.0) -> list[SocketMesh]:
    """``p`` meshes on 127.0.0.1, made by ``p`` threads sharing an in-process store."""
    store, out, errors = dist.HashStore(), [None] * p, []

    def make(r):
        try:
            out[r] = SocketMesh.connect(store, r, p, host="127.0.0.1", timeout_s=timeout_s)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=make, args=(r,)) for r in range(p)]
    [t.start() for t in threads]
    [t.join(30) for t in threads]
    if errors:
        raise errors[0]
    return out


def _on_ranks(meshes, body):
    """``body(mesh)`` on one thread per rank; the results by rank (the first error re-raised)."""
    out, errors = [None] * len(meshes), []

    def run(r):
        try:
            out[r] = body(meshes[r])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(len(meshes))]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert not any(t.is_alive() for t in threads), "a rank hung"
    if errors:
        raise errors[0]
    return out


@pytest.fixture
def three():
    meshes = _meshes(3)
    yield meshes
    for m in meshes:
        m.close()


def _piece(src: int, dst: int) -> torch.Tensor:
    kinds = [torch.arange(src * 10 + dst, dtype=torch.float32).reshape(-1, 1),
             torch.tensor(float(src + dst), dtype=torch.bfloat16),                 # 0-dim, no numpy dtype
             torch.arange(6, dtype=torch.int64).reshape(1, 2, 3) + src,
             torch.tensor([src % 2 == 0, True, False]),                             # bool
             torch.empty(0, 4, dtype=torch.float16)]                                # empty
    return kinds[(src + dst) % len(kinds)]


def test_exchange_delivers_every_dtype_and_shape(three):
    got = _on_ranks(three, lambda m: m.exchange([_piece(m.rank, j) for j in range(3)]))
    for r in range(3):
        for j in range(3):
            want = _piece(j, r)
            assert got[r][j].dtype == want.dtype and got[r][j].shape == want.shape
            assert torch.equal(got[r][j], want)


def test_messages_keep_their_order_and_wait_for_a_late_receive(three):
    def body(m):
        if m.rank == 0:    # three sends before rank 1 posts anything; a 4 MB one fills the socket buffers
            ops = [m.post_send(torch.full((n,), float(i)), 1) for i, n in enumerate((3, 1 << 20, 5))]
            m.wait(ops)
        elif m.rank == 1:
            bufs = [torch.empty(3), torch.empty(1 << 20), torch.empty(5)]
            m.wait([m.post_recv(0, into=b) for b in bufs])
            return [float(b[0]) for b in bufs]
    assert _on_ranks(three, body)[1] == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("p", [2, 3, 4])
@pytest.mark.parametrize("n", [1, 7, 1000])
def test_the_ring_all_reduce_sums_and_every_rank_gets_the_same_bits(p, n):
    meshes = _meshes(p)
    try:
        inputs = [torch.randn(n, generator=torch.Generator().manual_seed(r)).double() for r in range(p)]
        got = _on_ranks(meshes, lambda m: m.all_reduce(inputs[m.rank].clone()))
    finally:
        [m.close() for m in meshes]
    assert torch.allclose(got[0], sum(inputs))
    assert all(torch.equal(g, got[0]) for g in got)


def test_a_receive_buffer_of_the_wrong_size_names_both_ranks(three):
    def body(m):
        if m.rank == 0:
            m.wait([m.post_send(torch.zeros(4), 2)])
        elif m.rank == 2:
            m.wait([m.post_recv(0, into=torch.empty(5))])
    with pytest.raises(CommunicationError, match=r"rank 2: rank 0 sent torch.float32 of shape \(4,\).*\(5,\)"):
        _on_ranks(three, body)


def test_a_closed_peer_and_a_silent_one_are_errors_naming_the_ranks():
    meshes = _meshes(2, timeout_s=0.5)
    try:
        with pytest.raises(CommunicationError, match=r"rank 0: no bytes from or to rank\(s\) \[1\] for 0.5 s"):
            meshes[0].wait([meshes[0].post_recv(1)])
        meshes[1].close()
        meshes[1].close()                                   # idempotent
        with pytest.raises(CommunicationError, match="rank 0: the stream with rank 1 was closed by the peer"):
            meshes[0].wait([meshes[0].post_recv(1)])
    finally:
        meshes[0].close()
    assert "SocketMesh(rank=0, world_size=2, peers=[1])" == repr(meshes[0])


def test_a_peer_that_closes_after_its_last_message_is_not_an_error():
    meshes = _meshes(2)
    try:
        meshes[1].wait([meshes[1].post_send(torch.ones(3), 0)])
        meshes[1].close()
        got = meshes[0].post_recv(1)
        meshes[0].wait([got])
        assert torch.equal(got.tensor, torch.ones(3))
    finally:
        meshes[0].close()
