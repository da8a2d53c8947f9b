"""``workbench sample``: what one epoch of DistDGL's owner-routed sampling costs, without training.

Partitions GRAPH into P parts, gives trainer ``r`` the training vertices of part ``r`` (DistDGL's split,
:mod:`workbench.sample.split`), and runs one epoch of every trainer's sampling on P thread ranks through
the in-process communicator (:mod:`workbench.sample.epoch`). JSON keys:

=================== =====================================================================================
``num_parts``        P
``fanouts``          the fan-outs, input layer first (DGL's order)
``batch_size``       seeds per mini-batch and trainer
``num_steps``        steps per epoch (the same on every trainer)
``num_batches``      mini-batches of all trainers (``num_parts * num_steps``)
``sampled_edges``    edges of every block of every mini-batch
``input_nodes``      summed over mini-batches: the first layer's source vertices
``remote_input_nodes`` of those, the ones another part owns
``feature_bytes``    pulling the remote input rows after the cache: rows x width x 4 + 8 per id
``cache_hit_rate``   fraction of the remote input rows found in the cache (``--cache POLICY --cache-ratio R``)
``cache_fill_bytes`` the caches' initial fill (rows x width x 4 + 8 per id), before the epoch
``sample_bytes``     owner-routed sampling traffic by kind (``sample_req``, ``sample_resp``)
``seeds_per_s``      seeds of all trainers over the epoch's wall time
=================== =====================================================================================
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import time
from typing import Any

from workbench._validation import ErrorCollector, check_choice
from workbench.cli_args import add_partition_arguments, check_out_folder, parse_fanouts, partitioner_and_graph

__all__ = ["register", "cache_policies"]


def cache_policies() -> list[str]:
    """The cache policies ``--cache`` accepts: the cache stage's registry (``none`` first)."""
    importlib.import_module("workbench.cache")   # registers the cache methods
    from workbench.stages import REGISTRIES

    reg = REGISTRIES.get("cache")
    names = sorted(reg) if reg else []
    return names if "none" in names else ["none", *names]


