"""The Dask runner: one rank per Dask worker process, talking over ``torch.distributed``.

How a run goes:

1. the client connects to a cluster: an embedded ``LocalCluster`` (one single-threaded worker
   process per rank; scheduler, nannies, workers and the Dask dashboard all listen on 127.0.0.1 only,
   the dashboard on a free port) unless a scheduler address, a scheduler file or a ``Client`` is given; it waits
   (bounded) for enough workers and takes the first ``world_size`` in address order, rank 0 first;
2. an idempotent :class:`TorchWorkerPlugin` sets a seed, ``GLOO_SOCKET_IFNAME`` and ``NCCL_SOCKET_IFNAME``
   to the interface holding the worker's address (``lo`` for loopback workers; a variable the user set
   is kept) and the CUDA device where there is one; each rank's
   worker gets ``cores // ranks on its host`` torch intra-op threads
   (:func:`~workbench.runtime.runners.threads_per_rank`; the nanny's ``OMP_NUM_THREADS=1`` would leave
   one core per host busy), or ``num_threads`` when given;
3. rank 0's worker is asked for a free port; every rank joins the rendezvous store at
   ``tcp://<rank-0 host>:<port>`` with an explicit rank, world size and timeout (NCCL on ``cuda:0``
   when every rank has its own GPU, otherwise gloo on CPU; ``device="cuda"`` is then refused with ``ParamError``
   before any rank is submitted, on the embedded cluster before it starts), rank 0 serving it on a socket bound to its
   worker's address only (torch's own ``tcp://`` rendezvous listens on every interface); the program
   and each payload are scattered to their workers;
4. ranks send events with ``Worker.log_event(topic, event.to_dict())``; the client subscribes to the
   topic and hands each event to the run log and the listeners as it arrives;
5. the client polls the futures and the scheduler's view of the workers: a rank that raised gives
   :class:`RankFailed`, a worker that left gives :class:`WorkerLost`, and so does a worker whose heartbeats
   stopped reaching the scheduler for the run's ``liveness_s`` (its link or host down: the scheduler itself
   would keep it for its ``worker-ttl``, 5 minutes by default, while the surviving ranks wait in a call for up
   to the run's timeout); a rendezvous that expired gives :class:`RendezvousTimeout`, a scheduler silent for
   ``liveness_s`` (at least 10 s, at most 30 s or the run's timeout; its host cut off) gives
   :class:`SchedulerLost` (its ranks stop at their next epoch after the same silence, or once their task was
   cancelled: a client that gave the run up leaves no rank training). A rank that is only slow (a long
   step) keeps its worker heartbeating: its worker's event loop answers while the rank's thread works. The
   surviving ranks fail fast (gloo reports the closed connection), stragglers are cancelled, and the process
   group is destroyed in ``finally`` on every rank; on a cluster the run did not start, the run's surviving
   workers are then restarted in the background (a rank blocked in a call to a lost peer would hold its
   worker's thread) and the next run to that scheduler waits for them.

A stop (``RunHandle.stop``) asked while the cluster starts ends the run before any rank starts; once
they run, the ranks agree on it at their next epoch. :func:`abort_runs` (a server shutting down) ends
the runs at once: their ranks are cancelled and reported as stopped, an embedded cluster is closed
with its worker processes.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from typing import Any, Optional, Sequence
from urllib.parse import urlparse

from workbench._format import describe
from workbench._validation import ParamError, param_error
from workbench.events import event_from_dict
from workbench.runtime.dask_worker import (_IgnoreInterrupt, TorchWorkerPlugin, _free_port, _rank_task,  # noqa: F401
                                           _set_threads, _silent_limit, _worker_info, interface_of,
                                           join_process_group)
from workbench.runtime.dask_pool import (_ASK_S, claim_workers, close_cluster, recycle_after, wait_for_recycling,
                                         worker_heartbeats)
from workbench.runtime.errors import RendezvousTimeout, RunError, SchedulerLost, WorkerLost
from workbench.runtime.program import Program
from workbench.runtime.runners import RankOutcome, RunEnv, pick_backend, rank_failed, root_cause, threads_per_rank

__all__ = ["run_dask", "TorchWorkerPlugin", "start_local_cluster", "abort_runs", "interface_of",
           "scheduler_file_address"]

_POLL_S = 0.2
_GRACE_S = 3.0          # after a failure, how long the other ranks get to report theirs
_EVENT_FLUSH_S = 10.0   # after the ranks returned, how long to wait for their last events
_CONNECT_S = 10.0       # how long to try a scheduler given by address (at most the run's timeout)


def start_local_cluster(num_workers: int, *, daemon: bool = True):
    """An embedded ``LocalCluster``: ``num_workers`` single-threaded processes, every port on 127.0.0.1.

    ``host`` puts the scheduler, the nannies and the workers (and the workers' HTTP endpoints, which
    follow their address) on loopback; the scheduler's dashboard needs its own host: Dask binds
    ``":0"`` to every interface. The workers ignore SIGINT (:class:`_IgnoreInterrupt`). ``daemon=False``
    starts them as non-daemonic processes (``distributed.worker.daemon``), which may start processes of their
    own (ByteGNN's sampling workers: :attr:`Program.rank_processes <workbench.runtime.program.Program>`); the
    cluster is the run's and closes with it either way.

    No memory limit per worker (``memory_limit=0``): Dask's default (the machine's memory over the workers) has
    the nanny terminate a worker whose resident set passes 95 % of it, and a rank's resident set counts the pages
    of its part's memory-mapped files, which the kernel takes back under pressure: a papers100M-sized part read
    on four workers of a 23 GB machine would be killed for pages the kernel could reclaim. A rank holds no Dask
    results, so the limit's spilling and pausing have nothing to act on either.
    """
    import dask
    from distributed import LocalCluster

    with dask.config.set({"distributed.worker.daemon": bool(daemon)}):
        return LocalCluster(n_workers=num_workers, threads_per_worker=1, processes=True,
                            dashboard_address="127.0.0.1:0", worker_dashboard_address=None, host="127.0.0.1",
                            silence_logs=logging.CRITICAL, plugins={_IgnoreInterrupt()}, memory_limit=0)


# ---------------------------------------------------------------------------------------------------------
# Client side
# ---------------------------------------------------------------------------------------------------------


def scheduler_file_address(path: Any, name: str = "scheduler_file", owner: str = "launch") -> str:
    """The scheduler address a Dask scheduler file holds (``dask scheduler --scheduler-file FILE`` writes it, and
    so do ``dask-mpi``, ``dask_jobqueue.SLURMRunner`` and ``Client.write_scheduler_file``).

    Checked before anything starts: Dask's ``Client(scheduler_file=...)`` waits forever for a file that does not
    exist, and reads an unparsable one as no address at all.

    Raises:
        ParamError: naming ``name`` of ``owner`` and the value, when the file is missing, not a file, unreadable,
            or not a JSON object with a string ``address``.

    Example:
        >>> scheduler_file_address("/nonexistent/scheduler.json")
        Traceback (most recent call last):
        ...
        workbench._validation.ParamError: The 'scheduler_file' parameter of launch must be a Dask scheduler file \
