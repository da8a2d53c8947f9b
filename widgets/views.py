"""Small views over a :class:`~widgets.store.RunStore`, and :class:`RunView`, which composes them.

Every view is a Panel ``Viewer``: it renders inline in JupyterLab (``RunView(handle)`` as a cell's last
expression, or ``pn.panel(view)``) and inside the served dashboard. Views never subscribe to events one
by one: a periodic callback (4 Hz, :data:`REFRESH_MS`) asks each view to :meth:`StoreView.refresh`, which
re-renders only when the store's version for the view's event types changed. Training threads only
append to the store, so a slow browser never slows a run.

A view accepts any *source*: a :class:`RunStore`, a live run handle, a run folder ``runs/<run_id>``, or
a list of events (:func:`as_store`).

Example:
    >>> from widgets.synthetic import fabricate_run
    >>> view = RunView(fabricate_run(num_parts=2, epochs=3))
    >>> view.store.epochs_done
    3
"""

from __future__ import annotations

import html
import logging
import os
import threading
import time
import traceback
import weakref
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (registers the bokeh backend without notebook output)
import numpy as np
import pandas as pd
import panel as pn
import param

from widgets.notebook_sync import LOCK as SYNC_LOCK, comms_open
from widgets.offline import Viewer
from widgets.store import RunStore
from workbench._validation import check_float

__all__ = ["as_store", "StoreView", "ProgressView", "RunView", "Refresher", "LivePlot", "StreamPlot", "REFRESH_MS",
           "PLOT_REDRAW_S", "RANK_COLORS", "KIND_COLORS", "STATUS_COLORS"]

#: how often live views poll their store (ms): 4 Hz, far below the event rate of a fast run
REFRESH_MS = 250
#: least seconds between two redraws of a live figure (``RunView(plot_redraw_s=...)`` changes it per view):
#: the browser paints a Bokeh figure whole, 40-50 ms of chromium's CPU for the curves tab's two figures on
#: a small machine (a CDP profile; ``benchmarks/views_overhead.py --page-cost`` measures the sum), which a
#: run on the same cores pays
PLOT_REDRAW_S = 2.0
#: seconds after which a rebuilt :class:`StreamPlot` figure is sent once more (:meth:`StreamPlot.heal`)
RESEND_S = 5.0
#: Bokeh output backend of the live figures. HoloViews draws with WebGL by default; without a GPU
#: (headless browsers, CI, remote desktops, this project's 2-core machine) WebGL is rendered in software and
#: every redraw is copied from the WebGL canvas: a live page cost chromium about 0.2 core more than with a
#: 2D canvas (``benchmarks/views_overhead.py``), and line plots of a few thousand points draw fast on canvas.
OUTPUT_BACKEND = "canvas"
_BACKEND_OPTS = {"plot.output_backend": OUTPUT_BACKEND}

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


def _framewise(obj: Any) -> Any:
    """``obj`` with ``framewise=True`` on it and every element in it: axes follow each update; drawn on a
    2D canvas (:data:`OUTPUT_BACKEND`)."""
    if not isinstance(obj, hv.Element):  # an overlay or layout: its elements too
        obj = obj.map(lambda el: el.opts(framewise=True), [hv.Element])
    if isinstance(obj, (hv.Layout, hv.NdLayout)):
        obj = obj.map(lambda el: el.opts(backend_opts=_BACKEND_OPTS), [hv.Overlay, hv.NdOverlay, hv.Element])
        return obj.opts(framewise=True)
    return obj.opts(framewise=True, backend_opts=_BACKEND_OPTS)


