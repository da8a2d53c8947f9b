"""Benchmark: streaming partitioners' throughput and peak memory, against a per-edge Python loop and METIS.

Everything is measured in one run on one generated edge file (power-law degrees in communities,
``workbench.partition.streaming.generate.write_edge_file``), so the ratios compare like with like on a shared
machine:

* per partitioner on the ``.npy`` file (``--edges`` lines): lines/s of the whole run (every pass, completion
  included) and of its assignment/clustering passes, peak RSS of the process during the run and above its start,
  and the state it kept (``state_bytes``), next to the CSR an in-memory partitioner would build;
* the compiled kernels against a per-edge Python loop of the same algorithm (dicts and lists, the way CATGNN's own
  code runs, digest §3) on the first ``--python-edges`` lines: hash, HDRF, SPRING's clustering pass; target >= 20x;
* text input: parsing the first ``--text-edges`` lines as text alone, and the one-pass hash partitioner on the same
  text (target: the streaming pass no slower than 3x parsing);
* METIS's peak memory (a subprocess: load, build the CSR, partition) on the first ``--metis-edges`` lines, against
  SPRING's on the same lines.

Targets from the issue: >= 10 M lines/s per core for hash and DBH, >= 2 M lines/s for HDRF and SPRING at P = 8.

Usage::

    python benchmarks/streaming.py                          # 10M lines, 1M vertices, P = 8
    python benchmarks/streaming.py --quick                  # 200k lines (smoke test)
    python benchmarks/streaming.py --edges 50000000 --nodes 5000000 --methods spring,hdrf --metis-edges 0
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

METIS_SCRIPT = r"""
import sys, time, numpy as np, torch
from workbench.graph import Graph
from workbench.partition import partition
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"): return int(line.split()[1]) / 1024
path, n, parts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
a = np.load(path, mmap_mode="r")[:n]
base = hwm()
src, dst = torch.from_numpy(np.ascontiguousarray(a[:, 0])), torch.from_numpy(np.ascontiguousarray(a[:, 1]))
g = Graph.from_edges(torch.cat([src, dst]), torch.cat([dst, src]), int(max(src.max(), dst.max())) + 1, directed=False)
del src, dst
csr = hwm()
t = time.perf_counter()
partition(g, parts, method="metis")
print(base, csr, hwm(), time.perf_counter() - t)
"""


# ------------------------------------------------------------------------------------ per-edge Python loops

def python_hash(lines, P):
    load = [0] * P
    reps = defaultdict(set)
    for u, v in lines:
        p = hash((min(u, v), max(u, v))) % P
        reps[u].add(p)
        reps[v].add(p)
        load[p] += 1


def python_hdrf(lines, P, lam=1.0, eps=1.0):
    A, pdeg, load = defaultdict(set), defaultdict(int), [0] * P
    for u, v in lines:
        pdeg[u] += 1
        pdeg[v] += 1
        tu = pdeg[u] / (pdeg[u] + pdeg[v])
        hi, lo = max(load), min(load)
        best, best_s = 0, -1.0
        for p in range(P):
            s = lam * (hi - load[p]) / (eps + hi - lo)
            if p in A[u]:
                s += 2 - tu
            if p in A[v]:
                s += 1 + tu
            if s > best_s:
                best, best_s = p, s
        A[u].add(best)
        A[v].add(best)
        load[best] += 1


def python_spring_step_a(lines, P):
    deg = defaultdict(int)
    for u, v in lines:
        deg[u] += 1
        deg[v] += 1
    tau = 0.1 * sum(deg.values()) / P
    c, vol, nb, k = {}, defaultdict(int), {}, 1
    for u, v in lines:
        for x in (u, v):
            if x not in c:
                c[x] = k
                k += 1
                vol[c[x]] += deg[x]
        if vol[c[u]] <= tau and vol[c[v]] <= tau:
            a, b = (u, v) if vol[c[u]] <= vol[c[v]] else (v, u)
            vol[c[a]] -= deg[a]
            vol[c[b]] += deg[a]
            c[a] = c[b]
        if deg[nb[u]] < deg[v] if u in nb else True:
            nb[u] = v
        if deg[nb[v]] < deg[u] if v in nb else True:
            nb[v] = u


# ------------------------------------------------------------------------------------ main

def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, default=10_000_000, help="lines of the generated edge file")
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--exponent", type=float, default=2.5, help="power-law exponent (lower = more skew)")
    parser.add_argument("--methods", default="hash,dbh,greedy,hdrf,2ps-l,clustering,spring")
    parser.add_argument("--chunk-edges", type=int, default=1 << 20)
    parser.add_argument("--python-edges", type=int, default=200_000)
    parser.add_argument("--text-edges", type=int, default=2_000_000)
    parser.add_argument("--metis-edges", type=int, default=2_000_000, help="0 skips METIS")
    parser.add_argument("--dir", default=None, help="folder for the generated files (default: a temp folder)")
    parser.add_argument("--quick", action="store_true", help="200k lines, small comparisons")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.edges, args.nodes = 200_000, 20_000
        args.python_edges, args.text_edges, args.metis_edges = 20_000, 100_000, 100_000

    from workbench.partition.streaming import stream_partition
    from workbench.partition.streaming.generate import write_edge_file
    from workbench.partition.streaming.stream import EdgeFileStream

    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-streaming-"))
    work.mkdir(parents=True, exist_ok=True)
    out: dict = {"edges": args.edges, "nodes": args.nodes, "parts": args.parts, "cpu_count": os.cpu_count(),
                 "load_avg": os.getloadavg()[0]}
    t = time.perf_counter()
    npy = write_edge_file(work / "edges.npy", args.nodes, args.edges, exponent=args.exponent, seed=0)
    out["generate_s"] = time.perf_counter() - t
    warm = write_edge_file(work / "warm.npy", 1000, 5000, seed=1)
    methods = [m for m in args.methods.split(",") if m]
    for m in methods:  # load the compiled kernels (numba cache) before timing
        stream_partition(warm, args.parts, method=m)

    csr_mb = (8 * (args.nodes + 1) + 16 * args.edges) / 2**20
    rows = {}
    for m in methods:
        r = stream_partition(npy, args.parts, method=m, chunk_edges=args.chunk_edges)
        met = r.metrics
        kernel_s = sum(v for k, v in met.phase_s.items() if k not in ("completion", "schedule", "merge"))
        rows[m] = {"lines_per_s": met.edges_per_s, "passes_lines_per_s": met.num_lines * sum(
                       1 for k in met.phase_s if k not in ("schedule", "merge")) / max(met.elapsed_s, 1e-9),
                   "elapsed_s": met.elapsed_s, "phase_s": met.phase_s, "kernel_s": kernel_s,
                   "peak_rss_mb": met.peak_rss_mb, "rss_added_mb": met.peak_rss_mb - met.rss_start_mb,
                   "state_mb": met.state_bytes / 2**20, "rf_completed": met.replication_factor_completed,
                   "rf": met.replication_factor}
        print(f"{m:<11} {met.edges_per_s / 1e6:6.2f} M lines/s ({met.elapsed_s:6.2f} s, phases {met.phase_s}) "
              f"peak RSS {met.peak_rss_mb:7.1f} MiB (+{met.peak_rss_mb - met.rss_start_mb:6.1f}), state "
              f"{met.state_bytes / 2**20:6.1f} MiB, CSR would be {csr_mb:7.1f} MiB; RF+nbrs "
              f"{met.replication_factor_completed:.3f}", flush=True)
    out["partitioners"] = rows
    out["csr_mb"] = csr_mb

    # Per-edge Python loops vs the compiled kernels, same prefix.
    a = np.load(npy, mmap_mode="r")[:args.python_edges]
    lines = list(zip(a[:, 0].tolist(), a[:, 1].tolist()))
    prefix = work / "prefix.npy"
    np.save(prefix, np.ascontiguousarray(a))
    ratios = {}
    for m, fn in (("hash", python_hash), ("hdrf", python_hdrf), ("spring", python_spring_step_a)):
        t = time.perf_counter()
        fn(lines, args.parts)
        py_rate = len(lines) / (time.perf_counter() - t)
        if m == "spring":  # the Python loop does the degree pass and Step A: compare the same passes
            met = stream_partition(prefix, args.parts, method=m).metrics
            compiled = met.num_lines / (met.phase_s["degrees"] + met.phase_s["cluster1"])
        else:
            met = stream_partition(prefix, args.parts, method=m).metrics
            compiled = met.num_lines / met.phase_s["assign"]
        ratios[m] = {"python_lines_per_s": py_rate, "compiled_lines_per_s": compiled, "ratio": compiled / py_rate}
        print(f"{m:<11} per-edge Python {py_rate / 1e6:6.3f} M lines/s, compiled {compiled / 1e6:6.2f} M lines/s: "
              f"{compiled / py_rate:6.1f}x (target >= 20x)", flush=True)
    out["python_ratio"] = ratios

    # Text: parsing alone vs the one-pass hash partitioner (parse + assign + completion pass) on the same text.
    text = write_edge_file(work / "edges.txt", args.nodes, args.text_edges, exponent=args.exponent, seed=0)
    t = time.perf_counter()
    n = sum(s.size for s, _ in EdgeFileStream(text, chunk_edges=args.chunk_edges))
    parse_s = time.perf_counter() - t
    met = stream_partition(text, args.parts, method="hash", chunk_edges=args.chunk_edges).metrics
    out["text"] = {"lines": n, "parse_s": parse_s, "hash_assign_pass_s": met.phase_s["assign"],
                   "pass_over_parse": met.phase_s["assign"] / parse_s}
    print(f"text        parse {n / parse_s / 1e6:.2f} M lines/s; hash's assignment pass over the same text "
          f"{met.phase_s['assign'] / parse_s:.2f}x parsing (target <= 3x)", flush=True)

    if args.metis_edges:
        k = min(args.metis_edges, args.edges)
        sub = work / "metis.npy"
        np.save(sub, np.ascontiguousarray(np.load(npy, mmap_mode="r")[:k]))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                           os.environ.get("PYTHONPATH", "")]))
        try:
            res = subprocess.run([sys.executable, "-c", METIS_SCRIPT, str(sub), str(k), str(args.parts)],
                                 capture_output=True, text=True, timeout=240, env=env)
            base, csr, peak, metis_s = map(float, res.stdout.split()[-4:])
            spring = subprocess.run([sys.executable, "-c",
                                     "import sys; from workbench.partition.streaming import stream_partition as s;"
                                     "s(sys.argv[3], int(sys.argv[2]), method='spring');"  # load the kernels first
                                     "m = s(sys.argv[1], int(sys.argv[2]), method='spring').metrics;"
                                     "print(m.rss_start_mb, m.peak_rss_mb)", str(sub), str(args.parts), str(warm)],
                                    capture_output=True, text=True, timeout=240, env=env)
            s_base, s_peak = map(float, spring.stdout.split()[-2:])
            out["metis"] = {"lines": k, "peak_rss_mb": peak, "above_start_mb": peak - base, "csr_stage_mb": csr - base,
                            "metis_s": metis_s, "spring_peak_rss_mb": s_peak, "spring_above_start_mb": s_peak - s_base}
            print(f"METIS       {k:,} lines: peak RSS {peak:.0f} MiB ({peak - base:.0f} above start; the CSR alone "
                  f"{csr - base:.0f}), {metis_s:.1f} s; SPRING on the same lines: peak {s_peak:.0f} MiB "
                  f"({s_peak - s_base:.0f} above start): {(peak - base) / max(s_peak - s_base, 1):.1f}x less "
                  f"added memory", flush=True)
        except (subprocess.TimeoutExpired, ValueError) as exc:
            out["metis"] = {"error": repr(exc)[:200]}
            print(f"METIS       failed or timed out: {exc!r}"[:300])
    print(f"(shared machine: {os.cpu_count()} cores, load average {out['load_avg']:.1f} at start)")
    if args.json:
        print(json.dumps(out, default=float))
    return out


if __name__ == "__main__":
    main()
