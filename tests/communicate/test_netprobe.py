"""``workbench netprobe``: the probe program on thread ranks (the Dask/gloo path runs on the emulated cluster in
tests/runtime/test_netmodel_calibrated.py), its arithmetic, and the command line."""

from __future__ import annotations

import json

import pytest

from workbench.cli import build_parser, main
from workbench.communicate.netmodel import NetworkModel, resolve_network
from workbench.communicate.netprobe import NetProbe, probe, summarize_probe


def test_the_probe_measures_every_pair_and_gives_a_model():
    s = probe(runner="local", workers=3, pings=20, bulk_bytes=1 << 20, repeats=1, rounds=5, busy_s=0.001)
    model = s["model"]
    assert isinstance(model, NetworkModel) and model.name == "netprobe" and model.efficiency == 1.0
    assert s["world_size"] == 3 and s["latency_s"] > 0 and s["payload_Bps"] > 1e6
    assert len(s["payload_rates_Bps"]) == 2 * 2        # 0 -> j and j -> 0 for j = 1, 2, one repeat each
    assert 0 < s["duplex"] <= 1 and s["a2a_call_s"] > 0 and s["allreduce_call_s"] > 0
    assert s["a2a_busy_call_s"] > 0 and s["allreduce_busy_call_s"] > 0
    assert resolve_network(model.spec).bandwidth_Bps == pytest.approx(model.bandwidth_Bps, rel=1e-3)


def test_a_link_rate_turns_the_payload_rate_into_an_efficiency():
    m = {"rtt_s": [2e-4] * 5, "one_way": [(8e6, 0.0672), (8e6, 0.0682)], "both_ways": [(8e6, 0.0688)],
         "a2a_s": [1e-3], "allreduce_s": [3e-4]}
    s = summarize_probe(m, world_size=2, link_rate=125e6)
    assert s["payload_Bps"] == pytest.approx((8e6 / 0.067 + 8e6 / 0.068) / 2)    # the median rate, less a round trip
    assert s["model"].bandwidth_Bps == 125e6 and s["model"].effective_Bps == pytest.approx(s["payload_Bps"])
    # idle calls only: the all-reduce's 0.3 ms less its 2 rounds is call_s, the all-to-all's rest exchange_s
    assert s["model"].call_s == pytest.approx(3e-4 - 2e-4) and s["model"].exchange_s == pytest.approx(1e-3 - 2e-4)
    m.update(allreduce_busy_s=[2.2e-3], a2a_busy_s=[5e-3])      # after a compute step, when measured
    s = summarize_probe(m, world_size=2)
    assert (s["model"].call_s, s["model"].exchange_s) == pytest.approx((2e-3, 5e-3 - 1e-4 - 2e-3))
    assert NetProbe(link_rate="1gbit").link_rate == 125e6
    with pytest.raises(ValueError, match="NetProbe needs"):
        NetProbe(pings=0)


def test_the_command_prints_a_model_that_run_accepts(tmp_path, capsys):
    assert "netprobe" in build_parser().format_help()
    out = tmp_path / "net.json"
    import workbench.communicate.netprobe as netprobe

    real = netprobe.probe
    netprobe.probe = lambda **kw: real(runner="local", **{k: v for k, v in kw.items() if k != "scheduler"})
    try:
        assert main(["netprobe", "--workers", "2", "--pings", "10", "--bulk-mb", "1", "--repeats", "1",
                     "--out", str(out)]) == 0
        text = capsys.readouterr().out
        assert "latency" in text and "--network " in text
        assert resolve_network(str(out)).name == "netprobe"
        assert main(["netprobe", "--workers", "2", "--pings", "10", "--bulk-mb", "1", "--repeats", "1", "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert resolve_network(summary).bandwidth_Bps == summary["model"]["bandwidth_Bps"]
    finally:
        netprobe.probe = real


def test_a_run_with_a_network_carries_the_modelled_communication_beside_the_measured(tmp_path, capsys):
    from recipes import full_graph
    from workbench._validation import ParamError
    from workbench.communicate.netmodel import transport_seconds
    from workbench.runtime import launch

    handle = launch(full_graph.recipe(graph="karate", epochs=3), runner="local", workers=2, out=None,
                    network="1gbit,0.1ms")
    s = handle.wait()
    traffic = [e for e in handle.events if e.type == "traffic"]
    expected = transport_seconds(traffic, "1gbit,0.1ms", world_size=2)
    assert s["modelled_comm_s"] == pytest.approx([expected[e] for e in range(3)]) and len(s["comm_s"]) == 3
    assert s["network"]["bandwidth_Bps"] == 125e6 and s["network"]["spec"] == "125MB/s,100us"
    assert "modelled_comm_s" not in launch(full_graph.recipe(graph="karate", epochs=1), runner="single",
                                           out=None).wait()
    with pytest.raises(ParamError, match="'network' parameter of launch must be one of"):
        launch(full_graph.recipe(graph="karate", epochs=1), runner="single", out=None, network="fast")
    capsys.readouterr()
    assert main(["run", "full_graph", "--graph", "karate", "--epochs", "2", "--workers", "2", "--out", str(tmp_path),
                 "--network", "10GbE"]) == 0
    out = capsys.readouterr().out
    assert "communication per epoch (median): measured" in out and "modelled" in out and "on 1250MB/s,20us" in out


def test_a_calls_time_starts_when_the_last_rank_arrives():
    """On cores shared by more ranks than cores, a busy call's time on a rank is mostly its wait for a slower
    rank's compute; the model predicts the runs' critical path (comm_critical_s), so the probe times each call
    from the last rank's arrival to the last return."""
    probe_program = NetProbe(link_rate="1gbit")
    base = {"rtt_s": [2e-4], "one_way": [(8e6, 0.0672)], "both_ways": [(8e6, 0.0688)], "a2a_s": [(0.0, 1e-3)],
            "allreduce_s": [(0.0, 3e-4)]}
    early = dict(base, a2a_busy_s=[(10.0, 10.0061)], allreduce_busy_s=[(20.0, 20.0042)])   # waited 4-6 ms
    late = dict(base, a2a_busy_s=[(10.005, 10.006)], allreduce_busy_s=[(20.004, 20.0041)])
    s = probe_program.summarize([early, late])
    assert s["a2a_busy_call_s"] == pytest.approx(1.1e-3) and s["allreduce_busy_call_s"] == pytest.approx(2e-4)
    assert s["model"].call_s == pytest.approx(2e-4 - 2e-4, abs=1e-12)


@pytest.mark.parametrize("argv,message", [
    (["--pings", "0"], "The '--pings' parameter of workbench netprobe must be an int >= 1. Got 0 instead."),
    (["--bulk-mb", "-1"], "The '--bulk-mb' parameter of workbench netprobe must be a size >= 0.0009765625 (1 KiB)"),
    (["--workers", "0"], "The '--workers' parameter of workbench netprobe must be an int >= 1"),
])
def test_bad_flags_are_one_message_before_a_cluster_starts(capsys, monkeypatch, argv, message):
    """They were a ValueError naming ``bulk_bytes`` from inside the probe, after the cluster had started."""
    monkeypatch.setattr("workbench.communicate.netprobe.probe", lambda **kw: pytest.fail("the probe started"))
    assert main(["netprobe", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