class LivePlot:
    """A HoloViews plot that is updated in place while a run goes.

    :meth:`show` sends each new element through a ``Pipe`` into a ``DynamicMap``: Bokeh then patches the
    figure's data sources and ranges, and the browser redraws one canvas, instead of building a new figure
    (new models, a new layout pass) on every refresh. When the element's *shape* changes (other layers,
    another element type, a new title or height), the figure is built anew.

    Example:
        >>> plot = LivePlot()
        >>> plot.show(hv.Curve([(0, 1.0), (1, 0.5)]), shape="loss")
        >>> plot.show(hv.Curve([(0, 1.0), (1, 0.5), (2, 0.4)]), shape="loss")  # same figure, new data
        >>> len(plot.element), plot.rebuilds, plot.updates
        (3, 1, 1)
    """

    def __init__(self, **pane_params: Any):
        self.pane = pn.pane.HoloViews(None, sizing_mode="stretch_width", **pane_params)
        self._pipe: Optional[hv.streams.Pipe] = None
        self._shape: Any = None
        #: how many times the figure was built anew, and updated in place
        self.rebuilds = self.updates = 0

    @property
    def element(self) -> Any:
        """The HoloViews object shown now (None before the first :meth:`show`)."""
        return None if self._pipe is None else self._pipe.data

    @property
    def visible(self) -> bool:
        return self.pane.visible

    @visible.setter
    def visible(self, value: bool) -> None:
        self.pane.visible = value

    def show(self, element: Any, shape: Any = None) -> None:
        """Show ``element``: in place when ``shape`` is the one shown, else as a new figure."""
        element = _framewise(element)
        if self._pipe is not None and shape == self._shape:
            self._pipe.send(element)
            self.updates += 1
            return
        self._pipe = hv.streams.Pipe(data=element)
        self._shape = shape
        self.rebuilds += 1
        self.pane.object = hv.DynamicMap(lambda data: data, streams=[self._pipe])

    def __panel__(self) -> pn.pane.HoloViews:
        return self.pane


