"""A Dask cluster's workers between runs: claimed for a run, restarted after a failed one, started again when
the cluster closed them.

A run on a cluster it did not start (a scheduler address, a ``Client``) leaves its workers to the next run.
After a failure the run's surviving workers are restarted in the background (:func:`recycle_after`: a rank
blocked in a call to a lost peer would hold its worker's thread) and the next run to that scheduler waits for
the restarts (:func:`wait_for_recycling`) before it claims its workers (:func:`claim_workers`).

A ``LocalCluster`` (any ``SpecCluster``) closes a worker's nanny for good when the worker's process is gone
for longer than ``distributed.deploy.lost-worker-timeout`` (15 s by default): a worker killed on purpose and
restarted by its nanny, on a loaded machine, can take that long to come back, and the cluster then has one
worker fewer until someone scales it. The worker stays in the cluster's plan (its ``worker_spec``), so
:func:`wait_for_workers` asks the cluster for its planned size again while it waits.
"""

from __future__ import annotations

import atexit
import threading
import time
import warnings
from typing import Any

from workbench.runtime.errors import RendezvousTimeout

__all__ = ["claim_workers", "close_cluster", "wait_for_workers", "reopen_closed_workers", "recycle_after",
           "wait_for_recycling", "worker_addresses", "worker_heartbeats"]

_ASK_S = 5.0            # how long one question to the scheduler may take during a run
_POLL_S = 0.2           # while waiting for workers, how often to ask (and look for workers the cluster closed)

# Worker restarts after a failed run on a shared cluster, by scheduler address: the next run there waits for them.
_RECYCLING: dict[str, threading.Thread] = {}


def _scheduler_key(client) -> str:
    """A scheduler's address: of a ``Client``, or the address itself."""
    if isinstance(client, str):
        return client
    return str(getattr(client.scheduler, "address", None) or id(client))


def reopen_closed_workers(client) -> int:
    """Start again the workers that ``client``'s cluster (a ``SpecCluster`` in this process, such as a
    ``LocalCluster``) closed although they are in its plan; the number it was missing (0 for a cluster
    elsewhere, reached by address, which this process cannot start workers for)."""
    cluster = getattr(client, "cluster", None)
    planned, running = getattr(cluster, "worker_spec", None), getattr(cluster, "workers", None)
    if planned is None or running is None or str(getattr(cluster, "status", "")).endswith(("closing", "closed")):
        return 0
    missing = len(planned) - len(running)
    if missing > 0:
        cluster.scale(len(planned))   # opens the planned workers it has no process for
    return max(0, missing)


def close_cluster(cluster) -> None:
    """Close an embedded cluster and its worker processes; Dask's own deadline for a nanny to reap its killed
    worker (5 s in all: 4 s asked to stop, then SIGKILL and 1 s) is a warning, not the run's error: on a loaded
    2-core machine it was missed after the process was killed, and the run's result was lost to a ``TimeoutError``."""
    try:
        cluster.close()
    except TimeoutError as err:
        warnings.warn(f"closing the embedded Dask cluster: {err!r} (its worker processes were killed)",
                      RuntimeWarning, stacklevel=2)


