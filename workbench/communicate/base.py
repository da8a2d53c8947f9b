"""The communicate stage: one SPMD communicator interface, counted at the transport.

Training code is written once per rank against :class:`Communicator`. Every public verb counts the
bytes and messages its algorithm moves on each (source rank, destination rank) link, tagged with a
``kind`` (``halo_fwd``, ``halo_bwd``, ``bcast_fwd``, ``bcast_bwd``, ``allreduce``, ...), the ``layer``
and the current epoch, then calls the private ``_verb`` that a backend implements. Backends
(in-process thread ranks, ``torch.distributed``) therefore have identical accounting by construction.

Collectives are counted by the algorithm assumed (the figures compare with the papers'):

============== ===========================================================================
verb           counted traffic (``n`` = tensor bytes, ``p`` = world size)
============== ===========================================================================
send/recv      ``n`` on link src -> dst (counted once, by the sender)
broadcast      pipelined ring from the root: ``n`` on each of the ``p - 1`` links
               ``root+k -> root+k+1`` (SANCUS/CAGNET broadcasts)
all_reduce     ring all-reduce: every rank sends ``2 (p - 1) / p * n`` to its successor
all_gather     ring all-gather: every rank forwards each of the other ``p - 1`` chunks once
all_to_all     direct: ``len(tensors[j])`` bytes on link ``rank -> j`` (``j != rank``)
============== ===========================================================================

Only the sending side records, so summing the records of all ranks gives the traffic exactly once.

**Side communicators** (:meth:`Communicator.side`): a second, independent communicator over the same ranks
(``torch.distributed``: a ``new_group`` of every rank and, where the rank has one, a socket mesh of its own; thread
ranks: a second in-process group), so one thread of every rank can run collectives on it while another thread runs
collectives on the main one (DistDGL samples in separate processes for the same reason; here the mini-batch
trainer's batches-ahead thread samples and pulls features on it). Its bytes go to the same records of the same
:class:`TrafficCounter` with the same kinds (:meth:`TrafficCounter.shared`), tagged with its own ``epoch`` and phase
prefix (the thread that uses it sets them); its seconds and collective calls are its own, so the main thread's comm
clock and call list stay the main thread's.
"""

from __future__ import annotations

import abc
import contextlib
import threading
import time
from collections import defaultdict
from typing import Iterable, Optional, Sequence

import torch

from workbench.events import Traffic

__all__ = ["Communicator", "TrafficCounter", "Work", "tensor_bytes"]


def tensor_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class TrafficCounter:
    """Bytes and messages per (epoch, src, dst, kind, layer), plus time spent inside communication:
    ``comm_seconds`` in all, and ``calls``, the wall-clock ``(start, end)`` of each collective call in order
    (every rank makes the same collective calls in the same order, so the ranks' lists line up call by call;
    wall-clock times compare across the processes of one host, and across hosts as well as their clocks agree)."""

    def __init__(self) -> None:
        self._records: dict[tuple[int, int, int, str, int], list[int]] = defaultdict(lambda: [0, 0])
        self._lock = threading.Lock()
        self.comm_seconds = 0.0
        self.calls: list[tuple[float, float]] = []

    def shared(self) -> "TrafficCounter":
        """A counter that adds to (and reads, drains) the same records as this one, with its own ``comm_seconds``
        and ``calls``: a side communicator's (:meth:`Communicator.side`), whose bytes belong to the rank's
        traffic but whose seconds run on another thread, beside the rank's own.

        Example:
            >>> c = TrafficCounter()
            >>> s = c.shared()
            >>> s.add(0, 0, 1, "sample_req", 0, 8); s.comm_seconds += 1.0
            >>> c.bytes_by_kind(), c.comm_seconds
            ({'sample_req': 8}, 0.0)
        """
        out = TrafficCounter()
        out._records, out._lock = self._records, self._lock
        return out

    def add(self, epoch: int, src: int, dst: int, kind: str, layer: int, nbytes: int, messages: int = 1) -> None:
        if nbytes <= 0 and messages <= 0:
            return
        with self._lock:
            rec = self._records[(epoch, src, dst, kind, layer)]
            rec[0] += int(nbytes)
            rec[1] += int(messages)

    def records(self) -> list[Traffic]:
        with self._lock:
            return [Traffic(epoch=e, src_rank=s, dst_rank=d, kind=k, layer=l, bytes=b, messages=m)
                    for (e, s, d, k, l), (b, m) in sorted(self._records.items())]

    def drain(self, run_id: str = "", through_epoch: Optional[int] = None) -> list[Traffic]:
        """Return and clear the records (as :class:`Traffic` events); with ``through_epoch``, only those of that
        epoch and earlier (a side communicator's thread may already count the next epoch's traffic).

        Example:
            >>> c = TrafficCounter()
            >>> c.add(0, 0, 1, "halo", 0, 8); c.add(1, 0, 1, "halo", 0, 4)
            >>> [t.epoch for t in c.drain(through_epoch=0)], c.bytes_by_kind()
            ([0], {'halo': 4})
        """
        with self._lock:
            keys = [k for k in self._records if through_epoch is None or k[0] <= through_epoch]
            taken = {k: self._records.pop(k) for k in keys}
        out = [Traffic(epoch=e, src_rank=s, dst_rank=d, kind=k, layer=l, bytes=b, messages=m)
               for (e, s, d, k, l), (b, m) in sorted(taken.items())]
        for ev in out:
            ev.run_id = run_id
        return out

    def bytes_by_kind(self, epoch: Optional[int] = None) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        with self._lock:
            for (e, _s, _d, k, _l), (b, _m) in self._records.items():
                if epoch is None or e == epoch:
                    out[k] += b
        return dict(out)

    def total_messages(self, epoch: Optional[int] = None) -> int:
        with self._lock:
            return sum(m for (e, *_), (_b, m) in self._records.items() if epoch is None or e == epoch)


