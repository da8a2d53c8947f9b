"""Layer-1 tests of every view on a saved run log: build the Panel object, check the plotted data."""

from __future__ import annotations

import dataclasses

import threading
import time

import holoviews as hv
import numpy as np
import panel as pn
import pytest

from widgets.curves import CurvesView
from widgets.partition import PartitionView, partition_event, spring_layout
from widgets.staleness import StalenessView
from widgets.store import RunStore
from widgets.synthetic import fabricate_run
from widgets.traffic import TrafficView
from widgets.views import ProgressView, RunView, StoreView, as_store


def _shown(pane):
    """The HoloViews object a pane shows (a live plot's pane holds a DynamicMap fed by a Pipe)."""
    obj = pane.object
    return obj[()] if isinstance(obj, hv.DynamicMap) else obj


def _titles(view) -> list[str]:
    out = []
    for pane in view._layout.select(pn.pane.HoloViews):
        if pane.object is not None and pane.visible:
            out.append(_shown(pane).opts.get().kwargs.get("title", ""))
    return out


def test_views_on_saved_log(saved_run, render):
    view = RunView(saved_run, runs_dir=saved_run.parent)
    assert view.store.status == "finished" and view.store.epochs_done == 4
    render(view)
    assert view.partition._last is None and not view.partition._layout.select(pn.pane.HoloViews)[0].object
    for i in range(len(view._tabs)):  # the other tabs draw when first opened
        view._tabs.active = i
    for thread in threading.enumerate():   # the partition's vertex drawing is laid out in a thread of its own
        if thread.name == "partition-layout":
            thread.join(60)
    for v in view.views:
        if not v.up_to_date():   # a drawing that landed after its tab drew: the page's periodic refresh shows it
            v.refresh(force=True)
        assert v.up_to_date() and not v._error.visible, v._error.object
    assert "Loss per rank" in _titles(view.curves)
    assert any("Vertices per part" in t for t in _titles(view.partition))
    assert any("ACTIVE" in t for t in _titles(view.staleness))
    assert any("Bytes sent per epoch" in t for t in _titles(view.traffic))


def test_curves_axes(events):
    store = RunStore(events=events)
    view = CurvesView(store)
    df = view.plot_data()
    assert len(df) == 12 and list(df["x"]) == list(df["epoch"])
    view.x = "cum_bytes"
    np.testing.assert_allclose(view.plot_data()["x"], store.frame("epoch")["cum_bytes"] / 1e6)
    view.x = "elapsed_s"
    assert (view.plot_data()["x"] > 0).all()
    loss = view._loss.element
    assert isinstance(loss, hv.NdOverlay) and sorted(loss.keys()) == [0, 1, 2]


def test_partition_view_frames(events):
    view = PartitionView(events, rebuild=False)
    ev = view.store.partition
    sizes = view.sizes_frame()
    assert sizes[sizes.what == "inner"]["vertices"].tolist() == ev.part_sizes
    assert sizes[sizes.what == "halo"]["vertices"].tolist() == ev.halo_sizes
    comm = view.comm_frame()
    assert comm["rows"].sum() == np.asarray(ev.comm_rows).sum() and len(comm) == 9
    assert "quotient" in view._draw.object.opts.get().kwargs["title"]


def test_partition_view_draws_small_graph():
    from workbench.data import load_graph
    from workbench.partition import partition

    g = load_graph("karate")
    res = partition(g, 2, method="metis", seed=0)
    view = PartitionView(res)
    for _ in range(100):
        if view._drawing_state in ("ready", "unavailable"):
            break
        import time

        time.sleep(0.05)
    assert view._drawing_state == "ready"
    view.refresh(force=True)
    assert "34 vertices" in view._draw.object.opts.get().kwargs["title"]
    assert partition_event(res).part_sizes == np.bincount(np.asarray(res.node_part)).tolist()


