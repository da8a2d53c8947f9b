"""Hit rate against cache ratio per static policy on a power-law graph, with no trainer.

The requests are one epoch of rank 0's full 1-hop inputs: its vertices in seeded batches, each batch's
in-neighbours once (what a one-layer, all-neighbour sampler asks the feature store for). A remote vertex
is then requested about as often as it has edges into rank 0's part, the degree-weighted pattern under
which PaGraph's degree cache is meant to win. ``oracle`` (the most requested ids first) is the best any
static cache of that size can do; the ratio ``degree / random`` is the figure to read (GNNLab reports a
10 % degree cache at 19 % hits on products and 50 % on papers100M, against 10 % for random).

Usage::

    python benchmarks/cache_hit_rate.py                                 # chunglu 20k vertices, 4 parts
    python benchmarks/cache_hit_rate.py --graph "rmat:scale=16,edge_factor=8,seed=0" --method metis
"""

from __future__ import annotations

import argparse
import json

import torch

import workbench as wb
from workbench.cache import hit_rate_curve
from workbench.partition import partition


def one_hop_requests(graph, node_part: torch.Tensor, rank: int, batch_size: int, seed: int = 0) -> torch.Tensor:
    """Global ids rank ``rank`` pulls in one epoch of 1-hop, all-neighbour batches (vectorised)."""
    n = graph.num_nodes
    owned = (node_part == rank).nonzero().flatten()
    order = owned[torch.randperm(owned.numel(), generator=torch.Generator().manual_seed(seed))]
    batch_of = torch.full((n,), -1, dtype=torch.int64)
    batch_of[order] = torch.arange(order.numel()) // batch_size
    src, dst = graph.edges()
    keep = batch_of[dst] >= 0
    return torch.unique(batch_of[dst[keep]] * n + src[keep]) % n  # each batch's inputs once


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", default="chunglu:num_nodes=20000,avg_degree=10,seed=0")
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--method", default="random")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--ratios", default="0.01,0.05,0.1,0.2,0.5")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    g = wb.load_graph(args.graph)
    node_part = partition(g, args.parts, method=args.method, seed=0).node_part
    stream = one_hop_requests(g, node_part, 0, args.batch_size)
    ratios = [float(r) for r in args.ratios.split(",")]
    df = hit_rate_curve(stream, node_part, 0, ["degree", "random", "oracle"], ratios, graph=g,
                        width=g.num_features or 1)
    table = df.pivot(index="ratio", columns="policy", values="hit_rate")
    table["degree/random"] = table["degree"] / table["random"]
    if args.json:
        print(json.dumps({"graph": args.graph, "parts": args.parts, "method": args.method,
                          "requests": int(stream.numel()), "hit_rate": table.round(4).reset_index().to_dict("records")}))
        return
    print(f"{args.graph}, {args.parts} {args.method} parts, rank 0: {stream.numel()} requests "
          f"(batches of {args.batch_size})")
    print(table.round(3).to_string())


if __name__ == "__main__":
    main()
