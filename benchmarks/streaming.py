"""Benchmark: streaming partitioners' throughput and peak memory, against a per-edge Python loop and METIS.

Everything is measured in one run on one generated edge file (power-law degrees in communities,
``workbench.partition.streaming.generate.write_edge_file``), so the ratios compare like with like on a shared
machine:

* per partitioner on the ``.npy`` file (``--edges`` lines): lines/s of the whole run (every pass, completion
  included; best of ``--repeat``) and its time over hash's, peak RSS of the process during the run and above its
  start, and the state it kept (``state_bytes``), next to the CSR an in-memory partitioner would build;
* per partitioner on a text file of ``--text-edges`` lines (default ``--edges``; the same generator and seed):
  the whole run (the text parsed once, on a reading thread beside the method's work on the chunk before; its
  later passes reading the spill) against parsing the same text alone, measured right before it (target: within
  1.5x parsing), beside the same method's run from the ``.npy`` (the floor of a text run once parsing is hidden
  behind the work), with its peak RSS and phases;
* the compiled kernels against a per-edge Python loop of the same algorithm (dicts and lists, the way CATGNN's own
  code runs) on the first ``--python-edges`` lines: hash, HDRF, SPRING's clustering pass; target >= 20x;
* METIS's peak memory (a subprocess: load, build the CSR, partition) on the first ``--metis-edges`` lines, against
  SPRING's on the same lines.

Targets (issue 44, one core, P = 8, whole runs from the binary stream): >= 30 M lines/s for hash, >= 10 M for
DBH, HDRF and SPRING; from text, every method within 1.5x of parsing the same file alone.

First, the memory of the command itself: ``workbench partition FILE --parts 8 --method hdrf --stream
--json`` in a subprocess on a seeded Chung-Lu text file of ``--lines`` lines (default 20M, ids ``lines / 10``,
about 300 MB of text) and on a 16-line file. Its peak RSS above the 16-line run's is compared with half the CSR an
in-memory partitioner would build (``8 (2E + V + 1)`` bytes; the limit) and with the state plus two chunks of 16-byte
lines (the target). The process peak is the kernel's (``wait4``), with the interpreter's teardown skipped
(``os._exit`` after the command): torch's adds 50-100 MiB at exit, more than the run, and would hide it; the run's own
peak (``peak_rss_mb`` in the JSON, counted from the start of the run) is printed beside it.

Usage::

    python benchmarks/streaming.py                          # memory on 20M lines; then 10M lines, 1M vertices, P = 8
    python benchmarks/streaming.py --memory-only --lines 2000000   # only the memory check, on 2M lines
    python benchmarks/streaming.py --quick                  # 200k lines (smoke test)
    python benchmarks/streaming.py --edges 50000000 --nodes 5000000 --methods spring,hdrf --metis-edges 0 --lines 0
    python benchmarks/streaming.py --save docs/benchmarks/streaming.json   # the docs' record (benchmarks/_record.py)
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


# ------------------------------------------------------------------------------------ the command's memory

# The CLI, with the interpreter's teardown skipped (see the module docstring).
CLI_SCRIPT = "import os, sys; from workbench.cli import main; rc = main(sys.argv[1:]); sys.stdout.flush(); os._exit(rc)"


def run_cli(args: list[str], work: Path) -> tuple[dict, float]:
    """Run ``workbench ARGS`` (with ``--json``) in a subprocess. Returns its JSON and its peak RSS in MiB."""
    env = dict(os.environ, TQDM_DISABLE="1",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]))
    with open(work / "cli.out", "w+") as out, open(work / "cli.err", "w+") as err:
        proc = subprocess.Popen([sys.executable, "-c", CLI_SCRIPT, *args], stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)   # this child's own peak (RUSAGE_CHILDREN would be the max of all)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"workbench {' '.join(args)} exited {proc.returncode}: {err.read()[-2000:]}")
        result = json.loads(out.read().strip().splitlines()[-1])
    return result, usage.ru_maxrss / (2**20 if sys.platform == "darwin" else 1024)


def cli_memory(work: Path, lines: int = 20_000_000, nodes: int | None = None, parts: int = 8, method: str = "hdrf",
               chunk_edges: int = 1 << 20, seed: int = 0) -> dict:
    """Peak RSS of ``workbench partition FILE --parts P --method M --stream --json`` on a seeded Chung-Lu text file
    of ``lines`` lines over ``nodes`` ids (default ``lines // 10``) above the same command on a 16-line file, with
    the limit (half the CSR) and the target (state plus two chunks of 16-byte lines), all in MiB."""
    from workbench.partition.streaming.generate import write_edge_file

    nodes = nodes or max(lines // 10, 16)
    work.mkdir(parents=True, exist_ok=True)
    big = work / f"chunglu-{lines}-{nodes}-s{seed}.txt"
    if not big.is_file():   # one block and power-law weights = Chung-Lu (endpoints drawn independently by weight)
        write_edge_file(big, nodes, lines, num_blocks=1, homophily=0.0, seed=seed)
    ids = [i for i in range(17) if i != 5]   # 16 lines over small ids, id 5 without a line (it still gets an owner)
    tiny = work / "tiny16.txt"
    tiny.write_text("".join(f"{ids[i]} {ids[(i + 1) % 16]}\n" for i in range(16)))
    args = ["--parts", str(parts), "--method", method, "--stream", "--chunk-edges", str(chunk_edges), "--json"]
    d_tiny, peak_tiny = run_cli(["partition", str(tiny), *args], work)
    d_big, peak_big = run_cli(["partition", str(big), *args], work)
    E, V = d_big["num_lines"], d_big["num_nodes"]
    mib = 2**20
    out = {"method": method, "parts": parts, "lines": E, "nodes": V, "chunk_edges": chunk_edges,
           "file_mb": big.stat().st_size / mib, "peak_tiny_mb": peak_tiny, "peak_mb": peak_big,
           "above_tiny_mb": peak_big - peak_tiny, "run_above_tiny_mb": d_big["peak_rss_mb"] - d_tiny["peak_rss_mb"],
           "state_mb": d_big["state_bytes"] / mib, "chunk_mb": 16 * chunk_edges / mib,
           "limit_mb": 8 * (2 * E + V + 1) / 2 / mib}
    out["target_mb"] = out["state_mb"] + 2 * out["chunk_mb"]
    out["within_limit"] = max(out["above_tiny_mb"], out["run_above_tiny_mb"]) <= out["limit_mb"]
    print(f"memory      workbench partition ({out['file_mb']:.0f} MB Chung-Lu text: {E:,} lines, {V:,} ids) --parts "
          f"{parts} --method {method} --stream --json: peak RSS {peak_big:.0f} MiB, {out['above_tiny_mb']:.0f} above "
          f"the 16-line file's {peak_tiny:.0f} (the run alone: {out['run_above_tiny_mb']:.0f}); limit (half the CSR) "
          f"{out['limit_mb']:.0f} MiB: {'within' if out['within_limit'] else 'OVER'}; target (state "
          f"{out['state_mb']:.0f} + 2 chunks of {out['chunk_mb']:.0f}) {out['target_mb']:.0f} MiB", flush=True)
    return out


# ------------------------------------------------------------------------------------ main

def best_run(path: Path, parts: int, method: str, chunk_edges: int, repeat: int):
    """The metrics of the fastest of ``repeat`` whole runs of ``method`` on ``path``."""
    from workbench.partition.streaming import stream_partition

    runs = [stream_partition(path, parts, method=method, chunk_edges=chunk_edges).metrics for _ in range(repeat)]
    return min(runs, key=lambda m: m.elapsed_s)


def parse_text(path: Path, chunk_edges: int) -> tuple[float, int]:
    """Seconds to parse a text edge file alone (every chunk, nothing done with it) and its lines."""
    from workbench.partition.streaming.stream import EdgeFileStream

    t = time.perf_counter()
    n = sum(s.size for s, _ in EdgeFileStream(path, chunk_edges=chunk_edges))
    return time.perf_counter() - t, n


TARGET_LINES_PER_S = {"hash": 30e6, "dbh": 10e6, "hdrf": 10e6, "spring": 10e6}   # per core: the targets above
TEXT_OVER_PARSE = 1.5   # a whole run from text against parsing the same text alone


def headline(out: dict) -> list[dict]:
    """The record's headline rows (``--save``) from the results."""
    from _record import row

    rows = []
    if "memory" in out:
        m = out["memory"]
        rows.append(row(f"workbench partition --stream ({m['method']}, {m['lines']:,} lines): peak RSS above the "
                        "16-line run", m["above_tiny_mb"], "MiB", m["limit_mb"], "half the in-memory CSR", 1.0))
    for name, r in out.get("partitioners", {}).items():
        target = TARGET_LINES_PER_S.get(name)
        rows.append(row(f"{name}: whole run", r["lines_per_s"] / 1e6, "M lines/s",
                        target=target and target / 1e6, relation=">="))
    for name, r in out.get("python_ratio", {}).items():
        rows.append(row(f"{name}: compiled vs a per-edge Python loop", r["compiled_lines_per_s"] / 1e6, "M lines/s",
                        r["python_lines_per_s"] / 1e6, "per-edge Python", 20.0, ">="))
    for name, r in out.get("text", {}).get("partitioners", {}).items():
        rows.append(row(f"{name}: whole run from text ({out['text']['lines']:,} lines)", r["elapsed_s"], "s",
                        r["parse_s"], "parsing the same text alone", TEXT_OVER_PARSE))
    if "above_start_mb" in out.get("metis", {}):
        m = out["metis"]
        rows.append(row(f"SPRING's added memory ({m['lines']:,} lines)", m["spring_above_start_mb"], "MiB",
                        m["above_start_mb"], "METIS (load, CSR, partition)"))
    return rows


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, default=10_000_000, help="lines of the generated edge file")
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--exponent", type=float, default=2.5, help="power-law exponent (lower = more skew)")
    parser.add_argument("--methods", default="hash,dbh,greedy,hdrf,2ps-l,clustering,spring")
    parser.add_argument("--chunk-edges", type=int, default=1 << 20)
    parser.add_argument("--python-edges", type=int, default=200_000, help="0 skips the per-edge Python loops")
    parser.add_argument("--text-edges", type=int, default=None, help="lines of the text file (default --edges)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per method and input (the fastest is kept)")
    parser.add_argument("--metis-edges", type=int, default=2_000_000, help="0 skips METIS")
    parser.add_argument("--dir", default=None, help="folder for the generated files (default: a temp folder)")
    parser.add_argument("--lines", type=int, default=20_000_000,
                        help="lines of the Chung-Lu text file for the command's memory (0 skips it)")
    parser.add_argument("--memory-nodes", type=int, default=None, help="ids of that file (default: lines / 10)")
    parser.add_argument("--memory-method", default="hdrf")
    parser.add_argument("--memory-only", action="store_true", help="only the command's memory")
    parser.add_argument("--quick", action="store_true", help="200k lines, small comparisons")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--save", metavar="PATH", help="write the run's record (docs/benchmarks/NAME.json)")
    args = parser.parse_args(argv)
    if args.save:
        sys.path.insert(0, str(Path(__file__).resolve().parent))   # benchmarks/_record.py
        from _record import Record

        record = Record("streaming", __file__, argv)
    if args.quick:
        args.edges, args.nodes, args.lines = 200_000, 20_000, min(args.lines, 200_000)
        args.python_edges, args.metis_edges = 20_000, 100_000
    args.text_edges = args.edges if args.text_edges is None else args.text_edges

    from workbench.partition.streaming import stream_partition
    from workbench.partition.streaming.generate import write_edge_file

    work = Path(args.dir or tempfile.mkdtemp(prefix="bench-streaming-"))
    work.mkdir(parents=True, exist_ok=True)
    out: dict = {"edges": args.edges, "nodes": args.nodes, "parts": args.parts, "cpu_count": os.cpu_count(),
                 "load_avg": os.getloadavg()[0]}
    if args.lines:
        out["memory"] = cli_memory(work, args.lines, args.memory_nodes, args.parts, args.memory_method,
                                   args.chunk_edges)
    if args.memory_only:
        if args.json:
            print(json.dumps(out, default=float))
        if args.save:
            record.save(args.save, out, headline(out))
        return out
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
        met = best_run(npy, args.parts, m, args.chunk_edges, args.repeat)
        rows[m] = {"lines_per_s": met.edges_per_s, "elapsed_s": met.elapsed_s, "phase_s": met.phase_s,
                   "peak_rss_mb": met.peak_rss_mb, "rss_added_mb": met.peak_rss_mb - met.rss_start_mb,
                   "state_mb": met.state_bytes / 2**20, "rf_completed": met.replication_factor_completed,
                   "rf": met.replication_factor}
    hash_s = rows["hash"]["elapsed_s"] if "hash" in rows else None
    for m, r in rows.items():
        r["over_hash"] = r["elapsed_s"] / hash_s if hash_s else None
        vs = f", {r['over_hash']:.2f}x hash's" if hash_s else ""
        print(f"{m:<11} {r['lines_per_s'] / 1e6:6.2f} M lines/s ({r['elapsed_s']:6.2f} s{vs}; phases "
              f"{r['phase_s']}) peak RSS {r['peak_rss_mb']:7.1f} MiB (+{r['rss_added_mb']:6.1f}), state "
              f"{r['state_mb']:6.1f} MiB, CSR would be {csr_mb:7.1f} MiB; RF+nbrs {r['rf_completed']:.3f}", flush=True)
    out["partitioners"] = rows
    out["csr_mb"] = csr_mb

    # Text: each method's whole run against parsing the same text alone, measured right before it.
    text = work / f"edges-{args.text_edges}.txt"
    if not text.is_file():
        write_edge_file(text, args.nodes, args.text_edges, exponent=args.exponent, seed=0)
    text_rows = {}
    for m in methods:
        parse_s, n = min(parse_text(text, args.chunk_edges) for _ in range(args.repeat))
        met = best_run(text, args.parts, m, args.chunk_edges, args.repeat)
        binary_s = rows[m]["elapsed_s"] if args.text_edges == args.edges else None
        text_rows[m] = {"lines_per_s": met.edges_per_s, "elapsed_s": met.elapsed_s, "parse_s": parse_s,
                        "over_parse": met.elapsed_s / parse_s, "phase_s": met.phase_s,
                        "binary_s": binary_s, "over_binary": binary_s and met.elapsed_s / binary_s,
                        "peak_rss_mb": met.peak_rss_mb, "rss_added_mb": met.peak_rss_mb - met.rss_start_mb}
        vs = f"; the .npy run {binary_s:.2f} s ({binary_s / parse_s:.2f}x parsing)" if binary_s else ""
        print(f"{m:<11} text {met.edges_per_s / 1e6:6.2f} M lines/s ({met.elapsed_s:6.2f} s) against parsing alone "
              f"{n / parse_s / 1e6:6.2f} M lines/s ({parse_s:.2f} s): {met.elapsed_s / parse_s:.2f}x (target <= "
              f"{TEXT_OVER_PARSE}x{vs}); peak RSS {met.peak_rss_mb:7.1f} MiB "
              f"(+{met.peak_rss_mb - met.rss_start_mb:.1f}); phases {met.phase_s}", flush=True)
    out["text"] = {"lines": args.text_edges, "file_mb": text.stat().st_size / 2**20, "partitioners": text_rows}

    # Per-edge Python loops vs the compiled kernels, same prefix.
    if args.python_edges:   # 0 skips it
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
    out["load_avg_end"] = os.getloadavg()[0]
    print(f"(shared machine: {os.cpu_count()} cores, load average {out['load_avg']:.1f} at start, "
          f"{out['load_avg_end']:.1f} at the end)")
    if args.json:
        print(json.dumps(out, default=float))
    if args.save:
        record.save(args.save, out, headline(out))
    return out


if __name__ == "__main__":
    main()
