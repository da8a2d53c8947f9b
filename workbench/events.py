"""Typed events: what every stage reports, and the run log they are written to.

Every stage emits small dataclasses (bytes, messages, hits, staleness, time). They are plain
(msgpack/JSON-safe: str, int, float, bool, None, lists and dicts of those), so they travel through
Dask's event topics unchanged and are appended to a run log on disk as they arrive.

Run log layout (written by :class:`RunLog`)::

    runs/<run_id>/
        config.json     # {"run_id", "recipe", "config": {...}, "workbench_version", "created"}
        events.jsonl    # one event per line: {"type": "<event type>", <fields>}; flushed per line

A crashed run therefore keeps every event up to the crash. Read one back with :func:`read_run_log`.

Example:
    >>> ev = EpochEnd(run_id="r1", rank=0, epoch=3, loss=0.5)
    >>> event_from_dict(ev.to_dict()) == ev
    True
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, ClassVar, Iterable, Iterator, Optional, Protocol

__all__ = [
    "Event", "RunStarted", "RunFinished", "Progress", "PartitionComputed", "EpochEnd", "Traffic",
    "Staleness", "CacheStats", "SampleStats", "EventSink", "ListSink", "FanOut", "RunLog", "event_from_dict",
    "read_run_log", "EVENT_TYPES", "ScheduleStats", "ScheduleTrace", "PipelineCost", "PipelineTimeline",
    "StepTimes", "STEP_PHASES", "OVERLAP_PHASES",
]

#: the phases of a training step, in the order :class:`StepTimes` and the run summary's ``time_breakdown`` list them
STEP_PHASES = ("sample", "fetch", "forward", "exchange", "backward", "grad_sync", "optimizer", "evaluate", "other")
#: the phases of work a rank's background thread does off the critical path (:class:`StepTimes` ``overlapped``)
OVERLAP_PHASES = ("sample", "fetch")


@dataclasses.dataclass(kw_only=True)
class Event:
    """Base of all events. ``time`` is seconds since the epoch when the event was made."""

    type: ClassVar[str] = "event"
    run_id: str = ""
    time: float = dataclasses.field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **dataclasses.asdict(self)}


@dataclasses.dataclass(kw_only=True)
class RunStarted(Event):
    """A run began. ``config`` is the recipe config as a dict."""

    type: ClassVar[str] = "run_started"
    recipe: str = ""
    runner: str = ""
    world_size: int = 1
    config: dict = dataclasses.field(default_factory=dict)
    dashboard_link: Optional[str] = None


@dataclasses.dataclass(kw_only=True)
class RunFinished(Event):
    """A run ended. ``status`` is ``finished``, ``failed`` or ``stopped``; ``summary`` holds final figures."""

    type: ClassVar[str] = "run_finished"
    status: str = "finished"
    error: Optional[str] = None
    summary: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(kw_only=True)
class Progress(Event):
    """Progress of a long step: ``graph`` (loading or generating), ``partition``, ``epochs`` (one event per
    rank and epoch, ``done = epoch + 1``), ``evaluation``. ``total`` 0 means unknown; ``rank`` is the rank
    reporting (``None``: the client, e.g. while preparing; logs written before it existed read as ``None``).
    """

    type: ClassVar[str] = "progress"
    stage: str = ""
    done: int = 0
    total: int = 0
    message: str = ""
    rank: Optional[int] = None


@dataclasses.dataclass(kw_only=True)
class PartitionComputed(Event):
    """A partition is ready. ``metrics`` follows ``PartitionMetrics.to_dict()``; ``comm_rows[p][q]`` is the
    number of feature rows part ``p`` sends to part ``q`` in one full-graph layer."""

    type: ClassVar[str] = "partition"
    method: str = ""
    num_parts: int = 0
    metrics: dict = dataclasses.field(default_factory=dict)
    part_sizes: list = dataclasses.field(default_factory=list)
    halo_sizes: list = dataclasses.field(default_factory=list)
    comm_rows: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(kw_only=True)
class EpochEnd(Event):
    """One rank finished one epoch. Times are seconds; ``bytes_by_kind`` counts what this rank *sent*."""

    type: ClassVar[str] = "epoch"
    rank: int = 0
    epoch: int = 0
    loss: Optional[float] = None
    train_acc: Optional[float] = None
    val_acc: Optional[float] = None
    test_acc: Optional[float] = None
    compute_s: float = 0.0
    comm_s: float = 0.0
    wall_s: float = 0.0
    bytes_by_kind: dict = dataclasses.field(default_factory=dict)
    messages: int = 0


@dataclasses.dataclass(kw_only=True)
class StepTimes(Event):
    """One rank's time of one epoch by phase, summed over its steps (seconds; the phases are exclusive: a
    phase nested in another is not counted twice). Measured by :class:`workbench.train.timing.PhaseTimer`.

    ``seconds`` holds every phase of :data:`STEP_PHASES` (0.0 where the trainer has none):

    * ``sample``: neighbour or edge sampling, with its owner-routed traffic (a scheduled trainer: waiting
      for the pipeline's next batch);
    * ``fetch``: pulling input feature rows (local gather, remote KVStore pull, cache lookup);
    * ``forward`` / ``backward``: local compute of the forward and backward passes (sparse and dense);
    * ``exchange``: communication inside the forward and backward passes (halo rows, block-row broadcasts,
      prefetched embeddings and their gradients), taken out of ``forward`` / ``backward`` by the comm clock;
    * ``grad_sync``: the weight-gradient all-reduce (CATGNN: the model-averaging all-reduce);
    * ``optimizer``: ``optimizer.step()``;
    * ``evaluate``: the evaluation pass (its sampling, feature pulls and metrics all-reduce included);
    * ``other``: ``wall_s`` minus the sum of the others (bookkeeping: the stop check, zeroing gradients,
      batching seeds), clamped at 0.

    The values add up to ``wall_s`` (the epoch's wall time, as in :class:`EpochEnd`) up to float rounding,
    and none is negative. ``steps`` is the number of training steps of the epoch, ``program`` the name of
    the program the rank ran (the run summary's ``program``).

    ``train_cpu_s`` is the CPU time (user and system, every thread) of the rank's process and of its child
    processes (a scheduled trainer's sampling workers) during the epoch's training steps, up to ``evaluate``
    (:func:`workbench.train.timing.process_cpu_s`); ``train_cpu_s / (training seconds x cores)`` is the machine's
    CPU utilisation by training. Where ranks are threads of one process (the ``single`` and ``local`` runners)
    every rank reports the whole process's, i.e. the run's.

    Example:
        >>> ev = StepTimes(rank=1, epoch=0, steps=2, seconds={"forward": 0.5, "other": 0.25}, wall_s=0.75)
        >>> event_from_dict(ev.to_dict()) == ev
        True
    """

    type: ClassVar[str] = "step_times"
    rank: int = 0
    epoch: int = 0
    steps: int = 0
    program: str = ""
    seconds: dict = dataclasses.field(default_factory=dict)
    """phase -> seconds, keys from :data:`STEP_PHASES`."""
    wall_s: float = 0.0
    train_cpu_s: float = 0.0
    overlapped: dict = dataclasses.field(default_factory=dict)
    """phase -> seconds of work a background thread of the rank did during the epoch, off the critical path and
    in none of ``seconds`` (the mini-batch trainer's ``train.batches_ahead`` thread: ``sample``, ``fetch``; empty
    without one; :mod:`workbench.train.timing`)."""


@dataclasses.dataclass(kw_only=True)
class Traffic(Event):
    """Bytes and messages counted at the transport, aggregated per (epoch, src, dst, kind, layer).

    A record may cover a window of epochs: ``num_epochs`` epochs from ``epoch`` on (``bytes`` and
    ``messages`` are the window's sums). Long runs log per-link detail that way (see ``traffic_detail``
    in :class:`workbench.train.loop.EpochRecorder`); the exact per-epoch totals by kind are in
    :class:`EpochEnd` ``bytes_by_kind``. Logs written before the field existed read as ``num_epochs=1``.
    """

    type: ClassVar[str] = "traffic"
    epoch: int = 0
    src_rank: int = 0
    dst_rank: int = 0
    kind: str = ""
    layer: int = -1
    bytes: int = 0
    messages: int = 0
    num_epochs: int = 1


@dataclasses.dataclass(kw_only=True)
class Staleness(Event):
    """SANCUS-style staleness of one (rank, layer, epoch): the rank's own flag and the cached blocks it used.

    ``ages[j]`` is the age in epochs of the block of rank ``j`` used this epoch (0 = fresh, own block 0).
    ``gap`` is the variation gap of this rank's block against what the others hold (when computed)."""

    type: ClassVar[str] = "staleness"
    rank: int = 0
    layer: int = 0
    epoch: int = 0
    state: str = "ACTIVE"
    ages: list = dataclasses.field(default_factory=list)
    gap: Optional[float] = None


@dataclasses.dataclass(kw_only=True)
class CacheStats(Event):
    """Hits and misses of a feature or embedding cache on one rank in one epoch.

    ``remote_rows`` are the distinct remote ids the rank asked for (before the cache), ``hits`` of them
    served by the cache and ``misses`` fetched; ``bytes_saved`` is what the hits did not move (rows and
    ids); ``refresh_bytes`` what re-filling the cache moved this epoch; ``fill_bytes`` the one-off
    initial fill (setup, repeated on every event of the run). Logs written before ``policy`` and the
    fields after it existed read back with their defaults."""

    type: ClassVar[str] = "cache"
    rank: int = 0
    epoch: int = 0
    hits: int = 0
    misses: int = 0
    bytes_saved: int = 0
    policy: str = ""
    ratio: Optional[float] = None
    refresh_bytes: int = 0
    remote_rows: int = 0
    fill_bytes: int = 0


@dataclasses.dataclass(kw_only=True)
class SampleStats(Event):
    """What one trainer's mini-batches of one epoch cost (aggregated over its steps before it is sent).

    ``input_nodes`` sums the first layer's source vertices over the steps (the rows whose features the
    model needs), ``remote_input_nodes`` those another part owns (pulled or cached); ``sample_bytes`` and
    ``feature_bytes`` are what this rank sent for owner-routed sampling and feature pulls."""

    type: ClassVar[str] = "sample"
    rank: int = 0
    epoch: int = 0
    steps: int = 0
    seeds: int = 0
    sampled_edges: int = 0
    input_nodes: int = 0
    remote_input_nodes: int = 0
    sample_bytes: int = 0
    feature_bytes: int = 0
    sample_s: float = 0.0


@dataclasses.dataclass(kw_only=True)
class ScheduleStats(Event):
    """One epoch of a trainer fed by sampling DAGs (the schedule stage): throughput, idle time, latencies.

    ``seeds_per_s`` = seeds trained over the epoch's training wall time; ``trainer_idle_s`` the time the
    trainer waited for its next batch; ``dag_latency_ms`` per DAG (launch to End, in launch order);
    ``cpu_util_mean`` the machine-wide CPU utilisation (%) averaged over the trace."""

    type: ClassVar[str] = "schedule"
    rank: int = 0
    epoch: int = 0
    policy: str = ""
    ready_queue: str = ""
    workers: int = 0
    num_dags: int = 0
    num_tasks: int = 0
    seeds: int = 0
    seconds: float = 0.0
    seeds_per_s: float = 0.0
    trainer_idle_s: float = 0.0
    trainer_idle_fraction: float = 0.0
    cpu_util_mean: float = 0.0
    dag_latency_ms: list = dataclasses.field(default_factory=list)
    dag_latency_ms_mean: float = 0.0
    launch_s: list = dataclasses.field(default_factory=list)
    """Per DAG: launch time in seconds since the epoch started."""


@dataclasses.dataclass(kw_only=True)
class ScheduleTrace(Event):
    """Timelines of one epoch of the schedule stage, sampled every ``trace_ms`` and at every change of the
    counts (thinned as :func:`workbench.schedule.executor.trace_samples` says): ``t`` (seconds since the
    epoch started), ``cpu_util`` (%, the latest reading), ``q_size`` (finished batches waiting),
    ``in_flight`` (DAGs launched and not finished), ``busy_workers`` (worker processes running a task)."""

    type: ClassVar[str] = "schedule_trace"
    rank: int = 0
    epoch: int = 0
    policy: str = ""
    t: list = dataclasses.field(default_factory=list)
    cpu_util: list = dataclasses.field(default_factory=list)
    q_size: list = dataclasses.field(default_factory=list)
    in_flight: list = dataclasses.field(default_factory=list)
    busy_workers: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(kw_only=True)
class PipelineCost(Event):
    """What one rank's iteration costs in the timing account of a pipelined run (an
    :class:`~workbench.sim.pipeline_time.IterationCost`: compute seconds and bytes per layer).

    Sent by every rank of a prefetch run to the client, which simulates the iteration once every rank's
    cost is in and logs a :class:`PipelineTimeline` in its place (the costs themselves are not logged).
    ``exact``: at the first iteration only, the cost of a synchronous iteration on every edge (the link
    bandwidth is scaled to it)."""

    type: ClassVar[str] = "pipeline_cost"
    rank: int = 0
    epoch: int = 0
    fwd_s: list = dataclasses.field(default_factory=list)
    bwd_s: list = dataclasses.field(default_factory=list)
    fetch_bytes: list = dataclasses.field(default_factory=list)
    grad_bytes: list = dataclasses.field(default_factory=list)
    allreduce_bytes: float = 0.0
    exact: Optional[dict] = None


@dataclasses.dataclass(kw_only=True)
class PipelineTimeline(Event):
    """The simulated timeline of iterations ``first_iteration ..`` of a pipelined run, every worker (a
    discrete-event account: :class:`~workbench.sim.pipeline_time.PipelineSimulator`).

    Per iteration (lists of ``num_iterations``): ``iteration_start`` (simulated seconds since the run
    began), ``iteration_s`` (barrier to barrier), ``blocked_s`` / ``compute_s`` (the most any worker waited
    on a transfer issued ``tau`` earlier / computed), ``worker_blocked_s`` (a list per worker).
    The bars, one entry per bar in each of ``iteration``, ``worker``, ``kind`` (``fwd``, ``bwd``,
    ``fetch``, ``grad``, ``allreduce``, ``wait_fetch``, ``wait_grad``, ``wait_allreduce``), ``layer`` (-1: the
    all-reduce),
    ``start`` / ``end`` (seconds since their iteration began, 6 significant digits), ``nbytes`` (a
    transfer's bytes; for a wait, the bytes of the transfer waited for) and ``issued`` (the iteration that
    issued the transfer; for a wait, the one that blocked)."""

    type: ClassVar[str] = "pipeline_timeline"
    first_iteration: int = 0
    num_workers: int = 0
    tau: int = 0
    bandwidth_Bps: float = 0.0
    sync_iteration_s: Optional[float] = None
    iteration_start: list = dataclasses.field(default_factory=list)
    iteration_s: list = dataclasses.field(default_factory=list)
    blocked_s: list = dataclasses.field(default_factory=list)
    compute_s: list = dataclasses.field(default_factory=list)
    worker_blocked_s: list = dataclasses.field(default_factory=list)
    iteration: list = dataclasses.field(default_factory=list)
    worker: list = dataclasses.field(default_factory=list)
    kind: list = dataclasses.field(default_factory=list)
    layer: list = dataclasses.field(default_factory=list)
    start: list = dataclasses.field(default_factory=list)
    end: list = dataclasses.field(default_factory=list)
    nbytes: list = dataclasses.field(default_factory=list)
    issued: list = dataclasses.field(default_factory=list)

    @property
    def num_iterations(self) -> int:
        return len(self.iteration_s)


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls for cls in (RunStarted, RunFinished, Progress, PartitionComputed, EpochEnd, Traffic,
                              Staleness, CacheStats, SampleStats, ScheduleStats, ScheduleTrace, PipelineCost,
                              PipelineTimeline, StepTimes)
}


def event_from_dict(d: dict[str, Any]) -> Event:
    """Rebuild a typed event from :meth:`Event.to_dict` output (unknown keys are ignored)."""
    d = dict(d)
    cls = EVENT_TYPES.get(d.pop("type", ""), Event)
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})


# --------------------------------------------------------------------------------------------------------
# Sinks
# --------------------------------------------------------------------------------------------------------


class EventSink(Protocol):
    def emit(self, event: Event) -> None: ...


class ListSink:
    """Keeps events in memory (thread-safe)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def emit(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    def of_type(self, cls: type[Event]) -> list[Event]:
        with self._lock:
            return [e for e in self.events if isinstance(e, cls)]


class FanOut:
    """Sends each event to several sinks; a failing sink does not stop the others."""

    def __init__(self, *sinks: EventSink) -> None:
        self.sinks = [s for s in sinks if s is not None]

    def emit(self, event: Event) -> None:
        for sink in self.sinks:
            try:
                sink.emit(event)
            except Exception:  # a view that breaks must never break a run
                pass


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "item"):
        return o.item()
    return str(o)


class RunLog:
    """Appends events to ``<root>/<run_id>/events.jsonl`` as they arrive (one flushed line each).

    Args:
        root: folder holding run folders (default ``runs``).
        run_id: the run's id (its folder name).
        recipe: recipe name, stored in ``config.json``.
        config: the run config as a dict, stored in ``config.json``.
    """

    def __init__(self, root: str | os.PathLike, run_id: str, *, recipe: str = "", config: Optional[dict] = None):
        from workbench import __version__

        self.path = Path(root) / run_id
        self.path.mkdir(parents=True, exist_ok=True)
        meta = {"run_id": run_id, "recipe": recipe, "config": config or {},
                "workbench_version": __version__, "created": time.time()}
        (self.path / "config.json").write_text(json.dumps(meta, indent=2, default=_json_default))
        self._file = open(self.path / "events.jsonl", "a", buffering=1, encoding="utf-8")
        self._lock = threading.Lock()

    def emit(self, event: Event) -> None:
        line = json.dumps(event.to_dict(), default=_json_default)
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> "RunLog":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def iter_run_log(path: str | os.PathLike) -> Iterator[Event]:
    """Events of a run folder (or an ``events.jsonl`` file), in order. A torn last line is skipped."""
    p = Path(path)
    if p.is_dir():
        p = p / "events.jsonl"
    with open(p, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                yield event_from_dict(json.loads(line))
            except json.JSONDecodeError:
                continue  # a crash can leave half a line


def read_run_log(path: str | os.PathLike) -> tuple[dict, list[Event]]:
    """``(config, events)`` of a run folder written by :class:`RunLog`."""
    p = Path(path)
    config = json.loads((p / "config.json").read_text()) if (p / "config.json").exists() else {}
    return config, list(iter_run_log(p))


def emit_all(sink: EventSink, events: Iterable[Event]) -> None:
    for e in events:
        sink.emit(e)
