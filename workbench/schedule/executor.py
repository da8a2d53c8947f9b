"""The S-Worker: sampling DAGs executed by worker processes under a coarse and a fine scheduler.

:class:`Pipeline` forks ``workers`` sampling processes (each holds the Graph Store: CSR rows and feature
rows, inherited at fork; the whole graph, or its rank's part with the rest read from the owners'
:mod:`~workbench.schedule.graphstore` servers, the bytes counted and handed back with each task) and runs a
scheduler thread in the trainer's process (it mostly waits on the workers' pipes, so the trainer keeps the
GIL):

* **coarse** (when to launch another DAG): a :class:`CoarsePolicy` looks at Algorithm 1's signals (C_util,
  Q_size, T_gap, the EMA of a DAG's latency and of a training step, DAGs in flight) every ``poll_ms``;
* **fine** (which ready task runs next): a heap keyed ``(dag_id, cost, seq)`` (the paper's order: earlier DAGs first,
  cheap tasks first) or a FIFO; an idle worker gets the head of the queue;
* the trainer (T-Worker, the caller's thread) takes the batches **in step order** with :meth:`Pipeline.get`
  (its wait is the trainer's idle time); a finished batch waits in the output queue (Q_size) until then.

Scheduling only changes when things run: every batch is the sample stage's keyed batch of its step.

Example:
    >>> import torch
    >>> from workbench.data import load_graph
    >>> from workbench.sample import LocalSource, NeighborSampler
    >>> g = load_graph("karate")
    >>> sampler = NeighborSampler(fanouts=(3, 2), seed=0)
    >>> with Pipeline(LogicalDAG(sampler, chunk_size=8), g, AsapPolicy(), workers=1) as pipe:
    ...     pipe.start_epoch(0, [(0, torch.tensor([0, 1, 2])), (1, torch.tensor([33, 32]))])
    ...     got = [pipe.get(s) for s in (0, 1)]
    ...     stats = pipe.end_epoch()
    >>> ref = sampler.sample(torch.tensor([33, 32]), LocalSource(g), epoch=0, step=1)
    >>> bool(torch.equal(got[1].minibatch.input_gid, ref.input_gid)), stats.num_dags
    (True, 2)
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
import multiprocessing
import threading
import time
import traceback
from collections import deque
from multiprocessing.connection import wait as wait_connections
from typing import Any, Optional

import numpy as np

from workbench.schedule.dag import LogicalDAG, PhysicalDAG, SampledBatch, Task, WorkerState

__all__ = ["Pipeline", "Signals", "CoarsePolicy", "AsapPolicy", "FixedDepthPolicy", "LaunchScorePolicy",
           "EpochSchedule", "cpu_pressure", "READY_QUEUES", "CPU_SCOPES", "CpuMeter", "SAMPLE_TIMES"]

READY_QUEUES = ("priority", "fifo")
SAMPLE_TIMES = ("latency", "effective")
CPU_SCOPES = ("run", "machine")


class CpuMeter:
    """C_util in % over the time since the last reading: of this run's processes (``run``: the trainer and
    its sampling workers, as a share of all cores) or of the whole machine (``machine``; on a shared machine
    other users' load then holds every launch back)."""

    def __init__(self, scope: str, pids: list[int]):
        import psutil

        self.scope = scope
        self.cores = psutil.cpu_count() or 1
        self.procs = [psutil.Process(p) for p in pids] if scope == "run" else []
        self.read()

    def read(self) -> float:
        import psutil

        if self.scope == "machine":
            return float(psutil.cpu_percent(None))
        total = 0.0
        for p in self.procs:
            try:
                total += p.cpu_percent(None)
            except psutil.Error:
                pass
        return min(100.0, total / self.cores)


# --------------------------------------------------------------------------------------------------------
# Coarse policies
# --------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Signals:
    """What the coarse scheduler sees at one poll (times in seconds unless named ``_ms``)."""

    now: float
    t_gap_ms: float
    """Milliseconds since the last launch (T_gap)."""
    c_util: float
    """CPU utilisation in % over the last trace window (:class:`CpuMeter`)."""
    q_size: int
    """Finished batches waiting for the trainer."""
    in_flight: int
    """Launched DAGs not finished yet."""
    t_avg_sample: Optional[float]
    """EMA of the time to sample one batch (see ``sample_time`` of :class:`Pipeline`); None before the first
    DAG finished."""
    t_avg_train: Optional[float]
    """EMA of one training step; None before the trainer finished one."""
    workers: int


class CoarsePolicy:
    """When to launch the next DAG: :meth:`should_launch` is asked every poll while DAGs remain."""

    name = "policy"

    def should_launch(self, s: Signals) -> bool:
        raise NotImplementedError


class AsapPolicy(CoarsePolicy):
    """Launch as fast as possible (up to ``max_in_flight`` DAGs at once)."""

    name = "asap"

    def __init__(self, max_in_flight: int = 64):
        self.max_in_flight = max_in_flight

    def should_launch(self, s: Signals) -> bool:
        return s.in_flight < self.max_in_flight


class FixedDepthPolicy(CoarsePolicy):
    """DistDGL-style fixed-depth prefetch: keep ``depth`` batches launched or waiting (in flight + Q_size)."""

    name = "fixed-depth"

    def __init__(self, depth: int = 2):
        self.depth = depth

    def should_launch(self, s: Signals) -> bool:
        return s.in_flight + s.q_size < self.depth


def cpu_pressure(c_util: float) -> float:
    """Algorithm 1's ``f(C) = 101 - e^(C / c)`` with ``c = 100 / ln 101``: 100 at an idle CPU, 0 at 100 %.

    Example:
        >>> round(cpu_pressure(0), 2), round(cpu_pressure(80), 2), round(cpu_pressure(100), 2)
        (100.0, 60.87, 0.0)
    """
    return max(0.0, 101.0 - math.exp(min(max(c_util, 0.0), 100.0) / (100.0 / math.log(101.0))))


class LaunchScorePolicy(CoarsePolicy):
    """ByteGNN's launch score (Algorithm 1): launch when ``T_gap * f(C_util) * balance >= sigma``.

    ``balance = T_avg_sample / (T_avg_train * (Q_size + 1))`` (Q_size + 1: no infinity on an empty queue),
    ``T_gap`` in milliseconds, EMAs of the DAG latency and the training step; bootstrap: while either
    average is unknown, one DAG at a time. ``max_in_flight`` caps the DAGs in flight (the paper has none;
    it bounds memory).

    Example:
        >>> p = LaunchScorePolicy(sigma=1000.0)
        >>> base = dict(now=0.0, c_util=10.0, q_size=0, in_flight=1, workers=2)
        >>> p.should_launch(Signals(t_gap_ms=1.0, t_avg_sample=None, t_avg_train=None, **base))   # bootstrap
        False
        >>> p.should_launch(Signals(t_gap_ms=20.0, t_avg_sample=0.2, t_avg_train=0.05, **base))  # 20*99*4
        True
    """

    name = "launch-score"

    def __init__(self, sigma: float = 1000.0, max_in_flight: int = 16):
        self.sigma, self.max_in_flight = sigma, max_in_flight
        self.last_score = 0.0

    def score(self, s: Signals) -> float:
        balance = s.t_avg_sample / (max(s.t_avg_train, 1e-6) * (s.q_size + 1))
        return s.t_gap_ms * cpu_pressure(s.c_util) * balance

    def should_launch(self, s: Signals) -> bool:
        if s.in_flight >= self.max_in_flight:
            return False
        if s.t_avg_sample is None or s.t_avg_train is None or (s.in_flight == 0 and s.q_size == 0):
            return s.in_flight == 0     # bootstrap, and liveness: never leave the trainer with nothing coming
        self.last_score = self.score(s)
        return self.last_score >= self.sigma


# --------------------------------------------------------------------------------------------------------
# Worker processes
# --------------------------------------------------------------------------------------------------------


def _worker_main(conn, state: WorkerState, operators: dict) -> None:
    """A sampling worker: run the operator of each task it is sent, reply with the result and the graph-store
    traffic it counted (:mod:`~workbench.schedule.graphstore`)."""
    from workbench.sample.keyed import serial_kernel

    serial_kernel()   # forked from a trainer whose OpenMP pool may run: one core each, the serial kernel
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        key, op, payload = msg
        start = time.perf_counter()
        try:
            result = operators[op](state, payload)
            conn.send((key, True, result, time.perf_counter() - start, state.store.drain()))
        except BaseException:  # noqa: BLE001 - reported to the trainer, which raises it
            conn.send((key, False, traceback.format_exc(), 0.0, state.store.drain()))


#: a logged schedule trace keeps up to this many samples of every state change in the first
#: :data:`TRACE_DETAIL_EPOCHS` epochs and the last one (a short epoch draws a timeline, not one point) ...
TRACE_DETAIL_SAMPLES = 128
TRACE_DETAIL_EPOCHS = 100
#: ... and later epochs one sample per ``trace_ms`` (a long run's log does not grow with its event count)


def trace_samples(epoch: int, epochs: int, seconds: float, trace_ms: float) -> int:
    """How many trace samples the run log keeps of ``epoch`` (see :data:`TRACE_DETAIL_SAMPLES`): one per
    ``trace_ms`` of the epoch, at least :data:`TRACE_DETAIL_SAMPLES` in detailed epochs.

    Example:
        >>> trace_samples(0, 1000, 0.03, 50.0), trace_samples(500, 1000, 0.03, 50.0), trace_samples(500, 1000, 10, 50)
        (128, 2, 201)
    """
    grid = int(math.ceil(1000.0 * seconds / trace_ms)) + 1
    detailed = epoch < TRACE_DETAIL_EPOCHS or epoch == epochs - 1
    return max(grid, TRACE_DETAIL_SAMPLES) if detailed else grid


@dataclasses.dataclass
class EpochSchedule:
    """One epoch of the pipeline: figures and traces (what :class:`~workbench.events.ScheduleStats` and
    :class:`~workbench.events.ScheduleTrace` carry)."""

    num_dags: int = 0
    num_tasks: int = 0
    seeds: int = 0
    seconds: float = 0.0
    trainer_idle_s: float = 0.0
    trainer_train_s: float = 0.0
    task_s: float = 0.0
    """Seconds the workers spent inside operators."""
    dag_latency_s: list = dataclasses.field(default_factory=list)
    """Per DAG (in launch order): launch to End."""
    launch_t: list = dataclasses.field(default_factory=list)
    """Per DAG: launch time, seconds since the epoch started."""
    trace_t: list = dataclasses.field(default_factory=list)
    trace_cpu: list = dataclasses.field(default_factory=list)
    trace_q: list = dataclasses.field(default_factory=list)
    trace_in_flight: list = dataclasses.field(default_factory=list)
    trace_busy: list = dataclasses.field(default_factory=list)
    cpu_readings: list = dataclasses.field(default_factory=list)
    """``(t, C_util)`` of every reading of the meter (each covers the time since the one before)."""

    @property
    def seeds_per_s(self) -> float:
        return self.seeds / self.seconds if self.seconds > 0 else 0.0

    @property
    def trainer_idle_fraction(self) -> float:
        return self.trainer_idle_s / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_util_mean(self) -> float:
        """C_util over the epoch: the meter's readings weighted by the time each covers (the trace repeats a
        reading at every event sample, so its plain mean would weight busy stretches more).

        Example:
            >>> EpochSchedule(cpu_readings=[(0.1, 100.0), (0.4, 20.0)]).cpu_util_mean   # 0.1 s at 100 %, 0.3 s at 20 %
            40.0
        """
        if not self.cpu_readings:
            return 0.0
        t, c = np.asarray(self.cpu_readings, float).T
        span = np.diff(t, prepend=0.0)    # a reading covers the time since the previous one (the first: since 0)
        return float(np.sum(c * span) / t[-1]) if t[-1] > 0 else float(c.mean())

    @property
    def dag_latency_ms_mean(self) -> float:
        return 1000.0 * float(np.mean(self.dag_latency_s)) if self.dag_latency_s else 0.0

    def trace(self, max_samples: int) -> dict[str, list]:
        """The trace (``t``, ``cpu_util``, ``q_size``, ``in_flight``, ``busy_workers``) thinned to at most
        ``max_samples`` samples: the epoch cut into ``max_samples - 1`` equal windows, the last sample of each
        (the state at the window's end, what a sampler at that interval would see) plus the first sample.

        Example:
            >>> st = EpochSchedule(trace_t=[0.0, 0.1, 0.2, 0.3, 0.4], trace_cpu=[0, 1, 2, 3, 4], trace_q=[0] * 5,
            ...                    trace_in_flight=[0, 1, 2, 1, 0], trace_busy=[0] * 5)
            >>> st.trace(3)["t"], st.trace(3)["in_flight"], len(st.trace(10)["t"])
            ([0.0, 0.1, 0.4], [0, 1, 0], 5)
        """
        cols = {"t": self.trace_t, "cpu_util": self.trace_cpu, "q_size": self.trace_q,
                "in_flight": self.trace_in_flight, "busy_workers": self.trace_busy}
        n = len(self.trace_t)
        if n <= max(int(max_samples), 2):
            return {k: list(v) for k, v in cols.items()}
        t = np.asarray(self.trace_t, float)
        span = (t[-1] - t[0]) or 1.0
        window = np.minimum(((t - t[0]) / span * (max_samples - 1)).astype(np.int64), max_samples - 2)
        last = np.flatnonzero(np.r_[window[1:] != window[:-1], True])   # the last sample of every window
        keep = np.unique(np.r_[0, last])
        return {k: [v[i] for i in keep] for k, v in cols.items()}


class Pipeline:
    """Sampling worker processes, the coarse and fine schedulers, and the trainer's hand-off (module docstring).

    Args:
        logical: the sampling DAG.
        graph: the workers' Graph Store: a :class:`~workbench.graph.Graph` (its CSR rows and features, inherited
            whole at fork) or a :class:`~workbench.schedule.graphstore.PartStore` (the rank's part; the rest is
            read from the owners' servers and counted).
        policy: the coarse policy.
        workers: sampling processes.
        ready_queue: ``priority`` (heap keyed (dag id, cost, seq)) or ``fifo``.
        poll_ms: the coarse scheduler's poll interval (Algorithm 1: 5 ms).
        trace_ms: how often C_util is read and a trace sample is taken; a sample is also taken whenever Q_size,
            the DAGs in flight or the busy workers change (a short epoch then still draws a timeline; the
            schedule program thins the trace before logging it, :meth:`EpochSchedule.trace`).
        ema: weight of the newest measurement in the T_avg estimates.
        cpu_scope: ``run`` or ``machine`` (:class:`CpuMeter`).
        sample_time: what T_avg_sample measures (the paper does not say): ``latency``, a DAG's launch-to-End time,
            or ``effective``, that latency divided by the DAGs in flight when it ended (the time the S-Worker
            spends per batch when several DAGs share it; latency alone grows with the DAGs in flight, which
            raises the balance and launches still more).
        counter: the rank's :class:`~workbench.communicate.base.TrafficCounter`: the graph-store traffic the
            workers count comes back with each finished task and is added to it under the epoch (None: dropped).
    """

    def __init__(self, logical: LogicalDAG, graph: Any, policy: CoarsePolicy, *, workers: int = 2,
                 ready_queue: str = "priority", poll_ms: float = 5.0, trace_ms: float = 50.0, ema: float = 0.3,
                 cpu_scope: str = "run", sample_time: str = "latency", counter: Any = None):
        from workbench.schedule.graphstore import worker_state

        self.logical, self.policy, self.counter = logical, policy, counter
        self.ready_queue, self.poll_s, self.trace_s, self.ema = ready_queue, poll_ms / 1000.0, trace_ms / 1000.0, ema
        self.state, self.degrees = worker_state(graph, logical.sampler)
        self.width = int(self.state.features.shape[1])
        if multiprocessing.current_process().daemon:
            raise RuntimeError("sampling worker processes cannot start inside a daemonic process (a Dask worker "
                               "with distributed.worker.daemon=True): use the single or local runner, or start the "
                               "workers with DASK_DISTRIBUTED__WORKER__DAEMON=False")
        from workbench.train.kernels import compiled

        compiled("csr_spmm_add")   # numba's pool starts here: a worker starting it after the fork hangs (OpenMP)
        ctx = multiprocessing.get_context("fork")
        self._conns, self._procs = [], []
        for i in range(int(workers)):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker_main, args=(child, self.state, logical.operators),
                            name=f"sampling-worker-{i}", daemon=True)
            p.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(p)
        self._dag_ids = itertools.count()
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self.t_avg_sample: Optional[float] = None
        self.t_avg_train: Optional[float] = None
        self._error: Optional[str] = None
        self.cpu_scope = cpu_scope
        self.sample_time = sample_time

    @property
    def workers(self) -> int:
        return len(self._conns)

    # -- epoch ---------------------------------------------------------------------------------------------
    def start_epoch(self, epoch: int, batches: list[tuple[int, Any]]) -> None:
        """Start sampling ``batches`` (``(step, seeds)`` in the order the trainer takes them)."""
        import torch

        if self._thread is not None:
            self.end_epoch()
        self.epoch = epoch
        self._todo = deque((step, np.asarray(torch.as_tensor(s).numpy(), dtype=np.int64)) for step, s in batches)
        self._done: dict[int, SampledBatch] = {}
        self._in_flight: dict[int, tuple[PhysicalDAG, float, int]] = {}
        self._ready: list = []
        self._fifo: deque = deque()
        self._idle = list(range(self.workers))
        self._running: dict[int, Task] = {}
        self._stop = False
        self._wake = threading.Event()
        self.stats = EpochSchedule()
        self._t0 = time.perf_counter()
        self._last_launch = -1e9
        self._last_return: Optional[float] = None
        self._c_util = 0.0
        import os

        self._meter = CpuMeter(self.cpu_scope, [os.getpid(), *(p.pid for p in self._procs)])
        self._thread = threading.Thread(target=self._loop, name="coarse-scheduler", daemon=True)
        self._thread.start()

    def get(self, step: int) -> SampledBatch:
        """The batch of ``step`` (blocks until its DAG ended; the wait counts as trainer idle time)."""
        called = time.perf_counter()
        if self._last_return is not None:
            train = called - self._last_return
            self.stats.trainer_train_s += train
            self.t_avg_train = train if self.t_avg_train is None else (1 - self.ema) * self.t_avg_train + self.ema * train
        with self._cond:
            while step not in self._done and self._error is None:
                self._cond.wait(0.5)
            if self._error is not None:
                raise RuntimeError(f"a sampling task failed:\n{self._error}")
            out = self._done.pop(step)
        self._wake.set()
        now = time.perf_counter()
        self.stats.trainer_idle_s += now - called
        self._last_return = now
        return out

    def end_epoch(self) -> EpochSchedule:
        """Wait for the scheduler thread (every launched DAG finished) and return the epoch's figures."""
        if self._thread is None:
            return self.stats
        self._thread.join()
        self._thread = None
        self.stats.seconds = time.perf_counter() - self._t0
        if self._error is not None:
            raise RuntimeError(f"a sampling task failed:\n{self._error}")
        return self.stats

    # -- scheduler thread ----------------------------------------------------------------------------------
    def _signals(self, now: float) -> Signals:
        return Signals(now=now, t_gap_ms=1000.0 * (now - self._last_launch), c_util=self._c_util,
                       q_size=len(self._done), in_flight=len(self._in_flight), t_avg_sample=self.t_avg_sample,
                       t_avg_train=self.t_avg_train, workers=self.workers)

    def _push(self, tasks: list[Task]) -> None:
        for t in tasks:
            if self.ready_queue == "priority":
                heapq.heappush(self._ready, (t.dag_id, t.cost, next(self._seq), t))
            else:
                self._fifo.append(t)

    def _pop(self) -> Optional[Task]:
        if self.ready_queue == "priority":
            return heapq.heappop(self._ready)[3] if self._ready else None
        return self._fifo.popleft() if self._fifo else None

    def _has_ready(self) -> bool:
        return bool(self._ready) if self.ready_queue == "priority" else bool(self._fifo)

    def _launch(self, now: float) -> None:
        step, seeds = self._todo.popleft()
        dag_id = next(self._dag_ids)
        roots, links = self.logical.branch_roots(seeds, self.epoch, step, self.state)
        self._traffic(self.state.store.drain())   # the Positive operator's reads (here, in the trainer's process)
        dag = self.logical.physical(dag_id=dag_id, seeds=seeds, epoch=self.epoch, step=step, degrees=self.degrees,
                                    feature_width=self.width, roots=roots, links=links)
        self._in_flight[dag_id] = (dag, now, step)
        self.stats.num_dags += 1
        self.stats.seeds += int(seeds.size)
        self.stats.launch_t.append(now - self._t0)
        self._last_launch = now
        self._push(dag.ready())

    def _traffic(self, traffic: dict) -> None:
        if traffic and self.counter is not None:
            from workbench.schedule.graphstore import add_traffic

            add_traffic(self.counter, self.epoch, traffic)

    def _finish(self, worker: int, msg: tuple) -> None:
        (dag_id, index), ok, result, seconds, traffic = msg
        self._traffic(traffic)
        self._idle.append(worker)
        self._running.pop(worker, None)
        if not ok:
            with self._cond:
                self._error = result
                self._cond.notify_all()
            self._stop = True
            return
        self.stats.task_s += seconds
        self.stats.num_tasks += 1
        dag, launched, step = self._in_flight[dag_id]
        dag.finish(dag.tasks[index], result)
        self._push(dag.ready())
        if dag.done:
            now = time.perf_counter()
            latency = now - launched
            self.stats.dag_latency_s.append(latency)
            per_batch = latency if self.sample_time == "latency" else latency / len(self._in_flight)
            self.t_avg_sample = per_batch if self.t_avg_sample is None else \
                (1 - self.ema) * self.t_avg_sample + self.ema * per_batch
            del self._in_flight[dag_id]
            batch = dag.result()
            with self._cond:
                self._done[step] = batch
                self._cond.notify_all()

    def _trace(self, now: float, tick: bool) -> None:
        """Add a trace sample: on a ``tick`` (every ``trace_ms``; C_util is read then) and whenever Q_size, the
        DAGs in flight or the busy workers changed since the last sample (C_util carries its last reading)."""
        state = (len(self._done), len(self._in_flight), len(self._running))
        if tick:
            self._c_util = self._meter.read()
            self.stats.cpu_readings.append((now - self._t0, self._c_util))
        elif state == self._traced:
            return
        self._traced = state
        st = self.stats
        st.trace_t.append(round(now - self._t0, 6))   # microseconds: the log line stays short
        st.trace_cpu.append(round(self._c_util, 1))
        st.trace_q.append(state[0])
        st.trace_in_flight.append(state[1])
        st.trace_busy.append(state[2])

    def _loop(self) -> None:
        next_trace = time.perf_counter()
        self._traced = None
        try:
            while not self._stop and (self._todo or self._in_flight):
                now = time.perf_counter()
                tick = now >= next_trace
                self._trace(now, tick)
                if tick:
                    next_trace = now + self.trace_s
                if self._todo and self.policy.should_launch(self._signals(now)):
                    self._launch(now)
                while self._idle and self._has_ready():
                    w = self._idle.pop()
                    t = self._pop()
                    self._running[w] = t
                    self._conns[w].send(((t.dag_id, t.index), t.op, t.payload))
                self._trace(time.perf_counter(), False)
                busy = [self._conns[w] for w in self._running]
                if busy:
                    for conn in wait_connections(busy, timeout=self.poll_s):
                        w = self._conns.index(conn)
                        self._finish(w, conn.recv())
                else:
                    self._wake.wait(self.poll_s)
                    self._wake.clear()
            self._trace(time.perf_counter(), True)   # the end state, and C_util over the last window
        except BaseException:  # noqa: BLE001 - handed to the trainer
            with self._cond:
                self._error = traceback.format_exc()
                self._cond.notify_all()

    # -- lifetime ------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the workers (idempotent)."""
        if self._thread is not None:
            self._stop = True
            self._thread.join(timeout=5)
            self._thread = None
        for conn in self._conns:
            try:
                conn.send(None)
            except (OSError, BrokenPipeError):
                pass
        for p in self._procs:
            p.join(timeout=2)
            if p.is_alive():
                p.terminate()
                p.join(timeout=1)
        for conn in self._conns:
            conn.close()
        self._conns, self._procs = [], []
        self.state.store.close()

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - a forgotten pipeline still stops its workers
        try:
            if self._procs:
                self.close()
        except Exception:
            pass