def wait_for_workers(client, num_workers: int, timeout_s: float) -> None:
    """Wait (at most ``timeout_s``) until ``client``'s scheduler has ``num_workers`` running workers, starting
    again any its local cluster closed (:func:`reopen_closed_workers`). Raises ``TimeoutError``.

    It asks the scheduler itself: ``Client.wait_for_workers`` on a local cluster replaces the cluster's own view of
    the workers with a fresh one, and a worker's removal that arrives after it (a restart) then fails the
    cluster's status watch with a ``KeyError``, raised again when the cluster closes (seen when it was called in
    a loop).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        reopen_closed_workers(client)
        try:
            workers = _scheduler_workers(client)
            running = sum(info.get("status") == "running" for info in workers.values())
        except Exception:  # noqa: BLE001 - a scheduler slow to answer: ask again until the deadline
            running = 0
        if running >= num_workers:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"the cluster has {running} running workers, not {num_workers}, after {timeout_s:g} s")
        time.sleep(_POLL_S)


def claim_workers(client, world_size: int, timeout_s: float) -> list[str]:
    """The first ``world_size`` workers in address order (rank 0 first), once the cluster has that many;
    :class:`RendezvousTimeout` after ``timeout_s``."""
    try:
        wait_for_workers(client, world_size, timeout_s)
    except TimeoutError:
        have = len(worker_addresses(client))
        raise RendezvousTimeout(message=f"the cluster has {have} workers but the run needs {world_size} "
                                        f"(one per rank); waited {timeout_s:g} s", timeout_s=timeout_s) from None
    return sorted(worker_addresses(client))[:world_size]


def recycle_after(client, futures, addrs: list[str], num_workers: int, own_client=None, *, name: str) -> None:
    """Restart, in a background thread, the failed run's surviving workers ``addrs`` (:func:`_recycle`); the
    next run to the scheduler waits for it (:func:`wait_for_recycling`), and so does this process's exit."""
    thread = threading.Thread(target=_recycle, args=(client, futures, addrs, num_workers, own_client),
                              daemon=True, name=name)
    _RECYCLING[_scheduler_key(client)] = thread
    thread.start()


def wait_for_recycling(client, timeout_s: float = 150.0) -> None:
    """Wait (bounded) until the worker restarts after a failed run on ``client``'s scheduler (a ``Client`` or the
    scheduler's address) are over."""
    thread = _RECYCLING.pop(_scheduler_key(client), None)
    if thread is not None:
        thread.join(timeout=timeout_s)


@atexit.register
def _finish_recycling(timeout_s: float = 60.0) -> None:
    """A process that exits right after a failed run (``workbench run``) still restarts the run's workers first:
    a survivor blocked in a call to its lost peer would otherwise hold its worker until the run's timeout."""
    deadline = time.monotonic() + timeout_s
    for thread in list(_RECYCLING.values()):
        thread.join(timeout=max(0.0, deadline - time.monotonic()))


def _recycle(client, futures, addrs: list[str], num_workers: int, own_client=None) -> None:
    """After a failed run on a shared cluster, restart the run's workers ``addrs`` that the scheduler still has
    (bounded), then wait (bounded) for ``num_workers`` workers; close ``own_client`` (the run's) at the end.

    A rank whose peer died may still be blocked in a collective, or hold a half-destroyed gloo group
    (``destroy_process_group`` can hang after a peer loss); a fresh process is the only clean state
    for the next run. Workers that died are already being restarted by their nanny.
    """
    try:
        for f in futures:
            f.cancel()
        alive = _scheduler_workers(client)
        survivors = [a for a in addrs if a in alive and alive[a].get("nanny")]   # only a nanny restarts one
        if survivors:   # not waiting there: the scheduler would not notice a worker its cluster closed meanwhile
            client.sync(client.scheduler.restart_workers, workers=survivors, timeout=60, wait_for_workers=False,
                        on_error="return", stimulus_id=f"workbench-recycle-{time.time()}")
        wait_for_workers(client, num_workers, 60)
    except Exception:  # noqa: BLE001 - best effort: the run's own error is what the user needs
        pass
    finally:
        if own_client is not None:
            own_client.close()


def worker_addresses(client) -> set[str]:
    """The scheduler's current workers, asked afresh (at most :data:`_ASK_S` seconds)."""
    return set(worker_heartbeats(client))


def worker_heartbeats(client) -> dict[str, Any]:
    """``{address: last_seen}`` of the scheduler's current workers, asked afresh (at most :data:`_ASK_S` seconds):
    ``last_seen`` is when the worker's last heartbeat reached the scheduler, on the scheduler's clock.

    ``client.scheduler_info()`` returns a cache that the client's own periodic refresh overwrites
    with a worker-less summary; read between the two, it says every worker is gone (seen under load
    as a false ``WorkerLost``).
    """
    return {addr: info.get("last_seen") for addr, info in _scheduler_workers(client).items()}


def _scheduler_workers(client) -> dict[str, dict]:
    """``{address: info}`` of every worker the scheduler has, asked afresh (at most :data:`_ASK_S` seconds)."""
    return client.sync(client.scheduler.identity, n_workers=-1, callback_timeout=_ASK_S)["workers"]
