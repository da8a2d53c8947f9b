"""The Dask runner on a 2-worker LocalCluster (gloo on 127.0.0.1): same results and bytes as the
in-process ranks, events streamed to the run log, stop, and bounded typed failures."""

from __future__ import annotations

import time

import pytest

from workbench.events import EpochEnd, RunFinished, Traffic, read_run_log
from workbench.runtime import RankFailed, RendezvousTimeout, WorkerLost, launch
from workbench.runtime.dask_pool import wait_for_recycling, wait_for_workers, worker_addresses
from workbench.testing.tiny_program import TinyConfig, expected_bytes_per_epoch


def _settled_workers(client) -> set[str]:
    """The cluster's workers once a previous failed run's worker restarts are over."""
    wait_for_recycling(client)
    wait_for_workers(client, 2, 60)
    return worker_addresses(client)

pytestmark = pytest.mark.slow


def _bytes_by_epoch(events) -> dict:
    out: dict = {}
    for e in events:
        if isinstance(e, Traffic):
            out.setdefault(e.epoch, {}).setdefault(e.kind, 0)
            out[e.epoch][e.kind] += e.bytes
    return out


def test_dask_matches_local_results_bytes_and_log(dask_client, tmp_path):
    local = launch(TinyConfig(epochs=3), runner="local", workers=2, out=None).wait(30)
    handle = launch(TinyConfig(epochs=3), runner="dask", scheduler=dask_client, out=tmp_path)
    summary = handle.wait(60)
    assert summary["x"] == pytest.approx(local["x"], rel=1e-6)
    assert summary["runner"] == "dask" and handle.dashboard_link
    assert summary["process_group"] == handle.process_group == "gloo on cpu"   # no GPU here
    assert _bytes_by_epoch(handle.events) == {e: expected_bytes_per_epoch(2) for e in range(3)}
    _, logged = read_run_log(handle.log_dir)
    assert [e.to_dict() for e in logged] == [e.to_dict() for e in handle.events]
    assert sorted((e.epoch, e.rank) for e in logged if isinstance(e, EpochEnd)) == \
        [(ep, r) for ep in range(3) for r in range(2)]
    assert logged[-1].status == "finished"


def test_dask_rank_error_is_typed_with_worker_and_step(dask_client, tmp_path):
    before = _settled_workers(dask_client)
    t0 = time.monotonic()
    handle = launch(TinyConfig(epochs=5, fail_rank=1, fail_epoch=2), runner="dask", scheduler=dask_client,
                    out=tmp_path)
    with pytest.raises(RankFailed) as info:
        handle.wait(60)
    assert time.monotonic() - t0 < 30
    err = info.value
    assert (err.rank, err.step, err.in_communication) == (1, 2, False)
    assert err.worker in before
    assert "told to fail" in err.remote_traceback
    _, events = read_run_log(handle.log_dir)
    assert {(e.rank, e.epoch) for e in events if isinstance(e, EpochEnd)} >= {(0, 1), (1, 1)}
    assert isinstance(events[-1], RunFinished) and events[-1].status == "failed"


def test_dask_worker_death_is_worker_lost_within_bound(dask_client, tmp_path):
    before = _settled_workers(dask_client)
    t0 = time.monotonic()
    handle = launch(TinyConfig(epochs=5, fail_rank=1, fail_epoch=2, fail_mode="exit"), runner="dask",
                    scheduler=dask_client, out=tmp_path, timeout=60)
    with pytest.raises(WorkerLost) as info:
        handle.wait(60)
    assert time.monotonic() - t0 < 30
    # the step after the last epoch the client heard of: 2, or 1 when the dying process's report of epoch 1 was
    # still in flight as it exited (events travel asynchronously; seen once under a loaded clean-clone run)
    assert info.value.rank == 1 and info.value.worker in before and info.value.step in (1, 2)
    _, events = read_run_log(handle.log_dir)
    # the step is one past the furthest epoch the client heard of from any rank (a lost worker's last reports may
    # die with it, so its peers' count: dask_runner._with_run_step), and the log holds all it heard
    heard = max((e.epoch for e in events if isinstance(e, EpochEnd)), default=-1)
    assert info.value.step <= heard + 1
    assert events[-1].status == "failed" and "was lost" in events[-1].error
    # the failed run's workers were replaced by fresh processes: the next run has two clean workers
    wait_for_workers(dask_client, 2, 60)


def test_a_worker_the_local_cluster_closed_is_started_again(dask_client):
    """A LocalCluster closes a worker's nanny for good when the worker is gone for longer than
    ``distributed.deploy.lost-worker-timeout`` (15 s; a restart after a failed run took that long on a loaded CI
    machine, and the next runs found one worker). What the cluster then does (``SpecCluster._update_worker_status``:
    close the nanny, drop it from ``cluster.workers``, keep it in the plan) is done here at once: the next run
    still gets its two workers, the closed one started again."""
    _settled_workers(dask_client)
    cluster = dask_client.cluster
    name = sorted(cluster.workers)[0]
    nanny = cluster.workers.pop(name)
    cluster.sync(nanny.close)
    assert launch(TinyConfig(epochs=1), runner="dask", scheduler=dask_client, out=None).wait(120)["epochs"] == 1
    assert len(cluster.workers) == 2 and cluster.workers[name] is not nanny


def test_dask_stop_after_failures_leaves_cluster_usable(dask_client):
    handle = launch(TinyConfig(epochs=1000, sleep_s=0.05), runner="dask", scheduler=dask_client, out=None)
    deadline = time.monotonic() + 60
    while not any(isinstance(e, EpochEnd) for e in handle.events) and time.monotonic() < deadline:
        time.sleep(0.05)
    handle.stop()
    handle.wait(60)
    assert handle.status == "stopped"
    assert launch(TinyConfig(epochs=1), runner="dask", scheduler=dask_client, out=None).wait(60)["epochs"] == 1


def test_busy_worker_gives_rendezvous_timeout_not_a_hang(dask_client):
    workers = sorted(_settled_workers(dask_client))
    # holds rank 1's only thread well past the 2 s rendezvous limit; not much longer, since the workers restart
    # after the error and a worker closes only once this sleep ends (under load a 30 s sleep left too little of
    # the minute below for the new process to start)
    busy = dask_client.submit(time.sleep, 12, workers=[workers[1]], pure=False)
    t0 = time.monotonic()
    handle = launch(TinyConfig(epochs=1), runner="dask", scheduler=dask_client, out=None, timeout=2)
    with pytest.raises(RendezvousTimeout) as info:
        handle.wait(60)
    assert time.monotonic() - t0 < 30
    assert info.value.worker == workers[1] and info.value.timeout_s == 2
    busy.cancel()
    wait_for_workers(dask_client, 2, 120)


def test_embedded_cluster_default(tmp_path):
    t0 = time.monotonic()
    handle = launch(TinyConfig(epochs=2), runner="dask", workers=2, out=tmp_path)
    assert handle.wait(120)["num_ranks"] == 2
    assert handle.dashboard_link.startswith("http://127.0.0.1:")
    print(f"embedded 2-worker LocalCluster + 2-rank run: {time.monotonic() - t0:.2f} s")
