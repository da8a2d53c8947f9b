"""The S-Worker's schedulers on a simulated clock: the real policies, ready queue and DAGs, no processes.

:func:`simulate` replays one epoch of :class:`~workbench.schedule.executor.Pipeline` as a deterministic
discrete-event simulation, so a test can show what a coarse policy or a ready queue does to the trainer's idle
time and to DAG latency (ByteGNN's coarse and fine scheduling) without wall clocks.

* **real**: the coarse policy (its ``should_launch(Signals)``), the fine scheduler's ready queue (Pipeline's
  own ``_push`` / ``_pop``: the heap keyed ``(dag_id, cost, seq)`` or the FIFO), the physical DAG
  (:meth:`LogicalDAG.physical` and :meth:`PhysicalDAG.finish`: per hop NSC chunks -> merge -> the next hop's NSC
  chunks and the hop's FF chunks) and its cost model; the scheduler loop of ``Pipeline._loop`` (one launch
  check per iteration, an iteration at every task end or after ``poll_ms``, C_util read every ``trace_ms``)
  and its signals (T_gap, Q_size, DAGs in flight, the EMAs of a DAG's latency and a training step);
* **simulated**: a task's duration (``task_overhead_ms`` + cost x ``us_per_cost[op]``); what a task hands
  back (every sampled neighbour a fresh vertex drawn by a generator keyed by (seed, step, hop, chunk), so
  every policy sees the same DAGs); the trainer (``train_ms`` per step, batches in step order); C_util, the
  busy share of the ``workers`` over the last trace window;
* **not modelled**: CPU contention between the trainer and the workers (each has its own core), IPC, memory.
  Without contention, launching more never slows anything down, so a policy cannot win throughput by holding
  back: what holding back buys here is DAG latency (and Q_size, memory).

Example (the default setting: 64 batches, 4 workers, a 15 ms step; ``(trainer idle fraction, mean DAG
latency in ms, most DAGs in flight)``):
    >>> runs = {m: simulate_method(m) for m in ("launch-score", "fifo", "fixed-depth", "asap")}
    >>> {m: (round(r.trainer_idle_fraction, 2), round(r.dag_latency_ms_mean), r.max_in_flight)
    ...  for m, r in runs.items()}
    {'launch-score': (0.05, 38, 6), 'fifo': (0.07, 86, 16), 'fixed-depth': (0.08, 27, 2), 'asap': (0.03, 371, 62)}
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
from collections import deque
from typing import Optional

import numpy as np

from workbench.sample.samplers import NeighborSampler
from workbench.schedule.base import SCHEDULERS
from workbench.schedule.dag import LogicalDAG, Task
from workbench.schedule.executor import READY_QUEUES, SAMPLE_TIMES, CoarsePolicy, Pipeline, Signals

__all__ = ["SimConfig", "SimResult", "simulate", "simulate_method"]


@dataclasses.dataclass(kw_only=True)
class SimConfig:
    """One simulated epoch: the S-Worker, the DAGs' shape and costs, the trainer."""

    workers: int = 4
    """Sampling workers, one task at a time each."""
    num_batches: int = 64
    batch_size: int = 64
    """Seeds per DAG."""
    fanouts: tuple[int, ...] = (10, 5)
    """As the sampler's (the last one applies to the seeds: sampling goes from layer K-1 outwards)."""
    chunk_size: int = 256
    """Vertices per NSC / FF task."""
    num_nodes: int = 100_000
    mean_degree: float = 20.0
    """Degrees are log-normal around this (NSC costs vary from chunk to chunk)."""
    feature_width: int = 100
    train_ms: float = 15.0
    """One training step. The default puts the pipeline where *when to launch* matters: one DAG alone takes
    longer than a step (~23 ms critical path on 4 workers), while the workers together sample a batch (~47 ms
    of tasks) faster than the trainer uses it (~12 ms per batch on 4 workers)."""
    task_overhead_ms: float = 0.2
    us_per_cost: dict = dataclasses.field(default_factory=lambda: {"nsc": 2.0, "merge": 1.0, "ff": 0.05})
    """Microseconds per unit of ByteGNN's task cost (NSC: neighbours scanned, merge: edges, FF: floats fetched)."""
    ready_queue: str = "priority"
    poll_ms: float = 5.0
    trace_ms: float = 50.0
    ema: float = 0.3
    sample_time: str = "latency"
    seed: int = 0


