from __future__ import annotations

import dataclasses
import json

import pytest

from workbench._validation import ParamError
from workbench.communicate.netmodel import (NETWORK_PRESETS, NetworkModel, modelled_seconds, parse_network,
                                            resolve_network, transport_seconds)
from workbench.events import EpochEnd, Traffic


def test_presets_exist_and_order_by_speed():
    assert set(NETWORK_PRESETS) == {"1GbE", "10GbE", "25GbE", "100GbE", "nvlink"}
    ev = [Traffic(epoch=0, src_rank=0, dst_rank=1, kind="halo_fwd", bytes=10**8, messages=10)]
    for model in ("sender", "transport"):
        times = [modelled_seconds(ev, name, model=model)[0] for name in ("1GbE", "10GbE", "25GbE", "100GbE", "nvlink")]
        assert times == sorted(times, reverse=True)


def test_model_sums_links_per_rank_and_takes_the_slowest_rank_per_epoch():
    net = NetworkModel(latency_s=1e-3, bandwidth_Bps=1e6)
    events = [
        Traffic(epoch=0, src_rank=0, dst_rank=1, kind="a", bytes=1000, messages=2),   # 2 ms + 1 ms
        Traffic(epoch=0, src_rank=0, dst_rank=2, kind="a", bytes=2000, messages=1),   # 1 ms + 2 ms
        Traffic(epoch=0, src_rank=1, dst_rank=0, kind="b", bytes=500, messages=1),    # 1 ms + 0.5 ms
        Traffic(epoch=1, src_rank=1, dst_rank=0, kind="b", bytes=0, messages=4),      # 4 ms
        EpochEnd(epoch=0, rank=0),                                                    # ignored
    ]
    assert modelled_seconds(events, net) == pytest.approx({0: 6e-3, 1: 4e-3})
    assert modelled_seconds(events, net, per_rank=True)[0] == pytest.approx({0: 6e-3, 1: 1.5e-3})
    assert modelled_seconds(events, net, kinds=["b"]) == pytest.approx({0: 1.5e-3, 1: 4e-3})
    # dicts from a run log work the same
    assert modelled_seconds([e.to_dict() for e in events], net) == pytest.approx({0: 6e-3, 1: 4e-3})


def test_bad_preset_and_model_values():
    with pytest.raises(ParamError, match="'preset' parameter of modelled_seconds must be one of"):
        modelled_seconds([], "2GbE")
    with pytest.raises(ParamError, match="'model' parameter of modelled_seconds must be one of"):
        modelled_seconds([], "10GbE", model="exact")
    with pytest.raises(ParamError) as info:
        NetworkModel(latency_s=-1, bandwidth_Bps=0, efficiency=1.5, duplex=0)
    assert len(info.value.errors) == 4


# ------------------------------------------------------------------------------------------------ transport model
NET = NetworkModel(latency_s=1e-4, bandwidth_Bps=1e6)     # 100 us, 1 MB/s: 1 kB = 1 ms


def _t(src, dst, kind="halo_fwd", layer=0, nbytes=0, messages=1, epoch=0, **kw):
    return Traffic(epoch=epoch, src_rank=src, dst_rank=dst, kind=kind, layer=layer, bytes=nbytes, messages=messages,
                   **kw)


