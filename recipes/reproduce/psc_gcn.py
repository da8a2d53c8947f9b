"""PSC-GCN's claims (Wang et al.) beside this workbench's numbers.

Four runs of the ``psc_gcn`` recipe on its 3000-vertex power-law SBM with 4 ranks (sync: ε = 1, τ = 0;
PipeGCN: ε = 1, τ = 1; PSC: ε = 0.1 with τ = 2 and τ = 1) give accuracies, realised staleness and the
**simulated** iteration times of the recipe's discrete-event account (one serial link per worker, bandwidth set
so a synchronous iteration communicates ``comm_ratio = 3`` x its compute; only ratios mean anything, and they
depend on that chosen ratio). The estimator's variance and the caches' hit ratios are exact counts on one
part's edges (:mod:`workbench.sample.psc_analysis`).

Example:
    >>> setting(quick=True)
    'sbm 3000 vertices (power-law degrees), 4 ranks, METIS, GCN 2 x 32, 40 iterations, seeds 0, 1, 2'
"""

from __future__ import annotations

from recipes.reproduce.core import SEEDS, Check, Claim, not_reproducible, over_seeds, run_config

TITLE = "PSC-GCN: sampled full-graph GCN, τ-stale prefetch, inclusion-aware cache"
WORKERS = 4


def _epochs(quick: bool) -> int:
    return 40 if quick else 100


def setting(quick: bool) -> str:
    return (f"sbm 3000 vertices (power-law degrees), {WORKERS} ranks, METIS, GCN 2 x 32, {_epochs(quick)} iterations, "
            f"seeds {', '.join(map(str, SEEDS))}")


def _runs(epochs: int, seed: int = 0) -> dict:
    from recipes import psc_gcn

    cfgs = {"sync": psc_gcn.sync(epochs=epochs, seed=seed), "pipegcn": psc_gcn.pipegcn(epochs=epochs, seed=seed),
            "psc": psc_gcn.recipe(epochs=epochs, seed=seed),
            "psc tau=1": psc_gcn.recipe(epochs=epochs, seed=seed).with_strings({"exchange.tau": "1"})}
    return {name: run_config(cfg, WORKERS) for name, cfg in cfgs.items()}


def _exact(draws: int) -> dict:
    """Eq. 16 variance of VR and uniform sampling, and the expected hit ratios at a 30 % cache (rank 0's part)."""
    import torch

    from recipes import psc_gcn
    from workbench.data import load_graph
    from workbench.sample import SAMPLERS
    from workbench.sample.psc_analysis import expected_hit_ratio, part_edges, variance_check

    graph = load_graph(psc_gcn.DEFAULT_GRAPH)
    edges, shard = part_edges(graph, WORKERS)
    gen = torch.Generator().manual_seed(0)
    hw = graph.features.double() @ torch.randn(graph.num_features, 16, generator=gen, dtype=torch.float64)
    rows = hw[torch.cat([shard.plan.inner_gid, shard.plan.halo_gid])]
    samplers = {"psc": SAMPLERS.build("psc", epsilon=0.1), "uniform": SAMPLERS.build("uniform_edge", epsilon=0.1)}
    var = {r["sampler"]: r for r in variance_check(edges, rows, samplers, draws=draws)}
    s = samplers["psc"]
    p = s.probabilities(edges, rows.pow(2).sum(1))
    hits = {r["policy"]: r["hit_rate"] for r in expected_hit_ratio(edges, p, s.inclusion(edges, p), shard.plan.halo_gid,
                                                                    graph.out_degrees(), [0.3])}
    return {"var": var, "hits": hits}


def _per_iteration(s: dict) -> float:
    return sum(s["simulated_iteration_s"]) / len(s["simulated_iteration_s"])


