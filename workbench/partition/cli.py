"""``workbench partition`` and ``workbench export-distdgl``.

Everything that can be checked before loading the graph (method, options, part count >= 1) is, and the
part count is checked against the graph before partitioning; errors exit 2 with one message.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from workbench._validation import ErrorCollector
from workbench.cli_args import add_partition_arguments, check_out_folder, parse_fanouts, partitioner_and_graph

__all__ = ["register"]


def _options_epilog() -> str:
    from workbench.partition.base import PARTITIONERS

    lines = ["partitioner options (--set NAME=VALUE):"]
    for name in sorted(PARTITIONERS):
        cls = PARTITIONERS[name]
        docs = cls.Config.field_docs()
        fields = [f for f in cls.Config.field_names() if f != "seed"]
        lines.append(f"  {name}: " + ("(none besides --seed)" if not fields else ""))
        lines += [f"    {f:<15} {docs.get(f, '')}" for f in fields]
    return "\n".join(lines)


def register(subparsers: Any) -> None:
    """Add the ``partition`` and ``export-distdgl`` subcommands."""
    p = subparsers.add_parser(
        "partition", help="partition a graph and print exact quality metrics",
        description="Partition GRAPH into P parts and print edge cut, replication factor, balance and\n"
                    "communication volume. Example: workbench partition karate --parts 4 --method metis",
        epilog=_options_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_partition_arguments(p)
    p.add_argument("--out", metavar="DIR", help="write assignment.npy (int64 part per vertex) and metrics.json")
    p.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    p.add_argument("--feature-width", type=int, default=None, metavar="W",
                   help="values per feature row for byte counts (default: the graph's feature width)")
    p.add_argument("--khop", type=str, default=None, metavar="F1,F2,...",
                   help="also report sampling metrics (per-split balance, K-hop blocks, remote K-hop accesses "
                        "per split) with these fan-outs, e.g. 10,10")
    p.add_argument("--folder", metavar="DIR",
                   help="write a partition folder (the graph spec parts:DIR): each part's completed subgraph as CSR "
                        "with its feature rows, labels and split, from any method; the graph needs features and "
                        "labels (not with --stream or --out)")
    p.add_argument("--stream", action="store_true",
                   help="streaming methods only: read GRAPH (an edge file) in chunks with state bounded by the "
                        "vertex count; --out writes edge_assignment.npy (file order), owner.npy, metrics.json")
    p.add_argument("--chunk-edges", type=int, default=1 << 20, metavar="N", help="lines per chunk with --stream")
    p.add_argument("--directed", action="store_true",
                   help="with --stream: a line u v is the directed edge u->v (default: an undirected edge)")
    f = p.add_argument_group("partition folder (with --stream --out DIR, or --folder DIR; read back by the graph "
                             "spec parts:DIR)")
    f.add_argument("--with-features", metavar="NPY",
                   help="(N, F) float .npy features: --out DIR becomes a partition folder, each part's completed "
                        "subgraph as CSR with its feature rows, labels and split, and manifest.json")
    f.add_argument("--labels", metavar="NPY", help="(N,) integer .npy labels (-1 = unlabelled); needed with "
                                                   "--with-features")
    for name in ("train", "val", "test"):
        f.add_argument(f"--{name}", metavar="NPY", help=f"{name} vertices: a (N,) bool mask or an id list (.npy); "
                                                        "none of the three: a seeded 0.6/0.2/0.2 split of the "
                                                        "labelled vertices")
    f.add_argument("--edge-dtype", default=None, metavar="int32|int64",
                   help="ids of a raw .bin edge file (default: its sidecar FILE.bin.json)")
    f.add_argument("--num-nodes", type=int, default=None, metavar="N",
                   help="vertex count of the edge file (default: the features' rows, the sidecar's, or max id + 1)")
    f.add_argument("--bucket-edges", type=int, default=1 << 23, metavar="N",
                   help="edges sorted at once while a part's CSR is written (default 8388608; also --folder)")
    f.add_argument("--halo-features", choices=("copy", "reference"), default="copy",
                   help="copy: each part holds its halo's feature rows (self-contained; RF x the features on disk); "
                        "reference: owned rows only, the halo rows read from --with-features at training time")
    f.add_argument("--temp-budget-mb", type=int, default=4096, metavar="MB",
                   help="temporary disk per pass over the edges (parts are grouped below it; default 4096; "
                        "also --folder)")
    p.set_defaults(func=_partition_command)

    e = subparsers.add_parser(
        "export-distdgl", help="partition a graph and write it in DistDGL's partition format",
        description="Partition GRAPH and write DGL's partition format to DIR, loadable with\n"
                    "dgl.distributed.load_partition(DIR/NAME.json, part_id). Needs DGL.",
        epilog=_options_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_partition_arguments(e)
    e.add_argument("--out", metavar="DIR", required=True, help="output folder")
    e.add_argument("--graph-name", default=None, help="name of the config file (default: the graph's name)")
    e.set_defaults(func=_export_command)


def _steps(args: argparse.Namespace, total: int):
    """A ``tqdm.auto`` bar over the command's steps on stderr (hidden when ``TQDM_DISABLE`` is set)."""
    from workbench.data.readers import progress_bar

    return progress_bar(None, total=total, desc=f"workbench {args.command}", large=True, unit="step")


