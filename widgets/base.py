"""The base of every view over a :class:`~widgets.store.RunStore`: :class:`StoreView`, the one periodic
callback that refreshes views (:class:`Refresher`), :func:`as_store`, and the shared colours and plot options.

Every view is a Panel ``Viewer``: it renders inline in JupyterLab (``view`` as a cell's last expression, or
``pn.panel(view)``) and inside the served dashboard. Views never subscribe to events one by one: a periodic
callback (4 Hz, :data:`REFRESH_MS`) asks each view to :meth:`StoreView.refresh`, which re-renders only when
the store's version for the view's event types changed. Training threads only append to the store, so a slow
browser never slows a run.

A view accepts any *source*: a :class:`RunStore`, a live run handle, a run folder ``runs/<run_id>``, or
a list of events (:func:`as_store`). The views of one stage (:mod:`widgets.curves`, :mod:`widgets.partition`,
...) build on this module; :class:`widgets.views.RunView` composes them.
"""

from __future__ import annotations

import html
import logging
import os
import threading
import time
import traceback
import weakref
from typing import Any, Callable, Iterable, Optional

import panel as pn

from widgets.live_plots import StreamPlot
from widgets.notebook_sync import LOCK as SYNC_LOCK, comms_open
from widgets.offline import Viewer
from widgets.store import RunStore

__all__ = ["as_store", "StoreView", "Refresher", "REFRESH_MS", "PLOT_REDRAW_S", "RANK_COLORS", "KIND_COLORS",
           "STATUS_COLORS", "PLOT_OPTS", "rank_color", "kind_color", "empty_note"]

#: how often live views poll their store (ms): 4 Hz, far below the event rate of a fast run
REFRESH_MS = 250
#: least seconds between two redraws of a live figure (``RunView(plot_redraw_s=...)`` changes it per view):
#: the browser paints a Bokeh figure whole, 40-50 ms of chromium's CPU for the curves tab's two figures on
#: a small machine (a CDP profile; ``benchmarks/views_overhead.py --page-cost`` measures the sum), which a
#: run on the same cores pays
PLOT_REDRAW_S = 2.0

RANK_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
               "#bcbd22", "#17becf"]
KIND_COLORS = {"halo_fwd": "#4c78a8", "halo_bwd": "#9ecae9", "bcast_fwd": "#4c78a8", "bcast_bwd": "#9ecae9",
               "broadcast": "#4c78a8", "allreduce": "#f58518", "all_reduce": "#f58518", "all_gather": "#54a24b",
               "all_to_all": "#b279a2", "send": "#72b7b2", "control": "#bab0ac", "metrics": "#79706e",
               "feature": "#e45756", "feature_req": "#ff9d98", "cache_fill": "#59a14f", "cache_refresh": "#8cd17d",
               "embedding": "#9d755d"}
STATUS_COLORS = {"pending": "#7f7f7f", "running": "#1f77b4", "finished": "#2ca02c", "failed": "#d62728",
                 "stopped": "#ff7f0e"}
PLOT_OPTS = dict(responsive=True, height=260, toolbar="right", fontscale=1.0)

_STORES: "weakref.WeakKeyDictionary[Any, RunStore]" = weakref.WeakKeyDictionary()
_STORES_LOCK = threading.Lock()


def as_store(source: Any) -> RunStore:
    """The :class:`RunStore` for a source: a store, a run handle, a run folder or a list of events.

    One store per handle (cached), so every view and every browser tab on a run shares its data.
    """
    if isinstance(source, RunStore):
        return source
    if isinstance(source, (str, os.PathLike)):
        return RunStore.from_log(source)
    if hasattr(source, "add_listener"):
        with _STORES_LOCK:
            try:
                store = _STORES.get(source)
            except TypeError:
                store = None
            if store is None:
                store = RunStore.from_handle(source)
                try:
                    _STORES[source] = store
                except TypeError:
                    pass
            return store
    if isinstance(source, Iterable):
        return RunStore(events=list(source))
    raise TypeError(f"cannot view {type(source).__name__}: pass a RunStore, a run handle, a run folder "
                    f"or a list of events")


