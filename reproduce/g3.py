"""G3's claims (Wan et al., SIGMOD 2023) beside this workbench's numbers.

Correctness and memory claims are exact (binned training against one process, bins against the emulated
device budget); the pipeline claims compare the simulated epochs of the four variants built from per-bin costs
measured on this machine (a discrete-event account, not measured overlap: see ``recipes.g3``); the partitioner
claims use the exact remote-vertex counts of each part (the paper's proxy for per-layer communication).

Example:
    >>> setting(quick=True)
    'training: sbm 2000 vertices, 4 ranks, 5 epochs, seeds 0, 1, 2; partitions: sbm 3000 vertices, P = 4, 8, 16'
"""

from __future__ import annotations

from reproduce.core import SEEDS, Check, Claim, geomean, not_reproducible, over_seeds, run_config

TITLE = "G3: locality-aware partitioning, P2P exchange, binned pipeline"
WORKERS = 4
PARTS = (4, 8, 16)


def _scale(quick: bool) -> tuple[int, int]:
    """(training epochs, vertices of the partitioning graph)."""
    return (5, 3000) if quick else (20, 20000)


def setting(quick: bool) -> str:
    epochs, n = _scale(quick)
    return (f"training: sbm 2000 vertices, {WORKERS} ranks, {epochs} epochs, seeds {', '.join(map(str, SEEDS))}; "
            f"partitions: sbm {n} vertices, P = {', '.join(map(str, PARTS))}")


def _training_claims(epochs: int) -> list[Claim]:
    from recipes import g3

    per_seed = [run_config(g3.recipe(epochs=epochs, seed=seed), WORKERS) for seed in SEEDS]
    binned = per_seed[0]
    single = run_config(g3.metis_whole(epochs=epochs, num_parts=1), 1)

    by_seed = [r["g3"]["simulated_epoch_s"] for r in per_seed]   # per seed: the simulated epoch of each variant

    def best_other(sim: dict) -> float:
        return min(v for k, v in sim.items() if k != "multi-level") / sim["multi-level"]

    rel = max(abs(a - b) / abs(b) for a, b in zip(binned["losses"], single["losses"]))
    info = binned["g3"]
    sim = info["simulated_epoch_s"]
    sims = ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in sim.items())
    where = (f"simulated epochs from per-bin costs measured here (not measured overlap; seed 0): {sims}; the "
             f"claims' numbers are means over seeds {list(SEEDS)}, whose per-bin times differ; packing the bins "
             f"and building their blocks took {info['one_off_s'] * 1e3:.1f} ms once, before training, in no epoch "
             "(charged every epoch until 2026-11-28)")
    return [
        Check("g3.binned_exact", "binned hybrid-parallel training equals single-process training (largest "
              "relative loss difference over the epochs; §5.3)", measured=rel, expected=0.0, tolerance=1e-5,
              note=f"{WORKERS} ranks with bins of the 'auto' budget vs 1 process, {epochs} epochs; tolerance 1e-5 = "
                   "float32 summation order"),
        Check("g3.bins_within_budget", "the packer keeps every bin within half the device-memory budget (§5.1): "
              "how far the largest bin's working set ÷ the budget exceeds 0.5 (0 = within)",
              measured=max(0.0, info["max_bin_bytes"] / info["memory_budget"] - 0.5), expected=0.0,
              note=f"budget {info['memory_budget']} B ({info['memory_budget_auto']}); bins per layer and rank "
                   f"{info['bins_per_layer']}"),
        Claim("g3.pipeline_over_sequential", "multi-level pipeline faster than the sequential schedule (speed-up, "
              "a trend under the simulated account)", "§7.7, Fig. 17 (up to 11.66x)", paper=11.66, null=1.0,
              relation=">", **over_seeds(by_seed, lambda sim: sim["sequential"] / sim["multi-level"]), unit="x",
              note=where),
        Claim("g3.intra_over_inter", "the intra-layer pipeline beats the inter-layer one (inter ÷ intra epoch)",
              "§7.7, Fig. 17", paper=None, null=1.0, relation=">",
              **over_seeds(by_seed, lambda sim: sim["inter"] / sim["intra"]),
              unit="x",
              note=where + f"; 'inter' on consecutive-id bins as the paper's ablation (on the priority bins "
                           f"{info['simulated_epoch_s_inter_priority_bins'] * 1e3:.2f} ms)"),
        Claim("g3.multilevel_best", "the full multi-level pipeline is the fastest variant (best other ÷ "
              "multi-level)", "§7.7, Fig. 17", paper=None, null=1.0, relation=">",
              **over_seeds(by_seed, best_other), unit="x", note=where),
    ]


ACCURACY_EPOCHS = 20
"""Epochs of the accuracy comparison with mini-batch training (the same in quick and full runs)."""


def _accuracy_claim() -> Claim:
    """G3's full-graph training against sampled mini-batch training of the same GraphSAGE on the same graph."""
    from recipes import distdgl, g3

    gains, rows = [], []
    for seed in SEEDS:
        full = run_config(g3.recipe(epochs=ACCURACY_EPOCHS, seed=seed), WORKERS)["accuracy"]["test"]
        model = g3.recipe().model
        mini = run_config(distdgl.recipe(graph=g3.DEFAULT_GRAPH, epochs=ACCURACY_EPOCHS, num_parts=WORKERS,
                                         seed=seed, model={"hidden": model.hidden, "num_layers": model.num_layers},
                                         sample={"fanouts": (10, 5)}), WORKERS)["accuracy"]["test"]
        gains.append(full - mini)
        rows.append(f"seed {seed}: G3 {full:.4f}, mini-batch {mini:.4f}")
    return Claim("g3.accuracy_vs_minibatch", "higher final accuracy than mini-batch training (G3 - mini-batch test "
                 "accuracy, the same GraphSAGE 2 x 32)", "§7.3 (about 6 % higher, 6-10.7 %)", paper=0.06, null=0.0,
                 relation=">", **over_seeds(gains), unit="accuracy",
                 note=f"mini-batch: the distdgl recipe with fan-outs 10,5 on G3's graph, {WORKERS} ranks, "
                      f"{ACCURACY_EPOCHS} epochs; " + "; ".join(rows))


