"""The what-if view on the calibrated network model: a run's epochs on other networks (compute measured,
communication from ``workbench.communicate.netmodel.transport_seconds`` on the counted traffic), the crossover
between two runs, and the Communication tab showing the run's own ``--network`` model beside the measurement."""

from __future__ import annotations

import statistics

import holoviews as hv
import numpy as np
import pandas as pd
import pytest

from widgets.store import RunStore
from widgets.synthetic import fabricate_run
from widgets.traffic import TrafficView
from widgets.whatif import (GRID_BPS, CommCoefficients, WhatIf, crossovers, is_linear, latency_for, sweep_seconds,
                            whatif_table)
from workbench.communicate.netmodel import NETWORK_PRESETS, NetworkModel, resolve_network, transport_seconds
from workbench.events import EpochEnd, RunFinished, RunLog, Traffic
from workbench.runtime.launch import modelled_comm


def _mixed_traffic(epochs=4, p=3) -> list[Traffic]:
    """Every algorithm the model knows, uneven links, a window record: halo exchange per layer, a ring
    all-reduce, a SANCUS broadcast, metrics."""
    out = []
    for e in range(epochs):
        for s in range(p):
            for d in range(p):
                if s == d:
                    continue
                out.append(Traffic(epoch=e, src_rank=s, dst_rank=d, kind="halo_fwd", layer=0,
                                   bytes=1000 * (s + 1) * (d + 2) * (e + 1), messages=1))
                out.append(Traffic(epoch=e, src_rank=s, dst_rank=d, kind="halo_bwd", layer=1,
                                   bytes=700 * (d + 1), messages=2))
                out.append(Traffic(epoch=e, src_rank=s, dst_rank=d, kind="bcast_fwd", layer=0,
                                   bytes=5000 * (s + 1) if (e + s) % 2 else 0, messages=1 if (e + s) % 2 else 0))
            out.append(Traffic(epoch=e, src_rank=s, dst_rank=(s + 1) % p, kind="allreduce", layer=-1,
                               bytes=4096, messages=1))
            out.append(Traffic(epoch=e, src_rank=s, dst_rank=(s + 1) % p, kind="eval_metrics", layer=-1,
                               bytes=24, messages=1))
    out.append(Traffic(epoch=epochs, src_rank=0, dst_rank=1, kind="halo_fwd", layer=0, bytes=9000, messages=3,
                       num_epochs=3))
    return out


def _frame(events) -> pd.DataFrame:
    return pd.DataFrame([{k: v for k, v in vars(e).items() if k != "run_id"} for e in events])


def test_the_coefficients_are_the_transport_model_exactly_on_every_preset_and_sweep_point():
    events = _mixed_traffic()
    c = CommCoefficients()
    c.update(_frame(events), world_size=3)
    for net in [*NETWORK_PRESETS.values(), NetworkModel(latency_for(3e8), 3e8)]:
        assert is_linear(net)
        ref = transport_seconds(events, net, world_size=3)
        assert sorted(ref) == sorted(c.rounds_s) == list(range(7))
        for e, seconds in ref.items():
            assert c.seconds(e, net) == pytest.approx(seconds, rel=1e-12, abs=1e-15), (net.name, e)
    # a calibrated model is not linear (efficiency, call costs): it is not taken from the coefficients
    assert not is_linear(resolve_network("12.5MB/s,100us,eff=0.956,call=200us"))


def test_the_coefficients_follow_traffic_as_it_arrives():
    events = _mixed_traffic(epochs=6)
    whole, grown = CommCoefficients(), CommCoefficients()
    whole.update(_frame(events), world_size=3)
    for end in (5, 40, 41, 97, len(events) - 1, len(events)):
        grown.update(_frame(events[:end]), world_size=3)
    assert grown.rounds_s == pytest.approx(whole.rounds_s) and grown.byte_s == pytest.approx(whole.byte_s)
    grown.update(_frame(events[:10]), world_size=3)        # fewer rows: another run, recomputed from scratch
    fresh = CommCoefficients()
    fresh.update(_frame(events[:10]), world_size=3)
    assert grown.byte_s == fresh.byte_s


def test_the_modelled_epoch_is_measured_compute_plus_modelled_communication():
    events = fabricate_run(num_parts=3, epochs=5, run_id="fab")
    run = WhatIf(RunStore(events=events))
    assert list(run.epochs) == [1, 2, 3, 4]        # the first epoch (warm-up) is left out
    traffic = [e for e in events if isinstance(e, Traffic)]
    for name in NETWORK_PRESETS:
        comm = transport_seconds(traffic, name, world_size=3)
        compute = {k: max(e.compute_s for e in events if isinstance(e, EpochEnd) and e.epoch == k) for k in range(5)}
        expect = statistics.median(compute[k] + comm[k] for k in range(1, 5))
        assert run.epoch_seconds(name) == pytest.approx(expect, rel=1e-12)
    # a calibrated (non-linear) model goes through transport_seconds itself
    net = resolve_network("12.5MB/s,100us,eff=0.956,call=200us")
    comm = transport_seconds(traffic, net, world_size=3)
    np.testing.assert_allclose(run.comm_seconds(net), [comm[k] for k in range(1, 5)])
    # the sweep passes through the presets
    for net in NETWORK_PRESETS.values():
        at = sweep_seconds(run, np.array([net.bandwidth_Bps]))[0]
        assert at == pytest.approx(run.epoch_seconds(net), rel=1e-9)


