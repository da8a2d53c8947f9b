"""The runtime: start a run from a config and follow it (:func:`launch`, :class:`RunHandle`).

See :mod:`workbench.runtime.launch` for the runners and the run log, :mod:`workbench.runtime.program`
for what a runner runs, and :mod:`workbench.runtime.errors` for the typed failures.
:mod:`workbench.runtime.netcluster` is an emulated multi-host cluster on one machine (hosts in network
namespaces, shaped links: ``workbench cluster up``), for the reproduction runs, the benchmarks and the tests.
"""

from __future__ import annotations

from workbench.runtime.errors import RankFailed, RendezvousTimeout, RunError, SchedulerLost, WorkerLost
from workbench.runtime.launch import RUNNERS, RunHandle, launch
from workbench.runtime.program import Program, RankContext, StopRequested

__all__ = ["launch", "RunHandle", "RUNNERS", "Program", "RankContext", "StopRequested", "RunError", "RankFailed",
           "WorkerLost", "RendezvousTimeout", "SchedulerLost"]