def _format_table(result, metrics) -> str:
    g = result.graph
    lines = [f"{g!r}", f"{result.method} ({metrics.kind}), {result.num_parts} parts, {result.elapsed_s:.3f} s", ""]
    summary = metrics.summary()
    width = max(len(k) for k in summary)
    lines += [f"  {k:<{width}}  {v}" for k, v in summary.items()]
    lines += ["", metrics.table().to_string()]
    return "\n".join(lines)


def _check_partition_args(args: argparse.Namespace) -> None:
    """What ``workbench partition`` can refuse before loading the graph, all at once: folder flags without
    ``--stream``, ``--folder`` with ``--stream``/``--out`` (which folder?) or ``--halo-features reference``,
    ``--out``/``--folder`` naming an existing file, a flag that nothing would read (``--directed`` without
    ``--stream``, ``--khop`` with a vertex cut, ...) and a malformed ``--khop``."""
    errs = ErrorCollector("workbench partition")
    check_out_folder(errs, "--out", args.out)
    check_out_folder(errs, "--folder", args.folder)
    folder_flags = [f"--{n.replace('_', '-')}" for n in ("with_features", "labels", "train", "val", "test",
                                                        "edge_dtype", "num_nodes") if getattr(args, n) is not None]
    if folder_flags and not args.stream:
        errs.check(False, folder_flags[0], "used with --stream (binary edge files and partition folders are "
                                           "streamed)", "no --stream")
    if args.folder is not None:
        errs.check(not args.stream, "--folder", "used without --stream (a streamed partition folder is --stream "
                                                "--out DIR --with-features X.npy --labels Y.npy)", args.folder)
        errs.check(args.out is None, "--folder", "used without --out (--out writes assignment.npy, --folder the "
                                                 "partition folder: give one)", args.folder)
        errs.check(args.halo_features == "copy", "--halo-features", "copy with --folder (the graph's features are "
                                                                    "not a file a folder could reference)",
                   args.halo_features)
        errs.check(args.bucket_edges >= 1024, "--bucket-edges", "an int >= 1024", args.bucket_edges)
        errs.check(args.temp_budget_mb >= 1, "--temp-budget-mb", "an int >= 1", args.temp_budget_mb)
    # a flag that nothing would read is refused rather than ignored: (flag, its default, read?, what reads it)
    folder = (args.stream and args.with_features is not None) or args.folder is not None   # a folder is written
    for name, default, read, reader in (
            ("chunk_edges", 1 << 20, args.stream, "--stream"), ("directed", False, args.stream, "--stream"),
            ("bucket_edges", 1 << 23, folder, "--stream --with-features or --folder"),
            ("temp_budget_mb", 4096, folder, "--stream --with-features or --folder"),
            ("halo_features", "copy", folder, "--stream --with-features")):   # --folder refuses it above
        errs.check(read or getattr(args, name) == default, f"--{name.replace('_', '-')}",
                   f"{default!r} (its default) without {reader}, which reads it", getattr(args, name))
    if args.feature_width is not None:
        errs.check(args.feature_width >= 1 and not args.stream and args.folder is None, "--feature-width",
                   "an int >= 1, without --stream or --folder (which count the features' own width)",
                   args.feature_width)
    if args.khop is not None:
        try:
            fanouts = parse_fanouts(args.khop)
        except argparse.ArgumentTypeError:
            fanouts = ()
        errs.check(bool(fanouts) and all(f == -1 or f >= 1 for f in fanouts), "--khop",
                   "fan-outs such as 10,10 (each >= 1, or -1 for every neighbour)", args.khop)
        from workbench.partition.base import partitioner_kind

        errs.check(not args.stream and args.folder is None and partitioner_kind(args.method) != "vertex-cut",
                   "--khop",
                   "used with an in-memory edge-cut partition (not --stream, --folder or a vertex-cut method, "
                   "whose parts own no vertices)", args.khop)
    errs.raise_if_any()