class StreamPlot:
    """Lines that grow by appended rows: each refresh sends the browser only the rows added since the last.

    :meth:`show` takes one frame per series (e.g. per rank), each sorted and only ever appended to; the
    first column is drawn on x, the second on y. The figure is built by HoloViews once; after that, the
    new rows of each series go straight to its Bokeh ``ColumnDataSource`` (``source.stream(rows)``) and
    the axis ranges follow the data, so a refresh costs the server a few Bokeh property changes (no
    HoloViews elements, no range computation over the whole run) and the browser a few rows to parse.
    The figure is built anew when the ``shape`` changes (other series, another x axis) or when a series'
    frame no longer starts with the rows already shown (a late row inserted in the middle, an edited
    row): the plot always shows exactly the frames given. Aggregated series (a maximum over ranks per
    epoch) should pass only rows that will not change any more.

    Args:
        make: ``make(name, frame) -> hv.Element``, the element of one series (its style included).
        opts: options of the overlay (title, legend, size).
        padding: fraction of the data range added on each side of ``(x, y)`` (HoloViews' default for curves).
        **pane_params: parameters of the ``pn.pane.HoloViews`` pane.

    Example:
        >>> import pandas as pd
        >>> plot = StreamPlot(lambda name, df: hv.Curve(df, "epoch", "loss", label=str(name)))
        >>> plot.show({0: pd.DataFrame({"epoch": [0, 1], "loss": [1.0, 0.5]})}, shape="loss")
        >>> plot.show({0: pd.DataFrame({"epoch": [0, 1, 2], "loss": [1.0, 0.5, 0.4]})}, shape="loss")
        >>> plot.rebuilds, plot.updates, plot.rows_sent
        (1, 1, 1)
    """

    def __init__(self, make: Callable[[Any, Any], Any], opts: Optional[dict] = None,
                 padding: tuple[float, float] = (0.0, 0.1), **pane_params: Any):
        self.make = make
        self.opts = dict(opts or {})
        self.padding = padding
        self.pane = pn.pane.HoloViews(None, sizing_mode="stretch_width", **pane_params)
        self._frames: dict[Any, Any] = {}
        self._shape: Any = None
        self._empty = True
        #: figures built, updates streamed, and rows streamed by those updates (not counting builds)
        self.rebuilds = self.updates = self.rows_sent = 0
        #: when the figure is sent once more (see :meth:`heal`); None: nothing pending
        self._resend_at: Optional[float] = None

    @property
    def series(self) -> dict[Any, Any]:
        """The frame shown of each series."""
        return dict(self._frames)

    @property
    def element(self) -> Any:
        """The data shown, as one ``NdOverlay`` keyed by series name (None before the first show)."""
        if self._empty:
            return self.pane.object
        return hv.NdOverlay({name: self.make(name, df) for name, df in self._frames.items()})

    @property
    def visible(self) -> bool:
        return self.pane.visible

    @visible.setter
    def visible(self, value: bool) -> None:
        self.pane.visible = value

    def show(self, series: dict[Any, Any], shape: Any = None, empty: Any = None) -> None:
        """Show ``series`` (name -> frame): the new rows only, when possible; ``empty`` (an element, or a
        function making one) when there is no series."""
        if not series:
            if not self._empty or self.pane.object is None or shape != self._shape:
                self._frames, self._shape, self._empty = {}, shape, True
                empty = empty() if callable(empty) else empty
                self.pane.object = _framewise(empty if empty is not None else hv.Curve([]))
                self.rebuilds += 1
            return
        tails = self._tails(series) if (not self._empty and shape == self._shape) else None
        if tails is None or not self._stream(tails):
            self._build(series, shape)
            return
        if any(len(t) for t in tails.values()):
            self._frames = {name: df.reset_index(drop=True) for name, df in series.items()}
            self.updates += 1
            self.rows_sent += sum(len(t) for t in tails.values())

    def _tails(self, series: dict[Any, Any]) -> Optional[dict[Any, Any]]:
        """The rows of each series after those shown, or None when a series is not an extension of it."""
        if list(series) != list(self._frames):
            return None
        out = {}
        for name, df in series.items():
            shown = self._frames[name]
            n = len(shown)
            if len(df) < n or list(df.columns) != list(shown.columns) or not _same_rows(df.iloc[:n], shown):
                return None
            out[name] = df.iloc[n:]
        return out

    def _build(self, series: dict[Any, Any], shape: Any, resend: bool = True) -> None:
        self._frames = {name: df.reset_index(drop=True) for name, df in series.items()}
        self._shape, self._empty = shape, False
        self.rebuilds += 1
        if resend:
            self._resend_at = time.monotonic() + RESEND_S
        # a DynamicMap that draws the frames when a page asks for the figure: a page opened later draws
        # the rows streamed since (no memo, and its kept frame is dropped on every update)
        self._dmap = hv.DynamicMap(hv.core.spaces.Callable(self._overlay, memoize=False))
        self.pane.object = self._dmap

    def heal(self) -> bool:
        """Send the figure once more :data:`RESEND_S` after a build (True when it did).

        A figure that replaces another in a notebook output can be lost on its way to the page (seen in
        JupyterLab under load, about one run in ten: the new figure's rows were on the server, the page kept
        drawing the empty placeholder, and nothing later repaired it, since streamed rows only extend a
        figure the page has). Building it again a few seconds later costs one figure per build and
        repairs that; a page that had the figure redraws the same rows. A figure on the served dashboard
        (Bokeh server sessions, which keep pages in sync by themselves) is not sent again: a second build
        costs the server and every page a whole figure, on the machine the ranks train on.
        """
        if self._resend_at is None or time.monotonic() < self._resend_at:
            return False
        self._resend_at = None
        if self._served_only():
            return False
        if not self._empty:
            self._build(dict(self._frames), self._shape, resend=False)
        return True

    @property
    def resend_pending(self) -> bool:
        return self._resend_at is not None

    def _served_only(self) -> bool:
        """Whether every page showing the figure is a Bokeh server session (none is a notebook output)."""
        plots = [plot for plot, _ in list(getattr(self.pane, "_plots", {}).values())]
        return bool(plots) and all(getattr(getattr(p, "renderer", None), "mode", "") == "server" for p in plots)

    def _overlay(self) -> Any:
        layers = [_framewise(self.make(name, df)) for name, df in self._frames.items()]
        return hv.Overlay(layers).opts(framewise=True, **self.opts)

    def _stream(self, tails: dict[Any, Any]) -> bool:
        """Append ``tails`` to the Bokeh sources of every page showing this plot. False: build anew instead."""
        if not any(len(t) for t in tails.values()):
            return True
        frames = {name: pd.concat([self._frames[name], t], ignore_index=True) for name, t in tails.items()}
        ranges = self._ranges(frames)
        plots = [plot for plot, _ in list(getattr(self.pane, "_plots", {}).values())]
        updates = []
        for plot in plots:
            subplots = list(getattr(plot, "subplots", {}).values())
            sources = [sub.handles.get("cds") for sub in subplots]
            if len(sources) != len(tails) or any(s is None for s in sources):
                return False
            chunks = []
            for source, (name, tail), n in zip(sources, tails.items(), (len(f) for f in self._frames.values())):
                columns = list(source.data)
                if any(c not in tail.columns for c in columns) or any(len(source.data[c]) != n for c in columns):
                    return False  # not the figure these rows extend
                chunks.append((source, {c: tail[c].to_numpy() for c in columns}))
            updates.append((plot, chunks))
        self._dmap.data.clear()  # the frame the DynamicMap keeps: a page opened later draws the new rows
        for plot, chunks in updates:
            _in_document(plot, partial(_stream_into, plot, chunks, ranges))
        return True

    def _ranges(self, frames: dict[Any, Any]) -> list[Optional[tuple[float, float]]]:
        """``(start, end)`` of the x and y axes over every series (padded), None where there is no data."""
        out = []
        for axis, pad in enumerate(self.padding):
            values = [df.iloc[:, axis].to_numpy(dtype=float) for df in frames.values() if df.shape[1] > axis]
            values = np.concatenate(values) if values else np.empty(0)
            values = values[np.isfinite(values)]
            if not len(values):
                out.append(None)
                continue
            lo, hi = float(values.min()), float(values.max())
            if lo == hi:
                lo, hi = lo - 0.5, hi + 0.5
            out.append((lo - pad * (hi - lo), hi + pad * (hi - lo)))
        return out

    def __panel__(self) -> pn.pane.HoloViews:
        return self.pane


