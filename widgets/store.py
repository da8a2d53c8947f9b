"""A thread-safe store of one run's events, as tidy pandas frames. UI-agnostic.

A :class:`RunStore` is fed from any of three sources, and the views never know which:

* a live :class:`~workbench.runtime.RunHandle` (``RunStore.from_handle``): the store is added as a
  listener, so the runtime's thread only appends a small dict under a lock (cheap: training is never
  slowed by a view);
* a saved run log ``runs/<run_id>/`` (``RunStore.from_log``), optionally tailed while another process
  writes it (``follow=True``; call :meth:`RunStore.poll`). Logs are read in bulk: the new lines are
  parsed with one ``json.loads`` and the frequent event types (epoch, traffic, staleness) become rows
  straight from their dicts, without building event objects (10^5 events load in about a second);
* a list of events (tests, replays).

Views read :meth:`RunStore.frame` (one data frame per event type, cached per version) and compare
:meth:`RunStore.version` to know whether to re-render, so a refresh costs nothing when nothing arrived.

Example:
    >>> from workbench.events import EpochEnd
    >>> store = RunStore("r1")
    >>> store.push(EpochEnd(run_id="r1", rank=0, epoch=0, loss=1.0, bytes_by_kind={"halo": 8}))
    >>> store.frame("epoch")[["rank", "epoch", "loss", "bytes_sent"]].to_dict("records")
    [{'rank': 0, 'epoch': 0, 'loss': 1.0, 'bytes_sent': 8}]
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Optional

import pandas as pd

from workbench.events import (
    CacheStats, EpochEnd, Event, PartitionComputed, Progress, RunFinished, RunStarted, Staleness, Traffic,
    event_from_dict,
)
from workbench.events import ScheduleStats, ScheduleTrace
from workbench.events import PipelineTimeline
from workbench.events import OVERLAP_PHASES, STEP_PHASES, StepTimes

__all__ = ["RunStore", "list_runs"]

#: columns of each frame, so an empty frame still has them (views never special-case "no data yet")
COLUMNS: dict[str, list[str]] = {
    "epoch": ["rank", "epoch", "loss", "train_acc", "val_acc", "test_acc", "compute_s", "comm_s", "wall_s",
              "bytes_sent", "messages", "time", "elapsed_s", "cum_bytes"],
    # bytes each rank sent per epoch and kind (EpochEnd.bytes_by_kind): exact per epoch, whatever the
    # run log's per-link traffic detail
    "epoch_kind": ["rank", "epoch", "kind", "bytes"],
    # per-link records; ``num_epochs`` > 1: the record sums a window of epochs from ``epoch`` on
    "traffic": ["epoch", "src_rank", "dst_rank", "kind", "layer", "bytes", "messages", "time", "num_epochs"],
    "staleness": ["rank", "layer", "epoch", "state", "active", "ages", "max_age", "mean_age", "gap"],
    "cache": ["rank", "epoch", "hits", "misses", "bytes_saved", "hit_rate", "policy", "ratio", "refresh_bytes",
              "remote_rows", "fill_bytes", "time"],
    "progress": ["stage", "done", "total", "message", "time", "rank"],
    # the schedule stage (ScheduleStats per rank and epoch; ScheduleTrace samples in long form)
    "schedule": ["rank", "epoch", "policy", "ready_queue", "workers", "num_dags", "seeds", "seconds", "seeds_per_s",
                 "trainer_idle_s", "trainer_idle_fraction", "cpu_util_mean", "dag_latency_ms_mean", "time"],
    "schedule_dag": ["rank", "epoch", "policy", "dag", "launch_s", "latency_ms"],
    "schedule_trace": ["rank", "epoch", "policy", "t", "cpu_util", "q_size", "in_flight", "busy_workers"],
    # the simulated timeline of a pipelined run (PipelineTimeline): one row per iteration, and its bars
    # (absolute simulated seconds) of the latest PIPELINE_BAR_ITERATIONS iterations only
    "pipeline": ["iteration", "start_s", "iteration_s", "blocked_s", "compute_s", "sync_iteration_s", "tau",
                 "worker_blocked_s"],
    "pipeline_bar": ["iteration", "worker", "kind", "layer", "start", "end", "seconds", "nbytes", "issued"],
    # where each rank's epoch went (StepTimes): one row per rank and epoch, the seconds of each phase in a
    # column named after it (STEP_PHASES order; a phase a trainer did not report is 0, an unknown one counts
    # as "other")
    # ... and the seconds a background thread spent off the critical path (StepTimes.overlapped: the mini-batch
    # trainer's batches-ahead thread), one column per OVERLAP_PHASES phase named "overlapped_<phase>"
    "step_times": ["rank", "epoch", "steps", "program", "wall_s", "time", *(f"overlapped_{p}" for p in OVERLAP_PHASES),
                   *STEP_PHASES],
}
#: iterations whose timeline bars a store keeps (the view follows the latest few)
PIPELINE_BAR_ITERATIONS = 200

_TERMINAL = ("finished", "failed", "stopped")
_DERIVED = ("elapsed_s", "cum_bytes")   # columns frame() computes


class RunStore:
    """Events of one run, kept as rows per event type; safe to feed from any thread.

    Args:
        run_id: the run's id (taken from the first event when empty).
        events: events to start with.

    Attributes:
        status: ``pending`` until :class:`RunStarted`, then ``running``, then the :class:`RunFinished`
            status (or the handle's status when a run dies before emitting one).
        error: the error text of a failed run.
        config: the run config dict (from ``RunStarted`` or the log's ``config.json``).
        partition: the latest :class:`PartitionComputed` event, or None.
        progress: per stage, the latest :class:`Progress`; a stage reported per rank (``epochs``) shows
            the slowest rank (``done`` = the least over ranks, ``message`` names it).
        handle: the live run handle, when built with :meth:`from_handle`.
    """

    def __init__(self, run_id: str = "", events: Iterable[Event] = ()):
        self.run_id = run_id
        self._lock = threading.RLock()
        self._rows: dict[str, list[dict]] = {k: [] for k in COLUMNS}
        self._versions: Counter = Counter()
        self._frames: dict[str, tuple[int, pd.DataFrame]] = {}
        self._seen: set[int] = set()
        # running tallies of the epoch events (what the status line shows, O(1) per refresh)
        self._last_epoch: dict[int, int] = {}                # rank -> latest epoch it finished
        self._epoch_loss: dict[int, list[float]] = {}        # epoch -> [sum of losses, ranks with a loss]
        self._bytes_sent = 0
        self.status = "pending"
        self.error: Optional[str] = None
        self.recipe = ""
        self.runner = ""
        self.world_size = 0
        self.config: dict = {}
        self.dashboard_link: Optional[str] = None
        self.summary: dict = {}
        self.partition: Optional[PartitionComputed] = None
        self.progress: dict[str, Progress] = {}
        self._progress_ranks: dict[str, dict[int, Progress]] = {}
        self.started: Optional[float] = None
        self.finished: Optional[float] = None
        self.num_events = 0
        self.handle: Any = None
        self._log_path: Optional[Path] = None
        self._log_pos = 0
        self.extend(events)

    # -- construction -------------------------------------------------------------------------------------
    @classmethod
    def from_handle(cls, handle: Any) -> "RunStore":
        """A store following a live run handle (events so far, then every new one as it is emitted)."""
        store = cls(getattr(handle, "run_id", ""))
        store.handle = handle
        with store._lock:  # listener first, then the backlog; duplicates are dropped by identity
            handle.add_listener(store._push_live)
            for ev in list(getattr(handle, "events", []) or []):
                store._push_live(ev)
        store.sync()
        return store

    @classmethod
    def from_log(cls, path: str | os.PathLike, follow: bool = False) -> "RunStore":
        """A store of a saved run folder ``runs/<run_id>/`` (or its ``events.jsonl``).

        With ``follow=True`` the file is tailed: :meth:`poll` reads what was appended since.

        Raises:
            FileNotFoundError: no run log at ``path``.
        """
        p = Path(path)
        folder = p if p.is_dir() else p.parent
        log = folder / "events.jsonl"
        if not log.exists():
            raise FileNotFoundError(f"no run log at {log}")
        store = cls(folder.name)
        meta = folder / "config.json"
        if meta.exists():
            try:
                info = json.loads(meta.read_text())
                store.config = dict(info.get("config") or {})
                store.recipe = info.get("recipe", "") or ""
            except (OSError, ValueError):
                pass
        store._log_path = log
        store.poll()
        if not follow:
            store._log_path = None
        return store

    # -- feeding ------------------------------------------------------------------------------------------
    def __call__(self, event: Event) -> None:
        self.push(event)

    def emit(self, event: Event) -> None:
        """Sink protocol (``FanOut(RunLog(...), store)``)."""
        self.push(event)

    def _push_live(self, event: Event) -> None:
        with self._lock:
            key = id(event)
            if key in self._seen:
                return
            self._seen.add(key)
            self.push(event)

    def extend(self, events: Iterable[Event]) -> None:
        with self._lock:
            for ev in events:
                self.push(ev)

    def push(self, event: Event | dict) -> None:
        """Add one event (an :class:`Event` or its dict form). Never raises on odd events."""
        if isinstance(event, dict):
            event = event_from_dict(event)
        with self._lock:
            try:
                self._add(event)
            except Exception:  # a malformed event must not break the stream
                return
            self.num_events += 1
            self._versions["any"] += 1

    def _add(self, ev: Event) -> None:
        if not self.run_id and ev.run_id:
            self.run_id = ev.run_id
        if isinstance(ev, RunStarted):
            self.status = "running" if self.status == "pending" else self.status
            self.recipe, self.runner, self.world_size = ev.recipe, ev.runner, int(ev.world_size or 0)
            self.config = dict(ev.config or self.config)
            self.dashboard_link = ev.dashboard_link or self.dashboard_link
            self.started = ev.time
            self._versions["run"] += 1
        elif isinstance(ev, RunFinished):
            self.status, self.error, self.summary = ev.status, ev.error, dict(ev.summary or {})
            self.finished = ev.time
            self._versions["run"] += 1
        elif isinstance(ev, PartitionComputed):
            self.partition = ev
            self._versions["partition"] += 1
        elif isinstance(ev, Progress):
            self._add_progress(ev)
        elif isinstance(ev, EpochEnd):
            self._add_epoch(vars(ev))
        elif isinstance(ev, Traffic):
            self._add_traffic(vars(ev))
        elif isinstance(ev, Staleness):
            self._add_staleness(vars(ev))
        elif isinstance(ev, CacheStats):
            total = ev.hits + ev.misses
            self._rows["cache"].append({"rank": ev.rank, "epoch": ev.epoch, "hits": ev.hits, "misses": ev.misses,
                                        "bytes_saved": ev.bytes_saved,
                                        "hit_rate": ev.hits / total if total else float("nan"),
                                        "policy": ev.policy or "", "ratio": _num(ev.ratio),
                                        "refresh_bytes": int(ev.refresh_bytes or 0),
                                        "remote_rows": int(ev.remote_rows or total),  # old logs: hits + misses
                                        "fill_bytes": int(ev.fill_bytes or 0), "time": ev.time})
            self._versions["cache"] += 1
        elif isinstance(ev, (ScheduleStats, ScheduleTrace)):
            self._add_schedule(ev)
        elif isinstance(ev, PipelineTimeline):
            self._add_pipeline(ev)
        elif isinstance(ev, StepTimes):
            self._add_step_times(vars(ev))
        if self.started is None:
            self.started = ev.time

    def _add_schedule(self, ev: Event) -> None:
        if isinstance(ev, ScheduleStats):
            self._rows["schedule"].append({c: getattr(ev, c) for c in COLUMNS["schedule"]})
            self._rows["schedule_dag"].extend(
                {"rank": ev.rank, "epoch": ev.epoch, "policy": ev.policy, "dag": i, "launch_s": t, "latency_ms": lat}
                for i, (t, lat) in enumerate(zip(ev.launch_s, ev.dag_latency_ms)))
            self._versions["schedule"] += 1
            self._versions["schedule_dag"] += 1
        else:
            self._rows["schedule_trace"].extend(
                {"rank": ev.rank, "epoch": ev.epoch, "policy": ev.policy, "t": t, "cpu_util": c, "q_size": q,
                 "in_flight": f, "busy_workers": b}
                for t, c, q, f, b in zip(ev.t, ev.cpu_util, ev.q_size, ev.in_flight, ev.busy_workers))
            self._versions["schedule_trace"] += 1

    def _add_pipeline(self, ev: PipelineTimeline) -> None:
        first = int(ev.first_iteration)
        starts = ev.iteration_start
        self._rows["pipeline"].extend(
            {"iteration": first + i, "start_s": starts[i], "iteration_s": ev.iteration_s[i],
             "blocked_s": ev.blocked_s[i], "compute_s": ev.compute_s[i], "sync_iteration_s": _num(ev.sync_iteration_s),
             "tau": ev.tau, "worker_blocked_s": ev.worker_blocked_s[i] if i < len(ev.worker_blocked_s) else []}
            for i in range(len(ev.iteration_s)))
        bars = self._rows["pipeline_bar"]
        for it, w, k, layer, a, b, nb, issued in zip(ev.iteration, ev.worker, ev.kind, ev.layer, ev.start, ev.end,
                                                     ev.nbytes, ev.issued):
            t0 = starts[it - first]
            bars.append({"iteration": it, "worker": w, "kind": k, "layer": layer, "start": t0 + a, "end": t0 + b,
                         "seconds": b - a, "nbytes": nb, "issued": issued})
        if bars and bars[-1]["iteration"] - bars[0]["iteration"] >= PIPELINE_BAR_ITERATIONS * 5 // 4:
            keep_from = bars[-1]["iteration"] - PIPELINE_BAR_ITERATIONS + 1   # amortised: cut a quarter at once
            self._rows["pipeline_bar"] = [r for r in bars if r["iteration"] >= keep_from]
        self._versions["pipeline"] += 1
        self._versions["pipeline_bar"] += 1

    def _add_step_times(self, d: dict) -> None:
        row = {"rank": int(d.get("rank", 0)), "epoch": int(d.get("epoch", 0)), "steps": int(d.get("steps") or 0),
               "program": d.get("program") or "", "wall_s": float(d.get("wall_s") or 0.0), "time": d.get("time")}
        row.update(dict.fromkeys(STEP_PHASES, 0.0))
        for phase, sec in (d.get("seconds") or {}).items():
            row[phase if phase in STEP_PHASES else "other"] += float(sec or 0.0)
        for phase in OVERLAP_PHASES:
            row[f"overlapped_{phase}"] = float((d.get("overlapped") or {}).get(phase) or 0.0)
        self._rows["step_times"].append(row)
        self._versions["step_times"] += 1

    def _add_progress(self, ev: Progress) -> None:
        self._rows["progress"].append({"stage": ev.stage, "done": ev.done, "total": ev.total,
                                       "message": ev.message, "time": ev.time, "rank": ev.rank})
        self._versions["progress"] += 1
        if ev.rank is None:
            self.progress[ev.stage] = ev
            return
        ranks = self._progress_ranks.setdefault(ev.stage, {})
        ranks[int(ev.rank)] = ev
        slowest = min(ranks.values(), key=lambda e: (e.done, e.rank))
        message = slowest.message
        if len(ranks) > 1 and any(e.done != slowest.done for e in ranks.values()):
            message = f"slowest rank {slowest.rank}" + (f"; {message}" if message else "")
        self.progress[ev.stage] = Progress(run_id=ev.run_id, time=ev.time, stage=ev.stage, done=slowest.done,
                                           total=max(e.total for e in ranks.values()), message=message)

    # The frequent events become rows straight from their dicts (an event's ``vars`` or a log line):
    # loading a long run log builds no event objects for them.
    def _add_epoch(self, d: dict) -> None:
        rank, epoch = d.get("rank", 0), d.get("epoch", 0)
        by_kind = d.get("bytes_by_kind") or {}
        sent = 0
        kind_rows = self._rows["epoch_kind"]
        for k, b in by_kind.items():
            b = int(b)
            sent += b
            kind_rows.append({"rank": rank, "epoch": epoch, "kind": k, "bytes": b})
        loss = d.get("loss")
        self._last_epoch[rank] = max(self._last_epoch.get(rank, epoch), epoch)
        tally = self._epoch_loss.setdefault(epoch, [0.0, 0])
        if loss is not None and not math.isnan(float(loss)):
            tally[0] += float(loss)
            tally[1] += 1
        self._bytes_sent += sent
        self._rows["epoch"].append({
            "rank": rank, "epoch": epoch, "loss": float("nan") if loss is None else float(loss),
            "train_acc": _num(d.get("train_acc")), "val_acc": _num(d.get("val_acc")),
            "test_acc": _num(d.get("test_acc")), "compute_s": d.get("compute_s", 0.0), "comm_s": d.get("comm_s", 0.0),
            "wall_s": d.get("wall_s", 0.0), "bytes_sent": sent, "messages": d.get("messages", 0), "time": d.get("time")})
        self._versions["epoch"] += 1
        self._versions["epoch_kind"] += 1

    def _add_traffic(self, d: dict) -> None:
        get = d.get
        self._rows["traffic"].append({
            "epoch": int(get("epoch", 0)), "src_rank": int(get("src_rank", 0)), "dst_rank": int(get("dst_rank", 0)),
            "kind": str(get("kind", "")), "layer": int(get("layer", -1)), "bytes": int(get("bytes", 0)),
            "messages": int(get("messages", 0)), "time": get("time"), "num_epochs": int(get("num_epochs") or 1)})
        self._versions["traffic"] += 1

    def _add_staleness(self, d: dict) -> None:
        ages = [int(a) for a in (d.get("ages") or [])]
        state = d.get("state", "ACTIVE")
        self._rows["staleness"].append({
            "rank": d.get("rank", 0), "layer": d.get("layer", 0), "epoch": d.get("epoch", 0), "state": state,
            "active": 1 if str(state).upper() == "ACTIVE" else 0, "ages": ages,
            "max_age": max(ages) if ages else 0, "mean_age": (sum(ages) / len(ages)) if ages else 0.0,
            "gap": d.get("gap")})
        self._versions["staleness"] += 1

    def _push_dicts(self, dicts: list) -> None:
        """Add the events of a run log (their dict forms) in bulk; odd lines are skipped."""
        fast = {"epoch": self._add_epoch, "staleness": self._add_staleness, "traffic": self._add_traffic,
                "step_times": self._add_step_times}
        with self._lock:
            for d in dicts:
                if not isinstance(d, dict):
                    continue
                kind = d.get("type")
                try:
                    if kind in fast:
                        fast[kind](d)
                    else:
                        self._add(event_from_dict(d))
                except Exception:  # a malformed event must not break the stream
                    continue
                if not self.run_id and d.get("run_id"):
                    self.run_id = d["run_id"]
                if self.started is None and d.get("time") is not None:
                    self.started = d["time"]
                self.num_events += 1
                self._versions["any"] += 1

    # -- polling sources ----------------------------------------------------------------------------------
    def sync(self) -> None:
        """Pick up the handle's status, error and dashboard link (a run may die before its RunFinished)."""
        h = self.handle
        if h is None:
            return
        status = getattr(h, "status", None)
        with self._lock:
            if status and status != self.status and (status in _TERMINAL or self.status == "pending"):
                if not (self.status in _TERMINAL and status not in _TERMINAL):
                    self.status = status
                    self._versions["run"] += 1
                    self._versions["any"] += 1
            err = getattr(h, "error", None)
            if err and not self.error:
                self.error = str(err)
                self._versions["run"] += 1
                self._versions["any"] += 1
            link = getattr(h, "dashboard_link", None)
            if link and link != self.dashboard_link:
                self.dashboard_link = link
                self._versions["run"] += 1

    def poll(self) -> int:
        """Read what was appended to a followed log and sync the handle. Returns the number of new events."""
        before = self.num_events
        self.sync()
        path = self._log_path
        if path is not None and path.exists():
            with open(path, "rb") as f:
                f.seek(self._log_pos)
                chunk = f.read()
            end = chunk.rfind(b"\n") + 1  # only whole lines: a writer may be half-way through one
            self._log_pos += end
            if end:
                with _no_gc():   # 10^5 new dicts would trigger many full collections, for no garbage
                    self._push_dicts(_parse_lines(chunk[:end]))
        return self.num_events - before

    # -- reading ------------------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.status in _TERMINAL

    def version(self, *kinds: str) -> tuple:
        """A value that changes whenever events of ``kinds`` (default: any) arrive."""
        with self._lock:
            return tuple(self._versions[k] for k in (kinds or ("any",)))

    def frame(self, kind: str) -> pd.DataFrame:
        """A copy-safe data frame of one event type: ``epoch``, ``epoch_kind``, ``traffic``, ``staleness``,
        ``cache``, ``progress``, ``step_times``, ... (columns in :data:`COLUMNS`). ``epoch`` adds ``elapsed_s``
        (since the run started) and ``cum_bytes`` (bytes sent by this rank so far)."""
        if kind not in COLUMNS:
            raise KeyError(f"unknown frame {kind!r}; choose one of {sorted(COLUMNS)}")
        with self._lock:
            ver = self._versions[kind]
            cached = self._frames.get(kind)
            if cached is not None and cached[0] == ver:
                return cached[1]
            rows = list(self._rows[kind])
            started = self.started
        if rows:  # column by column: several times faster than a frame from a list of dicts
            df = pd.DataFrame({c: [r.get(c) for r in rows] for c in COLUMNS[kind] if c not in _DERIVED})
        else:
            df = pd.DataFrame(columns=COLUMNS[kind])
        if kind == "epoch" and len(df):
            df = df.sort_values(["rank", "epoch"], kind="stable").reset_index(drop=True)
            df["elapsed_s"] = df["time"].astype(float) - (started if started is not None else 0.0)
            df["cum_bytes"] = df.groupby("rank")["bytes_sent"].cumsum()
        df = df.reindex(columns=COLUMNS[kind])
        with self._lock:
            self._frames[kind] = (ver, df)
        return df

    def epoch_totals(self) -> pd.DataFrame:
        """One row per epoch: mean loss and accuracies over ranks, max wall time, bytes sent by all ranks,
        and their running total (``cum_bytes``), ``elapsed_s`` of the last rank to finish the epoch."""
        df = self.frame("epoch")
        cols = ["epoch", "loss", "train_acc", "val_acc", "test_acc", "wall_s", "comm_s", "bytes_sent",
                "elapsed_s", "cum_bytes"]
        if df.empty:
            return pd.DataFrame(columns=cols)
        g = df.groupby("epoch")
        out = pd.DataFrame({
            "loss": g["loss"].mean(), "train_acc": g["train_acc"].mean(), "val_acc": g["val_acc"].mean(),
            "test_acc": g["test_acc"].mean(), "wall_s": g["wall_s"].max(), "comm_s": g["comm_s"].max(),
            "bytes_sent": g["bytes_sent"].sum(), "elapsed_s": g["elapsed_s"].max()}).reset_index()
        out["cum_bytes"] = out["bytes_sent"].cumsum()
        return out[cols]

    def traffic_events(self, epoch: Optional[int] = None) -> list[Traffic]:
        """The run's :class:`Traffic` events (optionally of one epoch), e.g. for a network model."""
        with self._lock:
            rows = list(self._rows["traffic"])
        keys = ("epoch", "src_rank", "dst_rank", "kind", "layer", "bytes", "messages", "time", "num_epochs")
        return [Traffic(run_id=self.run_id, **{k: r[k] for k in keys if k in r})
                for r in rows if epoch is None or r.get("epoch") == epoch]

    @property
    def epochs_done(self) -> int:
        """Epochs that every rank has finished so far."""
        df = self.frame("epoch")
        if df.empty:
            return 0
        per_rank = df.groupby("rank")["epoch"].max()
        return int(per_rank.min()) + 1

    def live_counts(self) -> dict[str, Any]:
        """What a status line shows, from running tallies (no frame is built): ``epochs_done`` (as
        :attr:`epochs_done`), ``final_loss`` and ``total_mb_sent`` (as :meth:`headline`).

        Example:
            >>> from widgets.synthetic import fabricate_run
            >>> s = RunStore(events=fabricate_run(epochs=3))
            >>> c, h = s.live_counts(), s.headline()
            >>> c["epochs_done"] == s.epochs_done and c["final_loss"] == h["final_loss"]
            True
        """
        with self._lock:
            done = min(self._last_epoch.values()) + 1 if self._last_epoch else 0
            last = self._epoch_loss[max(self._epoch_loss)] if self._epoch_loss else None
            sent = self._bytes_sent
        return {"epochs_done": done, "final_loss": _round(last[0] / last[1]) if last and last[1] else None,
                "total_mb_sent": round(sent / 1e6, 3)}

    def headline(self) -> dict[str, Any]:
        """A few JSON-safe figures for run lists and comparisons (final loss, best accuracy, bytes)."""
        tot = self.epoch_totals()
        last = tot.iloc[-1] if len(tot) else None
        return {
            "run_id": self.run_id, "recipe": self.recipe, "status": self.status,
            "world_size": self.world_size, "epochs": int(len(tot)),
            "final_loss": _round(last["loss"]) if last is not None else None,
            "best_val_acc": _round(tot["val_acc"].max()) if len(tot) else None,
            "total_mb_sent": round(float(tot["bytes_sent"].sum()) / 1e6, 3) if len(tot) else 0.0,
            "error": self.error,
        }

    def __repr__(self) -> str:
        return (f"RunStore(run_id={self.run_id!r}, status={self.status!r}, events={self.num_events}, "
                f"epochs_done={self.epochs_done})")


@contextlib.contextmanager
def _no_gc():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _parse_lines(chunk: bytes) -> list:
    """The JSON values of the non-blank lines of ``chunk``: one ``json.loads`` of them all as an array,
    or line by line (skipping bad lines) when that fails."""
    lines = [line for line in chunk.split(b"\n") if line.strip()]
    try:
        return json.loads(b"[" + b",".join(lines) + b"]")
    except ValueError:
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out


def _num(v: Any) -> float:
    return float("nan") if v is None else float(v)


def _round(v: Any, nd: int = 4) -> Optional[float]:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else round(f, nd)


def list_runs(root: str | os.PathLike = "runs") -> list[dict[str, Any]]:
    """Run folders under ``root`` (newest first): ``run_id``, ``path``, ``recipe``, ``created``."""
    root = Path(root)
    out = []
    if not root.is_dir():
        return out
    for d in root.iterdir():
        if not (d / "events.jsonl").exists():
            continue
        meta: dict = {}
        try:
            meta = json.loads((d / "config.json").read_text())
        except (OSError, ValueError):
            pass
        out.append({"run_id": d.name, "path": str(d), "recipe": meta.get("recipe", ""),
                    "created": float(meta.get("created") or (d / "events.jsonl").stat().st_mtime)})
    out.sort(key=lambda r: r["created"], reverse=True)
    return out
