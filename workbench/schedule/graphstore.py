"""ByteGNN's graph store (VLDB 2022): each rank serves its part; sampling workers read the rest from the owners.

With ``schedule.graph_store = "owners"`` every rank runs a :class:`GraphStoreServer`, a daemon thread in the
trainer's process serving a TCP socket on the rank's host address (``RankContext.host``: the Dask worker's
address, the one gloo uses, or ``127.0.0.1`` on the in-process runners). It holds the rank's :class:`PartStore`:
the CSR rows of the vertices its part owns (their whole in-neighbourhood, the HALO rule of
:func:`~workbench.sample.sources.owned_rows`) and their feature rows, and answers two requests:

* **sample**: owned ids, fan-out, replacement and the sample key -> the sampled ``(src, dst)`` edges, drawn with
  the sampler's keyed kernel, the one :class:`~workbench.sample.sources.OwnerRoutedSource` uses, so an owner
  draws exactly the edges a whole-graph sample draws for its vertices;
* **features**: owned ids -> their rows.

A :class:`GraphStoreClient` is what a sampling worker reads through (NSC, FF and Positive tasks): the ids its
own part owns are served from the part it holds (no bytes); the others are grouped by owner and asked of the
owner's server, one request after the other. The client counts at the socket, as a
:class:`~workbench.communicate.base.Communicator` does (a public verb counts, then calls the private
``_verb`` that talks to the socket), with the kinds of owner-routed sampling and the KVStore:

=============== ============================================ ===================
kind            bytes                                        link
=============== ============================================ ===================
``sample_req``  8 per requested id                           rank -> owner
``sample_resp`` 16 per sampled edge (int64 src and dst)      owner -> rank
``feature_req`` 8 per requested id                           rank -> owner
``feature``     rows x width x item size                     owner -> rank
=============== ============================================ ===================

Headers (op, count, fan-out, key, status) are not counted, as the communicator's size headers are not. The
counts of a task go back to the scheduler thread with its result, which adds them to the rank's traffic
counter (:class:`~workbench.schedule.executor.Pipeline`): the epoch's ``Traffic`` events and the summary's
``sample_bytes`` / ``feature_bytes`` then hold them. Ids are unique within a request (a frontier chunk), so
the totals equal those of DistDGL's owner-routed sampling and KVStore pulls for the same batches.

The wire format is a fixed header (:data:`REQUEST`, :data:`RESPONSE`) followed by raw little-endian int64 /
float32 array bytes; no pickle. A server answers an error with its traceback, which the client raises as
:class:`GraphStoreError` (rank, owner, address, the remote traceback).

Example:
    >>> import torch
    >>> from workbench.data import load_graph
    >>> from workbench.sample import NeighborSampler
    >>> g = load_graph("karate")
    >>> node_part = (torch.arange(g.num_nodes) % 2)
    >>> parts = [PartStore.of(g, node_part, r) for r in range(2)]
    >>> sampler = NeighborSampler(fanouts=(3,), seed=0)
    >>> servers = [GraphStoreServer(p, sampler._kernel) for p in parts]
    >>> for p in parts:
    ...     p.addresses = [s.address for s in servers]
    >>> client = parts[0].client()
    >>> src, dst = client.sample(np.array([0, 1, 2, 3]), 3, False, (0, 0, 0, 0), sampler._kernel)
    >>> sorted(set(dst.tolist())), client.fetch(np.array([1, 2])).shape
    ([0, 1, 2, 3], (2, 34))
    >>> sorted((k, b) for (_s, _d, k, _l), (b, _m) in client.drain().items())   # ids 1, 3 and their edges
    [('feature', 136), ('feature_req', 8), ('sample_req', 16), ('sample_resp', 96)]
    >>> for s in servers:
    ...     s.close()
"""

from __future__ import annotations

import dataclasses
import os
import selectors
import socket
import struct
import threading
import traceback
from collections import defaultdict
from typing import Any, Callable, Optional

import numpy as np
import torch

from workbench.sample.base import SampleKey
from workbench.sample.keyed import CSRRows
from workbench.schedule.dag import WorkerState

__all__ = ["GRAPH_STORES", "PartStore", "GraphStoreServer", "GraphStoreClient", "GraphStoreError",
           "ID_BYTES", "EDGE_BYTES", "REQUEST", "RESPONSE", "exchange_addresses"]

