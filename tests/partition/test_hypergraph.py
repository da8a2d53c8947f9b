"""Hypergraph partitioning (HP, SHP) and the exact volume metrics of Demirci et al., checked brute force."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from workbench._validation import ParamError
from workbench.cli import main
from workbench.graph import Graph
from workbench.partition import partition
from workbench.partition.hypergraph import HypergraphPartitioner, StochasticHypergraphPartitioner, stochastic_hypergraph
from workbench.partition.volume import (column_nets, comm_rows, connectivity, expected_batch_volume,
                                        hoeffding_num_nets, induced_batch_volume, km1, sample_induced_batches,
                                        send_metrics)
from workbench.testing import multigraph


def toy_graph() -> Graph:
    """A graph consistent with the paper's Fig. 2 example: 6 vertices, edges 1-2 1-5 2-4 2-6 3-4 4-5 4-6 (1-based)."""
    u = torch.tensor([0, 0, 1, 1, 2, 3, 3])
    v = torch.tensor([1, 4, 3, 5, 3, 4, 5])
    return Graph.from_edges(torch.cat([u, v]), torch.cat([v, u]), 6, directed=False, name="toy")


def brute_force(graph: Graph, part: np.ndarray, num_parts: int) -> dict:
    """Send lists by definition: Send(m -> q) = {j owned by m : some i in q has Â(i, j) != 0} (dense Â)."""
    n = graph.num_nodes
    a = np.eye(n, dtype=bool)
    src, dst = graph.edges()
    a[dst.numpy(), src.numpy()] = True            # row i aggregates column j = in-neighbour j
    send = {}
    for m in range(num_parts):
        for q in range(num_parts):
            if m != q:
                rows = {j for j in range(n) if part[j] == m and any(a[i, j] and part[i] == q for i in range(n))}
                if rows:
                    send[(m, q)] = rows
    lam = [len({part[i] for i in range(n) if a[i, j]}) for j in range(n)]
    return {"send": send, "lambda": lam, "volume": sum(len(r) for r in send.values()), "messages": len(send),
            "row_nnz": a.sum(1).tolist()}


def test_toy_example_matches_the_digest():
    g, part = toy_graph(), np.array([0, 0, 1, 1, 2, 2])
    h = column_nets(g)
    assert h.row_nnz().tolist() == [3, 4, 2, 5, 3, 3]
    assert connectivity(h, part).tolist() == [2, 3, 1, 3, 3, 3]
    assert km1(h, part) == 9
    m = send_metrics(comm_rows(g, part, 3))
    assert (m["comm_volume_rows"], m["total_messages"]) == (9, 6)
    bf = brute_force(g, part, 3)
    assert bf["send"] == {(0, 1): {1}, (0, 2): {0, 1}, (1, 0): {3}, (1, 2): {3}, (2, 0): {4, 5}, (2, 1): {4, 5}}
    assert m["part_send_rows"] == [3, 2, 4] and m["part_messages"] == [2, 2, 2]
    # the graph model charges 2 x cut edges = 10 (overcounts row 4, needed by two vertices of part 2)
    r = partition(g, 3, method="random")
    r.node_part = torch.from_numpy(part)
    r._cache.clear()
    assert 2 * r.metrics().edge_cut == 10 and r.metrics().comm_volume_rows == 9


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_volume_equals_km1_brute_force(directed, seed):
    g = multigraph(25, 50, directed=directed, seed=seed)
    num_parts = 4
    part = np.random.default_rng(seed).integers(0, num_parts, g.num_nodes)
    bf = brute_force(g, part, num_parts)
    h = column_nets(g)
    assert connectivity(h, part, num_parts).tolist() == bf["lambda"]
    assert h.row_nnz().tolist() == bf["row_nnz"]
    comm = comm_rows(g, part, num_parts)
    m = send_metrics(comm)
    assert km1(h, part, num_parts) == m["comm_volume_rows"] == bf["volume"]
    assert m["total_messages"] == bf["messages"]
    assert all(comm[p, q] == len(rows) for (p, q), rows in bf["send"].items())
    # the partition metrics (halo-based) agree: km1 = sum of halo sizes
    r = partition(g, num_parts, method="random")
    r.node_part = torch.from_numpy(part)
    r._cache.clear()
    d = r.metrics().to_dict()
    assert d["comm_volume_rows"] == bf["volume"] and d["total_messages"] == bf["messages"]
    assert d["max_send_volume_rows"] == max([sum(len(v) for (p, _), v in bf["send"].items() if p == m_)
                                             for m_ in range(num_parts)])


def test_hypergraph_partitioner_reports_km1_and_is_deterministic(tiny_sbm):
    r1 = partition(tiny_sbm, 4, method="hypergraph", seed=3)
    r2 = partition(tiny_sbm, 4, method="hypergraph", seed=3)
    assert torch.equal(r1.node_part, r2.node_part)
    assert r1.stats["km1"] == r1.metrics().comm_volume_rows
    w = column_nets(tiny_sbm).row_nnz()
    loads = np.bincount(r1.node_part.numpy(), weights=w, minlength=4)
    assert loads.max() <= math.ceil(1.01 * w.sum() / 4) + w.max()   # balanced row nnz (epsilon = 0.01)
    rnd = partition(tiny_sbm, 4, method="random").metrics().comm_volume_rows
    assert r1.stats["km1"] < rnd


