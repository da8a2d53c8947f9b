"""``workbench run`` (run a recipe) and ``workbench runs`` (list saved runs).

Examples::

    workbench run full_graph --graph karate --workers 2 --runner local --epochs 5
    workbench run sancus --runner dask --workers 2 --set exchange.epsilon=2 --json
    workbench run full_graph --set exchange.staleness=epoch-fixed --set exchange.epsilon=1
    workbench run full_graph --set partition.method=metis --set partition.balance_train=true
    workbench run full_graph --scheduler-file scheduler.json --workers 4   # a cluster started elsewhere
    workbench run ./my_recipe.py:fast --runner single
    workbench run sancus --list-stages      # the recipe's settings and every stage method
    workbench stages                        # every registered stage method and its options
    workbench runs runs/

While a run goes, ``workbench run`` shows a ``tqdm`` bar per step (graph, partition, epochs at the
slowest rank, evaluation), driven by the run's ``Progress`` events (hidden when ``TQDM_DISABLE=1``), and
prints one line per epoch.

A run is a composition of stages (partition, sample, cache, exchange, model, schedule, sync, loss, train). Options are set
with ``--set STAGE.FIELD=VALUE`` (``--set partition.method=random`` switches a stage's method); every name
has its section, except the two shorthands ``--epochs`` (``train.epochs``) and ``--seed`` (every section's
seed; also ``--set epochs=5`` and ``--set seed=1``), and ``--graph`` sets the top-level ``graph``. A name
without a section (``--set hidden=16``) is refused with the dotted name it could mean; an unknown name or a
bad value stops with exit status 2 and a message listing the valid options, before any worker starts. A failed
run prints the typed error with the remote traceback and exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Optional

from workbench._format import format_bytes
from workbench._validation import parse_settings
from workbench.events import EpochEnd, Event, Progress, RunFinished, iter_run_log
from workbench.runtime.errors import RunError

__all__ = ["register", "run_command", "runs_command", "stages_command", "ProgressBars"]


def register(subparsers) -> None:
    """Add ``run`` and ``runs`` to the ``workbench`` command."""
    from workbench.runtime.launch import DEVICES, RUNNERS
    from workbench.runtime.runners import LIVENESS_S

    from workbench.stage_listing import describe_stages

    p = subparsers.add_parser("run", help="run a recipe (full_graph, sancus, or your own module or file)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                              epilog="stage methods (--set STAGE.method=NAME; options: workbench stages):\n"
                                     + describe_stages(short=True))
    p.add_argument("recipe", metavar="RECIPE", nargs="?",
                   help="recipe module in recipes/ (NAME or NAME:VARIANT) or a path to a .py file")
    p.add_argument("--graph", help="graph spec (a path, karate, sbm:num_nodes=2000,... ): sets the recipe's 'graph'")
    p.add_argument("--workers", type=int, default=None,
                   help="number of ranks (default: num_parts when set, else 2; runner single: 1); a count the run "
                        "would not use is refused")
    p.add_argument("--runner", choices=RUNNERS, default=None,
                   help="where ranks run (default local; dask when --scheduler or --scheduler-file is given)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", help="Dask scheduler address (runner dask; default: an embedded LocalCluster)")
    where.add_argument("--scheduler-file", metavar="FILE",
                       help="the Dask scheduler's file (JSON with its address: 'dask scheduler --scheduler-file', "
                            "dask-mpi, dask-jobqueue's SLURMRunner write one); runner dask")
    p.add_argument("--epochs", type=int, help="shorthand for --set train.epochs=N")
    p.add_argument("--seed", type=int, help="shorthand: seeds every stage that has a seed (train.seed, partition.seed, "
                                            "sample.seed, ...)")
    p.add_argument("--out", default="runs", help="folder of run logs (default runs/)")
    p.add_argument("--device", choices=DEVICES, default="auto", help="auto (GPU where a rank has one), cpu, cuda")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds a rank may wait for its peers before the run fails (default 120)")
    p.add_argument("--liveness", type=float, default=LIVENESS_S,
                   help="runner dask: seconds a rank's worker (its heartbeats to the scheduler) or the scheduler may "
                        "stay silent before the run fails with WorkerLost / SchedulerLost; a slow rank still "
                        f"heartbeats (default {LIVENESS_S:g})")
    p.add_argument("--json", action="store_true", help="print only the run summary as one JSON object")
    p.add_argument("--network", metavar="NET",
                   help="add modelled_comm_s per epoch to the summary: a preset (1GbE, 10GbE, 25GbE, 100GbE, nvlink), "
                        "BANDWIDTH[,LATENCY] such as 117MB/s,85us or 1gbit,0.1ms, or a JSON file from "
                        "'workbench netprobe --out'")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="set a recipe option: STAGE.FIELD=VALUE (partition.method=random, sample.fanouts=10,5, "
                        "exchange.staleness=epoch-fixed, train.epochs=5), STAGE=METHOD (sample=neighbor) or a "
                        "shorthand (epochs=5, seed=1); a name without its stage (hidden=16) is refused")
    p.add_argument("--list-stages", action="store_true",
                   help="print the recipe's settings (with --set applied) and every stage method, then exit")
    from workbench.data.cli import add_attach_arguments

    add_attach_arguments(p)
    p.set_defaults(func=run_command)

    s = subparsers.add_parser("stages", help="list every stage kind, its registered methods and their options",
                              description="Every registered method of every stage kind (partition, sample, cache, "
                                          "exchange, model) and the training loop's options, as --set names.")
    s.add_argument("kind", nargs="?", help="only this stage kind")
    s.add_argument("--matrix", action="store_true",
                   help="which cache, exchange and schedule methods compose with each sample method (composes / "
                        "refused: what is missing), from the stages' declared needs")
    s.set_defaults(func=stages_command)

    q = subparsers.add_parser("runs", help="list saved runs")
    q.add_argument("dir", nargs="?", default="runs", metavar="DIR", help="folder of run logs (default runs/)")
    q.set_defaults(func=runs_command)


def build_config(args: argparse.Namespace):
    """The recipe's config with ``--graph/--epochs/--seed/--set`` applied (raises ``ParamError``)."""
    from workbench.runtime.recipes import load_recipe

    make = load_recipe(args.recipe)
    settings = parse_settings(args.set)
    from workbench.data.cli import graph_spec_from_args

    for name in ("graph", "epochs", "seed"):
        value = getattr(args, name, None)
        if name == "graph":
            value = graph_spec_from_args(value, args)
        if value is not None:
            settings[name] = str(value)
    config = make()
    return config.with_strings(settings) if settings else config