def test_partition_view_big_graph_is_a_quotient_graph(events):
    ev = events[6]
    ev.metrics["num_nodes"] = 10_000_000
    view = PartitionView([ev])
    assert view._drawing_state == "unavailable" and "quotient" in view._draw.object.opts.get().kwargs["title"]


def test_spring_layout_in_unit_box():
    src = np.array([0, 1, 2, 3]); dst = np.array([1, 2, 3, 0])
    pos = spring_layout(src, dst, 6)
    assert pos.shape == (6, 2) and np.isfinite(pos).all() and pos.min() >= -0.05 and pos.max() <= 1.05


def test_staleness_view(events):
    view = StalenessView(events)
    df = view.plot_data()
    assert set(df["row"]) == {f"rank {r} · L{l}" for r in range(3) for l in range(2)}
    assert view.param.layer.objects == ["all", "0", "1"]
    view.layer = "1"
    df = view.plot_data()
    assert set(df["layer"]) == {1} and set(df["row"]) == {"rank 0", "rank 1", "rank 2"}
    heat = view._heat.element
    assert "ages of cached blocks" in [d.label for d in heat.vdims]
    assert "stale cells" in view._stats.object


def test_staleness_view_without_events():
    events = [e for e in fabricate_run(epochs=2) if e.type != "staleness"]
    view = StalenessView(events)
    assert view._note.visible and not view._heat.visible


def test_traffic_view(events, tmp_path):
    from workbench.events import RunLog

    with RunLog(tmp_path, "baseline") as log:
        for ev in fabricate_run(run_id="baseline", epochs=4, byte_scale=2.0):
            log.emit(ev)
    view = TrafficView(events, runs_dir=tmp_path)
    kinds = view.kind_frame()
    assert set(kinds["kind"]) == {"broadcast", "all_reduce"}
    pairs = view.pair_frame()
    assert len(pairs) == 9 and pairs["bytes"].sum() == view.store.frame("traffic")["bytes"].sum()
    view.kind = "broadcast"
    assert view.pair_frame()["bytes"].sum() == kinds[kinds.kind == "broadcast"]["bytes"].sum()
    times = view.time_frame()
    assert len(times) == 4 and (times["measured_s"] > 0).all()
    if view._model is not None:
        assert (times["modelled_s"] > 0).all()
    assert str(tmp_path / "baseline") in view.param.baseline.objects
    view.baseline = str(tmp_path / "baseline")
    cum = view.cumulative_frame()
    assert cum["run"].nunique() == 2
    last = cum.groupby("run")["MB"].max()
    assert last.max() > last.min()  # the baseline sends twice the bytes


def test_progress_view_failed_run():
    view = ProgressView(fabricate_run(num_parts=2, epochs=4, fail_at=2))
    assert view._failure.visible and "RankFailed" in view._failure.object
    assert "failed" in view._status.object


def test_progress_and_dask_link(events):
    events[0].dashboard_link = "http://127.0.0.1:8787/status"
    assert "8787" in ProgressView(events[:10])._status.object    # live: the cluster's dashboard
    view = ProgressView(events)
    assert "8787" not in view._status.object                     # finished: an embedded cluster closed with it
    row, = [r for r in view.progress_rows() if r["stage"] == "epochs"]
    assert row["done"] == row["total"] == 4
    assert "<progress value='4' max='4'" in view._bars.object


def test_progress_shows_each_processs_peak_rss_once_the_run_ended(events):
    """``summary["peak_rss_mb"]``: the client's and the largest rank's, every rank's in the tooltip."""
    live = ProgressView(events[:10])
    assert live._memory.object == ""
    done = list(events)
    done[-1] = dataclasses.replace(done[-1], summary={**done[-1].summary,
                                                      "peak_rss_mb": {"client": 412.5, "ranks": [980.2, 1210.0]}})
    view = ProgressView(done)
    assert view._memory.object == ("<span class='wb-peak-rss' style='color:#444'>peak resident memory: client "
                                   "<b>412 MiB</b> · ranks 980, 1,210 MiB (largest <b>1,210 MiB</b>)</span>")


