"""launch / RunHandle on the in-process runners (single, local): results, events, run log, stop, failures."""

from __future__ import annotations

import pickle
import time

import pytest

from workbench._validation import ParamError
from workbench.events import EpochEnd, RunFinished, RunStarted, Traffic, read_run_log
from workbench.runtime import RankFailed, RendezvousTimeout, WorkerLost, launch
from workbench.testing.tiny_program import TinyConfig, TinyProgram, expected_bytes_per_epoch


@pytest.mark.parametrize("runner,world_size", [("single", 1), ("local", 2), ("local", 3)])
def test_run_finishes_with_summary_events_and_log(tmp_path, runner, world_size):
    handle = launch(TinyConfig(epochs=3), runner=runner, workers=world_size, out=tmp_path)
    summary = handle.wait(30)
    assert handle.status == "finished" and handle.error is None
    assert summary["epochs"] == 3 and summary["num_ranks"] == world_size and summary["runner"] == runner
    events = handle.events
    assert isinstance(events[0], RunStarted) and isinstance(events[-1], RunFinished)
    assert events[-1].status == "finished"
    assert all(e.run_id == handle.run_id for e in events)
    epochs = [e for e in events if isinstance(e, EpochEnd)]
    assert sorted((e.epoch, e.rank) for e in epochs) == [(ep, r) for ep in range(3) for r in range(world_size)]
    # traffic counted at the transport equals the base.py formulas, epoch by epoch
    for epoch in range(3):
        got: dict = {}
        for e in events:
            if isinstance(e, Traffic) and e.epoch == epoch:
                got[e.kind] = got.get(e.kind, 0) + e.bytes
        assert got == expected_bytes_per_epoch(world_size)
    config, logged = read_run_log(handle.log_dir)
    assert config["run_id"] == handle.run_id and config["config"]["epochs"] == 3
    assert [e.to_dict() for e in logged] == [e.to_dict() for e in events]


def test_local_runner_is_deterministic():
    a = launch(TinyConfig(epochs=3, seed=1), runner="local", workers=3, out=None).wait(30)
    b = launch(TinyConfig(epochs=3, seed=1), runner="local", workers=3, out=None).wait(30)
    assert a["x"] == b["x"]


def test_listeners_get_every_event_and_late_ones_get_a_replay():
    seen, late = [], []
    handle = launch(TinyConfig(epochs=2), runner="local", workers=2, out=None, listeners=[seen.append])
    handle.wait(30)
    handle.add_listener(late.append)
    assert [e.to_dict() for e in seen] == [e.to_dict() for e in handle.events]
    assert len(late) == len(seen)


def test_broken_listener_does_not_break_the_run():
    def bad(event):
        raise RuntimeError("view bug")

    assert launch(TinyConfig(epochs=2), runner="local", out=None, listeners=[bad]).wait(30)["epochs"] == 2


def test_events_reach_the_log_while_the_run_goes_and_stop_ends_it(tmp_path):
    handle = launch(TinyConfig(epochs=500, sleep_s=0.02), runner="local", workers=2, out=tmp_path)
    log = handle.log_dir / "events.jsonl"
    deadline = time.monotonic() + 20
    while '"type": "epoch"' not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert handle.status == "running" and '"type": "epoch"' in log.read_text()
    handle.stop()
    summary = handle.wait(20)
    assert handle.status == "stopped" and summary["stopped"]
    _, events = read_run_log(handle.log_dir)
    assert events[-1].status == "stopped"
    assert len({e.epoch for e in events if isinstance(e, EpochEnd)}) < 500


def test_failing_rank_raises_typed_error_quickly_and_log_keeps_everything(tmp_path):
    t0 = time.monotonic()
    handle = launch(TinyConfig(epochs=5, fail_rank=1, fail_epoch=2), runner="local", workers=3, out=tmp_path,
                    timeout=60)
    with pytest.raises(RankFailed) as info:
        handle.wait(30)
    assert time.monotonic() - t0 < 10
    err = info.value
    assert (err.rank, err.worker, err.step, err.in_communication) == (1, None, 2, False)
    assert "told to fail" in err.remote_traceback and "tiny_program.py" in err.remote_traceback
    assert handle.status == "failed" and handle.error is err
    _, events = read_run_log(handle.log_dir)
    assert {(e.rank, e.epoch) for e in events if isinstance(e, EpochEnd)} >= {(r, 1) for r in range(3)}
    assert isinstance(events[-1], RunFinished) and events[-1].status == "failed"
    assert "told to fail" in events[-1].error


