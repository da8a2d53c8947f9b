"""Runs across emulated hosts (network namespaces on a bridge, links shaped with tbf): real Dask workers on
their own addresses, gloo over the shaped links, and four faults injected mid-run at the default settings, one
after the other on one cluster. Needs root."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

from workbench.events import EpochEnd, RunFinished, read_run_log
from workbench.runtime import RunError, SchedulerLost, WorkerLost, launch
from workbench.runtime.dask_pool import wait_for_recycling
from workbench.runtime.netcluster import NETNS_ETC, NetCluster, parse_rate, unavailable_reason
from workbench.testing.tiny_program import TinyConfig, TinyProgram

REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

GRAPH = "sbm:num_nodes=3000,num_blocks=4,avg_degree=10,num_features=64,seed=0"


def _leftovers(cluster: NetCluster) -> tuple[list, str]:
    """The namespaces (and their /etc/netns folders) and the links of ``cluster`` that still exist."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    names += [p.name for p in NETNS_ETC.glob(f"wb{cluster.tag}*")]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return [n for n in names if n.startswith(f"wb{cluster.tag}")], \
        "".join(line for line in links.splitlines(True) if f"wb{cluster.tag}" in line)


def test_a_run_crosses_the_shaped_links_and_nothing_is_left_behind():
    from recipes import full_graph

    cluster = NetCluster(hosts=2, bandwidth="100mbit")
    with cluster:
        assert {h.address for h in cluster.hosts} == {f"{cluster.subnet}.1", f"{cluster.subnet}.2"}
        s = launch(full_graph.recipe(graph=GRAPH, epochs=4), runner="dask", scheduler=cluster.scheduler_address,
                   workers=2, out=None, timeout=30).wait(timeout=180)
        pids = cluster.namespace_pids()
        for host, cpus in zip(cluster.hosts, cluster.host_cpus):   # each host on its own cores where they suffice
            out = subprocess.run(["ip", "netns", "pids", host.namespace], capture_output=True, text=True).stdout
            want = set(cpus) if cpus is not None else os.sched_getaffinity(0)
            assert out.split() and all(os.sched_getaffinity(int(pid)) == want for pid in out.split())
    # the ranks ran on the emulated hosts, and the bytes counted are the plan's
    assert s["world_size"] == 2 and s["bytes_per_epoch"] == s["predicted_bytes_per_epoch"] > 0
    # the links are shaped: each rank sends half the epoch's bytes through its own 100 Mbit/s link, so the
    # communication cannot take less than that at the link rate (loopback would take a fraction of it)
    bound = s["bytes_per_epoch"] / 2 * 8 / parse_rate("100mbit")
    assert sorted(s["comm_s"][1:])[1] >= 0.9 * bound
    assert len(pids) >= 3    # a scheduler and two workers were running in the namespaces
    assert _leftovers(cluster) == ([], "")
    assert not [pid for pid in pids if _running(pid)]


def test_each_host_knows_the_cluster_by_name_and_a_lookup_never_waits():
    """A namespace cannot reach the machine's name server: the cluster's hosts are in each namespace's own
    /etc/hosts, both ways, and a name nobody knows fails at once (torch 2.13's TCPStore looks up every peer:
    before, a rendezvous waited 10 s for the resolver's timeout)."""
    with NetCluster(hosts=2, bandwidth="1gbit", workers=False) as cluster:
        h0, h1 = cluster.hosts
        for host, other in ((h0, h1), (h1, h0)):
            def getent(*args):
                return subprocess.run(["ip", "netns", "exec", host.namespace, "getent", "hosts", *args],
                                      capture_output=True, text=True, timeout=30)
            assert getent(other.address).stdout.split()[:2] == [other.address, other.namespace]
            assert getent(other.namespace).stdout.split()[0] == other.address
            start = time.monotonic()
            assert getent("no-such-host.invalid").returncode != 0
            assert time.monotonic() - start < 3
    assert _leftovers(cluster) == ([], "")


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie awaiting its reaper is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture(scope="module")
def cluster():
    """One 2-host cluster for the faults and the slow rank (each repaired before the next)."""
    with NetCluster(hosts=2, bandwidth="1gbit") as c:
        yield c
    assert _leftovers(c) == ([], "")


SLOW_S = 8.0