def test_views_render_at_every_stage_of_a_run(events, render):
    for n in (0, 1, 7, 20, len(events)):
        view = RunView(events[:n], runs_dir=None)
        render(view)
        for i in range(len(view._tabs)):
            view._tabs.active = i
        assert not any(v._error.visible for v in view.views), n
        assert all(len(tab) == 1 for tab in view._tabs[1:]), n


def test_live_updates_and_throttle(events):
    store = RunStore()
    view = CurvesView(store)
    assert view._note.visible
    store.extend(events[:30])
    assert view.refresh(force=True)
    assert not view.refresh()  # nothing new
    n = len(view.plot_data())
    store.extend(events[30:])
    view._next_ok = 0
    assert view.refresh() and len(view.plot_data()) > n


def test_first_events_and_the_end_of_a_run_are_drawn_at_once(events):
    """The throttle holds back neither a view's first events (a view built before its run's first event,
    as the dashboard shows a run started from its form, drops its placeholder at once) nor the end of the
    run (drawn in the refresh that shows the status "finished", not a throttle period later)."""
    from workbench.events import EpochEnd, RunFinished

    body = [e for e in events if not isinstance(e, RunFinished)]
    first = next(i for i, e in enumerate(body) if isinstance(e, EpochEnd))
    store = RunStore(events=body[:first])
    view = CurvesView(store)
    assert view._note.visible and view._next_ok > time.monotonic()     # drawn empty just now: throttled
    store.extend(body[first:first + 3])
    assert view.refresh() and not view._note.visible                   # first epochs: at once
    store.extend(body[first + 3:])
    assert not view.refresh() and not view.up_to_date()                 # more: throttled
    store.push(RunFinished(run_id="fab", status="finished"))
    assert view.refresh() and view.up_to_date()                          # the end: at once
    assert sum(map(len, view._loss.series.values())) == len(store.frame("epoch"))
    store.push(EpochEnd(run_id="fab", rank=0, epoch=99, loss=0.1))       # after the end: throttled again
    assert not view.refresh()


def test_broken_view_shows_a_message_not_a_traceback(events):
    class Broken(StoreView):
        def _update(self):
            raise KeyError("boom")

    view = Broken(events)
    assert view._error.visible and "boom" in view._error.object
    # the message says which frame raised (a rare failure inside a library is then found from one page)
    assert "at tests/widgets/test_views.py:" in view._error.object and "KeyError: 'boom'" in view.last_error


def test_a_view_that_failed_once_draws_again_on_the_next_refresh(events):
    """A transient failure (a race inside the plotting library, say) must not leave the view broken until
    new events arrive: the failed view is not up to date, so the next refresh draws it again."""
    class Flaky(StoreView):
        min_redraw_s = 0.0
        calls = 0

        def _update(self):
            type(self).calls += 1
            if type(self).calls == 1:
                raise RuntimeError("Set changed size during iteration")

    view = Flaky(events)
    assert view._error.visible and not view.up_to_date()
    view._next_ok = 0.0
    assert view.refresh() and not view._error.visible and view.up_to_date()


def test_as_store_shares_one_store_per_handle(tmp_path):
    from widgets.synthetic import SyntheticRun

    run = SyntheticRun(fabricate_run(epochs=2), delay=0.01, out=None, run_id="x")
    assert as_store(run) is as_store(run)
    run.wait(10)
    with pytest.raises(TypeError):
        as_store(42)


def test_only_the_open_tab_refreshes(events, render):
    store = RunStore(events=events[:10])
    view = RunView(store, runs_dir=None)
    render(view)
    assert view.visible_views() == [view.progress, view.curves]
    store.extend(events[10:])
    view.curves._next_ok = 0
    view.refresh()
    assert view.curves.up_to_date() and not view.traffic.up_to_date()
    view._tabs.active = 3  # opening a tab brings its view up to date
    assert view.traffic.up_to_date()
    assert view.visible_views() == [view.progress, view.traffic]


