"""Typed events round-trip through plain dicts, and the run log is written as events arrive."""

from __future__ import annotations

import json

import msgpack
import pytest

from workbench.events import (EVENT_TYPES, EpochEnd, FanOut, ListSink, RunLog, Staleness, Traffic,
                              event_from_dict, read_run_log)


@pytest.mark.parametrize("cls", list(EVENT_TYPES.values()))
def test_every_event_round_trips_through_msgpack(cls):
    ev = cls(run_id="r")
    packed = msgpack.packb(ev.to_dict())  # what Dask's event topics carry
    assert event_from_dict(msgpack.unpackb(packed)) == ev


def test_unknown_keys_are_ignored():
    d = EpochEnd(run_id="r", epoch=2, loss=1.5).to_dict()
    d["worker"] = "tcp://127.0.0.1:1"  # Dask adds this to worker-side events
    assert event_from_dict(d).epoch == 2


def test_run_log_is_flushed_per_event(tmp_path):
    log = RunLog(tmp_path, "run-1", recipe="demo", config={"epochs": 3})
    log.emit(EpochEnd(run_id="run-1", epoch=0, loss=1.0))
    # Readable before close: a crash right now would keep this event.
    lines = (tmp_path / "run-1" / "events.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["type"] == "epoch"
    log.emit(Staleness(run_id="run-1", rank=1, layer=0, epoch=0, state="STALE", ages=[1, 0]))
    with open(tmp_path / "run-1" / "events.jsonl", "a") as f:
        f.write('{"type": "traffic", "byt')  # a torn last line, as a crash would leave
    config, events = read_run_log(tmp_path / "run-1")
    assert config["recipe"] == "demo" and config["config"] == {"epochs": 3}
    assert [type(e) for e in events] == [EpochEnd, Staleness]
    log.close()


def test_fanout_survives_a_broken_sink():
    class Broken:
        def emit(self, event):
            raise RuntimeError("view crashed")

    ok = ListSink()
    FanOut(Broken(), ok).emit(Traffic(bytes=8))
    assert ok.of_type(Traffic)[0].bytes == 8
