"""The worker side of the Dask runner (:mod:`workbench.runtime.dask_runner`): the per-worker torch setup, the
process group's rendezvous, and the body of one rank.

Example:
    >>> _silent_limit(120), _silent_limit(2), _silent_limit(120, liveness_s=15)
    (30.0, 10.0, 15.0)
"""

from __future__ import annotations

import os
import socket
import threading
import time
import traceback
from typing import Any, Optional
from urllib.parse import urlparse

from distributed.diagnostics.plugin import WorkerPlugin

from workbench.runtime.errors import RendezvousTimeout
from workbench.runtime.program import Program, RankContext, StopRequested
from workbench.runtime.runners import RankOutcome, rank_failed

__all__ = ["TorchWorkerPlugin", "interface_of", "join_process_group"]

_SCHEDULER_SILENT_S = 30.0   # a scheduler silent this long (at most the run's timeout) fails the run


def _silent_limit(timeout_s: float, liveness_s: float = _SCHEDULER_SILENT_S) -> float:
    """Seconds of scheduler silence that end a run, for the client and its ranks alike: the run's liveness, at
    most 30 s or the run's timeout, never under 10 (a scheduler answering a busy client slowly is not lost)."""
    return max(10.0, min(float(timeout_s), float(liveness_s), _SCHEDULER_SILENT_S))


class TorchWorkerPlugin(WorkerPlugin):
    """Per-worker torch setup (idempotent: registering it again is a no-op).

    Args:
        num_threads: ``torch.set_num_threads`` on each worker (``None`` leaves it).
        seed: ``torch.manual_seed`` on each worker (programs seed themselves too).
    """

    idempotent = True
    name = "workbench-torch"

    def __init__(self, num_threads: Optional[int] = None, seed: int = 0):
        self.num_threads = num_threads
        self.seed = seed

    def setup(self, worker) -> None:
        import torch

        if self.num_threads:
            torch.set_num_threads(self.num_threads)
        torch.manual_seed(self.seed)
        host = urlparse(worker.address).hostname or ""
        ifname = "lo" if host in ("127.0.0.1", "localhost", "::1") else interface_of(host)
        if ifname:   # the process group's sockets use the worker's own interface (loopback stays loopback)
            os.environ.setdefault("GLOO_SOCKET_IFNAME", ifname)
            os.environ.setdefault("NCCL_SOCKET_IFNAME", ifname)
        if torch.cuda.is_available():
            torch.cuda.set_device(0)  # dask-cuda gives each worker its own GPU as cuda:0


def interface_of(address: str) -> Optional[str]:
    """The network interface holding ``address`` on this machine (None when none does).

    gloo otherwise picks the interface its host name resolves to, which on a multi-homed host (or a network
    namespace sharing the host's name) is not the one the Dask worker listens on, and the process group
    cannot connect.

    Example:
        >>> interface_of("127.0.0.1")
        'lo'
    """
    import psutil

    for name, addrs in psutil.net_if_addrs().items():
        if any(a.address == address for a in addrs):
            return name
    return None


class _IgnoreInterrupt(WorkerPlugin):
    """Embedded workers leave Ctrl-C to their client process, which stops the run and closes them.

    A terminal sends SIGINT to its whole process group, the worker processes included: interrupted, a
    worker's event loop dies under its rank and the run fails (a lost worker) instead of stopping.
    """

    idempotent = True
    name = "workbench-ignore-sigint"

    def setup(self, worker) -> None:
        import signal

        if threading.current_thread() is threading.main_thread():   # the worker process's event loop
            signal.signal(signal.SIGINT, signal.SIG_IGN)


# ---------------------------------------------------------------------------------------------------------
# Worker side
# ---------------------------------------------------------------------------------------------------------


def _free_port(dask_worker=None) -> int:
    host = urlparse(dask_worker.address).hostname if dask_worker is not None else "127.0.0.1"
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _set_threads(num_threads: int, dask_worker=None) -> int:
    import torch

    torch.set_num_threads(num_threads)
    return num_threads