def _stream_into(plot: Any, chunks: list, ranges: list) -> None:
    for source, data in chunks:
        source.stream(data)
    for name, rng in zip(("x_range", "y_range"), ranges):
        handle = plot.handles.get(name)
        if rng is not None and handle is not None and hasattr(handle, "reset_start"):  # a Range1d
            handle.update(start=rng[0], end=rng[1], reset_start=rng[0], reset_end=rng[1])  # reset: all data


def _in_document(plot: Any, fn: Callable[[], None]) -> None:
    """Run ``fn`` (a change of ``plot``'s Bokeh models) where its document allows it, then push to a notebook.

    As HoloViews does for its own updates: on a server, with the session's document lock (the periodic
    callback holds it; from elsewhere, on the document's next tick); in a notebook, pushed over the comm.
    """
    from panel.io.document import unlocked
    from panel.io.state import state

    doc = plot.document
    if (doc is not None and doc.session_context is not None and getattr(plot.renderer, "mode", "") == "server"
            and not state._unblocked(doc)):
        doc.add_next_tick_callback(lambda: _in_document(plot, fn))
        return
    with unlocked():
        fn()
    try:
        plot.push()
    except Exception:  # a closed comm: that page is gone
        pass


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


def _same_rows(a: Any, b: Any) -> bool:
    """Whether two frames with the same columns hold the same values (NaN equal to NaN)."""
    if len(a) != len(b):
        return False
    for col in a.columns:
        x, y = a[col].to_numpy(), b[col].to_numpy()
        if x.dtype.kind in "biuf" and y.dtype.kind in "biuf":
            if not np.array_equal(x.astype(float), y.astype(float), equal_nan=True):
                return False
        elif list(x) != list(y):
            return False
    return True


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

    def refresh(self, force: bool = False) -> bool:
        """Re-render if new events arrived (or ``force``). Returns whether it re-rendered."""
        for plot in self._stream_plots():
            plot.heal()
        ver = self._version()
        if not force and (ver == self._last or time.monotonic() < self._next_ok):
            return False
        self._last = ver
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