def test_plots_redraw_at_most_every_plot_redraw_s_and_the_status_line_at_2_hz(events):
    """Live figures redraw at most every ``PLOT_REDRAW_S`` (a figure is painted whole by the browser, which
    competes with the ranks for the cores); ``RunView(plot_redraw_s=)`` sets it for every figure view,
    tabs added later included, and never for the status line."""
    from widgets.synthetic import fabricate_pipeline
    from widgets.views import PLOT_REDRAW_S

    view = RunView(RunStore(events=events), runs_dir=None)
    assert view.curves.min_redraw_s == PLOT_REDRAW_S == 2.0 and view.progress.min_redraw_s == 0.5
    store = RunStore(events=events)
    fast = RunView(store, runs_dir=None, plot_redraw_s=0.5)
    assert {v.min_redraw_s for v in fast.views} == {0.5}
    store.extend(fabricate_pipeline(run_id=store.run_id))
    fast.refresh()
    assert fast.pipeline is not None and fast.pipeline.min_redraw_s == 0.5
    slow = RunView(RunStore(events=events), runs_dir=None, plot_redraw_s=10)
    assert slow.progress.min_redraw_s == 0.5 and slow.traffic.min_redraw_s == 10
    with pytest.raises(ValueError, match="'plot_redraw_s'.*RunView.*-1"):
        RunView(RunStore(events=events), runs_dir=None, plot_redraw_s=-1)


def _epoch_cut(events, n):
    """Index of the event after the first ``n`` EpochEnd events."""
    from workbench.events import EpochEnd

    ends = [i for i, ev in enumerate(events) if isinstance(ev, EpochEnd)]
    return ends[n - 1] + 1


def test_curves_refresh_streams_only_the_new_rows(render, monkeypatch):
    """After N new EpochEnd events a refresh sends each plot exactly those N rows, and the Bokeh sources
    then hold the same rows as the frame (no duplicated or dropped points, epochs in order per rank)."""
    from bokeh.models import ColumnDataSource, GlyphRenderer

    events = fabricate_run(num_parts=3, epochs=12, num_layers=2, run_id="fab")
    streamed = []
    original = ColumnDataSource.stream

    def spy(self, new_data, rollover=None, **kw):
        streamed.append(len(next(iter(new_data.values()))))
        return original(self, new_data, rollover, **kw)

    monkeypatch.setattr(ColumnDataSource, "stream", spy)
    store = RunStore(events=events[:_epoch_cut(events, 15)])  # 5 epochs of 3 ranks
    view = CurvesView(store)
    root = render(view)
    store.extend(events[_epoch_cut(events, 15):_epoch_cut(events, 22)])  # N = 7 new EpochEnd events
    view._next_ok = 0
    assert view.refresh()
    assert sum(streamed) == 2 * 7  # the loss and the accuracy plot
    assert view._loss.rows_sent == view._acc.rows_sent == 7
    assert view._loss.rebuilds == view._acc.rebuilds == 1
    assert not view.refresh(force=True) or sum(streamed) == 14  # nothing new: nothing sent
    frame = view.plot_data()
    sources = [r.data_source for r in root.select({"type": GlyphRenderer})]
    loss_sources = [s for s in sources if "loss" in s.data]
    assert len(sources) == 6 and len(loss_sources) == 3  # 3 ranks x 2 plots
    by_rank = {}
    for source in loss_sources:  # which rank: the one whose rows the source holds
        epochs, loss = list(source.data["epoch"]), np.asarray(source.data["loss"])
        assert epochs == list(range(len(epochs)))  # every epoch once, in order
        rank = next(r for r, part in frame.groupby("rank")
                    if len(part) == len(loss) and np.allclose(part["loss"], loss))
        by_rank[rank] = len(epochs)
    assert by_rank == frame.groupby("rank").size().to_dict()  # one source per rank, all its rows


