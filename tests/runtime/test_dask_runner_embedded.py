"""The embedded LocalCluster of the Dask runner: every socket on loopback, a stop while the cluster
starts, and :func:`abort_runs` (a server shutting down) ending a run whose ranks would not stop soon."""

from __future__ import annotations

import ipaddress
import os
import time
from urllib.parse import urlparse

import psutil
import pytest

from workbench.events import EpochEnd, RunFinished
from workbench.runtime import launch
from workbench.runtime.dask_runner import abort_runs
from workbench.testing.tiny_program import TinyConfig

pytestmark = pytest.mark.slow


def _listening() -> set[tuple[int, str, int]]:
    """``(pid, ip, port)`` of every listening TCP socket of this process and its descendants."""
    me = psutil.Process(os.getpid())
    found = set()
    for proc in [me, *me.children(recursive=True)]:
        try:
            conns = proc.net_connections(kind="tcp")
        except psutil.Error:   # a process that ended meanwhile
            continue
        found |= {(proc.pid, c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN}
    return found


def _wait_for_epoch(handle, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not any(isinstance(e, EpochEnd) for e in handle.events):
        assert time.monotonic() < deadline and not handle.done(), f"no epoch within {timeout} s: {handle!r}"
        time.sleep(0.05)


def test_embedded_cluster_and_its_ranks_listen_on_loopback_only():
    before = _listening()
    handle = launch(TinyConfig(epochs=10_000, sleep_s=0.05), runner="dask", workers=2, out=None)
    try:
        _wait_for_epoch(handle)   # the process group is up: the rendezvous store and gloo listen too
        opened = _listening() - before
    finally:
        handle.stop()
        handle.wait(60)
    beyond = sorted(s for s in opened if not ipaddress.ip_address(s[1]).is_loopback)
    assert not beyond, f"listening beyond loopback (pid, address, port): {beyond}"
    ports = {port for _, _, port in opened}
    assert urlparse(handle.dashboard_link).port in ports        # the Dask dashboard, on 127.0.0.1
    workers = {pid for pid, _, _ in opened if pid != os.getpid()}
    assert len(workers) == 2                                    # the worker processes were looked at
    assert handle.status == "stopped"


def test_stop_while_the_cluster_starts_ends_the_run_before_any_rank():
    handle = launch(TinyConfig(epochs=10_000, sleep_s=0.05), runner="dask", workers=2, out=None)
    handle.stop()   # the embedded cluster is still starting
    handle.wait(60)
    assert handle.status == "stopped"
    assert not [e for e in handle.events if isinstance(e, EpochEnd)]


def test_abort_runs_ends_a_run_without_waiting_for_its_ranks(tmp_path):
    handle = launch(TinyConfig(epochs=3, sleep_s=60.0), runner="dask", workers=2, out=tmp_path)
    deadline = time.monotonic() + 120
    while handle.status != "running" or not handle.dashboard_link:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(2.0)           # the ranks are in their first epoch's 60 s sleep: a stop would wait for it
    handle.stop()
    t0 = time.monotonic()
    assert handle.run_id in abort_runs()
    handle.wait(30)
    assert time.monotonic() - t0 < 15    # the cluster closed (its busy workers ended) well before the sleep
    assert handle.status == "stopped"
    assert isinstance(handle.events[-1], RunFinished) and handle.events[-1].status == "stopped"
    assert handle.run_id not in abort_runs()   # a finished run leaves the registry
