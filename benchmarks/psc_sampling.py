"""PSC-GCN's sampler on one part: the vectorised KKT refresh (Eq. 19 for every vertex at once) against the
reference per-vertex loop of Theorem 2, and one Bernoulli draw against the refresh. Ratios only, measured in
the same run (the machine may be shared).

Usage::

    python benchmarks/psc_sampling.py                       # sbm 20k vertices, avg degree 32, 4 METIS parts
    python benchmarks/psc_sampling.py --nodes 50000 --loop-targets 2000
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from workbench.data import load_graph
from workbench.sample import SAMPLERS
from workbench.sample.psc import kkt_probabilities
from workbench.sample.psc_analysis import part_edges


def vr_probs_loop(s: np.ndarray, budget: float) -> np.ndarray:
    """Theorem 2 (Eq. 19) for one target as written: a Python loop over k."""
    n = len(s)
    if budget >= n:
        return np.ones(n)
    order = np.argsort(s, kind="stable")
    ss = s[order]
    cs = np.cumsum(ss)
    k = n
    for k in range(n, 0, -1):
        if (budget + k - n) * ss[k - 1] <= cs[k - 1] * (1 + 1e-12):
            break
    c = (budget + k - n) / cs[k - 1]
    p = np.empty(n)
    p[order[:k]] = c * ss[:k]
    p[order[k:]] = 1.0
    return p


def best_of(fn, repeats=3):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=20000)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--epsilon", type=float, default=0.1)
    ap.add_argument("--loop-targets", type=int, default=1000, help="targets the Python loop solves (then scaled)")
    args = ap.parse_args()
    g = load_graph(f"sbm:num_nodes={args.nodes},num_blocks=8,avg_degree=32,degree_exponent=2.5,num_features=32,seed=0")
    edges, _ = part_edges(g, args.parts)
    other = ~edges.self_loop
    tgt, w = edges.target[other], edges.weight[other].double()
    h = torch.rand(edges.num_inner + edges.num_halo, dtype=torch.float64) + 0.1
    s = w * h[edges.source[other]].sqrt()
    budget = args.epsilon * torch.bincount(tgt, minlength=edges.num_inner).double()
    t_vec, p = best_of(lambda: kkt_probabilities(tgt, s, budget))
    # the loop on the first loop_targets targets, scaled to all
    order = torch.argsort(tgt, stable=True)
    counts = torch.bincount(tgt, minlength=edges.num_inner)
    starts = torch.cumsum(counts, 0) - counts
    k = min(args.loop_targets, edges.num_inner)
    s_np, o_np = s.numpy(), order.numpy()

    def loop():
        return [vr_probs_loop(s_np[o_np[starts[i]:starts[i] + counts[i]]], float(budget[i])) for i in range(k)]

    t_loop, ref = best_of(loop, repeats=1)
    t_loop_all = t_loop * edges.num_inner / k
    agree = max(float(np.abs(ref[i] - p.numpy()[o_np[starts[i]:starts[i] + counts[i]]]).max()) for i in range(k)
                if counts[i])
    sampler = SAMPLERS.build("psc", epsilon=args.epsilon)
    probs = sampler.probabilities(edges, h)
    t_draw, _ = best_of(lambda: sampler.draw(edges, probs, 0, 0))
    t_refresh, _ = best_of(lambda: sampler.probabilities(edges, h))
    print(json.dumps({"edges": int(other.sum()), "targets": edges.num_inner,
                      "kkt_vectorised_s": round(t_vec, 4), "kkt_python_loop_s_scaled": round(t_loop_all, 4),
                      "speedup_vs_loop": round(t_loop_all / t_vec, 1), "max_abs_difference": agree,
                      "draw_s": round(t_draw, 4), "refresh_over_draw": round(t_refresh / t_draw, 1)}, indent=1))


if __name__ == "__main__":
    main()
