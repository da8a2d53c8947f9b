"""``torch.distributed`` ranks: gloo on CPU, NCCL on GPU, one rank per process (e.g. per Dask worker).

Same semantics and the same accounting (inherited from :class:`~workbench.communicate.base.Communicator`)
as the in-process backend, so a program's counted bytes do not depend on where it runs.

* With a :class:`~workbench.communicate.sockets.SocketMesh` (``mesh=``; the Dask runner makes one for
  every gloo run) the point-to-point verbs, ``all_to_all`` and ``all_reduce`` go over the ranks' own TCP
  streams, read and written by the rank's thread: each piece travels with its dtype and shape, and the
  all-reduce is a ring over the same streams. Broadcast, all-gather and barrier stay gloo's.
* Without one (NCCL, or ``mesh=None``), ``all_to_all`` takes pieces of any shape per pair: the ranks first
  all-gather a small header (dtype and shape of every piece, not counted), then exchange the pieces with
  paired non-blocking ``isend``/``irecv`` (gloo has no ``all_to_all`` with uneven pieces). Empty pieces
  are not sent.
* ``all_gather`` takes equally shaped tensors, ``broadcast`` fills a same-shaped buffer on the others.
* Transport failures (a peer died, the process group timed out) surface as
  :class:`~workbench.communicate.inprocess.CommunicationError`, so the runtime can tell them apart
  from a bug in the rank's own code.

The process group is set up and torn down by the runtime (:mod:`workbench.runtime`); this class only
uses it.

Example (two processes, each with an initialised group):
    >>> import torch.distributed as dist                              # doctest: +SKIP
    >>> dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29555",
    ...                         rank=rank, world_size=2)                # doctest: +SKIP
    >>> comm = TorchDistCommunicator()                                  # doctest: +SKIP
    >>> comm.all_reduce(torch.ones(3))                                  # doctest: +SKIP
    tensor([2., 2., 2.])
"""

from __future__ import annotations

import functools
from typing import Optional

import torch
import torch.distributed as dist

from workbench._format import describe
from workbench.communicate.base import Communicator, TrafficCounter, Work
from workbench.communicate.inprocess import CommunicationError
from workbench.communicate.sockets import DTYPES as _DTYPES, MAX_DIMS as _MAX_DIMS, SocketMesh

__all__ = ["TorchDistCommunicator", "init_process_group", "shutdown_process_group"]


def init_process_group(backend: str, init_method: str, rank: int, world_size: int, *,
                       timeout_s: float = 120.0, device: Optional[torch.device] = None) -> None:
    """Initialise the default group with every setting explicit (no environment variables read or set).

    Args:
        backend: ``gloo`` or ``nccl``.
        init_method: ``tcp://HOST:PORT`` of rank 0 (the rendezvous).
        rank: this process's rank.
        world_size: number of ranks.
        timeout_s: how long the rendezvous and every later collective may wait for the others.
        device: the CUDA device of this rank for NCCL (``torch.cuda.set_device`` is called on it).
    """
    import datetime

    if backend == "nccl" and device is not None:
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=timeout_s))


def shutdown_process_group(*, synchronize: bool = True, settle_s: float = 0.2) -> None:
    """Destroy the default group, avoiding the gloo teardown deadlock of torch 2.2.

    ``~ProcessGroupGloo`` takes the work mutex while the caller holds the GIL; a gloo worker thread
    that is still releasing a finished operation's tensors holds that mutex and waits for the GIL
    to free their Python objects: a deadlock we saw in about one clean run in three. So the ranks
    first meet at a barrier (after a clean run; after a failure the peers may be gone), then sleep
    ``settle_s`` without the GIL so the worker threads finish their releases, then destroy.
    """
    import gc
    import time

    if not dist.is_initialized():
        return
    if synchronize:
        try:
            dist.barrier()
        except (RuntimeError, OSError):
            pass
    gc.collect()
    time.sleep(settle_s)
    try:
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - best effort teardown
        pass


def _transport(fn):
    """Turn backend errors into :class:`CommunicationError` (keeping the cause; the message names the call and
    the cause's type and text, so an error whose text is empty still says what it was)."""

    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        try:
            return fn(self, *args, **kwargs)
        except CommunicationError:
            raise
        except (RuntimeError, OSError) as exc:  # gloo/NCCL report peer loss and timeouts as RuntimeError
            raise CommunicationError(f"rank {self.rank}: {fn.__name__.lstrip('_')} failed: {describe(exc)}") from exc

    return wrapper


