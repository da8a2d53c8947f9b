"""What a rank records of its epochs (:class:`EpochRecorder`: ``EpochEnd``, ``StepTimes``, ``Traffic``,
``Progress`` events and the rank's result dict) and the run summary made of the ranks' results
(:func:`summarize_ranks`, :func:`time_breakdown`)."""

from __future__ import annotations

import resource
import sys
import time
from collections import defaultdict
from typing import Any, Callable, Optional

from torch import nn

from workbench.communicate.netmodel import critical_calls
from workbench.events import STEP_PHASES, EpochEnd, Progress, StepTimes, Traffic
from workbench.summary import RunSummary
from workbench.train.timing import OVERLAP_PHASES, PhaseTimer, process_cpu_s

__all__ = ["EpochRecorder", "summarize_ranks", "peak_rss_mb", "critical_comm", "time_breakdown", "TRAFFIC_DETAILS",
           "TRAFFIC_DETAIL_EPOCHS", "TRAFFIC_WINDOW_EPOCHS", "PROGRESS_INTERVAL_S"]

#: how finely the run log keeps per-link traffic (``traffic_detail``): ``auto`` or ``epoch``
TRAFFIC_DETAILS = ("auto", "epoch")
#: ``traffic_detail="auto"``: epochs below this are logged per link and epoch ...
TRAFFIC_DETAIL_EPOCHS = 100
#: ... later epochs per link summed over windows of this many epochs (100, 200), 200, 300), ...)
TRAFFIC_WINDOW_EPOCHS = 100
#: least seconds between two epoch ``Progress`` events of a rank (the first and last epochs always report)
PROGRESS_INTERVAL_S = 0.5


