"""Arguments that more than one ``workbench`` subcommand takes, and what they build.

``workbench partition``, ``export-distdgl`` (:mod:`workbench.partition.cli`) and ``workbench sample``
(:mod:`workbench.sample.cli`) all partition a graph first: :func:`add_partition_arguments` adds the graph spec,
``--parts``, ``--method``, ``--seed`` and ``--set``, and :func:`partitioner_and_graph` checks them and loads the
graph. :func:`parse_fanouts` reads ``--khop`` and ``--fanouts``. :func:`check_out_folder` refuses an output folder
flag (``--out DIR``, ``--folder DIR``) that names an existing file, before anything is loaded.

Example:
    >>> parse_fanouts("15,10,5"), parse_fanouts("-1;-1")
    ((15, 10, 5), (-1, -1))
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Optional, Union

from workbench._validation import ErrorCollector, check_choice, parse_settings

__all__ = ["add_partition_arguments", "partitioner_and_graph", "parse_fanouts", "check_out_folder"]


def add_partition_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``GRAPH``, ``--parts``, ``--method``, ``--seed`` and ``--set`` (a partitioner option) to ``p``."""
    from workbench.partition.base import PARTITIONERS

    p.add_argument("graph", metavar="GRAPH",
                   help="graph spec: a path (edge list, OGB directory, DGL .bin), 'karate', or a generator such as "
                        "'sbm:num_nodes=20000,num_blocks=16,seed=0'")
    p.add_argument("--parts", "-p", type=int, required=True, metavar="P", help="number of parts")
    p.add_argument("--method", "-m", default="metis", metavar="NAME",
                   help=f"partitioner: one of {', '.join(sorted(PARTITIONERS))} (default: metis)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="NAME=VALUE",
                   help="a partitioner option, e.g. --set balance_train=true (repeatable)")


def partitioner_and_graph(args: argparse.Namespace, bar: Any = None):
    """Validate method, options and part count, then load the graph. Returns (partitioner, graph)."""
    from workbench.partition.base import PARTITIONERS

    method = check_choice(args.method, "--method", f"workbench {args.command}", sorted(PARTITIONERS))
    cls = PARTITIONERS[method]
    config = cls.Config(seed=args.seed) if "seed" in cls.Config.field_names() else cls.Config()
    config = config.with_strings(parse_settings(args.settings)).validate()
    errs = ErrorCollector(f"workbench {args.command}")
    errs.check(args.parts >= 1, "--parts", "an int >= 1", args.parts)
    errs.raise_if_any()
    partitioner = cls(config)
    from workbench.data import load_graph

    if bar is not None:
        bar.set_postfix_str(f"loading {args.graph}")
    graph = load_graph(args.graph)
    partitioner.check(graph, args.parts)
    if bar is not None:
        bar.update()
        bar.set_postfix_str(f"{method}: {args.parts} parts")
    return partitioner, graph


def parse_fanouts(text: str) -> tuple[int, ...]:
    """Comma-separated fan-outs (``15,10,5``; ``-1`` = all): ``--khop`` of ``workbench partition``, ``--fanouts`` of
    ``workbench sample``."""
    try:
        return tuple(int(x) for x in text.replace(";", ",").split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints such as 15,10,5, got {text!r}")


def check_out_folder(errs: ErrorCollector, flag: str, path: Optional[Union[str, os.PathLike]]) -> None:
    """Add an error to ``errs`` when the output folder ``path`` of ``flag`` cannot be a folder: it is an existing
    file, or a path through one (``None``, an existing folder and a path still to create pass).

    Example:
        >>> import tempfile
        >>> f = tempfile.NamedTemporaryFile()
        >>> errs = ErrorCollector("workbench partition")
        >>> check_out_folder(errs, "--out", f.name)
        >>> errs.errors[0].startswith("The '--out' parameter of workbench partition must be a folder")
        True
    """
    if path is None:
        return
    p = Path(path)
    existing = next((q for q in (p, *p.parents) if q.exists()), None)
    if existing is None or existing.is_dir():
        return
    where = "an existing file" if existing == p else f"a path through the existing file {str(existing)!r}"
    errs.check(False, flag, f"a folder (existing or to create), not {where}", str(path))
