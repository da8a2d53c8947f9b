"""Streaming partitioners against independent brute-force pure-Python reimplementations (SPRING's steps, HDRF),
brute-force metrics, bounded state (no CSR) and the file/graph paths giving the same answer."""

from __future__ import annotations

import json
from collections import defaultdict

import networkx as nx
import numpy as np
import pytest
import torch

from workbench.graph import Graph
from workbench.partition import partition
from workbench.partition.streaming import STREAMING_METHODS, stream_partition


# ------------------------------------------------------------------------------------------- brute force

def spring_brute(lines, num_nodes, P, beta=1.05, tau_factor=0.1, variant="paper"):
    """Algorithm 1 of CATGNN line by line with dicts and sets (the reference code's deviations for 'reference')."""
    deg = defaultdict(int)
    for u, v in lines:
        deg[u] += 1
        deg[v] += 1
    tau = tau_factor * sum(deg.values()) / P
    c, vol, members, nb, first = {}, defaultdict(int), defaultdict(set), {}, []
    k = 1
    for u, v in lines:
        for x in (u, v):
            if x not in c:
                c[x] = k
                k += 1
                vol[c[x]] += deg[x]
                members[c[x]].add(x)
                first.append(x)
        if vol[c[u]] <= tau and vol[c[v]] <= tau:
            a, b = (u, v) if vol[c[u]] <= vol[c[v]] else (v, u)  # a joins b's cluster
            vol[c[a]] -= deg[a]
            members[c[a]].discard(a)
            vol[c[b]] += deg[a]
            members[c[b]].add(a)
            c[a] = c[b]
        if (deg[nb[u]] if u in nb else 0) < deg[v]:
            nb[u] = v
        if (deg[nb[v]] if v in nb else 0) < deg[u]:
            nb[v] = u

    def dn(x):
        return deg[nb[x]] if x in nb else 0

    rep = {}
    for v in sorted(c):
        if c[v] not in rep or dn(rep[c[v]]) < dn(v):
            rep[c[v]] = v
    clusters = {i: set(m) for i, m in members.items() if m}
    where = dict(c)
    cap = beta * num_nodes / P

    def visit(i):
        t = nb.get(rep[i])
        if t is None:
            return
        j = where[t]
        if j != i and len(clusters[i]) + len(clusters[j]) <= cap:
            for x in clusters[i]:
                where[x] = j
            clusters[j] |= clusters[i]
            clusters[i] = set()
            ri, rj = rep[i], rep[j]
            if dn(rj) < dn(ri) or (dn(rj) == dn(ri) and ri < rj):
                rep[j] = ri

    if variant == "paper":
        visited = set()
        while True:
            todo = [i for i in clusters if clusters[i] and i not in visited]
            if not todo:
                break
            i = min(todo, key=lambda i: (len(clusters[i]), i))
            visited.add(i)
            visit(i)
        order = sorted((i for i in clusters if clusters[i]), key=lambda i: (-len(clusters[i]), i))
    else:
        static = sorted(clusters, key=lambda i: (len(clusters[i]), i))
        for i in static[:-1]:
            if clusters[i]:
                visit(i)
        order = list(dict.fromkeys(where[x] for x in first))
    load = [0] * P
    owner = {}
    for i in order:
        p = min(range(P), key=lambda q: (load[q], q))
        for x in clusters[i]:
            owner[x] = p
        load[p] += len(clusters[i])
    for v in range(num_nodes):
        if v not in owner:
            if variant == "paper":
                p = min(range(P), key=lambda q: (load[q], q))
                owner[v] = p
                load[p] += 1
            else:
                owner[v] = 0
    return [owner[v] for v in range(num_nodes)]


def hdrf_brute(lines, P, lam=1.0, eps=1.0):
    A, pdeg, load, parts, last = defaultdict(set), defaultdict(int), [0] * P, [], {}
    for u, v in lines:
        pdeg[u] += 1
        pdeg[v] += 1
        tu = pdeg[u] / (pdeg[u] + pdeg[v])
        tv = pdeg[v] / (pdeg[u] + pdeg[v])
        hi, lo = max(load), min(load)
        best, best_s = 0, -1.0
        for p in range(P):
            s = lam * (hi - load[p]) / (eps + hi - lo)
            if p in A[u]:
                s += 1 + (1 - tu)
            if p in A[v]:
                s += 1 + (1 - tv)
            if s > best_s:
                best, best_s = p, s
        A[u].add(best)
        A[v].add(best)
        load[best] += 1
        last[u] = last[v] = best
        parts.append(best)
    return parts, A, load, last