def test_an_exchange_uses_both_directions_of_each_link_at_once():
    # rank 0 sends 4 kB and receives 3 kB: the full-duplex link takes the larger (4 ms), not the sum
    ev = [_t(0, 1, nbytes=4000), _t(1, 0, nbytes=3000)]
    assert transport_seconds(ev, NET)[0] == pytest.approx(1e-4 + 4e-3)     # one round + 4 kB
    # a rank that only receives is bound by its downlink: 1 and 2 both send 2 kB to 0
    ev = [_t(1, 0, nbytes=2000), _t(2, 0, nbytes=2000)]
    assert transport_seconds(ev, NET)[0] == pytest.approx(1e-4 + 4e-3)     # one round + 4 kB into 0
    # the sender model sees two senders of 2 kB each: 2.1 ms (the receiver's link is not modelled)
    assert modelled_seconds(ev, NET)[0] == pytest.approx(2.1e-3)
    # efficiency scales the payload rate, duplex slows links busy both ways, call_s is paid per exchange call
    net = NetworkModel(1e-4, 1e6, efficiency=0.5, duplex=0.8, call_s=1e-3)
    ev = [_t(0, 1, nbytes=4000, messages=2), _t(1, 0, nbytes=4000, messages=2)]
    assert transport_seconds(ev, net)[0] == pytest.approx(2 * (1e-4 + 1e-3) + 4000 / (0.5e6 * 0.8))


def test_phases_run_in_sequence_and_epochs_apart():
    ev = [_t(0, 1, "halo_fwd", 0, 1000), _t(1, 0, "halo_fwd", 0, 1000),     # layer 0: 1 ms + 1 round
          _t(0, 1, "halo_fwd", 1, 500), _t(1, 0, "halo_fwd", 1, 500),       # layer 1: 0.5 ms + 1 round
          _t(0, 1, "halo_bwd", 1, 500), _t(1, 0, "halo_bwd", 1, 500),       # backward: 0.5 ms + 1 round
          _t(0, 1, "allreduce", -1, 100), _t(1, 0, "allreduce", -1, 100),   # ring, p = 2: 2 rounds + 0.1 ms
          _t(0, 1, "halo_fwd", 0, 2000, epoch=1), _t(1, 0, "halo_fwd", 0, 2000, epoch=1),
          EpochEnd(epoch=0, rank=0)]                                         # ignored
    phases = transport_seconds(ev, NET, per_phase=True)
    assert phases[0] == pytest.approx({("halo_fwd", 0): 1.1e-3, ("halo_fwd", 1): 0.6e-3, ("halo_bwd", 1): 0.6e-3,
                                       ("allreduce", -1): 0.3e-3})
    assert transport_seconds(ev, NET) == pytest.approx({0: 2.6e-3, 1: 2.1e-3})
    assert modelled_seconds(ev, NET, model="transport") == transport_seconds(ev, NET)
    assert transport_seconds(ev, NET, kinds=["allreduce"]) == pytest.approx({0: 0.3e-3})
    # run-log dicts work the same; a window of epochs spreads evenly over them
    assert transport_seconds([e.to_dict() for e in ev], NET) == pytest.approx({0: 2.6e-3, 1: 2.1e-3})
    window = [_t(0, 1, nbytes=4000, messages=2, epoch=10, num_epochs=2), _t(1, 0, nbytes=4000, messages=2, epoch=10,
                                                                             num_epochs=2)]
    assert transport_seconds(window, NET) == pytest.approx({10: 2.1e-3, 11: 2.1e-3})


def test_ring_allreduce_is_2_p_minus_1_latency_rounds_and_a_broadcast_a_binomial_tree():
    # ring all-reduce of n = 3 kB on 3 ranks: each rank sends 2 (p - 1) / p n = 2 kB to its successor
    ring = [_t(r, (r + 1) % 3, "allreduce", -1, 2000) for r in range(3)]
    assert transport_seconds(ring, NET)[0] == pytest.approx(4 * 1e-4 + 2e-3)
    assert transport_seconds(ring, NET, world_size=5)[0] == pytest.approx(8 * 1e-4 + 2e-3)
    assert transport_seconds([_t(0, 1, "eval_metrics", -1, 8)], NET)[0] == pytest.approx(2 * 1e-4 + 8e-6)
    # gloo's broadcast of n = 1 kB from 0 on 3 ranks: the root sends n in each of ceil(log2 3) = 2 rounds;
    # counted as a pipelined ring (1 kB on 0 -> 1 and 1 -> 2)
    bcast = [_t(0, 1, "bcast_fwd", 0, 1000), _t(1, 2, "bcast_fwd", 0, 1000)]
    assert transport_seconds(bcast, NET)[0] == pytest.approx(2 * 1e-4 + 2e-3)
    # three roots in turn (SANCUS): every link counts 2 messages, 3 calls
    bcast = [_t(r, (r + 1) % 3, "bcast_bwd", 1, 2000, messages=2) for r in range(3)]
    assert transport_seconds(bcast, NET)[0] == pytest.approx(3 * 2 * 1e-4 + 2 * 6000 / 2 / 1e6)
    assert transport_seconds([_t(0, 1, nbytes=10**6)], NET, world_size=1) == {0: 0.0}