def _partition_command(args: argparse.Namespace) -> int:
    _check_partition_args(args)
    if args.stream:
        from workbench.partition.streaming.cli import stream_command

        return stream_command(args)
    if args.folder is not None:
        return _folder_command(args)
    with _steps(args, 3) as bar:   # load, partition, metrics
        partitioner, graph = partitioner_and_graph(args, bar)
        result = partitioner.partition(graph, args.parts)
        bar.update()
        bar.set_postfix_str("metrics")
        metrics = result.metrics(feature_width=args.feature_width)
        bar.update()
    if args.out:
        result.save(args.out)
    if args.json:
        d = metrics.to_dict()
        d["method"] = result.method
        if getattr(args, "khop", None) and result.node_part is not None:
            from workbench.partition.gnn_metrics import sampling_metrics

            d.update(sampling_metrics(result, fanouts=parse_fanouts(args.khop)).to_dict())
        d.update({f"partitioner_{k}": v for k, v in result.stats.items()})   # e.g. partitioner_km1 (Mt-KaHyPar)
        print(json.dumps(d))
    else:
        print(_format_table(result, metrics))
        if getattr(args, "khop", None) and result.node_part is not None:
            from workbench.partition.gnn_metrics import sampling_metrics

            print("\n" + repr(sampling_metrics(result, fanouts=parse_fanouts(args.khop))))
        if args.out:
            print(f"\nwrote {args.out}/assignment.npy and metrics.json")
    return 0


def _folder_command(args: argparse.Namespace) -> int:
    """``--folder DIR``: partition in memory, then write the partition folder (refused before partitioning when
    the graph has no features or labels)."""
    from workbench.partition.result_folder import folder_graph_errors, write_result_folder

    log = (lambda line: print(f"  {line}", file=sys.stderr)) if not args.json else None
    with _steps(args, 4) as bar:   # load, partition, metrics, folder
        partitioner, graph = partitioner_and_graph(args, bar)
        errs = ErrorCollector("workbench partition --folder")
        folder_graph_errors(graph, errs, "GRAPH")
        errs.raise_if_any()
        result = partitioner.partition(graph, args.parts)
        bar.update()
        bar.set_postfix_str("metrics")
        metrics = result.metrics(feature_width=args.feature_width)
        bar.update()
        bar.set_postfix_str(f"writing {args.folder}")
        manifest = write_result_folder(result, args.folder, source=str(args.graph), bucket_edges=args.bucket_edges,
                                       temp_budget_bytes=args.temp_budget_mb << 20, log=log)
        bar.update()
    if args.json:
        d = metrics.to_dict()
        d["method"] = result.method
        d.update({f"partitioner_{k}": v for k, v in result.stats.items()})
        d["folder"] = {k: manifest[k] for k in ("replication_factor", "num_edges", "num_classes", "write_phase_s",
                                                "write_peak_rss_mb")}
        print(json.dumps(d))
    else:
        print(_format_table(result, metrics))
        print(f"\nwrote the partition folder {args.folder} ({manifest['num_parts']} parts of {result.method}, "
              f"replication factor {manifest['replication_factor']:.3f}, {manifest['num_edges']:,} edges): train "
              f"from it with --graph parts:{args.folder}")
    return 0


def _export_command(args: argparse.Namespace) -> int:
    from workbench.partition.distdgl import export_distdgl

    errs = ErrorCollector("workbench export-distdgl")   # before the graph is loaded
    check_out_folder(errs, "--out", args.out)
    errs.raise_if_any()
    with _steps(args, 3) as bar:   # load, partition, write
        partitioner, graph = partitioner_and_graph(args, bar)
        result = partitioner.partition(graph, args.parts)
        bar.update()
        bar.set_postfix_str(f"writing {args.out}")
        config = export_distdgl(graph, result, args.out, graph_name=args.graph_name)
        bar.update()
    m = result.metrics()
    print(f"wrote {config} ({result.num_parts} parts, edge_cut={m.edge_cut}, "
          f"replication_factor={m.replication_factor:.3f})", file=sys.stdout)
    return 0
