"""Every view of one run: :class:`RunView`, which composes the stage views (training curves, partition,
staleness, communication, cache, scheduler, pipeline, time) under a :class:`ProgressView`.

The view base (:class:`~widgets.base.StoreView`, :class:`~widgets.base.Refresher`, :func:`~widgets.base.as_store`,
colours) is in :mod:`widgets.base` and the live figures in :mod:`widgets.live_plots`; their names are importable
from here too. Imports point one way: ``views -> curves, partition, ... -> base -> live_plots``.

Example:
    >>> from widgets.synthetic import fabricate_run
    >>> view = RunView(fabricate_run(num_parts=2, epochs=3))
    >>> view.store.epochs_done
    3
"""

from __future__ import annotations

import html
import os
import time
from pathlib import Path
from typing import Any, Callable, Optional

import panel as pn

from widgets.base import (KIND_COLORS, PLOT_OPTS, PLOT_REDRAW_S, RANK_COLORS, REFRESH_MS, STATUS_COLORS, Refresher,
                          StoreView, as_store, empty_note, kind_color, rank_color)
from widgets.cache import CacheView
from widgets.curves import CurvesView
from widgets.live_plots import LivePlot, StreamPlot
from widgets.offline import Viewer
from widgets.partition import PartitionView
from widgets.pipeline import PipelineView
from widgets.schedule import ScheduleView
from widgets.staleness import StalenessView
from widgets.store import RunStore
from widgets.timing import TimingView
from widgets.traffic import TrafficView
from workbench._validation import check_float

__all__ = ["as_store", "StoreView", "ProgressView", "RunView", "Refresher", "LivePlot", "StreamPlot", "REFRESH_MS",
           "PLOT_REDRAW_S", "RANK_COLORS", "KIND_COLORS", "STATUS_COLORS", "PLOT_OPTS", "empty_note", "rank_color",
           "kind_color"]


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
        self._memory = pn.pane.HTML("", margin=(0, 10), disable_math=True)   # empty (no height) until the run ends
        self._bars = pn.pane.HTML("", margin=(0, 10), sizing_mode="stretch_width", disable_math=True)
        self._bars_next = 0.0
        self._bars_pending: Optional[str] = None  # bars not sent yet (throttled)
        return [pn.Row(self._status, self._counts, sizing_mode="stretch_width"), self._memory, self._failure,
                self._bars]

    @staticmethod
    def _peak_rss(summary: dict) -> str:
        """The line of each process's peak resident memory (the summary's ``peak_rss_mb``), once the run ended."""
        rss = summary.get("peak_rss_mb") or {}
        ranks = [r for r in rss.get("ranks") or [] if r is not None]
        if rss.get("client") is None and not ranks:
            return ""
        text = [f"client <b>{rss['client']:,.0f} MiB</b>"] if rss.get("client") is not None else []
        text += [f"ranks {', '.join(f'{r:,.0f}' for r in ranks)} MiB (largest <b>{max(ranks):,.0f} MiB</b>)"] \
            if ranks else []
        return "<span class='wb-peak-rss' style='color:#444'>peak resident memory: " + " · ".join(text) + "</span>"

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
        if s.dashboard_link and not s.done:   # the cluster's dashboard shows a live run
            link = html.escape(s.dashboard_link, quote=True)
            parts.append(f"<a href='{link}' target='_blank' class='wb-dask-link'>Dask dashboard</a>")
        counts = [f"epochs done: <b class='wb-epochs'>{h['epochs_done']}</b>"]
        if h["final_loss"] is not None:
            counts.append(f"loss {h['final_loss']:.4g}")
        counts.append(f"{h['total_mb_sent']:.3g} MB sent")
        sep = " &nbsp;·&nbsp; "
        self._set(self._status, sep.join(parts) + sep)
        self._set(self._counts, sep.join(counts))
        # its text only: toggling a pane's visibility lays the whole status out again, which blanked it in the
        # browser for a moment as the run ended
        self._set(self._memory, self._peak_rss(s.summary or {}))
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
            return CacheView(self.store, stores=self._compare_stores, defer=True)

        def scheduler():
            return ScheduleView(self.store, defer=True)

        def pipeline():
            return PipelineView(self.store, defer=True)

        def timing():
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