class _SlowRank(TinyProgram):
    """Rank 1 sleeps ``SLOW_S`` seconds once, before its first epoch; rank 0 waits for it in its first call."""

    def run_rank(self, ctx, payload):
        if ctx.rank == 1:
            time.sleep(SLOW_S)
        return super().run_rank(ctx, payload)


def test_a_rank_slower_than_the_liveness_is_not_taken_for_lost(cluster):
    """Liveness is about the worker, not the rank's progress: a rank that sleeps longer than ``liveness`` keeps its
    worker heartbeating, and the run finishes."""
    import sys

    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])   # the workers cannot import this test module
    try:
        start = time.monotonic()
        summary = launch(_SlowRank(TinyConfig(epochs=2)), runner="dask", scheduler=cluster.scheduler_address,
                         workers=2, out=None, liveness=5).wait(timeout=120)
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert summary["epochs"] == 2 and summary["num_ranks"] == 2
    assert time.monotonic() - start >= SLOW_S


def _kill_host(cluster: NetCluster, index: int) -> None:
    """Every process of host ``index`` killed at once (SIGKILL): the host as if it had lost its power."""
    out = subprocess.run(["ip", "netns", "pids", cluster.hosts[index].namespace], capture_output=True, text=True)
    for pid in out.stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


# fault: (what it does, its repair, the error, what the error says was seen)
FAULTS = {
    "link cut": (lambda c: c.link_down(1), lambda c: c.link_up(1), WorkerLost, "no heartbeat from the worker"),
    "worker killed": (lambda c: c.kill_worker(1), lambda c: c.kill_worker(1, restart=True), WorkerLost,
                      "the worker process died or left the cluster"),
    "host killed": (lambda c: _kill_host(c, 1), lambda c: c.kill_worker(1, restart=True), WorkerLost,
                    "the worker process died or left the cluster"),
    "scheduler cut off": (lambda c: c.link_down("scheduler"), lambda c: c.link_up("scheduler"), SchedulerLost,
                          "did not answer"),
}


def test_each_fault_ends_the_run_within_seconds_at_default_settings_and_the_repaired_cluster_runs_again(
        cluster, tmp_path):
    """A worker's link cut, its worker killed, its host's processes killed, the scheduler's host cut off, one after
    the other on one cluster, each during a run at the default settings (``timeout`` 120 s, ``liveness`` 15 s):
    each ends the run well within 60 s with the typed error, on one line, naming the lost rank, its worker and host
    (or the scheduler) and what was seen; the run log is readable up to the failure and ends failed; after the
    repair the next run trains. A worker that is silent is found from its heartbeats (the scheduler would keep it
    for minutes, and the surviving rank waits in its call for the timeout)."""
    from recipes import full_graph

    took = {}
    for fault, (cause, repair, error, seen_text) in FAULTS.items():
        seen = threading.Event()
        handle = launch(full_graph.recipe(graph=GRAPH, epochs=100_000), runner="dask",
                        scheduler=cluster.scheduler_address, workers=2, out=str(tmp_path),
                        listeners=[lambda e, seen=seen: isinstance(e, EpochEnd) and e.epoch >= 2 and seen.set()])
        assert seen.wait(120), f"{fault}: the run never got to its third epoch"
        start = time.monotonic()
        cause(cluster)
        with pytest.raises(RunError) as info:
            handle.wait(timeout=90)
        took[fault] = time.monotonic() - start
        err = info.value
        assert type(err) is error, f"{fault}: {err.details()}"
        assert took[fault] < 60, f"{fault}: the run took {took[fault]:.0f} s to end"
        assert "\n" not in str(err) and seen_text in err.message, f"{fault}: {err}"
        assert err.step is not None and err.step >= 2
        if isinstance(err, SchedulerLost):
            assert err.scheduler == cluster.scheduler_address
        else:
            assert err.rank == 1 and err.worker.startswith(f"tcp://{cluster.hosts[1].address}:") and err.host
            assert f"rank 1 (worker {err.worker} on {err.host}) was lost" in str(err)
        _, events = read_run_log(handle.log_dir)
        assert isinstance(events[-1], RunFinished) and events[-1].status == "failed"
        assert any(isinstance(e, EpochEnd) and e.epoch >= 2 for e in events)
        repair(cluster)
        wait_for_recycling(cluster.scheduler_address)   # the run's surviving worker restarted
        cluster.wait_for_workers(2)
    print("fault to the run's end: " + ", ".join(f"{f} {t:.1f} s" for f, t in took.items()))
    again = launch(full_graph.recipe(graph="karate", epochs=2), runner="dask", scheduler=cluster.scheduler_address,
                   workers=2, out=None).wait(timeout=120)
    assert len(again["losses"]) == 2


