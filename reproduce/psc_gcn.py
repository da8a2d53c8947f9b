"""PSC-GCN's claims (Wang et al.) beside this workbench's numbers.

Five runs of the ``psc_gcn`` recipe on its 3000-vertex power-law SBM with 4 ranks (sync: ε = 1, τ = 0;
PipeGCN: ε = 1, τ = 1; PSC: ε = 0.1 with τ = 2 and τ = 1, and ε = 0.01 with τ = 2) give accuracies, realised
staleness and the **simulated** iteration times of the recipe's discrete-event account (one serial link per
worker, bandwidth set so a synchronous iteration communicates ``comm_ratio = 3`` x its compute; only ratios mean
anything, and they depend on that chosen ratio). The time claims (:data:`MEASURED`) are **measured** instead on
2 emulated hosts with shaped 100 Mbit/s links (:mod:`reproduce.emulated`), the simulated values beside
them in the notes; without an emulated cluster (no root) they are not reproducible here. The estimator's variance and the caches' hit ratios are exact
counts on one part's edges (:mod:`workbench.sample.psc_analysis`).

Example:
    >>> setting(quick=True)
    'sbm 3000 vertices (power-law degrees), 4 ranks, METIS, GCN 2 x 32, 40 iterations, seeds 0, 1, 2'
"""

from __future__ import annotations

from reproduce import emulated
from reproduce.core import SEEDS, Check, Claim, measured_in, not_reproducible, over_seeds, run_config

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
            "psc tau=1": psc_gcn.recipe(epochs=epochs, seed=seed).with_strings({"exchange.tau": "1"}),
            "psc eps=0.01": psc_gcn.recipe(epochs=epochs, seed=seed).with_strings({"sample.epsilon": "0.01"})}
    return {name: run_config(cfg, WORKERS) for name, cfg in cfgs.items()}


def _exact(draws: int) -> dict:
    """Eq. 16 variance of VR and uniform sampling, the expected hit ratios at a 30 % cache (rank 0's part), and the
    graph's vertices, edges and test vertices."""
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
    return {"var": var, "hits": hits, "nodes": graph.num_nodes, "edges": graph.num_edges,
            "test": int(graph.test_mask.sum())}


TABLE3_RATIO = "Table III: Full-graph's {what} seconds ÷ {row}'s, on Reddit, Ogbn-products and Yelp"
"""How a speed-up of Table III follows from its rows (the paper prints the seconds, not the ratios)."""


def _per_iteration(s: dict) -> float:
    return sum(s["simulated_iteration_s"]) / len(s["simulated_iteration_s"])


MEASURED = {"psc_gcn.per_iteration_speedup": "sync/psc", "psc_gcn.per_update_speedup": "sync/psc eps=0.01",
            "psc_gcn.pipegcn_speedup": "sync/pipegcn", "psc_gcn.tau2_vs_tau1": "tau2_vs_tau1",
            "psc_gcn.convergence_speedup": "convergence sync/psc", "psc_gcn.wall_clock": "convergence sync/psc"}
"""The time claims measured on emulated hosts (:func:`reproduce.emulated.psc_epochs`): claim id -> the
ratio they read (``wall_clock``: 1 - 1 ÷ it)."""