GRAPH_STORES = ("owners", "local")
"""``schedule.graph_store``: ``owners`` (each rank's graph store holds its part, remote reads are requested from
the owners and counted) or ``local`` (every worker inherits the whole graph; remote vertices only counted)."""

ID_BYTES = 8
"""Bytes per requested id (int64)."""
EDGE_BYTES = 16
"""Bytes per sampled edge (int64 src and dst)."""

REQUEST = struct.Struct("<Bqq?qqqq")
"""op (1 sample, 2 features), number of ids, fan-out, replace, key (seed, epoch, step, layer); then the ids."""
RESPONSE = struct.Struct("<Bq")
"""status (0 ok, 1 error), count (edges, rows, or bytes of the error text); then src ids and dst ids, the rows,
or the error text."""
_SAMPLE, _FEATURES = 1, 2


class GraphStoreError(RuntimeError):
    """A graph-store request failed at its owner (or the owner could not be reached).

    Attributes:
        rank: the requesting rank.
        owner: the rank whose server was asked.
        address: ``(host, port)`` of that server.
        remote_traceback: the server's traceback (empty when it could not be reached).
    """

    def __init__(self, rank: int, owner: int, address: tuple, message: str, remote_traceback: str = ""):
        self.rank, self.owner, self.address, self.remote_traceback = rank, owner, tuple(address), remote_traceback
        super().__init__(f"graph store of rank {owner} at {address[0]}:{address[1]} (asked by rank {rank}): "
                         f"{message}" + (f"\n--- remote traceback ---\n{remote_traceback}" if remote_traceback else ""))


# --------------------------------------------------------------------------------------------------------
# What a store holds
# --------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class PartStore:
    """One rank's graph store: its part's CSR rows and feature rows, the partition book and the servers.

    Attributes:
        rank: the part (= rank) it holds.
        rows: the CSR rows of the owned vertices (:func:`~workbench.sample.sources.owned_rows`, ``row_of_gid``
            set: a global id's row in the part).
        features: ``(num_owned, F)`` their feature rows, in ascending global id (the rows' order).
        node_part: ``(N,)`` int64 owner of every vertex.
        in_degrees: ``(N,)`` int64 in-degree of every vertex (the scheduler's NSC cost model; never sampled from).
        addresses: ``(host, port)`` of every rank's server (filled at setup, :func:`exchange_addresses`).
        fetch_features: whether FF tasks read rows (False when the trainer pulls them through a cache: FF
            then returns ``(n, 0)`` rows and nothing crosses the store).
    """

    rank: int
    rows: CSRRows
    features: np.ndarray
    node_part: np.ndarray
    in_degrees: np.ndarray
    addresses: list = dataclasses.field(default_factory=list)
    fetch_features: bool = True

    @classmethod
    def of(cls, graph: Any, node_part: torch.Tensor, rank: int) -> "PartStore":
        """The store of part ``rank`` of ``graph`` (a reference and tests; trainers build it from their shard)."""
        from workbench.sample.sources import owned_rows

        node_part = torch.as_tensor(node_part, dtype=torch.int64)
        owned = torch.nonzero(node_part == rank).flatten()
        return cls(rank, owned_rows(graph, node_part, rank), np.ascontiguousarray(graph.features[owned].numpy()),
                   node_part.numpy(), graph.in_degrees().numpy())

    @property
    def num_nodes(self) -> int:
        return int(self.node_part.size)

    @property
    def width(self) -> int:
        return int(self.features.shape[1])

    def local_rows(self, gid: np.ndarray) -> np.ndarray:
        """``(len(gid), F)`` feature rows of owned ids."""
        return self.features[self.rows.rows(torch.from_numpy(gid)).numpy()]

    def client(self) -> "GraphStoreClient":
        return GraphStoreClient(self)


# --------------------------------------------------------------------------------------------------------
# Socket helpers
# --------------------------------------------------------------------------------------------------------