@dataclasses.dataclass
class SimResult:
    """What one simulated epoch gives (times in seconds of the simulated clock)."""

    policy: str
    ready_queue: str
    num_batches: int
    seconds: float
    """From the start to the end of the last training step."""
    trainer_idle_s: float
    dag_latency_s: list
    """Per DAG, launch to End, in launch order."""
    max_in_flight: int
    mean_in_flight: float
    """Time-weighted DAGs in flight."""
    worker_busy_fraction: float

    @property
    def trainer_idle_fraction(self) -> float:
        return self.trainer_idle_s / self.seconds

    @property
    def batches_per_s(self) -> float:
        return self.num_batches / self.seconds

    @property
    def dag_latency_ms_mean(self) -> float:
        return 1000.0 * float(np.mean(self.dag_latency_s))

    @property
    def dag_latency_ms_p90(self) -> float:
        return 1000.0 * float(np.percentile(self.dag_latency_s, 90))

    def row(self) -> dict:
        """The figures as a flat dict (one row of a table)."""
        names = ("trainer_idle_fraction", "dag_latency_ms_mean", "dag_latency_ms_p90", "batches_per_s",
                 "max_in_flight", "mean_in_flight", "worker_busy_fraction")
        figures = {n: round(getattr(self, n), 4) for n in names}
        return {"policy": self.policy, "ready_queue": self.ready_queue, **figures}


class _ReadyQueue:
    """The fine scheduler's ready queue: Pipeline's own methods on a bare object, so the ordering tested is
    the one the real pipeline uses."""

    _push, _pop, _has_ready = Pipeline._push, Pipeline._pop, Pipeline._has_ready

    def __init__(self, ready_queue: str):
        self.ready_queue, self._ready, self._fifo, self._seq = ready_queue, [], deque(), itertools.count()


def _result(task: Task, cfg: SimConfig):
    """What ``task`` hands back: a tree (every sampled neighbour a new vertex), keyed per (step, hop, chunk)."""
    p = task.payload
    if task.op == "nsc":
        rng = np.random.default_rng([cfg.seed, p["key"][2], task.hop, task.chunk])
        src = rng.integers(0, cfg.num_nodes, p["gid"].size * p["fanout"])
        return src, np.repeat(p["gid"], p["fanout"])
    if task.op == "merge":
        new = np.concatenate([e[0] for e in p["edges"]])
        empty = np.zeros(0, dtype=np.int64)
        return np.concatenate([p["frontier"], new]), p["frontier"].size, empty, empty
    return None