class _EpochPrinter:
    """Prints one line per epoch once every rank reported it (bytes summed over ranks)."""

    def __init__(self, world_size: int, total: Optional[int], stream=sys.stdout):
        self.world_size = world_size
        self.total = total
        self.stream = stream
        self.pending: dict[int, list[EpochEnd]] = {}

    def __call__(self, event: Event) -> None:
        if not isinstance(event, EpochEnd):
            return
        group = self.pending.setdefault(event.epoch, [])
        group.append(event)
        if len(group) < self.world_size:
            return
        del self.pending[event.epoch]
        first = min(group, key=lambda e: e.rank)
        sent = sum(sum(e.bytes_by_kind.values()) for e in group)
        wall = max(e.wall_s for e in group)
        of = f"/{self.total}" if self.total else ""
        accs = "".join(f"  {name} {v:.3f}" for name, v in (("train", first.train_acc), ("val", first.val_acc),
                                                             ("test", first.test_acc)) if v is not None)
        _write(f"epoch {event.epoch + 1}{of}  loss {first.loss:.4f}{accs}  sent {format_bytes(sent)}  "
               f"{wall * 1000:.1f} ms", self.stream)


def _write(line: str, stream) -> None:
    """Print ``line`` above any progress bar on the terminal."""
    from tqdm.auto import tqdm

    from workbench._format import console

    stream = console(stream)   # a reader that went away must not leave tqdm's lock taken (the run would hang)
    tqdm.write(line, file=stream)
    stream.flush()


