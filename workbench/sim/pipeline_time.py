"""A discrete-event account of pipelined full-graph iterations (PSC-GCN, Sec. III): simulated time per
iteration for synchronous (tau = 0), PipeGCN-like (tau = 1) and PSC (tau >= 1, sampled) runs.

Model (one serial link per worker, nothing else shared):

* every iteration, forward layer ``l`` first *issues* the fetch of the boundary rows the draw ``t + tau``
  needs (``fetch_bytes[l]``, on the worker's link), then computes; it may start computing only when the
  fetch issued ``tau`` iterations earlier for the same layer has finished (tau = 0: the one just issued,
  i.e. synchronous). Before ``t = tau`` there is nothing to wait for (warm-up: zeros);
* backward layer ``l >= 1`` computes, issues the send of its boundary gradients (``grad_bytes[l]``) and
  waits for the gradients sent ``tau`` iterations earlier;
* the weight-gradient all-reduce (``allreduce_bytes``) goes through the link last and synchronises the
  workers: the next iteration starts when the slowest worker's all-reduce is done.

A transfer issued at time ``x`` starts at ``max(x, link_free)`` and takes ``latency_s + bytes / bandwidth``
(FIFO on the link). With one link per worker the steady state tends to ``max(compute, comm)`` for every
tau >= 1: only ratios between configurations are meaningful.

While a run goes: :class:`PipelineSimulator` takes one iteration at a time (every worker's cost) and records
the bars of the timeline (:class:`Interval`: compute, link transfers, the waits and which transfer caused
them); :class:`TimelineRecorder` feeds it on the client from the ranks' ``PipelineCost`` events and logs
``PipelineTimeline`` events (:func:`timeline_event`). :func:`simulate_pipeline` is the same simulator
stepped over a finished run.

Example:
    >>> c = IterationCost(fwd_s=[1.0, 1.0], bwd_s=[2.0, 2.0], fetch_bytes=[30, 30], grad_bytes=[0, 30],
    ...                   allreduce_bytes=0)
    >>> simulate_pipeline([[c] * 4], tau=0, bandwidth_Bps=10.0)     # sync: 3 + 3 + 3 s of waiting per iteration
    [15.0, 15.0, 15.0, 15.0]
    >>> simulate_pipeline([[c] * 4], tau=1, bandwidth_Bps=10.0)[-1]  # comm (9 s) behind compute (6 s)
    9.0
"""

from __future__ import annotations

import dataclasses
import time
from typing import Optional, Sequence

from workbench.events import Event, PipelineCost, PipelineTimeline

__all__ = ["IterationCost", "Interval", "IterationTimeline", "PipelineSimulator", "simulate_pipeline",
           "time_to_accuracy", "scaled_bandwidth", "timeline_event", "TimelineRecorder"]


@dataclasses.dataclass
class IterationCost:
    """What one worker does in one iteration: compute seconds and bytes per layer (input layer first)."""

    fwd_s: list
    """Forward compute seconds of each layer."""
    bwd_s: list
    """Backward compute seconds of each layer."""
    fetch_bytes: list
    """Bytes fetched for each layer's boundary rows (issued this iteration, used tau later)."""
    grad_bytes: list
    """Bytes of boundary gradients sent by each layer's backward (layer 0: none)."""
    allreduce_bytes: float = 0.0
    """Bytes the worker moves in the weight-gradient all-reduce."""


@dataclasses.dataclass
class Interval:
    """One bar of the timeline: a worker computing, its link moving bytes, or a wait (simulated seconds).

    ``kind``: ``fwd`` / ``bwd`` (compute of a layer), ``fetch`` / ``grad`` / ``allreduce`` (a transfer on the
    worker's link: boundary rows for a layer, boundary gradients of a layer, the weight-gradient all-reduce),
    ``wait_fetch`` / ``wait_grad`` (layer ``layer`` could not go on until the fetch or the gradients issued
    at iteration ``issued`` had arrived: the transfers that blocked), ``wait_allreduce`` (compute done, the
    worker waits for the barrier: its link to drain and every worker's all-reduce; not counted as blocked).
    ``nbytes``: bytes of the transfer (for a wait, of the transfer waited for)."""

    worker: int
    kind: str
    layer: int
    start: float
    end: float
    nbytes: float = 0.0
    issued: int = -1
    """Iteration that issued the transfer (link bars and waits; the current one for compute)."""


#: kinds of :class:`Interval` drawn on a worker's compute lane, on its link, and the waits (compute lane)
COMPUTE_KINDS = ("fwd", "bwd")
LINK_KINDS = ("fetch", "grad", "allreduce")
WAIT_KINDS = ("wait_fetch", "wait_grad")     # blocked: counted in ``blocked_s`` (``wait_allreduce`` is not)


