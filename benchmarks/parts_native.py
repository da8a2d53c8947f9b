"""Benchmark: every rank reads its own part. generate -> stream-partition into an edge-cut folder ->
DistDGL, full-graph halo training and SANCUS from ``parts:DIR`` on P Dask worker processes, each phase a subprocess.

The training phases are the client of a run on an embedded ``LocalCluster`` of P single-threaded worker processes:
the client reads the folder's manifest only and each rank reads its own part (``workbench.train.part_source``).
Reported per phase: wall time, disk, and peak resident memory: the client's and every rank's as the run summary
reports them (``summary["peak_rss_mb"]``, each process's own ``ru_maxrss``), beside the partition phase's; per
training phase the steps, epoch times, losses and bytes by kind (``part_setup`` being the one-off exchange that
sets the ranks up).

Usage::

    python benchmarks/parts_native.py                              # 200k vertices, 4 parts, 4 workers
    python benchmarks/parts_native.py --nodes 2000000 --work /tmp/pn
    python benchmarks/parts_native.py --nodes 2000000 --work /tmp/pn --reuse-input --only distdgl
    python benchmarks/parts_native.py --nodes 111059956 --halo-features reference --work /tmp/p100 \
        --only distdgl --epochs 1 --max-steps 200 --eval-batches 20   # the papers100M-sized run

The report is ``WORK/parts_native.json`` (written after each phase).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import CLI_SCRIPT, disk_mb, reusable_input, run_phase  # noqa: E402

TRAIN_SCRIPT = r"""
import json, os, sys, time
from recipes import distdgl, full_graph, sancus
from workbench.runtime import launch

folder, recipe, workers, epochs, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
limits = json.loads(sys.argv[6])
spec = f"parts:{folder}"
if recipe == "distdgl":
    cfg = distdgl.recipe(graph=spec, epochs=epochs, sample={"fanouts": (10, 5), "batch_size": batch},
                         model={"hidden": 64})
    cfg = cfg.with_strings({f"train.{k}": str(v) for k, v in limits.items() if v is not None})
elif recipe == "full_graph":
    cfg = full_graph.recipe(graph=spec, epochs=epochs, model={"hidden": 16})
else:
    cfg = sancus.recipe(graph=spec, epochs=epochs, model={"hidden": 16})
t0 = time.perf_counter()
s = launch(cfg, runner="dask", workers=workers, out=None, timeout=24 * 3600).wait()
out = {"wall_s": time.perf_counter() - t0, "epoch_times": s["epoch_times"], "losses": s["losses"],
       "accuracy": s["accuracy"], "bytes_by_kind": s["bytes_by_kind"], "peak_rss_mb": s["peak_rss_mb"],
       "steps": sum(s["steps"]) if recipe == "distdgl" else s["epochs"]}
print(json.dumps(out, default=float)); sys.stdout.flush(); os._exit(0)
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--avg-degree", type=float, default=29.0)
    ap.add_argument("--features", type=int, default=16)
    ap.add_argument("--parts", type=int, default=4, help="parts = Dask workers = ranks")
    ap.add_argument("--method", default="spring", help="the streaming partitioner whose owners make the folder")
    ap.add_argument("--epochs", type=int, default=5, help="DistDGL's epochs (the full-graph runs train one)")
    ap.add_argument("--batch-size", type=int, default=32, help="DistDGL's seeds per trainer and step")
    ap.add_argument("--max-steps", type=int, default=None,
                    help="DistDGL's steps per epoch at most (train.max_steps; default: a whole pass over the seeds)")
    ap.add_argument("--eval-batches", type=int, default=None,
                    help="DistDGL's validation/test batches per trainer at most (train.eval_batches; default: all)")
    ap.add_argument("--only", default="distdgl,full_graph,sancus", help="training phases, comma-separated")
    ap.add_argument("--work", type=Path, default=Path("/tmp/workbench-parts-native"))
    ap.add_argument("--reuse-input", action="store_true", help="keep the input and folder an earlier run wrote")
    ap.add_argument("--halo-features", choices=("copy", "reference"), default="copy",
                    help="the folder's halo feature rows: copied into each part, or read from the input's features "
                         "by reference (the papers100M-sized folder: reference, else it outgrows the disk)")
    args = ap.parse_args(argv)
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    spec = (f"papers-like:num_nodes={args.nodes},avg_degree={args.avg_degree},num_features={args.features},"
            f"num_classes=172,seed=0")
    edges, folder = work / "g.bin", work / f"parts-{args.method}-{args.parts}"
    report: dict = {"spec": spec, "parts": args.parts, "method": args.method, "phases": {}}

    def save() -> None:
        (work / "parts_native.json").write_text(json.dumps(report, indent=1) + "\n")

    gen = reusable_input(work, spec) if args.reuse_input else None
    if gen is None:
        gen, wall, peak = run_phase(["-c", CLI_SCRIPT, "generate", spec, "--out", str(edges), "--json"], work,
                                    "generate")
        report["phases"]["generate"] = {"wall_s": wall, "peak_rss_mb": peak, "disk_mb": disk_mb(work)}
        print(f"generate: {gen['num_lines']:,} lines, {gen['num_nodes']:,} vertices, {wall:.1f} s, {peak:.0f} MiB")
    files = {k: Path(v) for k, v in gen["files"].items()}
    report.update(num_nodes=gen["num_nodes"], num_lines=gen["num_lines"])
    if not (args.reuse_input and (folder / "manifest.json").is_file()):
        argv = ["partition", str(edges), "--stream", "--method", args.method, "--parts", str(args.parts),
                "--out", str(folder), "--with-features", str(files["features"]), "--labels", str(files["labels"]),
                "--train", str(files["train"]), "--val", str(files["val"]), "--test", str(files["test"]), "--halo-features", args.halo_features,
                "--json"]
        d, wall, peak = run_phase(["-c", CLI_SCRIPT, *argv], work, "partition")
        manifest = json.loads((folder / "manifest.json").read_text())
        peak = max(peak, d["peak_rss_mb"], manifest["write_peak_rss_mb"])
        report["phases"]["partition"] = {"wall_s": wall, "peak_rss_mb": peak, "disk_mb": disk_mb(folder),
                                         "replication_factor": manifest["replication_factor"]}
        print(f"partition {args.method} into {args.parts} parts: {wall:.1f} s, peak {peak:.0f} MiB, "
              f"folder {disk_mb(folder):.0f} MiB, RF {manifest['replication_factor']:.2f}")
    save()
    for recipe in [r for r in args.only.split(",") if r]:
        epochs = args.epochs if recipe == "distdgl" else 1
        t, wall, _ = run_phase(["-c", TRAIN_SCRIPT, str(folder), recipe, str(args.parts), str(epochs),
                                str(args.batch_size),
                                json.dumps({"max_steps": args.max_steps, "eval_batches": args.eval_batches})],
                               work, f"train-{recipe}")
        rss = t["peak_rss_mb"]
        report["phases"][f"train-{recipe}"] = {"wall_s": wall, **t}
        save()
        print(f"{recipe}: {wall:.1f} s, {t['steps']} steps, epochs {[round(x, 1) for x in t['epoch_times']]} s, "
              f"losses {[round(x, 3) for x in t['losses']]}, peak RSS client {rss['client']:.0f} MiB, ranks "
              f"{[round(x) for x in rss['ranks']]} MiB, setup {t['bytes_by_kind'].get('part_setup', 0) / 2**20:.3g} "
              f"MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