def test_latency_without_netem_is_refused_not_ignored():
    from workbench.runtime.netcluster import _netem_available

    if _netem_available():
        pytest.skip("this kernel has netem: latency is emulated")
    with pytest.raises(ValueError, match="'latency' parameter of NetCluster must be None on a kernel without netem"):
        NetCluster(hosts=1, latency="0.2ms", workers=False).up()


def test_the_cli_brings_a_cluster_up_and_down(tmp_path):
    from workbench.runtime.netcluster import main

    state = tmp_path / "cluster.json"
    assert main(["up", "--hosts", "1", "--bandwidth", "1gbit", "--state", str(state)]) == 0
    import json

    info = json.loads(state.read_text())
    try:
        s = launch(__import__("recipes.full_graph", fromlist=["recipe"]).recipe(graph="karate", epochs=2),
                   runner="dask", scheduler=info["scheduler"], workers=1, out=None, timeout=30).wait(timeout=120)
        assert len(s["losses"]) == 2
    finally:
        assert main(["down", "--state", str(state)]) == 0
    assert not state.exists()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"wb{info['tag']}" not in names



def test_each_link_carries_gso_packets_that_fit_the_shaper_and_steers_a_flow_to_one_core():
    """tbf splits a GSO packet larger than its bucket into MTU-sized segments in software: with the kernel's
    64 KiB packets and a 24 KiB bucket that took most of two cores at three hosts' 1 Gbit/s and reordered
    segments (hundreds of spurious retransmissions a run, docs/benchmarks.rst). Every veth end caps its GSO
    packets below the burst (headers included) and steers a flow to one core, and a bulk transfer crosses."""
    import sys

    from workbench.runtime.netcluster import link_settings

    with NetCluster(hosts=2, bandwidth="1gbit", workers=False) as cluster:
        burst, gso = link_settings(cluster.rate_bps)
        assert gso + (gso // 1448 + 1) * 100 < burst    # payload and every segment's headers fit the bucket
        for host in cluster.hosts:
            for dev, ns in ((host.veth_root, None), (host.veth_host, host.namespace)):
                pre = ["ip", "netns", "exec", ns] if ns else []
                shown = subprocess.run(pre + ["ip", "-d", "link", "show", dev], capture_output=True, text=True).stdout
                assert f"gso_max_size {gso} " in shown
                assert f"burst {burst}b" in subprocess.run(pre + ["tc", "qdisc", "show", "dev", dev],
                                                           capture_output=True, text=True).stdout
                for queue in subprocess.run(pre + ["sh", "-c", f"cat /sys/class/net/{dev}/queues/rx-*/rps_cpus"],
                                            capture_output=True, text=True).stdout.split():
                    assert int(queue.replace(",", ""), 16) == (1 << os.cpu_count()) - 1
        a, b = cluster.hosts
        sink = subprocess.Popen(["ip", "netns", "exec", b.namespace, sys.executable, "-c", _SINK, b.address],
                                stdout=subprocess.PIPE, text=True)
        try:
            assert sink.stdout.readline().strip() == "ready"
            subprocess.run(["ip", "netns", "exec", a.namespace, sys.executable, "-c", _SOURCE, b.address],
                           check=True, timeout=60)
            assert int(sink.stdout.readline()) == 8 << 20
        finally:
            sink.kill()
            sink.wait()
    assert _leftovers(cluster) == ([], "")


_SINK = """
import socket, sys
server = socket.create_server((sys.argv[1], 5555))
print("ready", flush=True)
conn, _ = server.accept()
n = 0
while chunk := conn.recv(1 << 20):
    n += len(chunk)
print(n, flush=True)
"""
_SOURCE = """
import socket, sys
with socket.create_connection((sys.argv[1], 5555)) as s:
    s.sendall(bytes(8 << 20))
"""
