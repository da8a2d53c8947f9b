from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from workbench._validation import ParamError
from workbench.graph import Graph


def test_csr_is_over_destinations():
    g = Graph.from_edges(torch.tensor([0, 2, 1, 0]), torch.tensor([1, 1, 2, 2]), num_nodes=3)
    assert g.indptr.tolist() == [0, 0, 2, 4]
    assert g.indices[g.indptr[1]:g.indptr[2]].tolist() == [0, 2]  # in-neighbours of 1, sorted
    src, dst = g.edges()
    assert sorted(zip(src.tolist(), dst.tolist())) == [(0, 1), (0, 2), (1, 2), (2, 1)]
    assert torch.equal(g.dst_ids(), dst)
    assert g.in_degrees().tolist() == [0, 2, 2]
    assert g.out_degrees().tolist() == [2, 1, 1]


def test_sizes(random_graph):
    g = random_graph(40, 100, seed=0)
    src, dst = g.edges()
    pairs = {(min(s, d), max(s, d)) for s, d in zip(src.tolist(), dst.tolist())}
    assert g.num_undirected_edges == len(pairs) == g.num_edges // 2
    assert g.num_features == 8 and g.num_classes == 3
    assert Graph.from_edges([0], [0], num_nodes=1).num_undirected_edges == 1  # self-loop counted once


def test_num_nodes_inferred_and_empty():
    assert Graph.from_edges([0, 4], [1, 2]).num_nodes == 5
    e = Graph.from_edges(torch.tensor([], dtype=torch.int64), torch.tensor([], dtype=torch.int64))
    assert e.num_nodes == 0 and e.num_edges == 0 and e.summary()["max_degree"] == 0


def test_scipy_round_trip(random_graph):
    g = random_graph(30, 60, seed=2, directed=True)
    a = g.to_scipy()
    src, dst = g.edges()
    assert a.shape == (30, 30) and a.nnz == g.num_edges
    assert all(a[d, s] == 1 for s, d in zip(src.tolist()[:20], dst.tolist()[:20]))
    back = Graph.from_scipy(a, directed=True)
    assert torch.equal(back.indptr, g.indptr) and torch.equal(back.indices, g.indices)
    assert isinstance(g.to_scipy("coo"), sp.coo_matrix)
    with pytest.raises(ValueError, match="square"):
        Graph.from_scipy(sp.csr_matrix(np.ones((2, 3))))


def test_validation_errors():
    with pytest.raises(ParamError, match="num_nodes"):
        Graph.from_edges([0, 5], [1, 2], num_nodes=3)
    with pytest.raises(ParamError, match="indices"):
        Graph(indptr=torch.tensor([0, 1]), indices=torch.tensor([3]))
    with pytest.raises(ParamError, match="features"):
        Graph.from_edges([0], [1], num_nodes=2, features=torch.zeros(3, 2))
    with pytest.raises(ParamError, match="train_mask"):
        Graph.from_edges([0], [1], num_nodes=2, train_mask=torch.zeros(3, dtype=torch.bool))
    with pytest.raises(ParamError, match="dst"):
        Graph.from_edges([0, 1], [1], num_nodes=2)


def test_with_data_shares_structure(karate):
    g = karate.with_data(labels=None, name="copy")
    assert g.indices is karate.indices and g.labels is None and g.name == "copy"
    assert karate.labels is not None


def test_summary_and_reprs(karate):
    s = karate.summary()
    assert s["num_nodes"] == 34 and s["num_edges"] == 156 and s["train_nodes"] == 17
    assert "undirected" in repr(karate) and "nodes=34" in repr(karate)
    assert "<table>" in karate._repr_html_()