class _Clock:
    """One simulated epoch (see :func:`simulate`); mirrors ``Pipeline._loop`` and ``Pipeline.get``."""

    def __init__(self, policy: CoarsePolicy, cfg: SimConfig):
        self.policy, self.cfg = policy, cfg
        self.logical = LogicalDAG(NeighborSampler(fanouts=tuple(cfg.fanouts), seed=cfg.seed),
                                  chunk_size=cfg.chunk_size)
        rng = np.random.default_rng(cfg.seed)
        self.degrees = np.maximum(1, rng.lognormal(math.log(cfg.mean_degree) - 0.5, 1.0, cfg.num_nodes)).astype(
            np.int64)
        self.queue = _ReadyQueue(cfg.ready_queue)
        self.todo, self.dag_ids, self.seq = deque(range(cfg.num_batches)), itertools.count(), itertools.count()
        self.in_flight: dict[int, tuple] = {}
        self.done: set[int] = set()
        self.running: list = []        # heap of (end, seq, task)
        self.now = self.busy_s = self.in_flight_s = self.idle_s = 0.0
        self.last_launch, self.meter_at, self.next_trace = -1e9, (0.0, 0.0), 0.0
        self.c_util = 0.0
        self.t_avg_sample: Optional[float] = None
        self.t_avg_train: Optional[float] = None
        self.taken, self.called, self.last_return = 0, 0.0, None
        self.train_end: Optional[float] = 0.0   # None while the trainer waits in get()
        self.latencies: list[tuple[float, float]] = []     # (launched, latency)
        self.max_in_flight = 0

    def _advance(self, t: float) -> None:
        dt = t - self.now
        self.busy_s += len(self.running) * dt
        self.in_flight_s += len(self.in_flight) * dt
        self.now = t

    def _signals(self) -> Signals:
        return Signals(now=self.now, t_gap_ms=1000.0 * (self.now - self.last_launch), c_util=self.c_util,
                       q_size=len(self.done), in_flight=len(self.in_flight), t_avg_sample=self.t_avg_sample,
                       t_avg_train=self.t_avg_train, workers=self.cfg.workers)

    def _ema(self, old: Optional[float], new: float) -> float:
        return new if old is None else (1 - self.cfg.ema) * old + self.cfg.ema * new

    def _launch(self) -> None:
        step = self.todo.popleft()
        seeds = np.random.default_rng([self.cfg.seed, step]).integers(0, self.cfg.num_nodes, self.cfg.batch_size)
        dag = self.logical.physical(dag_id=next(self.dag_ids), seeds=seeds, epoch=0, step=step,
                                    degrees=self.degrees, feature_width=self.cfg.feature_width)
        self.in_flight[dag.dag_id] = (dag, self.now, step)
        self.max_in_flight = max(self.max_in_flight, len(self.in_flight))
        self.last_launch = self.now
        self.queue._push(dag.ready())

    def _iterate(self) -> None:
        """One turn of the scheduler loop: read C_util on a tick, ask the policy, hand out ready tasks."""
        if self.now >= self.next_trace:
            t0, busy0 = self.meter_at
            if self.now > t0:
                self.c_util = 100.0 * (self.busy_s - busy0) / (self.cfg.workers * (self.now - t0))
            self.meter_at, self.next_trace = (self.now, self.busy_s), self.now + self.cfg.trace_ms / 1000.0
        if self.todo and self.policy.should_launch(self._signals()):
            self._launch()
        while len(self.running) < self.cfg.workers and self.queue._has_ready():
            t = self.queue._pop()
            ms = self.cfg.task_overhead_ms + self.cfg.us_per_cost[t.op] * t.cost / 1000.0
            heapq.heappush(self.running, (self.now + ms / 1000.0, next(self.seq), t))

    def _finish_due(self) -> None:
        """Every task ending by now: its DAG expands; a finished DAG joins Q_size (or goes to the trainer)."""
        while self.running and self.running[0][0] <= self.now:
            task = heapq.heappop(self.running)[2]
            dag, launched, step = self.in_flight[task.dag_id]
            dag.finish(task, _result(task, self.cfg))
            self.queue._push(dag.ready())
            if dag.done:
                latency = self.now - launched
                self.latencies.append((launched, latency))
                per_batch = latency if self.cfg.sample_time == "latency" else latency / len(self.in_flight)
                self.t_avg_sample = self._ema(self.t_avg_sample, per_batch)
                del self.in_flight[task.dag_id]
                self.done.add(step)
                if self.train_end is None and step == self.taken:
                    self._take()

    def _get(self) -> None:
        """The trainer asks for its next batch (the end of a training step, or the start)."""
        if self.last_return is not None:
            self.t_avg_train = self._ema(self.t_avg_train, self.now - self.last_return)
        self.called, self.train_end = self.now, None
        if self.taken in self.done:
            self._take()

    def _take(self) -> None:
        self.done.remove(self.taken)
        self.idle_s += self.now - self.called
        self.taken += 1
        self.last_return = self.now
        self.train_end = self.now + self.cfg.train_ms / 1000.0 if self.taken < self.cfg.num_batches else None

    def run(self) -> SimResult:
        poll = self.cfg.poll_ms / 1000.0
        t_iter = 0.0
        while self.taken < self.cfg.num_batches:
            alive = bool(self.todo or self.in_flight)
            t_train = math.inf if self.train_end is None else self.train_end
            self._advance(min(t_iter if alive else math.inf, t_train))
            if alive and self.now == t_iter:
                self._finish_due()
                self._iterate()
                t_iter = min(self.now + poll, self.running[0][0]) if self.running else self.now + poll
            if self.train_end is not None and self.now >= self.train_end:
                self._get()
                if self.train_end is not None and not self.running:
                    t_iter = self.now       # get() sets the scheduler's wake event
            if self.todo and not (self.in_flight or self.done) and self.now - max(self.last_launch, 0.0) > 10.0:
                raise RuntimeError(f"the trainer starved: {type(self.policy).__name__} launched no DAG for 10 s")
        seconds = self.last_return + self.cfg.train_ms / 1000.0
        self._advance(max(self.now, seconds))
        return SimResult(policy=getattr(self.policy, "name", type(self.policy).__name__),
                         ready_queue=self.cfg.ready_queue, num_batches=self.cfg.num_batches, seconds=seconds,
                         trainer_idle_s=self.idle_s, dag_latency_s=[lat for _, lat in sorted(self.latencies)],
                         max_in_flight=self.max_in_flight, mean_in_flight=self.in_flight_s / seconds,
                         worker_busy_fraction=self.busy_s / (self.cfg.workers * seconds))


