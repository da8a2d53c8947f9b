"""Ranks for tests: in-process thread ranks, spawned gloo ranks, an embedded Dask cluster, and a program run.

- :func:`run_ranks`: ``body(comm)`` on ``world_size`` thread ranks of an
  :class:`~workbench.communicate.inprocess.InProcessGroup`; returns what each rank returned;
- :func:`run_gloo_ranks`: ``body(comm)`` on spawned processes over ``torch.distributed`` gloo (``body`` must be
  picklable: a module-level function or a ``functools.partial`` of one);
- :func:`local_cluster`: a context manager yielding a ``distributed.Client`` on an embedded ``LocalCluster``
  (single-threaded worker processes on 127.0.0.1), closed on exit; what the ``dask_client`` fixture uses;
- :func:`run_program`: a :class:`~workbench.runtime.program.Program`'s ``prepare`` -> ``run_rank`` on thread
  ranks -> ``summarize``, with every event it emitted;
- :func:`rel_error`, :func:`assert_same_training`: compare two runs' losses and weights.

Example:
    >>> run_ranks(3, lambda comm: comm.all_reduce(torch.ones(2) * comm.rank).tolist())
    [[3.0, 3.0], [3.0, 3.0], [3.0, 3.0]]
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import tempfile
import threading
from typing import Any, Callable, Iterator

import torch

__all__ = ["run_ranks", "run_gloo_ranks", "free_port", "local_cluster", "run_program", "rel_error",
           "assert_same_training"]


def run_ranks(world_size: int, body: Callable[[Any], Any], *, timeout: float = 60.0, group: Any = None) -> list:
    """``body(comm)`` on ``world_size`` thread ranks; the results by rank.

    A rank that raises aborts the group (the others wake with a transport error) and the first rank's error
    is raised here once every thread has left. ``group`` (default: a new ``InProcessGroup``) is any object
    with ``communicator(rank)`` and ``abort(exc)``.
    """
    if group is None:
        from workbench.communicate.inprocess import InProcessGroup

        group = InProcessGroup(world_size, timeout=timeout)
    results: list = [None] * world_size
    errors: list = [None] * world_size

    def target(rank: int) -> None:
        try:
            results[rank] = body(group.communicator(rank))
        except BaseException as exc:  # noqa: BLE001 - reported to the caller
            errors[rank] = exc
            group.abort(exc)

    threads = [threading.Thread(target=target, args=(r,), daemon=True) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), f"a rank hung (no result within {timeout} s)"
    for e in errors:
        if e is not None:
            raise e
    return results


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for a ``torch.distributed`` rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gloo_main(rank: int, world_size: int, port: int, out_dir: str, body: Callable[[Any], Any],
               exchange: str = "sockets") -> None:
    """One spawned gloo rank: ``body(TorchDistCommunicator(...))``, pickled to ``out_dir/<rank>.pkl``."""
    import torch.distributed as dist

    from workbench.communicate.sockets import SocketMesh
    from workbench.communicate.torchdist import TorchDistCommunicator, init_process_group, shutdown_process_group

    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    init_process_group("gloo", f"tcp://127.0.0.1:{port}", rank, world_size, timeout_s=60)
    comm = None
    try:
        mesh = None
        if exchange == "sockets":
            store = dist.distributed_c10d._get_default_store()
            mesh = SocketMesh.connect(store, rank, world_size, host="127.0.0.1", timeout_s=60)
        comm = TorchDistCommunicator(mesh=mesh)
        res = body(comm)
        with open(os.path.join(out_dir, f"{rank}.pkl"), "wb") as f:
            pickle.dump(res, f)
    finally:
        if comm is not None:
            comm.close()
        shutdown_process_group()


def run_gloo_ranks(world_size: int, body: Callable[[Any], Any], *, exchange: str = "sockets") -> list:
    """``body(comm)`` on ``world_size`` spawned processes over gloo (127.0.0.1); the results by rank.

    ``body`` and its results must pickle: a module-level function, or a ``functools.partial`` of one.
    ``exchange``: how point-to-point verbs and ``all_to_all`` travel, as in runs: ``sockets`` (a
    :class:`~workbench.communicate.sockets.SocketMesh`, the default) or ``gloo`` (its paired calls).
    """
    import torch.multiprocessing as mp

    if exchange not in ("sockets", "gloo"):
        raise ValueError(f"run_gloo_ranks: exchange must be 'sockets' or 'gloo', got {exchange!r}")
    with tempfile.TemporaryDirectory(prefix="workbench-gloo-") as out_dir:
        mp.spawn(_gloo_main, args=(world_size, free_port(), out_dir, body, exchange), nprocs=world_size,
                 join=True)
        results = []
        for r in range(world_size):
            with open(os.path.join(out_dir, f"{r}.pkl"), "rb") as f:
                results.append(pickle.load(f))
    return results


@contextlib.contextmanager
def local_cluster(num_workers: int = 2) -> Iterator[Any]:
    """A ``distributed.Client`` on an embedded ``LocalCluster`` of ``num_workers`` single-threaded worker
    processes (every port on 127.0.0.1, the dashboard on a free port), as the Dask runner starts one;
    client and cluster are closed on exit. A cluster start costs seconds: share one per test module."""
    from distributed import Client

    from workbench.runtime.dask_pool import close_cluster
    from workbench.runtime.dask_runner import start_local_cluster

    cluster = start_local_cluster(num_workers)
    try:
        client = Client(cluster)
        try:
            yield client
        finally:
            client.close()
    finally:
        close_cluster(cluster)


def run_program(program: Any, world_size: int, *, timeout_s: float = 60.0) -> tuple[dict, list, list]:
    """``prepare`` -> ``run_rank`` on ``world_size`` thread ranks -> ``summarize``.

    Returns ``(summary, results by rank, events)``: what ``launch(..., runner="local")`` computes, without
    a run log or a handle (fast, and the rank results are at hand)."""
    from workbench.events import ListSink
    from workbench.runtime.runners import RunEnv, run_inprocess

    sink = ListSink()
    payloads = program.prepare(world_size, sink.emit)
    env = RunEnv(run_id="t", world_size=world_size, emit=sink.emit, stop_flag=threading.Event(), timeout_s=timeout_s,
                 device="cpu")
    results = [o.result for o in sorted(run_inprocess(program, payloads, env), key=lambda o: o.rank)]
    return program.summarize(results), results, sink.events


def rel_error(a: torch.Tensor, b: torch.Tensor) -> float:
    """``|a - b| / |b|`` (Frobenius), guarded against ``b = 0``.

    Example:
        >>> rel_error(torch.tensor([1.0, 1.0]), torch.tensor([1.0, 0.0]))
        1.0
    """
    a, b = a.detach(), b.detach()
    return float((a - b).norm() / max(float(b.norm()), 1e-12))


def assert_same_training(single: tuple, multi: tuple, tol: float = 1e-5) -> None:
    """Losses and every rank's weights of ``multi`` equal ``single``'s (:func:`run_program` results) to ``tol``.

    Every rank result must hold its ``params`` (name -> tensor)."""
    (s1, r1, _), (sp, rp, _) = single, multi
    for epoch, (a, b) in enumerate(zip(sp["losses"], s1["losses"])):
        assert abs(a - b) <= tol * abs(b), f"loss of epoch {epoch}: {a} against the single-process {b}"
    for name, ref in r1[0]["params"].items():
        for rank, r in enumerate(rp):
            err = rel_error(r["params"][name], ref)
            assert err <= tol, f"{name} on rank {rank}: relative error {err:.3g} > {tol}"
