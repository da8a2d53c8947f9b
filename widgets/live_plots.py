"""Figures that update in place while a run goes: :class:`LivePlot` (a new HoloViews element sent through a
``Pipe``) and :class:`StreamPlot` (lines that grow: only the appended rows go to the browser).

The views (:class:`~widgets.base.StoreView` subclasses) draw with these; nothing here knows about stores or events.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any, Callable, Optional

import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (registers the bokeh backend without notebook output)
import numpy as np
import pandas as pd
import panel as pn

__all__ = ["LivePlot", "StreamPlot", "RESEND_S", "OUTPUT_BACKEND"]

#: seconds after which a rebuilt :class:`StreamPlot` figure is sent once more (:meth:`StreamPlot.heal`)
RESEND_S = 5.0
#: Bokeh output backend of the live figures. HoloViews draws with WebGL by default; without a GPU
#: (headless browsers, CI, remote desktops, this project's 2-core machine) WebGL is rendered in software and
#: every redraw is copied from the WebGL canvas: a live page cost chromium about 0.2 core more than with a
#: 2D canvas (``benchmarks/views_overhead.py``), and line plots of a few thousand points draw fast on canvas.
OUTPUT_BACKEND = "canvas"
_BACKEND_OPTS = {"plot.output_backend": OUTPUT_BACKEND}


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
