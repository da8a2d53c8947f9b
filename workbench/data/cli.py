"""``workbench info GRAPH``, ``workbench generate SPEC --out FILE``, and the flags that attach features, labels and a split to an edge list.

Examples::

    workbench info karate
    workbench info data/Cora --json                    # a Planetoid folder (PyG root or raw/)
    workbench info edges.txt --labels y.npy --structural-features degree
    workbench run full_graph --graph edges.txt --features x.npy --labels y.npy --split 0.6,0.2,0.2

The attach flags turn ``--graph PATH`` into the ``files:`` spec (``files:edges=PATH,labels=...``), which is
what the run config records and every rank loads. A malformed file stops with one line naming it and exit
status 2, before anything is printed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Optional

__all__ = ["register", "add_attach_arguments", "graph_spec_from_args", "info_command", "generate_command"]


def add_attach_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--features/--labels/--train/--val/--test/--split/--split-seed/--structural-features``."""
    from workbench.data.folders import STRUCTURAL_FEATURES

    g = p.add_argument_group("node data for an edge-list graph (see workbench info --help)")
    g.add_argument("--features", metavar="NPY", help="(N, F) float .npy features to attach to the edge list")
    g.add_argument("--labels", metavar="NPY", help="(N,) integer .npy labels (-1 = unlabelled)")
    for name in ("train", "val", "test"):
        g.add_argument(f"--{name}", metavar="NPY", help=f"{name} vertices: a (N,) bool mask or an id list (.npy)")
    g.add_argument("--split", metavar="TRAIN,VAL,TEST",
                   help="fractions of the labelled vertices for a seeded random split (default 0.6,0.2,0.2; "
                        "used when no --train/--val/--test is given)")
    g.add_argument("--split-seed", type=int, metavar="SEED", help="seed of the random split and random features")
    g.add_argument("--structural-features", choices=[s for s in STRUCTURAL_FEATURES if s != "none"],
                   help="features for a graph that has none: degree, random (16 normal columns) or constant")


def graph_spec_from_args(graph: Optional[str], args: argparse.Namespace) -> Optional[str]:
    """``graph`` unchanged, or the ``files:`` spec when any attach flag is set.

    Raises:
        ParamError: a flag with a ``graph`` that is no file (a generated graph names its split in its spec),
            ``--split`` beside ``--train/--val/--test`` (it would be ignored), a path with ``,`` or ``=``.

    Example:
        >>> import tempfile
        >>> g = tempfile.NamedTemporaryFile(suffix=".txt").name
        >>> _ = open(g, "w").write("0 1")
        >>> ns = argparse.Namespace(features=None, labels="y.npy", train=None, val=None, test=None,
        ...                         split="0.5,0.25,0.25", split_seed=None, structural_features="degree")
        >>> graph_spec_from_args(g, ns) == (f"files:edges={g},labels=y.npy,structural=degree,train_ratio=0.5,"
        ...                                 "val_ratio=0.25,test_ratio=0.25")
        True
    """
    from workbench._validation import ParamError, param_error

    names = ("features", "labels", "train", "val", "test", "split", "split_seed", "structural_features")
    if all(getattr(args, n, None) is None for n in names):
        return graph
    if not graph:
        raise ParamError([param_error("graph", "workbench", "an edge-list path when node data flags are given",
                                      graph)])
    given = [n for n in names if getattr(args, n, None) is not None]
    if not Path(graph).is_file():   # a generated graph, a folder or a typo: the flags attach to an edge-list file
        raise ParamError([param_error(f"--{given[0].replace('_', '-')}", "workbench",
                                      f"used with an edge-list file (GRAPH {graph!r} is none; a generated graph takes "
                                      f"its split and features in its spec, e.g. sbm:num_nodes=2000,train_ratio=0.5)",
                                      getattr(args, given[0]))])
    masks = [n for n in ("train", "val", "test") if getattr(args, n, None) is not None]
    if masks and getattr(args, "split", None) is not None:
        raise ParamError([param_error("--split", "workbench", f"left out with --{masks[0]} (the random split is "
                                      f"used only when no --train/--val/--test is given)", args.split)])
    for n in ("features", "labels", "train", "val", "test"):
        v = getattr(args, n, None)
        if v is not None and ("," in v or "=" in v):
            raise ParamError([param_error(n, "workbench", "a path without ',' or '='", v)])
    parts = [f"edges={graph}"]
    parts += [f"{n}={getattr(args, n)}" for n in ("features", "labels", "train", "val", "test")
              if getattr(args, n, None) is not None]
    if getattr(args, "structural_features", None):
        parts.append(f"structural={args.structural_features}")
    if getattr(args, "split", None):
        ratios = [r.strip() for r in args.split.split(",")]
        if len(ratios) != 3:
            raise ParamError([param_error("split", "workbench", "three fractions TRAIN,VAL,TEST", args.split)])
        parts += [f"{k}={v}" for k, v in zip(("train_ratio", "val_ratio", "test_ratio"), ratios)]
    if getattr(args, "split_seed", None) is not None:
        parts.append(f"seed={args.split_seed}")
    return "files:" + ",".join(parts)


