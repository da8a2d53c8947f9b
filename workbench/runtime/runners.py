"""Where the ranks of a run execute: the shared runner contract and the in-process runners.

A runner takes a prepared program (one payload per rank) and returns one :class:`RankOutcome` per
rank, or raises a :class:`~workbench.runtime.errors.RunError`. Runners never write logs themselves:
they pass each rank's events to ``env.emit`` (thread-safe), and :mod:`workbench.runtime.launch`
does the rest. The Dask runner lives in :mod:`workbench.runtime.dask_runner`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import traceback
from typing import Any, Callable, Optional, Sequence

import torch

from workbench._format import describe
from workbench.communicate.inprocess import CommunicationError, InProcessGroup
from workbench.events import Event
from workbench.runtime.errors import RankFailed, RendezvousTimeout, RunError, WorkerLost
from workbench.runtime.program import Program, RankContext, StopRequested

__all__ = ["LIVENESS_S", "RunEnv", "RankOutcome", "run_inprocess", "rank_failed", "root_cause", "inprocess_devices",
           "threads_per_rank", "rank_threads", "cuda_refused", "pick_backend", "check_embedded_device"]

LIVENESS_S = 15.0
"""Seconds a Dask rank's worker may go without a heartbeat reaching the scheduler before the run fails with
``WorkerLost`` (``launch(liveness=...)``, ``workbench run --liveness``)."""


@dataclasses.dataclass
class RunEnv:
    """What the launcher hands a runner.

    Attributes:
        run_id: the run's id.
        world_size: number of ranks.
        emit: thread-safe event sink (run log + listeners).
        stop_flag: set by :meth:`RunHandle.stop`.
        timeout_s: how long any rank may wait for its peers (rendezvous, collectives, receives).
        liveness_s: the Dask runner: how long a rank's worker (its heartbeats to the scheduler) or the scheduler
            may stay silent before the run fails with ``WorkerLost`` or ``SchedulerLost`` (``inf``: only when the
            scheduler drops the worker); the in-process runners have no peer that could vanish alone.
        device: ``auto``, ``cpu`` or ``cuda``.
        set_info: ``set_info(name, value)`` publishes runner facts on the handle (``dashboard_link``).
    """

    run_id: str
    world_size: int
    emit: Callable[[Event], None]
    stop_flag: threading.Event
    timeout_s: float = 120.0
    liveness_s: float = LIVENESS_S
    device: str = "auto"
    set_info: Callable[[str, Any], None] = lambda name, value: None


@dataclasses.dataclass
class RankOutcome:
    """How one rank ended: ``status`` is ``finished`` (``result`` holds its dict) or ``stopped``."""

    rank: int
    status: str
    result: Optional[dict] = None
    worker: Optional[str] = None
    num_events: int = 0


def inprocess_devices(device: str, world_size: int, gpus: Optional[int] = None) -> list[torch.device]:
    """The device of each thread rank of one process: ``cuda:r`` for rank ``r`` when the process sees a GPU
    per rank, else the CPU (``auto``); one rank takes ``cuda:0`` where there is a GPU.

    Thread ranks never share a GPU: PyTorch runs the backward pass of every thread's CUDA work on one
    autograd thread per device, so a rank blocked in a collective inside its backward (the halo gradients)
    would wait forever for a peer queued behind it. ``device="cuda"`` with fewer GPUs than ranks is
    refused with ``ParamError`` (run one rank per process with ``runner="dask"`` instead). ``gpus``: the
    GPUs this process sees (default: ``torch.cuda.device_count()``).

    Example:
        >>> [str(d) for d in inprocess_devices("auto", 2, gpus=1)]
        ['cpu', 'cpu']
        >>> [str(d) for d in inprocess_devices("cuda", 2, gpus=2)]
        ['cuda:0', 'cuda:1']
    """
    if gpus is None:
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device == "cpu" or (device == "auto" and gpus < world_size):
        return [torch.device("cpu")] * world_size
    if gpus >= world_size:
        return [torch.device("cuda", r) for r in range(world_size)]
    if gpus == 0:
        raise cuda_refused("the in-process runners", "where this process sees no GPU", device)
    raise cuda_refused("the in-process runners", f"when {world_size} thread ranks share {gpus} GPU(s) (their "
                       f"backward passes would deadlock on the GPU's one autograd thread; runner='dask' runs one rank "
                       f"per process)", device)


def cuda_refused(owner: str, when: str, device: Any = "cuda"):
    """The one refusal of ``device='cuda'`` where not every rank gets a GPU of its own (every runner words it so):
    a ``ParamError`` naming ``device`` of ``owner`` and the value, ``when`` saying why (the caller raises it).

    Example:
        >>> str(cuda_refused("the in-process runners", "where this process sees no GPU"))
        "The 'device' parameter of the in-process runners must be 'cpu' or 'auto' where this process sees no GPU. \
Got 'cuda' instead."
    """
    from workbench._validation import ParamError, param_error

    return ParamError([param_error("device", owner, f"'cpu' or 'auto' {when}", device)])


_GPU_PER_WORKER = ("NCCL needs a GPU per rank: a cluster with one GPU per worker, such as dask-cuda's "
                   "LocalCUDACluster or dask-cuda-worker, given as scheduler=")


def pick_backend(infos: list[dict], device: str) -> tuple[str, str]:
    """``(backend, device)``: NCCL on ``cuda:0`` when every rank has a GPU of its own, else gloo on CPU.

    Raises:
        ParamError: ``device='cuda'`` where not every rank's worker has a GPU of its own (``auto`` takes the CPU
            then; ``cuda`` is never silently run on the CPU). Called before any rank is submitted.

    Example:
        >>> pick_backend([{"gpu": "a/0"}, {"gpu": "b/0"}], "cuda"), pick_backend([{"gpu": None}], "auto")
        (('nccl', 'cuda:0'), ('gloo', 'cpu'))
    """
    if device == "cpu":
        return "gloo", "cpu"
    gpus = [i["gpu"] for i in infos]
    if all(gpus) and len(set(gpus)) == len(gpus):
        return "nccl", "cuda:0"
    if device == "cuda":
        have = [g for g in gpus if g]
        if not have:
            raise cuda_refused("the Dask runner", f"where the workers of the {len(gpus)} rank(s) see no GPU", device)
        raise cuda_refused("the Dask runner", f"when not every rank's worker has a GPU of its own ({len(have)} of "
                           f"{len(gpus)} rank(s) see a GPU, {len(set(have))} distinct; {_GPU_PER_WORKER})", device)
    return "gloo", "cpu"


def check_embedded_device(device: str, world_size: int, gpus: Optional[int] = None) -> None:
    """Refuse ``device='cuda'`` on the embedded ``LocalCluster`` where its workers could not each have a GPU of
    their own (before anything starts; :func:`pick_backend` checks the workers themselves on any cluster).

    The embedded cluster's workers run on this machine and see its GPUs (``gpus``, default: this process's
    count): each takes ``cuda:0`` (:class:`TorchWorkerPlugin`), so only one rank can have a GPU of its own.

    Example:
        >>> check_embedded_device("cuda", 1, gpus=1); check_embedded_device("auto", 2, gpus=0)
        >>> check_embedded_device("cuda", 2, gpus=0)
        Traceback (most recent call last):
        ...
        workbench._validation.ParamError: The 'device' parameter of the Dask runner must be 'cpu' or 'auto' where \
