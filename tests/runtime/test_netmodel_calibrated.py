"""The network model against what it measures, on the emulated cluster (network namespaces, links shaped with
tbf; needs root): ``netprobe`` finds the link's payload rate, and the transport model calibrated by it predicts
the communication time of a full-graph run. The whole table (3 recipes x 2, 3 hosts x 100 Mbit/s, 1 Gbit/s) is
``benchmarks/network_model.py``."""

from __future__ import annotations

import statistics

import pytest

from workbench.communicate.netmodel import resolve_network
from workbench.communicate.netprobe import probe
from workbench.runtime import launch
from workbench.runtime.netcluster import NetCluster, parse_rate, unavailable_reason

REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

# layer 0 aggregates before it transforms, so its halo rows are 128 wide: ~1.1 MB each way per epoch, about
# 0.1 s at 100 Mbit/s against a few ms of compute (the model has no compute to wait for: keep it small)
GRAPH = "sbm:num_nodes=4000,num_blocks=4,avg_degree=10,num_features=128,seed=0"


def test_the_probed_model_predicts_a_full_graph_run_on_100mbit_links():
    from recipes import full_graph

    with NetCluster(hosts=2, bandwidth="100mbit") as cluster:
        cluster.prioritise(-10)     # the hosts share this machine's cores with whatever else runs
        s = probe(scheduler=cluster.scheduler_address, workers=2, pings=50, bulk_bytes=4 << 20, repeats=2,
                  rounds=20, link_rate="100mbit", timeout=30)
        line = parse_rate("100mbit") / 8
        # TCP/IP over a 1500-byte MTU carries 1448 payload bytes per 1514-byte frame: 95.6 % of the line rate
        assert 0.85 * line <= s["payload_Bps"] <= 1.15 * line, s
        assert s["model"].bandwidth_Bps == line and s["model"].effective_Bps == pytest.approx(s["payload_Bps"])
        assert 0 < s["latency_s"] < 0.01
        net = resolve_network(s["model"].spec)      # what --network takes
        run = launch(full_graph.recipe(graph=GRAPH, epochs=7, model={"order": "aggregate-first"}), runner="dask",
                     scheduler=cluster.scheduler_address, workers=2, out=None, timeout=30,
                     network=net).wait(timeout=180)
    assert run["bytes_per_epoch"] == run["predicted_bytes_per_epoch"] > 1e6          # accounting untouched
    assert len(run["modelled_comm_s"]) == len(run["comm_s"]) == 7 and run["network"]["spec"] == net.spec
    # the least disturbed epoch after the first: on a shared machine other work stalls the ranks now and then, and
    # the measured comm_s (the slowest rank's) counts the stall as communication (benchmarks/network_model.py
    # reports the medians and the load)
    measured, modelled = min(run["comm_s"][1:]), statistics.median(run["modelled_comm_s"][1:])
    # the model may not claim more time than the link took (+25 %); how close it comes below depends on how
    # quiet the machine is (the +-25 % target is benchmarks/network_model.py's, on a machine to itself): the test
    # holds it to within 2x so a shared CI machine does not fail it by chance
    assert 0.5 <= modelled / measured <= 1.25, (run["comm_s"], run["modelled_comm_s"])