def register(subparsers) -> None:
    """Add ``info`` and ``generate`` to the ``workbench`` command."""
    from workbench.data.edgefiles import EDGE_DTYPES

    gen = subparsers.add_parser(
        "generate", help="write a seeded power-law edge file chunk by chunk, with features, labels and a split",
        description="Write a seeded generator's lines to FILE chunk by chunk (never holding the graph), and its node "
                    "features, labels and split as .npy files beside it (FILE's stem + .features.npy, .labels.npy, "
                    ".train/.val/.test.npy). FILE.bin: raw int32/int64 pairs with a FILE.bin.json sidecar; FILE.npy: "
                    "an (E, 2) array; else text. Example: workbench generate "
                    "papers-like:num_nodes=700000,num_features=16 --out g.bin")
    gen.add_argument("spec", metavar="SPEC", help="rmat:..., chunglu:..., sbm:..., papers-like:..., products-like:... "
                                                  "or reddit-like:... with settings (workbench info SPEC lists them)")
    gen.add_argument("--out", required=True, metavar="FILE", help="the edge file (.bin, .npy or text)")
    gen.add_argument("--dtype", default="int32", metavar="|".join(EDGE_DTYPES),
                     help="vertex id type of a binary edge file (default int32)")
    gen.add_argument("--json", action="store_true", help="print the sidecar as one JSON object")
    gen.set_defaults(func=generate_command)
    p = subparsers.add_parser("info", help="what a graph spec holds: sizes, cleaning, features, classes, split",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("graph", metavar="GRAPH", help="a graph spec: a path (edge list, OGB, Planetoid, GraphSAINT or "
                                                  "arrays folder, DGL .bin) or a name such as karate")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_attach_arguments(p)
    p.set_defaults(func=info_command)


def generate_command(args: argparse.Namespace) -> int:
    import sys

    from workbench.data.generate_files import generate_files

    log = None if args.json else (lambda line: print(f"  {line}", file=sys.stderr))
    info = generate_files(args.spec, args.out, dtype=args.dtype, log=log)
    if args.json:
        print(json.dumps(info))
    else:
        print(f"wrote {args.out}: {info['num_lines']:,} lines over {info['num_nodes']:,} vertices, and "
              + ", ".join(Path(v).name for v in info["files"].values()))
    return 0


def info_command(args: argparse.Namespace) -> int:
    from workbench.data import load_graph

    spec = graph_spec_from_args(args.graph, args)
    graph = load_graph(spec)
    info = graph.info()
    if args.json:
        print(json.dumps(info))
        return 0
    print(_format(info))
    return 0


def _format(info: dict[str, Any]) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, dict):
            return ", ".join(f"{k} {fmt(x)}" for k, x in v.items())
        if v is None:
            return "-"
        return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)

    width = max(len(k) for k in info)
    return "\n".join(f"{k.ljust(width)}  {fmt(v)}" for k, v in info.items())
