"""The schedule stage: ByteGNN's sampling DAGs, worker processes and two-level scheduling (Zheng et al., VLDB 2022).

* :mod:`~workbench.schedule.dag`: the five operators, :class:`LogicalDAG` and the per-batch :class:`PhysicalDAG`.
* :mod:`~workbench.schedule.executor`: the :class:`Pipeline` (worker processes, coarse policies, the fine
  scheduler's ready queue, the trainer's hand-off, traces).
* :mod:`~workbench.schedule.base`: the registry :data:`SCHEDULERS` (``--set schedule.method=NAME``).
* :mod:`~workbench.schedule.program`: mini-batch training fed by the pipeline.

Example:
    >>> sorted(SCHEDULERS)
    ['asap', 'fifo', 'fixed-depth', 'launch-score']
"""

from __future__ import annotations

from workbench.schedule.dag import LogicalDAG, PhysicalDAG, SampledBatch, Task
from workbench.schedule.executor import (AsapPolicy, CoarsePolicy, EpochSchedule, LaunchScorePolicy, Pipeline,
                                         FixedDepthPolicy, Signals, cpu_pressure)
from workbench.schedule.base import (SCHEDULERS, AsapScheduler, FifoScheduler, LaunchScoreScheduler,
                                     FixedDepthScheduler, Scheduler)

__all__ = ["LogicalDAG", "PhysicalDAG", "SampledBatch", "Task", "Pipeline", "CoarsePolicy", "AsapPolicy",
           "FixedDepthPolicy", "LaunchScorePolicy", "Signals", "EpochSchedule", "cpu_pressure", "SCHEDULERS",
           "Scheduler", "LaunchScoreScheduler", "FixedDepthScheduler", "AsapScheduler", "FifoScheduler"]
