from __future__ import annotations

import pytest
import torch

from workbench._validation import ParamError
from workbench.graph import Graph

dgl = pytest.importorskip("dgl")

from workbench.interop import from_dgl, to_dgl  # noqa: E402


def _edges(src, dst):
    return sorted(zip(src.tolist(), dst.tolist()))


def test_to_dgl_keeps_edge_direction_and_node_data(small_sbm):
    dg = to_dgl(small_sbm)
    assert dg.num_nodes() == small_sbm.num_nodes and dg.num_edges() == small_sbm.num_edges
    assert _edges(*dg.edges()) == _edges(*small_sbm.edges())
    assert torch.equal(dg.ndata["feat"], small_sbm.features)
    assert torch.equal(dg.ndata["label"], small_sbm.labels)
    for m in ("train_mask", "val_mask", "test_mask"):
        assert torch.equal(dg.ndata[m], getattr(small_sbm, m))


def test_directed_round_trip_keeps_direction():
    g = Graph.from_edges(torch.tensor([0, 0, 3]), torch.tensor([1, 2, 1]), num_nodes=5, name="d")
    dg = g.to_dgl()
    assert _edges(*dg.edges()) == [(0, 1), (0, 2), (3, 1)]
    # Message passing in DGL aggregates over in-edges, i.e. the workbench's CSR rows.
    assert dg.in_degrees().tolist() == g.in_degrees().tolist()
    back = Graph.from_dgl(dg, name="back")
    assert back.directed and back.name == "back"
    assert torch.equal(back.indptr, g.indptr) and torch.equal(back.indices, g.indices)


def test_round_trip_of_undirected_graph(karate):
    back = from_dgl(to_dgl(karate), name="karate")
    assert not back.directed
    assert torch.equal(back.indptr, karate.indptr) and torch.equal(back.indices, karate.indices)
    for attr in ("features", "labels", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(back, attr), getattr(karate, attr))


def test_from_dgl_aliases_and_rejects_heterographs():
    dg = dgl.graph((torch.tensor([0, 1]), torch.tensor([1, 0])), num_nodes=2)
    dg.ndata["features"] = torch.ones(2, 3)
    dg.ndata["labels"] = torch.tensor([[1], [0]])
    g = from_dgl(dg)
    assert g.num_features == 3 and g.labels.tolist() == [1, 0] and not g.directed
    hg = dgl.heterograph({("a", "r", "b"): (torch.tensor([0]), torch.tensor([0]))})
    with pytest.raises(ParamError, match="homogeneous"):
        from_dgl(hg)