def _worker_info(dask_worker=None) -> dict:
    import torch

    cuda = torch.cuda.is_available()
    from workbench.runtime.runners import host_cores

    return {"host": socket.gethostname(), "cores": host_cores(), "num_gpus": torch.cuda.device_count() if cuda else 0,
            "gpu": f"{socket.gethostname()}/{os.environ.get('CUDA_VISIBLE_DEVICES', '0').split(',')[0]}"
            if cuda else None}


class _StopPoller:
    """``ctx.stop_requested`` on a worker: a background thread reads the run's ``distributed.Event``
    every 0.2 s, and the rank only reads the last answer. The rank never waits on a round trip to the
    scheduler, which is slow whenever the client's process is busy (a dashboard rendering, say): a
    blocking read here once slowed a 13 ms epoch by half even with the dashboard on another core.

    Silence is confirmed before the rank stops: when the last answer is older than ``silent_s``, the rank waits
    up to ``confirm_s`` seconds (the GIL free) for a fresh one, since a rank that held the GIL through a long step
    kept the polling thread from asking at all (a 2-million-vertex full-graph run on four workers of two cores
    stopped itself that way, its scheduler well).

    It also says stop once the rank's own task (``key`` on ``worker``) was cancelled: the client gave the run
    up (a failure it reported) and released the task, or left. A rank whose client failed the run with
    ``SchedulerLost`` while the scheduler came back before the rank's own limit would otherwise train on,
    holding its worker.
    """

    def __init__(self, name: str, period_s: float = 0.2, silent_s: float = _SCHEDULER_SILENT_S, *,
                 worker=None, key=None, confirm_s: float = 3.0):
        self.name, self.period_s, self.silent_s, self.confirm_s = name, period_s, silent_s, confirm_s
        self.worker, self.key = worker, key
        self._flag = threading.Event()
        self._done = threading.Event()
        self._answered = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._last_answer = time.monotonic()

    def __call__(self) -> bool:
        """Whether the run is to stop: asked by the client, or the scheduler silent for ``silent_s`` seconds
        (the client has failed the run with ``SchedulerLost`` by then: the rank frees its worker)."""
        if self._thread is None:  # made in the task's thread, where the worker's client is known; bound
            from distributed import Event, get_client  # to it, the Event also answers the polling thread

            event = Event(self.name, client=get_client())
            self._thread = threading.Thread(target=self._poll, args=(event,), name=f"stop-poller-{self.name}",
                                            daemon=True)
            self._thread.start()
        if self._task_cancelled():
            self._flag.set()
        elif time.monotonic() - self._last_answer > self.silent_s and not self._flag.is_set():
            # Confirm before giving up: a rank that held the GIL for a long step (numpy, a Python loop) kept
            # the polling thread from asking at all, which is not the scheduler's silence. Waiting here frees the
            # GIL; a live scheduler answers the next poll within the confirmation time.
            self._answered.clear()
            if not self._answered.wait(self.confirm_s) and time.monotonic() - self._last_answer > self.silent_s:
                self._flag.set()
        return self._flag.is_set()

    def _task_cancelled(self) -> bool:
        if self.worker is None or self.key is None:
            return False
        task = self.worker.state.tasks.get(self.key)   # a read of the worker's state (no round trip)
        return task is None or task.state == "cancelled"

    def _poll(self, event) -> None:
        while not self._done.wait(self.period_s):
            try:
                if event.is_set():
                    self._flag.set()
                    return
                self._last_answer = time.monotonic()
                self._answered.set()
            except Exception:  # noqa: BLE001 - a control hiccup must not fail the run; try again
                pass

    def close(self) -> None:
        self._done.set()


def _is_timeout(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}".lower()
    return "timeout" in text or "timed out" in text


