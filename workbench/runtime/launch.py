"""Start a run and follow it: :func:`launch` returns a :class:`RunHandle` at once.

``launch`` validates its arguments, builds the program from the config, and prepares it on the
client (graph loaded, partitioned, validated: a bad value raises ``ParamError`` here, before any
worker starts). The ranks then run in a background thread on the chosen runner:

=========  ===============================================================================
runner     where the ranks run
=========  ===============================================================================
single     one rank (world size 1) in this process: the reference
local      one thread per rank in this process, over in-memory channels (fast default)
dask       one rank per Dask worker process over ``torch.distributed`` (gloo / NCCL); an
           embedded ``LocalCluster`` unless ``scheduler`` is an address or a ``Client``, or
           ``scheduler_file`` names a Dask scheduler file
=========  ===============================================================================

Every event (from ``prepare`` on the client and from every rank) goes, in arrival order, to the
handle's event list, the run log on disk and the listeners. The run log layout::

    <out>/<run_id>/
        config.json     # {"run_id", "recipe", "config": {...}, "workbench_version", "created"}
        events.jsonl    # run_started, the program's events (partition, epoch, traffic, ...), run_finished

A crashed run keeps every event that arrived before the crash, and ends with
``run_finished`` (``status="failed"``, ``error`` = the typed error with its remote traceback).

Example:
    >>> from recipes.full_graph import recipe                                  # doctest: +SKIP
    >>> run = launch(recipe(graph="karate", epochs=3), runner="local", workers=2)  # doctest: +SKIP
    >>> run                                                                    # doctest: +SKIP
    RunHandle(run_id='full_graph-20261122-101500-3fa2', runner='local', world_size=2, status='running')
    >>> len(run.wait()["losses"])                                              # doctest: +SKIP
    3
"""

from __future__ import annotations

import atexit
import html
import secrets
import threading
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Union

from workbench._format import describe
from workbench._validation import ErrorCollector, ParamError, param_error
from workbench.events import Event, RunFinished, RunLog, RunStarted
from workbench.runtime.errors import RunError
from workbench.runtime.measures import run_measures
from workbench.runtime.program import Program
from workbench.runtime.runners import LIVENESS_S, RunEnv, run_inprocess
from workbench.summary import RunSummary

__all__ = ["launch", "RunHandle", "RUNNERS", "DEVICES", "DEFAULT_WORKERS", "world_size_of"]

RUNNERS = ("single", "local", "dask")
DEVICES = ("auto", "cpu", "cuda")
DEFAULT_WORKERS = 2
"""The ranks a run asks for when ``workers`` is left out (a program may fix its own number: ``num_parts``)."""

Listener = Callable[[Event], Any]