def rank_color(rank: int) -> str:
    return RANK_COLORS[int(rank) % len(RANK_COLORS)]


def kind_color(kind: str, i: int = 0) -> str:
    return KIND_COLORS.get(kind, RANK_COLORS[(i + 4) % len(RANK_COLORS)])


def empty_note(text: str) -> pn.pane.Markdown:
    return pn.pane.Markdown(f"*{html.escape(text)}*", styles={"color": "#666"}, margin=(4, 10))


def _raised_at(exc: BaseException) -> str:
    """``package/module.py:line`` of the frame that raised ``exc`` (a failure inside a plotting library then
    says where in the library: a rare race is found from the one message a page showed)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return ""
    parts = os.path.normpath(tb.tb_frame.f_code.co_filename).split(os.sep)
    return f"{'/'.join(parts[-3:])}:{tb.tb_lineno}"


class StoreView(Viewer):
    """Base of the views: holds a store, re-renders when the store's version for :attr:`kinds` changes.

    Subclasses build their panes in :meth:`_build` and fill them in :meth:`_update`. A view that raises
    while rendering shows a one-line warning instead (never a traceback), and the page keeps working.
    ``defer=True`` draws nothing until the first :meth:`refresh` (or until the view is shown): the views
    of a :class:`RunView`'s tabs other than the first are drawn when their tab is first opened.
    """

    #: event types (store frame names or ``run``/``partition``) this view depends on
    kinds: tuple[str, ...] = ("any",)
    title: str = ""
    #: least seconds between two redraws: a plot redraw is re-rendered whole by the browser, which on a
    #: small machine competes with the training ranks for CPU (the status line overrides this with 0.5)
    min_redraw_s: float = PLOT_REDRAW_S

    def __init__(self, source: Any, *, defer: bool = False, **params: Any):
        super().__init__(**params)
        self.store = as_store(source)
        self._last: Any = None
        self._next_ok = 0.0
        # what the last draw saw: no event of the view's kinds yet (its placeholder), a run that had ended
        self._drew_empty = self._drew_done = False
        #: seconds the last redraw took (server side)
        self.draw_s = 0.0
        self._error = pn.pane.Alert("", alert_type="warning", visible=False, margin=(2, 10))
        self._layout = pn.Column(*self._build(), self._error, sizing_mode="stretch_width")
        self.param.watch(lambda *_: self.refresh(force=True), [p for p in self.param if p != "name"])
        if not defer:  # deferred: drawn on its first refresh (a tab not opened yet builds no figure)
            self.refresh(force=True)

    def _build(self) -> list:
        return []

    def _update(self) -> None:
        raise NotImplementedError

    def _version(self) -> tuple:
        return self.store.version(*self.kinds)

    def _stream_plots(self) -> list:
        return [v for v in vars(self).values() if isinstance(v, StreamPlot)]

    def _catching_up(self, done: bool) -> bool:
        """Whether a redraw skips the throttle: the view shows its placeholder and its first events came,
        or the run ended since the last draw. A view built before its run's first event (a run started
        from the dashboard's form is shown at once) must not keep its placeholder for a whole throttle
        period, and the end of a run is drawn in the refresh that shows its status: a short run used to
        end with the status line saying "finished" beside curves still waiting for their first epoch."""
        if done and not self._drew_done:
            return True
        return self._drew_empty and any(self.store.version(*self.kinds))

    def refresh(self, force: bool = False) -> bool:
        """Re-render if new events arrived (or ``force``). Returns whether it re-rendered.

        At most every :attr:`min_redraw_s` (longer for a slow view), except for the view's first events
        and the run's end, which are drawn at once (:meth:`_catching_up`)."""
        for plot in self._stream_plots():
            plot.heal()
        # read before the version: a run seen ended then has all its events in ``ver``
        done, empty = self.store.done, not any(self.store.version(*self.kinds))
        ver = self._version()
        if not force and (ver == self._last or (time.monotonic() < self._next_ok and not self._catching_up(done))):
            return False
        self._last, self._drew_done, self._drew_empty = ver, done, empty
        start = time.monotonic()
        try:
            self._update()
            self._error.visible = False
        except Exception as exc:  # a broken view degrades to a message; the app keeps going
            where = _raised_at(exc)
            self._error.object = (f"{self.title or type(self).__name__}: could not render ({type(exc).__name__}: "
                                  f"{exc}{f' at {where}' if where else ''})")
            self._error.visible = True
            self.last_error = "".join(traceback.format_exception(exc))   # the message names one frame only
            logging.getLogger(__name__).warning("%s", self._error.object, exc_info=exc)
            self._last = None  # not up to date: the next refresh draws again (a transient failure heals itself)
        # adaptive throttle: a view that takes d seconds to draw redraws at most every 4 d seconds (at
        # most every 5 s), so big runs never saturate the server loop; a first draw, which builds the
        # figures (and warms HoloViews up), can take a second or two and must not silence the view
        self.draw_s = time.monotonic() - start
        self._next_ok = time.monotonic() + max(self.min_redraw_s, min(4 * self.draw_s, 5.0))
        return True

    def up_to_date(self) -> bool:
        """Whether the view shows everything its store holds."""
        return self._last == self._version()

    def resend_pending(self) -> bool:
        """Whether a figure is still to be sent once more (:meth:`StreamPlot.heal`)."""
        return any(p.resend_pending for p in self._stream_plots())

    def __panel__(self) -> pn.viewable.Viewable:
        if not self.up_to_date():  # e.g. a tab of a RunView shown on its own, after the run moved on
            self.refresh(force=True)
        return self._layout

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        # shown on its own in a notebook (``view.staleness``): keeps itself live like a RunView
        if not self.store.done and getattr(self, "_refresher", None) is None:
            self._refresher = Refresher([self]).start()
        return super()._repr_mimebundle_(include, exclude)