class ProgressBars:
    """``tqdm.auto`` bars (terminal or notebook) driven by a run's :class:`Progress` events.

    One bar per stage, closed when the stage is complete; a stage reported per rank (``epochs``) shows
    its slowest rank and completes when all ``world_size`` ranks have. Listeners are called one event
    at a time (under the run handle's lock). Hidden when ``TQDM_DISABLE`` is set or ``enabled`` is false.
    """

    def __init__(self, world_size: int = 1, enabled: Optional[bool] = None):
        self.world_size = world_size
        self.enabled = enabled
        self.bars: dict[str, Any] = {}
        self._ranks: dict[str, dict[int, int]] = {}
        self._closed: set[str] = set()

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            self.close()
        if not isinstance(event, Progress) or event.stage in self._closed:
            return
        bar = self.bars.get(event.stage)
        if bar is None:
            from workbench.data.readers import progress_bar

            bar = self.bars[event.stage] = progress_bar(self.enabled, total=event.total or None, desc=event.stage,
                                                        large=True)
        done, complete = event.done, True
        if event.rank is not None:
            ranks = self._ranks.setdefault(event.stage, {})
            ranks[event.rank] = event.done
            done = min(ranks.values())
            complete = len(ranks) >= self.world_size
        if event.total and bar.total != event.total:
            bar.total = event.total
        if event.message:
            bar.set_postfix_str(event.message, refresh=False)
        if done != bar.n:
            bar.update(done - bar.n)
        if complete and event.total and done >= event.total:
            bar.close()
            del self.bars[event.stage]
            self._closed.add(event.stage)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()


def stages_command(args: argparse.Namespace) -> int:
    from workbench.stage_listing import composition_matrix, describe_stages, format_matrix
    from workbench.stages import STAGE_SECTIONS

    if getattr(args, "matrix", False):
        print(format_matrix(composition_matrix()))
        return 0
    text = describe_stages()
    kind = getattr(args, "kind", None)
    if kind:
        from workbench._validation import check_choice

        check_choice(kind, "kind", "workbench stages", [*STAGE_SECTIONS, "train", "batches"])
        blocks, keep = [], False
        for line in text.splitlines():
            if not line.startswith(" "):
                keep = line.startswith(f"{kind}.") or line.startswith(f"{kind}:")
            if keep:
                blocks.append(line)
        text = "\n".join(blocks)
    print(text)
    return 0


def _print_settings(config) -> None:
    from workbench.compose import as_text

    pairs = config.to_strings() if hasattr(config, "to_strings") else {k: as_text(v) for k, v in
                                                                       config.to_dict().items()}
    for name, value in pairs.items():
        print(f"  --set {name}={value}")