def test_hypergraph_single_part_and_unit_weights(tiny_sbm):
    assert partition(tiny_sbm, 1, method="hypergraph").stats["km1"] == 0
    r = partition(tiny_sbm, 2, method="hypergraph", vertex_weight="unit")
    assert abs(r.part_sizes()[0] - r.part_sizes()[1]) <= 0.02 * tiny_sbm.num_nodes + 1


def test_config_errors_are_reported_at_once():
    with pytest.raises(ParamError) as err:
        HypergraphPartitioner(epsilon=0, preset="fast", threads=0, vertex_weight="x", objective="soed")
    msg = str(err.value)
    for name in ("epsilon", "preset", "threads", "vertex_weight", "objective"):
        assert f"The '{name}' parameter of" in msg
    with pytest.raises(ParamError, match="'theta' parameter"):
        StochasticHypergraphPartitioner(theta=-1.0)


def test_hoeffding_table():
    # Eq. 14 at the paper's theta = 0.1, delta = 0.5, rounded up
    assert [hoeffding_num_nets(p) for p in (2, 3, 9, 15, 21, 27, 512)] == [
        70, 278, 4437, 13586, 27726, 46857, 18099529]


def test_expected_batch_volume_matches_enumeration():
    """Exact oracle: enumerate every s-subset of a small graph."""
    from itertools import combinations

    g = multigraph(8, 14, directed=True, seed=4)
    h, part = column_nets(g), np.array([0, 1, 2, 0, 1, 2, 0, 1])
    for s in (1, 2, 3, 5, 8):
        subsets = list(combinations(range(8), s))
        mean = sum(induced_batch_volume(h, part, list(b), 3) for b in subsets) / len(subsets)
        assert expected_batch_volume(h, part, s, 3) == pytest.approx(mean, rel=1e-9, abs=1e-12)
    assert expected_batch_volume(h, part, 8, 3) == pytest.approx(km1(h, part, 3))   # whole graph = full batch


def test_stochastic_hypergraph_merges_identical_nets(tiny_sbm):
    merged, info = stochastic_hypergraph(tiny_sbm, 60, 30, seed=0)
    assert info["num_sampled_nets"] == 1800 and merged.weights().sum() == info["num_multi_pin_nets"]
    sets = [tuple(merged.pins[a:b]) for a, b in zip(merged.net_ptr[:-1], merged.net_ptr[1:])]
    assert len(set(sets)) == len(sets) and min(len(s) for s in sets) >= 2
    # merged km1 = sum over the sampled batches of their induced volumes (same draws)
    part = np.arange(tiny_sbm.num_nodes) % 3
    full = column_nets(tiny_sbm)
    batches = sample_induced_batches(tiny_sbm.num_nodes, 60, 30, seed=0)
    assert km1(merged, part, 3) == sum(induced_batch_volume(full, part, b, 3) for b in batches)


def test_stochastic_partitioner_sizes_and_stats(tiny_sbm):
    shp = StochasticHypergraphPartitioner(batch_size=40)
    s, b = shp.sizes(tiny_sbm.num_nodes, 3)
    assert s == 40 and b == math.ceil(278 / 40)
    r = shp.partition(tiny_sbm, 3)
    assert r.stats["num_batches"] == b and r.stats["expected_batch_volume_rows"] == pytest.approx(
        expected_batch_volume(column_nets(tiny_sbm), r.node_part.numpy(), 40, 3))
    with pytest.raises(ParamError, match="batch_size"):
        StochasticHypergraphPartitioner(batch_size=10**6).partition(tiny_sbm, 2)


def test_cli_json_keys(capsys, tmp_path):
    spec = "sbm:num_nodes=150,num_blocks=3,avg_degree=6,seed=0"
    assert main(["partition", spec, "--parts", "3", "--method", "hypergraph", "--json", "--out", str(tmp_path)]) == 0
    d = json.loads(capsys.readouterr().out)
    for key in ("max_send_volume_rows", "total_messages", "max_part_messages", "partitioner_km1"):
        assert key in d
    assert d["partitioner_km1"] == d["comm_volume_rows"]
    assert json.loads((tmp_path / "partition.json").read_text())["stats"]["km1"] == d["partitioner_km1"]


@pytest.fixture(scope="module")
def tiny_sbm() -> Graph:
    from workbench.data import load_graph

    return load_graph("sbm:num_nodes=240,num_blocks=4,avg_degree=6,seed=0")


def test_mtkahypar_initialises_once_and_warns_on_other_thread_counts():
    g = toy_graph()
    partition(g, 2, method="hypergraph", threads=1)   # the first call in the process fixes the count at 1
    with pytest.warns(RuntimeWarning, match="cannot be re-initialised"):
        partition(g, 2, method="hypergraph", threads=2)