(JSON with the scheduler's 'address', written by dask scheduler --scheduler-file) that exists. \
Got '/nonexistent/scheduler.json' instead.
    """
    import json
    import os

    what = "a Dask scheduler file (JSON with the scheduler's 'address', written by dask scheduler --scheduler-file)"

    def refuse(why: str) -> ParamError:
        return ParamError([param_error(name, owner, f"{what} {why}", str(path))])

    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise ParamError([param_error(name, owner, f"the path of {what}", path)])
    if not os.path.exists(path):
        raise refuse("that exists")
    if not os.path.isfile(path):
        raise refuse("that is a file (this path is not)")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise refuse(f"that this process can read ({type(exc).__name__}: {exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise refuse(f"that parses as JSON ({type(exc).__name__}: {exc})") from None
    address = data.get("address") if isinstance(data, dict) else None
    if not isinstance(address, str) or not address:
        raise refuse("whose JSON object holds a string 'address' (this one has none)")
    return address


def _connect(scheduler, world_size: int, connect_s: float = _CONNECT_S, scheduler_file: Any = None,
             daemon: bool = True):
    """``(client, cluster_to_close, client_to_close)`` for an embedded cluster, an address, a scheduler file
    or a Client.

    Raises:
        ParamError: ``scheduler`` is an address that is malformed or does not answer within
            ``connect_s`` seconds (Dask's own default would retry for 30 s, then raise a bare ``OSError``);
            ``scheduler_file`` is not a readable scheduler file, or its scheduler does not answer.
    """
    from distributed import Client

    if scheduler_file is not None:
        address = scheduler_file_address(scheduler_file)
        try:
            client = Client(scheduler_file=str(scheduler_file), timeout=connect_s)
        except (OSError, ValueError, TypeError) as exc:
            raise ParamError([param_error(
                "scheduler_file", "launch", f"the file of a running Dask scheduler; the one it names, {address}, "
                f"did not answer within {connect_s:g} s ({type(exc).__name__}: {exc})", str(scheduler_file))]) from None
        return client, None, client
    if scheduler is None:
        cluster = start_local_cluster(world_size, daemon=daemon)
        client = Client(cluster)
        return client, cluster, client
    if isinstance(scheduler, Client):
        return scheduler, None, None
    try:
        client = Client(scheduler, timeout=connect_s)
    except (OSError, ValueError, TypeError) as exc:  # unreachable (OSError, TimeoutError), malformed, wrong type
        raise ParamError([param_error(
            "scheduler", "launch", f"a distributed.Client or the address of a running Dask scheduler, "
            f"like 'tcp://HOST:8786', that answers within {connect_s:g} s ({type(exc).__name__}: {exc})",
            scheduler)]) from None
    return client, None, client


class _Inbox:
    """Receives the ranks' events from the Dask topic and counts them per rank."""

    def __init__(self, env: RunEnv):
        self.env = env
        self.counts: collections.Counter = collections.Counter()
        self.last_epoch: dict[int, int] = {}
        self.started: set[int] = set()
        self.lock = threading.Lock()

    def __call__(self, item) -> None:
        _ts, msg = item
        msg = dict(msg)
        rank = msg.pop("_rank", None)
        msg.pop("worker", None)
        if msg.get("_control") == "started":
            with self.lock:
                self.started.add(rank)
            return
        event = event_from_dict(msg)
        self.env.emit(event)   # logged first: a failure's step is never past what the run log holds
        with self.lock:
            self.counts[rank] += 1
            if event.type == "epoch":
                self.last_epoch[rank] = max(self.last_epoch.get(rank, -1), getattr(event, "epoch", -1))

    def next_step(self) -> Optional[int]:
        """One past the furthest epoch any rank reported (``None`` before the first): where a run stopped."""
        with self.lock:
            return max(self.last_epoch.values()) + 1 if self.last_epoch else None

    def wait_for(self, expected: dict[int, int], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if all(self.counts[r] >= n for r, n in expected.items()):
                    return
            time.sleep(0.05)

    def settle(self, quiet_s: float = 0.5, timeout_s: float = 3.0) -> None:
        """Wait until no event arrived for ``quiet_s`` (after a failure the counts are unknown)."""
        deadline = time.monotonic() + timeout_s
        last = -1
        while time.monotonic() < deadline:
            with self.lock:
                total = sum(self.counts.values())
            if total == last:
                return
            last = total
            time.sleep(quiet_s)


# The abort switch of every Dask run going in this process, by run id (see :func:`abort_runs`).
_ABORTS: dict[str, threading.Event] = {}
_ABORTS_LOCK = threading.Lock()


def abort_runs() -> list[str]:
    """End every Dask run of this process now, without waiting for its ranks; returns their run ids.

    For a process that shuts down (``workbench serve`` on SIGTERM, after its runs were asked to stop):
    each run's watcher cancels its ranks and reports them as stopped (the run ends ``stopped``), and an
    embedded cluster is closed with its worker processes. On a shared cluster the ranks were sent the
    stop and end at their next epoch. A run still starting its cluster ends as soon as the cluster is up.
    """
    with _ABORTS_LOCK:
        for flag in _ABORTS.values():
            flag.set()
        return list(_ABORTS)


def _stopped(env: RunEnv, abort: threading.Event, addrs: Sequence[str] = ()) -> Optional[list[RankOutcome]]:
    """Every rank as stopped when a stop or an abort came before the ranks were submitted, else ``None``."""
    if not (env.stop_flag.is_set() or abort.is_set()):
        return None
    return [RankOutcome(r, "stopped", None, addrs[r] if r < len(addrs) else None) for r in range(env.world_size)]


def run_dask(program: Program, payloads: Sequence[Any], env: RunEnv, *, scheduler=None,
             num_threads: Optional[int] = None, scheduler_file: Any = None) -> list[RankOutcome]:
    """Run the ranks on Dask workers (see the module docstring). Raises a typed :class:`RunError`, or
    ``ParamError`` when ``scheduler`` (an address) or ``scheduler_file`` does not answer (see :func:`_connect`)."""
    abort = threading.Event()
    with _ABORTS_LOCK:
        _ABORTS[env.run_id] = abort
    try:
        return _run_dask(program, payloads, env, abort, scheduler, num_threads, scheduler_file)
    finally:
        with _ABORTS_LOCK:
            _ABORTS.pop(env.run_id, None)


def _run_dask(program: Program, payloads: Sequence[Any], env: RunEnv, abort: threading.Event, scheduler,
              num_threads: Optional[int], scheduler_file: Any = None) -> list[RankOutcome]:
    world_size = env.world_size
    client, own_cluster, own_client = _connect(scheduler, world_size, min(_CONNECT_S, env.timeout_s), scheduler_file,
                                               daemon=not getattr(program, "rank_processes", False))
    topic = f"workbench-{env.run_id}"
    stop_name = f"workbench-stop-{env.run_id}"
    inbox = _Inbox(env)
    futures: list = []
    try:
        env.set_info("dashboard_link", client.dashboard_link)
        if (stopped := _stopped(env, abort)) is not None:   # stopped while the cluster started
            return stopped
        wait_for_recycling(client)
        addrs = claim_workers(client, world_size, env.timeout_s)
        client.register_plugin(TorchWorkerPlugin(num_threads=num_threads))
        infos = client.run(_worker_info, workers=addrs)
        if num_threads is None:   # each rank gets cores / ranks on its host (not the nanny's OMP=1)
            on_host = collections.Counter(infos[a]["host"] for a in addrs)
            for addr in addrs:
                n = threads_per_rank(on_host[infos[addr]["host"]], infos[addr].get("cores"))
                client.run(_set_threads, n, workers=[addr])
        if (stopped := _stopped(env, abort, addrs)) is not None:
            return stopped
        backend, device = pick_backend([infos[a] for a in addrs], env.device)
        env.set_info("process_group", f"{backend} on {device}")
        port = client.run(_free_port, workers=[addrs[0]])[addrs[0]]
        init_method = f"tcp://{urlparse(addrs[0]).hostname}:{port}"
        client.subscribe_topic(topic, inbox)
        program_f = client.scatter(program, workers=addrs, broadcast=True, hash=False)
        for r, addr in enumerate(addrs):
            payload_f = client.scatter(payloads[r], workers=[addr], hash=False)
            futures.append(client.submit(
                _rank_task, program_f, payload_f, r, world_size, init_method, backend, device, env.run_id, topic,
                env.timeout_s, stop_name, env.liveness_s, workers=[addr], allow_other_workers=False, pure=False,
                key=f"{env.run_id}-rank{r}"))
        try:
            outcomes = _watch(client, futures, addrs, env, inbox, stop_name, abort,
                              hosts={a: infos[a].get("host") for a in addrs})
        except RunError as err:
            # restart the workers after the error is reported, not before (not through a lost scheduler, and not
            # a worker that went silent: the scheduler cannot reach it either)
            if own_cluster is None and not isinstance(err, SchedulerLost):
                for f in futures:
                    f.cancel()
                restart = [a for a in addrs if not (isinstance(err, WorkerLost) and a == err.worker)]
                recycle_after(client, futures, restart, len(addrs), own_client, name=f"workbench-recycle-{env.run_id}")
                own_client = None   # the recycling closes it when done
            raise
        inbox.wait_for({o.rank: o.num_events for o in outcomes}, _EVENT_FLUSH_S)
        return outcomes
    finally:
        for f in futures:
            if not f.done():
                f.cancel()
        try:
            client.unsubscribe_topic(topic)
        except Exception:  # noqa: BLE001
            pass
        if own_client is not None:
            own_client.close()
        if own_cluster is not None:
            close_cluster(own_cluster)


class _Heartbeats:
    """How long each worker has been silent: no heartbeat of it has reached the scheduler (a Dask worker sends
    one every 0.5 s up to 10 workers, from its event loop, whatever its task thread is doing).

    A worker's ``last_seen`` (the scheduler's clock) is only compared with itself: a worker is silent since the
    moment, on this process's clock, that its ``last_seen`` last changed, so the two hosts' clocks never meet.
    Time in which the scheduler did not answer (busy or cut off, the heartbeats queued behind) is not counted:
    after a gap of more than :data:`_ASK_S` between two answers, every worker's silence starts again.
    """

    def __init__(self, liveness_s: float):
        self.liveness_s = float(liveness_s)
        self._changed: dict[str, tuple[Any, float]] = {}   # address -> (last_seen, when it last changed here)
        self._answered: Optional[float] = None

    def limit_s(self, num_workers: int) -> float:
        """The run's liveness, but never less than three heartbeat intervals of a cluster of ``num_workers``."""
        from distributed.scheduler import heartbeat_interval

        return max(self.liveness_s, 3.0 * heartbeat_interval(max(1, num_workers)))

    def silent_s(self, workers: dict[str, Any]) -> dict[str, float]:
        """Seconds each worker has been silent, given the ``{address: last_seen}`` the scheduler just gave."""
        now = time.monotonic()
        if self._answered is not None and now - self._answered > _ASK_S:
            self._changed.clear()
        self._answered = now
        for addr, last_seen in workers.items():
            if addr not in self._changed or self._changed[addr][0] != last_seen:
                self._changed[addr] = (last_seen, now)
        return {addr: now - self._changed[addr][1] for addr in workers}

    def lost(self, workers: dict[str, Any], addrs: Sequence[str]) -> dict[str, str]:
        """What was seen of each of ``addrs`` that is gone, given the scheduler's ``{address: last_seen}``: the
        scheduler dropped it (its process died, or its connection closed), or it stayed silent past the limit."""
        silent, limit = self.silent_s(workers), self.limit_s(len(workers))
        seen = {}
        for addr in addrs:
            if addr not in workers:
                seen[addr] = "the worker process died or left the cluster (the scheduler dropped it)"
            elif silent[addr] >= limit:
                seen[addr] = f"no heartbeat from the worker for {silent[addr]:.0f} s (its link or host is down)"
        return seen


class _SchedulerWatch:
    """How long the scheduler has not answered: a run whose scheduler stays silent for ``limit_s`` seconds
    (a network partition, a dead scheduler) fails with :class:`SchedulerLost` instead of hanging. The silence
    starts when the first question that got no answer was asked (not when it gave up, :data:`_ASK_S` later)."""

    def __init__(self, address: str, limit_s: float):
        self.address, self.limit_s = address, limit_s
        self.silent_since: Optional[float] = None

    def ask(self, client, inbox) -> Optional[dict[str, Any]]:
        """The current workers' ``{address: last_seen}``, or None while the scheduler does not answer (raises once
        it stayed silent)."""
        asked = time.monotonic()
        try:
            alive = worker_heartbeats(client)
        except (OSError, TimeoutError, asyncio.TimeoutError) as exc:   # CommClosedError is an OSError
            now = time.monotonic()
            self.silent_since = self.silent_since or asked
            if now - self.silent_since >= self.limit_s:
                raise SchedulerLost(scheduler=self.address, step=inbox.next_step(),
                                    message=f"the scheduler {self.address} did not answer for "
                                            f"{now - self.silent_since:.0f} s ({describe(exc)})") from None
            return None
        self.silent_since = None
        return alive


def _watch(client, futures, addrs: list[str], env: RunEnv, inbox: _Inbox, stop_name: str,
           abort: Optional[threading.Event] = None, hosts: Optional[dict[str, Any]] = None) -> list[RankOutcome]:
    """Poll futures and workers until every rank finished, or a failure is known (then raise it).

    ``abort`` set: the ranks are told to stop, cancelled and reported as stopped at once. ``hosts``: each
    worker's host name, for the errors."""
    stop_sent = False
    hosts = hosts or {}
    watch = _SchedulerWatch(getattr(client.scheduler, "address", "?"), _silent_limit(env.timeout_s, env.liveness_s))
    beats = _Heartbeats(env.liveness_s)
    errors: list[RunError] = []
    first_error_at: Optional[float] = None
    submitted = time.monotonic()
    while True:
        aborted = abort is not None and abort.is_set()
        if (env.stop_flag.is_set() or aborted) and not stop_sent:
            from distributed import Event

            Event(stop_name, client=client).set()
            stop_sent = True
        if aborted:
            for f in futures:
                f.cancel()
            return [RankOutcome(r, "stopped", None, addrs[r]) for r in range(len(futures))]
        if first_error_at is None and time.monotonic() - submitted > env.timeout_s:
            with inbox.lock:
                waiting = [r for r in range(len(futures)) if r not in inbox.started and not futures[r].done()]
            for r in waiting:  # a worker still busy with something else: the gang cannot form
                errors.append(RendezvousTimeout(
                    rank=r, worker=addrs[r], timeout_s=env.timeout_s,
                    message=f"the task of rank {r} did not start within {env.timeout_s:g} s (is the worker busy?)"))
        for r, f in enumerate(futures):
            if f.status == "error" and not any(e.rank == r for e in errors):
                errors.append(_as_run_error(f.exception(), r, addrs[r]))
        alive = watch.ask(client, inbox)
        if alive is not None:   # else the scheduler did not answer this time: nothing is known of the workers
            lost = beats.lost(alive, addrs)
            for r, addr in enumerate(addrs):
                # a task the scheduler cancelled lost its input (the rank's payload) with its worker
                ended = futures[r].done() and futures[r].status != "cancelled"
                if addr in lost and not ended and not any(e.rank == r for e in errors):
                    last = inbox.last_epoch.get(r)
                    errors.append(WorkerLost(rank=r, worker=addr, host=hosts.get(addr), message=lost[addr],
                                             step=None if last is None else last + 1))
        if errors:
            first_error_at = first_error_at or time.monotonic()
            settled = all(f.done() or any(e.rank == r for e in errors) for r, f in enumerate(futures))
            if settled or time.monotonic() - first_error_at > _GRACE_S:
                inbox.settle()
                raise _with_run_step(root_cause(errors), errors)
        elif all(f.status == "finished" for f in futures):
            outcomes = [f.result() for f in futures]
            if not stop_sent and any(o.status == "stopped" for o in outcomes):
                # nobody asked: the ranks stopped on their own when the scheduler did not answer them
                raise SchedulerLost(scheduler=watch.address, step=inbox.next_step(),
                                    message=f"the ranks stopped: the scheduler {watch.address} did not answer them "
                                            f"for {watch.limit_s:g} s")
            return outcomes
        time.sleep(_POLL_S)


def _with_run_step(err: RunError, errors: list[RunError]) -> RunError:
    """A lost worker's last events may die with it: take the step from its peers when they got further."""
    if isinstance(err, WorkerLost):
        steps = [e.step for e in errors if e.step is not None]
        if steps:
            err.step = max(steps)
            err.args = (err._text(),)
    return err


def _as_run_error(exc: BaseException, rank: int, addr: str) -> RunError:
    if isinstance(exc, RunError):
        return exc
    return rank_failed(rank, addr, None, exc)
