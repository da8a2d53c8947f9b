"""G3's partitioner and refiner: incremental remote counts, Algorithm 1's invariants, the refine option and the
remote-vertex metrics of every partitioner."""

from __future__ import annotations

import numpy as np
import pytest

from workbench._validation import ParamError
from workbench.compose import RunConfig
from workbench.partition import PARTITIONERS, partition
from workbench.partition.g3 import RemoteTracker, refine_remote, remote_counts
from workbench.partition.metis import symmetric_csr
from workbench.partition.remote import REMOTE_KEYS


def _csr(graph):
    indptr, indices, _ = symmetric_csr(graph)
    return np.asarray(indptr), np.asarray(indices)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("num_parts", [2, 5])
def test_incremental_remote_counts_equal_a_full_recount_after_random_swaps(seed, num_parts, multigraph):
    g = multigraph(300, 900, directed=True, seed=seed)        # directed, duplicates and self-loops
    indptr, indices = _csr(g)
    rng = np.random.default_rng(seed)
    t = RemoteTracker(indptr, indices, rng.integers(0, num_parts, g.num_nodes), num_parts)
    assert (t.R == t.recount()).all()
    for _ in range(5):
        t.swap(rng.integers(0, g.num_nodes, (40, 2)))
        assert (t.R == t.recount()).all()
        # per-vertex out-of-part neighbour counts and the (part, vertex) counters stay exact too
        v = np.repeat(np.arange(g.num_nodes), np.diff(indptr))
        cross = t.part[v] != t.part[indices]
        assert (t.rem == np.bincount(v[cross], minlength=g.num_nodes)).all()
        assert (t.cnt > 0).sum() == t.recount().sum()


def test_refiner_keeps_part_sizes_and_never_widens_the_spread(planted):
    g = planted(num_blocks=4, block_size=60, p_in=0.2, p_out=0.02, seed=0)
    indptr, indices = _csr(g)
    start = np.repeat(np.arange(4), 60)
    start[:30] = 1                                                     # part 1 talks to everyone: unbalanced
    part, info = refine_remote(indptr, indices, start, 4)
    assert np.bincount(part, minlength=4).tolist() == np.bincount(start, minlength=4).tolist()
    assert info["spread_after"] <= info["spread_before"] and info["iterations"] > 0
    R = remote_counts(indptr, indices, part, 4)
    assert info["spread_after"] == pytest.approx((R.max() - R.min()) / R.max())
    assert info["stop"] in ("converged", "cycle", "patience", "max_iterations", "stuck")


def test_g3_method_and_refine_option_after_any_partitioner(planted):
    g = planted(num_blocks=4, block_size=50, p_in=0.2, p_out=0.01, seed=1)
    r = partition(g, 4, method="g3", seed=0)
    assert r.method == "g3" and r.refinement is not None
    d = r.metrics().to_dict()
    assert set(REMOTE_KEYS) <= set(d) and d["refine_iterations"] == r.refinement["iterations"]
    for base in ("random", "block", "metis"):
        plain, refined = partition(g, 4, method=base), partition(g, 4, method=base, refine="g3")
        assert plain.refinement is None and "refine_iterations" not in plain.metrics().to_dict()
        assert refined.part_sizes().tolist() == plain.part_sizes().tolist()
        assert refined.metrics().remote["remote_ratio"] >= plain.metrics().remote["remote_ratio"] - 1e-12
    assert partition(g, 4, method="g3", seed=3).node_part.tolist() == partition(g, 4, method="g3", seed=3).node_part.tolist()


def test_refine_is_a_setting_of_every_partitioner_and_bad_names_are_rejected():
    cfg = RunConfig.compose(graph="karate", partition="random").with_strings({"partition.refine": "g3"})
    assert cfg.partition.refine == "g3"
    with pytest.raises(ParamError, match=r"The 'refine' parameter of .+ must be None or one of \['g3'\]"):
        PARTITIONERS["metis"](refine="kl")
    with pytest.raises(ParamError, match="gamma"):
        PARTITIONERS["g3"](gamma=2.0)


def test_remote_metrics_match_the_halo_definition(karate):
    r = partition(karate, 3, method="random", seed=0)
    m = r.metrics()
    halo = [r.halo_nodes(p).numel() for p in range(3)]
    assert m.remote["max_remote_vertices"] == max(halo) and m.remote["total_remote_vertices"] == sum(halo)
    assert m.remote["max_part_vertices"] == int(r.part_sizes().max())
    deg = karate.in_degrees()
    assert m.remote["max_part_degree"] == max(int(deg[r.node_part == p].sum()) for p in range(3))
    assert m.remote["remote_ratio"] == pytest.approx(min(halo) / max(halo))


def test_p2p_beats_lhop_replication_more_as_layers_grow():
    """Fig. 14 on a graph with locality (tight communities): replication's L-hop halo outgrows L rounds of P2P."""
    from workbench.data import load_graph
    from workbench.partition.remote import lhop_halo_sizes, p2p_vs_replication

    g = load_graph("sbm:num_nodes=3000,num_blocks=30,avg_degree=6,homophily=0.99,seed=0")
    src, dst = (t.numpy() for t in g.edges())
    part = partition(g, 4, method="metis", seed=0).node_part.numpy()
    ratios = [p2p_vs_replication(src, dst, part, 4, L, [64] * L)["replication_over_p2p"] for L in (2, 3, 4)]
    assert ratios[0] < ratios[1] < ratios[2] and ratios[2] > 1
    halo = lhop_halo_sizes(src, dst, part, 4, 1)[0]
    r = partition(g, 4, method="metis", seed=0)
    assert halo.tolist() == [r.halo_nodes(p).numel() for p in range(4)]