def completed_brute(lines, owner, num_nodes, P, parts=None):
    """RF and loads after completion: a line goes to its part (if any) and both endpoints' owners."""
    V = [set() for _ in range(P)]
    load = [0] * P
    for v in range(num_nodes):
        V[owner[v]].add(v)
    for i, (u, v) in enumerate(lines):
        dests = {owner[u], owner[v]} | ({parts[i]} if parts is not None else set())
        for p in dests:
            V[p] |= {u, v}
            load[p] += 1
    return sum(len(s) for s in V) / num_nodes, load


# ------------------------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def edge_file(tmp_path_factory):
    """A skewed small graph (Barabasi-Albert plus a community graph), shuffled lines, 3 isolated ids at the end."""
    g = nx.disjoint_union(nx.barabasi_albert_graph(250, 3, seed=1), nx.planted_partition_graph(4, 30, 0.3, 0.01, seed=2))
    rng = np.random.default_rng(0)
    lines = [(int(u), int(v)) for u, v in g.edges()]
    rng.shuffle(lines)
    lines = [(v, u) if rng.random() < 0.5 else (u, v) for u, v in lines]
    num_nodes = g.number_of_nodes() + 3
    path = tmp_path_factory.mktemp("stream") / "edges.txt"
    path.write_text("# u v\n" + "".join(f"{u}\t{v}\n" for u, v in lines))
    return path, lines, num_nodes


# ------------------------------------------------------------------------------------------- tests

@pytest.mark.parametrize("variant", ["paper", "reference"])
@pytest.mark.parametrize("P", [4, 8, 16])
def test_spring_matches_brute_force(edge_file, variant, P):
    path, lines, n = edge_file
    r = stream_partition(path, P, method="spring", variant=variant, chunk_edges=97, num_nodes=n)
    owner = r.owner.tolist()
    assert len(owner) == n  # the 3 isolated ids are owned too
    want = spring_brute(lines, n, P, variant=variant)
    assert owner == want
    rf, load = completed_brute(lines, want, n, P)
    assert r.metrics.replication_factor_completed == pytest.approx(rf)
    assert r.metrics.part_lines_completed.tolist() == load
    assert r.metrics.owner_balance == pytest.approx(max(np.bincount(want, minlength=P)) / (n / P))


def test_spring_beats_hdrf_after_completion(edge_file):
    path, lines, n = edge_file
    for P in (4, 8):
        s = stream_partition(path, P, method="spring").metrics.replication_factor_completed
        h = stream_partition(path, P, method="hdrf").metrics.replication_factor_completed
        assert s < h


@pytest.mark.parametrize("P", [3, 8])
def test_hdrf_matches_brute_force(edge_file, P):
    path, lines, n = edge_file
    r = stream_partition(path, P, method="hdrf", owner_rule="last", keep_assignment=True, chunk_edges=50)
    parts, A, load, last = hdrf_brute(lines, P)
    assert r.line_parts().tolist() == parts
    assert r.metrics.part_lines.tolist() == load
    N = n - 3
    assert r.metrics.replication_factor == pytest.approx(sum(max(len(A[v]), 1) for v in range(N)) / N)
    assert r.metrics.edge_balance == pytest.approx(max(load) / (len(lines) / P))
    owner = [last[v] for v in range(N)]
    assert r.owner.tolist() == owner  # every id < N has a line in this file
    rf, load_c = completed_brute(lines, owner, N, P, parts)
    assert r.metrics.replication_factor_completed == pytest.approx(rf)
    assert r.metrics.part_lines_completed.tolist() == load_c
    assert r.metrics.edge_balance_completed == pytest.approx(max(load_c) / np.mean(load_c))


def test_file_and_graph_paths_agree_with_partition_metrics(edge_file):
    """The registry path (an in-memory graph streamed once per undirected pair) gives the same parts, and the
    existing exact metrics (compute_metrics) agree with the streaming ones."""
    path, lines, n = edge_file
    src = torch.tensor([u for u, v in lines] + [v for u, v in lines])
    dst = torch.tensor([v for u, v in lines] + [u for u, v in lines])
    g = Graph.from_edges(src, dst, n - 3, directed=False)
    for method in ("spring", "clustering"):
        r = stream_partition(g, 4, method=method)
        pr = partition(g, 4, method=method)
        assert pr.node_part.tolist() == r.owner.tolist()
        # Edge-cut halo = completion: the RFs and the halo rows per pair of parts agree.
        assert pr.metrics().replication_factor == pytest.approx(r.metrics.replication_factor_completed)
        assert pr.metrics().comm_rows.tolist() == r.metrics.comm_rows.tolist()
        ev = r.to_event()
        assert ev.part_sizes == pr.part_sizes().tolist() and ev.halo_sizes == pr.metrics().part_halo.tolist()
    for method in ("hdrf", "hash", "dbh", "greedy", "2ps-l"):
        pr = partition(g, 4, method=method)
        r = stream_partition(g, 4, method=method)
        assert pr.metrics().replication_factor == pytest.approx(r.metrics.replication_factor), method
        # Both stored directions of a pair sit in one part.
        s, d = g.edges()
        key = torch.minimum(s, d) * n + torch.maximum(s, d)
        for k in torch.unique(key)[:50]:
            assert pr.edge_part[key == k].unique().numel() == 1


