"""The schedule stage: which coarse policy launches sampling DAGs and how ready tasks are ordered.

A scheduler method is a :class:`Scheduler` (a small :class:`~workbench.stages.Stage`) whose ``Config`` holds
the S-Worker's settings (worker processes, chunk size, the fine scheduler's ready queue, poll and trace
intervals) and its coarse policy's options; :meth:`Scheduler.pipeline` builds the running
:class:`~workbench.schedule.executor.Pipeline`. Registered methods (``--set schedule.policy=NAME``):

================ ===========================================================================================
``launch-score`` ByteGNN's coarse scheduler: ``T_gap * f(C_util) * balance >= sigma`` (§3.3, §3.9)
``prefetch``     DistDGL-style fixed-depth prefetch (``depth`` batches launched or waiting)
``asap``         launch every DAG as soon as possible (up to ``max_in_flight``)
``fifo``         ``launch-score`` with a FIFO ready queue: the fine scheduler's baseline
================ ===========================================================================================

Example:
    >>> sorted(SCHEDULERS)
    ['asap', 'fifo', 'launch-score', 'prefetch']
    >>> SCHEDULERS.build("prefetch", depth=3).policy().depth
    3
"""

from __future__ import annotations

import dataclasses
from typing import Any

from workbench._validation import ErrorCollector
from workbench.schedule.executor import (CPU_SCOPES, READY_QUEUES, SAMPLE_TIMES, AsapPolicy, CoarsePolicy, LaunchScorePolicy, Pipeline,
                                         PrefetchPolicy)
from workbench.stages import Stage, registry

__all__ = ["SCHEDULERS", "Scheduler", "LaunchScoreScheduler", "PrefetchScheduler", "AsapScheduler",
           "FifoScheduler"]

SCHEDULERS = registry("schedule")
"""Every registered scheduling method, by name (``--set schedule.policy=NAME``)."""


