"""``workbench reproduce``: the seven papers' reproducible claims beside this workbench's numbers.

The claims live in the repository's top-level package ``reproduce`` (beside ``recipes``, one module per system);
this command loads that package by name when it runs, as ``workbench run`` loads a recipe, so the core never
imports ``reproduce`` or ``recipes``.

Examples::

    workbench reproduce --quick                 # all seven systems at small scale (a few minutes)
    workbench reproduce hp_gcn sancus --json    # two systems, one JSON object
    workbench reproduce --out docs/reproduce    # the full run, with one offline HTML page per system
"""

from __future__ import annotations

import argparse
import importlib

__all__ = ["register", "reproduce_command"]

PACKAGE = "reproduce"
SYSTEMS = ("distdgl", "bytegnn", "sancus", "hp_gcn", "catgnn", "psc_gcn", "g3")


def register(subparsers) -> None:
    """Add ``reproduce`` to the ``workbench`` command."""
    p = subparsers.add_parser("reproduce", help="run each paper's reproducible claims and compare with the paper",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("systems", nargs="*", metavar="SYSTEM",
                   help=f"systems to run (default all): {', '.join(SYSTEMS)}")
    p.add_argument("--quick", action="store_true", help="smaller graphs and fewer epochs (all seven in minutes)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    p.add_argument("--out", metavar="DIR", help="also write one offline HTML page per system (and the JSON) here")
    p.set_defaults(func=reproduce_command)


def reproduce_command(args: argparse.Namespace) -> int:
    try:
        module = importlib.import_module(PACKAGE)
    except ModuleNotFoundError as exc:
        if exc.name and PACKAGE.startswith(exc.name):
            from workbench._validation import ParamError

            raise ParamError([f"workbench reproduce needs the repository's {PACKAGE!r} package on the path "
                              "(run it from the repository root)."]) from exc
        raise
    return int(module.command(args) or 0)