class RunHandle:
    """A started run: its status, its events so far, and how to wait for or stop it.

    Attributes:
        run_id: the run's id (also its folder name under ``out``).
        runner: ``single``, ``local`` or ``dask``.
        world_size: number of ranks.
        program: the prepared program.
        status: ``pending``, ``running``, ``finished``, ``failed`` or ``stopped``.
        error: the typed error of a failed run (``None`` otherwise).
        summary: the program's summary once finished (``{}`` before, or when stopped).
        log_dir: the run's folder (``None`` when ``out=None``).
        dashboard_link: the Dask dashboard of the cluster (``None`` for the in-process runners).
        process_group: the Dask runner's ``torch.distributed`` backend and device, e.g. ``"nccl on cuda:0"``
            or ``"gloo on cpu"`` (``None`` for the in-process runners); also in the summary.
    """

    def __init__(self, run_id: str, runner: str, world_size: int, program: Program, log: Optional[RunLog]):
        self.run_id = run_id
        self.runner = runner
        self.world_size = world_size
        self.program = program
        self.status = "pending"
        self.error: Optional[BaseException] = None
        self.summary: Mapping = {}
        self.dashboard_link: Optional[str] = None
        self.process_group: Optional[str] = None
        self.started = time.time()
        self.ended: Optional[float] = None
        self._log = log
        self._events: list[Event] = []
        self._listeners: list[Listener] = []
        self._lock = threading.RLock()
        self._done = threading.Event()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # ------------------------------------------------------------------------------------------------ events
    @property
    def log_dir(self) -> Optional[Path]:
        return self._log.path if self._log is not None else None

    @property
    def events(self) -> list[Event]:
        """A copy of the events received so far, in arrival order."""
        with self._lock:
            return list(self._events)

    def add_listener(self, fn: Listener, *, replay: bool = True) -> None:
        """Call ``fn(event)`` for every event. With ``replay`` (default) the events already received are
        passed first, so a view added late still sees the whole run.

        Listeners run in the thread that delivers the event (a rank thread, the Dask client's IO
        thread, or the run thread): keep them quick (append to a store, let the UI drain it). An
        exception in a listener is swallowed; it never breaks the run.
        """
        with self._lock:
            if replay:
                for ev in self._events:
                    _call(fn, ev)
            self._listeners.append(fn)

    def emit(self, event: Event) -> None:
        """Record one event: stamp the run id, append it, write it to the log, call the listeners."""
        if not event.run_id:
            event.run_id = self.run_id
        with self._lock:
            self._events.append(event)
            if self._log is not None:
                self._log.emit(event)
            for fn in self._listeners:
                _call(fn, event)

    # ------------------------------------------------------------------------------------------------ control
    def stop(self) -> None:
        """Ask the ranks to stop; they agree at their next ``ctx.check_stop()`` and the run ends as ``stopped``."""
        self._stop.set()

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: Optional[float] = None) -> Mapping:
        """Block until the run ends; return its summary (a training run's: a :class:`~workbench.summary.RunSummary`,
        a read-only mapping of the summary's keys, ``to_dict()`` for a plain dict; another program's: a dict).

        Raises:
            RankFailed, WorkerLost, RendezvousTimeout: the run failed (see :mod:`workbench.runtime.errors`).
            TimeoutError: the run is still going after ``timeout`` seconds (it keeps running).
        """
        if not self._done.wait(timeout):
            raise TimeoutError(f"run {self.run_id} is still {self.status} after {timeout:g} s")
        # Let the run thread finish releasing its tensors: a daemon thread still inside torch when the
        # interpreter exits aborts the process ("terminate called without an active exception").
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)
        if self.error is not None:
            raise self.error
        return self.summary

    # ------------------------------------------------------------------------------------------------ lifecycle
    def _set_info(self, name: str, value: Any) -> None:
        if name in ("dashboard_link", "process_group"):
            setattr(self, name, value)

    def _finish(self, status: str, summary: Optional[Mapping] = None, error: Optional[BaseException] = None) -> None:
        self.summary = summary if summary is not None else {}
        self.error = error
        self.ended = time.time()
        text = None
        if error is not None:
            text = error.details() if isinstance(error, RunError) else describe(error)
        self.emit(RunFinished(status=status, error=text, summary=_flat(self.summary)))
        self.status = status
        if self._log is not None:
            self._log.close()
        self._done.set()

    # ------------------------------------------------------------------------------------------------ reprs
    def __repr__(self) -> str:
        return f"RunHandle(run_id={self.run_id!r}, runner={self.runner!r}, world_size={self.world_size}, " \
               f"status={self.status!r})"

    def _repr_html_(self) -> str:
        colour = {"finished": "#2a7", "failed": "#c33", "stopped": "#c80"}.get(self.status, "#36c")
        link = (f" · <a href='{html.escape(self.dashboard_link)}' target='_blank'>Dask dashboard</a>"
                if self.dashboard_link and not self.done() else "")
        where = f" · <code>{html.escape(str(self.log_dir))}</code>" if self.log_dir else ""
        err = f"<br><span style='color:#c33'>{html.escape(str(self.error))}</span>" if self.error else ""
        return (f"<b>run</b> <code>{html.escape(self.run_id)}</code> · {self.runner} × {self.world_size} · "
                f"<b style='color:{colour}'>{self.status}</b> · {len(self._events)} events{where}{link}{err}")


def _call(fn: Listener, event: Event) -> None:
    try:
        fn(event)
    except Exception:  # noqa: BLE001 - a view that breaks must never break a run
        pass


def _new_run_id(name: str) -> str:
    return f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def _workers_ok(workers: Any) -> bool:
    return workers is None or (isinstance(workers, int) and not isinstance(workers, bool) and workers >= 1)