the embedded LocalCluster's workers (on this machine) see no GPU. Got 'cuda' instead.
    """
    if device != "cuda":
        return
    if gpus is None:
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus == 0:
        raise cuda_refused("the Dask runner", "where the embedded LocalCluster's workers (on this machine) see no GPU",
                           device)
    if world_size > 1:
        raise cuda_refused("the Dask runner", f"when the embedded LocalCluster's {world_size} workers share this "
                           f"machine's GPUs (each takes cuda:0; {_GPU_PER_WORKER})", device)


def host_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells it, else ``os.cpu_count()``)."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threads_per_rank(ranks_on_host: int, cores: Optional[int] = None) -> int:
    """Intra-op threads of each rank: the host's cores shared out among the ranks it runs, at least 1.

    Example:
        >>> threads_per_rank(2, cores=16), threads_per_rank(4, cores=2)
        (8, 1)
    """
    return max(1, int(cores if cores is not None else host_cores()) // max(1, int(ranks_on_host)))


@contextlib.contextmanager
def rank_threads(num_threads: int):
    """``torch.set_num_threads(num_threads)`` for the ranks run inside, restored afterwards. Torch's count is
    per process, so thread ranks share it; the sparse kernel follows it (:mod:`workbench.train.kernels`)."""
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, int(num_threads)))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def rank_failed(rank: int, worker: Optional[str], step: Optional[int], exc: BaseException) -> RankFailed:
    """Wrap an exception raised by a rank (with its traceback as text)."""
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return RankFailed(rank=rank, worker=worker, step=step, message=describe(exc),
                      remote_traceback=tb, exc_type=type(exc).__name__,
                      in_communication=isinstance(exc, CommunicationError))


def root_cause(errors: Sequence[RunError]) -> RunError:
    """The error to report when several ranks failed: a lost worker first, then a rank's own error,
    then a rendezvous timeout, then the transport errors that followed; the earliest of a kind."""

    def key(e: RunError) -> int:
        if isinstance(e, WorkerLost):
            return 0
        if isinstance(e, RankFailed) and not e.in_communication:
            return 1
        if isinstance(e, RendezvousTimeout):
            return 2
        return 3

    return min(errors, key=key)  # ties: the first one detected


def run_inprocess(program: Program, payloads: Sequence[Any], env: RunEnv) -> list[RankOutcome]:
    """Run every rank as a thread of this process over an :class:`InProcessGroup`.

    A rank that raises aborts the group, which wakes the others with a transport error; the
    first failing rank's error is raised here once all threads have left.
    """
    world_size = env.world_size
    devices = inprocess_devices(env.device, world_size)   # before any rank starts: may raise ParamError
    group = InProcessGroup(world_size, timeout=env.timeout_s)
    outcomes: list[Optional[RankOutcome]] = [None] * world_size
    errors: list[RunError] = []
    lock = threading.Lock()

    def body(rank: int) -> None:
        comm = group.communicator(rank)
        ctx = RankContext(rank=rank, world_size=world_size, comm=comm, run_id=env.run_id, device=devices[rank],
                          emit=env.emit, stop_requested=env.stop_flag.is_set,
                          program=program.name)
        try:
            outcomes[rank] = RankOutcome(rank, "finished", program.run_rank(ctx, payloads[rank]))
        except StopRequested:
            outcomes[rank] = RankOutcome(rank, "stopped")
        except BaseException as exc:  # noqa: BLE001 - every failure is reported, typed, on the client
            err = rank_failed(rank, None, comm.epoch, exc)
            err.__cause__ = exc
            with lock:
                errors.append(err)
            group.abort(exc)

    with rank_threads(threads_per_rank(world_size)):   # every rank of this host gets cores / ranks
        if world_size == 1:  # the reference runner: no extra thread
            body(0)
        else:
            threads = [threading.Thread(target=body, args=(r,), name=f"{env.run_id}-rank{r}", daemon=True)
                       for r in range(world_size)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    if errors:
        raise root_cause(errors)
    return [o for o in outcomes if o is not None]