def _check(cfg: SimConfig) -> None:
    """Every bad setting at once, in the house template."""
    rules = [("workers", cfg.workers >= 1, "an int >= 1"), ("num_batches", cfg.num_batches >= 1, "an int >= 1"),
             ("ready_queue", cfg.ready_queue in READY_QUEUES, f"one of {READY_QUEUES}"),
             ("sample_time", cfg.sample_time in SAMPLE_TIMES, f"one of {SAMPLE_TIMES}"),
             ("train_ms", cfg.train_ms >= 0, "a float >= 0"), ("poll_ms", cfg.poll_ms > 0, "a float > 0")]
    bad = [f"The '{f}' parameter of SimConfig must be {want}. Got {getattr(cfg, f)!r} instead."
           for f, ok, want in rules if not ok]
    if bad:
        raise ValueError("\n".join(bad))


def simulate(policy: CoarsePolicy, config: Optional[SimConfig] = None) -> SimResult:
    """One epoch of ``config`` (default :class:`SimConfig`) under the coarse ``policy`` on a simulated clock.

    Deterministic: the same policy and config give the same figures.

    Example:
        >>> from workbench.schedule.executor import LaunchScorePolicy
        >>> r = simulate(LaunchScorePolicy(), SimConfig(num_batches=6))
        >>> r.num_batches, r == simulate(LaunchScorePolicy(), SimConfig(num_batches=6))
        (6, True)
    """
    cfg = config or SimConfig()
    _check(cfg)
    return _Clock(policy, cfg).run()


def simulate_method(name: str, config: Optional[SimConfig] = None, **options) -> SimResult:
    """A registered scheduling method (``launch-score``, ``fifo``, ``fixed-depth``, ``asap``) built with
    ``options``: its coarse policy and its ready queue; the rest of the setting from ``config``.

    Example:
        >>> simulate_method("fifo", SimConfig(num_batches=3)).ready_queue
        'fifo'
    """
    method = SCHEDULERS.build(name, **options)
    cfg = dataclasses.replace(config or SimConfig(), ready_queue=method.config.ready_queue)
    result = simulate(method.policy(), cfg)
    result.policy = name
    return result
