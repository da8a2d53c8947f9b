"""CAGNET 1-D block-row training: exact against one process, broadcast bytes as predicted."""

from __future__ import annotations

import pytest
import torch
from train_helpers import run_inprocess, tiny_graph

from workbench.train.block_row import BlockRowConfig, predicted_broadcast_bytes
from workbench.train.full_graph import FullGraphConfig


@pytest.mark.parametrize("model,directed", [("gcn", False), ("sage", True)])
def test_block_row_matches_single_process(model, directed):
    g = tiny_graph(directed=directed, seed=4)
    kw = dict(graph="tiny", model=model, num_layers=3, hidden=8, epochs=3, seed=1)
    single, r1, _ = run_inprocess(FullGraphConfig(**kw).build(graph=g), 1)
    part = torch.randint(0, 3, (g.num_nodes,), generator=torch.Generator().manual_seed(2))
    multi, rp, _ = run_inprocess(BlockRowConfig(**kw).build(graph=g, node_part=part), 3)
    for a, b in zip(multi["losses"], single["losses"]):
        assert abs(a - b) <= 1e-5 * abs(b)
    for name, ref in r1[0]["params"].items():
        assert float((rp[2]["params"][name] - ref).norm() / ref.norm()) <= 1e-5
    widths = [g.num_features, 8, 8]
    assert multi["bytes_per_epoch"] == predicted_broadcast_bytes(g.num_nodes, 3, widths)["total"]
    assert multi["bytes_per_epoch_by_kind"] == multi["predicted_bytes_per_epoch_by_kind"]
    assert multi["comm_reduction"] == 0.0


def test_block_row_with_partitioner():
    g = tiny_graph()
    summary, _, _ = run_inprocess(BlockRowConfig(graph="tiny", partition="metis", epochs=2).build(graph=g), 2)
    assert summary["bytes_per_epoch"] == summary["predicted_bytes_per_epoch"] > 0
