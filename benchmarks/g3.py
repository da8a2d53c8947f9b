"""Benchmark: G3's refiner against METIS alone on a graph with >= 1M edges, and the simulated pipeline speed-ups.

Partition part (one run, same graph, same machine):

* ``metis``: plain METIS (edge cut), the baseline;
* ``metis-mc``: G3's stage 1 (constraints |V_p| and Σd_v, ``objtype=vol``);
* ``metis + refine``: plain METIS then the ``g3`` refiner (Algorithm 1);
* ``g3``: stage 1 + refiner.

For each: seconds, the refiner's own seconds and iterations, Σ|V_p^remote|, max |V_p^remote| and the spread
``(max - min) / max`` of the parts' remote-vertex counts. Ratios are against ``metis`` in the same run. The
numba kernels are compiled (or loaded from cache) by a warm-up call on a tiny graph first.

Pipeline part: the ``g3`` recipe trained on the local runner with bins from several memory budgets; the
simulated epoch per variant (discrete-event account from measured per-bin costs, see
``workbench.sim.bins_pipeline``) and each variant's speed-up over ``sequential``.

Usage::

    python benchmarks/g3.py                 # sbm, 100k vertices, ~2M edges, 8 parts
    python benchmarks/g3.py --parts 16 --graph "products-like:num_nodes=200000,seed=0"
    python benchmarks/g3.py --quick         # small graph (smoke test)
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import torch


def _partitions(graph, parts: int) -> dict:
    from workbench.partition import PARTITIONERS, MetisPartitioner

    ones = torch.ones(graph.num_nodes, dtype=torch.int64)
    makers = {
        "metis": lambda: PARTITIONERS["metis"](seed=0),
        "metis-mc": lambda: MetisPartitioner(seed=0, balance_edges=True, vertex_weights=ones, objective="vol"),
        "metis + refine": lambda: PARTITIONERS["metis"](seed=0, refine="g3"),
        "g3": lambda: PARTITIONERS["g3"](seed=0),
    }
    out = {}
    for name, make in makers.items():
        start = time.perf_counter()
        r = make().partition(graph, parts)
        seconds = time.perf_counter() - start
        m = r.metrics().remote
        spread = (m["max_remote_vertices"] - m["min_remote_vertices"]) / max(m["max_remote_vertices"], 1)
        out[name] = {"seconds": seconds, "refine_s": (r.refinement or {}).get("time_s", 0.0),
                     "refine_iterations": (r.refinement or {}).get("iterations", 0),
                     "stop": (r.refinement or {}).get("stop"), "total_remote": m["total_remote_vertices"],
                     "max_remote": m["max_remote_vertices"], "spread": spread}
    base = out["metis"]
    for row in out.values():
        row["max_remote_vs_metis"] = row["max_remote"] / base["max_remote"]
        row["total_remote_vs_metis"] = row["total_remote"] / base["total_remote"]
        row["refine_s_vs_metis_s"] = row["refine_s"] / base["seconds"]
    return out


def _pipeline(budgets: list[int], quick: bool) -> list[dict]:
    from recipes import g3 as recipes
    from workbench.runtime import launch

    graph = f"sbm:num_nodes={1000 if quick else 4000},num_blocks=8,avg_degree=10,num_features=64,seed=0"
    rows = []
    with tempfile.TemporaryDirectory() as out:
        for budget in budgets:
            cfg = recipes.recipe(graph=graph, epochs=3, model={"hidden": 64}, step={"memory_budget": budget})
            s = launch(cfg, runner="local", workers=2, out=out).wait(timeout=600)["g3"]
            rows.append({"budget": budget, "bins_per_layer": s["bins_per_layer"][0],
                         "epoch_ms": {v: t * 1e3 for v, t in s["simulated_epoch_s"].items()},
                         "speedup": s["speedup_over_sequential"], "idle": s["idle_fraction"]})
    return rows


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", default="sbm:num_nodes=100000,num_blocks=64,avg_degree=20,homophily=0.8,seed=0")
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="small graph, two budgets")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    from workbench.data import load_graph
    from workbench.partition import partition

    graph_spec = "sbm:num_nodes=5000,num_blocks=16,avg_degree=10,seed=0" if args.quick else args.graph
    partition(load_graph("karate"), 2, method="random", refine="g3")          # warm the numba kernels
    graph = load_graph(graph_spec)
    results = {"graph": graph_spec, "num_nodes": graph.num_nodes, "num_edges": graph.num_edges, "parts": args.parts,
               "partition": _partitions(graph, args.parts),
               "pipeline": _pipeline([32_768, 262_144] if args.quick else [32_768, 131_072, 524_288], args.quick)}
    if args.json:
        print(json.dumps(results, indent=2, default=float))
        return results
    print(f"{graph_spec}: {graph.num_nodes:,} vertices, {graph.num_edges:,} edges, {args.parts} parts")
    print(f"{'method':16s} {'seconds':>8s} {'refine s':>9s} {'iters':>6s} {'Σremote':>9s} {'max remote':>11s} "
          f"{'spread':>7s} {'max÷metis':>10s} {'Σ÷metis':>8s}")
    for name, r in results["partition"].items():
        print(f"{name:16s} {r['seconds']:8.2f} {r['refine_s']:9.3f} {r['refine_iterations']:6d} {r['total_remote']:9d} "
              f"{r['max_remote']:11d} {r['spread']:7.4f} {r['max_remote_vs_metis']:10.3f} {r['total_remote_vs_metis']:8.3f}")
    print("\nsimulated epoch (ms) per pipeline variant; speed-up over sequential in brackets")
    for row in results["pipeline"]:
        cells = "  ".join(f"{v} {row['epoch_ms'][v]:.2f} ({row['speedup'][v]:.2f}x)" for v in row["epoch_ms"])
        print(f"budget {row['budget'] // 1024:5d} KiB, bins/layer {row['bins_per_layer']}: {cells}")
    return results


if __name__ == "__main__":
    main()