def _is_int(v: Any, low: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


def _is_num(v: Any, low: float) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= low


class Scheduler(Stage):
    """Base of the scheduling methods: the S-Worker's settings and a coarse policy."""

    kind = "schedule"
    requires = frozenset({"sampling tasks"})

    @dataclasses.dataclass(kw_only=True)
    class Config(Stage.Config):
        workers: int = 2
        """Sampling worker processes (each runs one task at a time; the trainer is another process)."""
        chunk_size: int = 256
        """Vertices per NSC / FF task (the paper makes one task per vertex; far too fine in Python)."""
        ready_queue: str = "priority"
        """Fine scheduler: ``priority`` (heap keyed by DAG id, cost, sequence; §3.4) or ``fifo``."""
        poll_ms: float = 5.0
        """The coarse scheduler's poll interval in milliseconds (§3.3: 5 ms)."""
        trace_ms: float = 50.0
        """Milliseconds between two trace samples (C_util, Q_size, DAGs in flight, busy workers)."""
        ema: float = 0.3
        """Weight of the newest measurement in the T_avg_sample / T_avg_train estimates."""
        cpu_scope: str = "run"
        """C_util of ``run`` (the trainer and its workers, share of all cores) or the whole ``machine``."""
        sample_time: str = "latency"
        """T_avg_sample: a DAG's ``latency``, or its ``effective`` time (latency / DAGs in flight at its end)."""
        unsupervised: bool = False
        """The unsupervised DAG (seeds, positive and negative branches) and a link-prediction loss."""
        num_negative: int = 1
        """Negatives per seed (unsupervised)."""

        def _validate(self, errs: ErrorCollector) -> None:
            errs.check(_is_int(self.workers, 1), "workers", "an int >= 1", self.workers)
            errs.check(_is_int(self.chunk_size, 1), "chunk_size", "an int >= 1", self.chunk_size)
            errs.check(self.ready_queue in READY_QUEUES, "ready_queue", f"one of {list(READY_QUEUES)}",
                       self.ready_queue)
            errs.check(_is_num(self.poll_ms, 0.1), "poll_ms", "a number >= 0.1", self.poll_ms)
            errs.check(_is_num(self.trace_ms, 1.0), "trace_ms", "a number >= 1", self.trace_ms)
            errs.check(_is_num(self.ema, 0.0) and self.ema <= 1.0, "ema", "a number in [0, 1]", self.ema)
            errs.check(self.sample_time in SAMPLE_TIMES, "sample_time", f"one of {list(SAMPLE_TIMES)}",
                       self.sample_time)
            errs.check(isinstance(self.unsupervised, bool), "unsupervised", "a bool", self.unsupervised)
            errs.check(_is_int(self.num_negative, 1), "num_negative", "an int >= 1", self.num_negative)
            errs.check(self.cpu_scope in CPU_SCOPES, "cpu_scope", f"one of {list(CPU_SCOPES)}", self.cpu_scope)

    def policy(self) -> CoarsePolicy:
        """A fresh coarse policy with this method's options."""
        raise NotImplementedError

    def pipeline(self, sampler: Any, graph: Any) -> Pipeline:
        """Start the worker processes of a pipeline sampling with ``sampler`` from ``graph``."""
        from workbench.schedule.dag import LogicalDAG

        cfg = self.config
        dag = LogicalDAG(sampler, chunk_size=cfg.chunk_size, unsupervised=cfg.unsupervised,
                         num_negative=cfg.num_negative)
        return Pipeline(dag, graph, self.policy(), workers=cfg.workers, ready_queue=cfg.ready_queue,
                        poll_ms=cfg.poll_ms, trace_ms=cfg.trace_ms, ema=cfg.ema, cpu_scope=cfg.cpu_scope,
                        sample_time=cfg.sample_time)


@SCHEDULERS.register
class LaunchScoreScheduler(Scheduler):
    """ByteGNN's coarse scheduler (:class:`~workbench.schedule.executor.LaunchScorePolicy`)."""

    name = "launch-score"

    @dataclasses.dataclass(kw_only=True)
    class Config(Scheduler.Config):
        sigma: float = 1000.0
        """Launch when T_gap (ms) * f(C_util) * balance reaches sigma (the paper gives no value)."""
        max_in_flight: int = 16
        """At most this many DAGs in flight (not in the paper; bounds memory)."""

        def _validate(self, errs: ErrorCollector) -> None:
            super()._validate(errs)
            errs.check(_is_num(self.sigma, 0.0), "sigma", "a number >= 0", self.sigma)
            errs.check(_is_int(self.max_in_flight, 1), "max_in_flight", "an int >= 1", self.max_in_flight)

    def policy(self) -> CoarsePolicy:
        return LaunchScorePolicy(sigma=self.config.sigma, max_in_flight=self.config.max_in_flight)


@SCHEDULERS.register
class FifoScheduler(LaunchScoreScheduler):
    """``launch-score`` with a FIFO ready queue (the fine scheduler's baseline, §3.4)."""

    name = "fifo"

    @dataclasses.dataclass(kw_only=True)
    class Config(LaunchScoreScheduler.Config):
        ready_queue: str = "fifo"
        """Fine scheduler: ``fifo`` (this method's point) or ``priority``."""


@SCHEDULERS.register
class PrefetchScheduler(Scheduler):
    """DistDGL-style fixed-depth prefetch (:class:`~workbench.schedule.executor.PrefetchPolicy`)."""

    name = "prefetch"

    @dataclasses.dataclass(kw_only=True)
    class Config(Scheduler.Config):
        depth: int = 2
        """Batches launched or waiting at any time."""

        def _validate(self, errs: ErrorCollector) -> None:
            super()._validate(errs)
            errs.check(_is_int(self.depth, 1), "depth", "an int >= 1", self.depth)

    def policy(self) -> CoarsePolicy:
        return PrefetchPolicy(depth=self.config.depth)


@SCHEDULERS.register
class AsapScheduler(Scheduler):
    """Launch as fast as possible (:class:`~workbench.schedule.executor.AsapPolicy`)."""

    name = "asap"

    @dataclasses.dataclass(kw_only=True)
    class Config(Scheduler.Config):
        max_in_flight: int = 64
        """At most this many DAGs in flight."""

        def _validate(self, errs: ErrorCollector) -> None:
            super()._validate(errs)
            errs.check(_is_int(self.max_in_flight, 1), "max_in_flight", "an int >= 1", self.max_in_flight)

    def policy(self) -> CoarsePolicy:
        return AsapPolicy(max_in_flight=self.config.max_in_flight)
