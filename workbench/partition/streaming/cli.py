"""``workbench partition EDGEFILE --stream``: partition an edge file in bounded memory."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from workbench._validation import ErrorCollector, check_choice, parse_settings

__all__ = ["stream_command"]


def stream_command(args: argparse.Namespace) -> int:
    """Run a streaming partitioner on ``args.graph`` (an edge file, or any graph spec, whose edges are then
    streamed from memory) and print or write its metrics."""
    from workbench.partition.base import PARTITIONERS
    from workbench.partition.streaming.methods import STREAMING_METHODS
    from workbench.partition.streaming.stream import EdgeFileStream, GraphEdgeStream

    method = check_choice(args.method, "--method", "workbench partition --stream", list(STREAMING_METHODS))
    cls = PARTITIONERS[method]
    config = cls.Config(seed=args.seed).with_strings(parse_settings(args.settings)).validate()
    errs = ErrorCollector("workbench partition --stream")
    errs.check(args.parts >= 1, "--parts", "an int >= 1", args.parts)
    errs.check(args.chunk_edges >= 1, "--chunk-edges", "an int >= 1", args.chunk_edges)
    errs.raise_if_any()
    if Path(args.graph).is_file() and not args.graph.endswith((".bin",)):
        edges = EdgeFileStream(args.graph, chunk_edges=args.chunk_edges, directed=args.directed)
    else:
        from workbench.data import load_graph

        edges = GraphEdgeStream(load_graph(args.graph), chunk_edges=args.chunk_edges)
    out_dir = Path(args.out) if args.out else None
    result = cls(config).stream(edges, args.parts, keep_assignment=out_dir is not None,
                                assignment_dir=out_dir if out_dir is not None else None)
    try:
        if out_dir is not None:
            result.save(out_dir)
    finally:
        result.close()
    m = result.metrics
    if args.json:
        d = m.to_dict()   # replication_factor: edge_assignment.npy's lines; replication_factor_completed beside
        d["method"] = method
        print(json.dumps(d))
    else:
        print(f"{result.source}: {method} ({m.shape}), {m.num_parts} parts, {m.num_lines:,} lines, "
              f"{m.elapsed_s:.3f} s ({m.edges_per_s:,.0f} lines/s), peak RSS {m.peak_rss_mb:.1f} MiB")
        summary = m.summary()
        width = max(len(k) for k in summary)
        print("\n".join(f"  {k:<{width}}  {v}" for k, v in summary.items()))
        print("  phases (s): " + ", ".join(f"{k}={v}" for k, v in m.phase_s.items()))
        print("\n" + m.table().to_string())
        if out_dir is not None:
            print(f"\nwrote {out_dir}/edge_assignment.npy, owner.npy and metrics.json")
    return 0
