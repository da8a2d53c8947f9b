from __future__ import annotations

import json
import threading

from widgets.store import RunStore, list_runs
from widgets.synthetic import SyntheticRun, fabricate_run
from workbench.events import EpochEnd, Traffic


def test_frames_from_events(events):
    store = RunStore(events=events)
    assert store.run_id == "fab" and store.status == "finished" and store.world_size == 3
    ep = store.frame("epoch")
    assert len(ep) == 3 * 4 and set(ep["rank"]) == {0, 1, 2}
    assert (ep.groupby("rank")["cum_bytes"].diff().dropna() >= 0).all()
    assert store.epochs_done == 4
    tr = store.frame("traffic")
    assert tr["bytes"].sum() == sum(e.bytes for e in events if isinstance(e, Traffic))
    st = store.frame("staleness")
    assert set(st["state"]) == {"ACTIVE", "STALE"} and set(st["layer"]) == {0, 1}
    assert store.partition is not None and store.partition.num_parts == 3
    tot = store.epoch_totals()
    assert list(tot["epoch"]) == [0, 1, 2, 3]
    assert tot["cum_bytes"].iloc[-1] == ep["bytes_sent"].sum()


def test_empty_store_has_columns():
    store = RunStore()
    for kind in ("epoch", "traffic", "staleness", "cache", "progress"):
        assert store.frame(kind).empty
    assert "loss" in store.frame("epoch").columns
    assert store.epochs_done == 0 and store.status == "pending"
    assert store.headline()["final_loss"] is None


def test_version_changes_only_for_its_kind(events):
    store = RunStore()
    v_epoch, v_traffic = store.version("epoch"), store.version("traffic")
    store.push(EpochEnd(rank=0, epoch=0, loss=None, bytes_by_kind={"x": 3}))
    assert store.version("epoch") != v_epoch and store.version("traffic") == v_traffic
    assert store.frame("epoch")["loss"].isna().all()  # loss may be None


def test_from_log_and_follow(saved_run, events):
    store = RunStore.from_log(saved_run)
    assert store.num_events == len(events) and store.recipe == "sancus"
    assert store.config["num_parts"] == 3
    # follow a log that is being written: a torn last line is read once complete
    log = saved_run / "events.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:10]) + lines[10][:7])
    follow = RunStore.from_log(saved_run, follow=True)
    assert follow.num_events == 10
    log.write_text("".join(lines))
    assert follow.poll() == len(lines) - 10
    assert follow.status == "finished"
    assert [r["run_id"] for r in list_runs(saved_run.parent)] == ["fab"]


def test_push_dicts_and_bad_events():
    store = RunStore()
    store.push({"type": "epoch", "rank": 1, "epoch": 0, "loss": 0.5})
    store.push({"type": "traffic", "bytes": "not a number"})  # dropped, never raises
    assert len(store.frame("epoch")) == 1 and store.frame("traffic").empty


def test_concurrent_pushes():
    store = RunStore()

    def feed(rank):
        for epoch in range(200):
            store.push(EpochEnd(rank=rank, epoch=epoch, loss=1.0, bytes_by_kind={"halo": 1}))

    threads = [threading.Thread(target=feed, args=(r,)) for r in range(4)]
    for t in threads:
        t.start()
    for _ in range(20):
        store.frame("epoch")  # reading while writing
    for t in threads:
        t.join()
    assert len(store.frame("epoch")) == 800 and store.epochs_done == 200


def test_from_handle_gets_backlog_and_live_events_once(tmp_path):
    run = SyntheticRun(fabricate_run(num_parts=2, epochs=3), delay=0.01, out=str(tmp_path), run_id="live",
                       start=False)
    run.start()
    store = RunStore.from_handle(run)
    run.wait(10)
    store.poll()
    assert store.status == "finished"
    assert store.num_events == len(run.events)
    saved = [json.loads(line) for line in (tmp_path / "live" / "events.jsonl").read_text().splitlines()]
    assert len(saved) == len(run.events)


def test_failed_run_keeps_error():
    store = RunStore(events=fabricate_run(num_parts=2, epochs=4, fail_at=2))
    assert store.status == "failed" and "RankFailed" in store.error
    assert store.headline()["epochs"] == 2


def test_live_counts_follow_the_frames_at_every_step(events):
    """The status line's running tallies equal what the frames give, also while ranks are at different epochs."""
    store = RunStore()
    for ev in events:
        store.push(ev)
        counts, head = store.live_counts(), store.headline()
        assert counts["epochs_done"] == store.epochs_done
        assert counts["final_loss"] == head["final_loss"]
        assert counts["total_mb_sent"] == head["total_mb_sent"]