def _measured_times(out: list, timed) -> list:
    """``out`` with the claims of :data:`MEASURED` measured on emulated hosts instead of simulated, or not
    reproducible with the reason where no emulated cluster runs (the simulated value kept in the note)."""
    import dataclasses
    import math

    if not isinstance(timed, str):
        per_run = "; ".join(f"seed {r['seed']}: " + ", ".join(
            f"{k} {v['median_s'] * 1e3:.1f} ms ({v['train_bytes'] / 1e6:.2f} MB, comm {v['comm_share']:.0%})"
            for k, v in r["variants"].items()) for r in timed["per_seed"])
        where = (f"measured: {timed['setting']['text']}; {timed['cluster']}; per iteration, the slowest rank's "
                 f"training time (evaluation left out): {per_run}; load average {timed['load_average'][0]:.1f}-"
                 f"{timed['load_average'][1]:.1f}. The prefetch exchange sends and receives in the rank's one "
                 "thread, so PipeGCN's and τ = 2's overlap hides no communication here: their gains can only come "
                 "from bytes or noise, and PSC's from the rows its sampling and cache save")
    result, first = [], None
    for c in out:
        key = MEASURED.get(c.id)
        if key is None:
            result.append(c)
            continue
        simulated = f"simulated (comm_ratio = 3): {c.measured:.4g} ± {c.spread:.2g}; {c.note}"
        claim = c.claim.replace("(simulated)", "(measured on emulated hosts)").replace(", simulated,", ",")
        values = [] if isinstance(timed, str) else [x for x in timed["ratios"][key] if x is not None]
        if c.id == "psc_gcn.wall_clock":
            values = [1 - 1 / x for x in values]
        if not values or not all(math.isfinite(x) for x in values):
            why = timed if isinstance(timed, str) else "PSC never reached sync's target accuracy in the measured runs"
            result.append(dataclasses.replace(c, claim=claim, measured=None, spread=0.0, note=f"{why}; {simulated}"))
            continue
        runs = where if first is None else measured_in(first, values)
        first = first or c.id
        result.append(dataclasses.replace(c, claim=claim, **over_seeds(values), note=f"{runs}. For comparison, "
                                                                                    f"{simulated}"))
    return result