@pytest.mark.parametrize("method", STREAMING_METHODS)
def test_chunking_and_seed_do_not_change_results_unexpectedly(edge_file, method):
    path, lines, n = edge_file
    a = stream_partition(path, 4, method=method, chunk_edges=7, keep_assignment=True)
    b = stream_partition(path, 4, method=method, chunk_edges=100000, keep_assignment=True)
    assert np.array_equal(a.owner, b.owner) and np.array_equal(a.line_parts(), b.line_parts())
    m = a.metrics
    assert m.num_lines == len(lines) and m.part_lines_completed.sum() >= len(lines)
    assert m.replication_factor_completed >= (m.replication_factor or 1.0) - 1e-12
    assert set(m.phase_s) >= {"completion"} and m.peak_rss_mb > 0 and m.state_bytes > 0


def test_streaming_never_builds_a_graph(edge_file, monkeypatch, tmp_path):
    """Bounded state: the file path never builds a CSR/Graph, and the state is O(N * P) bytes."""
    path, lines, n = edge_file

    def boom(*a, **k):
        raise AssertionError("the streaming path built a CSR")

    monkeypatch.setattr(Graph, "from_edges", classmethod(boom))
    monkeypatch.setattr(Graph, "__post_init__", boom)
    for method in STREAMING_METHODS:
        r = stream_partition(path, 8, method=method, keep_assignment=True)
        N = r.owner.size
        assert r.metrics.state_bytes <= max(N, 1024) * 8 * 12 + 10_000, method
        r.save(tmp_path / method)
        assert np.load(tmp_path / method / "edge_assignment.npy").shape == (len(lines),)
        assert json.loads((tmp_path / method / "metrics.json").read_text())["method"] == method
        r.close()


def test_assignment_on_disk_matches_memory(edge_file, tmp_path):
    path, lines, n = edge_file
    r = stream_partition(path, 4, method="2ps-l", keep_assignment=True, chunk_edges=64)
    assert r.line_part is None  # kept in a file, not in memory
    r.save(tmp_path)
    on_disk = np.load(tmp_path / "edge_assignment.npy")
    src = torch.tensor([u for u, v in lines] + [v for u, v in lines])
    dst = torch.tensor([v for u, v in lines] + [u for u, v in lines])
    g = Graph.from_edges(src, dst, n - 3, directed=False)
    from workbench.partition.streaming import GraphEdgeStream, TwoPSLPartitioner

    mem = TwoPSLPartitioner().stream(GraphEdgeStream(g), 4, keep_assignment=True)
    # Same multiset of parts per line (the graph streams lines in CSR order, the file in file order).
    assert np.bincount(on_disk, minlength=4).sum() == len(lines) and mem.line_part.size == len(lines)
    r.close()


def test_bad_options_use_the_message_template():
    from workbench._validation import ParamError

    with pytest.raises(ParamError, match="'variant' parameter of SpringPartitioner.Config must be one of"):
        stream_partition("karate", 2, method="spring", variant="nope")
    with pytest.raises(ParamError, match="'method' parameter of stream_partition must be a streaming"):
        stream_partition("karate", 2, method="metis")


def test_cli_stream_json_and_out(edge_file, tmp_path, capsys):
    from workbench.cli import main

    path, lines, n = edge_file
    out = tmp_path / "o"
    assert main(["partition", str(path), "--parts", "4", "--method", "spring", "--stream", "--chunk-edges", "64",
                 "--json", "--out", str(out), "--set", "variant=reference"]) == 0
    d = json.loads(capsys.readouterr().out)
    for key in ("replication_factor", "replication_factor_completed", "edge_balance", "edges_per_s", "peak_rss_mb"):
        assert key in d
    assert d["replication_factor_completed"] == pytest.approx(
        completed_brute(lines, spring_brute(lines, n - 3, 4, variant="reference"), n - 3, 4)[0])
    owner = np.load(out / "owner.npy")
    assign = np.load(out / "edge_assignment.npy")
    assert assign.tolist() == owner[[v for u, v in lines]].tolist()  # owner side, file order
    assert not list(out.glob("assign-*.bin"))  # the temporary file is gone
    assert main(["partition", str(path), "--parts", "4", "--method", "hdrf", "--stream", "--out", str(out)]) == 0
    assert np.load(out / "edge_assignment.npy").tolist() == hdrf_brute(lines, 4)[0]
    assert "replication_factor_completed" in capsys.readouterr().out
    assert main(["partition", str(path), "--parts", "4", "--method", "metis", "--stream"]) == 2
    assert "must be one of ['hash', 'dbh'" in capsys.readouterr().err