def _pair():
    heavy = RunStore(events=fabricate_run(run_id="heavy", num_parts=3, epochs=6, byte_scale=2000.0))
    light = RunStore(events=fabricate_run(run_id="light", num_parts=3, epochs=6, epoch_s=0.6))
    return heavy, light


def test_the_crossover_is_where_the_two_modelled_epochs_are_equal():
    heavy, light = (WhatIf(s) for s in _pair())
    (x,) = crossovers(heavy, light)
    assert GRID_BPS[0] < x < GRID_BPS[-1]
    # at the crossover the two runs' modelled epochs (transport_seconds on a network of that bandwidth and the
    # sweep's latency) agree; below it the run that sends less is faster, above it the one that computes less
    for b, faster in ((x, None), (x / 2, light), (x * 2, heavy)):
        net = NetworkModel(latency_for(b), b)
        th, tl = heavy.epoch_seconds(net), light.epoch_seconds(net)
        if faster is None:
            assert th == pytest.approx(tl, rel=2e-3)
        else:
            assert (th > tl) == (faster is light)
    text = whatif_table([heavy, light])
    assert f"Crossover at <b>{x * 8 / 1e9:.3g} Gbit/s</b> (below it sancus (light) is faster)" in text
    same = WhatIf(_pair()[1])
    assert crossovers(same, WhatIf(_pair()[1])) == []
    assert "No crossover between 80 Mbit/s and 2.4 Tbit/s" in whatif_table([heavy, WhatIf(RunStore(
        events=fabricate_run(run_id="slow", num_parts=3, epochs=6, epoch_s=5.0)))])


def _shown(pane):
    obj = pane.object
    return obj[()] if isinstance(obj, hv.DynamicMap) else obj


def test_the_communication_tab_draws_the_what_if_against_its_baseline(tmp_path, render):
    heavy, light = _pair()
    with RunLog(tmp_path, "light") as log:
        for ev in fabricate_run(run_id="light", num_parts=3, epochs=6, epoch_s=0.6):
            log.emit(ev)
    view = TrafficView(heavy, runs_dir=tmp_path)
    render(view)
    assert "<table class='wb-whatif'>" in view._whatif_table.object and "Crossover" not in view._whatif_table.object
    view.baseline = str(tmp_path / "light")
    view.refresh(force=True)
    render(view)
    overlay = _shown(view._whatif.pane)
    curves = [el for el in overlay if isinstance(el, hv.Curve)]
    lines = [el for el in overlay if isinstance(el, hv.VLine)]
    assert [c.label for c in curves] == ["this run: sancus (heavy)", "baseline: sancus (light)"]
    (x,) = crossovers(WhatIf(heavy), WhatIf(RunStore.from_log(tmp_path / "light")))
    assert len(lines) == 1 and lines[0].data == pytest.approx(x * 8 / 1e9)
    np.testing.assert_allclose(curves[0].dimension_values(1), sweep_seconds(WhatIf(heavy)) * 1e3)
    assert "Crossover at" in view._whatif_table.object
    assert view._whatif_table.object.count("<tr data-network=") == len(NETWORK_PRESETS)


def test_a_run_with_network_shows_its_modelled_comm_beside_the_measured(tmp_path, render):
    from recipes import full_graph
    from workbench.runtime import launch

    handle = launch(full_graph.recipe(graph="karate", epochs=4), runner="local", workers=2, out=tmp_path,
                    network="1gbit,50us,eff=0.95,call=100us", blocking=True)
    summary = handle.wait()
    store = RunStore.from_log(handle.log_dir)
    view = TrafficView(store, runs_dir=None)
    render(view)
    tf = view.time_frame()
    np.testing.assert_allclose(tf["run_modelled_s"], summary["modelled_comm_s"])
    np.testing.assert_allclose(tf["measured_s"], summary["comm_s"])
    assert view.run_network() == summary["network"]["spec"]
    series = view._times.series
    assert list(series) == ["measured", "modelled (10GbE)", f"modelled (--network {summary['network']['spec']})"]
    # the preset's line is the transport model of the same traffic (what the run's summary uses, on 10GbE)
    ref = modelled_comm(handle.events, "10GbE", 2, 4)["modelled_comm_s"]
    np.testing.assert_allclose(series["modelled (10GbE)"]["modelled_s"], ref, rtol=1e-12)
    # the what-if marks the run's own link: its measured epoch, and the modelled one on that link
    own = WhatIf(store).measured()
    assert own["spec"] == summary["network"]["spec"] and own["measured_s"] > 0
    overlay = _shown(view._whatif.pane)
    marks = [el for el in overlay if isinstance(el, hv.Scatter) and el.label == "measured (this run's link)"]
    assert len(marks) == 1 and marks[0].iloc[0, 0] == pytest.approx(1.0)   # 1 Gbit/s
    assert "This run's link" in view._whatif_table.object


def test_a_run_without_network_keeps_two_lines(events, render):
    view = TrafficView(events, runs_dir=None)
    render(view)
    assert list(view._times.series) == ["measured", "modelled (10GbE)"]
    assert view.run_network() is None and WhatIf(view.store).measured() is None
    assert view.time_frame()["run_modelled_s"].isna().all()


def test_a_run_still_going_models_its_complete_epochs_only():
    events = fabricate_run(num_parts=2, epochs=6, run_id="live")
    cut = next(i for i, e in enumerate(events) if isinstance(e, EpochEnd) and e.epoch == 3 and e.rank == 1)
    store = RunStore(events=[e for e in events[:cut] if not isinstance(e, RunFinished)])   # rank 1 not at 3 yet
    run = WhatIf(store)
    assert list(run.epochs) == [1, 2]
