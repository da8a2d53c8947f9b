"""EpochRecorder: progress events and the run log's per-link traffic detail (``traffic_detail``)."""

from __future__ import annotations

from collections import Counter

import pytest

from workbench._validation import ParamError
from workbench.compose import RunConfig
from workbench.events import EpochEnd, Progress, Traffic
from workbench.runtime import launch
from workbench.train.loop import TRAFFIC_DETAIL_EPOCHS, TRAFFIC_WINDOW_EPOCHS

EPOCHS = TRAFFIC_DETAIL_EPOCHS + 2 * TRAFFIC_WINDOW_EPOCHS + 17   # two whole windows and a partial one


def _run(detail: str, tmp_path, epochs: int = EPOCHS):
    cfg = RunConfig.compose(graph="karate", partition="random", epochs=epochs, model={"hidden": 4},
                            train={"traffic_detail": detail})
    handle = launch(cfg, runner="local", workers=2, out=tmp_path, run_id=f"detail-{detail}", blocking=True)
    handle.wait()
    return handle


def _link_sums(events) -> Counter:
    out: Counter = Counter()
    for e in events:
        if isinstance(e, Traffic):
            out[(e.src_rank, e.dst_rank, e.kind, e.layer)] += e.bytes
    return out


def test_auto_detail_keeps_totals_exact(tmp_path):
    fine, coarse = _run("epoch", tmp_path), _run("auto", tmp_path)
    fine_t = [e for e in fine.events if isinstance(e, Traffic)]
    coarse_t = [e for e in coarse.events if isinstance(e, Traffic)]
    assert all(e.num_epochs == 1 for e in fine_t)
    assert {e.epoch for e in fine_t} == set(range(EPOCHS))
    # the first epochs per link and epoch, then one record per link and window
    windows = sorted({(e.epoch, e.num_epochs) for e in coarse_t if e.num_epochs > 1})
    w = TRAFFIC_WINDOW_EPOCHS
    assert windows == [(TRAFFIC_DETAIL_EPOCHS, w), (TRAFFIC_DETAIL_EPOCHS + w, w), (TRAFFIC_DETAIL_EPOCHS + 2 * w, 17)]
    assert len(coarse_t) < len(fine_t) / 2
    # per link: the window sums equal the per-epoch sums exactly (the runs are deterministic)
    assert _link_sums(coarse_t) == _link_sums(fine_t)
    for epoch0, n in windows:
        in_window = [e for e in fine_t if epoch0 <= e.epoch < epoch0 + n]
        assert _link_sums(in_window) == _link_sums(e for e in coarse_t if e.epoch == epoch0 and e.num_epochs == n)
    # per-epoch totals by kind are always there, and add up to the traffic records
    for handle in (fine, coarse):
        by_kind: Counter = Counter()
        for e in handle.events:
            if isinstance(e, EpochEnd):
                by_kind.update(e.bytes_by_kind)
        traffic: Counter = Counter()
        for e in handle.events:
            if isinstance(e, Traffic):
                traffic[e.kind] += e.bytes
        assert by_kind == traffic
    assert fine.summary["bytes_by_kind"] == coarse.summary["bytes_by_kind"]


def test_progress_events_of_a_real_run(tmp_path):
    handle = _run("auto", tmp_path, epochs=3)
    progress = [e for e in handle.events if isinstance(e, Progress)]
    stages = [e.stage for e in progress]
    assert stages.index("graph") < stages.index("partition") < stages.index("epochs") < stages.index("evaluation")
    assert [(e.done, e.total) for e in progress if e.stage == "partition"] == [(0, 1), (1, 1)]
    for rank in (0, 1):   # the first and last epochs always report, the others at most every 0.5 s
        done = [e.done for e in progress if e.stage == "epochs" and e.rank == rank]
        assert done[0] == 1 and done[-1] == 3 and done == sorted(done)
    assert {e.total for e in progress if e.stage == "epochs"} == {3}
    assert sorted(e.rank for e in progress if e.stage == "evaluation") == [0, 1]
    assert all(e.rank is None for e in progress if e.stage in ("graph", "partition"))


def test_traffic_detail_is_validated():
    with pytest.raises(ParamError, match="traffic_detail"):
        RunConfig.compose(graph="karate", train={"traffic_detail": "sometimes"}).validate()
