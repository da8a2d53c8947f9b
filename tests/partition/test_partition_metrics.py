"""Every metric against a brute-force pure-Python computation on small random graphs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from workbench.partition import PartitionResult


def brute_force_edge_cut(graph, part, num_parts):
    src, dst = (t.tolist() for t in graph.edges())
    n = graph.num_nodes
    out_nbrs = [set() for _ in range(n)]   # v -> vertices aggregating from v
    in_nbrs = [set() for _ in range(n)]
    for u, v in zip(src, dst):
        out_nbrs[u].add(v)
        in_nbrs[v].add(u)
    pairs = {(min(u, v), max(u, v)) for u, v in zip(src, dst) if u != v}
    cut = sum(part[u] != part[v] for u, v in pairs)
    halo = [set() for _ in range(num_parts)]
    for v in range(n):
        for u in in_nbrs[v]:
            if part[u] != part[v]:
                halo[part[v]].add(u)
    comm = np.zeros((num_parts, num_parts), dtype=np.int64)
    for v in range(n):
        for q in {part[w] for w in out_nbrs[v]} - {part[v]}:
            comm[part[v], q] += 1
    # km1 of the column-net hypergraph: net(v) = {v} + out-neighbours of v
    km1 = sum(len({part[w] for w in out_nbrs[v] | {v}}) - 1 for v in range(n))
    vertices = [sum(1 for v in range(n) if part[v] == p) for p in range(num_parts)]
    edges = [sum(1 for v in dst if part[v] == p) for p in range(num_parts)]
    send, recv = comm.sum(1), comm.sum(0)
    return dict(edge_cut=cut, num_pairs=len(pairs), halo=halo, comm=comm, km1=km1, vertices=vertices, edges=edges,
                replication=(n + sum(len(h) for h in halo)) / n,
                vertex_balance=max(vertices) / (sum(vertices) / num_parts),
                edge_balance=max(edges) / (sum(edges) / num_parts) if sum(edges) else 1.0,
                max_part=int(max(max(s, r) for s, r in zip(send, recv))),
                messages=sum(1 for p, q in itertools.product(range(num_parts), repeat=2) if comm[p, q] > 0))


CASES = [(n, e, d, p, s) for s, (n, e, d, p) in enumerate([
    (12, 30, True, 3), (12, 30, False, 3), (25, 80, True, 4), (25, 60, False, 5), (40, 200, True, 2),
    (40, 150, False, 7), (7, 4, True, 3), (30, 120, False, 1)])]


@pytest.mark.parametrize("n,e,directed,num_parts,seed", CASES)
def test_edge_cut_metrics_match_brute_force(n, e, directed, num_parts, seed, multigraph):
    g = multigraph(n, e, directed=directed, seed=seed)
    part = torch.randint(0, num_parts, (n,), generator=torch.Generator().manual_seed(100 + seed))
    result = PartitionResult(graph=g, num_parts=num_parts, method="manual", node_part=part)
    m = result.metrics(feature_width=16)
    bf = brute_force_edge_cut(g, part.tolist(), num_parts)
    assert m.edge_cut == bf["edge_cut"]
    assert m.num_undirected_edges == bf["num_pairs"]
    assert m.cut_ratio == pytest.approx(bf["edge_cut"] / bf["num_pairs"] if bf["num_pairs"] else 0.0)
    assert m.part_vertices.tolist() == bf["vertices"]
    assert m.part_edges.tolist() == bf["edges"]
    for p in range(num_parts):
        assert result.halo_nodes(p).tolist() == sorted(bf["halo"][p])
        assert result.inner_nodes(p).tolist() == [v for v in range(n) if part[v] == p]
    assert m.part_halo.tolist() == [len(h) for h in bf["halo"]]
    np.testing.assert_array_equal(result.comm_rows_matrix(), bf["comm"])
    # comm volume = sum of halo sizes = km1 of the column-net hypergraph
    assert m.comm_volume_rows == bf["comm"].sum() == sum(len(h) for h in bf["halo"]) == bf["km1"]
    assert m.replication_factor == pytest.approx(bf["replication"])
    assert m.vertex_balance == pytest.approx(bf["vertex_balance"])
    assert m.edge_balance == pytest.approx(bf["edge_balance"])
    assert m.max_part_comm_volume_rows == bf["max_part"]
    assert m.num_messages == bf["messages"]
    d = m.to_dict()
    assert d["comm_volume_bytes"] == bf["km1"] * 16 * 4
    assert d["max_part_comm_volume_bytes"] == bf["max_part"] * 16 * 4


def brute_force_vertex_cut(graph, edge_part, num_parts):
    src, dst = (t.tolist() for t in graph.edges())
    n = graph.num_nodes
    count = [dict() for _ in range(n)]
    for u, v, p in zip(src, dst, edge_part):
        for x in (u, v):
            count[x][p] = count[x].get(p, 0) + 1
    master = []
    for v in range(n):
        if count[v]:
            best = max(count[v].values())
            master.append(min(p for p, c in count[v].items() if c == best))
        else:
            master.append(v % num_parts)
    replicas = [set(count[v]) | {master[v]} for v in range(n)]
    mirrors = sum(len(r) - 1 for r in replicas)
    comm = np.zeros((num_parts, num_parts), dtype=np.int64)
    for v in range(n):
        for q in replicas[v] - {master[v]}:
            comm[q, master[v]] += 1
            comm[master[v], q] += 1
    edges = [edge_part.count(p) for p in range(num_parts)]
    return dict(master=master, replicas=replicas, mirrors=mirrors, comm=comm, edges=edges,
                replication=sum(len(r) for r in replicas) / n,
                edge_balance=max(edges) / (len(edge_part) / num_parts))


@pytest.mark.parametrize("n,e,directed,num_parts,seed", CASES[:6])
def test_vertex_cut_metrics_match_brute_force(n, e, directed, num_parts, seed, multigraph):
    g = multigraph(n, e, directed=directed, seed=seed)
    edge_part = torch.randint(0, num_parts, (g.num_edges,), generator=torch.Generator().manual_seed(7 + seed))
    result = PartitionResult(graph=g, num_parts=num_parts, method="hand-made", edge_part=edge_part)
    assert result.kind == "vertex-cut" and result.node_part is None
    m = result.metrics()
    bf = brute_force_vertex_cut(g, edge_part.tolist(), num_parts)
    assert result.owner_part.tolist() == bf["master"]
    assert m.replication_factor == pytest.approx(bf["replication"])
    assert m.mirror_sync_volume_rows == bf["mirrors"]
    assert m.comm_volume_rows == 2 * bf["mirrors"]
    np.testing.assert_array_equal(m.comm_rows, bf["comm"])
    assert m.part_edges.tolist() == bf["edges"]
    assert m.edge_balance == pytest.approx(bf["edge_balance"])
    assert m.edge_cut == 0
    for p in range(num_parts):
        assert result.halo_nodes(p).tolist() == sorted(v for v in range(n) if p in bf["replicas"][v] and bf["master"][v] != p)
    assert m.to_dict()["num_cut_vertices"] == sum(len(r) > 1 for r in bf["replicas"])


def test_hand_made_vertex_cut():
    """Path 0-1-2 (both directions) with edges 0-1 on part 0 and 1-2 on part 1: vertex 1 is cut."""
    from workbench.graph import Graph

    g = Graph.from_edges(torch.tensor([0, 1, 1, 2]), torch.tensor([1, 0, 2, 1]), 3, directed=False)
    src, dst = g.edges()
    edge_part = ((torch.minimum(src, dst) == 1)).to(torch.int64)  # edges touching {1,2} -> part 1
    r = PartitionResult(graph=g, num_parts=2, method="hand-made", edge_part=edge_part)
    m = r.metrics()
    assert m.replication_factor == pytest.approx(4 / 3)
    assert m.mirror_sync_volume_rows == 1 and m.comm_volume_rows == 2 and m.num_messages == 2
    assert m.edge_balance == 1.0
    assert r.relabel().part_offsets.tolist()[-1] == 3


def test_metrics_table_and_json_keys(karate):
    from workbench.partition import partition

    m = partition(karate, 3, method="random").metrics()
    d = m.to_dict()
    for key in ("num_nodes", "num_edges", "num_parts", "edge_cut", "cut_ratio", "replication_factor", "vertex_balance",
                "edge_balance", "comm_volume_rows", "max_part_comm_volume_rows", "num_messages"):
        assert key in d
    df = m.table()
    assert list(df.index) == [0, 1, 2] and df["vertices"].sum() == 34
    assert df["halo"].sum() == d["comm_volume_rows"] == df["send_rows"].sum()
    assert "<table" in m._repr_html_() and "PartitionMetrics" in repr(m)