def world_size_of(program: Program, runner: str, workers: Optional[int], *, name: str = "workers",
                  owner: str = "launch") -> int:
    """The run's number of ranks: one on the ``single`` runner, else what ``program`` makes of ``workers``
    (:data:`DEFAULT_WORKERS` when ``None``, left out: :meth:`Program.world_size_for
    <workbench.runtime.program.Program.world_size_for>`, which ``num_parts`` may fix).

    A ``workers`` count given that the run would not use is refused, never silently replaced.

    Raises:
        ParamError: naming ``name`` of ``owner`` and the value: ``workers`` is not an int in [1, inf], or is
            given and is not the run's number of ranks (what decides it: the single runner, or
            :meth:`Program.world_size_reason <workbench.runtime.program.Program.world_size_reason>`, such as
            ``num_parts``).

    Example:
        >>> from workbench.compose import RunConfig
        >>> program = RunConfig.compose(graph="karate", num_parts=3).build()
        >>> world_size_of(program, "local", None), world_size_of(program, "local", 3)
        (3, 3)
        >>> world_size_of(program, "single", None)
        1
        >>> world_size_of(program, "local", 4)
        Traceback (most recent call last):
        ...
        workbench._validation.ParamError: The 'workers' parameter of launch must be 3 or left out (num_parts=3 sets \
the number of ranks). Got 4 instead.
    """
    if not _workers_ok(workers):
        raise ParamError([param_error(name, owner, "an int in [1, inf] or None (left out)", workers)])
    requested = DEFAULT_WORKERS if workers is None else workers
    world_size = 1 if runner == "single" else int(program.world_size_for(requested))
    if workers is None or workers == world_size:
        return world_size
    if runner == "single":
        constraint = "1 or left out (runner='single' runs one rank; runner='local' or 'dask' runs several)"
    else:
        why = program.world_size_reason() or f"the {program.name} program"
        if world_size > 1 and all(int(program.world_size_for(k)) == k for k in range(1, world_size + 1)):
            constraint = f"an int in [1, {world_size}] or left out ({why} bounds the number of ranks)"
        else:
            constraint = f"{world_size} or left out ({why} sets the number of ranks)"
    raise ParamError([param_error(name, owner, constraint, workers)])


def _validate(runner, workers, timeout, device, scheduler, scheduler_file=None, liveness=LIVENESS_S) -> None:
    errs = ErrorCollector("launch")
    errs.check(runner in RUNNERS, "runner", f"one of {list(RUNNERS)}", runner)
    errs.check(_workers_ok(workers), "workers", "an int in [1, inf] or None (left out)", workers)
    for name, value in (("timeout", timeout), ("liveness", liveness)):
        errs.check(isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0, name,
                   "a number in (0, inf]", value)
    errs.check(device in DEVICES, "device", f"one of {list(DEVICES)}", device)
    errs.check(scheduler is None or runner == "dask", "scheduler", "None unless runner='dask'", scheduler)
    shown = str(scheduler_file) if isinstance(scheduler_file, Path) else scheduler_file
    errs.check(scheduler_file is None or runner == "dask", "scheduler_file", "None unless runner='dask'", shown)
    errs.check(scheduler is None or scheduler_file is None, "scheduler_file",
               "None when a scheduler is given (the scheduler is found one way: its address or its file)", shown)
    errs.raise_if_any()
    if scheduler_file is not None:   # missing, unreadable or not a scheduler file: refused before anything starts
        from workbench.runtime.dask_runner import scheduler_file_address

        scheduler_file_address(scheduler_file)


