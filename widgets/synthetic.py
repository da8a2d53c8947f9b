"""A fabricated, plausible run: events for tests and demos that need no training at all.

:func:`fabricate_run` returns the events a SANCUS-like run on ``num_parts`` ranks would emit
(partition, per-rank epochs, traffic per rank pair and kind, staleness per rank and layer), with
deterministic numbers and times; with ``cache="degree"`` (or another policy) also the feature pulls of a
mini-batch run behind that cache (``feature``/``feature_req``/``cache_fill`` traffic and one
:class:`~workbench.events.CacheStats` per rank and epoch); with ``step_times=True`` where each rank's epoch
went, by phase (one :class:`~workbench.events.StepTimes` per rank and epoch, :func:`fabricate_step_times`).
:class:`SyntheticRun` replays them on a thread with a delay and quacks like :class:`workbench.runtime.RunHandle`
(``run_id``, ``status``, ``events``, ``add_listener``, ``wait``, ``stop``, ``log_dir``, ``dashboard_link``,
``error``), writing a real run log.

Example:
    >>> events = fabricate_run(num_parts=2, epochs=3)
    >>> sorted({e.type for e in events})
    ['epoch', 'partition', 'progress', 'run_finished', 'run_started', 'staleness', 'traffic']
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Callable, Optional

import numpy as np

from workbench.events import (
    CacheStats, EpochEnd, Event, FanOut, PartitionComputed, Progress, RunFinished, RunLog, RunStarted, Staleness,
    StepTimes, Traffic,
)
from workbench.events import STEP_PHASES

__all__ = ["fabricate_run", "fabricate_cache", "fabricate_step_times", "fabricate_pipeline", "SyntheticRun"]


def fabricate_run(*, num_parts: int = 2, epochs: int = 5, num_layers: int = 2, num_nodes: int = 400,
                  run_id: str = "synthetic", recipe: str = "sancus", seed: int = 0, start_time: float = 1.7e9,
                  epoch_s: float = 0.5, fail_at: Optional[int] = None, byte_scale: float = 1.0,
                  cache: Optional[str] = None, cache_ratio: float = 0.1, step_times: bool = False) -> list[Event]:
    """Events of a plausible run (deterministic for a seed). ``fail_at`` ends it failed at that epoch;
    ``cache`` (a policy name) adds a feature cache of ``cache_ratio`` (:func:`fabricate_cache`);
    ``step_times`` the seconds of each phase per rank and epoch (:func:`fabricate_step_times`)."""
    rng = np.random.default_rng(seed)
    t = start_time
    hidden = 16
    cfg = {"graph": f"sbm:num_nodes={num_nodes},seed={seed}", "num_parts": num_parts, "epochs": epochs,
           "num_layers": num_layers, "hidden": hidden, "model": "gcn", "seed": seed}
    ev: list[Event] = [RunStarted(run_id=run_id, time=t, recipe=recipe, runner="local", world_size=num_parts,
                                  config=cfg)]
    for done in range(0, 5):
        t += 0.02
        ev.append(Progress(run_id=run_id, time=t, stage="partition", done=done, total=4, message="metis"))
    sizes = np.full(num_parts, num_nodes // num_parts)
    sizes[: num_nodes % num_parts] += 1
    comm = rng.integers(5, 60, size=(num_parts, num_parts)) * (1 + np.arange(num_parts))[:, None]
    np.fill_diagonal(comm, 0)
    halos = comm.sum(axis=0)
    cut = int(comm.sum())
    metrics = {"num_nodes": num_nodes, "num_edges": num_nodes * 8, "num_parts": num_parts, "edge_cut": cut,
               "cut_ratio": round(cut / (num_nodes * 4), 4), "replication_factor": round(1 + halos.sum() / num_nodes, 4),
               "vertex_balance": round(float(sizes.max() / sizes.mean()), 4), "edge_balance": 1.05,
               "comm_volume_rows": int(comm.sum()), "max_part_comm_volume_rows": int(comm.sum(axis=1).max()),
               "num_messages": int((comm > 0).sum())}
    t += 0.05
    ev.append(PartitionComputed(run_id=run_id, time=t, method="metis", num_parts=num_parts, metrics=metrics,
                                part_sizes=sizes.tolist(), halo_sizes=halos.tolist(), comm_rows=comm.tolist()))
    last_sent = np.zeros((num_parts, num_layers), dtype=int)
    for epoch in range(epochs):
        if fail_at is not None and epoch == fail_at:
            ev.append(RunFinished(run_id=run_id, time=t + 0.01, status="failed",
                                  error=f"RankFailed: rank 1 failed at epoch {epoch}: synthetic failure"))
            return ev
        t += epoch_s
        ev.append(Progress(run_id=run_id, time=t, stage="epochs", done=epoch + 1, total=epochs))
        sent = np.zeros(num_parts, dtype=np.int64)   # broadcast bytes each rank sent this epoch
        for layer in range(num_layers):
            for r in range(num_parts):
                # SANCUS: a rank re-broadcasts when its embeddings drifted; otherwise peers reuse the cache
                active = epoch == 0 or (epoch + r + layer) % 3 == 0
                if active:
                    last_sent[r, layer] = epoch
                ages = [0 if j == r else int(epoch - last_sent[j, layer]) for j in range(num_parts)]
                ev.append(Staleness(run_id=run_id, time=t, rank=r, layer=layer, epoch=epoch,
                                    state="ACTIVE" if active else "STALE", ages=ages,
                                    gap=round(float(rng.random()), 4)))
                if not active:
                    continue
                for q in range(num_parts):
                    if q != r:
                        nbytes = int(comm[r, q] * hidden * 4 * byte_scale)
                        sent[r] += nbytes
                        ev.append(Traffic(run_id=run_id, time=t, epoch=epoch, src_rank=r, dst_rank=q,
                                          kind="broadcast", layer=layer, bytes=nbytes, messages=1))
        for r in range(num_parts):
            grad = int(hidden * hidden * 4 * 2 * byte_scale)
            for q in range(num_parts):
                if q != r:
                    ev.append(Traffic(run_id=run_id, time=t, epoch=epoch, src_rank=r, dst_rank=q,
                                      kind="all_reduce", layer=-1, bytes=grad // max(num_parts - 1, 1), messages=1))
            if cache:
                ev.extend(fabricate_cache(run_id, t, r, num_parts, epoch, num_nodes, cache, cache_ratio, rng))
            if step_times:
                ev.append(fabricate_step_times(run_id, t, r, epoch, epoch_s, rng, cached=bool(cache)))
            sent_b = int(sent[r])
            reduce_b = grad // max(num_parts - 1, 1) * (num_parts - 1)   # what its all_reduce records sum to
            loss = 2.0 * math.exp(-0.35 * epoch) + 0.05 * r + 0.02 * float(rng.random())
            acc = min(0.95, 0.3 + 0.6 * (1 - math.exp(-0.4 * epoch)))
            ev.append(EpochEnd(run_id=run_id, time=t + 0.01 * r, rank=r, epoch=epoch, loss=round(loss, 5),
                               train_acc=round(acc + 0.02, 4), val_acc=round(acc, 4), test_acc=round(acc - 0.01, 4),
                               compute_s=round(epoch_s * 0.7, 4), comm_s=round(epoch_s * 0.3, 4), wall_s=epoch_s,
                               bytes_by_kind={"broadcast": sent_b, "all_reduce": reduce_b}, messages=num_parts))
    t += 0.05
    ev.append(RunFinished(run_id=run_id, time=t, status="finished",
                          summary={"losses": [e.loss for e in ev if isinstance(e, EpochEnd) and e.rank == 0]}))
    return ev


#: how the fabricated hit rate grows with the cache ratio, per policy (power-law-like: degree far above random)
_HIT_SHAPE = {"none": lambda r: 0.0, "random": lambda r: r, "degree": lambda r: r ** 0.45,
              "inclusion": lambda r: r ** 0.35, "lru": lambda r: r ** 0.6, "fifo": lambda r: r ** 0.7}


def fabricate_cache(run_id: str, t: float, rank: int, num_parts: int, epoch: int, num_nodes: int, policy: str,
                    ratio: float, rng: np.random.Generator, width: int = 32) -> list[Event]:
    """One rank's cache events of one epoch: feature traffic of its misses and a :class:`CacheStats`."""
    row = width * 4 + 8
    remote = int(num_nodes * 2 * (num_parts - 1) / num_parts) + int(rng.integers(0, 20))
    hit_rate = _HIT_SHAPE.get(policy, lambda r: r)(ratio)
    if policy in ("lru", "fifo"):  # dynamic: warms up over the first epochs
        hit_rate *= 1 - 0.5 ** (epoch + 1)
    hit_rate = min(1.0, max(0.0, hit_rate + 0.02 * (float(rng.random()) - 0.5)))
    hits = int(round(remote * hit_rate))
    misses = remote - hits
    capacity = 0 if policy == "none" else int(ratio * num_nodes * (num_parts - 1) / num_parts)
    fill = 0 if policy in ("none", "lru", "fifo") else capacity * row
    out: list[Event] = []
    peers = [q for q in range(num_parts) if q != rank]
    for q in peers:
        share = misses // max(len(peers), 1)
        out.append(Traffic(run_id=run_id, time=t, epoch=epoch, src_rank=rank, dst_rank=q, kind="feature_req",
                           bytes=share * 8, messages=1))
        out.append(Traffic(run_id=run_id, time=t, epoch=epoch, src_rank=q, dst_rank=rank, kind="feature",
                           bytes=share * width * 4, messages=1))
        if epoch == 0 and fill:
            out.append(Traffic(run_id=run_id, time=t, epoch=0, src_rank=q, dst_rank=rank, kind="cache_fill",
                               bytes=fill // len(peers), messages=1))
    out.append(CacheStats(run_id=run_id, time=t, rank=rank, epoch=epoch, hits=hits, misses=misses,
                          bytes_saved=hits * row, policy=policy, ratio=ratio, refresh_bytes=0, remote_rows=remote,
                          fill_bytes=fill))
    return out


#: the share of an epoch each phase takes in :func:`fabricate_step_times` (a mini-batch run whose remote
#: feature fetches cost about as much as its forward pass; "evaluate" is added every few epochs)
_PHASE_SHARE = {"sample": 0.09, "fetch": 0.22, "forward": 0.27, "exchange": 0.06, "backward": 0.2, "grad_sync": 0.08,
                "optimizer": 0.03, "evaluate": 0.0, "other": 0.05}


def fabricate_step_times(run_id: str, t: float, rank: int, epoch: int, epoch_s: float, rng: np.random.Generator,
                         steps: int = 24, cached: bool = False, eval_every: int = 5) -> StepTimes:
    """One rank's :class:`~workbench.events.StepTimes` of one epoch: about ``epoch_s`` seconds split over the
    phases; higher ranks fetch more (their parts have more remote neighbours), a cache halves the fetches after
    the first epoch, and every ``eval_every``-th epoch evaluates.

    Example:
        >>> ev = fabricate_step_times("r", 0.0, rank=1, epoch=4, epoch_s=0.5, rng=np.random.default_rng(0))
        >>> sorted(ev.seconds) == sorted(STEP_PHASES), round(sum(ev.seconds.values()), 6) == round(ev.wall_s, 6)
        (True, True)
    """
    share = dict(_PHASE_SHARE)
    share["fetch"] *= (1 + 0.35 * rank) * (0.5 if cached and epoch > 0 else 1.0) * (1.6 if epoch == 0 else 1.0)
    if eval_every and epoch % eval_every == eval_every - 1:
        share["evaluate"] = 0.12
    noise = 1 + 0.12 * (rng.random(len(STEP_PHASES)) - 0.5)
    seconds = {p: round(epoch_s * share[p] * float(n), 6) for p, n in zip(STEP_PHASES, noise)}
    return StepTimes(run_id=run_id, time=t, rank=rank, epoch=epoch, steps=steps, program="minibatch",
                     seconds=seconds, wall_s=round(sum(seconds.values()), 6))


class SyntheticRun:
    """Replays fabricated events on a thread, like a live run handle (writes ``<out>/<run_id>/``).

    Args:
        events: what to replay (default: :func:`fabricate_run` with ``kwargs``).
        delay: seconds between epochs (events of one epoch arrive together).
        out: run log folder, or None for no log.
        start: start replaying at once.

    :meth:`pause` holds the replay (now, or before a given epoch) until :meth:`resume`: a tutorial or a
    test can look at a run that is certainly still going.

    Example:
        >>> run = SyntheticRun(fabricate_run(epochs=4), delay=0, out=None, start=False)
        >>> run.pause(at_epoch=2)
        >>> _ = run.start()
        >>> run.wait_paused(timeout=10)
        True
        >>> sorted({ev.epoch for ev in run.events if hasattr(ev, "epoch")})
        [0, 1]
        >>> run.resume()
        >>> _ = run.wait(timeout=10)
        >>> run.status
        'finished'
    """

    def __init__(self, events: Optional[list[Event]] = None, *, delay: float = 0.2, out: Optional[str] = "runs",
                 run_id: Optional[str] = None, start: bool = True, **kwargs: Any):
        run_id = run_id or kwargs.pop("run_id", None) or f"synthetic-{time.strftime('%Y%m%d-%H%M%S')}"
        self._script = events if events is not None else fabricate_run(run_id=run_id, **kwargs)
        self.run_id = run_id
        self.status = "pending"
        self.events: list[Event] = []
        self.error: Optional[str] = None
        self.dashboard_link: Optional[str] = None
        self.summary: dict = {}
        self.delay = delay
        self._listeners: list[Callable[[Event], None]] = []
        self._stop = threading.Event()
        self._done = threading.Event()
        self._running = threading.Event()   # cleared while paused
        self._running.set()
        self._paused = threading.Event()    # set while the replay thread waits in a pause
        self._pause_at: Optional[int] = None
        self._lock = threading.Lock()
        self._log = RunLog(out, run_id, recipe="synthetic") if out else None
        self.log_dir = self._log.path if self._log else None
        self._thread = threading.Thread(target=self._replay, name=f"synthetic-{run_id}", daemon=True)
        if start:
            self.start()

    def start(self) -> "SyntheticRun":
        self._thread.start()
        return self

    def add_listener(self, fn: Callable[[Event], None]) -> None:
        with self._lock:
            self._listeners.append(fn)

    def _emit(self, ev: Event) -> None:
        now = time.time()
        ev = type(ev)(**{**ev.__dict__, "run_id": self.run_id, "time": now})
        with self._lock:
            self.events.append(ev)
            sinks = FanOut(*( [self._log] if self._log else []), *[_Call(fn) for fn in self._listeners])
        sinks.emit(ev)

    def _replay(self) -> None:
        self.status = "running"
        last_epoch = None
        try:
            for ev in self._script:
                epoch = getattr(ev, "epoch", None)
                if epoch is not None and self._pause_at is not None and epoch >= self._pause_at:
                    self._pause_at = None
                    self._running.clear()
                self._hold()
                if self._stop.is_set():
                    self._emit(RunFinished(status="stopped"))
                    self.status = "stopped"
                    return
                if isinstance(ev, (Progress, PartitionComputed)) or (epoch is not None and epoch != last_epoch):
                    if not isinstance(ev, RunStarted):
                        self._stop.wait(self.delay)
                    last_epoch = epoch if epoch is not None else last_epoch
                self._emit(ev)
                if isinstance(ev, RunFinished):
                    self.status, self.error, self.summary = ev.status, ev.error, dict(ev.summary)
            if self.status == "running":
                self.status = "finished"
        finally:
            if self._log:
                self._log.close()
            self._done.set()

    def _hold(self) -> None:
        """Wait while paused (a stop ends the wait)."""
        while not self._running.is_set() and not self._stop.is_set():
            self._paused.set()
            self._running.wait(0.05)
        self._paused.clear()

    def pause(self, at_epoch: Optional[int] = None) -> None:
        """Hold the replay: now, or (``at_epoch``) before the first event of that epoch."""
        if at_epoch is None:
            self._running.clear()
        else:
            self._pause_at = int(at_epoch)

    def resume(self) -> None:
        """Go on after :meth:`pause` (also cancels a pause not reached yet)."""
        self._pause_at = None
        self._running.set()

    def wait_paused(self, timeout: Optional[float] = None) -> bool:
        """Wait until the replay holds in a pause; returns whether it does."""
        return self._paused.wait(timeout)

    def stop(self) -> None:
        self._stop.set()

    def wait(self, timeout: Optional[float] = None) -> dict:
        if not self._done.wait(timeout):
            raise TimeoutError(f"run {self.run_id} still going after {timeout} s")
        if self.status == "failed":
            raise RuntimeError(self.error)
        return self.summary


class _Call:
    def __init__(self, fn: Callable[[Event], None]):
        self.fn = fn

    def emit(self, ev: Event) -> None:
        self.fn(ev)


def fabricate_pipeline(*, num_workers: int = 2, iterations: int = 8, num_layers: int = 2, tau: int = 1,
                       run_id: str = "synthetic", seed: int = 0, batch: int = 4) -> list[Event]:
    """:class:`~workbench.events.PipelineTimeline` events of a plausible prefetch run (the core simulator on
    random costs whose link time is about 1.5 times the compute, so fetches block), ``batch`` iterations per event."""
    from workbench.sim.pipeline_time import IterationCost, PipelineSimulator, timeline_event

    rng = np.random.default_rng(seed)
    sim = PipelineSimulator(num_workers, tau, bandwidth_Bps=1e6)
    steps = []
    for _ in range(iterations):
        costs = []
        for w in range(num_workers):
            fwd = list(rng.uniform(0.5e-3, 1.5e-3, num_layers))
            fetch = list(rng.uniform(1.5e3, 4.5e3, num_layers).round())
            costs.append(IterationCost(fwd_s=fwd, bwd_s=[2 * f for f in fwd], fetch_bytes=fetch,
                                       grad_bytes=[0.0] + fetch[1:], allreduce_bytes=400.0))
        steps.append(sim.step(costs))
    events: list[Event] = []
    for i in range(0, iterations, batch):
        ev = timeline_event(steps[i:i + batch], tau=tau, bandwidth_Bps=1e6, sync_iteration_s=0.02)
        ev.run_id = run_id
        events.append(ev)
    return events