def test_npy_edge_file_streams_like_text(edge_file, tmp_path):
    path, lines, n = edge_file
    npy = tmp_path / "e.npy"
    np.save(npy, np.array(lines, dtype=np.int64))
    a = stream_partition(npy, 4, method="spring", chunk_edges=33)
    b = stream_partition(path, 4, method="spring")
    assert np.array_equal(a.owner, b.owner)


def test_train_balance_and_options(multigraph):
    g = multigraph(200, 600, directed=False, seed=1, with_masks=True)
    for method, opts in (("clustering", {"degrees": "partial"}), ("dbh", {"degrees": "partial"}),
                         ("greedy", {"rule": "cases"}), ("2ps-l", {"scoring": "port"}), ("hdrf", {"lam": 2.0})):
        m = stream_partition(g, 4, method=method, **opts).metrics
        assert m.part_train.sum() == int(g.train_mask.sum()) and m.train_balance >= 1.0
        assert m.owner_balance >= 1.0 and m.part_owned.sum() == g.num_nodes


@pytest.mark.parametrize("method", ["spring", "clustering", "hdrf"])
def test_cli_json_replication_factor_is_the_written_assignments(edge_file, tmp_path, capsys, method):
    """For owner results the JSON's replication_factor was the completed RF (3.897 where the written
    owner-side edge_assignment.npy has a vertex-cut RF of 3.115). Now it is the RF of the written lines for
    every method, computed here from the file alone, with the completed RF beside it."""
    from workbench.cli import main

    path, lines, n = edge_file
    out = tmp_path / method
    assert main(["partition", str(path), "--parts", "4", "--method", method, "--stream", "--chunk-edges", "64",
                 "--json", "--out", str(out)]) == 0
    d = json.loads(capsys.readouterr().out)
    assign = np.load(out / "edge_assignment.npy")
    N = max(max(u, v) for u, v in lines) + 1   # the file names no isolated id
    held = defaultdict(set)
    for (u, v), p in zip(lines, assign.tolist()):
        held[u].add(p)
        held[v].add(p)
    assert d["num_nodes"] == N and d["num_lines"] == len(lines) == assign.size
    assert d["replication_factor"] == pytest.approx(sum(max(len(held[x]), 1) for x in range(N)) / N)
    load = np.bincount(assign, minlength=4)
    assert d["edge_balance"] == pytest.approx(load.max() / load.mean())
    assert d["part_lines"] == load.tolist()
    assert d["replication_factor_completed"] >= d["replication_factor"]
    if method != "hdrf":   # owner results: completion adds the source sides' owners
        assert d["replication_factor_completed"] > d["replication_factor"]
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["replication_factor"] == d["replication_factor"]
    assert saved["replication_factor_completed"] == d["replication_factor_completed"]


def test_a_kept_assignment_file_goes_with_its_partition(edge_file, tmp_path):
    """A partition of an edge file keeps each line's part in a temporary file; dropping the partition (or
    closing it) removes the file, so runs leave no ``assign-*.bin`` behind."""
    import gc

    from workbench.partition.streaming import EdgeFileStream, HDRFPartitioner

    path, lines, n = edge_file
    result = HDRFPartitioner().stream(EdgeFileStream(path, chunk_edges=64), 4, keep_assignment=True,
                                      assignment_dir=tmp_path)
    assert len(list(tmp_path.glob("assign-*.bin"))) == 1
    del result
    gc.collect()
    assert not list(tmp_path.glob("assign-*.bin"))


