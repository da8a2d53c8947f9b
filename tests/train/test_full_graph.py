"""Full-graph halo-exchange training: exactness against one process, exact byte counts, events."""

from __future__ import annotations

import pytest
import torch

from workbench._validation import ParamError
from workbench.compose import RunConfig
from workbench.events import EpochEnd, PartitionComputed, Traffic
from workbench.testing import assert_same_training as _assert_same_training, rel_error as _rel, run_program, tiny_graph
from workbench.layout.halo import comm_rows_from_parts, predicted_halo_bytes



@pytest.mark.parametrize("method", ["metis", "random"])
@pytest.mark.parametrize("world_size", [2, 3])
def test_matches_single_process_gcn(method, world_size):
    g = tiny_graph()
    cfg = RunConfig.compose(graph="tiny", partition=method, epochs=4, seed=3)
    single = run_program(cfg.build(graph=g), 1)
    multi = run_program(cfg.build(graph=g), world_size)
    _assert_same_training(single, multi)
    # bytes counted at the transport == comm volume x widths x 4, forward and backward, exactly
    summary = multi[0]
    assert summary["bytes_per_epoch"] == summary["predicted_bytes_per_epoch"] > 0
    assert summary["bytes_per_epoch_by_kind"] == summary["predicted_bytes_per_epoch_by_kind"]


@pytest.mark.parametrize("model,num_layers,order", [("sage", 3, "auto"), ("gcn", 4, "auto"),
                                                    ("sage", 3, "aggregate-first")])
def test_directed_graph_and_deeper_models(model, num_layers, order):
    g = tiny_graph(directed=True, seed=2)
    part = torch.randint(0, 3, (g.num_nodes,), generator=torch.Generator().manual_seed(0))
    cfg = RunConfig.compose(graph="tiny", model=model, epochs=3, train={"optimizer": "sgd", "lr": 0.5},
                            **{"model.num_layers": num_layers, "model.hidden": 8, "model.order": order})
    single = run_program(cfg.build(graph=g), 1)
    multi = run_program(cfg.build(graph=g, node_part=part), 3)
    _assert_same_training(single, multi)
    rows = int(comm_rows_from_parts(g, part, 3).sum())
    # the exchanged width per layer: the input's, or the output's where a layer transforms first
    dims = [g.num_features] + [8] * (num_layers - 1) + [g.num_classes]
    first = [order == "auto" and dims[i + 1] < dims[i] for i in range(num_layers)]
    widths = [dims[i + 1] if f else dims[i] for i, f in enumerate(first)]
    backward = [w if (i or first[0]) else 0 for i, w in enumerate(widths)]
    assert multi[0]["bytes_per_epoch"] == predicted_halo_bytes(rows, widths, backward_widths=backward)["total"]


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_dgl_kernel_trains_as_the_compiled_one(model, monkeypatch):
    """The factored DGL kernel (large graphs on CPU) gives the numba kernel's training, on one and two ranks."""
    pytest.importorskip("dgl")
    g = tiny_graph(directed=True, seed=4)
    cfg = RunConfig.compose(graph="tiny", model=model, epochs=3, seed=1, train={"kernel": "numba"})
    reference = run_program(cfg.build(graph=g), 1)
    forced = cfg.with_strings({"train.kernel": "dgl"})
    _assert_same_training(reference, run_program(forced.build(graph=g), 1))
    _assert_same_training(reference, run_program(forced.build(graph=g), 2))


def test_summary_and_events():
    g = tiny_graph()
    summary, _, events = run_program(RunConfig.compose(graph="tiny", partition="random", epochs=3).build(graph=g), 2)
    for key in ("losses", "accuracy", "bytes_by_kind", "bytes_per_epoch", "predicted_bytes_per_epoch", "epoch_times"):
        assert key in summary
    assert len(summary["losses"]) == 3 and set(summary["accuracy"]) == {"train", "val", "test"}
    assert {"halo_fwd", "halo_bwd", "allreduce", "metrics"} <= set(summary["bytes_by_kind"])
    epochs = [e for e in events if isinstance(e, EpochEnd)]
    assert sorted((e.rank, e.epoch) for e in epochs) == [(r, e) for r in range(2) for e in range(3)]
    assert all(e.bytes_by_kind.get("halo_fwd", 0) > 0 for e in epochs)
    traffic = [e for e in events if isinstance(e, Traffic)]
    assert sum(e.bytes for e in traffic) == sum(summary["bytes_by_kind"].values())
    (part_ev,) = [e for e in events if isinstance(e, PartitionComputed)]
    assert part_ev.num_parts == 2 and sum(part_ev.part_sizes) == g.num_nodes
    assert sum(map(sum, part_ev.comm_rows)) == part_ev.metrics["comm_volume_rows"]


def test_summary_has_the_peak_rss_of_the_client_and_of_every_rank():
    from workbench.runtime import launch

    cfg = RunConfig.compose(graph="karate", partition="random", epochs=2)
    summary = launch(cfg, runner="local", workers=2, out=None).wait(timeout=120)
    peak = summary["peak_rss_mb"]
    assert set(peak) == {"client", "ranks"} and len(peak["ranks"]) == 2
    assert peak["client"] > 0 and all(isinstance(r, float) and r > 0 for r in peak["ranks"])
    assert peak["ranks"][0] == pytest.approx(peak["ranks"][1], rel=0.5)   # thread ranks: the one process's peak


def test_training_learns_on_sbm(small_sbm):
    cfg = RunConfig.compose(graph="sbm", partition="metis", epochs=30, model={"hidden": 16}, train={"lr": 0.05})
    summary, _, _ = run_program(cfg.build(graph=small_sbm), 2)
    assert summary["losses"][-1] < summary["losses"][0]
    assert summary["accuracy"]["train"] > 0.5


def test_bad_config_reports_all_errors():
    with pytest.raises(ParamError) as info:
        RunConfig.compose(model={"method": "gat", "num_layers": 7}, train={"lr": -1.0})
    text = str(info.value)
    assert "'model.method'" in text and "'num_layers'" in text and "'lr'" in text and "gat" in text


def test_unknown_setting_lists_valid_names():
    with pytest.raises(ParamError, match="Valid options"):
        RunConfig.compose().with_strings({"train.epochz": "3"})
    with pytest.raises(ParamError, match=r"a section, a dotted name or a shorthand \(epochs, seed\) \(did you mean "
                                         r"'epochs'\?\)"):
        RunConfig.compose().with_strings({"epochz": "3"})
    assert RunConfig.compose().with_strings({"epochs": "3", "num_parts": "2"}).train.epochs == 3


def test_too_many_parts_fails_before_work():
    g = tiny_graph(num_nodes=12)
    with pytest.raises(ParamError, match="num_parts"):
        RunConfig.compose(graph="tiny", num_parts=20).build(graph=g).prepare(20, lambda e: None)


def test_world_size_from_config_or_runner():
    assert RunConfig.compose(num_parts=3).build().world_size_for(2) == 3
    assert RunConfig.compose().build().world_size_for(2) == 2


def test_karate_spec_end_to_end():
    summary, _, _ = run_program(RunConfig.compose(graph="karate", epochs=2, partition="random").build(), 2)
    assert summary["bytes_per_epoch"] == summary["predicted_bytes_per_epoch"]