def launch(config: Union[Any, Program], *, runner: str = "local", workers: Optional[int] = None, scheduler: Any = None,
           out: Optional[Union[str, Path]] = "runs", run_id: Optional[str] = None, blocking: bool = False,
           listeners: Iterable[Listener] = (), timeout: float = 120.0, device: str = "auto",
           recipe: Optional[str] = None, network: Any = None,
           scheduler_file: Optional[Union[str, Path]] = None, liveness: float = LIVENESS_S) -> RunHandle:
    """Start a run of ``config`` (a recipe config with ``build()``, or a :class:`Program`).

    Args:
        config: what to run.
        runner: ``single``, ``local`` or ``dask`` (see the module docstring).
        workers: number of ranks; ``None`` (left out): the program's own number (``num_parts``), else
            :data:`DEFAULT_WORKERS` (2); ``single`` always runs one. A count given that the run would not use
            (another ``num_parts``, more than one on ``single``) is refused with ``ParamError``.
        scheduler: Dask only: a scheduler address or a ``distributed.Client`` (default: an embedded
            ``LocalCluster`` with one worker process per rank, closed after the run). An address that
            does not answer within 10 s (at most ``timeout``) fails the run with ``ParamError``.
        scheduler_file: Dask only, instead of ``scheduler``: a scheduler file (JSON with the scheduler's
            ``address``), as ``dask scheduler --scheduler-file FILE``, ``dask-mpi`` or
            ``dask_jobqueue.SLURMRunner`` write it; the client connects with ``Client(scheduler_file=...)``.
            A file that is missing, unreadable or holds no address is refused with ``ParamError`` here,
            before anything starts (Dask itself would wait for it forever).
        out: folder of run logs (``None``: keep events in memory only).
        run_id: the run's id (default ``<program>-<date>-<time>-<random>``).
        blocking: run in the calling thread and return when the run has ended.
        listeners: called with every event as it arrives (see :meth:`RunHandle.add_listener`).
        timeout: seconds a rank may wait for its peers (rendezvous, receive, collective) before the
            run fails; bounds how long a failure takes to surface.
        liveness: Dask only: seconds a rank's worker may stay silent (no heartbeat of it reaching the scheduler;
            its link or host down) before the run fails with ``WorkerLost``, and the scheduler (not answering
            the client; at least 10 s, at most 30 s or ``timeout``) before it fails with ``SchedulerLost``.
            Never less than three of the workers' heartbeat intervals (Dask's: 0.5 s up to 10 workers, 1 s up
            to 50, 2 s up to 200, then one more second per 200). A rank that is slow (a long step, a sleep)
            keeps its worker heartbeating and is never taken for lost; ``float("inf")`` leaves a silent worker
            to the scheduler's ``worker-ttl`` (5 minutes by default). The in-process runners have no peer that
            could vanish alone.
        device: ``auto`` (a GPU where the rank has its own), ``cpu`` or ``cuda`` (a GPU of its own for every rank:
            refused with ``ParamError`` where a rank would not have one, never run on the CPU instead).
        recipe: name stored in the run log (default: the program's name).
        network: a network model (a preset such as ``10GbE``, a spec such as ``117MB/s,85us``, a JSON file
            from ``workbench netprobe``, or a :class:`~workbench.communicate.netmodel.NetworkModel`): the
            summary then holds ``modelled_comm_s`` per epoch beside the measured ``comm_s`` (the transport
            model of :mod:`workbench.communicate.netmodel` on the run's counted traffic) and ``network``.

    Returns:
        The :class:`RunHandle`; ``wait()`` gives the summary or raises the typed error.

    Raises:
        ParamError: a bad argument, or a bad value found while preparing (before any worker starts).
            An unreachable ``scheduler`` address (or the scheduler a ``scheduler_file`` names) is found by
            the run itself: ``wait()`` raises it.
    """
    _validate(runner, workers, timeout, device, scheduler, scheduler_file, liveness)
    if network is not None:
        from workbench.communicate.netmodel import resolve_network

        network = resolve_network(network, name="network", owner="launch")   # ParamError before anything starts
    program = config if isinstance(config, Program) else config.build()
    cfg = getattr(program, "config", None)
    cfg_dict = program.config_dict() if hasattr(program, "config_dict") else \
        cfg.to_dict() if hasattr(cfg, "to_dict") else {}
    world_size = world_size_of(program, runner, workers)   # a workers count the run would not use: ParamError
    if runner != "dask":   # thread ranks never share a GPU (ParamError here, before anything starts)
        from workbench.runtime.runners import inprocess_devices

        inprocess_devices(device, world_size)
    elif scheduler is None and scheduler_file is None:   # the embedded cluster's workers see this machine's GPUs
        from workbench.runtime.runners import check_embedded_device

        check_embedded_device(device, world_size)
    run_id = run_id or _new_run_id(program.name)
    recipe = recipe or program.name
    log = RunLog(out, run_id, recipe=recipe, config=cfg_dict) if out is not None else None
    handle = RunHandle(run_id, runner, world_size, program, log)
    for fn in listeners:
        handle.add_listener(fn)
    handle.emit(RunStarted(recipe=recipe, runner=runner, world_size=world_size, config=cfg_dict))
    try:
        payloads = list(program.prepare(world_size, handle.emit))
        if len(payloads) != world_size:
            raise RuntimeError(f"{type(program).__name__}.prepare returned {len(payloads)} payloads for "
                               f"{world_size} ranks")
    except BaseException as exc:
        handle._finish("failed", error=exc)
        raise
    env = RunEnv(run_id=run_id, world_size=world_size, emit=program.client_emit(handle.emit),
                 stop_flag=handle._stop, timeout_s=float(timeout), liveness_s=float(liveness), device=device,
                 set_info=handle._set_info)
    if blocking:
        _run(handle, program, payloads, env, runner, scheduler, network, scheduler_file)
    else:
        handle._thread = threading.Thread(target=_run, args=(handle, program, payloads, env, runner, scheduler,
                                                             network, scheduler_file),
                                          name=f"workbench-run-{run_id}", daemon=True)
        handle._thread.start()
        _LIVE_RUNS.add(handle)
    return handle