def _partition_claims(n: int) -> list[Claim]:
    import numpy as np

    from workbench.data import load_graph
    from workbench.partition import partition
    from workbench.partition.remote import p2p_vs_replication

    graph = load_graph(f"sbm:num_nodes={n},num_blocks=32,avg_degree=10,homophily=0.8,num_features=0,seed=0")
    rows = {}
    for p in PARTS:
        for method in ("random", "metis", "g3"):
            res = partition(graph, p, method=method, seed=0)
            rows[(p, method)] = {**res.metrics().to_dict(), "stop": (getattr(res, "refinement", None) or {})
                                 .get("stop")}
    g3_metis = [rows[(p, "g3")]["max_remote_vertices"] / rows[(p, "metis")]["max_remote_vertices"] for p in PARTS]
    random_g3 = [rows[(p, "random")]["max_remote_vertices"] / rows[(p, "g3")]["max_remote_vertices"] for p in PARTS]
    spreads = [(rows[(p, "g3")]["max_remote_vertices"] - rows[(p, "g3")]["min_remote_vertices"])
               / rows[(p, "g3")]["max_remote_vertices"] for p in PARTS]
    per_p = ", ".join(f"P={p}: {r:.3f}" for p, r in zip(PARTS, g3_metis))

    local = load_graph(f"sbm:num_nodes={n},num_blocks={max(n // 100, 2)},avg_degree=8,homophily=0.99,num_features=0,"
                       "seed=0")
    src, dst = (t.numpy() for t in local.edges())
    part = np.asarray(partition(local, 8, method="g3", seed=0).node_part)
    ratio = {L: p2p_vs_replication(src, dst, part, 8, L, [64] * L)["replication_over_p2p"] for L in (2, 4)}
    return [
        Claim("g3.partitioner_vs_metis", "G3's partitioner: max remote vertices of a part ÷ METIS's below 1 "
              "(geo-mean over P)", "§7.7, Fig. 16 (G3 best of random/chunk/METIS)", paper=None, null=1.0,
              relation="<", measured=geomean(g3_metis), unit="ratio",
              note=f"{per_p} (METIS alone, unit vertex weights, edge-cut objective, against G3's stage 1 "
                   "multi-constraint volume objective and Algorithm 1)"),
        Claim("g3.partitioner_vs_random", "max remote vertices: random ÷ G3 (the partitioner's gain over random, a "
              "proxy for the end-to-end 4.3x)", "§7.7, Fig. 16 (up to 4.3x)", paper=4.3, null=1.0, relation=">",
              measured=geomean(random_g3), unit="x",
              note=", ".join(f"P={p}: {r:.2f}" for p, r in zip(PARTS, random_g3)) + " (bytes proxy, not time)"),
        Claim("g3.remote_spread", "Algorithm 1 evens the parts' remote vertices to (max - min) / max <= γ = 0.5 % "
              "(worst P)", "§4, Algorithm 1", paper=0.005, relation="<=", measured=max(spreads), unit="fraction",
              note=", ".join(f"P={p}: {s:.4f} ({rows[(p, 'g3')]['stop']})" for p, s in zip(PARTS, spreads))
                   + " (stop reason of the swaps)"),
        Claim("g3.depth_gain", "L-hop replication ÷ per-layer P2P bytes grows with depth (ratio at L = 4 ÷ at L = 2)",
              "§7.5, Fig. 14 (3.66x at 2 layers, 25.9x at 4 vs DGL)", paper=round(25.9 / 3.66, 2), null=1.0,
              relation=">", measured=ratio[4] / ratio[2], unit="x",
              derived="25.9 ÷ 3.66: Fig. 14's speed-ups over DGL at 4 and at 2 layers",
              note=f"replication ÷ P2P: L=2 {ratio[2]:.2f}, L=4 {ratio[4]:.2f} on a local SBM of {n} vertices, "
                   "P = 8 (bytes, while the paper's numbers are throughput)"),
    ]


def claims(quick: bool = False) -> list[Claim]:
    """Every G3 claim, measured (``quick``: fewer epochs, a smaller partitioning graph)."""
    epochs, n = _scale(quick)
    return [*_training_claims(epochs), _accuracy_claim(), *_partition_claims(n),
            not_reproducible("g3.vs_full_graph", "throughput over BNS-GCN and NeutronStar on 16 GPUs (max)",
                             "§7.2, Fig. 11", 2.24, "x", "16 RTX 3090 GPUs on a 10 Gbps network; neither baseline "
                                                         "runs here"),
            not_reproducible("g3.gpu_utilisation", "average GPU utilisation over the mini-batch baseline",
                             "§7.4, Fig. 13", 5.5, "x", "real GPU utilisation; the device here is emulated"),
            not_reproducible("g3.time_to_accuracy", "time to accuracy against the full-graph baselines",
                             "§7.3, Fig. 12", (1.8, 2.3), "x", "absolute GPU times; ogbn-products and Amazon are not "
                                                               "downloadable here")]
