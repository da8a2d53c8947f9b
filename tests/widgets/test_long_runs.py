"""Views of real and long runs: progress of a real run, totals under coarse per-link traffic detail,
the bulk log reader, and the staleness timeline of a 2,500-epoch run."""

from __future__ import annotations

import json

import holoviews as hv
import pandas as pd
import pytest

from widgets.compare import CompareView
from widgets.partition import PartitionView
from widgets.staleness import MAX_AGE_POINTS, StalenessView
from widgets.store import RunStore
from widgets.synthetic import fabricate_run
from widgets.traffic import TrafficView
from widgets.views import ProgressView, RunView
from workbench.communicate.netmodel import transport_seconds
from workbench.compose import RunConfig
from workbench.events import Progress, RunLog, Staleness
from workbench.runtime import launch
from workbench.train.loop import TRAFFIC_DETAIL_EPOCHS, TRAFFIC_WINDOW_EPOCHS

EPOCHS = TRAFFIC_DETAIL_EPOCHS + TRAFFIC_WINDOW_EPOCHS + 31


@pytest.fixture(scope="module")
def detail_runs(tmp_path_factory):
    """The same full-graph run logged with ``traffic_detail`` ``epoch`` and ``auto``: two run folders."""
    out = tmp_path_factory.mktemp("runs")
    runs = {}
    for detail in ("epoch", "auto"):
        cfg = RunConfig.compose(graph="karate", partition="random", epochs=EPOCHS, model={"hidden": 4},
                                train={"traffic_detail": detail})
        handle = launch(cfg, runner="local", workers=2, out=out, run_id=detail, blocking=True)
        handle.wait()
        runs[detail] = handle.log_dir
    return runs


def test_real_run_progress_in_the_store_and_view(tmp_path):
    cfg = RunConfig.compose(graph="karate", partition="metis", epochs=3, model={"hidden": 4})
    handle = launch(cfg, runner="local", workers=2, out=tmp_path, blocking=True)
    handle.wait()
    for store in (RunStore.from_handle(handle), RunStore.from_log(handle.log_dir)):
        rows = {r["stage"]: r for r in ProgressView(store).progress_rows()}
        assert {s: (rows[s]["done"], rows[s]["total"]) for s in rows} == {
            "graph": (1, 1), "partition": (1, 1), "epochs": (3, 3), "evaluation": (1, 1)}
        assert "34 vertices" in rows["graph"]["message"] and "metis" in rows["partition"]["message"]
        progress = store.frame("progress")
        assert sorted(progress[progress["stage"] == "epochs"]["rank"].unique()) == [0, 1]
    view = ProgressView(RunStore.from_log(handle.log_dir))
    assert "data-stage='epochs'" in view._bars.object and "<progress value='3' max='3'" in view._bars.object


def test_per_rank_progress_shows_the_slowest_rank():
    store = RunStore("r")
    store.push(Progress(stage="epochs", rank=0, done=5, total=10))
    store.push(Progress(stage="epochs", rank=1, done=3, total=10))
    store.push(Progress(stage="epochs", rank=0, done=6, total=10))
    assert (store.progress["epochs"].done, store.progress["epochs"].total) == (3, 10)
    assert "slowest rank 1" in store.progress["epochs"].message
    store.push(Progress(stage="epochs", rank=1, done=6, total=10))
    assert store.progress["epochs"].done == 6 and "slowest" not in store.progress["epochs"].message


def test_views_show_the_same_totals_under_coarse_traffic_detail(detail_runs):
    fine, coarse = (RunStore.from_log(detail_runs[d]) for d in ("epoch", "auto"))
    assert len(coarse.frame("traffic")) < len(fine.frame("traffic")) / 2
    assert (coarse.frame("traffic")["num_epochs"] > 1).any() and (fine.frame("traffic")["num_epochs"] == 1).all()
    tf, tc = TrafficView(fine, runs_dir=None), TrafficView(coarse, runs_dir=None)
    pd.testing.assert_frame_equal(tf.kind_frame(), tc.kind_frame())        # per epoch and kind: exact
    pd.testing.assert_frame_equal(tf.pair_frame(), tc.pair_frame())        # per rank pair over the run
    pd.testing.assert_frame_equal(tf.cumulative_frame().drop(columns="run"), tc.cumulative_frame().drop(columns="run"))
    # modelled time: equal per epoch where the detail is per epoch, equal summed over each window
    mf, mc = tf.time_frame().set_index("epoch")["modelled_s"], tc.time_frame().set_index("epoch")["modelled_s"]
    first = mf.index < TRAFFIC_DETAIL_EPOCHS
    assert mf[first].tolist() == pytest.approx(mc[first].tolist())
    assert mf.sum() == pytest.approx(mc.sum(), rel=1e-9)
    # the view's modelled time is workbench.communicate.netmodel's transport model of the coarse records
    ref = transport_seconds(coarse.traffic_events(), "10GbE", world_size=coarse.world_size)
    assert [ref[e] for e in sorted(ref)] == pytest.approx(mc.loc[sorted(ref)].tolist())
    # partition heatmap (from the partition event) and run comparison: unchanged
    pd.testing.assert_frame_equal(PartitionView(fine).comm_frame(), PartitionView(coarse).comm_frame())
    table = CompareView(lambda: {"epoch": fine, "auto": coarse}).table().set_index("run_id")
    assert table.loc["epoch", "total_mb_sent"] == table.loc["auto", "total_mb_sent"] > 0