def modelled_comm(events: Iterable[Event], network: Any, world_size: int, num_epochs: int) -> dict:
    """``{"modelled_comm_s": [seconds per epoch], "network": {...}}``: the transport model
    (:func:`~workbench.communicate.netmodel.transport_seconds`) of the run's counted traffic, every kind,
    beside the measured ``comm_s`` (which also holds the waits for slower ranks the model leaves out)."""
    from workbench.communicate.netmodel import resolve_network, transport_seconds

    net = resolve_network(network)
    per_epoch = transport_seconds([e for e in events if e.type == "traffic"], net, world_size=world_size)
    return {"modelled_comm_s": [float(per_epoch.get(e, 0.0)) for e in range(num_epochs)],
            "network": {**net.to_dict(), "spec": net.spec}}


# Runs still going when the interpreter exits are stopped and waited for (bounded): their ranks are
# daemon threads, and one still inside torch at exit aborts the process.
_LIVE_RUNS: "weakref.WeakSet[RunHandle]" = weakref.WeakSet()


@atexit.register
def _stop_live_runs(timeout_s: float = 30.0) -> None:
    handles = [h for h in list(_LIVE_RUNS) if not h.done()]
    for handle in handles:
        handle.stop()
    deadline = time.monotonic() + timeout_s
    for handle in handles:
        if handle._thread is not None:
            handle._thread.join(timeout=max(0.0, deadline - time.monotonic()))


def _add_fragment(summary: Mapping, name: str, values: dict) -> Mapping:
    """``summary`` with the run's ``values`` added: a :class:`~workbench.summary.RunSummary` gets them as fragment
    ``name`` (a key it has already is an error), another program's summary (a dict) as keys."""
    if isinstance(summary, RunSummary):
        return summary.with_fragments({name: values})
    return {**summary, **values}


def _flat(summary: Mapping) -> dict:
    """The summary as the run log keeps it: a plain JSON-safe dict."""
    return summary.to_dict() if isinstance(summary, RunSummary) else dict(summary)


def _run(handle: RunHandle, program: Program, payloads: list, env: RunEnv, runner: str, scheduler: Any,
         network: Any = None, scheduler_file: Any = None) -> None:
    handle.status = "running"
    t0 = time.perf_counter()
    try:
        if runner == "dask":
            from workbench.runtime.dask_runner import run_dask

            outcomes = run_dask(program, payloads, env, scheduler=scheduler, scheduler_file=scheduler_file)
        else:
            outcomes = run_inprocess(program, payloads, env)
        if any(o.status == "stopped" for o in outcomes):
            handle._finish("stopped", {"run_id": env.run_id, "stopped": True, "wall_s": time.perf_counter() - t0})
            return
        summary = program.summarize([o.result or {} for o in sorted(outcomes, key=lambda o: o.rank)])
        run = {"run_id": env.run_id, "runner": runner, "world_size": env.world_size, "wall_s": time.perf_counter() - t0}
        if handle.process_group is not None:
            run["process_group"] = handle.process_group
        if getattr(program, "notes", None):
            run["notes"] = list(program.notes)
        summary = _add_fragment(summary, "run", {k: v for k, v in run.items() if k not in summary})
        if network is not None and "comm_s" in summary:
            summary = _add_fragment(summary, "network", modelled_comm(handle.events, network, env.world_size,
                                                                      len(summary["comm_s"])))
        target = getattr(getattr(program.config, "train", None), "target_accuracy", None)
        handle._finish("finished", _add_fragment(summary, "measures", run_measures(summary, target)))
    except BaseException as exc:  # noqa: BLE001 - surfaced by wait()
        handle._finish("failed", error=exc)
