"""hit_rate_curve: static policies on a power-law graph, and agreement with a real CachedFeatureStore.

What the power-law test checks, honestly: the requests are the full 1-hop in-neighbourhoods of rank 0's
vertices, one batch of 256 seeds at a time (each batch's inputs once), so a remote vertex is requested
about as often as it has out-edges into rank 0's part: a degree-weighted access pattern, which is the
case where PaGraph's degree cache should beat a random one. It is not a sampled multi-layer workload.
"""

from __future__ import annotations

import pytest
import torch

import workbench as wb
from workbench._validation import ParamError
from workbench.cache import CACHES, FeatureStore, hit_rate_curve
from workbench.testing import run_ranks


def input_stream(graph, node_part, rank, batch_size=256, seed=0):
    """Global ids of the 1-hop inputs of each batch of ``rank``'s seeds, batch after batch (vectorised)."""
    n = graph.num_nodes
    owned = (node_part == rank).nonzero().flatten()
    perm = owned[torch.randperm(owned.numel(), generator=torch.Generator().manual_seed(seed))]
    batch_of = torch.full((n,), -1, dtype=torch.int64)
    batch_of[perm] = torch.arange(perm.numel()) // batch_size
    src, dst = graph.edges()
    keep = batch_of[dst] >= 0
    key = torch.unique(batch_of[dst[keep]] * n + src[keep])  # sorted by batch, then id
    return key % n, key // n


@pytest.fixture(scope="module")
def powerlaw():
    g = wb.load_graph("chunglu:num_nodes=20000,avg_degree=10,seed=0")
    node_part = torch.randint(0, 4, (g.num_nodes,), generator=torch.Generator().manual_seed(0))
    return g, node_part


def test_degree_beats_random_on_a_power_law_graph(powerlaw):
    g, node_part = powerlaw
    stream, _ = input_stream(g, node_part, 0)
    df = hit_rate_curve(stream, node_part, 0, ["degree", "random", "oracle", "none"], [0.0, 0.1, 1.0], graph=g)
    at = df.set_index(["policy", "ratio"])["hit_rate"]
    assert at["degree", 0.1] > 2 * at["random", 0.1]           # measured 0.347 vs 0.103
    assert at["oracle", 0.1] >= at["degree", 0.1]
    assert abs(at["random", 0.1] - 0.1) < 0.03                 # random holds 10 % of the requests
    assert at["none", 0.1] == 0 and (at.xs(0.0, level="ratio") == 0).all()
    assert (at.xs(1.0, level="ratio").drop("none") == 1).all()
    row = df.set_index(["policy", "ratio"]).loc[("degree", 0.1)]
    assert row["bytes"] == row["misses"] * (4 + 8) and row["hits"] + row["misses"] == row["remote_requests"]


@pytest.mark.parametrize("method", ["degree", "random", "inclusion", "none"])
def test_the_curve_matches_a_real_cache(method):
    g = wb.load_graph("chunglu:num_nodes=1500,avg_degree=6,seed=1")
    node_part = torch.randint(0, 2, (g.num_nodes,), generator=torch.Generator().manual_seed(1))
    probs = torch.rand(g.num_nodes, generator=torch.Generator().manual_seed(2))
    feats = g.features
    streams = [input_stream(g, node_part, r, batch_size=64) for r in range(2)]
    num_batches = max(int(b.max()) + 1 for _, b in streams)

    def body(comm):
        owned = (node_part == comm.rank).nonzero().flatten()
        cached = CACHES.build(method, ratio=0.2).wrap(FeatureStore(owned, feats[owned], node_part, comm),
                                                      graph=g, probabilities=probs)
        ids, batch = streams[comm.rank]
        for b in range(num_batches):  # same number of pulls on every rank
            rows = cached.pull(ids[batch == b])
            assert torch.equal(rows, feats[ids[batch == b]])
        return cached.epoch_stats(0)

    for rank, st in enumerate(run_ranks(2, body)):
        curve = hit_rate_curve(streams[rank][0], node_part, rank, [method], [0.2], graph=g, probabilities=probs,
                               width=feats.shape[1]).iloc[0]
        assert (st.hits, st.misses, st.bytes_saved) == (curve["hits"], curve["misses"], curve["bytes_saved"])


def test_bad_arguments():
    with pytest.raises(ParamError, match=r"The 'policies' parameter of hit_rate_curve must be names among"):
        hit_rate_curve([0, 1], torch.tensor([0, 1]), 0, ["lru"])
    with pytest.raises(ParamError, match=r"The 'ratios' parameter"):
        hit_rate_curve([0, 1], torch.tensor([0, 1]), 0, ["degree"], [2.0], degrees=torch.ones(2))
    with pytest.raises(ParamError, match=r"The 'accesses' parameter"):
        hit_rate_curve([5], torch.tensor([0, 1]), 0, ["random"])


def test_the_benchmark_script_runs(capsys, monkeypatch):
    import json
    import runpy
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "cache_hit_rate.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--graph", "chunglu:num_nodes=800,avg_degree=6,seed=0",
                                      "--parts", "2", "--ratios", "0.1,1.0", "--json"])
    runpy.run_path(str(script), run_name="__main__")
    out = json.loads(capsys.readouterr().out)
    rows = {r["ratio"]: r for r in out["hit_rate"]}
    assert rows[1.0]["degree"] == 1.0 and rows[0.1]["degree"] > rows[0.1]["random"]
