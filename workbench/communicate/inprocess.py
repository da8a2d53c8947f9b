"""In-process ranks: one thread per rank, talking through in-memory channels.

The fast default for notebooks and tests. Semantics match :class:`~workbench.communicate.torchdist.
TorchDistCommunicator` and the accounting is inherited from :class:`~workbench.communicate.base.
Communicator`, so a program counts the same bytes on either backend.

* Point-to-point: one FIFO queue per (source, destination) pair. ``send``/``isend`` are buffered (they
  never block); ``recv`` waits for the matching message and copies it into the caller's buffer.
* Collectives: every rank deposits its contribution in a slot, then all ranks meet at a barrier, read
  what they need and meet again (so slots can be reused by the next collective). ``all_reduce`` sums
  the contributions in rank order on every rank, so all ranks get bit-identical results and a rerun
  gives the same bits.
* Tensors are copied on the way in and out: no rank ever holds a view of another rank's memory.
* A failing rank must not hang the others: :meth:`InProcessGroup.abort` wakes every waiter with
  :class:`CommunicationAborted`; every wait also gives up after ``timeout`` seconds.
* Side communicators (:meth:`~workbench.communicate.base.Communicator.side`): a second group of the same ranks
  (:meth:`InProcessGroup.side_group`), with its own channels and barrier; aborting a group aborts its side groups.

Example:
    >>> import threading, torch
    >>> group = InProcessGroup(2)
    >>> out = [None, None]
    >>> def body(rank):
    ...     comm = group.communicator(rank)
    ...     t = torch.tensor([float(rank + 1)])
    ...     out[rank] = comm.all_reduce(t).item()
    >>> threads = [threading.Thread(target=body, args=(r,)) for r in range(2)]
    >>> for t in threads: t.start()
    >>> for t in threads: t.join()
    >>> out
    [3.0, 3.0]
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Optional

import torch

from workbench._validation import ErrorCollector
from workbench.communicate.base import Communicator, TrafficCounter, Work

__all__ = ["InProcessGroup", "InProcessCommunicator", "CommunicationError", "CommunicationAborted",
           "CommunicationTimeout"]

_POLL_S = 0.05  # how often a blocked receive re-checks the abort flag


class CommunicationError(RuntimeError):
    """A communication call failed because of the transport or a peer (not because of this rank's code)."""


class CommunicationAborted(CommunicationError):
    """The group was aborted (another rank failed) while this rank was communicating."""


class CommunicationTimeout(CommunicationError):
    """A communication call waited longer than the group's timeout for its peers."""


def _copy(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone()


class InProcessGroup:
    """The shared state of ``world_size`` thread ranks: channels, collective slots and the abort flag.

    Args:
        world_size: number of ranks (threads).
        timeout: seconds any single wait (receive, collective) may block before
            :class:`CommunicationTimeout` is raised.

    Raises:
        ParamError: ``world_size < 1`` or ``timeout <= 0``.
    """

    def __init__(self, world_size: int, *, timeout: float = 300.0):
        errs = ErrorCollector("InProcessGroup")
        errs.check(isinstance(world_size, int) and not isinstance(world_size, bool) and world_size >= 1,
                   "world_size", "an int in [1, inf]", world_size)
        errs.check(isinstance(timeout, (int, float)) and timeout > 0, "timeout", "a number in (0, inf]", timeout)
        errs.raise_if_any()
        self.world_size = world_size
        self.timeout = float(timeout)
        self._queues = {(s, d): queue.Queue() for s in range(world_size) for d in range(world_size)}
        self._slots: list[Any] = [None] * world_size
        self._barrier = threading.Barrier(world_size)
        self._abort_exc: Optional[BaseException] = None
        self._abort_lock = threading.Lock()
        self._sides: dict[str, "InProcessGroup"] = {}

    # ------------------------------------------------------------------------------------------------ public
    def communicator(self, rank: int, counter: Optional[TrafficCounter] = None) -> "InProcessCommunicator":
        """The communicator of ``rank`` (call once per rank, from the thread that runs it)."""
        if not (0 <= rank < self.world_size):
            raise ValueError(f"rank {rank} is outside [0, {self.world_size})")
        return InProcessCommunicator(self, rank, counter)

    def side_group(self, name: str) -> "InProcessGroup":
        """The group of side communicators ``name`` of these ranks (made by the first rank that asks; the same
        object for every rank), aborted with this one."""
        with self._abort_lock:
            group = self._sides.get(name)
            if group is None:
                group = self._sides[name] = InProcessGroup(self.world_size, timeout=self.timeout)
                if self._abort_exc is not None:
                    group._abort_exc = self._abort_exc
                    group._barrier.abort()
            return group

    def abort(self, exc: Optional[BaseException] = None) -> None:
        """Wake every rank blocked in this group and its side groups with :class:`CommunicationAborted`
        (idempotent)."""
        with self._abort_lock:
            if self._abort_exc is None:
                self._abort_exc = exc if exc is not None else RuntimeError("aborted")
            sides = list(self._sides.values())
        self._barrier.abort()
        for group in sides:
            group.abort(exc)

    @property
    def aborted(self) -> bool:
        return self._abort_exc is not None

    # ------------------------------------------------------------------------------------------------ internals
    def _raise_if_aborted(self) -> None:
        if self._abort_exc is not None:
            raise CommunicationAborted(f"communication aborted: {self._abort_exc!r}")

    def _put(self, src: int, dst: int, tensor: torch.Tensor) -> None:
        self._raise_if_aborted()
        self._queues[(src, dst)].put(_copy(tensor))

    def _get(self, src: int, dst: int) -> torch.Tensor:
        q = self._queues[(src, dst)]
        deadline = time.monotonic() + self.timeout
        while True:
            self._raise_if_aborted()
            try:
                return q.get(timeout=_POLL_S)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise CommunicationTimeout(
                        f"rank {dst} waited more than {self.timeout:g} s for a message from rank {src}") from None

    def _wait_all(self, rank: int) -> None:
        try:
            self._barrier.wait(self.timeout)
        except threading.BrokenBarrierError:
            self._raise_if_aborted()
            self.abort(CommunicationTimeout(f"rank {rank} waited more than {self.timeout:g} s in a collective"))
            raise CommunicationTimeout(
                f"rank {rank} waited more than {self.timeout:g} s for the other ranks in a collective") from None

    def _exchange(self, rank: int, value: Any) -> list[Any]:
        """Deposit ``value``, wait for all ranks, return every rank's value (in rank order)."""
        self._raise_if_aborted()
        self._slots[rank] = value
        self._wait_all(rank)
        out = list(self._slots)
        self._wait_all(rank)  # nobody overwrites a slot before everyone has read it
        return out


class InProcessCommunicator(Communicator):
    """One thread rank of an :class:`InProcessGroup` (get it from :meth:`InProcessGroup.communicator`)."""

    backend = "inprocess"

    def __init__(self, group: InProcessGroup, rank: int, counter: Optional[TrafficCounter] = None):
        super().__init__(rank, group.world_size, counter)
        self.group = group

    def _side(self, name: str, counter: TrafficCounter) -> "InProcessCommunicator":
        return self.group.side_group(name).communicator(self.rank, counter)

    # p2p -----------------------------------------------------------------------------------------------------
    def _send(self, tensor: torch.Tensor, dst: int) -> None:
        self.group._put(self.rank, dst, tensor)

    def _recv(self, tensor: torch.Tensor, src: int) -> torch.Tensor:
        got = self.group._get(src, self.rank)
        if got.shape != tensor.shape:
            raise CommunicationError(
                f"rank {self.rank} received a tensor of shape {tuple(got.shape)} from rank {src} into a buffer "
                f"of shape {tuple(tensor.shape)}")
        tensor.copy_(got)
        return tensor

    def _isend(self, tensor: torch.Tensor, dst: int) -> Work:
        self.group._put(self.rank, dst, tensor)  # buffered: complete at once
        return Work(lambda: None)

    def _irecv(self, tensor: torch.Tensor, src: int) -> Work:
        return Work(lambda: self._timed(self._recv, tensor, src), tensor)

    # collectives ---------------------------------------------------------------------------------------------
    def _broadcast(self, tensor: torch.Tensor, src: int) -> torch.Tensor:
        values = self.group._exchange(self.rank, _copy(tensor) if self.rank == src else None)
        if self.rank != src:
            tensor.copy_(values[src])
        return tensor

    def _all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        values = self.group._exchange(self.rank, _copy(tensor))
        acc = values[0].clone()
        for v in values[1:]:  # rank order on every rank: bit-identical results
            acc += v
        tensor.copy_(acc)
        return tensor

    def _all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        values = self.group._exchange(self.rank, _copy(tensor))
        return [v.clone() for v in values]

    def _all_to_all(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        if len(tensors) != self.world_size:
            raise ValueError(f"all_to_all needs one tensor per rank ({self.world_size}), got {len(tensors)}")
        values = self.group._exchange(self.rank, [_copy(t) for t in tensors])
        return [values[j][self.rank] for j in range(self.world_size)]  # each piece is read by one rank only

    def _barrier(self) -> None:
        self.group._exchange(self.rank, None)