class ProgressView(StoreView):
    """Run status, progress of long steps (graph generation, partitioning, epochs), error and Dask link.

    Three small HTML panes (native ``<progress>`` bars, no animation; no Panel widget per bar, which would
    make the browser lay the page out anew on every change): the status badge and run (changes only with
    the run's status), the counters (epochs done, loss, MB sent: at most :attr:`min_redraw_s`, 2 Hz) and
    the progress bars (at most every :attr:`bars_every_s`, 1 Hz). A pane's text is sent to the browser only
    when it changed: while a run goes, the browser redraws a line or two of text a second, not the whole
    status four times a second. The store is still polled at :data:`REFRESH_MS`; the final state of a run
    is shown at once.
    """

    kinds = ("run", "progress", "epoch")
    #: least seconds between two redraws of the status line (its epoch counter)
    min_redraw_s = 0.5
    #: least seconds between two redraws of the progress bars
    bars_every_s = 1.0
    title = "Progress"

    def _build(self) -> list:
        self._status = pn.pane.HTML("", margin=(4, 0, 4, 10), disable_math=True)
        self._counts = pn.pane.HTML("", margin=(4, 10, 4, 0), disable_math=True)
        self._failure = pn.pane.Alert("", alert_type="danger", visible=False, margin=(4, 10))
        self._bars = pn.pane.HTML("", margin=(0, 10), sizing_mode="stretch_width", disable_math=True)
        self._bars_next = 0.0
        self._bars_pending: Optional[str] = None  # bars not sent yet (throttled)
        return [pn.Row(self._status, self._counts, sizing_mode="stretch_width"), self._failure, self._bars]

    def refresh(self, force: bool = False) -> bool:
        if self._bars_pending is not None and time.monotonic() >= self._bars_next:
            force = True  # throttled bars still to show, even when no event came since
        return super().refresh(force)

    def up_to_date(self) -> bool:
        return super().up_to_date() and self._bars_pending is None

    def progress_rows(self) -> list[dict]:
        """One row per long step: ``stage``, ``done``, ``total`` (0: unknown) and ``message``."""
        s = self.store
        finished = s.done and s.status == "finished"
        rows = []
        for stage, ev in sorted(s.progress.items()):
            total = max(int(ev.total or 0), 0)
            if not total:
                done = int(ev.done)
            else:
                done = total if finished else min(int(ev.done), total)
            rows.append({"stage": stage, "done": done, "total": total, "message": ev.message or ""})
        return rows

    @staticmethod
    def _set(pane: Any, text: str) -> None:
        if pane.object != text:  # an unchanged pane sends nothing to the browser
            pane.object = text

    def _update(self) -> None:
        s = self.store
        color = STATUS_COLORS.get(s.status, "#7f7f7f")
        h = s.live_counts()   # running tallies: no frame or group-by per refresh
        parts = [f"<span class='wb-status' data-status='{s.status}' style='background:{color};color:white;"
                 f"border-radius:4px;padding:2px 8px;font-weight:600'>{html.escape(s.status)}</span>",
                 f"<b>{html.escape(s.run_id or 'run')}</b>"]
        if s.recipe:
            parts.append(f"recipe <code>{html.escape(s.recipe)}</code>")
        if s.world_size:
            parts.append(f"{s.world_size} ranks ({html.escape(s.runner or '?')})")
        if s.dashboard_link:
            link = html.escape(s.dashboard_link, quote=True)
            parts.append(f"<a href='{link}' target='_blank' class='wb-dask-link'>Dask dashboard</a>")
        counts = [f"epochs done: <b class='wb-epochs'>{h['epochs_done']}</b>"]
        if h["final_loss"] is not None:
            counts.append(f"loss {h['final_loss']:.4g}")
        counts.append(f"{h['total_mb_sent']:.3g} MB sent")
        sep = " &nbsp;·&nbsp; "
        self._set(self._status, sep.join(parts) + sep)
        self._set(self._counts, sep.join(counts))
        if self._failure.visible != (s.status == "failed"):
            self._failure.visible = s.status == "failed"
        if s.status == "failed":
            self._set(self._failure, f"**Run failed.** {html.escape(str(s.error or 'no error message'))}")
        lines = []
        for row in self.progress_rows():
            total, msg = row["total"], f" ({html.escape(row['message'])})" if row["message"] else ""
            bar = (f"<progress value='{row['done']}' max='{total}' style='width:340px;height:12px'></progress>"
                   if total else ("<span style='color:#666'>running…</span>" if not s.done else ""))
            lines.append(f"<div class='wb-progress' data-stage='{html.escape(row['stage'], quote=True)}' "
                         f"style='display:flex;gap:12px;align-items:center;margin:2px 0'>"
                         f"<span style='min-width:240px'>{html.escape(row['stage'])}: {row['done']}/{total or '?'}"
                         f"{msg}</span>{bar}</div>")
        bars = "".join(lines)
        now = time.monotonic()
        if bars == self._bars.object:
            self._bars_pending = None
        elif now >= self._bars_next or s.done:
            self._bars.object, self._bars_pending, self._bars_next = bars, None, now + self.bars_every_s
        else:
            self._bars_pending = bars


