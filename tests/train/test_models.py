"""GCN / GraphSAGE-mean math: dense reference and DGL's own layers."""

from __future__ import annotations

import pytest
import torch

from workbench.testing import tiny_graph
from workbench.train.models import MODELS, GNNModel, SpMM, edge_weights, sparse_aggregator


def _aggregator(g, kind):
    src, dst = g.edges()
    if kind == "gcn":
        loops = torch.arange(g.num_nodes)
        src, dst = torch.cat([src, loops]), torch.cat([dst, loops])
    w = edge_weights(MODELS[kind], src, dst, g.in_degrees()[dst], g.out_degrees()[src])
    a, a_t = sparse_aggregator(dst, src, w, (g.num_nodes, g.num_nodes))
    return lambda h, layer: SpMM.apply(a, a_t, h)


def test_gcn_matches_dense_formula():
    g = tiny_graph()
    model = GNNModel("gcn", in_dim=6, hidden=5, out_dim=3, num_layers=2, seed=0)
    a = torch.zeros(g.num_nodes, g.num_nodes)
    src, dst = g.edges()
    a[dst, src] = 1.0
    a_bar = a + torch.eye(g.num_nodes)
    d = a_bar.sum(1).rsqrt()
    a_hat = d[:, None] * a_bar * d[None, :]          # D^-1/2 (A + I) D^-1/2
    h = torch.relu(a_hat @ g.features @ model.neigh[0].weight.T + model.neigh[0].bias)
    ref = a_hat @ h @ model.neigh[1].weight.T + model.neigh[1].bias
    torch.testing.assert_close(model(g.features, _aggregator(g, "gcn")), ref, rtol=1e-5, atol=1e-5)


def test_same_seed_same_weights_and_layers_validated():
    a = GNNModel("sage", in_dim=4, hidden=8, out_dim=2, num_layers=3, seed=7)
    b = GNNModel("sage", in_dim=4, hidden=8, out_dim=2, num_layers=3, seed=7)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert a.input_widths == [4, 8, 8]
    with pytest.raises(ValueError, match="'kind'"):
        GNNModel("gat", in_dim=4, hidden=8, out_dim=2, num_layers=2)


@pytest.mark.dgl
@pytest.mark.parametrize("directed", [False, True])
def test_matches_dgl_layers(directed):
    dgl = pytest.importorskip("dgl")
    from dgl.nn import GraphConv, SAGEConv

    g = tiny_graph(directed=directed)
    src, dst = g.edges()
    dg = dgl.graph((src, dst), num_nodes=g.num_nodes)
    x = g.features
    gcn = GNNModel("gcn", in_dim=6, hidden=4, out_dim=3, num_layers=1, seed=0)
    conv = GraphConv(6, 3, norm="both")
    conv.weight.data.copy_(gcn.neigh[0].weight.T)
    conv.bias.data.copy_(gcn.neigh[0].bias)
    torch.testing.assert_close(gcn(x, _aggregator(g, "gcn")), conv(dgl.add_self_loop(dg), x), rtol=1e-5, atol=1e-5)
    sage = GNNModel("sage", in_dim=6, hidden=4, out_dim=3, num_layers=1, seed=0)
    sconv = SAGEConv(6, 3, "mean")
    sconv.fc_neigh.weight.data.copy_(sage.neigh[0].weight)
    sconv.fc_self.weight.data.copy_(sage.self_[0].weight)
    biases = [p for name, p in sconv.named_parameters() if name.endswith("bias")]   # where depends on the version
    biases[0].data.copy_(sage.neigh[0].bias)
    torch.testing.assert_close(sage(x, _aggregator(g, "sage")), sconv(dg, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["gcn", "sage"])
def test_transform_first_equals_aggregate_first(kind):
    """Both layer orders are the same linear map: equal logits and weight gradients to float rounding."""
    g = tiny_graph(directed=True)
    agg = _aggregator(g, kind)
    kw = dict(in_dim=6, hidden=4, out_dim=3, num_layers=3, seed=1)
    auto, printed = GNNModel(kind, **kw), GNNModel(kind, order="aggregate-first", **kw)
    assert auto.transform_first == [True, False, True] and printed.transform_first == [False] * 3
    assert auto.exchange_widths == [4, 4, 3] and auto.backward_widths == [4, 4, 3]
    assert printed.exchange_widths == [6, 4, 4] and printed.backward_widths == [0, 4, 4]
    outs = []
    for model in (auto, printed):
        out = model(g.features, agg)
        out.square().sum().backward()
        outs.append((out.detach(), {n: p.grad for n, p in model.named_parameters()}))
    torch.testing.assert_close(outs[0][0], outs[1][0], rtol=1e-5, atol=1e-5)
    for name, grad in outs[1][1].items():
        torch.testing.assert_close(outs[0][1][name], grad, rtol=1e-5, atol=1e-5)
    pinned = GNNModel(kind, pinned=frozenset({0}), **kw)
    assert pinned.transform_first == [False, False, True] and pinned.backward_widths == [0, 4, 3]
    with pytest.raises(ValueError, match="'order'"):
        GNNModel(kind, order="transform-first", **kw)
