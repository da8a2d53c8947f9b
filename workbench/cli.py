"""The ``workbench`` console command (also ``python -m workbench``).

Subcommands live next to what they drive and register themselves here through :func:`register`
(core commands) or the ``workbench.commands`` entry-point group (commands from other packages,
such as ``serve`` from ``widgets``; the core never imports those packages itself).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Callable, Optional, Sequence

from workbench._validation import ParamError

# Modules whose ``register(subparsers)`` adds core subcommands.
_CORE_COMMAND_MODULES = (
    "workbench.partition.cli",
    "workbench.runtime.cli",
    "workbench.sample.cli",
    "workbench.data.cli",
    "workbench.runtime.reproduce_cli",
    "workbench.runtime.netcluster",
    "workbench.communicate.netprobe",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="Distributed GNN training workbench: partition graphs, run recipes, serve the dashboard.",
    )
    from workbench import __version__

    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod_name in _CORE_COMMAND_MODULES:
        importlib.import_module(mod_name).register(sub)
    _register_entry_points(sub)
    return parser


def _register_entry_points(sub) -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group="workbench.commands"):
        try:
            register: Callable = ep.load()
        except Exception:  # an optional package (e.g. the views) is not installed
            continue
        register(sub)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ParamError as exc:
        print(f"workbench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError) as exc:
        print(f"workbench {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
