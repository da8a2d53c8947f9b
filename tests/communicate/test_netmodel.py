from __future__ import annotations

import pytest

from workbench._validation import ParamError
from workbench.communicate.netmodel import NETWORK_PRESETS, NetworkModel, modelled_seconds
from workbench.events import EpochEnd, Traffic


def test_presets_exist_and_order_by_speed():
    assert set(NETWORK_PRESETS) == {"10GbE", "25GbE", "100GbE", "nvlink"}
    ev = [Traffic(epoch=0, src_rank=0, dst_rank=1, kind="halo_fwd", bytes=10**8, messages=10)]
    times = [modelled_seconds(ev, name)[0] for name in ("10GbE", "25GbE", "100GbE", "nvlink")]
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
        modelled_seconds([], "1GbE")
    with pytest.raises(ParamError) as info:
        NetworkModel(latency_s=-1, bandwidth_Bps=0)
    assert len(info.value.errors) == 2
