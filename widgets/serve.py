"""``workbench serve``: the dashboard as a web app; ``workbench report``: a saved run as one HTML file.

Both are registered through the ``workbench.commands`` entry point.

Serves on 127.0.0.1 by default and prints the URL; ``--address`` binds elsewhere (an explicit choice:
anyone who can reach that address can start runs). ``--demo`` starts a live demo run on the embedded
Dask ``LocalCluster`` (runner ``dask``) as soon as the page is up. Stopping the server (Ctrl-C or
SIGTERM) stops its runs cleanly.

``workbench report RUN_DIR --out report.html`` writes every view of a saved run with its resources
inline (:meth:`widgets.RunView.save`): the file opens offline, e.g. attached to a review or an issue.

Example:
    $ workbench serve --port 5006 --demo
    Dashboard: http://127.0.0.1:5006/
    $ workbench report runs/sancus-20261122-120000-ab12 --out report.html
    Report: report.html
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Optional

from workbench._validation import check_int

__all__ = ["register", "serve", "start_demo", "write_report", "DEMO_GRAPH"]

#: graph of the demo run: small enough for 2 cores, big enough to see bytes move
DEMO_GRAPH = "sbm:num_nodes=1500,num_blocks=6,avg_degree=8,num_features=32,seed=0"


def register(subparsers: Any) -> None:
    """Add ``serve`` to the ``workbench`` command."""
    p = subparsers.add_parser(
        "serve", help="serve the dashboard (live views of runs, run control)",
        description="Serve the Panel dashboard. Binds 127.0.0.1 unless --address is given.")
    p.add_argument("--port", type=int, default=5006, help="port (default 5006; 0 picks a free one)")
    p.add_argument("--address", default=None,
                   help="address to bind (default 127.0.0.1; e.g. 0.0.0.0 exposes the dashboard to the network)")
    p.add_argument("--demo", action=argparse.BooleanOptionalAction, default=False,
                   help="start a live demo run on the embedded Dask LocalCluster")
    p.add_argument("--runs", default="runs", help="run log folder (default runs/)")
    p.add_argument("--show", action="store_true", help="open a browser tab")
    p.set_defaults(func=_main)

    r = subparsers.add_parser(
        "report", help="write every view of a saved run to one HTML file (opens offline)",
        description="Write the views of a saved run (progress, training curves, partition, staleness, "
                    "communication) to one HTML file with its JavaScript and CSS inline.")
    r.add_argument("run_dir", metavar="RUN_DIR", help="a run folder, e.g. runs/<run-id> (holds events.jsonl)")
    r.add_argument("--out", default="report.html", help="HTML file to write (default report.html)")
    r.add_argument("--title", default=None, help="page title (default: the run id)")
    r.set_defaults(func=_report_main)


def write_report(run_dir: str | os.PathLike, out: str | os.PathLike, *, title: Optional[str] = None) -> Path:
    """Write the views of the saved run in ``run_dir`` to ``out`` (one HTML file, resources inline).

    Raises:
        FileNotFoundError: ``run_dir`` holds no run log.
    """
    from widgets.store import RunStore
    from widgets.views import RunView

    folder = Path(run_dir)
    if not (folder / "events.jsonl").is_file():
        raise FileNotFoundError(f"The 'run_dir' parameter of workbench report must be a run folder holding "
                         f"events.jsonl. Got {str(run_dir)!r} instead.")
    view = RunView(RunStore.from_log(folder), runs_dir=folder.parent, live=False)
    return view.save(out, title=title)


def _report_main(args: argparse.Namespace) -> int:
    path = write_report(args.run_dir, args.out, title=args.title)
    print(f"Report: {path}", flush=True)
    return 0


def demo_config(epochs: int = 2000) -> Any:
    """The demo run's config: SANCUS if available (staleness to watch), else full-graph training.

    Long enough (about two minutes on two cores) to watch it happen."""
    from widgets.control import discover_recipes

    recipes = discover_recipes()
    for name in ("sancus", "full_graph"):
        if name in recipes:
            cfg = recipes[name]()
            changes = {k: v for k, v in (("graph", DEMO_GRAPH), ("epochs", epochs), ("num_parts", None))
                       if k in type(cfg).field_names()}
            return cfg.replace(**changes)
    return None


def start_demo(registry: Any, *, runner: str = "dask", workers: int = 2, epochs: int = 2000) -> threading.Thread:
    """Start the demo run on a background thread (a Dask cluster takes seconds to start).

    Falls back to a replay of a fabricated run when the runtime or the recipes are not available."""

    def go() -> None:
        try:
            cfg = demo_config(epochs)
            if cfg is None:
                raise RuntimeError("no recipe available")
            registry.launch(cfg, runner=runner, workers=workers)
        except Exception as exc:
            from widgets.synthetic import SyntheticRun

            print(f"workbench serve: demo run not started ({exc}); replaying a fabricated run instead",
                  file=sys.stderr)
            registry.add(SyntheticRun(out=str(registry.runs_dir or "runs"), num_parts=workers, epochs=epochs,
                                      delay=0.5, num_nodes=400))

    t = threading.Thread(target=go, daemon=True, name="workbench-demo")
    t.start()
    return t


def serve(registry: Any, *, port: int = 5006, address: Optional[str] = None, show: bool = False,
          threaded: bool = False) -> Any:
    """Start the Bokeh server for the dashboard; returns it (``threaded=True``: running on a thread)."""
    import panel as pn

    from widgets.app import make_app

    host = address or "127.0.0.1"
    origins = [f"{host}:{port}", f"localhost:{port}", f"127.0.0.1:{port}"] if port else ["*"]
    return pn.serve({"/": make_app(registry)}, port=port, address=host, show=show, start=threaded,
                    threaded=threaded, title="GNN workbench", websocket_origin=origins)


def _main(args: argparse.Namespace) -> int:
    from widgets.app import RunRegistry

    port = check_int(args.port, "port", "workbench serve", 0, 65535)
    registry = RunRegistry(args.runs)
    server = serve(registry, port=port, address=args.address, show=args.show)
    server.start()
    host = args.address or "127.0.0.1"
    print(f"Dashboard: http://{host}:{server.port}/", flush=True)
    if args.address and args.address not in ("127.0.0.1", "localhost"):
        print(f"warning: bound to {args.address}; anyone who can reach it can start runs", file=sys.stderr)
    if args.demo:
        start_demo(registry)

    def _stop(*_: Any) -> None:
        server.io_loop.add_callback_from_signal(server.io_loop.stop)

    signal.signal(signal.SIGTERM, _stop)
    try:
        server.io_loop.start()
    except KeyboardInterrupt:
        pass
    finally:
        print("workbench serve: stopping runs…", file=sys.stderr, flush=True)
        registry.stop_all()
        try:
            server.stop()
        except Exception:
            pass
    return 0


if __name__ == "__main__":  # pragma: no cover
    parser = argparse.ArgumentParser(prog="workbench")
    register(parser.add_subparsers())
    ns = parser.parse_args(["serve", *sys.argv[1:]])
    raise SystemExit(ns.func(ns))
