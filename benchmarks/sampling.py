"""Benchmark: the workbench's neighbour sampler (one rank, ``LocalSource``) against DGL's.

Three contenders sample the same mini-batches (the same shuffled training vertices cut into batches of
``--batch-size``) on the same power-law graph, fan-outs input-first as in DGL (default 15,10,5 = 5 per
seed, then 10, then 15):

* ``workbench``: ``NeighborSampler.sample(batch, LocalSource(g))`` (blocks with global and local ids);
* ``dgl.sampling``: per layer ``dgl.sampling.sample_neighbors`` + ``dgl.to_block``, the same loop structure
  as DGL's ``NeighborSampler.sample_blocks``;
* ``dgl DataLoader``: ``dgl.dataloading.DataLoader(g, train_ids, NeighborSampler(fanouts))``, no workers.

Rounds are interleaved (the order rotates) after one warm-up pass each; the best round is reported as
seeds/s and sampled edges/s, and the ratios (workbench over DGL) come from the same run.

Usage::

    python benchmarks/sampling.py                          # products-like, 100k vertices, ~3M edges
    python benchmarks/sampling.py --graph "rmat:scale=18,edge_factor=8,seed=0"
    python benchmarks/sampling.py --threads 1             # DGL on one thread too (the workbench uses one)
    python benchmarks/sampling.py --quick                  # a small graph, one round (smoke test)
    python benchmarks/sampling.py --threads 1 --save docs/benchmarks/sampling.json   # the docs' record
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

TARGET = 1.0


def _workbench(graph, batches, fanouts):
    from workbench.sample import LocalSource, NeighborSampler

    sampler, source = NeighborSampler(fanouts=tuple(fanouts), seed=0), LocalSource(graph)

    def run() -> int:
        edges = 0
        for step, b in enumerate(batches):
            edges += sampler.sample(b, source, step=step).num_sampled_edges
        return edges
    return run


def _dgl_sampling(dg, batches, fanouts):
    import dgl

    def run() -> int:
        edges = 0
        for b in batches:
            seeds = b
            for fanout in reversed(fanouts):
                frontier = dgl.sampling.sample_neighbors(dg, seeds, fanout)
                block = dgl.to_block(frontier, seeds)
                edges += block.num_edges()
                seeds = block.srcdata[dgl.NID]
        return edges
    return run


def _dgl_loader(dg, train_ids, fanouts, batch_size):
    import dgl

    sampler = dgl.dataloading.NeighborSampler(list(fanouts))
    loader = dgl.dataloading.DataLoader(dg, train_ids, sampler, batch_size=batch_size, shuffle=True,
                                        drop_last=False, num_workers=0)

    def run() -> int:
        edges = 0
        for _inputs, _outputs, blocks in loader:
            edges += sum(b.num_edges() for b in blocks)
        return edges
    return run


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", default="products-like:num_nodes=100000,avg_degree=30,seed=0")
    ap.add_argument("--fanouts", default="15,10,5")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--max-batches", type=int, default=40, help="batches per round (default 40)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0,
                    help="threads for torch and DGL's OpenMP kernels (default: leave their defaults); the "
                         "workbench's numpy kernels use one")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--save", metavar="PATH", help="write the run's record (docs/benchmarks/NAME.json)")
    args = ap.parse_args(argv)
    if args.save:
        sys.path.insert(0, str(Path(__file__).resolve().parent))   # benchmarks/_record.py
        from _record import Record

        record = Record("sampling", __file__, argv)
    if args.quick:
        args.graph, args.max_batches, args.repeats = "products-like:num_nodes=5000,avg_degree=20,seed=0", 4, 1

    import workbench as wb
    from workbench.sample import dgl_available

    if args.threads:
        torch.set_num_threads(args.threads)
        if dgl_available():
            from dgl.utils import set_num_threads

            set_num_threads(args.threads)
    fanouts = [int(x) for x in args.fanouts.split(",")]
    graph = wb.load_graph(args.graph)
    train = torch.nonzero(graph.train_mask).flatten() if graph.train_mask is not None else torch.arange(graph.num_nodes)
    gen = torch.Generator().manual_seed(0)
    train = train[torch.randperm(train.numel(), generator=gen)]
    batches = list(torch.split(train, args.batch_size))[: args.max_batches]
    num_seeds = sum(b.numel() for b in batches)
    print(f"{graph!r}: {graph.num_nodes} vertices, {graph.num_edges} stored edges; fan-outs {fanouts} "
          f"(input first), batch {args.batch_size}, {len(batches)} batches = {num_seeds} seeds per round; "
          f"torch threads {torch.get_num_threads()}")

    runs = {"workbench": _workbench(graph, batches, fanouts)}
    if dgl_available():
        dg = graph.to_dgl()
        runs["dgl.sampling"] = _dgl_sampling(dg, batches, fanouts)
        runs["dgl DataLoader"] = _dgl_loader(dg, torch.cat(batches), fanouts, args.batch_size)
    else:
        print("DGL does not import here: workbench only")
    best = {name: float("inf") for name in runs}
    edges = {}
    for fn in runs.values():
        fn()  # warm-up
    names = list(runs)
    for r in range(args.repeats):
        for name in names[r % len(names):] + names[: r % len(names)]:
            start = time.perf_counter()
            edges[name] = runs[name]()
            best[name] = min(best[name], time.perf_counter() - start)
    out = {"graph": args.graph, "num_edges": graph.num_edges, "fanouts": fanouts, "batch_size": args.batch_size,
           "num_batches": len(batches), "results": {}}
    for name in runs:
        out["results"][name] = {"seconds": best[name], "seeds_per_s": num_seeds / best[name],
                                "edges_per_s": edges[name] / best[name], "sampled_edges": edges[name]}
        print(f"  {name:<15} {best[name]:8.3f} s  {num_seeds / best[name]:>12,.0f} seeds/s  "
              f"{edges[name] / best[name]:>14,.0f} edges/s  ({edges[name]:,} edges)")
    for ref in ("dgl.sampling", "dgl DataLoader"):
        if ref in runs:
            ratio = out["results"]["workbench"]["seeds_per_s"] / out["results"][ref]["seeds_per_s"]
            out[f"ratio_vs_{ref.replace(' ', '_')}"] = ratio
            print(f"  workbench / {ref}: {ratio:.2f}x seeds/s (target >= {TARGET:.1f}x)")
    if args.json:
        print(json.dumps(out))
    if args.save:
        from _record import row

        wb_rate = out["results"]["workbench"]["seeds_per_s"]
        headline = [row(f"workbench sampler vs {ref}", wb_rate, "seeds/s", out["results"][ref]["seeds_per_s"], ref,
                        TARGET, ">=") for ref in ("dgl.sampling", "dgl DataLoader") if ref in runs]
        record.save(args.save, out, headline or [row("workbench sampler", wb_rate, "seeds/s")])
    return out


if __name__ == "__main__":
    main()