def register(subparsers: Any) -> None:
    """Add the ``sample`` subcommand."""
    from workbench.sample.base import block_samplers
    from workbench.sample.split import SPLIT_MODES

    p = subparsers.add_parser(
        "sample", help="one epoch of DistDGL-style owner-routed sampling on every part's trainer, no model",
        description="Partition GRAPH into P parts; trainer r samples the training vertices of part r (DistDGL's\n"
                    "split; every vertex when GRAPH has no training mask). One epoch of every trainer runs on P thread ranks, each neighbour request going to\n"
                    "the vertex's owner. Prints sampled edges, input nodes, remote input nodes, feature bytes\n"
                    "and seeds/s.\n\nExample: workbench sample karate --parts 2 --fanouts 10,5 --json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_partition_arguments(p)
    # let "--fanouts -1,-1" read as a value: argparse only knows single negative numbers (no public hook)
    p._negative_number_matcher = re.compile(r"^-\d+$|^-\d*\.\d+$|^-?\d+(,\s*-?\d+)+$")
    p.add_argument("--fanouts", type=parse_fanouts, required=True, metavar="F1,F2,...",
                   help="neighbours per layer, input layer first as in DGL's NeighborSampler (the last applies "
                        "to the seeds); -1 = all")
    p.add_argument("--batch-size", type=int, default=1024, metavar="B", help="seeds per mini-batch (default 1024)")
    p.add_argument("--sampler", default="neighbor", metavar="NAME",
                   help=f"sampling method: one of {', '.join(block_samplers())} (default: neighbor)")
    p.add_argument("--replace", action="store_true", help="sample with replacement")
    p.add_argument("--split", default="own", choices=SPLIT_MODES,
                   help="own: each trainer samples its part's training vertices (default); balanced: "
                        "DistDGL's equal shares, own part first; even: DGL's node_split(force_even=True)")
    p.add_argument("--cache", default="none", metavar="POLICY", help="feature cache policy (default: none)")
    p.add_argument("--cache-ratio", type=float, default=0.0, metavar="R",
                   help="cache capacity as a fraction of the vertices a rank does not own (default 0)")
    p.add_argument("--feature-width", type=int, default=None, metavar="W",
                   help="values per feature row for byte counts (default: the graph's feature width)")
    p.add_argument("--out", metavar="DIR", help="write assignment.npy (int64 part per vertex) and metrics.json")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    p.set_defaults(func=_sample_command)


def _sample_command(args: argparse.Namespace) -> int:
    import torch

    from workbench.sample.base import SAMPLERS, block_samplers
    from workbench.sample.epoch import sample_epoch
    from workbench.sample.split import split_seeds

    owner = "workbench sample"
    method = check_choice(args.sampler, "--sampler", owner, block_samplers())
    check_choice(args.cache, "--cache", owner, cache_policies())
    errs = ErrorCollector(owner)
    errs.check(0.0 <= args.cache_ratio <= 1.0, "--cache-ratio", "a number in [0, 1]", args.cache_ratio)
    errs.check(args.feature_width is None or args.feature_width >= 0, "--feature-width", "an int >= 0",
               args.feature_width)
    errs.check(args.cache != "none" or args.cache_ratio == 0.0, "--cache-ratio",
               "0 without --cache (no cache reads it)", args.cache_ratio)
    errs.check(args.cache == "none" or args.cache_ratio > 0.0, "--cache-ratio",
               f"a number in (0, 1] with --cache {args.cache} (a cache of no rows holds nothing)", args.cache_ratio)
    from workbench.partition.base import partitioner_kind

    errs.check(partitioner_kind(args.method) != "vertex-cut", "--method",
               "an edge-cut method (sampling routes each neighbour request to the vertex's owning part)",
               args.method)
    check_out_folder(errs, "--out", args.out)
    errs.raise_if_any()
    from workbench.cache import CACHES

    cache = None if args.cache == "none" else CACHES.build(args.cache, ratio=args.cache_ratio)
    sampler = SAMPLERS.build(method, fanouts=args.fanouts, batch_size=args.batch_size, seed=args.seed,
                             replace=args.replace)
    partitioner, graph = partitioner_and_graph(args)
    result = partitioner.partition(graph, args.parts)
    if result.node_part is None:
        raise ValueError("workbench sample needs an edge-cut partition (a part per vertex)")
    train = (torch.nonzero(graph.train_mask).flatten() if graph.train_mask is not None
             else torch.arange(graph.num_nodes))
    split = split_seeds(train, result.node_part, args.parts, mode=args.split)
    start = time.perf_counter()
    stats = sample_epoch(graph, result.node_part, sampler, split, cache=cache)
    wall = time.perf_counter() - start
    width = graph.num_features if args.feature_width is None else args.feature_width
    remote = sum(s.remote_input_nodes for s in stats)
    hits = sum(s.cache_hits for s in stats)
    sample_bytes: dict[str, int] = {}
    for s in stats:
        for kind, b in s.bytes_by_kind.items():
            if kind.startswith("sample"):
                sample_bytes[kind] = sample_bytes.get(kind, 0) + b
    seeds = sum(s.num_seeds for s in stats)
    out = {
        "num_parts": args.parts, "fanouts": list(sampler.config.fanouts), "batch_size": args.batch_size,
        "sampler": method, "split": args.split, "partition": result.method,
        "num_steps": split.num_steps(args.batch_size), "num_batches": sum(s.num_batches for s in stats),
        "num_seeds": seeds, "sampled_edges": sum(s.sampled_edges for s in stats),
        "input_nodes": sum(s.input_nodes for s in stats), "remote_input_nodes": remote,
        "feature_width": width, "feature_bytes": (remote - hits) * (width * 4 + 8), "cache": args.cache,
        "cache_ratio": args.cache_ratio, "cache_hit_rate": hits / remote if remote else 0.0,
        "cache_fill_bytes": sum(s.cache_fill_rows for s in stats) * (width * 4 + 8), "sample_bytes": sample_bytes,
        "seconds": wall, "seeds_per_s": seeds / wall if wall > 0 else 0.0,
    }
    from workbench.partition.gnn_metrics import sampling_metrics

    out.update(sampling_metrics(result, fanouts=sampler.config.fanouts, batch_size=args.batch_size,
                                seed=args.seed).to_dict())
    if args.out:
        result.save(args.out)
    if args.json:
        print(json.dumps(out))
    else:
        w = max(len(k) for k in out)
        print(f"{graph!r}\n{result.method} into {args.parts} parts; one sampling epoch of every trainer\n")
        print("\n".join(f"  {k:<{w}}  {v}" for k, v in out.items()))
        if args.out:
            print(f"\nwrote {args.out}/assignment.npy and metrics.json")
    return 0
