"""PSC-GCN analyses without training: Table I-style part statistics, estimator variance (Eq. 16 against
repeated draws, VR against uniform), expected cache hit ratio by policy and cache fraction.

All are counting on one part's :class:`~workbench.sample.psc.PartEdges` (built from the ``halo``
layout, GCN normalisation with global degrees), so they match what a ``psc_gcn`` run samples.

Example:
    >>> from workbench.data import load_graph
    >>> g = load_graph("sbm:num_nodes=400,num_blocks=4,avg_degree=8,seed=0")
    >>> rows = part_counts(g, [2, 4])
    >>> [r["parts"] for r in rows], rows[0]["inner"]
    ([2, 4], 200.0)
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from workbench.sample.psc import PartEdges, estimator_variance

__all__ = ["part_counts", "part_edges", "variance_check", "expected_hit_ratio"]


def part_counts(graph, num_parts_list: Sequence[int], method: str = "metis", seed: int = 0) -> list[dict]:
    """Average inner, boundary (remote 1-hop in-neighbours) and IC (inner vertices some other part holds as
    boundary) vertices per part, for each number of parts (Table I)."""
    from workbench.partition import partition
    from workbench.layout.halo import build_halo_plans

    out = []
    for p in num_parts_list:
        node_part = torch.as_tensor(partition(graph, p, method=method, seed=seed).node_part, dtype=torch.int64)
        plans = build_halo_plans(graph, node_part, p)
        ic = [len(torch.unique(torch.cat([t for t in plan.send_local_nid]))) if plan.world_size > 1 else 0
              for plan in plans]
        out.append({"parts": p, "inner": sum(x.num_inner for x in plans) / p,
                    "boundary": sum(x.num_halo for x in plans) / p, "inner_cut": sum(ic) / p,
                    "boundary_per_inner": sum(x.num_halo for x in plans) / max(sum(x.num_inner for x in plans), 1)})
    return out


def part_edges(graph, num_parts: int, rank: int = 0, method: str = "metis", seed: int = 0):
    """``(PartEdges, shard)`` of part ``rank`` under GCN normalisation (the edges a ``psc_gcn`` rank samples)."""
    from workbench.partition import partition
    from workbench.train.full_graph import build_shards
    from workbench.train.models import GCN

    node_part = torch.as_tensor(partition(graph, num_parts, method=method, seed=seed).node_part, dtype=torch.int64)
    shards, _ = build_shards(graph, node_part, num_parts, GCN, [graph.num_features])
    s = shards[rank]
    edges = PartEdges(target=s.agg_rows, source=s.agg_cols, weight=s.agg_weights, num_inner=s.plan.num_inner,
                      num_halo=s.plan.num_halo)
    return edges, s


def variance_check(edges: PartEdges, rows: torch.Tensor, samplers: dict, draws: int = 300) -> list[dict]:
    """Empirical ``sum_i E||Z^_i - Z_i||^2`` over ``draws`` draws against Eq. 16, for each named sampler.

    ``rows``: ``(num_inner + num_halo, F)`` fixed rows ``H_j W`` (so ``h_j = ||rows_j||^2``);
    ``samplers``: label -> :class:`~workbench.sample.psc.EdgeSampler`."""
    import scipy.sparse as sp

    rows = rows.to(torch.float64)
    h = rows.pow(2).sum(1)
    w = edges.weight.to(torch.float64)
    e = edges.num_edges
    to_target = sp.csr_matrix((torch.ones(e, dtype=torch.float64).numpy(), (edges.target.numpy(), range(e))),
                              shape=(edges.num_inner, e))                     # (num_inner, E): sums edges per target
    y = rows[edges.source].numpy()                                            # (E, F)
    y_sq = w ** 2 * h[edges.source]
    out = []
    for label, s in samplers.items():
        p = s.probabilities(edges, h)
        sq = 0.0
        for d in range(draws):
            keep = s.draw(edges, p, d, 0)
            dev = (s.weights(edges, p, keep).to(torch.float64) - w).numpy()   # (chi/p - 1) P_ij
            sq += float(((to_target @ (dev[:, None] * y)) ** 2).sum())
        out.append({"sampler": label, "empirical": sq / draws,
                    "eq16": float(estimator_variance(edges, p, y_sq).sum()),
                    "expected_boundary_rows": float(s.inclusion(edges, p).sum())})
    return out


def expected_hit_ratio(edges: PartEdges, p: torch.Tensor, inclusion: torch.Tensor, halo_gid: torch.Tensor,
                       degrees: torch.Tensor, ratios: Sequence[float], seed: int = 0,
                       policies: Optional[Sequence[str]] = None) -> list[dict]:
    """Expected hit ratio ``sum_{j in C} p_j / sum_{j in B} p_j`` (and the un-normalised reading
    ``sum_{j in C} p_j / |B|``) of a cache of ``ratio x |B|`` boundary vertices chosen by each policy."""
    from workbench.cache.policies import capacity_for, rank_candidates

    nb = int(halo_gid.numel())
    local = torch.arange(nb)
    gen = torch.Generator().manual_seed(seed)
    scores = {"inclusion": inclusion.to(torch.float64), "degree": degrees[halo_gid].to(torch.float64),
              "random": torch.rand(nb, generator=gen, dtype=torch.float64)}
    total = float(inclusion.sum())
    out = []
    for policy in (policies or list(scores)):
        order = rank_candidates(local, scores[policy])
        for r in ratios:
            chosen = order[:capacity_for(float(r), nb)]
            mass = float(inclusion[chosen].sum())
            out.append({"policy": policy, "ratio": float(r), "hit_rate": mass / total if total else 0.0,
                        "hit_mass_per_boundary": mass / nb if nb else 0.0})
    return out
