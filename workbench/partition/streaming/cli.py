"""``workbench partition EDGEFILE --stream``: partition an edge file in bounded memory; with ``--with-features``
and ``--labels``, ``--out DIR`` becomes a partition folder (:func:`~.folders.write_part_folders`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from workbench._validation import ErrorCollector, check_choice, parse_settings

__all__ = ["stream_command"]


def _check_folder_args(args: argparse.Namespace, errs: ErrorCollector) -> bool:
    """Validate the partition-folder flags; True when a folder is asked for."""
    from workbench.data.edgefiles import EDGE_DTYPES

    folder = args.with_features is not None
    if args.edge_dtype is not None:
        errs.check(args.edge_dtype in EDGE_DTYPES, "--edge-dtype", f"one of {list(EDGE_DTYPES)}", args.edge_dtype)
        errs.check(Path(args.graph).suffix in (".bin", ".npy"), "--edge-dtype",
                   "given only for a binary edge file (.bin or .npy)", args.edge_dtype)
    if args.num_nodes is not None:
        errs.check(args.num_nodes >= 1, "--num-nodes", "an int >= 1", args.num_nodes)
    errs.check(args.bucket_edges >= 1024, "--bucket-edges", "an int >= 1024", args.bucket_edges)
    errs.check(args.temp_budget_mb >= 1, "--temp-budget-mb", "an int >= 1", args.temp_budget_mb)
    if folder:
        errs.check(args.out is not None, "--with-features", "used with --out DIR (the partition folder)",
                   args.with_features)
        errs.check(args.labels is not None, "--labels", "a .npy of labels with --with-features", args.labels)
    if getattr(args, "halo_features", "copy") != "copy":
        errs.check(folder, "--halo-features", "copy unless --with-features writes a partition folder",
                   args.halo_features)
    for flag in ("with_features", "labels", "train", "val", "test"):
        value = getattr(args, flag)
        if value is not None:
            name = "--" + flag.replace("_", "-")
            errs.check(Path(value).is_file(), name, "an existing .npy file", value)
            if flag != "with_features":
                errs.check(folder, name, "used with --with-features (a partition folder)", value)
    return folder


def _num_nodes(args: argparse.Namespace):
    """``--num-nodes``, else the features' rows (a vertex with no line still gets an owner and a row)."""
    if args.num_nodes is not None or args.with_features is None:
        return args.num_nodes
    import numpy as np

    try:
        return int(np.load(args.with_features, mmap_mode="r", allow_pickle=False).shape[0])
    except (OSError, ValueError, IndexError):
        return None   # write_part_folders names the file


def stream_command(args: argparse.Namespace) -> int:
    """Run a streaming partitioner on ``args.graph`` (an edge file, or any graph spec, whose edges are then
    streamed from memory) and print or write its metrics (and the partition folder)."""

    from workbench.data.edgefiles import is_binary_edge_file
    from workbench.partition.base import PARTITIONERS
    from workbench.partition.streaming.methods import STREAMING_METHODS
    from workbench.partition.streaming.stream import EdgeFileStream, GraphEdgeStream, SpilledTextStream

    method = check_choice(args.method, "--method", "workbench partition --stream", list(STREAMING_METHODS))
    cls = PARTITIONERS[method]
    config = cls.Config(seed=args.seed).with_strings(parse_settings(args.settings)).validate()
    errs = ErrorCollector("workbench partition --stream")
    errs.check(args.parts >= 1, "--parts", "an int >= 1", args.parts)
    errs.check(args.chunk_edges >= 1, "--chunk-edges", "an int >= 1", args.chunk_edges)
    folder = _check_folder_args(args, errs)
    errs.raise_if_any()
    path = Path(args.graph)
    if path.is_file() and (path.suffix != ".bin" or is_binary_edge_file(path, args.edge_dtype)):
        edges = EdgeFileStream(args.graph, chunk_edges=args.chunk_edges, directed=args.directed,
                               num_nodes=_num_nodes(args), dtype=args.edge_dtype)
    else:
        from workbench.data import load_graph

        edges = GraphEdgeStream(load_graph(args.graph), chunk_edges=args.chunk_edges)
    out_dir = Path(args.out) if args.out else None
    keep = out_dir is not None and not folder   # a folder holds the parts themselves, not a part per line
    spill = None
    if folder and isinstance(edges, EdgeFileStream) and edges.binary is None:
        # a text file parsed once: the partitioner's first pass spills its pairs, every later pass of the
        # partitioner and of the folder writer reads the spill
        spill = edges = SpilledTextStream(edges, out_dir)
    try:
        result, manifest = _stream_and_write(args, cls, config, method, edges, keep, out_dir, folder)
    finally:
        if spill is not None:
            spill.close()
    m = result.metrics
    if args.json:
        d = m.to_dict()   # replication_factor: edge_assignment.npy's lines; replication_factor_completed beside
        d["method"] = method
        if manifest is not None:
            d["folder"] = {k: manifest[k] for k in ("replication_factor", "num_edges", "num_classes",
                                                    "write_phase_s", "write_peak_rss_mb")}
        print(json.dumps(d))
    else:
        print(f"{result.source}: {method} ({m.shape}), {m.num_parts} parts, {m.num_lines:,} lines, "
              f"{m.elapsed_s:.3f} s ({m.edges_per_s:,.0f} lines/s), peak RSS {m.peak_rss_mb:.1f} MiB")
        summary = m.summary()
        width = max(len(k) for k in summary)
        print("\n".join(f"  {k:<{width}}  {v}" for k, v in summary.items()))
        print("  phases (s): " + ", ".join(f"{k}={v}" for k, v in m.phase_s.items()))
        print("\n" + m.table().to_string())
        if manifest is not None:
            print(f"\nwrote the partition folder {out_dir} ({manifest['num_parts']} parts, replication factor "
                  f"{manifest['replication_factor']:.3f}, {manifest['num_edges']:,} edges; phases (s) "
                  f"{manifest['write_phase_s']}, peak RSS {manifest['write_peak_rss_mb']:.1f} MiB): train from it "
                  f"with --graph parts:{out_dir}")
        elif out_dir is not None:
            print(f"\nwrote {out_dir}/edge_assignment.npy, owner.npy and metrics.json")
    return 0


def _stream_and_write(args, cls, config, method: str, edges, keep: bool, out_dir, folder: bool) -> tuple:
    """``(result, manifest)``: the partition of ``edges`` (saved to ``out_dir`` when given, without the folder) and
    the partition folder's manifest (None without ``--with-features``)."""
    import numpy as np

    result = cls(config).stream(edges, args.parts, keep_assignment=keep,
                                assignment_dir=out_dir if out_dir is not None else None)
    try:
        if out_dir is not None:
            result.save(out_dir)
    finally:
        result.close()
    m = result.metrics
    manifest = None
    if folder:
        from workbench.partition.streaming.folders import write_part_folders
        from workbench.partition.base import _json_safe

        owner = result.owner.astype(np.int16 if args.parts < 2 ** 15 else np.int32)
        result.owner = None   # the compact copy is all the writer needs
        log = (lambda line: print(f"  {line}", file=sys.stderr)) if not args.json else None
        manifest = write_part_folders(edges, owner, out_dir, features=args.with_features, labels=args.labels,
                                      train=args.train, val=args.val, test=args.test, method=method,
                                      options=_json_safe(config.to_dict()), metrics=m.to_dict(), source=str(args.graph),
                                      bucket_edges=args.bucket_edges, temp_budget_bytes=args.temp_budget_mb << 20,
                                      halo_features=args.halo_features, log=log)
    return result, manifest