class Work:
    """Handle of a non-blocking operation; :meth:`wait` returns the received tensor (or ``None``)."""

    def __init__(self, wait_fn, result: Optional[torch.Tensor] = None):
        self._wait_fn = wait_fn
        self._result = result

    def wait(self) -> Optional[torch.Tensor]:
        out = self._wait_fn()
        return self._result if out is None else out


class Communicator(abc.ABC):
    """SPMD communication for one rank. Public verbs count, time, then call the backend's ``_verb``.

    Args:
        rank: this process's rank.
        world_size: number of ranks.
        counter: where traffic is recorded (one per rank).
    """

    backend: str = "abstract"

    def __init__(self, rank: int, world_size: int, counter: Optional[TrafficCounter] = None):
        self.rank = rank
        self.world_size = world_size
        self.counter = counter or TrafficCounter()
        self.epoch = 0
        self.phase_prefix = ""

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def side(self, name: str) -> "Communicator":
        """The side communicator ``name`` of this rank: an independent communicator over the same ranks whose
        collectives may run on another thread while this one's run (module docstring). Made on the first call (a
        collective: every rank asks for the same names in the same order), then the same object; its bytes are
        counted in this communicator's records (:meth:`TrafficCounter.shared`); closed by :meth:`close`.

        Example:
            >>> import threading, torch
            >>> from workbench.communicate.inprocess import InProcessGroup
            >>> group, out = InProcessGroup(2), {}
            >>> def body(rank):
            ...     comm = group.communicator(rank)
            ...     side = comm.side("sample")
            ...     t = threading.Thread(target=lambda: side.all_to_all([torch.ones(2)] * 2, kind="sample_req"))
            ...     t.start(); comm.all_reduce(torch.ones(1)); t.join()
            ...     out[rank] = comm.counter.bytes_by_kind()
            >>> threads = [threading.Thread(target=body, args=(r,)) for r in range(2)]
            >>> for t in threads: t.start()
            >>> for t in threads: t.join()
            >>> sorted(out[0].items())
            [('allreduce', 4), ('sample_req', 8)]
        """
        sides = self.__dict__.setdefault("_sides", {})
        if name not in sides:
            comm = self._side(name, self.counter.shared())
            comm.epoch = self.epoch
            sides[name] = comm
        return sides[name]

    def _side(self, name: str, counter: TrafficCounter) -> "Communicator":
        """A backend's new side communicator (:meth:`side`), counting into ``counter``."""
        raise NotImplementedError(f"{type(self).__name__} has no side communicators")

    def _close_sides(self) -> None:
        for comm in self.__dict__.pop("_sides", {}).values():
            comm.close()

    @contextlib.contextmanager
    def phase(self, prefix: str):
        """Count the traffic of a block under ``prefix + kind`` (e.g. ``eval_`` for evaluation passes).

        Example:
            >>> from workbench.communicate.inprocess import InProcessGroup
            >>> comm = InProcessGroup(1).communicator(0)
            >>> with comm.phase("eval_"):
            ...     comm.phase_prefix
            'eval_'
            >>> comm.phase_prefix
            ''
        """
        old = self.phase_prefix
        self.phase_prefix = old + prefix
        try:
            yield self
        finally:
            self.phase_prefix = old

    # ------------------------------------------------------------------------------------------------ timing
    def _timed(self, fn, *args, collective: bool = False, **kwargs):
        t0, w0 = time.perf_counter(), time.time()
        try:
            return fn(*args, **kwargs)
        finally:
            seconds = time.perf_counter() - t0
            self.counter.comm_seconds += seconds
            if collective:
                self.counter.calls.append((w0, w0 + seconds))

    def _count(self, dst: int, nbytes: int, kind: str, layer: int, src: Optional[int] = None) -> None:
        self.counter.add(self.epoch, self.rank if src is None else src, dst, self.phase_prefix + kind, layer, nbytes)

    # ------------------------------------------------------------------------------------------------ p2p
    def send(self, tensor: torch.Tensor, dst: int, *, kind: str, layer: int = -1) -> None:
        self._count(dst, tensor_bytes(tensor), kind, layer)
        self._timed(self._send, tensor.contiguous(), dst)

    def recv(self, tensor: torch.Tensor, src: int, *, kind: str = "", layer: int = -1) -> torch.Tensor:
        """Receive into ``tensor`` (its shape and dtype must match what ``src`` sends). Not counted
        (the sender counts)."""
        return self._timed(self._recv, tensor, src)

    def isend(self, tensor: torch.Tensor, dst: int, *, kind: str, layer: int = -1) -> Work:
        self._count(dst, tensor_bytes(tensor), kind, layer)
        return self._isend(tensor.contiguous(), dst)

    def irecv(self, tensor: torch.Tensor, src: int, *, kind: str = "", layer: int = -1) -> Work:
        return self._irecv(tensor, src)

    # ------------------------------------------------------------------------------------------------ collectives
    def broadcast(self, tensor: torch.Tensor, src: int, *, kind: str, layer: int = -1) -> torch.Tensor:
        """Broadcast ``tensor`` from ``src`` (in place on the others, who must pass a same-shaped buffer)."""
        if self.rank == src:
            p, n = self.world_size, tensor_bytes(tensor)
            for k in range(p - 1):  # pipelined ring: root -> root+1 -> ... (recorded once, by the root)
                self._count((src + k + 1) % p, n, kind, layer, src=(src + k) % p)
        return self._timed(self._broadcast, tensor, src, collective=True)

    def all_reduce(self, tensor: torch.Tensor, *, kind: str = "allreduce", layer: int = -1) -> torch.Tensor:
        """Sum ``tensor`` over ranks, in place; counted as a ring all-reduce."""
        p = self.world_size
        if p > 1:
            self._count((self.rank + 1) % p, 2 * (p - 1) * tensor_bytes(tensor) // p, kind, layer)
        return self._timed(self._all_reduce, tensor, collective=True)

    def all_gather(self, tensor: torch.Tensor, *, kind: str = "allgather", layer: int = -1) -> list[torch.Tensor]:
        """Gather equally shaped tensors from every rank; counted as a ring all-gather."""
        p = self.world_size
        if p > 1:
            self._count((self.rank + 1) % p, (p - 1) * tensor_bytes(tensor), kind, layer)
        return self._timed(self._all_gather, tensor, collective=True)

    def all_to_all(self, tensors: Sequence[torch.Tensor], *, kind: str, layer: int = -1) -> list[torch.Tensor]:
        """Send ``tensors[j]`` to rank ``j``; return what each rank sent here. Shapes may differ per pair
        (the backend exchanges sizes first; that header traffic is not counted)."""
        for j, t in enumerate(tensors):
            if j != self.rank:
                self._count(j, tensor_bytes(t), kind, layer)
        return self._timed(self._all_to_all, [t.contiguous() for t in tensors], collective=True)

    def barrier(self) -> None:
        self._timed(self._barrier, collective=True)

    def close(self) -> None:
        """Release backend resources, the side communicators' too (idempotent)."""
        self._close_sides()

    # ------------------------------------------------------------------------------------------------ backend
    @abc.abstractmethod
    def _send(self, tensor: torch.Tensor, dst: int) -> None: ...

    @abc.abstractmethod
    def _recv(self, tensor: torch.Tensor, src: int) -> torch.Tensor: ...

    @abc.abstractmethod
    def _isend(self, tensor: torch.Tensor, dst: int) -> Work: ...

    @abc.abstractmethod
    def _irecv(self, tensor: torch.Tensor, src: int) -> Work: ...

    @abc.abstractmethod
    def _broadcast(self, tensor: torch.Tensor, src: int) -> torch.Tensor: ...

    @abc.abstractmethod
    def _all_reduce(self, tensor: torch.Tensor) -> torch.Tensor: ...

    @abc.abstractmethod
    def _all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]: ...

    @abc.abstractmethod
    def _all_to_all(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]: ...

    @abc.abstractmethod
    def _barrier(self) -> None: ...


def summed_bytes(counters: Iterable[TrafficCounter], kind: Optional[str] = None, epoch: Optional[int] = None) -> int:
    """Total bytes over several ranks' counters, optionally of one kind and epoch."""
    total = 0
    for c in counters:
        for k, b in c.bytes_by_kind(epoch).items():
            if kind is None or k == kind:
                total += b
    return total