class TorchDistCommunicator(Communicator):
    """The communicator of this process's rank in an initialised ``torch.distributed`` group.

    Args:
        group: the process group (default: the default group).
        device: where receive buffers and headers live (``cuda`` for NCCL; default: CPU for gloo,
            ``cuda:<current>`` for NCCL).
        counter: where traffic is recorded.
        mesh: the ranks' socket mesh for the exchanges (CPU tensors, the default group); closed by :meth:`close`.

    Raises:
        RuntimeError: no process group is initialised.
    """

    backend = "torch.distributed"

    def __init__(self, group: Optional[dist.ProcessGroup] = None, *, device: Optional[torch.device] = None,
                 counter: Optional[TrafficCounter] = None, mesh: Optional[SocketMesh] = None):
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("TorchDistCommunicator needs an initialised torch.distributed process group")
        self.group = group
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        super().__init__(rank, world, counter)
        self.dist_backend = str(dist.get_backend(group))
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device()) if self.dist_backend == "nccl" \
                else torch.device("cpu")
        self.device = torch.device(device)
        if mesh is not None and (self.device.type != "cpu" or (group is not None and world != dist.get_world_size())):
            raise ValueError("TorchDistCommunicator: mesh= carries CPU tensors of every rank; got device "
                             f"{self.device} and group {group} of {world} ranks")
        self.mesh = mesh

    def _side(self, name: str, counter: TrafficCounter) -> "TorchDistCommunicator":
        """A ``new_group`` of every rank (gloo runs the collectives of different groups concurrently, from different
        threads) and, where this rank has a socket mesh, a second mesh (:meth:`SocketMesh.another`)."""
        if self.group is not None:
            raise ValueError("TorchDistCommunicator.side: side communicators are made from the default group's")
        group = dist.new_group(ranks=list(range(self.world_size)), backend=self.dist_backend)
        mesh = self.mesh.another(name) if self.mesh is not None else None
        return TorchDistCommunicator(group, device=self.device, counter=counter, mesh=mesh)

    def _peer(self, rank: int) -> int:
        """Global rank of group rank ``rank`` (p2p calls take global ranks)."""
        if self.group is None:
            return rank
        return dist.get_global_rank(self.group, rank)

    # p2p -----------------------------------------------------------------------------------------------------
    @_transport
    def _send(self, tensor: torch.Tensor, dst: int) -> None:
        if self.mesh is not None:
            self.mesh.wait([self.mesh.post_send(tensor, dst)])
            return
        dist.send(tensor, self._peer(dst), group=self.group)

    @_transport
    def _recv(self, tensor: torch.Tensor, src: int) -> torch.Tensor:
        if self.mesh is not None:
            self.mesh.wait([self.mesh.post_recv(src, into=tensor)])
            return tensor
        dist.recv(tensor, self._peer(src), group=self.group)
        return tensor

    @_transport
    def _isend(self, tensor: torch.Tensor, dst: int) -> Work:
        if self.mesh is not None:
            return Work(self._waiter(functools.partial(self.mesh.wait, [self.mesh.post_send(tensor, dst)])))
        req = dist.isend(tensor, self._peer(dst), group=self.group)
        return Work(self._waiter(req.wait))

    @_transport
    def _irecv(self, tensor: torch.Tensor, src: int) -> Work:
        if self.mesh is not None:
            op = self.mesh.post_recv(src, into=tensor)
            return Work(self._waiter(functools.partial(self.mesh.wait, [op])), tensor)
        req = dist.irecv(tensor, self._peer(src), group=self.group)
        return Work(self._waiter(req.wait), tensor)

    def _waiter(self, request_wait):
        def wait() -> None:
            try:
                self._timed(request_wait)
            except (RuntimeError, OSError) as exc:
                raise CommunicationError(f"rank {self.rank}: wait failed: {describe(exc)}") from exc
            return None  # Work.wait then returns the receive buffer

        return wait

    # collectives ---------------------------------------------------------------------------------------------
    @_transport
    def _broadcast(self, tensor: torch.Tensor, src: int) -> torch.Tensor:
        dist.broadcast(tensor, self._peer(src), group=self.group)
        return tensor

    @_transport
    def _all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.mesh is not None:
            return self.mesh.all_reduce(tensor)
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=self.group)
        return tensor

    @_transport
    def _all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        out = [torch.empty_like(tensor) for _ in range(self.world_size)]
        dist.all_gather(out, tensor, group=self.group)
        return out

    @_transport
    def _all_to_all(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        p, r = self.world_size, self.rank
        if len(tensors) != p:
            raise ValueError(f"all_to_all needs one tensor per rank ({p}), got {len(tensors)}")
        if self.mesh is not None:
            return self.mesh.exchange([t.cpu() for t in tensors])
        # header: per destination [dtype code, ndim, dims...] so receivers can size their buffers
        header = torch.zeros(p, 2 + _MAX_DIMS, dtype=torch.int64)
        for j, t in enumerate(tensors):
            if t.dim() > _MAX_DIMS:
                raise ValueError(f"all_to_all supports tensors of at most {_MAX_DIMS} dimensions, got {t.dim()}")
            header[j, 0] = _DTYPES.index(t.dtype)
            header[j, 1] = t.dim()
            header[j, 2:2 + t.dim()] = torch.tensor(t.shape, dtype=torch.int64)
        headers = [torch.empty_like(header, device=self.device) for _ in range(p)]
        dist.all_gather(headers, header.to(self.device), group=self.group)
        headers = [h.cpu() for h in headers]

        out: list[Optional[torch.Tensor]] = [None] * p
        ops = []
        for j in range(p):
            h = headers[j][r]
            shape = tuple(int(x) for x in h[2:2 + int(h[1])])
            if j == r:
                out[j] = tensors[j].clone()
                continue
            out[j] = torch.empty(shape, dtype=_DTYPES[int(h[0])], device=self.device)
            if out[j].numel():
                ops.append(dist.P2POp(dist.irecv, out[j], self._peer(j), self.group))
            if tensors[j].numel():
                ops.append(dist.P2POp(dist.isend, tensors[j].to(self.device), self._peer(j), self.group))
        if ops:
            for req in dist.batch_isend_irecv(ops):
                req.wait()
        return out  # type: ignore[return-value]

    def close(self) -> None:
        """Close the socket mesh, if any, and the side communicators' (the process groups are the runtime's to
        destroy)."""
        self._close_sides()
        if self.mesh is not None:
            self.mesh.close()

    @_transport
    def _barrier(self) -> None:
        dist.barrier(group=self.group)