def test_networks_from_specs_files_and_dicts(tmp_path):
    net = parse_network("117MB/s,85us,eff=0.9,duplex=0.95,call=0.5ms")
    assert (net.bandwidth_Bps, net.latency_s, net.efficiency, net.duplex, net.call_s) == \
        pytest.approx((117e6, 85e-6, 0.9, 0.95, 5e-4))
    assert parse_network(net.spec) == dataclasses.replace(net, name=net.spec)   # the spec round-trips
    assert resolve_network("100mbit").bandwidth_Bps == 12.5e6 and resolve_network("1gbit,0.1ms").latency_s == 1e-4
    assert resolve_network("1Gbit/s").bandwidth_Bps == resolve_network("125MB/s").bandwidth_Bps == 125e6
    path = tmp_path / "net.json"
    path.write_text(json.dumps(net.to_dict()))
    assert resolve_network(str(path)) == net and resolve_network(path) == net
    path.write_text(json.dumps({"model": net.to_dict(), "latency_s": 1.0}))       # a whole netprobe summary
    assert resolve_network(str(path)) == net
    assert resolve_network(net.to_dict()) == net and resolve_network(NETWORK_PRESETS["10GbE"]).name == "10GbE"
    assert resolve_network({**net.to_dict(), "spec": net.spec}) == net   # a run summary's network
    for bad, match in [("fast", "'preset' parameter of modelled_seconds must be one of"),
                       ("10 furlongs", "'preset' parameter of modelled_seconds must be one of"),
                       ("10 furlongs,1ms", "'bandwidth' parameter of resolve_network must be a rate"),
                       ("10MB/s,soon", "'latency' parameter of resolve_network must be a time"),
                       ("10MB/s,1ms,eff=x", "'eff' parameter of resolve_network must be a number"),
                       ("10MB/s,1ms,jitter=1ms", "'network' parameter of resolve_network must be a spec"),
                       (str(tmp_path / "missing.json"), "must be an existing file")]:
        with pytest.raises(ParamError, match=match):
            resolve_network(bad)
    with pytest.raises(ParamError, match="'network' parameter of launch must be one of"):
        resolve_network("fast", name="network", owner="launch")


def test_a_network_file_that_is_no_model_is_one_error_naming_it(tmp_path):
    """Malformed JSON, a missing bandwidth and a misspelt field (it was dropped: efficiency stayed 1.0) each give one
    error naming the parameter, not a JSONDecodeError or TypeError."""
    cases = {"bad.json": ('{"bandwidth_Bps": ', r"a JSON file of a network model \(Expecting value"),
             "nobw.json": ('{"latency_s": 0.001}', r"a network model's fields .* required\): no 'bandwidth_Bps'"),
             "typo.json": ('{"latency_s": 0.001, "bandwidth_Bps": 1e9, "efficency": 0.5}',
                           r"a network model's fields .*: no field 'efficency'"),
             "list.json": ('{"model": [1, 2]}', r"a network model's fields \(a JSON object\). Got \[1, 2\]")}
    for name, (text, match) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ParamError, match=r"'network' parameter of launch must be " + match):
            resolve_network(str(tmp_path / name), name="network", owner="launch")