def test_stream_plot_rebuilds_when_a_shown_row_changes():
    import pandas as pd

    from widgets.views import StreamPlot

    plot = StreamPlot(lambda name, df: hv.Curve(df, "epoch", "loss", label=str(name)))
    plot.show({0: pd.DataFrame({"epoch": [0, 1], "loss": [1.0, 0.5]})}, shape="a")
    late = pd.DataFrame({"epoch": [0, 1, 2], "loss": [1.0, 0.7, 0.4]})  # epoch 1 changed
    plot.show({0: late}, shape="a")
    assert plot.rebuilds == 2 and plot.rows_sent == 0
    pd.testing.assert_frame_equal(plot.series[0], late)
    plot.show({0: late, 1: late}, shape="a")  # a new series: a new figure
    assert plot.rebuilds == 3
    plot.show({}, shape="a", empty=lambda: hv.Curve([]))
    assert plot.rebuilds == 4 and plot.element is not None


def test_traffic_lines_stream_finished_epochs_only(render):
    events = fabricate_run(num_parts=3, epochs=10, num_layers=2, run_id="fab")
    body = [ev for ev in events if type(ev).__name__ != "RunFinished"]  # a run still going
    store = RunStore(events=body[:_epoch_cut(body, 9)])  # epochs 0-2 done by every rank
    view = TrafficView(store, runs_dir=None)
    render(view)
    assert len(view._times.series["measured"]) == store.epochs_done == 3
    store.extend(body[_epoch_cut(body, 9):_epoch_cut(body, 16)])  # epochs 3, 4 done; 5 begun by one rank
    view._next_ok = 0
    assert view.refresh()
    assert store.epochs_done == 5
    assert view._times.rebuilds == 1 and view._times.rows_sent == 2 * len(view._times.series)
    assert view._cum.rebuilds == 1 and view._cum.rows_sent == 2
    store.extend(body[_epoch_cut(body, 16):])
    view._next_ok = 0
    view.refresh()
    full = view.time_frame()
    np.testing.assert_allclose(view._times.series["measured"]["measured_s"], full["measured_s"])


def test_stream_plot_page_opened_later_draws_the_streamed_rows(render):
    import pandas as pd
    from bokeh.models import GlyphRenderer

    from widgets.views import StreamPlot

    def frame(n):
        return pd.DataFrame({"epoch": list(range(n)), "loss": [1.0 / (e + 1) for e in range(n)]})

    plot = StreamPlot(lambda name, df: hv.Curve(df, "epoch", "loss", label=str(name)))
    plot.show({0: frame(2)}, shape="a")
    first = render(plot)
    plot.show({0: frame(4)}, shape="a")
    second = render(plot)  # opened after rows were streamed to the first
    plot.show({0: frame(5)}, shape="a")  # streamed to both
    assert (plot.rebuilds, plot.updates, plot.rows_sent) == (1, 2, 3)
    for root in (first, second):
        source, = [g.data_source for g in root.select({"type": GlyphRenderer})]
        assert list(source.data["epoch"]) == [0, 1, 2, 3, 4]


def test_progress_sends_only_changed_text_and_throttles_the_bars():
    events = fabricate_run(num_parts=2, epochs=6)
    store = RunStore(events=events[:len(events) // 3])
    view = ProgressView(store)
    sent = []
    for pane in (view._status, view._counts, view._bars):
        pane.param.watch(lambda e: sent.append(e.obj), "object")
    view.refresh(force=True)  # same texts: nothing goes to the browser
    assert sent == []
    store.extend(events[len(events) // 3:2 * len(events) // 3])
    view._next_ok = 0
    assert view.refresh()
    assert view._counts in sent and view._status not in sent  # the run's status did not change
    assert view._bars not in sent and not view.up_to_date()  # bars: at most once a second
    view._bars_next = 0
    assert view.refresh() and view._bars in sent and view.up_to_date()  # shown without a new event
    store.extend(events[2 * len(events) // 3:])
    view._next_ok = 0
    view.refresh()
    assert view.up_to_date() and "<progress value='6' max='6'" in view._bars.object  # the end: at once
