"""Benchmark: full-graph GCN epoch time of the workbench (1, 2, 4 ranks) against DGL's own GraphConv.

Runs the halo-exchange program (``workbench.train.full_graph``) with in-process thread ranks on one
machine, and DGL's ``GraphConv`` (``norm="both"``, self-loops added: the same model) on one process,
on the same generated graph (default: 100k vertices, 4M stored edges = 2M undirected). Prints epoch
times, their ratios against DGL from this one run, the halo bytes per epoch, and the communication
time the counted traffic would take on 10 and 100 Gbit/s links (``workbench.communicate.netmodel``:
latency + bytes / bandwidth per message, slowest rank).

The DGL-free part runs on any torch (e.g. 2.11 on a GPU machine without DGL)::

    python benchmarks/full_graph.py                       # CPU, with DGL when it imports
    python benchmarks/full_graph.py --device cuda --no-dgl
    python benchmarks/full_graph.py --quick               # a small graph, for a smoke run
    python benchmarks/full_graph.py --ranks 1,2 --bound --save docs/benchmarks/full_graph.json   # the docs' record

Thread ranks share the machine's cores (and the one GPU), so the multi-rank times measure the
workbench's overheads, not a cluster's speed-up; the modelled times show the network's share. Same total
threads everywhere: DGL and one rank use all cores, ``P`` ranks get ``cores // P`` each (the runtime's
rule). ``--repeats`` rounds each run DGL and then every rank count, and DGL once more at the end; every
configuration reports the median of its runs' median epochs (the machine may be shared: the load average
is printed, and every run's figure). ``train MB/rank`` is the process's peak RSS during the run (psutil,
sampled every 20 ms) above its RSS before it, divided by the ranks (thread ranks share one process).

``--bound`` also traces every rank's sparse products: one rank's kernels timed alone against the bytes they must
move, and for every rank count the bytes all ranks' products move per epoch against the copy bandwidth measured
here (thread ranks share one memory bus): how far an epoch runs from the bus, and how many more bytes P ranks
move than one.

``--kernels`` first times the candidate sparse kernels on the graph's ``Â`` (torch CSR, the numba CSR
loop, DGL's ``u_mul_e_sum``, DGL's unweighted ``copy_u_sum`` between the two degree scalings, gather +
``index_add_``): how :mod:`workbench.train.kernels` was chosen.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.communicate.netmodel import modelled_seconds  # noqa: E402
from workbench.compose import RunConfig  # noqa: E402
from workbench.data import load_graph  # noqa: E402
from workbench.events import ListSink, Traffic  # noqa: E402

DEFAULT_GRAPH = "sbm:num_nodes=100000,num_blocks=16,avg_degree=40,num_features=64,seed=0"
QUICK_GRAPH = "sbm:num_nodes=5000,num_blocks=8,avg_degree=20,num_features=32,seed=0"
LINKS = {"10 Gbit/s": "10GbE", "100 Gbit/s": "100GbE"}
TARGETS = {1: 0.8, 2: 1.0}   # ranks -> target epoch time over DGL's one-process epoch


@contextmanager
def peak_rss():
    """Yields a dict whose ``extra_mb`` is the peak RSS above the RSS at entry (sampled every 20 ms)."""
    import psutil

    proc, out, stop = psutil.Process(), {"extra_mb": 0.0}, threading.Event()
    base = proc.memory_info().rss
    peak = [base]

    def sample():
        while not stop.wait(0.02):
            peak[0] = max(peak[0], proc.memory_info().rss)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        yield out
    finally:
        stop.set()
        t.join()
        peak[0] = max(peak[0], proc.memory_info().rss)
        out["extra_mb"] = (peak[0] - base) / 2**20


def run_workbench(graph, world_size: int, args) -> dict:
    """Train on ``world_size`` thread ranks; returns the summary plus the traffic events."""
    from workbench.runtime.runners import RunEnv, run_inprocess

    cfg = RunConfig.compose(graph=graph.name, num_parts=world_size, partition=args.partition,
                            model={"method": "gcn", "num_layers": args.layers, "hidden": args.hidden},
                            epochs=args.epochs, train={"lr": 0.01, "kernel": args.kernel}, seed=0)
    program = cfg.build(graph=graph)
    sink = ListSink()
    t0 = time.perf_counter()
    payloads = program.prepare(world_size, sink.emit)
    prepare_s = time.perf_counter() - t0
    env = RunEnv(run_id="bench", world_size=world_size, emit=sink.emit, stop_flag=threading.Event(),
                 timeout_s=3600, device=args.device)
    with peak_rss() as rss:
        results = [o.result for o in sorted(run_inprocess(program, payloads, env), key=lambda o: o.rank)]
    summary = program.summarize(results).to_dict()
    summary["prepare_s"] = prepare_s
    summary["train_mb_per_rank"] = rss["extra_mb"] / world_size
    summary["traffic"] = [e for e in sink.events if isinstance(e, Traffic)]
    return summary


def modelled_comm_seconds(traffic: list[Traffic], preset: str) -> float:
    """Modelled communication seconds per epoch (slowest rank; ``workbench.communicate.netmodel``)."""
    per_epoch = modelled_seconds(traffic, preset)        # {epoch: seconds}
    return sum(per_epoch.values()) / max(len(per_epoch), 1)


def run_dgl(graph, args) -> float | None:
    """Mean epoch seconds of DGL GraphConv full-graph training (same model), or None without DGL."""
    try:
        import dgl
        from dgl.nn import GraphConv
    except Exception as exc:  # noqa: BLE001 - DGL missing or not importable on this torch
        print(f"DGL unavailable ({type(exc).__name__}): skipping the DGL baseline")
        return None
    device = torch.device(args.device)
    src, dst = graph.edges()
    g = dgl.add_self_loop(dgl.graph((src, dst), num_nodes=graph.num_nodes)).to(device)
    dims = [graph.num_features] + [args.hidden] * (args.layers - 1) + [graph.num_classes]
    layers = torch.nn.ModuleList(GraphConv(dims[i], dims[i + 1], norm="both") for i in range(args.layers)).to(device)
    opt = torch.optim.Adam(layers.parameters(), lr=0.01)
    x, y = graph.features.to(device), graph.labels.to(device)
    train = (graph.train_mask & (graph.labels >= 0)).to(device)
    times = []
    for _ in range(args.epochs + 1):
        t0 = time.perf_counter()
        h = x
        for i, layer in enumerate(layers):
            h = layer(g, h)
            if i < len(layers) - 1:
                h = torch.relu(h)
        loss = torch.nn.functional.cross_entropy(h[train], y[train])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return _steady(times)


def _steady(times: list[float]) -> float:
    """Median epoch time without the first (warm-up) epoch (robust to a neighbour's burst on a shared machine)."""
    rest = times[1:] or times
    return statistics.median(rest)


def locality_order(graph, rows_per_cluster: int = 2048):
    """The graph relabelled so that METIS clusters of about ``rows_per_cluster`` vertices get contiguous ids
    (the features, labels and masks follow): the sparse products then read input rows that sit close
    together. DGL and the workbench get the same relabelled graph (``--reorder metis``)."""
    from workbench.graph import Graph
    from workbench.partition import partition

    n = graph.num_nodes
    owner = torch.as_tensor(partition(graph, max(2, n // rows_per_cluster), method="metis").owner_part)
    order = torch.argsort(owner * n + torch.arange(n))            # new id -> old id
    new_id = torch.empty(n, dtype=torch.int64)
    new_id[order] = torch.arange(n)
    src, dst = graph.edges()
    data = {k: getattr(graph, k)[order] for k in ("features", "labels", "train_mask", "val_mask", "test_mask")
            if getattr(graph, k) is not None}
    return Graph.from_edges(new_id[src], new_id[dst], n, directed=graph.directed, name=graph.name, **data)


def timed(fn, device, reps: int = 5, warmup: int = 1) -> float:
    """Median seconds of ``fn()`` over ``reps`` calls after ``warmup`` (CUDA events on a GPU: the work is
    asynchronous; the host clock elsewhere)."""
    dev = torch.device(device)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        if dev.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def copy_bandwidth(device, nbytes: int = 1 << 30) -> float:
    """Bytes per second of a large copy on ``device`` (bytes read + bytes written), measured in this run:
    the memory bandwidth the bound divides by (on the CPU, torch's copy on this process's threads)."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()   # random, never zeros
    dst = torch.empty_like(src)
    seconds = timed(lambda: dst.copy_(src), device, reps=10, warmup=2)
    del src, dst
    return 2 * nbytes / seconds


def bandwidth_bound(graph, args) -> dict:
    """One rank's epoch against the memory-bandwidth bound of its sparse products.

    Every :func:`workbench.train.kernels.spmm` call of a one-rank run is traced; the bound is the fewest
    bytes those products must move per epoch (:meth:`SpmmCall.min_bytes`: CSR arrays, input rows and output
    rows once each) over the copy bandwidth measured here. Each distinct product is then timed again alone,
    so the gap splits into the kernels' own distance from their bound and everything else in the epoch."""
    from workbench.train.kernels import spmm, trace_spmm

    bw = copy_bandwidth(args.device)
    with trace_spmm(keep_matrices=True) as calls:
        s = run_workbench(graph, 1, args)
    epochs = len(s["epoch_times"])
    epoch_s = _steady(s["epoch_times"])
    groups: dict = {}
    for c in calls:
        key = (id(c.matrix), c.width, c.accumulate)
        groups.setdefault(key, [c, 0])[1] += 1
    kernel_s = 0.0
    lines = []
    for c, count in groups.values():
        h = torch.randn(c.cols, c.width, device=args.device)
        sec = timed(lambda: spmm(c.matrix, h), args.device, reps=10, warmup=2)
        kernel_s += sec * count / epochs
        lines.append(f"  {c.rows}x{c.cols} nnz {c.nnz} width {c.width} ({c.kernel}, {count // epochs}/epoch): "
                     f"{sec * 1e3:.3f} ms, bound {c.min_bytes() / bw * 1e3:.3f} ms "
                     f"({sec / (c.min_bytes() / bw):.2f}x), {c.min_bytes() / sec / 1e9:.0f} GB/s; "
                     f"no-reuse bound {c.gather_bytes() / bw * 1e3:.3f} ms ({sec / (c.gather_bytes() / bw):.2f}x)")
    min_bytes = sum(c.min_bytes() for c in calls) / epochs
    bound_s = min_bytes / bw
    gather_s = sum(c.gather_bytes() for c in calls) / epochs / bw
    out = {"copy_bandwidth_GBps": bw / 1e9, "spmm_calls_per_epoch": len(calls) / epochs,
           "spmm_min_bytes_per_epoch": min_bytes, "spmm_flops_per_epoch": sum(c.flops() for c in calls) / epochs,
           "bound_s": bound_s, "epoch_s": epoch_s, "epoch_over_bound": epoch_s / bound_s,
           "spmm_kernel_s_per_epoch": kernel_s, "spmm_kernel_over_bound": kernel_s / bound_s,
           "no_reuse_bound_s": gather_s, "spmm_kernel_over_no_reuse_bound": kernel_s / gather_s,
           "epoch_s_runs": s["epoch_times"]}
    print(f"bandwidth bound, 1 rank on {args.device}: copy bandwidth {bw / 1e9:.0f} GB/s (read + write, measured); "
          f"{out['spmm_calls_per_epoch']:.0f} sparse products per epoch moving at least "
          f"{min_bytes / 1e6:.1f} MB -> bound {bound_s * 1e3:.3f} ms/epoch")
    print("\n".join(lines))
    print(f"  epoch {epoch_s * 1e3:.3f} ms = {epoch_s / bound_s:.2f}x the bound; the sparse products alone "
          f"{kernel_s * 1e3:.3f} ms = {kernel_s / bound_s:.2f}x the bound ({kernel_s / epoch_s:.0%} of the epoch), "
          f"{kernel_s / gather_s:.2f}x the no-reuse bound ({gather_s * 1e3:.3f} ms: every non-zero reads its input row)")
    return out


def ranks_bandwidth(graph, args, rank_counts: list[int], bw: float) -> list[dict]:
    """Where a P-rank epoch's time goes against the memory bus the thread ranks share: every rank's sparse
    products are traced (:func:`~workbench.train.kernels.trace_spmm`, by calling thread), their fewest bytes per
    epoch summed over the ranks and divided by the copy bandwidth ``bw`` measured in this run (all cores: the
    ranks share one bus). ``bytes_over_1`` is how many more bytes P ranks' products move than one rank's (the halo
    rows, aggregated on their owner and read again where they are used); ``bus_share`` is the fraction of the
    measured bandwidth the ranks' products use on average over the epoch (1.0: the epoch is the bus's time)."""
    from workbench.train.kernels import trace_spmm

    out = []
    for p in rank_counts:
        with trace_spmm() as calls:
            s = run_workbench(graph, p, args)
        epochs = len(s["epoch_times"])
        epoch_s = _steady(s["epoch_times"])
        by_rank: dict = {}
        for c in calls:
            by_rank[c.thread] = by_rank.get(c.thread, 0) + c.min_bytes()
        per_rank = [b / epochs for _, b in sorted(by_rank.items())]
        total = sum(per_rank)
        out.append({"ranks": p, "epoch_s": epoch_s, "spmm_min_bytes_per_epoch": total,
                    "spmm_min_bytes_per_rank": per_rank, "bound_s": total / bw, "epoch_over_bound": epoch_s / (total / bw),
                    "bus_share": total / epoch_s / bw})
    one = next((r["spmm_min_bytes_per_epoch"] for r in out if r["ranks"] == 1), None)
    print(f"ranks against the shared memory bus ({bw / 1e9:.0f} GB/s copy bandwidth, all cores, measured):")
    for r in out:
        r["bytes_over_1"] = r["spmm_min_bytes_per_epoch"] / one if one else None
        more = f", {r['bytes_over_1']:.2f}x one rank's bytes" if one else ""
        print(f"  {r['ranks']} rank(s): sparse products move >= {r['spmm_min_bytes_per_epoch'] / 1e6:.1f} MB/epoch "
              f"({', '.join(f'{b / 1e6:.1f}' for b in r['spmm_min_bytes_per_rank'])} MB by rank{more}); bound "
              f"{r['bound_s'] * 1e3:.2f} ms, epoch {r['epoch_s'] * 1e3:.2f} ms = {r['epoch_over_bound']:.2f}x the bound "
              f"(the products use {r['bus_share']:.0%} of the bus over the epoch)")
    return out


def profile_epochs(graph, world_size: int, args, row_limit: int = 15) -> None:
    """``torch.profiler`` table of a ``world_size``-rank run (all its epochs), sorted by the device's own
    time on a GPU and by CPU time elsewhere: what an epoch spends outside the sparse and dense math. The
    CPU operators of thread ranks are recorded only where the profiler follows other threads (torch 2.2's
    does not, so on the CPU profile one rank); a GPU's kernels are recorded from every thread."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.device(args.device).type == "cuda" else [])
    with profile(activities=acts) as prof:
        s = run_workbench(graph, world_size, args)
    key = "self_cuda_time_total" if ProfilerActivity.CUDA in acts else "self_cpu_time_total"
    print(f"profile, {world_size} rank(s), {len(s['epoch_times'])} epochs (median epoch "
          f"{_steady(s['epoch_times']) * 1e3:.2f} ms):")
    print(prof.key_averages().table(sort_by=key, row_limit=row_limit, max_name_column_width=48))


def gcn_matrix(graph):
    """GCN's ``Â = D^-1/2 (A + I) D^-1/2`` as a CSR tensor on the CPU (rows = destinations), with its COO
    triplets ``(rows, cols, weights)``: the operand every kernel benchmark times."""
    from workbench.train.models import GCN, edge_weights, sparse_aggregator

    src, dst = graph.edges()
    loops = torch.arange(graph.num_nodes)
    s, d = torch.cat([src, loops]), torch.cat([dst, loops])
    w = edge_weights(GCN, s, d, graph.in_degrees()[d], graph.out_degrees()[s]).to(torch.float32)
    a, _ = sparse_aggregator(d, s, w, (graph.num_nodes, graph.num_nodes))
    return a, (d, s, w)


def time_kernels(graph, widths=(64, 16), reps: int = 3, device: str = "cpu") -> None:
    """Print the seconds of ``Â H`` per candidate kernel at each width on ``device`` (the measurement behind
    the choice in :mod:`workbench.train.kernels`)."""
    from workbench.train import kernels
    from workbench.train.models import GCN, node_scales

    dev = torch.device(device)
    a, (d, s, w) = gcn_matrix(graph)
    rows = torch.repeat_interleave(torch.arange(graph.num_nodes), a.crow_indices().diff())
    crow, col, val = a.crow_indices(), a.col_indices(), a.values()
    if dev.type == "cpu":
        factored, _ = kernels.csr_pair(d, s, w, (graph.num_nodes, graph.num_nodes),
                                       scales=node_scales(GCN, graph.in_degrees(), graph.out_degrees()))
        cands = {"torch CSR": lambda h: torch.sparse.mm(a, h),
                 "numba CSR": lambda h: kernels.spmm(a, h) if kernels._load_numba() else None}
    else:
        a_dev = torch.sparse_csr_tensor(crow.to(dev), col.to(dev), val.to(dev), a.shape)
        a32 = torch.sparse_csr_tensor(crow.to(dev, torch.int32), col.to(dev, torch.int32), val.to(dev), a.shape)
        cands = {"torch CSR (cuSPARSE, int64)": lambda h: torch.sparse.mm(a_dev, h),
                 "torch CSR (cuSPARSE, int32)": lambda h: torch.sparse.mm(a32, h)}
        rows, col, val = rows.to(dev), col.to(dev), val.to(dev)
    cands["gather + index_add_"] = lambda h: torch.zeros_like(h).index_add_(0, rows, h.index_select(0, col) * val[:, None])
    if dev.type == "cpu":
        try:
            import dgl
            import dgl.ops

            g = dgl.graph((col, rows), num_nodes=graph.num_nodes)
            g.create_formats_()
            cands["DGL u_mul_e_sum"] = lambda h: dgl.ops.u_mul_e_sum(g, h, val)
            if kernels._load_dgl():
                cands["DGL copy_u_sum, factored"] = lambda h: kernels._dgl_spmm(factored, h)
        except Exception:  # noqa: BLE001 - no DGL: fewer candidates
            pass
    for width in widths:
        h = torch.randn(graph.num_nodes, width, device=dev)
        line = [f"{name} {timed(lambda: fn(h), dev, reps=reps) * 1e3:.3f} ms" for name, fn in cands.items()]
        print(f"kernels, width {width}: " + ", ".join(line))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", default=None, help=f"graph spec (default {DEFAULT_GRAPH})")
    parser.add_argument("--ranks", default="1,2,4", help="comma-separated rank counts")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--partition", default="metis")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--no-dgl", action="store_true", help="skip the DGL baseline")
    parser.add_argument("--quick", action="store_true", help=f"small graph ({QUICK_GRAPH})")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    parser.add_argument("--kernels", action="store_true", help="first time the candidate sparse kernels")
    parser.add_argument("--kernel", default="auto", help="the runs' sparse kernel (train.kernel: auto, numba, "
                        "torch, dgl, triton)")
    parser.add_argument("--reorder", default="none", choices=["none", "metis"],
                        help="relabel the graph first (metis: METIS clusters of ~2048 vertices get contiguous ids; "
                             "every contender gets the relabelled graph)")
    parser.add_argument("--pyg", action="store_true",
                        help="also time PyG's GCNConv (the baseline where DGL does not import, e.g. on the GPU machines)")
    parser.add_argument("--profile", default="", help="comma-separated rank counts to profile (torch.profiler)")
    parser.add_argument("--bound", action="store_true",
                        help="also time one rank against the memory-bandwidth bound of its sparse products")
    parser.add_argument("--repeats", type=int, default=2,
                        help="rounds of (DGL, every rank count); medians are reported (default 2)")
    parser.add_argument("--save", metavar="PATH", help="write the run's record (docs/benchmarks/NAME.json)")
    args = parser.parse_args(argv)
    if args.save:
        sys.path.insert(0, str(Path(__file__).resolve().parent))   # benchmarks/_record.py
        from _record import Record

        record = Record("full_graph", __file__, argv)
    spec = args.graph or (QUICK_GRAPH if args.quick else DEFAULT_GRAPH)

    t0 = time.perf_counter()
    graph = load_graph(spec)
    if args.reorder == "metis":
        graph = locality_order(graph)
    print(f"graph {spec}: {graph.num_nodes} vertices, {graph.num_edges} stored edges "
          f"({time.perf_counter() - t0:.1f} s to build{', relabelled by METIS clusters' if args.reorder != 'none' else ''}); "
          f"device {args.device}; torch {torch.__version__}")
    from workbench.runtime.runners import host_cores
    from workbench.train.kernels import spmm_kernel

    print(f"cores {host_cores()}, sparse kernel {spmm_kernel(args.device, choice=args.kernel)}, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} (1, 5, 15 min)")
    if args.kernels:
        time_kernels(graph, device=args.device)
    bound = bandwidth_bound(graph, args) if args.bound else None
    rank_counts = [int(r) for r in args.ranks.split(",") if r.strip()]
    bus = ranks_bandwidth(graph, args, rank_counts, bound["copy_bandwidth_GBps"] * 1e9) if args.bound else None
    for p in ([int(x) for x in args.profile.split(",") if x.strip()] if args.profile else []):
        profile_epochs(graph, p, args)
    dgl_runs: list = []
    pyg_runs: list = []
    dgl_mb = None
    runs: dict = {p: [] for p in rank_counts}
    for _ in range(args.repeats):      # DGL, then every rank count, again: the machine's load drifts
        if not args.no_dgl:
            with peak_rss() as rss:
                dgl_runs.append(run_dgl(graph, args))
            dgl_mb = max(dgl_mb or 0.0, rss["extra_mb"])
        if args.pyg:
            try:
                from full_graph_pyg import run_pyg   # benchmarks/ is the script's folder, first on sys.path

                pyg_runs.append(run_pyg(graph, args))
            except Exception as exc:  # noqa: BLE001 - PyG missing, or out of memory on a large graph
                print(f"PyG baseline failed ({type(exc).__name__}: {str(exc)[:200]}): skipping it")
                args.pyg = False
        for p in rank_counts:
            runs[p].append(run_workbench(graph, p, args))
    if not args.no_dgl and dgl_runs and dgl_runs[0] is not None:
        dgl_runs.append(run_dgl(graph, args))
    rows = []
    for p in rank_counts:
        times = [_steady(s["epoch_times"]) for s in runs[p]]
        s = runs[p][int(min(range(len(times)), key=lambda i: abs(times[i] - statistics.median(times))))]
        row = {"ranks": p, "epoch_s": statistics.median(times), "epoch_s_runs": times, "prepare_s": s["prepare_s"],
               "train_mb_per_rank": max(x["train_mb_per_rank"] for x in runs[p]),
               "halo_bytes_per_epoch": s["bytes_per_epoch"],
               "predicted_bytes_per_epoch": s["predicted_bytes_per_epoch"],
               "bytes_by_kind": s["bytes_by_kind"], "final_loss": s["losses"][-1],
               "ratio_vs_dgl": None}
        for name, preset in LINKS.items():
            row[f"modelled_comm_s@{name}"] = modelled_comm_seconds(s["traffic"], preset)
        rows.append(row)
    dgl_s = statistics.median(dgl_runs) if dgl_runs and dgl_runs[0] is not None else None
    pyg_s = statistics.median(pyg_runs) if pyg_runs else None
    for r in rows:
        r["ratio_vs_dgl"] = (r["epoch_s"] / dgl_s) if dgl_s else None
        r["ratio_vs_pyg"] = (r["epoch_s"] / pyg_s) if pyg_s else None
    print()
    print(f"{'ranks':>5} {'epoch s':>9} {'x DGL':>7} {'target':>7} {'train MB/rank':>14} {'halo MB/ep':>11} "
          f"{'comm s@10G':>11} {'comm s@100G':>12}")
    if dgl_s:
        print(f"{'DGL':>5} {dgl_s:9.4f} {1.0:7.2f} {'':>7} {dgl_mb:14.0f}   "
              f"(runs: {', '.join(f'{x:.3f}' for x in dgl_runs)} s)")
    if pyg_s:
        print(f"{'PyG':>5} {pyg_s:9.4f}  (GCNConv, cached; runs: {', '.join(f'{x:.4f}' for x in pyg_runs)} s); "
              + ", ".join(f"{r['ranks']} rank(s) {r['ratio_vs_pyg']:.2f}x PyG" for r in rows))
    if bound:
        print(f"1 rank against the SpMM bandwidth bound: epoch {bound['epoch_over_bound']:.2f}x, "
              f"sparse products alone {bound['spmm_kernel_over_bound']:.2f}x "
              f"({bound['spmm_kernel_over_no_reuse_bound']:.2f}x the no-reuse bound)")
    for r in rows:
        ratio = f"{r['ratio_vs_dgl']:7.2f}" if r["ratio_vs_dgl"] else f"{'-':>7}"
        target = f"{TARGETS[r['ranks']]:7.2f}" if r["ranks"] in TARGETS else f"{'-':>7}"
        print(f"{r['ranks']:>5} {r['epoch_s']:9.4f} {ratio} {target} {r['train_mb_per_rank']:14.0f} "
              f"{r['halo_bytes_per_epoch'] / 1e6:11.2f} "
              f"{r['modelled_comm_s@10 Gbit/s']:11.4f} {r['modelled_comm_s@100 Gbit/s']:12.4f}   "
              f"(runs: {', '.join(f'{x:.3f}' for x in r['epoch_s_runs'])} s)")
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    out = {"graph": spec, "num_nodes": graph.num_nodes, "num_edges": graph.num_edges, "device": args.device,
           "torch": torch.__version__, "dgl_epoch_s": dgl_s, "pyg_epoch_s": pyg_s, "pyg_runs_s": pyg_runs, "dgl_runs_s": dgl_runs, "dgl_train_mb": dgl_mb,
           "load_average": os.getloadavg(), "workbench": rows,
           "bandwidth_bound": bound, "ranks_bandwidth": bus}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    if args.save:
        from _record import row

        label = "DGL GraphConv, one process"
        headline = [row(f"full-graph GCN epoch, {r['ranks']} rank(s)", r["epoch_s"], "s/epoch", dgl_s, label,
                        TARGETS.get(r["ranks"])) for r in rows]
        headline += [row(f"{r['ranks']} rank(s): epoch over the shared bus's bound for its sparse products",
                         r["epoch_over_bound"], "x", relation="<=") for r in bus or []]
        record.save(args.save, out, headline)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
