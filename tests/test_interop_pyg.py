"""PyG converters: a round trip, and PyG's GCNConv on ``graph.to_pyg()`` gives the workbench's GCN logits."""

from __future__ import annotations

import pytest
import torch

from workbench._validation import ParamError
from workbench.graph import Graph

pyg = pytest.importorskip("torch_geometric")


def test_round_trip_keeps_edges_and_node_data(small_sbm):
    data = small_sbm.to_pyg()
    assert data.num_nodes == small_sbm.num_nodes and data.edge_index.shape == (2, small_sbm.num_edges)
    assert torch.equal(data.x, small_sbm.features) and torch.equal(data.y, small_sbm.labels)
    back = Graph.from_pyg(data, name="back")
    assert not back.directed and torch.equal(back.indptr, small_sbm.indptr)
    assert torch.equal(back.indices, small_sbm.indices)
    for m in ("train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(back, m), getattr(small_sbm, m))


def test_directed_and_isolated_vertices_survive():
    g = Graph.from_edges(torch.tensor([0, 0, 3]), torch.tensor([1, 2, 1]), num_nodes=6)
    back = Graph.from_pyg(g.to_pyg())
    assert back.directed and back.num_nodes == 6 and torch.equal(back.indices, g.indices)


def test_bad_data_is_refused():
    from torch_geometric.data import Data

    with pytest.raises(ParamError, match="edge_index"):
        Graph.from_pyg(Data(x=torch.zeros(3, 2)))


def test_gcnconv_gives_the_workbench_logits(small_sbm):
    from torch_geometric.nn import GCNConv

    from workbench.train.full_graph import build_shards
    from workbench.train.models import MODELS, GNNModel, SpMM, sparse_aggregator

    g = small_sbm
    model = GNNModel("gcn", in_dim=g.num_features, hidden=8, out_dim=g.num_classes, num_layers=2, seed=0)
    (shard,), _ = build_shards(g, torch.zeros(g.num_nodes, dtype=torch.int64), 1, MODELS["gcn"], model.input_widths)
    a, a_t = sparse_aggregator(shard.agg_rows, shard.agg_cols, shard.agg_weights, (g.num_nodes, g.num_nodes))
    ours = model(g.features, lambda h, i: SpMM.apply(a, a_t, h))
    data = g.to_pyg()
    convs = [GCNConv(lin.in_features, lin.out_features) for lin in model.neigh]
    with torch.no_grad():
        for conv, lin in zip(convs, model.neigh):
            conv.lin.weight.copy_(lin.weight)
            conv.bias.copy_(lin.bias)
        h = torch.relu(convs[0](data.x, data.edge_index))
        theirs = convs[1](h, data.edge_index)
    assert torch.allclose(ours, theirs, atol=1e-5, rtol=1e-4)