def claims(quick: bool = False) -> list[Claim]:
    """Every PSC-GCN claim, measured (``quick``: fewer iterations and variance draws)."""
    from workbench.sim.pipeline_time import time_to_accuracy

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
    per = lambda f: ", ".join(f"{f(r):.5f}" for r in per_seed)  # noqa: E731  (one value per seed)
    gap_sync = lambda r: r["psc"]["accuracy"]["test"] - r["sync"]["accuracy"]["test"]  # noqa: E731
    tau_cut = lambda r: 1 - 1 / speedup(r, "psc tau=1", "psc")  # noqa: E731
    eps_drop = lambda r: r["psc"]["accuracy"]["test"] - r["psc eps=0.01"]["accuracy"]["test"]  # noqa: E731
    kept = {k: sum(runs[k]["kept_edges"]) / len(runs[k]["kept_edges"]) for k in ("psc", "psc eps=0.01")}
    hit_note = ", ".join(f"{k} {v:.3f}" for k, v in hits.items()) + " (expected hit ratio, 30 % of rank 0's boundary)"
    return _measured_times([
        Claim("psc_gcn.per_iteration_speedup", "per-iteration speed-up of PSC (ε = 0.1, τ = 2) over synchronous "
              "full-graph training (simulated)", "Table III (Reddit 2.60, products 3.81, Yelp 3.97)",
              paper=(2.60, 3.97), null=1.0, relation=">", **over_seeds(per_seed, lambda r: speedup(r, "sync", "psc")),
              unit="x", derived=TABLE3_RATIO.format(row="PSC-GCN (τ = 2, ε = 0.1)", what="per-iteration"),
              note=sim_note + "; the ratio grows with the chosen comm_ratio"),
        Claim("psc_gcn.per_update_speedup", "per-iteration (per model update) speed-up of PSC (ε = 0.01, τ = 2) over "
              "synchronous full-graph training (simulated)", "§I ('4.6-6.3 times faster per model update'), §VI-B 2) "
              "text ('4.6-6.3 times per-iteration acceleration compared to vanilla full-graph'), Table III's "
              "ε = 0.01 row", paper=(4.6, 6.3), null=1.0,
              relation=">", **over_seeds(per_seed, lambda r: speedup(r, "sync", "psc eps=0.01")), unit="x",
              note=sim_note + "; the paper's 4.6-6.3x is its ε = 0.01 row (Table III: full-graph ÷ PSC-GCN "
                              "(τ = 2, ε = 0.01) = 6.34, 5.39, 4.57), not the ε = 0.1 ratio above; simulated like it, "
                              "so it grows with the chosen comm_ratio too"),
        Claim("psc_gcn.pipegcn_speedup", "per-iteration speed-up of PipeGCN (ε = 1, τ = 1) over synchronous "
              "(simulated)", "Table III (1.40, 1.82, 1.53)", paper=(1.40, 1.82), null=1.0, relation=">",
              **over_seeds(per_seed, lambda r: speedup(r, "sync", "pipegcn")), unit="x", note=sim_note,
              derived=TABLE3_RATIO.format(row="PipeGCN", what="per-iteration")),
        Claim("psc_gcn.tau2_vs_tau1", "τ = 2 cuts the time per iteration against τ = 1 (ε = 0.1): 1 - t(τ=2) ÷ t(τ=1)",
              "§VI text, Table III (6-13 %; Reddit's table gives 1.9 %)", paper=(0.06, 0.13), null=0.0, relation=">",
              **over_seeds(per_seed, tau_cut), unit="fraction",
              note=sim_note + "; with one serial link per worker the steady state is max(compute, comm) for every "
                              f"τ >= 1, so this difference is about 0 by construction (seeds: {per(tau_cut)}). Its "
                              "sign follows small differences between the two runs' per-iteration traffic on the link, "
                              "not a mechanism, which is why the verdict moves with the run's length: "
                              "at 40 iterations (quick) -0.00035 ± 0.00024, all three seeds below 0 (does not hold); "
                              "at 100 (full) -0.00083 ± 0.0013 (inconclusive), both under 0.1 % against the paper's "
                              "6-13 %"),
        Claim("psc_gcn.convergence_speedup", "time to accuracy: synchronous ÷ PSC (ε = 0.1, τ = 2), simulated, to "
              "95 % of sync's best validation accuracy", "Table III (1.77, 3.57, 3.97)", paper=(1.77, 3.97),
              null=1.0, relation=">", **over_seeds(per_seed, tta_ratio), unit="x",
              derived=TABLE3_RATIO.format(row="PSC-GCN (τ = 2, ε = 0.1)", what="convergence"),
              note=f"target {target:.3f}; simulated seconds to it: "
                             + ", ".join(f"{k} {v if v is None else round(v, 3)}" for k, v in tta.items())),
        Claim("psc_gcn.accuracy_vs_sync", "PSC (ε = 0.1, τ = 2) at least as accurate as synchronous full-graph "
              "training (test accuracy difference)", "Table II (+0.20, +1.90, +0.16 pt)", paper=(0.0016, 0.019),
              null=0.0, relation=">",
              **over_seeds(per_seed, gap_sync), unit="accuracy",
              derived="Table II: PSC-GCN (τ = 2, ε = 0.1) minus Full-graph on Reddit, Ogbn-products and Yelp",
              note=f"{accs}; this graph is nearly separable (accuracies near 0.99), so a gain of the paper's size "
                   f"has little room (seeds: {per(gap_sync)}; one test vertex = {1 / exact['test']:.5f}). The "
                   f"verdict moves with the run's length because a few of the {exact['test']} test vertices decide "
                   "it: at 40 iterations (quick) PSC trails sync by 5 of "
                   "them on average (-0.0025 ± 0.0017: does not hold), at 100 (full) by 2 (-0.00095 ± 0.0017: "
                   "inconclusive)"),
        Claim("psc_gcn.epsilon_001_drop", "test accuracy falls when ε goes from 0.1 to 0.01 (τ = 2): accuracy at "
              "ε = 0.1 minus at ε = 0.01", "§VI-B 1) text ('decreases sharply by 5% on Ogbn-products when ε ranges "
              "from 0.1 to 0.01'; Table II: 80.84 % -> 75.73 %)", paper=0.05, null=0.0, relation=">",
              **over_seeds(per_seed, eps_drop), unit="accuracy",
              note=f"{accs} (seeds: {per(eps_drop)}); ε = 0.01 keeps {kept['psc eps=0.01']:.0f} edges per "
                   f"iteration, {exact['nodes']} of them self-loops (kept outside the budget; ε = 0.1: "
                   f"{kept['psc']:.0f}), of the graph's {exact['edges']}: about "
                   f"{(kept['psc eps=0.01'] - exact['nodes']) / exact['nodes']:.1f} sampled neighbours per vertex, "
                   "so the model sees little beyond each vertex's own noisy features; the paper's drop is on "
                   "Ogbn-products only (Table II: Reddit -0.41 pt, Yelp +0.05 pt)"),
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
    ], emulated.psc_epochs(quick=quick, seeds=SEEDS))