class EpochRecorder:
    """Times an epoch, emits ``EpochEnd``, ``StepTimes``, the epoch's ``Traffic`` and ``Progress`` events, keeps the
    rank's results.

    The epoch's time by step phase is kept by :attr:`timer` (a :class:`~workbench.train.timing.PhaseTimer` on the
    rank's comm clock, started and stopped with the epoch: :class:`~workbench.events.StepTimes` ``wall_s`` is
    :class:`~workbench.events.EpochEnd` ``wall_s``); the loop and the stages open its phases.

    Epoch progress (stage ``epochs``, ``done = epoch + 1``) is reported at most every
    :data:`PROGRESS_INTERVAL_S` seconds per rank (always for the first and the last epoch), so fast epochs
    do not flood the run log; ``finish`` reports stage ``evaluation`` with the final accuracies.

    Per-link traffic detail in the run log (``traffic_detail``): ``epoch`` logs one :class:`Traffic`
    event per (epoch, src, dst, kind, layer); ``auto`` (default) does so for the first
    :data:`TRAFFIC_DETAIL_EPOCHS` epochs, then sums each link over windows of :data:`TRAFFIC_WINDOW_EPOCHS`
    epochs (one event per window and link: ``epoch`` = the window's first, ``num_epochs`` = its length),
    so a 2,000-epoch log holds about a twentieth of the traffic lines. Sums over a window equal the
    per-epoch sums exactly, and :class:`EpochEnd` ``bytes_by_kind`` keeps the exact per-epoch totals by
    kind either way. A run stopped or failed mid-window loses that window's per-link detail only.

    Args:
        ctx: the rank's :class:`~workbench.runtime.program.RankContext`.
        exchange_kinds: traffic kinds of the program's exchange (summed per epoch in the result).
        config: the program's config; ``epochs`` (progress total) and ``traffic_detail`` are read from it
            when present.
        epochs: total epochs (progress bars), overriding ``config.epochs``.
        traffic_detail: ``auto`` or ``epoch``, overriding ``config.traffic_detail``.

    Example:
        >>> from workbench.communicate.inprocess import InProcessGroup
        >>> from workbench.events import ListSink
        >>> from workbench.runtime.program import RankContext
        >>> sink = ListSink()
        >>> ctx = RankContext(rank=0, world_size=1, comm=InProcessGroup(1).communicator(0), emit=sink.emit)
        >>> rec = EpochRecorder(ctx, (), epochs=250)
        >>> for epoch in range(250):
        ...     rec.start(epoch)
        ...     ctx.comm.counter.add(epoch, 0, 1, "halo_fwd", 0, 8)   # 8 bytes on link 0 -> 1
        ...     rec.end({"loss": 1.0, "train_acc": None, "val_acc": None, "test_acc": None})
        >>> traffic = sink.of_type(Traffic)
        >>> len(traffic), sum(t.bytes for t in traffic), [(t.epoch, t.num_epochs) for t in traffic[-2:]]
        (102, 2000, [(100, 100), (200, 50)])
    """

    def __init__(self, ctx, exchange_kinds: tuple[str, ...], config: Any = None, *, epochs: Optional[int] = None,
                 traffic_detail: Optional[str] = None, child_processes: bool = False):
        self.ctx = ctx
        self.kinds = exchange_kinds
        self.total = int(epochs if epochs is not None else (getattr(config, "epochs", 0) or 0))
        self.traffic_detail = traffic_detail or getattr(config, "traffic_detail", None) or "auto"
        assert self.traffic_detail in TRAFFIC_DETAILS, self.traffic_detail
        self._window: dict[tuple[int, int, str, int], list[int]] = defaultdict(lambda: [0, 0])
        self._window_start: Optional[int] = None
        self._window_end = 0
        self._last_metrics: dict = {}
        self._progress_at = 0.0
        self.timer = ctx.timer if getattr(ctx, "timer", None) is not None else PhaseTimer(ctx.comm.counter)
        self.child_processes = child_processes
        """Whether the epoch's CPU seconds also read the live child processes' (:func:`process_cpu_s`)."""
        self.result: dict[str, Any] = {"rank": ctx.rank, "losses": [], "train_acc": [], "val_acc": [], "test_acc": [],
                                       "epoch_wall_s": [], "compute_s": [], "comm_s": [], "calls": [],
                                       "bytes_by_kind": defaultdict(int), "exchange_bytes_by_epoch": [],
                                       "exchange_kind_bytes_by_epoch": [], "step_times": [], "overlapped_times": []}

    def start(self, epoch: int) -> None:
        self.epoch = epoch
        self.ctx.comm.set_epoch(epoch)
        self._c0 = self.ctx.comm.counter.comm_seconds
        del self.ctx.comm.counter.calls[:]    # the collective calls of this epoch from here
        self._t0 = self.timer.start()
        self._cpu0 = process_cpu_s(self.child_processes)
        self._train_cpu_s: Optional[float] = None

    def training_done(self) -> None:
        """Mark the end of the epoch's training steps (before ``evaluate``): the CPU seconds since :meth:`start`
        become the epoch's :class:`~workbench.events.StepTimes` ``train_cpu_s``."""
        self._train_cpu_s = max(process_cpu_s(self.child_processes) - self._cpu0, 0.0)

    def end(self, metrics: dict) -> None:
        ctx, res = self.ctx, self.result
        if self._train_cpu_s is None:   # no training_done(): the whole epoch was training
            self.training_done()
        phases, wall = self.timer.stop()
        overlapped = {k: v for k, v in self.timer.take_overlapped().items() if v}
        comm_s = ctx.comm.counter.comm_seconds - self._c0
        counter = ctx.comm.counter
        by_kind = counter.bytes_by_kind(self.epoch)
        messages = counter.total_messages(self.epoch)
        ctx.log(EpochEnd(rank=ctx.rank, epoch=self.epoch, loss=metrics["loss"], train_acc=metrics["train_acc"],
                         val_acc=metrics["val_acc"], test_acc=metrics["test_acc"],
                         compute_s=max(wall - comm_s, 0.0), comm_s=comm_s, wall_s=wall,
                         bytes_by_kind=by_kind, messages=messages))
        ctx.log(StepTimes(rank=ctx.rank, epoch=self.epoch, steps=self.timer.steps, program=ctx.program,
                          seconds=phases, wall_s=wall, train_cpu_s=self._train_cpu_s, overlapped=overlapped))
        self._log_traffic(counter.drain(ctx.run_id, through_epoch=self.epoch))   # a thread ahead counts the next
        now = time.monotonic()
        if self.epoch == 0 or self.epoch + 1 >= self.total or now - self._progress_at >= PROGRESS_INTERVAL_S:
            self._progress_at = now
            ctx.log(Progress(stage="epochs", rank=ctx.rank, done=self.epoch + 1, total=self.total))
        self._last_metrics = metrics
        res["losses"].append(metrics["loss"])
        for k in ("train_acc", "val_acc", "test_acc"):
            res[k].append(metrics[k])
        res["epoch_wall_s"].append(wall)
        res["compute_s"].append(max(wall - comm_s, 0.0))
        res["comm_s"].append(comm_s)
        res["calls"].append(list(counter.calls))
        del counter.calls[:]
        res["step_times"].append(dict(phases))
        res["overlapped_times"].append(overlapped)
        for k, b in by_kind.items():
            res["bytes_by_kind"][k] += b
        res["exchange_kind_bytes_by_epoch"].append({k: by_kind.get(k, 0) for k in self.kinds})
        res["exchange_bytes_by_epoch"].append(sum(by_kind.get(k, 0) for k in self.kinds))

    def _log_traffic(self, records: list[Traffic]) -> None:
        """Log this epoch's per-link records, or add them to the open window (``traffic_detail``)."""
        epoch = self.epoch
        if self.traffic_detail == "epoch" or epoch < TRAFFIC_DETAIL_EPOCHS:
            for ev in records:
                self.ctx.log(ev)
            return
        start = TRAFFIC_DETAIL_EPOCHS + (epoch - TRAFFIC_DETAIL_EPOCHS) // TRAFFIC_WINDOW_EPOCHS * TRAFFIC_WINDOW_EPOCHS
        if self._window_start is not None and self._window_start != start:
            self._flush_window()
        self._window_start = start
        self._window_end = epoch + 1
        for ev in records:
            rec = self._window[(ev.src_rank, ev.dst_rank, ev.kind, ev.layer)]
            rec[0] += ev.bytes
            rec[1] += ev.messages
        if self._window_end - start == TRAFFIC_WINDOW_EPOCHS or self._window_end == self.total:
            self._flush_window()

    def _flush_window(self) -> None:
        start, n = self._window_start, self._window_end - (self._window_start or 0)
        for (src, dst, kind, layer), (nbytes, messages) in sorted(self._window.items()):
            self.ctx.log(Traffic(epoch=start, num_epochs=n, src_rank=src, dst_rank=dst, kind=kind, layer=layer,
                                 bytes=nbytes, messages=messages))
        self._window.clear()
        self._window_start = None

    def finish(self, model: nn.Module) -> dict:
        if self._window_start is not None:
            self._flush_window()
        m = self._last_metrics
        accs = ", ".join(f"{k} {m[f'{k}_acc']:.3f}" for k in ("train", "val", "test") if m.get(f"{k}_acc") is not None)
        self.ctx.log(Progress(stage="evaluation", rank=self.ctx.rank, done=1, total=1, message=accs))
        self.result["bytes_by_kind"] = dict(self.result["bytes_by_kind"])
        self.result["params"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        return self.result


def time_breakdown(results: list[dict]) -> dict:
    """The run summary's ``time_breakdown`` from the ranks' results (their per-epoch ``step_times``).

    Returns:
        ``{"phases": [...], "by_rank": [{phase: [seconds per epoch]} per rank, in rank order],
        "mean_per_epoch": {phase: mean over ranks and epochs}, "overlapped": {...}}`` (the phases of
        :data:`~workbench.events.STEP_PHASES`); ``overlapped`` has the same ``phases``, ``by_rank`` and
        ``mean_per_epoch`` for the seconds a rank's background thread spent off the critical path (the results'
        ``overlapped_times``: :data:`~workbench.train.timing.OVERLAP_PHASES`; zeros without such a thread).

    Example:
        >>> r = [{"rank": 0, "step_times": [{"forward": 1.0}, {"forward": 3.0}]}, {"rank": 1, "step_times": [{}]}]
        >>> tb = time_breakdown(r)
        >>> tb["by_rank"][0]["forward"], tb["mean_per_epoch"]["forward"], tb["mean_per_epoch"]["sample"]
        ([1.0, 3.0], 1.3333333333333333, 0.0)
    """
    results = sorted(results, key=lambda r: r.get("rank", 0))
    by_rank = [{p: [float(epoch.get(p, 0.0)) for epoch in r.get("step_times", [])] for p in STEP_PHASES}
               for r in results]
    over = [{p: [float(epoch.get(p, 0.0)) for epoch in r.get("overlapped_times", [{}] * len(r.get("step_times", [])))]
             for p in OVERLAP_PHASES} for r in results]

    def means(ranks: list[dict], phases) -> dict:
        values = {p: [x for rank in ranks for x in rank[p]] for p in phases}
        return {p: sum(v) / len(v) if v else 0.0 for p, v in values.items()}

    return {"phases": list(STEP_PHASES), "by_rank": by_rank, "mean_per_epoch": means(by_rank, STEP_PHASES),
            "overlapped": {"phases": list(OVERLAP_PHASES), "by_rank": over, "mean_per_epoch": means(over, OVERLAP_PHASES)}}


def critical_comm(calls_by_rank: list[list[tuple[float, float]]]) -> Optional[float]:
    """The communication of an epoch without the waits for slower ranks: the sum over its collective calls of
    the time from the last rank's arrival to the last rank's return (``max end - max start``, each call's
    ``(start, end)`` per rank in wall-clock seconds). Before the last rank arrives the others only wait for it;
    ``comm_s`` (the most any rank spent in calls) holds those waits, which a network model leaves out. ``None``
    when the ranks' calls do not line up (different counts).

    >>> critical_comm([[(0.0, 0.010), (0.02, 0.025)], [(0.008, 0.011), (0.021, 0.026)]])  # 3 ms and 5 ms
    0.008
    >>> critical_comm([[(0.0, 0.01)], [(0.0, 0.01), (0.02, 0.03)]]) is None
    True
    """
    if not calls_by_rank or len({len(c) for c in calls_by_rank}) != 1:
        return None
    return round(sum(critical_calls(calls_by_rank)), 9)


def _checksums(weight) -> list[float]:
    """``[Σ w, Σ w², Σ |w|]`` of one weight tensor, in float64: what :mod:`workbench.testing.compare` compares
    (the signed sum cancels, so it is held to ``Σ |w|``, never to itself)."""
    w = weight.detach().double()
    return [float(w.sum()), float(w.pow(2).sum()), float(w.abs().sum())]


def peak_rss_mb() -> float:
    """Peak resident set size of this process since it started, in MiB. Thread ranks share one process: each
    reports the process's peak.

    On Linux the kernel's high-water mark of this process's own memory (``VmHWM`` in ``/proc/self/status``, which
    starts again at ``exec``), not ``getrusage``'s ``ru_maxrss``: that one carries the parent's peak across fork
    and exec, so a Dask worker started by a client holding a 4.6 GB graph reported 4.6 GB whatever it used itself
    (measured). Elsewhere ``ru_maxrss`` (kilobytes; bytes on macOS).

    Example:
        >>> peak_rss_mb() > 0
        True
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 if sys.platform == "darwin" else 1)
    return round(kib / 1024, 1)


def summarize_ranks(results: list[dict], *, name: str, predicted: Optional[dict] = None,
                    bytes_per_epoch: Optional[Callable[[list[int]], int]] = None) -> RunSummary:
    """The figures every run summary has, from the ranks' results (rank 0 holds the global loss/accuracy): a
    :class:`~workbench.summary.RunSummary` without stages or fragments (the program adds them).

    ``predicted``: the bytes of one exact epoch by kind, with ``total`` (``{}``: none predicted);
    ``bytes_per_epoch``: the ``bytes_per_epoch`` figure from the bytes of every epoch (default: the last epoch's).
    ``time_breakdown`` holds every rank's time per epoch by step phase (:func:`time_breakdown`)."""
    results = sorted(results, key=lambda r: r.get("rank", 0))
    predicted = predicted or {}
    r0 = results[0]
    bytes_by_kind: dict[str, int] = defaultdict(int)
    for r in results:
        for k, b in r["bytes_by_kind"].items():
            bytes_by_kind[k] += int(b)
    num_epochs = len(r0["losses"])
    per_epoch = [int(sum(r["exchange_bytes_by_epoch"][e] for r in results)) for e in range(num_epochs)]
    kinds = r0["exchange_kind_bytes_by_epoch"][-1].keys() if num_epochs else []
    per_epoch_kind = {k: [sum(r["exchange_kind_bytes_by_epoch"][e][k] for r in results) for e in range(num_epochs)]
                      for k in kinds}
    epoch_times = [max(r["epoch_wall_s"][e] for r in results) for e in range(num_epochs)]
    params = r0.get("params", {})
    if bytes_per_epoch is not None:
        epoch_bytes = int(bytes_per_epoch(per_epoch))
    else:
        epoch_bytes = per_epoch[-1] if num_epochs else 0
    return RunSummary(
        program=name,
        world_size=len(results),
        epochs=num_epochs,
        losses=[float(x) for x in r0["losses"]],
        accuracy={k: r0[f"{k}_acc"][-1] if num_epochs else None for k in ("train", "val", "test")},
        accuracy_by_epoch={k: list(r0[f"{k}_acc"]) for k in ("train", "val", "test")},
        bytes_by_kind=dict(bytes_by_kind),
        bytes_per_epoch=epoch_bytes,
        bytes_by_epoch=per_epoch,
        bytes_per_epoch_by_kind={k: int(v[-1]) for k, v in per_epoch_kind.items()} if num_epochs else {},
        predicted_bytes_per_epoch=int(predicted.get("total", 0)),
        predicted_bytes_per_epoch_by_kind={k: int(v) for k, v in predicted.items() if k != "total"},
        epoch_times=epoch_times,
        compute_s=[max(r["compute_s"][e] for r in results) for e in range(num_epochs)],
        comm_s=[max(r["comm_s"][e] for r in results) for e in range(num_epochs)],
        comm_critical_s=[critical_comm([r["calls"][e] for r in results if "calls" in r]) for e in range(num_epochs)],
        comm_calls=[len(r0["calls"][e]) if "calls" in r0 else None for e in range(num_epochs)],
        param_checksums={k: _checksums(v) for k, v in params.items()},
        time_breakdown=time_breakdown(results),
    )