def claims(quick: bool = False) -> list[Claim]:
    """Every PSC-GCN claim, measured (``quick``: fewer iterations and variance draws)."""
    from workbench.train.pipeline_time import time_to_accuracy

    per_seed = [_runs(_epochs(quick), seed) for seed in SEEDS]
    runs = per_seed[0]

    def speedup(r: dict, a: str, b: str) -> float:
        return _per_iteration(r[a]) / _per_iteration(r[b])

    def tta_ratio(r: dict) -> float:
        target = 0.95 * max(r["sync"]["accuracy_by_epoch"]["val"])
        t = {k: time_to_accuracy(r[k]["simulated_iteration_s"], r[k]["accuracy_by_epoch"]["val"], target)
             for k in ("sync", "psc")}
        return t["sync"] / t["psc"] if t["sync"] and t["psc"] else float("nan")

    it = {k: _per_iteration(s) for k, s in runs.items()}
    acc = {k: s["accuracy"]["test"] for k, s in runs.items()}
    sim_note = ("simulated s per iteration (comm_ratio = 3): " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in
                                                                            it.items()))
    target = 0.95 * max(runs["sync"]["accuracy_by_epoch"]["val"])
    tta = {k: time_to_accuracy(s["simulated_iteration_s"], s["accuracy_by_epoch"]["val"], target)
           for k, s in runs.items()}
    realised = [x for x in runs["psc"]["staleness_realised"] if x is not None]
    exact = _exact(100 if quick else 400)
    var, hits = exact["var"], exact["hits"]
    accs = ", ".join(f"{k} {v:.4f}" for k, v in acc.items())
    hit_note = ", ".join(f"{k} {v:.3f}" for k, v in hits.items()) + " (expected hit ratio, 30 % of rank 0's boundary)"
    return [
        Claim("psc_gcn.per_iteration_speedup", "per-iteration speed-up of PSC (ε = 0.1, τ = 2) over synchronous "
              "full-graph training (simulated)", "Table III (Reddit 2.60, products 3.81, Yelp 3.97)",
              paper=(2.60, 3.97), null=1.0, relation=">", **over_seeds(per_seed, lambda r: speedup(r, "sync", "psc")),
              unit="x",
              note=sim_note + "; the ratio grows with the chosen comm_ratio"),
        Claim("psc_gcn.pipegcn_speedup", "per-iteration speed-up of PipeGCN (ε = 1, τ = 1) over synchronous "
              "(simulated)", "Table III (1.40, 1.82, 1.53)", paper=(1.40, 1.82), null=1.0, relation=">",
              **over_seeds(per_seed, lambda r: speedup(r, "sync", "pipegcn")), unit="x", note=sim_note),
        Claim("psc_gcn.tau2_vs_tau1", "τ = 2 cuts the time per iteration against τ = 1 (ε = 0.1): 1 - t(τ=2) ÷ t(τ=1)",
              "§VI text, Table III (6-13 %; Reddit's table gives 1.9 %)", paper=(0.06, 0.13), null=0.0, relation=">",
              **over_seeds(per_seed, lambda r: 1 - 1 / speedup(r, "psc tau=1", "psc")), unit="fraction",
              note=sim_note + "; with one serial link per worker the steady state is max(compute, comm) for every "
                              "τ >= 1, so this difference is about 0 by construction"),
        Claim("psc_gcn.convergence_speedup", "time to accuracy: synchronous ÷ PSC (ε = 0.1, τ = 2), simulated, to "
              "95 % of sync's best validation accuracy", "Table III (1.77, 3.57, 3.97)", paper=(1.77, 3.97),
              null=1.0, relation=">", **over_seeds(per_seed, tta_ratio), unit="x",
              note=f"target {target:.3f}; simulated seconds to it: "
                             + ", ".join(f"{k} {v if v is None else round(v, 3)}" for k, v in tta.items())),
        Claim("psc_gcn.accuracy_vs_sync", "PSC (ε = 0.1, τ = 2) at least as accurate as synchronous full-graph "
              "training (test accuracy difference)", "Table II (+0.20, +1.90, +0.16 pt)", paper=(0.0016, 0.019),
              null=0.0, relation=">",
              **over_seeds(per_seed, lambda r: r["psc"]["accuracy"]["test"] - r["sync"]["accuracy"]["test"]),
              unit="accuracy",
              note=f"{accs}; this graph is nearly separable (accuracies near 0.99), so a gain of the paper's size "
                   "has little room"),
        Check("psc_gcn.staleness_realised", "boundary rows are consumed exactly τ = 2 iterations after they were "
              "produced (largest |realised - τ|; §III, Algorithm 1)",
              measured=max(abs(x - 2) for x in realised) if realised else float("nan"), expected=0.0,
              note=f"{len(realised)} iterations after the warm-up of 2"),
        Claim("psc_gcn.variance_vs_uniform", "variance-reduction sampling: Eq. 16 variance ÷ uniform sampling's at the "
              "same ε = 0.1, below 1", "§IV, Lemma 3", paper=None, null=1.0, relation="<",
              measured=var["psc"]["eq16"] / var["uniform"]["eq16"], unit="ratio",
              note="rank 0's part of 4, rows H W from the features and a seeded W"),
        Check("psc_gcn.eq16_exact", "the estimator's empirical variance ÷ Eq. 16 (§IV)",
              measured=var["psc"]["empirical"] / var["psc"]["eq16"], expected=1.0, tolerance=0.05,
              note=f"{100 if quick else 400} draws; tolerance 0.05 = their Monte-Carlo error"),
        Claim("psc_gcn.cache_vs_random", "inclusion-aware cache's hit ratio above a random cache's (points)",
              "§VII, Fig. 8b (7-25 %)", paper=(0.07, 0.25), null=0.0, relation=">",
              measured=hits["inclusion"] - hits["random"], unit="fraction",
              note=hit_note + "; points or relative is unclear in the paper: points here"),
        Claim("psc_gcn.cache_vs_degree", "inclusion-aware cache's hit ratio above PaGraph's degree cache (points)",
              "§VII, Fig. 8b (3-17 %)", paper=(0.03, 0.17), null=0.0, relation=">",
              measured=hits["inclusion"] - hits["degree"], unit="fraction", note=hit_note),
        Claim("psc_gcn.wall_clock", "less time to convergence than full-graph training: 1 - 1 ÷ the time-to-accuracy "
              "speed-up above (simulated)", "Abstract, Table III (72-80 %)", paper=(0.72, 0.80), null=0.0, relation=">",
              **over_seeds(per_seed, lambda r: 1 - 1 / tta_ratio(r)), unit="fraction",
              note="the simulated account of psc_gcn.convergence_speedup, not a wall clock: it "
                                    "depends on the chosen comm_ratio (the paper: 6 T4 GPUs on a 15 Gbps LAN)"),
        not_reproducible("psc_gcn.gpu_utilisation", "synchronous training leaves GPUs 61-65 % idle (35-39 % "
                         "utilisation)", "§I, Fig. 2", (0.35, 0.39), "fraction", "real GPU utilisation"),
    ]
