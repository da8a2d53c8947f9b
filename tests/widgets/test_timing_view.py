"""The time view: seconds per phase, stacked per rank and epoch, and each phase's share of the run; its
RunView tab (in a notebook output and from a saved log), long runs, and the store's step_times frame."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import panel as pn
import pytest

from widgets.store import RunStore
from widgets.synthetic import fabricate_run
from widgets.timing import MAX_BARS, PHASE_COLORS, TimingView, largest_remainder
from widgets.views import PLOT_REDRAW_S, RunView
from workbench.events import STEP_PHASES, RunLog, StepTimes


def _run(run_id="t", num_parts=3, epochs=6, **kw):
    return fabricate_run(run_id=run_id, num_parts=num_parts, epochs=epochs, step_times=True, **kw)


def _rectangles(view) -> dict[str, hv.Rectangles]:
    return {el.label: el for el in view._bars.element if isinstance(el, hv.Rectangles)}


def test_one_glyph_group_per_phase_with_its_colour_and_legend_entry(render):
    view = TimingView(_run())
    render(view)
    assert not view._error.visible, view._error.object
    rects = _rectangles(view)
    assert list(rects) == list(reversed(STEP_PHASES))          # the legend reads the stack from top to bottom
    assert all(len(r) == 3 * 6 for r in rects.values())       # one segment per rank and epoch
    fig = hv.render(view._bars.element)
    glyphs = [r for r in fig.renderers if type(r.glyph).__name__ == "Quad"]
    assert [g.glyph.fill_color for g in glyphs] == [PHASE_COLORS[p] for p in reversed(STEP_PHASES)]
    assert [item.label["value"] for item in fig.legend[0].items] == list(reversed(STEP_PHASES))
    assert "per rank and epoch (3 ranks)" in fig.title.text


def test_bars_stack_to_each_epochs_total_and_shares_sum_to_100():
    events = _run()
    view = TimingView(events)
    seg, bucket = view.bar_frame()
    assert bucket == 1
    tops = seg.groupby(["rank", "epoch"])["y1"].max()
    for ev in (e for e in events if isinstance(e, StepTimes)):
        assert tops[(ev.rank, ev.epoch)] == pytest.approx(sum(ev.seconds.values()))
        assert tops[(ev.rank, ev.epoch)] == pytest.approx(ev.wall_s)
    assert seg.groupby(["rank", "epoch"])["share"].sum().to_numpy() == pytest.approx(1.0)
    # ranks are groups on x, with a gap between them
    xs = seg.groupby("rank")["x"].agg(["min", "max"])
    assert (xs["min"].iloc[1:].to_numpy() > xs["max"].iloc[:-1].to_numpy() + 1).all()
    shares = view.shares()
    assert sum(shares.values()) == pytest.approx(1.0) and set(shares) == set(STEP_PHASES)
    percents = view.share_percents()
    assert sum(percents.values()) == 100
    assert "wb-time-share" in view._shares.object and f"{percents['forward']} %" in view._shares.object
    dominant = max(shares, key=shares.get)
    assert f"<b class='wb-time-dominant'>{dominant}</b>" in view._stats.object


def test_largest_remainder_sums_to_the_total():
    rng = np.random.default_rng(0)
    for _ in range(50):
        w = rng.random(9) ** 3
        out = largest_remainder(dict(zip(STEP_PHASES, w / w.sum())))
        assert sum(out.values()) == 100 and all(v >= 0 for v in out.values())
    assert largest_remainder({}) == {}


def test_a_long_run_is_bucketed_to_at_most_max_bars():
    view = TimingView(_run(num_parts=4, epochs=600), last_epochs=0)
    seg, bucket = view.bar_frame()
    bars = seg[seg["phase"] == "sample"]
    assert bucket > 1 and len(bars) <= MAX_BARS + 4 and bars["epoch"].min() == 0
    assert f"mean epoch of {bucket}" in view._bars.element.opts.get().kwargs["title"]
    # a bar of a bucket is the mean epoch of its epochs
    frame = view.epoch_frame()
    one = bars[(bars["rank"] == 2)].iloc[3]
    a, b = (int(x) for x in one["epochs"].split("–"))
    expect = frame[(frame["rank"] == 2) & frame["epoch"].between(a, b)]["sample"].mean()
    assert one["seconds"] == pytest.approx(expect)
    view.last_epochs = 30                                  # a window of the latest epochs: one bar each
    seg, bucket = view.bar_frame()
    assert bucket == 1 and sorted(seg["epoch"].unique()) == list(range(570, 600))


def test_the_store_keeps_step_times_from_events_and_from_a_log(tmp_path):
    events = _run(run_id="log", epochs=3)
    with RunLog(tmp_path, "log") as log:
        for ev in events:
            log.emit(ev)
    pushed, read = RunStore(events=events).frame("step_times"), RunStore.from_log(tmp_path / "log").frame("step_times")
    assert len(pushed) == 9 and list(pushed.columns[-len(STEP_PHASES):]) == list(STEP_PHASES)
    cols = ["rank", "epoch", "steps", "program", "wall_s", *STEP_PHASES]
    assert pushed[cols].equals(read[cols])
    store = RunStore()
    store.push(StepTimes(rank=0, epoch=0, steps=2, seconds={"forward": 0.5, "warmup": 0.25}, wall_s=0.75))
    row = store.frame("step_times").iloc[0]
    assert row["forward"] == 0.5 and row["other"] == 0.25 and row["fetch"] == 0.0   # unknown phase: other
    assert store.version("step_times") == (1,)


def test_the_time_tab_tells_the_seconds_overlapped_off_the_critical_path():
    """``StepTimes.overlapped`` (a batches-ahead thread's sampling and pulls) is kept per rank and epoch, in no share
    and not in the epoch's stack (it adds nothing to the epoch) but in a slim bar beside it, and the line above the
    bars tells it beside the ``sample`` wait."""
    store = RunStore()
    for rank in (0, 1):
        store.push(StepTimes(rank=rank, epoch=0, steps=2, seconds={"sample": 0.01, "forward": 0.5}, wall_s=0.51,
                             overlapped={"sample": 0.25, "fetch": 0.125}))
    view = TimingView(store)
    frame = view.epoch_frame()
    assert list(frame["overlapped_sample"]) == [0.25, 0.25] and list(frame["overlapped_fetch"]) == [0.125, 0.125]
    assert list(frame["total"]) == [pytest.approx(0.51)] * 2
    segments = view.bar_frame()[0]
    assert set(segments["phase"]) == set(STEP_PHASES) | {"sample ahead", "fetch ahead"}
    epoch, ahead = segments[segments["phase"].isin(STEP_PHASES)], segments[segments["phase"].str.endswith(" ahead")]
    beside = ahead.groupby("x")["x0"].min() - epoch.groupby("x")["x1"].max()       # per bar: the slim one's left edge
    assert ((beside > 0) & (beside < 0.2)).all()                                      # just right of the epoch's
    assert epoch.groupby("rank")["y1"].max().tolist() == [pytest.approx(0.51)] * 2     # the epoch's stack: its time
    assert ahead.groupby("rank")["y1"].max().tolist() == [pytest.approx(0.375)] * 2    # the slim bar: 250 + 125 ms
    assert "sample ahead" in [el.label for el in view._figure(segments, 1)[0]]
    stats = view._stats_html(frame)
    assert "off the critical path: <b>375 ms</b> (sample 250 ms, fetch 125 ms; waited for: sample 10 ms)" in stats
    plain = RunStore()
    plain.push(StepTimes(rank=0, epoch=0, steps=2, seconds={"forward": 0.5}, wall_s=0.5))
    assert "critical path" not in TimingView(plain)._stats_html(TimingView(plain).epoch_frame())
    assert set(TimingView(plain).bar_frame()[0]["phase"]) == set(STEP_PHASES)          # no slim bar without it


def test_time_tab_appears_when_step_times_arrive_and_renders_in_a_notebook(render):
    events = _run(run_id="nb", epochs=4)
    store = RunStore(events=[e for e in events if e.type != "step_times"])
    view = RunView(store, runs_dir=None)
    render(view)                                           # a notebook output (a comm, no server)
    assert view.timing is None and "Time" not in view._tabs._names
    store.extend([e for e in events if e.type == "step_times"])
    view.refresh()
    assert view.timing is not None and view._tabs._names[-1] == "Time"
    assert view.timing.title == "Time" and view.timing.min_redraw_s == PLOT_REDRAW_S
    view._tabs.active = len(view._tabs) - 1
    assert view.visible_views() == [view.progress, view.timing]
    assert view.timing.up_to_date() and not view.timing._error.visible
    holder = view._tabs[len(view._tabs) - 1]
    assert holder.objects and view.timing._bars.pane in holder.select(pn.pane.HoloViews)
    assert view.timing._bars.rebuilds == 1


def test_live_updates_patch_the_figure_at_most_every_plot_redraw_s(render):
    events = _run(run_id="live", num_parts=2, epochs=8)
    steps = [e for e in events if isinstance(e, StepTimes)]
    store = RunStore(events=[e for e in events if not isinstance(e, StepTimes)] + steps[:4])
    view = RunView(store, runs_dir=None, plot_redraw_s=0.0)
    render(view)
    view._tabs.active = len(view._tabs) - 1
    timing = view.timing
    assert timing.min_redraw_s == 0.0
    for i in range(4, len(steps), 2):
        store.extend(steps[i:i + 2])
        timing._next_ok = 0.0                              # as if plot_redraw_s had passed
        view.refresh()
    assert timing._bars.rebuilds == 1 and timing._bars.updates == 6  # same ranks: patched in place
    assert timing.bar_frame()[0]["epoch"].max() == 7
    plain = TimingView(store)
    store.push(StepTimes(rank=0, epoch=8, seconds=dict.fromkeys(STEP_PHASES, 0.1), wall_s=0.9))
    assert plain.min_redraw_s == PLOT_REDRAW_S and not plain.refresh()   # throttled: drawn a moment ago


def test_empty_view_and_a_saved_report(tmp_path):
    empty = TimingView(fabricate_run(epochs=2))
    assert empty._note.visible and not empty._bars.visible and empty.shares() == {}
    view = RunView(RunStore(events=_run(run_id="rep", epochs=3)), runs_dir=None)
    out = view.save(tmp_path / "report.html")
    assert "wb-report-time" in out.read_text()


def test_a_real_run_fills_the_time_tab(tmp_path, render):
    from workbench.runtime import launch
    from workbench.compose import RunConfig

    cfg = RunConfig.compose(graph="karate", partition="random", epochs=3, model={"hidden": 4})
    handle = launch(cfg, runner="local", workers=2, out=tmp_path, run_id="real", blocking=True)
    handle.wait()
    view = RunView(handle.log_dir, runs_dir=None)
    render(view)
    assert view.timing is not None and "Time" in view._tabs._names
    timing = view.timing
    timing.refresh(force=True)
    frame = timing.epoch_frame()
    assert len(frame) == 6 and (frame[list(STEP_PHASES)] >= 0).all().all()
    assert frame["total"].to_numpy() == pytest.approx(frame["wall_s"].to_numpy(), rel=1e-6, abs=1e-9)
    assert sum(timing.share_percents().values()) == 100 and not timing._error.visible
    opts = timing._bars.element.opts.get().kwargs
    assert opts["ylabel"] == "ms per epoch"                # a karate epoch takes milliseconds