def _recv_exact(sock: socket.socket, n: int) -> Optional[bytearray]:
    """``n`` bytes from ``sock``; None when the peer closed before the first byte."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            if got == 0:
                return None
            raise ConnectionError(f"connection closed after {got} of {n} bytes")
        got += k
    return buf


def _recv_array(sock: socket.socket, count: int, dtype: Any) -> np.ndarray:
    dtype = np.dtype(dtype)
    buf = _recv_exact(sock, count * dtype.itemsize) if count else bytearray()
    if buf is None:
        raise ConnectionError("connection closed before the answer")
    return np.frombuffer(buf, dtype=dtype)


# --------------------------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------------------------


class GraphStoreServer:
    """A rank's graph store, served by one daemon thread on a TCP socket (module docstring).

    One thread answers every connection (a selector over the listening socket and the clients), one request at
    a time: a client sends its whole request before it reads, so no request waits on another server.

    Args:
        part: what the store holds.
        kernel: the sampler's keyed kernel ``(csr, gid, fanout, replace, SampleKey) -> SampledEdges``.
        host: the address to bind (the rank's host address; port chosen by the system).
    """

    def __init__(self, part: PartStore, kernel: Callable, host: str = "127.0.0.1"):
        self.part, self.kernel = part, kernel
        self._listen = socket.create_server((host, 0), backlog=256)
        self.address: tuple[str, int] = tuple(self._listen.getsockname()[:2])
        self._wake_r, self._wake_w = socket.socketpair()
        self._stop = False
        self._conns: list[socket.socket] = []
        self.requests = 0
        self._thread = threading.Thread(target=self._serve, name=f"graph-store-{part.rank}", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _serve(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._listen, selectors.EVENT_READ, "listen")
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        try:
            while not self._stop:
                for key, _ in sel.select():
                    if key.data == "wake":
                        return
                    if key.data == "listen":
                        conn, _addr = self._listen.accept()
                        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        self._conns.append(conn)
                        sel.register(conn, selectors.EVENT_READ, "conn")
                    elif not self._answer(key.fileobj):
                        sel.unregister(key.fileobj)
                        self._conns.remove(key.fileobj)
                        key.fileobj.close()
        finally:
            sel.close()

    def _answer(self, conn: socket.socket) -> bool:
        """Answer one request on ``conn``; False when the client closed (or the connection broke)."""
        try:
            head = _recv_exact(conn, REQUEST.size)
            if head is None:
                return False
            op, n, fanout, replace, *key = REQUEST.unpack(head)
            ids = _recv_array(conn, n, np.int64)
        except OSError:
            return False
        self.requests += 1
        try:
            out = self._sample(ids, fanout, replace, key) if op == _SAMPLE else self._features(ids, op)
        except BaseException:  # noqa: BLE001 - sent to the client, which raises it with this traceback
            text = traceback.format_exc().encode()
            out = [RESPONSE.pack(1, len(text)), text]
        try:
            for piece in out:
                conn.sendall(piece)
        except OSError:
            return False
        return True

    def _check_owned(self, ids: np.ndarray) -> None:
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= self.part.num_nodes
                         or bool((self.part.node_part[ids] != self.part.rank).any())):
            raise ValueError(f"rank {self.part.rank} was asked for ids it does not own")

    def _sample(self, ids: np.ndarray, fanout: int, replace: bool, key: list) -> list:
        self._check_owned(ids)
        e = self.kernel(self.part.rows, torch.from_numpy(ids), int(fanout), bool(replace), SampleKey(*key))
        src = np.ascontiguousarray(e.src_gid.numpy(), dtype=np.int64)
        dst = np.ascontiguousarray(e.dst_gid.numpy(), dtype=np.int64)
        return [RESPONSE.pack(0, src.size), src, dst]

    def _features(self, ids: np.ndarray, op: int) -> list:
        if op != _FEATURES:
            raise ValueError(f"unknown request op {op}")
        self._check_owned(ids)
        rows = np.ascontiguousarray(self.part.local_rows(ids))
        return [RESPONSE.pack(0, rows.shape[0]), rows]

    def close(self) -> None:
        """Stop the thread and close every socket (idempotent)."""
        if not self._stop:
            self._stop = True
            try:
                self._wake_w.send(b"x")
            except OSError:
                pass
        self._thread.join(timeout=5)
        for s in [self._listen, self._wake_r, self._wake_w, *self._conns]:
            s.close()
        self._conns = []

    def __enter__(self) -> "GraphStoreServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"GraphStoreServer(rank={self.part.rank}, address={self.address[0]}:{self.address[1]})"


# --------------------------------------------------------------------------------------------------------
# Client
# --------------------------------------------------------------------------------------------------------


class GraphStoreClient:
    """Reads of a sampling worker (or the trainer's scheduler thread): own part local, the rest from the owners.

    Connections open on first use in the calling process (a forked worker never shares its parent's sockets)
    and stay open. :meth:`drain` returns and clears the counted traffic ``{(src, dst, kind, layer): [bytes,
    messages]}``.
    """

    def __init__(self, part: PartStore):
        self.part = part
        self.rank = part.rank
        self._socks: dict[int, socket.socket] = {}
        self._pid = os.getpid()
        self._traffic: dict = defaultdict(lambda: [0, 0])

    # -- public verbs: group by owner, count, call the backend ----------------------------------------------
    def sample(self, gid: np.ndarray, fanout: int, replace: bool, key: tuple, kernel: Callable) -> tuple:
        """Sampled in-edges ``(src, dst)`` of the unique ids ``gid``, grouped by destination in ``gid``'s order."""
        gid = np.ascontiguousarray(gid, dtype=np.int64)
        groups = self._groups(gid)
        if not groups or (len(groups) == 1 and groups[0][0] == self.rank):   # all local: in frontier order
            e = kernel(self.part.rows, torch.from_numpy(gid), fanout, replace, SampleKey(*key))
            return e.src_gid.numpy(), e.dst_gid.numpy()
        srcs, dsts = [], []
        for owner, ids in groups:
            if owner == self.rank:
                e = kernel(self.part.rows, torch.from_numpy(ids), fanout, replace, SampleKey(*key))
                src, dst = e.src_gid.numpy(), e.dst_gid.numpy()
            else:
                self._count(self.rank, owner, "sample_req", key[3], ids.size * ID_BYTES)
                src, dst = self._sample(owner, ids, fanout, replace, key)
                self._count(owner, self.rank, "sample_resp", key[3], src.size * EDGE_BYTES)
            srcs.append(src)
            dsts.append(dst)
        src, dst = np.concatenate(srcs), np.concatenate(dsts)
        # back to frontier order: the position of each edge's destination in the (unique) frontier
        order = np.argsort(gid, kind="stable")
        pos = order[np.searchsorted(gid, dst, sorter=order)]
        back = np.argsort(pos, kind="stable")
        return src[back], dst[back]

    def fetch(self, gid: np.ndarray) -> np.ndarray:
        """``(len(gid), F)`` feature rows of ``gid`` in order (``(len(gid), 0)`` without ``fetch_features``)."""
        gid = np.ascontiguousarray(gid, dtype=np.int64)
        if not self.part.fetch_features:
            return np.zeros((gid.size, 0), dtype=self.part.features.dtype)
        owner = self.part.node_part[gid]
        out = np.empty((gid.size, self.part.width), dtype=self.part.features.dtype)
        mine = owner == self.rank
        out[mine] = self.part.local_rows(gid[mine])
        for o, ids in self._groups(gid):
            if o == self.rank:
                continue
            self._count(self.rank, o, "feature_req", -1, ids.size * ID_BYTES)
            rows = self._features(o, ids)
            self._count(o, self.rank, "feature", -1, rows.nbytes)
            out[owner == o] = rows
        return out

    def drain(self) -> dict:
        out, self._traffic = dict(self._traffic), defaultdict(lambda: [0, 0])
        return out

    def close(self) -> None:
        for s in self._socks.values():
            s.close()
        self._socks = {}

    # -- helpers -------------------------------------------------------------------------------------------
    def _groups(self, gid: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """``(owner, ids)`` of every owner asked, ids in their order within ``gid`` (a stable sort by owner)."""
        owner = self.part.node_part[gid]
        order = np.argsort(owner, kind="stable")
        counts = np.bincount(owner, minlength=len(self.part.addresses) or 1)
        starts = np.concatenate([[0], np.cumsum(counts)])
        return [(o, gid[order[starts[o]:starts[o + 1]]]) for o in np.flatnonzero(counts).tolist()]

    def _count(self, src: int, dst: int, kind: str, layer: int, nbytes: int) -> None:
        rec = self._traffic[(src, dst, kind, int(layer))]
        rec[0] += int(nbytes)
        rec[1] += 1

    # -- backend: the sockets ------------------------------------------------------------------------------
    def _sock(self, owner: int) -> socket.socket:
        if self._pid != os.getpid():   # forked: the parent's connections are not ours
            self._socks, self._pid = {}, os.getpid()
        s = self._socks.get(owner)
        if s is None:
            try:
                s = socket.create_connection(tuple(self.part.addresses[owner]), timeout=None)
            except OSError as exc:
                raise GraphStoreError(self.rank, owner, self.part.addresses[owner], f"cannot connect: {exc}") from None
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._socks[owner] = s
        return s

    def _call(self, owner: int, head: bytes, ids: np.ndarray) -> tuple[socket.socket, int]:
        s = self._sock(owner)
        try:
            s.sendall(head)
            s.sendall(ids)
            resp = _recv_exact(s, RESPONSE.size)
            if resp is None:
                raise ConnectionError("the server closed the connection")
            status, count = RESPONSE.unpack(resp)
            if status != 0:
                text = _recv_exact(s, count) or b""
                raise GraphStoreError(self.rank, owner, self.part.addresses[owner], "the request failed",
                                      bytes(text).decode(errors="replace"))
        except OSError as exc:
            self._socks.pop(owner, None)
            s.close()
            raise GraphStoreError(self.rank, owner, self.part.addresses[owner], f"{type(exc).__name__}: {exc}") \
                from None
        return s, count

    def _sample(self, owner: int, ids: np.ndarray, fanout: int, replace: bool, key: tuple) -> tuple:
        s, m = self._call(owner, REQUEST.pack(_SAMPLE, ids.size, int(fanout), bool(replace), *key), ids)
        both = _recv_array(s, 2 * m, np.int64)
        return both[:m], both[m:]

    def _features(self, owner: int, ids: np.ndarray) -> np.ndarray:
        s, n = self._call(owner, REQUEST.pack(_FEATURES, ids.size, 0, False, 0, 0, 0, 0), ids)
        rows = _recv_array(s, n * self.part.width, self.part.features.dtype)
        return rows.reshape(n, self.part.width)


# --------------------------------------------------------------------------------------------------------
# Setup
# --------------------------------------------------------------------------------------------------------

_HOST_BYTES = 256


def exchange_addresses(comm: Any, address: tuple) -> list[tuple[str, int]]:
    """Every rank's server address, from one ``all_gather`` on the run's communicator (kind ``control``; a
    collective: every rank calls it once at setup)."""
    host = str(address[0]).encode()
    if len(host) > _HOST_BYTES:
        raise ValueError(f"host address longer than {_HOST_BYTES} bytes: {address[0]!r}")
    buf = torch.zeros(_HOST_BYTES + 8, dtype=torch.uint8)
    buf[:len(host)] = torch.frombuffer(bytearray(host), dtype=torch.uint8)
    buf[_HOST_BYTES:] = torch.frombuffer(bytearray(struct.pack("<q", int(address[1]))), dtype=torch.uint8)
    out = []
    for t in comm.all_gather(buf, kind="control"):
        raw = bytes(t.cpu().numpy().tobytes())
        out.append((raw[:_HOST_BYTES].rstrip(b"\0").decode(), struct.unpack("<q", raw[_HOST_BYTES:])[0]))
    return out


def worker_state(source: Any, sampler: Any) -> tuple[Any, np.ndarray]:
    """``(WorkerState, (N,) in-degrees)`` of a pipeline's workers: ``source`` a
    :class:`~workbench.graph.Graph` (every worker inherits it whole) or a :class:`PartStore` (the part, and a
    :class:`GraphStoreClient` for the rest)."""
    if isinstance(source, PartStore):
        state = WorkerState(source.rows, source.features, sampler, source.num_nodes, store=source.client())
        return state, source.in_degrees
    g = source
    feats = g.features.numpy() if g.features is not None else np.zeros((g.num_nodes, 1), np.float32)
    state = WorkerState(CSRRows(g.indptr, g.indices), np.ascontiguousarray(feats), sampler, g.num_nodes)
    return state, (g.indptr[1:] - g.indptr[:-1]).numpy()


def add_traffic(counter: Any, epoch: int, traffic: dict) -> None:
    """Add a client's drained counts (:meth:`GraphStoreClient.drain`) to a rank's
    :class:`~workbench.communicate.base.TrafficCounter` under ``epoch``."""
    for (src, dst, kind, layer), (nbytes, messages) in traffic.items():
        counter.add(epoch, src, dst, kind, layer, nbytes, messages)
