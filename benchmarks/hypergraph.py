"""Benchmark: hypergraph (column-net, Mt-KaHyPar km1) against METIS (cut) on one >= 1M-edge graph.

For each part count: partitioning time (end to end through ``workbench.partition.partition``, graph built
once; wall and process CPU time, the latter comparable on a machine other jobs share) and the exact volume of the result: total rows per SpMM (= km1), max rows sent by a part, total and
max messages; then HP/GP ratios, all from the same run (the machine may be shared: compare the ratios, not
the absolute times). Random partitioning is the volume normaliser, as in the paper's Table 2.

Usage::

    python benchmarks/hypergraph.py                          # sbm, 100k vertices, ~1M edges, P = 8 and 32
    python benchmarks/hypergraph.py --graph "grid:500" --parts 8
    python benchmarks/hypergraph.py --quick                  # a small graph (smoke test)
"""

from __future__ import annotations

import argparse
import json
import time


def _graph(spec: str):
    if spec.startswith("grid:"):
        from workbench.data.shapes import grid_graph

        return grid_graph(int(spec.split(":")[1]))
    from workbench.data import load_graph

    return load_graph(spec)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", default="sbm:num_nodes=100000,num_blocks=64,avg_degree=10,num_features=0,seed=0")
    ap.add_argument("--parts", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--preset", default="default", help="Mt-KaHyPar preset (default: 'default', the fast one)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--epsilon", type=float, default=0.03)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.graph, args.parts = "sbm:num_nodes=2000,num_blocks=8,avg_degree=10,num_features=0,seed=0", [4]

    from workbench.partition import partition
    from workbench.partition.volume import TABLE2_KEYS, send_metrics

    g = _graph(args.graph)
    print(f"{g!r}")
    out = {"graph": args.graph, "num_nodes": g.num_nodes, "num_edges": g.num_edges, "preset": args.preset,
           "threads": args.threads, "epsilon": args.epsilon, "parts": {}}
    options = {"random": {}, "metis": {"imbalance": args.epsilon},
               "hypergraph": {"epsilon": args.epsilon, "preset": args.preset, "threads": args.threads}}
    for p in args.parts:
        res = {}
        for method, opts in options.items():
            start, cpu = time.perf_counter(), time.process_time()
            r = partition(g, p, method=method, seed=0, **opts)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            m = send_metrics(r.metrics().comm_rows)
            res[method] = {"seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3), **{k: m[k] for k in TABLE2_KEYS},
                           "vertex_balance": round(r.metrics().vertex_balance, 3)}
            print(f"P={p:3d} {method:11s} {seconds:8.2f} s ({cpu:7.2f} s CPU)  volume {m['comm_volume_rows']:9d} rows  max send "
                  f"{m['max_send_volume_rows']:8d}  messages {m['total_messages']:5d}  max {m['max_part_messages']:3d}",
                  flush=True)
        hp, gp, rp = res["hypergraph"], res["metis"], res["random"]
        res["ratios"] = {"time HP/GP": round(hp["seconds"] / max(gp["seconds"], 1e-9), 2),
                         "CPU time HP/GP": round(hp["cpu_seconds"] / max(gp["cpu_seconds"], 1e-9), 2),
                         **{f"{k} HP/GP": round(hp[k] / gp[k], 3) if gp[k] else None for k in TABLE2_KEYS},
                         **{f"{k} HP/RP": round(hp[k] / rp[k], 3) if rp[k] else None for k in TABLE2_KEYS},
                         **{f"{k} GP/RP": round(gp[k] / rp[k], 3) if rp[k] else None for k in TABLE2_KEYS}}
        print(f"P={p:3d} ratios: " + ", ".join(f"{k} {v}" for k, v in res["ratios"].items()), flush=True)
        out["parts"][p] = res
    if args.json:
        print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