@dataclasses.dataclass
class IterationTimeline:
    """The simulated account of one iteration (barrier to barrier) of every worker."""

    iteration: int
    start: float
    """Simulated seconds at which the iteration began (the previous barrier)."""
    seconds: float
    """Barrier to barrier: the slowest worker's all-reduce end minus ``start``."""
    blocked_s: list
    """Per worker: seconds its compute waited for a fetch or gradients issued ``tau`` iterations earlier."""
    compute_s: list
    """Per worker: compute seconds."""
    intervals: list = dataclasses.field(default_factory=list)
    """The :class:`Interval` bars (empty unless the simulator records them)."""


class PipelineSimulator:
    """The discrete-event account, one iteration at a time (as costs become known while a run goes).

    :func:`simulate_pipeline` is this simulator stepped over every iteration; here each :meth:`step` takes
    one :class:`IterationCost` per worker and returns the :class:`IterationTimeline` of that iteration,
    with its bars when ``intervals`` is True. Transfers issued but not yet consumed (the fetches for
    ``t + 1 .. t + tau``) are carried between steps.

    Example:
        >>> c = IterationCost(fwd_s=[1.0, 1.0], bwd_s=[2.0, 2.0], fetch_bytes=[30, 30], grad_bytes=[0, 30])
        >>> sim = PipelineSimulator(num_workers=1, tau=1, bandwidth_Bps=10.0)
        >>> [sim.step([c]).seconds for _ in range(4)]     # the link (9 s an iteration) falls behind compute (6 s)
        [6.0, 6.0, 8.0, 9.0]
        >>> it = sim.step([c])                               # which fetches blocked iteration 4, for how long
        >>> [(b.kind, b.layer, b.issued, b.end - b.start) for b in it.intervals if b.kind.startswith("wait")]
        [('wait_fetch', 0, 3, 1.0), ('wait_fetch', 1, 3, 2.0)]
    """

    def __init__(self, num_workers: int, tau: int, bandwidth_Bps: float, latency_s: float = 0.0,
                 intervals: bool = True):
        self.num_workers, self.tau = int(num_workers), int(tau)
        self.bandwidth_Bps, self.latency_s = float(bandwidth_Bps), float(latency_s)
        self.intervals = bool(intervals)
        #: the next iteration to simulate, and the simulated time it begins at
        self.iteration, self.time = 0, 0.0
        self._link_free = [0.0] * self.num_workers
        # per worker: (iteration, layer) -> (arrival, bytes) of fetches and of gradients not yet consumed
        self._done_f: list[dict] = [dict() for _ in range(self.num_workers)]
        self._done_b: list[dict] = [dict() for _ in range(self.num_workers)]

    def _send(self, n: int, at: float, nbytes: float, bars: Optional[list], kind: str, layer: int) -> float:
        if nbytes <= 0:
            return at
        s = max(at, self._link_free[n])
        self._link_free[n] = s + self.latency_s + nbytes / self.bandwidth_Bps
        if bars is not None:
            bars.append(Interval(n, kind, layer, s, self._link_free[n], float(nbytes), self.iteration))
        return self._link_free[n]

    def step(self, costs: Sequence[IterationCost]) -> IterationTimeline:
        """Simulate the next iteration given every worker's cost (``costs[worker]``)."""
        if len(costs) != self.num_workers:
            raise ValueError(f"expected {self.num_workers} costs (one per worker), got {len(costs)}")
        t, tau, start = self.iteration, self.tau, self.time
        bars: Optional[list] = [] if self.intervals else None
        ends, blocked, compute, ready = [], [], [], []
        for n in range(self.num_workers):
            c = costs[n]
            clock, waited = start, 0.0
            layers = len(c.fwd_s)
            for layer in range(layers):
                arrival = self._send(n, clock, c.fetch_bytes[layer], bars, "fetch", layer)
                self._done_f[n][(t, layer)] = (arrival, c.fetch_bytes[layer])
                need, nbytes = self._done_f[n].pop((t - tau, layer), (clock, 0)) if t >= tau else (clock, 0)
                waited += max(need - clock, 0.0)
                if bars is not None and need > clock:
                    bars.append(Interval(n, "wait_fetch", layer, clock, need, float(nbytes), t - tau))
                clock = max(clock, need)
                if bars is not None and c.fwd_s[layer] > 0:
                    bars.append(Interval(n, "fwd", layer, clock, clock + c.fwd_s[layer], 0.0, t))
                clock = clock + c.fwd_s[layer]
            for layer in reversed(range(layers)):
                if bars is not None and c.bwd_s[layer] > 0:
                    bars.append(Interval(n, "bwd", layer, clock, clock + c.bwd_s[layer], 0.0, t))
                clock += c.bwd_s[layer]
                if layer > 0:
                    arrival = self._send(n, clock, c.grad_bytes[layer], bars, "grad", layer)
                    self._done_b[n][(t, layer)] = (arrival, c.grad_bytes[layer])
                    need, nbytes = self._done_b[n].pop((t - tau, layer), (clock, 0)) if t >= tau else (clock, 0)
                    waited += max(need - clock, 0.0)
                    if bars is not None and need > clock:
                        bars.append(Interval(n, "wait_grad", layer, clock, need, float(nbytes), t - tau))
                    clock = max(clock, need)
            ready.append(clock)
            ends.append(self._send(n, clock, c.allreduce_bytes, bars, "allreduce", -1))
            blocked.append(waited)
            compute.append(sum(c.fwd_s) + sum(c.bwd_s))
        end = max(ends) if ends else start
        if bars is not None:   # idle until the barrier: the link drains, then the slowest worker's all-reduce
            bars.extend(Interval(n, "wait_allreduce", -1, ready[n], end, float(costs[n].allreduce_bytes), t)
                        for n in range(self.num_workers) if end > ready[n])
        self.iteration, self.time = t + 1, end
        return IterationTimeline(iteration=t, start=start, seconds=end - start, blocked_s=blocked, compute_s=compute,
                                 intervals=bars or [])