@pytest.mark.parametrize("method", STREAMING_METHODS)
def test_narrow_state_widens_without_changing_results(edge_file, monkeypatch, method):
    """Degrees and partial degrees are int32 and ids int32 below 2^31 vertices; a count about to overflow is
    widened to int64 where it happens and ids are widened when the capacity passes the limit (both forced here
    with small limits): the same owners and line parts, bit for bit."""
    from workbench.partition.streaming import methods, state

    path, lines, n = edge_file
    want = stream_partition(path, 4, method=method, chunk_edges=53, keep_assignment=True)
    monkeypatch.setattr(methods, "_count_limit", lambda counts: 5 if counts.dtype == np.int32 else 2 ** 62)
    monkeypatch.setattr(state, "index_dtype", lambda capacity: np.int32 if capacity < 100 else np.int64)
    got = stream_partition(path, 4, method=method, chunk_edges=53, keep_assignment=True)
    assert np.array_equal(got.owner, want.owner) and np.array_equal(got.line_parts(), want.line_parts())
    assert got.metrics.comm_rows.tolist() == want.metrics.comm_rows.tolist()


def test_state_arrays_are_narrow(edge_file, monkeypatch):
    from workbench.partition.streaming import state
    from workbench.partition.streaming.state import INDEX, StreamRun, index_dtype

    assert index_dtype(2 ** 31 - 1) == np.int32 and index_dtype(2 ** 31) == np.int64
    path, lines, n = edge_file
    run = StreamRun(None, 4, 0, None)
    run.array("cid", INDEX, -1)
    run.array("vol", np.int64, 0)
    run.cid[7] = 3
    run.ensure(np.array([3000]), np.array([1]))
    assert run.cid.dtype == np.int32 and run.vol.dtype == np.int64 and run.cid.size > 3000
    monkeypatch.setattr(state, "index_dtype", lambda capacity: np.int32 if capacity < 4000 else np.int64)
    run.ensure(np.array([5000]), np.array([1]))   # past the (forced) limit: ids widened, values kept
    assert run.cid.dtype == np.int64 and run.cid[7] == 3 and (run.cid[8:] == -1).all() and run.cid.size > 5000
    s = stream_partition(path, 4, method="spring").metrics.state_bytes
    assert s <= (n + 1024) * 20 + 4096   # int32 degrees, cluster ids, richest neighbours, ranks and volumes


# ------------------------------------------------------------------------------------------- text parsed once

def test_spilled_text_stream_replays_the_text_chunks_and_cleans_up(tmp_path):
    """The spill gives the text pass's lines in its chunks (a line's place in its chunk is part of the K = 0
    random side), drops itself for an id past int32, and its file goes with close()."""
    from workbench.partition.streaming import EdgeFileStream
    from workbench.partition.streaming.stream import SpilledTextStream

    rng = np.random.default_rng(0)
    path = tmp_path / "g.txt"
    path.write_text("# header\n" + "".join(f"{u} {v}\n" for u, v in rng.integers(0, 500, (3000, 2))))
    want = [(s.copy(), d.copy()) for s, d in EdgeFileStream(path, chunk_edges=100)]
    spill = SpilledTextStream(EdgeFileStream(path, chunk_edges=100), tmp_path / "spill")
    for k in range(3):
        got = [(s.copy(), d.copy()) for s, d in spill]
        assert spill.spilled and len(got) == len(want) > 10
        assert all((a == c).all() and (b == d).all() for (a, b), (c, d) in zip(got, want)), k
    assert len(list((tmp_path / "spill").iterdir())) == 1
    spill.close()
    assert list((tmp_path / "spill").iterdir()) == [] and not spill.spilled
    big = tmp_path / "big.txt"
    big.write_text(f"0 1\n1 {2 ** 31}\n")
    spill = SpilledTextStream(EdgeFileStream(big), tmp_path / "spill")
    for _ in range(2):
        assert [d.tolist() for _, d in spill] == [[1, 2 ** 31]] and not spill.spilled
    assert list((tmp_path / "spill").iterdir()) == []


@pytest.mark.parametrize("method", STREAMING_METHODS)
def test_text_parsed_once_gives_the_same_partition(tmp_path, method):
    """spill_text (the default) changes nothing in the result, K = 0 included, and leaves no file behind."""
    from workbench.partition.base import get_partitioner
    from workbench.partition.streaming import EdgeFileStream
    from workbench.partition.streaming.generate import write_edge_file

    path = write_edge_file(tmp_path / "g.txt", 2000, 20_000, seed=1)
    for k_hops in (1, 0):
        runs = [get_partitioner(method)(seed=3).stream(EdgeFileStream(path, chunk_edges=1000), 4, k_hops=k_hops,
                                                       keep_assignment=True, spill_text=spill,
                                                       assignment_dir=tmp_path / "tmp")
                for spill in (False, True)]
        assert (runs[0].owner == runs[1].owner).all()
        assert (runs[0].line_parts() == runs[1].line_parts()).all()
        assert (runs[0].metrics.comm_rows == runs[1].metrics.comm_rows).all()
        for r in runs:
            r.close()
    assert list((tmp_path / "tmp").iterdir()) == []