def test_bad_arguments_are_rejected_before_anything_runs(tmp_path):
    with pytest.raises(ParamError, match=r"'runner' parameter of launch must be one of \['single', 'local', 'dask'\]"):
        launch(TinyConfig(), runner="mpi", out=tmp_path)
    with pytest.raises(ParamError) as info:
        launch(TinyConfig(), workers=0, timeout=-1, scheduler="tcp://x:1", out=tmp_path)
    assert len(info.value.errors) == 3
    for bad in (0, -1, "5", True, float("nan")):   # liveness: seconds a worker may go without a heartbeat
        with pytest.raises(ParamError, match=r"The 'liveness' parameter of launch must be a number in \(0, inf\]"):
            launch(TinyConfig(), runner="dask", liveness=bad, out=tmp_path)
    assert not list(tmp_path.iterdir())


def test_a_workers_count_the_run_would_not_use_is_refused(tmp_path):
    from workbench.compose import RunConfig

    two_parts = RunConfig.compose(graph="karate", num_parts=2, epochs=1)
    with pytest.raises(ParamError, match=r"The 'workers' parameter of launch must be 2 or left out \(num_parts=2 sets "
                                         r"the number of ranks\)\. Got 4 instead\."):
        launch(two_parts, runner="local", workers=4, out=tmp_path)
    with pytest.raises(ParamError, match=r"The 'workers' parameter of launch must be 1 or left out \(runner='single' "
                                         r"runs one rank.*Got 3 instead\."):
        launch(TinyConfig(), runner="single", workers=3, out=tmp_path)
    assert not list(tmp_path.iterdir())      # refused before the run started
    # left out: num_parts, else 2, else the single runner's one; the same count given explicitly runs too
    assert launch(two_parts, runner="local", out=None, blocking=True).world_size == 2
    assert launch(two_parts, runner="local", workers=2, out=None).wait(60)["world_size"] == 2
    assert launch(TinyConfig(epochs=1), runner="local", out=None, blocking=True).world_size == 2
    assert launch(TinyConfig(epochs=1), runner="single", out=None).wait(30)["num_ranks"] == 1
    assert launch(TinyConfig(epochs=1), runner="single", workers=1, out=None).wait(30)["num_ranks"] == 1


def test_prepare_errors_raise_from_launch_and_are_logged(tmp_path):
    with pytest.raises(ParamError, match="bad_prepare"):
        launch(TinyConfig(bad_prepare=True), out=tmp_path, run_id="bad")
    _, events = read_run_log(tmp_path / "bad")
    assert events[-1].status == "failed"


def test_wait_timeout_and_repr():
    handle = launch(TinyConfig(epochs=200, sleep_s=0.02), runner="local", out=None)
    with pytest.raises(TimeoutError):
        handle.wait(0.05)
    assert "running" in handle._repr_html_() and handle.run_id in repr(handle)
    handle.stop()
    handle.wait(20)
    assert "stopped" in handle._repr_html_()


def test_a_program_instance_can_be_launched():
    assert launch(TinyProgram(TinyConfig(epochs=1)), runner="single", out=None).wait(10)["epochs"] == 1


@pytest.mark.parametrize("err", [
    RankFailed(rank=1, worker="tcp://127.0.0.1:1", step=2, message="ValueError: x", remote_traceback="tb",
               exc_type="ValueError", in_communication=True),
    WorkerLost(rank=0, worker="tcp://127.0.0.1:2", step=None, message="gone"),
    RendezvousTimeout(rank=1, worker=None, message="slow", init_method="tcp://h:1", timeout_s=3.0),
])
def test_errors_pickle_with_their_fields(err):
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err) and vars(back) == vars(err)


def test_rendezvous_timeout_is_typed():
    import socket

    from workbench.runtime.dask_runner import join_process_group

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(RendezvousTimeout) as info:  # rank 0 of 2 waits for a rank 1 that never comes
        join_process_group("gloo", f"tcp://127.0.0.1:{port}", 0, 2, 1.0, None, "tcp://127.0.0.1:9")
    assert time.monotonic() - t0 < 15
    assert (info.value.rank, info.value.worker, info.value.timeout_s) == (0, "tcp://127.0.0.1:9", 1.0)
