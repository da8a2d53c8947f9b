"""Where a rank's epoch goes: wall time by step phase (:class:`PhaseTimer`), logged per epoch as
:class:`~workbench.events.StepTimes` by :class:`~workbench.train.loop.EpochRecorder`.

The training loop opens one phase around each part of a step (``forward``, ``backward``, ``grad_sync``,
``optimizer``, ``evaluate``), and the stages open finer ones inside (the mini-batch trainer's ``sample``
and ``fetch``). Accounting is exclusive: at every phase change the time since the last change goes to the
phase that was running, so a phase nested in another is never counted twice and the phases add up to the
epoch's wall time. Time outside any phase is ``other``.

Communication inside compute is moved by the **comm clock**: every verb of a
:class:`~workbench.communicate.base.Communicator` adds its duration to its
:class:`~workbench.communicate.base.TrafficCounter` (``comm_seconds``; one counter per rank in the in-process
and ``torch.distributed`` backends, shared with a wrapping communicator), and the comm seconds that elapse
inside ``forward`` or ``backward`` are counted as ``exchange`` (halo rows, block-row broadcasts, prefetched
embeddings and gradients). Communication inside the other phases stays there: owner-routed sampling traffic
is ``sample``, a KVStore pull is ``fetch``, the weight-gradient all-reduce is ``grad_sync``.

**Overlapped** work (:meth:`PhaseTimer.overlapped`): seconds a background thread of the rank spends beside the
epoch's steps (the mini-batch trainer's batches-ahead thread: sampling, with its owner-routed traffic on a side
communicator, and feature pulls) are off the critical path, so no phase holds them: they are kept apart, by phase
of :data:`OVERLAP_PHASES`, and reported as :class:`~workbench.events.StepTimes` ``overlapped`` (the run summary's
``time_breakdown["overlapped"]``). The trainer's wait for such a batch is a phase of the epoch (``sample``).

Cost: two ``perf_counter`` calls and one attribute read per phase change, a handful per step; no event per
step. On CUDA, kernels run asynchronously and no phase synchronises the device (that would slow every
step): a phase's GPU work is then counted where the host next waits for it, typically the next
communication or ``.item()``. The suite and the papers' figures here are CPU runs, where the account is exact.

Example:
    >>> timer = PhaseTimer()
    >>> _ = timer.start()
    >>> with timer.phase("forward"):
    ...     with timer.phase("sample"):
    ...         pass
    >>> seconds, wall = timer.stop()
    >>> sorted(seconds) == sorted(STEP_PHASES), abs(sum(seconds.values()) - wall) < 1e-9
    (True, True)
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from workbench.events import OVERLAP_PHASES, STEP_PHASES

__all__ = ["PhaseTimer", "STEP_PHASES", "COMM_MOVED_PHASES", "OVERLAP_PHASES"]

#: phases whose communication time the comm clock moves to ``exchange``
COMM_MOVED_PHASES = frozenset({"forward", "backward"})


class _Phase:
    """The context of one :meth:`PhaseTimer.phase` (a class, not a generator: a few per step, kept cheap)."""

    __slots__ = ("timer", "name", "absorb", "outer", "outer_absorbing")

    def __init__(self, timer: "PhaseTimer", name: str, absorb: bool):
        self.timer, self.name, self.absorb = timer, name, absorb

    def __enter__(self) -> "_Phase":
        t = self.timer
        self.outer, self.outer_absorbing = t._current, t._absorbing
        if not t._absorbing:
            t._switch(self.name)
            t._absorbing = self.absorb
        return self

    def __exit__(self, *exc: Any) -> None:
        t = self.timer
        if not self.outer_absorbing:
            t._switch(self.outer)
        t._absorbing = self.outer_absorbing


class PhaseTimer:
    """Exclusive wall time by phase over one epoch, with the communication inside compute moved to ``exchange``.

    Use :meth:`start` at the epoch's start, ``with timer.phase(name):`` around each part of a step, and
    :meth:`stop` at its end. ``steps`` counts the epoch's training steps (the loop adds one per step).

    Args:
        counter: the rank's :class:`~workbench.communicate.base.TrafficCounter`, whose ``comm_seconds`` is the
            comm clock (``None``: no clock, nothing is moved to ``exchange``).

    Attributes:
        seconds: phase -> seconds so far this epoch (every key of :data:`STEP_PHASES`).
        steps: training steps so far this epoch.

    Example:
        >>> from workbench.communicate.base import TrafficCounter
        >>> counter = TrafficCounter()
        >>> timer = PhaseTimer(counter)
        >>> _ = timer.start()
        >>> with timer.phase("forward"):
        ...     counter.comm_seconds += 0.0   # a communicator adds the time its verbs took here
        >>> with timer.phase("evaluate", absorb=True):
        ...     with timer.phase("sample"):  # absorbed: the evaluation's own sampling counts as evaluate
        ...         pass
        >>> seconds, wall = timer.stop()
        >>> seconds["sample"], all(v >= 0 for v in seconds.values())
        (0.0, True)
    """

    def __init__(self, counter: Any = None):
        self.counter = counter
        self.seconds: dict[str, float] = dict.fromkeys(STEP_PHASES, 0.0)
        self.steps = 0
        self._current = "other"
        self._absorbing = False
        self._t0 = self._mark = time.perf_counter()
        self._comm_mark = self._comm()
        self._overlap_lock = threading.Lock()
        self._overlapped = dict.fromkeys(OVERLAP_PHASES, 0.0)

    def overlapped(self, phase: str, seconds: float) -> None:
        """Add ``seconds`` of ``phase`` (one of :data:`OVERLAP_PHASES`) done off the critical path, on another
        thread (thread-safe); they count in the epoch during which :meth:`take_overlapped` next reads them."""
        with self._overlap_lock:
            self._overlapped[phase] += float(seconds)

    def take_overlapped(self) -> dict[str, float]:
        """The overlapped seconds by phase since the last call (then they start again from 0).

        Example:
            >>> timer = PhaseTimer()
            >>> timer.overlapped("sample", 0.25)
            >>> timer.take_overlapped(), timer.take_overlapped()["sample"]
            ({'sample': 0.25, 'fetch': 0.0}, 0.0)
        """
        with self._overlap_lock:
            out, self._overlapped = self._overlapped, dict.fromkeys(OVERLAP_PHASES, 0.0)
        return out

    def _comm(self) -> float:
        return self.counter.comm_seconds if self.counter is not None else 0.0

    def start(self) -> float:
        """Reset the account for a new epoch; returns the start time (``time.perf_counter``)."""
        self.seconds = dict.fromkeys(STEP_PHASES, 0.0)
        self.steps = 0
        self._current, self._absorbing = "other", False
        self._comm_mark = self._comm()
        self._t0 = self._mark = time.perf_counter()
        return self._t0

    def phase(self, name: str, *, absorb: bool = False) -> _Phase:
        """A context counting its time as ``name`` (one of :data:`STEP_PHASES`).

        Args:
            name: the phase.
            absorb: phases opened inside this one count as this one (an evaluation pass absorbs the sampling
                and feature pulls of its batches).
        """
        assert name in self.seconds, name
        return _Phase(self, name, absorb)

    def _switch(self, to: str) -> None:
        """Charge the time since the last change to the running phase, then run ``to``."""
        now = time.perf_counter()
        dt = now - self._mark
        if self._current in COMM_MOVED_PHASES:
            comm = self._comm()
            # capped at the interval: the clock of a rank's communicator advances only inside its own calls
            dc = min(max(comm - self._comm_mark, 0.0), dt)
            self.seconds["exchange"] += dc
            self.seconds[self._current] += dt - dc
            self._comm_mark = comm
        else:
            self.seconds[self._current] += dt
            self._comm_mark = self._comm()
        self._mark = now
        self._current = to

    def stop(self) -> tuple[dict[str, float], float]:
        """End the epoch: ``(seconds by phase, wall seconds)``.

        ``other`` is the wall time minus the sum of the other phases (equal, up to float rounding, to the time
        spent outside any phase), clamped at 0 so no phase is negative; the phases add up to the wall time up
        to float rounding.
        """
        self._switch("other")
        wall = self._mark - self._t0
        out = dict(self.seconds)
        out["other"] = max(wall - sum(v for k, v in out.items() if k != "other"), 0.0)
        return out, wall


def process_cpu_s(children: bool = True) -> float:
    """CPU seconds (user + system, every thread) this process and its child processes have used so far: the ones
    already reaped (``os.times``) and, with ``children``, the live ones (recursively, read from the OS: about a
    millisecond on a machine with a hundred processes, so the loop reads them only for steps that start worker
    processes). A child that ends between two readings without being reaped takes its seconds with it, so a
    difference of two readings can fall short.

    Example:
        >>> a = process_cpu_s(); _ = sum(i * i for i in range(100_000)); process_cpu_s() > a
        True
    """
    t = os.times()
    total = time.process_time() + t.children_user + t.children_system   # process_time: not in clock ticks
    if not children:
        return total
    try:
        import psutil   # a dependency of dask.distributed
    except ImportError:  # pragma: no cover
        return total
    try:
        for child in psutil.Process().children(recursive=True):
            try:
                c = child.cpu_times()
                total += c.user + c.system
            except psutil.Error:   # ended meanwhile
                pass
    except psutil.Error:  # pragma: no cover
        pass
    return total
