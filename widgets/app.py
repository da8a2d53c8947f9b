"""The dashboard: one process-wide registry of runs (each with its event store) and per-session views.

* :class:`RunRegistry` holds every run of this process (live handles) and reads earlier ones from the run
  log folder. It is shared by all browser sessions, so two tabs on the same run show the same data;
  closing a tab stops only that tab's views; :meth:`RunRegistry.stop_all` stops the runs (server shutdown).
* :class:`Dashboard` is one session's page: the run form in the sidebar, a run picker, the run's views
  and a comparison tab. ``Dashboard(handle)`` renders inline in a notebook; :meth:`Dashboard.template`
  gives the served page. :func:`dashboard` is the short form.

Example:
    >>> from widgets.synthetic import fabricate_run
    >>> from widgets.store import RunStore
    >>> reg = RunRegistry(runs_dir=None)
    >>> store = reg.add(RunStore(events=fabricate_run(run_id="r1", epochs=2)))
    >>> list(reg.all_stores())
    ['r1']
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any, Optional

import panel as pn

from widgets.compare import CompareView
from widgets.control import RunControl, discover_recipes
from widgets.offline import Viewer
from widgets.store import RunStore, list_runs
from widgets.views import REFRESH_MS, RunView, as_store

__all__ = ["RunRegistry", "Dashboard", "dashboard", "default_launcher", "get_registry"]

_SAVED_SCAN_S = 2.0  # how often the run log folder is listed (s)
_MAX_SAVED = 30      # saved runs offered in the picker (newest first)


def default_launcher(config: Any, *, runner: str = "local", workers: Optional[int] = None,
                     out: str | os.PathLike = "runs", **kw: Any) -> Any:
    """``workbench.runtime.launch(config, runner=..., workers=..., out=..., blocking=False)``."""
    try:
        from workbench.runtime import launch
    except ImportError as exc:
        raise RuntimeError(f"the distributed runtime is not available ({exc})") from exc
    return launch(config, runner=runner, workers=workers, out=str(out), blocking=False, **kw)


class RunRegistry:
    """Runs known to this process: live ones (with their handles) and saved ones under ``runs_dir``.

    Args:
        runs_dir: the run log folder (None: live runs only).
        launcher: ``launcher(config, runner=, workers=, out=) -> handle`` (default :func:`default_launcher`).
    """

    def __init__(self, runs_dir: str | os.PathLike | None = "runs", launcher: Any = None):
        self.runs_dir = Path(runs_dir) if runs_dir else None
        self.launcher = launcher or default_launcher
        self._live: "OrderedDict[str, RunStore]" = OrderedDict()
        self._saved: dict[str, tuple[float, RunStore]] = {}
        self._saved_list: list[dict] = []
        self._scanned = 0.0
        self._lock = threading.RLock()
        self.version = 0
        #: the open dashboards (browser sessions) on this registry
        self.sessions: "weakref.WeakSet[Dashboard]" = weakref.WeakSet()

    def launch(self, config: Any, *, runner: str = "local", workers: Optional[int] = None, **kw: Any) -> Any:
        """Start a run (returns its handle at once) and register it."""
        handle = self.launcher(config, runner=runner, workers=workers, out=str(self.runs_dir or "runs"), **kw)
        self.add(handle)
        return handle

    def add(self, source: Any) -> RunStore:
        """Register a run handle, store, run folder or event list; returns its store."""
        store = as_store(source)
        with self._lock:
            key = store.run_id or f"run-{len(self._live)}"
            if key not in self._live:
                self._live[key] = store
                self._live.move_to_end(key, last=False)
                self.version += 1
        return store

    def _scan_saved(self, force: bool = False) -> None:
        if self.runs_dir is None or (not force and time.time() - self._scanned < _SAVED_SCAN_S):
            return
        self._scanned = time.time()
        runs = list_runs(self.runs_dir)[:_MAX_SAVED]
        with self._lock:
            if [r["run_id"] for r in runs] != [r["run_id"] for r in self._saved_list]:
                self.version += 1
            self._saved_list = runs

    def store(self, run_id: str) -> Optional[RunStore]:
        """The store of a live run, or of a saved run (read from its log, followed while it grows)."""
        with self._lock:
            if run_id in self._live:
                return self._live[run_id]
            cached = self._saved.get(run_id)
        if self.runs_dir is None:
            return None
        if cached is not None:
            return cached[1]
        try:  # followed: a run written by another process keeps growing in the views
            store = RunStore.from_log(self.runs_dir / run_id, follow=True)
        except (OSError, ValueError):
            return None
        with self._lock:
            self._saved[run_id] = (time.time(), store)
        return store

    def run_ids(self) -> list[str]:
        """Live runs (newest first), then saved runs not live."""
        self._scan_saved()
        with self._lock:
            live = list(self._live)
            return live + [r["run_id"] for r in self._saved_list if r["run_id"] not in self._live]

    def all_stores(self) -> dict[str, RunStore]:
        out = {}
        for run_id in self.run_ids():
            s = self.store(run_id)
            if s is not None:
                out[run_id] = s
        return out

    def live_stores(self) -> list[RunStore]:
        with self._lock:
            return list(self._live.values())

    def stop_all(self, timeout: float = 20.0) -> None:
        """Stop every live run and wait (up to ``timeout`` s in all) for them to end."""
        handles = [s.handle for s in self.live_stores() if s.handle is not None and not s.done]
        for h in handles:
            try:
                h.stop()
            except Exception:
                pass
        deadline = time.time() + timeout
        for h in handles:
            try:
                h.wait(timeout=max(0.1, deadline - time.time()))
            except Exception:
                pass


_REGISTRY: Optional[RunRegistry] = None
_REGISTRY_LOCK = threading.Lock()


def get_registry(runs_dir: str | os.PathLike | None = "runs") -> RunRegistry:
    """The process-wide registry (created on first use)."""
    global _REGISTRY
    with _REGISTRY_LOCK:
        if _REGISTRY is None:
            _REGISTRY = RunRegistry(runs_dir)
        return _REGISTRY


class Dashboard(Viewer):
    """One session's page: run form, run picker, the chosen run's views, and a comparison of runs.

    Args:
        source: a run to show first (handle, store, run folder or events); optional.
        registry: the shared registry (default: a new one over ``runs_dir``).
        runs_dir: run log folder, when no registry is given.
        control: show the run form.
    """

    def __init__(self, source: Any = None, *, registry: Optional[RunRegistry] = None,
                 runs_dir: str | os.PathLike | None = "runs", control: bool = True, **params: Any):
        super().__init__(**params)
        self.registry = registry if registry is not None else RunRegistry(runs_dir)
        self.registry.sessions.add(self)
        first = self.registry.add(source).run_id if source is not None else None
        self.run_select = pn.widgets.Select(label="Run", options=[], sizing_mode="stretch_width")
        self.content = pn.Column(sizing_mode="stretch_width")
        self.control = (RunControl(recipes=discover_recipes(), launcher=self.registry.launch,
                                   on_started=self._on_started, on_stop=self._stop_selected,
                                   default_recipe="sancus") if control else None)
        self.compare = CompareView(self.registry.all_stores)
        self.view: Optional[RunView] = None
        self._pending: Optional[str] = first
        self._reg_version = -1
        self._cb = None
        self.run_select.param.watch(lambda e: self._show(e.new), "value")
        self.tick()

    # -- behaviour ----------------------------------------------------------------------------------------
    def _on_started(self, handle: Any) -> None:
        # called on the form's thread; the session's tick applies the selection on the server loop
        self._pending = getattr(handle, "run_id", None)

    def _stop_selected(self) -> None:
        store = self.view.store if self.view is not None else None
        if store is not None and store.handle is not None and not store.done:
            store.handle.stop()
            if self.control is not None:
                self.control.show_info(f"Stopping run {store.run_id}…")
        elif self.control is not None:
            self.control.show_error("The selected run is not running.")

    def _show(self, run_id: Optional[str]) -> None:
        """Show the views of ``run_id``; again when the registry's store of the shown run changed: a run
        started from the form writes its log folder before the registry has its handle, and a page that
        had nothing selected yet took it from the folder listing, as a saved run (its views followed the
        log, and Stop said the run was not running)."""
        if not run_id:
            return
        store = self.registry.store(run_id)
        if self.view is not None and self.view.store.run_id == run_id and store in (None, self.view.store):
            return
        if store is None:
            self.content.objects = [pn.pane.Alert(f"Run {run_id!r} could not be read.", alert_type="warning")]
            return
        self.view = RunView(store, runs_dir=self.registry.runs_dir, live=False, compare_stores=self.registry.all_stores)
        self.content.objects = [self.view.progress, self.view.tabs(("Compare runs", self.compare))]

    def tick(self) -> None:
        """One refresh: new runs in the picker, the chosen run's views, the form's status, the comparison."""
        if self.registry.run_ids() and self.registry.version != self._reg_version:
            self._reg_version = self.registry.version
            self.run_select.options = self.registry.run_ids()
            if self.view is not None:
                self._show(self.run_select.value)  # a saved run shown that is live now: its live store
        if self._pending and self._pending in self.run_select.options:
            pending, self._pending = self._pending, None
            self.run_select.value = pending
        elif self.run_select.value is None and self.run_select.options:
            self.run_select.value = self.run_select.options[0]
        if self.view is not None:
            self.view.refresh()
        if self.view is None or self.view._tabs is None or self.view.active_view() is self.compare:
            self.compare.refresh()
        c = self.control
        if c is not None and c.last_handle is not None:
            store = self.registry.store(getattr(c.last_handle, "run_id", ""))
            if store is not None and store.status == "failed" and not c.busy:
                c.show_error(f"Run {store.run_id} failed: {store.error or getattr(c.last_handle, 'error', '')}")
                c.last_handle = None

    def start_refreshing(self) -> None:
        """Start this session's periodic refresh (4 Hz); it ends with the session."""
        if self._cb is None:
            self._cb = pn.state.add_periodic_callback(self._safe_tick, period=REFRESH_MS)

    def _safe_tick(self) -> None:
        try:
            self.tick()
        except Exception:  # a failing refresh must never take the page down; the next tick retries
            pass

    def stop_refreshing(self) -> None:
        if self._cb is not None:
            self._cb.stop()
            self._cb = None

    # -- rendering ----------------------------------------------------------------------------------------
    def main(self) -> pn.Column:
        return pn.Column(self.run_select, self.content, sizing_mode="stretch_width")

    def __panel__(self) -> pn.viewable.Viewable:
        self.start_refreshing()
        if self.control is None:
            return self.main()
        return pn.Row(pn.Column(self.control, width=320), self.main(), sizing_mode="stretch_width")

    def template(self) -> pn.template.BaseTemplate:
        """The served page (a Panel template). Starts this session's refresh."""
        self.start_refreshing()
        # no web fonts: loads fast offline. No busy indicator: the template's spinner follows
        # ``pn.state.busy``, which the views' periodic refresh keeps raised, so it spun for as long as the
        # page was open and made the browser redraw 60 times a second (0.1 core of chromium on an idle
        # page, measured); the progress pane says what the run is doing instead
        tmpl = pn.template.BootstrapTemplate(
            title="GNN workbench", sidebar=[self.control] if self.control is not None else [],
            main=[self.main()], header_background="#1f4e79", sidebar_width=330, busy_indicator=None)
        return tmpl


def dashboard(source: Any = None, *, runs_dir: str | os.PathLike | None = "runs",
              registry: Optional[RunRegistry] = None) -> Dashboard:
    """The dashboard for a run (or for the run log folder); render it in a notebook or serve it.

    Example:
        >>> from widgets.synthetic import fabricate_run
        >>> d = dashboard(fabricate_run(run_id="nb", epochs=2), runs_dir=None)
        >>> d.view.store.run_id
        'nb'
    """
    return Dashboard(source, registry=registry, runs_dir=runs_dir)


def make_app(registry: RunRegistry):
    """The per-session app function for ``pn.serve`` (one :class:`Dashboard` per browser tab)."""

    def app() -> pn.template.BaseTemplate:
        return Dashboard(registry=registry).template()

    return app