class Refresher:
    """One periodic callback refreshing several views (and polling their stores) at :data:`REFRESH_MS`.

    Started per session (served app) or per displayed :class:`RunView` (notebook); it stops itself
    once every store is done and the views have shown the final state.
    """

    def __init__(self, views: Iterable[StoreView] | Callable[[], list[StoreView]], period: int = REFRESH_MS,
                 extra: Optional[Callable[[], None]] = None, keep_running: bool = False):
        self._views = views if callable(views) else (lambda fixed=list(views): fixed)
        self.period = period
        self.extra = extra
        self.keep_running = keep_running
        self._cb = None
        self.ticks = 0

    @property
    def views(self) -> list[StoreView]:
        return list(self._views())

    def tick(self) -> None:
        self.ticks += 1
        with SYNC_LOCK:  # a notebook page's message is not applied halfway through a redraw (widgets.notebook_sync)
            views = self.views
            for store in {id(v.store): v.store for v in views}.values():
                store.poll()
            if not comms_open(getattr(v, "_layout", None) for v in views):
                return  # a notebook output the page has not connected yet: its changes could arrive out of order
            for v in views:
                v.refresh()
            if self.extra is not None:
                self.extra()
        if (not self.keep_running and self._cb is not None and views
                and all(v.store.done and v.up_to_date() and not v.resend_pending() for v in views)):
            self.stop()

    def start(self) -> "Refresher":
        if self._cb is None:
            self._cb = pn.state.add_periodic_callback(self.tick, period=self.period)
        return self

    def stop(self) -> None:
        if self._cb is not None:
            try:
                self._cb.stop()
            except Exception:
                pass
            self._cb = None