class RunView(Viewer):
    """Every view of one run: progress on top, then tabs (curves, partition, staleness, communication, and
    cache, scheduler, pipeline or time once the run reports cache, schedule, pipeline timeline or step time
    events).

    Renders inline in a notebook (keeps itself live at 4 Hz while the kernel is idle) and in the app.

    Args:
        source: a run handle, :class:`RunStore`, run folder or list of events.
        runs_dir: folder of earlier runs (baseline choices of the communication view).
        graph: optional graph, for a vertex-level drawing of the partition (small graphs).
        node_part: optional part of each vertex, with ``graph``.
        live: poll the store with a periodic callback when displayed.
        compare_stores: ``{run_id: RunStore}`` function of runs the cache view compares policies over.
        plot_redraw_s: least seconds between two redraws of a live figure (default :data:`PLOT_REDRAW_S`,
            2 s); the status line follows the run at 2 Hz whatever this is.
    """

    def __init__(self, source: Any, *, runs_dir: str | os.PathLike | None = "runs", graph: Any = None,
                 node_part: Any = None, live: bool = True,
                 compare_stores: Optional[Callable[[], dict[str, RunStore]]] = None,
                 plot_redraw_s: Optional[float] = None, **params: Any):
        super().__init__(**params)
        if plot_redraw_s is not None:
            plot_redraw_s = check_float(plot_redraw_s, "plot_redraw_s", "RunView", low=0.0)
        self.plot_redraw_s = plot_redraw_s
        from widgets.curves import CurvesView
        from widgets.partition import PartitionView
        from widgets.staleness import StalenessView
        from widgets.traffic import TrafficView

        self.store = as_store(source)
        self.progress = ProgressView(self.store)
        self.curves = CurvesView(self.store)
        # the views of the other tabs draw their figures when their tab is first opened (or on save)
        self.partition = PartitionView(self.store, graph=graph, node_part=node_part, defer=True)
        self.staleness = StalenessView(self.store, defer=True)
        self.traffic = TrafficView(self.store, runs_dir=runs_dir, defer=True)
        self.views: list[StoreView] = [self.progress, self.curves, self.partition, self.staleness, self.traffic]
        if plot_redraw_s is not None:
            for v in self.views[1:]:
                v.min_redraw_s = plot_redraw_s
        #: the cache view, added (as a tab after Communication) once the run reports cache events
        self.cache: Optional[StoreView] = None
        #: the scheduler view, added (as a tab) once the run reports schedule events
        self.scheduler: Optional[StoreView] = None
        #: the pipeline view (simulated timeline of a prefetch run), added (as a tab) once the run reports one
        self.pipeline: Optional[StoreView] = None
        #: the time view (seconds per phase per rank and epoch), added (as the Time tab) once the run reports them
        self.timing: Optional[StoreView] = None
        self._compare_stores = compare_stores
        self.live = live
        self._tabs: Optional[pn.Tabs] = None
        self._tab_objects: list[Any] = []
        self.refresher = Refresher(self.visible_views, extra=self._add_stage_views)
        self._add_stage_views()

    def _add_stage_views(self) -> None:
        """Add the views (and tabs) of the stages a run reports once their first events arrive: a run
        without a cache has no Cache tab, one without a schedule no Scheduler tab, and so on."""
        def cache():
            from widgets.cache import CacheView
            return CacheView(self.store, stores=self._compare_stores, defer=True)

        def scheduler():
            from widgets.schedule import ScheduleView
            return ScheduleView(self.store, defer=True)

        def pipeline():
            from widgets.pipeline import PipelineView
            return PipelineView(self.store, defer=True)

        def timing():
            from widgets.timing import TimingView
            return TimingView(self.store, defer=True)

        self._add_view("cache", "Cache", "cache", cache)
        self._add_view("scheduler", "Scheduler", "schedule", scheduler)
        self._add_view("pipeline", "Pipeline", "pipeline", pipeline)
        self._add_view("timing", "Time", "step_times", timing)

    def _add_view(self, attr: str, title: str, kind: str, make: Callable[[], StoreView]) -> None:
        """Set ``self.<attr>`` to ``make()`` and insert its tab (after Communication, before any extra tab)
        once the store has ``kind`` events; the open tab stays open."""
        if getattr(self, attr) is not None or not self.store.version(kind)[0]:
            return
        view = make()
        if self.plot_redraw_s is not None:
            view.min_redraw_s = self.plot_redraw_s
        setattr(self, attr, view)
        self.views.append(view)
        if self._tabs is not None:
            at = len(self.views) - 2
            active = self._tabs.active
            self._tabs.insert(at, (title, self._lazy_tab(view)))
            self._tab_objects.insert(at, view)
            if active >= at:
                self._tabs.active = active + 1

    def active_view(self) -> Any:
        """The object of the open tab (None before :meth:`tabs`)."""
        if self._tabs is None:
            return None
        i = self._tabs.active
        return self._tab_objects[i] if 0 <= i < len(self._tab_objects) else None

    def visible_views(self) -> list[StoreView]:
        """The progress view and the view of the open tab (the others refresh when their tab opens)."""
        if self._tabs is None:
            return list(self.views)
        tab_views = self.views[1:]  # in tab order
        i = self._tabs.active
        return [self.progress] + ([tab_views[i]] if 0 <= i < len(tab_views) else [])

    def refresh(self) -> None:
        """Poll the store and refresh the visible views once (what the periodic callback does)."""
        self.refresher.tick()

    @staticmethod
    def _lazy_tab(obj: Any) -> pn.Column:
        """An empty column that takes ``obj`` when its tab is first opened (:meth:`tabs`)."""
        holder = pn.Column(sizing_mode="stretch_width")
        holder._wb_content = obj
        return holder

    @staticmethod
    def _fill_tab(holder: Any) -> None:
        obj = getattr(holder, "_wb_content", None)
        if obj is not None and not holder.objects:
            holder.objects = [obj]  # renders it: a StoreView draws itself if it is not up to date

    def tabs(self, *extra: tuple[str, Any]) -> pn.Tabs:
        """The views as tabs (plus ``extra`` (title, object) tabs); only the open tab refreshes.

        Only the first tab is drawn at once: every other tab is an empty column until it is first opened,
        and its view builds its figures then (a saved run of 10^5 events opens in well under 2 s).
        """
        cache = [(view.title, view) for view in self.views[5:]]   # cache, scheduler, pipeline, time: arrival order
        named = [("Training curves", self.curves), ("Partition", self.partition), ("Staleness", self.staleness),
                 ("Communication", self.traffic), *cache, *extra]
        tabs = pn.Tabs(*((name, obj if i == 0 else self._lazy_tab(obj)) for i, (name, obj) in enumerate(named)),
                       dynamic=False, sizing_mode="stretch_width")

        self._tab_objects = tab_objects = [*self.views[1:], *(obj for _, obj in extra)]  # pn.Tabs keeps layouts

        def opened(event: Any) -> None:
            if 0 <= event.new < len(tabs):
                self._fill_tab(tabs[event.new])
            view = tab_objects[event.new] if 0 <= event.new < len(tab_objects) else None
            if isinstance(view, StoreView):
                view.refresh(force=not view.up_to_date())
            elif hasattr(view, "refresh"):
                view.refresh()

        tabs.param.watch(opened, "active")
        self._tabs = tabs
        return tabs

    def __panel__(self) -> pn.viewable.Viewable:
        tabs = self.tabs()
        if self.live and not self.store.done:
            self.refresher.start()
        return pn.Column(self.progress, tabs, sizing_mode="stretch_width")

    def save(self, path: str | os.PathLike, *, title: Optional[str] = None) -> Path:
        """Write every view of the run to one HTML file with its resources inline: it opens offline.

        The views are stacked (progress, then training curves, partition, staleness and communication,
        each under a heading in a ``wb-report-<view>`` section) as they are now; the file is a static
        snapshot: plots keep their hover and zoom, the views' controls keep the values they had.

        Returns:
            The path written.

        Example:
            >>> import tempfile
            >>> from widgets.synthetic import fabricate_run
            >>> out = RunView(fabricate_run(epochs=3), runs_dir=None).save(tempfile.mkdtemp() + "/run.html")
            >>> "cdn.bokeh.org" in out.read_text()
            False
        """
        from bokeh.resources import INLINE

        self.store.poll()
        for view in self.views:
            view.refresh(force=True)
        title = title or f"{self.store.run_id or 'run'}: workbench report"
        sections = [pn.pane.Markdown(f"# {html.escape(title)}", margin=(4, 10))]
        for name, heading, view in (("progress", "", self.progress), ("curves", "Training curves", self.curves),
                                    ("partition", "Partition", self.partition),
                                    ("staleness", "Staleness", self.staleness),
                                    ("traffic", "Communication", self.traffic),
                                    *((("pipeline", "Pipeline", self.pipeline),) if self.pipeline is not None else ()),
                                    *((("time", "Time", self.timing),) if self.timing is not None else ())):
            head = [pn.pane.Markdown(f"## {heading}", margin=(12, 10, 0, 10))] if heading else []
            sections.append(pn.Column(*head, view._layout, css_classes=[f"wb-report-{name}"],
                                      sizing_mode="stretch_width"))
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        pn.Column(*sections, sizing_mode="stretch_width").save(str(path), resources=INLINE, title=title)
        return path

    def __repr__(self) -> str:
        return f"RunView({self.store!r})"


def load_store_for(run_dir: str | os.PathLike) -> Optional[RunStore]:
    """A saved run's store, or None when the folder holds no readable log."""
    try:
        return RunStore.from_log(Path(run_dir))
    except (OSError, ValueError):
        return None