def simulate_pipeline(costs: Sequence[Sequence[IterationCost]], tau: int, bandwidth_Bps: float,
                      latency_s: float = 0.0, record: Optional[dict] = None) -> list[float]:
    """Simulated seconds of every iteration (barrier to barrier). ``costs[worker][iteration]``.

    ``record`` (a dict), when given, receives ``blocked_s``: per iteration, the most seconds any worker waited
    for a fetch or gradients issued ``tau`` iterations earlier (the fetches that blocked compute), and
    ``compute_s``: per iteration, the most compute seconds of a worker. (:class:`PipelineSimulator` stepped
    over the iterations.)"""
    num_workers, num_iter = len(costs), len(costs[0]) if costs else 0
    sim = PipelineSimulator(num_workers, tau, bandwidth_Bps, latency_s, intervals=False)
    steps = [sim.step([costs[n][t] for n in range(num_workers)]) for t in range(num_iter)]
    if record is not None:
        record.update(blocked_s=[max(s.blocked_s) for s in steps], compute_s=[max(s.compute_s) for s in steps])
    return [s.seconds for s in steps]


def scaled_bandwidth(exact: Sequence[IterationCost], comm_ratio: float) -> float:
    """Link bandwidth (bytes/s) at which the slowest synchronous exact iteration spends ``comm_ratio`` times
    its compute in communication (``exact``: one cost per worker; 1.0 when there is nothing to move)."""
    comm = max(sum(c.fetch_bytes) + sum(c.grad_bytes) + c.allreduce_bytes for c in exact)
    comp = max(sum(c.fwd_s) + sum(c.bwd_s) for c in exact)
    return comm / (float(comm_ratio) * comp) if comm and comp else 1.0


def _sig(x: float) -> float:
    return float(f"{x:.6g}")


def timeline_event(steps: Sequence[IterationTimeline], *, tau: int, bandwidth_Bps: float,
                   sync_iteration_s: Optional[float] = None) -> PipelineTimeline:
    """The :class:`~workbench.events.PipelineTimeline` of consecutive simulated iterations (bars as columns,
    times relative to their iteration's start).

    Example:
        >>> c = IterationCost(fwd_s=[1.0], bwd_s=[2.0], fetch_bytes=[10], grad_bytes=[0])
        >>> sim = PipelineSimulator(1, tau=0, bandwidth_Bps=10.0)
        >>> ev = timeline_event([sim.step([c]), sim.step([c])], tau=0, bandwidth_Bps=10.0)
        >>> ev.iteration_s, ev.blocked_s, list(zip(ev.kind, ev.start, ev.end))[:3]
        ([4.0, 4.0], [1.0, 1.0], [('fetch', 0.0, 1.0), ('wait_fetch', 0.0, 1.0), ('fwd', 1.0, 2.0)])
    """
    ev = PipelineTimeline(first_iteration=steps[0].iteration if steps else 0,
                          num_workers=len(steps[0].blocked_s) if steps else 0, tau=int(tau),
                          bandwidth_Bps=float(bandwidth_Bps), sync_iteration_s=sync_iteration_s)
    for st in steps:
        ev.iteration_start.append(st.start)
        ev.iteration_s.append(st.seconds)
        ev.blocked_s.append(max(st.blocked_s))
        ev.compute_s.append(max(st.compute_s))
        ev.worker_blocked_s.append(list(st.blocked_s))
        for b in st.intervals:
            ev.iteration.append(st.iteration)
            ev.worker.append(b.worker)
            ev.kind.append(b.kind)
            ev.layer.append(b.layer)
            ev.start.append(_sig(b.start - st.start))
            ev.end.append(_sig(b.end - st.start))
            ev.nbytes.append(int(b.nbytes) if float(b.nbytes).is_integer() else b.nbytes)
            ev.issued.append(b.issued)
    return ev