def test_bulk_log_reader_matches_pushed_events(tmp_path):
    events = fabricate_run(num_parts=3, epochs=6, run_id="bulk")
    with RunLog(tmp_path, "bulk") as log:
        for ev in events:
            log.emit(ev)
    pushed, loaded = RunStore(events=events), RunStore.from_log(tmp_path / "bulk")
    assert loaded.num_events == pushed.num_events == len(events)
    for kind in ("epoch", "epoch_kind", "traffic", "staleness", "cache", "progress"):
        pd.testing.assert_frame_equal(pushed.frame(kind), loaded.frame(kind), check_dtype=False)
    assert (loaded.status, loaded.run_id, loaded.world_size, loaded.started) == \
        (pushed.status, pushed.run_id, pushed.world_size, pushed.started)
    assert loaded.progress.keys() == pushed.progress.keys()


def test_older_logs_and_bad_lines_still_load(tmp_path):
    folder = tmp_path / "old"
    folder.mkdir()
    lines = [{"type": "run_started", "run_id": "old", "time": 1.0, "world_size": 2},
             {"type": "progress", "run_id": "old", "time": 1.1, "stage": "partition", "done": 1, "total": 1},
             {"type": "traffic", "run_id": "old", "time": 1.2, "epoch": 0, "src_rank": 0, "dst_rank": 1,
              "kind": "halo_fwd", "layer": 0, "bytes": 64, "messages": 1}]
    text = "\n".join(json.dumps(d) for d in lines) + "\n{not json\n" + json.dumps({"type": "traffic", "bytes": "x"})
    (folder / "events.jsonl").write_text(text + "\n")
    store = RunStore.from_log(folder)
    assert store.num_events == 3 and store.progress["partition"].rank is None
    assert store.frame("traffic")[["bytes", "num_epochs"]].values.tolist() == [[64, 1]]


def _x_range(element) -> tuple[float, float]:
    fig = hv.render(element)
    return fig.x_range.start, fig.x_range.end


@pytest.mark.parametrize("last_epochs", [60, 250, 0])
def test_staleness_follows_the_window_and_stays_small(last_epochs):
    store = RunStore(events=fabricate_run(num_parts=4, epochs=2500, num_layers=2))
    store.push(Staleness(rank=2, layer=1, epoch=1234, state="STALE", ages=[0, 0, 0, 40]))   # one peak
    view = StalenessView(store, last_epochs=last_epochs)
    first, last = view.window()
    assert last == 2499 and first == (2500 - last_epochs if last_epochs else 0)
    ages, bucket = view.ages_data()
    assert len(ages) <= MAX_AGE_POINTS and ages["epoch"].min() == first
    # peaks survive the buckets: the largest age of the window is drawn
    window = view.plot_data().query("epoch >= @first")
    assert ages["max_age"].max() == window["max_age"].max() == (40 if last_epochs == 0 else 3)
    heat_cells = view._heat.element.data
    assert heat_cells["epoch"].min() == first and heat_cells["epoch"].max() == last
    for plot in (view._heat, view._ages):
        assert _x_range(plot.element) == (first - 0.5, last + 0.5)
    title = view._ages.element.opts.get().kwargs["title"]
    assert (f"maximum per {bucket} epochs" in title) if bucket > 1 else ("per epoch" in title)


def test_run_view_of_a_coarse_log_renders(detail_runs, render):
    view = RunView(detail_runs["auto"], runs_dir=None)
    render(view)
    assert view.store.epochs_done == EPOCHS