def _rendezvous_store(init_method: str, rank: int, world_size: int, timeout_s: float):
    """The rendezvous ``TCPStore`` at ``init_method`` (``tcp://HOST:PORT``), served by rank 0.

    Rank 0 binds the store's socket to ``HOST`` itself and hands it to torch (``master_listen_fd``):
    torch's ``tcp://`` rendezvous would listen on every interface of the host (``::``), beyond the
    loopback an embedded cluster keeps to. The other ranks connect (and retry) until ``timeout_s``;
    rank 0 waits that long for all of them.
    """
    import datetime

    import torch.distributed as dist

    url = urlparse(init_method)
    timeout = datetime.timedelta(seconds=timeout_s)
    if rank != 0:
        return dist.TCPStore(url.hostname, url.port, world_size, is_master=False, timeout=timeout)
    family, kind, proto, _, address = socket.getaddrinfo(url.hostname, url.port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(max(128, world_size))
    except BaseException:
        sock.close()
        raise
    # the store owns the descriptor from here on (it closes it when destroyed)
    return dist.TCPStore(url.hostname, url.port, world_size, is_master=True, timeout=timeout,
                         master_listen_fd=sock.detach())


def join_process_group(backend: str, init_method: str, rank: int, world_size: int, timeout_s: float,
                       device, worker: Optional[str] = None):
    """Join the rendezvous and return its store; raise :class:`RendezvousTimeout` or :class:`RankFailed`.

    Every setting is explicit, as in :func:`workbench.communicate.torchdist.init_process_group`; the
    store is made here so that rank 0 serves it on its worker's address only (:func:`_rendezvous_store`).
    """
    import datetime

    import torch
    import torch.distributed as dist

    try:
        store = _rendezvous_store(init_method, rank, world_size, timeout_s)
        if backend == "nccl" and device is not None:
            torch.cuda.set_device(device)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=timeout_s))
        return store
    except Exception as exc:  # noqa: BLE001
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        if _is_timeout(exc):
            raise RendezvousTimeout(rank=rank, worker=worker, message=f"{type(exc).__name__}: {exc}",
                                    remote_traceback=tb, init_method=init_method, timeout_s=timeout_s) from None
        raise rank_failed(rank, worker, None, exc) from None


def _rank_task(program: Program, payload: Any, rank: int, world_size: int, init_method: str, backend: str,
               device: str, run_id: str, topic: str, timeout_s: float, stop_name: str,
               liveness_s: float = _SCHEDULER_SILENT_S) -> RankOutcome:
    """The body of one rank on a Dask worker. It stops (at its next epoch) once the scheduler stayed silent for
    ``_silent_limit(timeout_s, liveness_s)``, when the client has failed the run with ``SchedulerLost``."""
    import torch
    from distributed import get_worker

    from workbench.communicate.sockets import SocketMesh
    from workbench.communicate.torchdist import TorchDistCommunicator, shutdown_process_group

    worker = get_worker()
    address = worker.address
    num_events = 0

    def emit(event) -> None:
        nonlocal num_events
        msg = event.to_dict()
        msg["_rank"] = rank
        worker.log_event(topic, msg)
        num_events += 1

    worker.log_event(topic, {"_rank": rank, "_control": "started"})
    dev = torch.device(device)
    store = join_process_group(backend, init_method, rank, world_size, timeout_s, dev, address)
    clean, comm, stop_poller = False, None, None
    try:
        mesh = None
        if backend == "gloo" and world_size > 1:   # the exchanges go over the rank's own streams
            mesh = SocketMesh.connect(store, rank, world_size, host=urlparse(address).hostname or "127.0.0.1",
                                      timeout_s=timeout_s)
        comm = TorchDistCommunicator(device=dev, mesh=mesh)
        stop_poller = _StopPoller(stop_name, silent_s=_silent_limit(timeout_s, liveness_s), worker=worker,
                                  key=worker.get_current_task())
        ctx = RankContext(rank=rank, world_size=world_size, comm=comm, run_id=run_id, device=dev, emit=emit,
                          stop_requested=stop_poller, program=program.name,
                          host=urlparse(address).hostname or "127.0.0.1")
        try:
            outcome = RankOutcome(rank, "finished", program.run_rank(ctx, payload), address)
        except StopRequested:
            outcome = RankOutcome(rank, "stopped", None, address)
        clean = True
        outcome.num_events = num_events
        return outcome
    except BaseException as exc:  # noqa: BLE001 - typed and re-raised on the client
        raise rank_failed(rank, address, comm.epoch if comm is not None else None, exc) from None
    finally:
        if stop_poller is not None:
            stop_poller.close()
        if comm is not None:
            comm.close()
        shutdown_process_group(synchronize=clean)