class TimelineRecorder:
    """Client side of a pipelined run: turns the ranks' :class:`~workbench.events.PipelineCost` events into
    :class:`~workbench.events.PipelineTimeline` events as they arrive (an event sink wrapping ``emit``).

    Other events pass through unchanged. The costs are kept until every worker's cost of the next
    iteration is in; the simulator then steps (the bandwidth is fixed by the first iteration's ``exact``
    costs, as in the post-run figures) and the timeline goes to ``emit`` in batches: every ``batch``
    iterations, when ``flush_s`` seconds passed since the last batch, and at ``last_iteration``. Nothing
    crosses between ranks: each rank's cost reaches the client with its other events. A run stopped
    early loses its last, unflushed batch.

    Example:
        >>> from workbench.events import ListSink, PipelineCost
        >>> sink = ListSink()
        >>> rec = TimelineRecorder(sink.emit, num_workers=2, tau=1, comm_ratio=3.0, last_iteration=1)
        >>> cost = dict(fwd_s=[1.0], bwd_s=[2.0], fetch_bytes=[30], grad_bytes=[0])
        >>> for t in range(2):
        ...     for r in range(2):
        ...         rec(PipelineCost(rank=r, epoch=t, **cost, exact=cost if t == 0 else None))
        >>> [(e.type, e.first_iteration, e.iteration_s) for e in sink.events]   # fetching takes 3 x compute
        [('pipeline_timeline', 0, [3.0, 9.0])]
    """

    def __init__(self, emit, num_workers: int, tau: int, comm_ratio: float, *, last_iteration: Optional[int] = None,
                 batch: int = 10, flush_s: float = 0.5, latency_s: float = 0.0):
        import threading

        self.emit = emit
        self.num_workers, self.tau, self.comm_ratio = int(num_workers), int(tau), float(comm_ratio)
        self.last_iteration, self.batch, self.flush_s, self.latency_s = last_iteration, int(batch), flush_s, latency_s
        self.sim: Optional[PipelineSimulator] = None
        self.sync_iteration_s: Optional[float] = None
        self._costs: dict[int, dict[int, IterationCost]] = {}
        self._exact: dict[int, IterationCost] = {}
        self._pending: list[IterationTimeline] = []
        self._flushed_at = time.monotonic()
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        if not isinstance(event, PipelineCost):
            self.emit(event)
            return
        cost = IterationCost(fwd_s=list(event.fwd_s), bwd_s=list(event.bwd_s), fetch_bytes=list(event.fetch_bytes),
                             grad_bytes=list(event.grad_bytes), allreduce_bytes=event.allreduce_bytes)
        with self._lock:   # ranks report from several threads; batches leave in iteration order
            self._costs.setdefault(int(event.epoch), {})[int(event.rank)] = cost
            if event.exact is not None:
                self._exact[int(event.rank)] = IterationCost(**event.exact)
            if self.sim is None and len(self._exact) == self.num_workers:
                exact = [self._exact[r] for r in range(self.num_workers)]
                bw = scaled_bandwidth(exact, self.comm_ratio)
                self.sync_iteration_s = simulate_pipeline([[c] * 2 for c in exact], 0, bw, self.latency_s)[-1]
                self.sim = PipelineSimulator(self.num_workers, self.tau, bw, self.latency_s)
            sim = self.sim
            while sim is not None and len(self._costs.get(sim.iteration, ())) == self.num_workers:
                costs = self._costs.pop(sim.iteration)
                self._pending.append(sim.step([costs[r] for r in range(self.num_workers)]))
            due = (len(self._pending) >= self.batch or time.monotonic() - self._flushed_at >= self.flush_s
                   or (self._pending and self._pending[-1].iteration == self.last_iteration))
            if self._pending and due:
                self.flush()

    def flush(self) -> None:
        """Emit the simulated iterations not emitted yet (one event)."""
        if not self._pending or self.sim is None:
            return
        steps, self._pending = self._pending, []
        self._flushed_at = time.monotonic()
        self.emit(timeline_event(steps, tau=self.tau, bandwidth_Bps=self.sim.bandwidth_Bps,
                                 sync_iteration_s=self.sync_iteration_s))


def time_to_accuracy(iteration_s: Sequence[float], accuracy: Sequence[Optional[float]],
                     target: float) -> Optional[float]:
    """Simulated seconds until ``accuracy`` first reaches ``target`` (None if never).

    Example:
        >>> time_to_accuracy([1.0, 1.0, 1.0], [0.2, 0.7, 0.9], 0.7)
        2.0
    """
    total = 0.0
    for s, a in zip(iteration_s, accuracy):
        total += s
        if a is not None and a >= target:
            return total
    return None
