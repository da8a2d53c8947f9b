"""The schedule stage: which coarse policy launches sampling DAGs and how ready tasks are ordered.

A scheduler method is a :class:`Scheduler` (a small :class:`~workbench.stages.Stage`) whose ``Config`` holds
the S-Worker's settings (worker processes, chunk size, the fine scheduler's ready queue, poll and trace
intervals) and its coarse policy's options; :meth:`Scheduler.pipeline` builds the running
:class:`~workbench.schedule.executor.Pipeline`. ``graph_store`` says what the workers hold
(:mod:`~workbench.schedule.graphstore`). Registered methods (``--set schedule.method=NAME``):

================ ===========================================================================================
``launch-score`` ByteGNN's coarse scheduler: ``T_gap * f(C_util) * balance >= sigma`` (Algorithm 1)
``fixed-depth``  DistDGL-style fixed-depth prefetch (``depth`` batches launched or waiting)
``asap``         launch every DAG as soon as possible (up to ``max_in_flight``)
``fifo``         ``launch-score`` with a FIFO ready queue: the fine scheduler's baseline
================ ===========================================================================================

Example:
    >>> sorted(SCHEDULERS)
    ['asap', 'fifo', 'fixed-depth', 'launch-score']
    >>> SCHEDULERS.build("fixed-depth", depth=3).policy().depth
    3
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from workbench.constraints import Interval, Options
from workbench.schedule.graphstore import GRAPH_STORES
from workbench.schedule.executor import (CPU_SCOPES, READY_QUEUES, SAMPLE_TIMES, AsapPolicy, CoarsePolicy, LaunchScorePolicy, Pipeline,
                                         FixedDepthPolicy)
from workbench.stages import Stage, registry

__all__ = ["SCHEDULERS", "Scheduler", "LaunchScoreScheduler", "FixedDepthScheduler", "AsapScheduler",
           "FifoScheduler"]

SCHEDULERS = registry("schedule")
"""Every registered scheduling method, by name (``--set schedule.method=NAME``)."""


class Scheduler(Stage):
    """Base of the scheduling methods: the S-Worker's settings and a coarse policy."""

    kind = "schedule"
    requires = frozenset({"sampling tasks"})

    @dataclasses.dataclass(kw_only=True)
    class Config(Stage.Config):
        workers: Annotated[int, Interval(1, None)] = 2
        """Sampling worker processes (each runs one task at a time; the trainer is another process)."""
        chunk_size: Annotated[int, Interval(1, None)] = 256
        """Vertices per NSC / FF task (the paper makes one task per vertex; far too fine in Python)."""
        ready_queue: Annotated[str, Options(*READY_QUEUES)] = "priority"
        """Fine scheduler: ``priority`` (heap keyed by DAG id, cost, sequence: the paper's order) or ``fifo``."""
        poll_ms: Annotated[float, Interval(0.1, None)] = 5.0
        """The coarse scheduler's poll interval in milliseconds (Algorithm 1: 5 ms)."""
        trace_ms: Annotated[float, Interval(1, None)] = 50.0
        """Milliseconds between two trace samples (C_util, Q_size, DAGs in flight, busy workers)."""
        ema: Annotated[float, Interval(0, 1)] = 0.3
        """Weight of the newest measurement in the T_avg_sample / T_avg_train estimates."""
        cpu_scope: Annotated[str, Options(*CPU_SCOPES)] = "run"
        """C_util of ``run`` (the trainer and its workers, share of all cores) or the whole ``machine``."""
        sample_time: Annotated[str, Options(*SAMPLE_TIMES)] = "latency"
        """T_avg_sample: a DAG's ``latency``, or its ``effective`` time (latency / DAGs in flight at its end)."""
        graph_store: Annotated[str, Options(*GRAPH_STORES)] = "owners"
        """Where the workers read: ``owners`` (their rank's part; other parts' neighbours and features are
        requested from their owners' graph-store servers and counted, as in ByteGNN) or ``local`` (the whole graph in
        every worker; remote vertices only counted)."""

    def policy(self) -> CoarsePolicy:
        """A fresh coarse policy with this method's options."""
        raise NotImplementedError

    def pipeline(self, sampler: Any, graph: Any, counter: Any = None, *, num_negative: int = 0) -> Pipeline:
        """Start the worker processes of a pipeline sampling with ``sampler`` from ``graph`` (a
        :class:`~workbench.graph.Graph`, or a :class:`~workbench.schedule.graphstore.PartStore` whose servers are
        set up), adding the traffic its workers count to ``counter``. ``num_negative > 0`` samples the unsupervised
        DAG (seeds, one positive and that many negatives per seed) that a link objective scores."""
        from workbench.schedule.dag import LogicalDAG

        cfg = self.config
        dag = LogicalDAG(sampler, chunk_size=cfg.chunk_size, unsupervised=num_negative > 0,
                         num_negative=max(num_negative, 1))
        return Pipeline(dag, graph, self.policy(), workers=cfg.workers, ready_queue=cfg.ready_queue,
                        poll_ms=cfg.poll_ms, trace_ms=cfg.trace_ms, ema=cfg.ema, cpu_scope=cfg.cpu_scope,
                        sample_time=cfg.sample_time, counter=counter)


@SCHEDULERS.register
class LaunchScoreScheduler(Scheduler):
    """ByteGNN's coarse scheduler (:class:`~workbench.schedule.executor.LaunchScorePolicy`)."""

    name = "launch-score"

    @dataclasses.dataclass(kw_only=True)
    class Config(Scheduler.Config):
        sigma: Annotated[float, Interval(0, None)] = 1000.0
        """Launch when T_gap (ms) * f(C_util) * balance reaches sigma (the paper gives no value)."""
        max_in_flight: Annotated[int, Interval(1, None)] = 16
        """At most this many DAGs in flight (not in the paper; bounds memory)."""

    def policy(self) -> CoarsePolicy:
        return LaunchScorePolicy(sigma=self.config.sigma, max_in_flight=self.config.max_in_flight)


@SCHEDULERS.register
class FifoScheduler(LaunchScoreScheduler):
    """``launch-score`` with a FIFO ready queue (the fine scheduler's baseline; the paper argues against FIFO)."""

    name = "fifo"

    @dataclasses.dataclass(kw_only=True)
    class Config(LaunchScoreScheduler.Config):
        ready_queue: Annotated[str, Options(*READY_QUEUES)] = "fifo"
        """Fine scheduler: ``fifo`` (this method's point) or ``priority``."""


@SCHEDULERS.register
class FixedDepthScheduler(Scheduler):
    """DistDGL-style fixed-depth prefetch (:class:`~workbench.schedule.executor.FixedDepthPolicy`)."""

    name = "fixed-depth"

    @dataclasses.dataclass(kw_only=True)
    class Config(Scheduler.Config):
        depth: Annotated[int, Interval(1, None)] = 2
        """Batches launched or waiting at any time."""

    def policy(self) -> CoarsePolicy:
        return FixedDepthPolicy(depth=self.config.depth)


@SCHEDULERS.register
class AsapScheduler(Scheduler):
    """Launch as fast as possible (:class:`~workbench.schedule.executor.AsapPolicy`)."""

    name = "asap"

    @dataclasses.dataclass(kw_only=True)
    class Config(Scheduler.Config):
        max_in_flight: Annotated[int, Interval(1, None)] = 64
        """At most this many DAGs in flight."""

    def policy(self) -> CoarsePolicy:
        return AsapPolicy(max_in_flight=self.config.max_in_flight)