def run_command(args: argparse.Namespace) -> int:
    from workbench.runtime.launch import launch, world_size_of
    from workbench.runtime.runners import LIVENESS_S

    if args.recipe is None:
        if args.list_stages:
            return stages_command(argparse.Namespace(kind=None))
        from workbench._validation import ParamError

        raise ParamError(["workbench run needs a RECIPE (e.g. full_graph, sancus, or a path to a .py file)."])
    given = args.scheduler is not None or getattr(args, "scheduler_file", None) is not None
    if args.runner is None:
        args.runner = "dask" if given else "local"
    if given and args.runner != "dask":
        from workbench._validation import ParamError, param_error

        raise ParamError([param_error("--runner", "workbench run", "'dask' (or left out) when --scheduler or "
                                      "--scheduler-file is given", args.runner)])
    if getattr(args, "scheduler_file", None) is not None:   # refused before the graph is loaded or a worker starts
        from workbench.runtime.dask_runner import scheduler_file_address

        scheduler_file_address(args.scheduler_file, "--scheduler-file", "workbench run")
    from workbench._validation import ErrorCollector
    from workbench.cli_args import check_out_folder

    errs = ErrorCollector("workbench run")   # the run-log folder, before the graph is loaded or a worker starts
    check_out_folder(errs, "--out", args.out)
    errs.raise_if_any()
    config = build_config(args)
    if args.list_stages:
        print(f"settings of {args.recipe}:")
        _print_settings(config)
        print("\nstages:")
        return stages_command(argparse.Namespace(kind=None))
    program = config.build()
    bars = ProgressBars(world_size_of(program, args.runner, args.workers, name="--workers", owner="workbench run"))
    listeners: list = [bars]
    out_stream = sys.stderr if args.json else sys.stdout
    printer: Optional[_EpochPrinter] = None
    if not args.json:
        printer = _EpochPrinter(1, getattr(getattr(config, "train", config), "epochs", None), out_stream)
        listeners.append(printer)
    recipe = Path(args.recipe).stem if args.recipe.endswith(".py") else args.recipe
    try:
        handle = launch(program, runner=args.runner, workers=args.workers, scheduler=args.scheduler, out=args.out,
                        listeners=listeners, timeout=args.timeout, device=args.device, recipe=recipe,
                        network=getattr(args, "network", None), scheduler_file=getattr(args, "scheduler_file", None),
                        liveness=getattr(args, "liveness", LIVENESS_S))
    except BaseException:
        bars.close()   # a run that fails while preparing leaves no bar behind
        raise
    if printer is not None:
        printer.world_size = handle.world_size
        where = f", log {handle.log_dir}" if handle.log_dir else ""
        print(f"run {handle.run_id}: {recipe} on {handle.world_size} rank(s), runner {args.runner}{where}",
              file=out_stream, flush=True)
        for note in getattr(program, "notes", []):   # settings the run took from others or sized itself
            print(f"  {note}", file=out_stream, flush=True)
    try:
        summary = _wait(handle)
    except RunError as err:
        bars.close()
        print(f"workbench run: error: {err.details()}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(summary.to_dict() if hasattr(summary, "to_dict") else summary, default=str))
    else:
        status = handle.status
        if summary.get("modelled_comm_s"):
            _print_modelled(summary, out_stream)
        if "comm_share" in summary:
            print(f"communication: {100 * summary['comm_share']:.0f} % of the epochs' time", file=out_stream)
        if "target_accuracy" in summary:
            reached = summary["time_to_accuracy_s"]
            print(f"time to validation accuracy {summary['target_accuracy']:g}: " + (
                f"{reached:.2f} s (epoch {summary['time_to_accuracy_epoch']})" if reached is not None
                else "not reached"), file=out_stream)
        print(f"{status} in {summary.get('wall_s', 0.0):.2f} s" + (f"; dashboard was {handle.dashboard_link}"
                                                                  if handle.dashboard_link else ""), file=out_stream)
    return 0 if handle.status in ("finished", "stopped") else 1


def _print_modelled(summary: dict, stream) -> None:
    """Measured and modelled communication per epoch (medians after the first epoch): the most any rank spent
    in communication (``comm_s``, waits for slower ranks included) and the critical path's (``comm_critical_s``,
    the least time any rank spent in each collective call: what the network model predicts)."""
    import statistics

    measured, modelled = summary["comm_s"], summary["modelled_comm_s"]
    skip = 1 if len(measured) > 1 else 0
    m, n = statistics.median(measured[skip:]), statistics.median(modelled[skip:])
    critical = [c for c in summary.get("comm_critical_s", [])[skip:] if c is not None]
    c = statistics.median(critical) if critical else None
    path = "" if c is None else (f"; without the waits for slower ranks {c * 1000:.1f} ms "
                                 f"(ratio {n / c if c else float('nan'):.2f})")
    print(f"communication per epoch (median): measured {m * 1000:.1f} ms, modelled {n * 1000:.1f} ms on "
          f"{summary['network']['spec']} (ratio {n / m if m else float('nan'):.2f}){path}", file=stream)


def _wait(handle) -> dict:
    try:
        return handle.wait()
    except KeyboardInterrupt:  # first Ctrl-C: stop at the next epoch boundary
        print("stopping (Ctrl-C again to abort)...", file=sys.stderr, flush=True)
        handle.stop()
        return handle.wait()


def runs_command(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    if not root.is_dir():
        raise FileNotFoundError(f"no run folder {str(root)!r}")
    rows = []
    for run_dir in sorted(p for p in root.iterdir() if (p / "events.jsonl").exists()):
        meta = {}
        if (run_dir / "config.json").exists():
            meta = json.loads((run_dir / "config.json").read_text())
        status, epochs, world = "unfinished", -1, "?"   # no run_finished: running, or killed
        for ev in iter_run_log(run_dir):
            if isinstance(ev, RunFinished):
                status = ev.status
            elif isinstance(ev, EpochEnd):
                epochs = max(epochs, ev.epoch)
            elif ev.type == "run_started":
                world = getattr(ev, "world_size", "?")
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(meta.get("created", run_dir.stat().st_mtime)))
        rows.append((run_dir.name, meta.get("recipe", ""), str(world), str(epochs + 1), status, created))
    header = ("run", "recipe", "ranks", "epochs", "status", "created")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return 0
