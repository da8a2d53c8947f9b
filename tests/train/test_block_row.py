"""CAGNET 1-D block-row training: exact against one process, broadcast bytes as predicted."""

from __future__ import annotations

import pytest
import torch

from workbench.compose import RunConfig
from workbench.testing import run_program, tiny_graph
from workbench.train.block_row import predicted_broadcast_bytes
from workbench.train.models import MODELS


@pytest.mark.parametrize("model,directed", [("gcn", False), ("sage", True)])
def test_block_row_matches_single_process(model, directed):
    g = tiny_graph(directed=directed, seed=4)
    kw = dict(graph="tiny", model=model, **{"model.num_layers": 3, "model.hidden": 8}, epochs=3, seed=1)
    single, r1, _ = run_program(RunConfig.compose(**kw).build(graph=g), 1)
    part = torch.randint(0, 3, (g.num_nodes,), generator=torch.Generator().manual_seed(2))
    multi, rp, _ = run_program(RunConfig.compose(exchange="block_row", **kw).build(graph=g, node_part=part), 3)
    for a, b in zip(multi["losses"], single["losses"]):
        assert abs(a - b) <= 1e-5 * abs(b)
    for name, ref in r1[0]["params"].items():
        assert float((rp[2]["params"][name] - ref).norm() / ref.norm()) <= 1e-5
    stage = MODELS.build(model, hidden=8, num_layers=3)   # the last layer (8 -> 3) transforms first
    dims = (g.num_features, g.num_classes)
    widths, backward = stage.exchange_widths(*dims), stage.backward_widths(*dims)
    assert widths == [g.num_features, 8, g.num_classes] and backward == [0, 8, g.num_classes]
    assert multi["bytes_per_epoch"] == predicted_broadcast_bytes(g.num_nodes, 3, widths,
                                                                 backward_widths=backward)["total"]
    assert multi["bytes_per_epoch_by_kind"] == multi["predicted_bytes_per_epoch_by_kind"]
    assert multi["comm_reduction"] == 0.0


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_block_scales_factor_the_weights_and_dgl_trains_as_numba(model, monkeypatch):
    """Every block of ``Â`` (and of ``Â^T``) carries ``(r, c)`` with ``w == r[rows] * c[cols]``, so large
    blocks on CPU take DGL's unweighted kernel (the faster one); forced on these small blocks, it trains exactly
    as the compiled loop."""
    from workbench.train.block_row import build_block_shards

    g = tiny_graph(directed=True, seed=4)
    part = torch.randint(0, 3, (g.num_nodes,), generator=torch.Generator().manual_seed(2))
    stage = MODELS.build(model, hidden=8, num_layers=2)
    dims = (g.num_features, g.num_classes)
    for shard in build_block_shards(g, part, 3, stage, stage.exchange_widths(*dims), stage.backward_widths(*dims)):
        for coo, scales in ((shard.fwd, shard.fwd_scales), (shard.bwd, shard.bwd_scales)):
            for j, ((rows, cols, w), (r, c)) in enumerate(zip(coo, scales)):
                assert r.shape == (shard.block_sizes[shard.rank],) and c.shape == (shard.block_sizes[j],)
                torch.testing.assert_close(r[rows] * c[cols], w.to(torch.float32))
    pytest.importorskip("dgl")
    kw = dict(graph="tiny", model=model, **{"model.num_layers": 2, "model.hidden": 8}, epochs=3, seed=1)
    block_row = dict(exchange="block_row", **kw)
    reference, r_ref, _ = run_program(RunConfig.compose(**block_row, train={"kernel": "numba"}).build(
        graph=g, node_part=part), 3)
    forced, r_dgl, _ = run_program(RunConfig.compose(**block_row, train={"kernel": "dgl"}).build(
        graph=g, node_part=part), 3)
    for a, b in zip(forced["losses"], reference["losses"]):
        assert abs(a - b) <= 1e-5 * abs(b)
    for name, ref in r_ref[0]["params"].items():
        assert float((r_dgl[0]["params"][name] - ref).norm() / ref.norm()) <= 1e-5


def test_block_row_with_partitioner():
    g = tiny_graph()
    cfg = RunConfig.compose(exchange="block_row", graph="tiny", partition="metis", epochs=2)
    summary, _, _ = run_program(cfg.build(graph=g), 2)
    assert summary["bytes_per_epoch"] == summary["predicted_bytes_per_epoch"] > 0


@pytest.mark.parametrize("exchange", [{"weight_grad": "cagnet"}, {"staleness": "epoch-fixed", "pin_static_input": True},
                                      {"staleness": "epoch-fixed", "skip": "gradients"}])
def test_transform_first_layers_and_pinned_layers_bytes_as_predicted(exchange):
    """hidden 4 < 6 features: layer 0 transforms first unless the exchange pins it (cagnet's weight gradient,
    a pinned static input); every epoch's bytes still equal the prediction."""
    g = tiny_graph()
    part = torch.arange(g.num_nodes) % 2
    cfg = RunConfig.compose(exchange={"method": "block_row", **exchange}, graph="tiny",
                            model={"hidden": 4, "num_layers": 2}, epochs=3)
    summary, _, _ = run_program(cfg.build(graph=g, node_part=part), 2)
    if "weight_grad" in exchange:   # cagnet's δ broadcasts come on top of the prediction: same as printed order
        printed = RunConfig.compose(exchange={"method": "block_row", **exchange}, graph="tiny",
                                    model={"hidden": 4, "num_layers": 2, "order": "aggregate-first"}, epochs=3)
        expected = run_program(printed.build(graph=g, node_part=part), 2)[0]["bytes_by_epoch"]
    else:
        expected = summary["predicted_bytes_by_epoch"]
    assert summary["bytes_by_epoch"] == expected
    pinned = cfg.build().trainer.exchange().pinned_layers(2)
    assert pinned == ({0, 1} if "weight_grad" in exchange else {0} if "pin_static_input" in exchange else set())
