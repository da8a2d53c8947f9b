"""Benchmark: larger than memory, the CATGNN way: generate -> stream-partition into a folder -> train
parts from the folder, each phase in its own process, with its time, peak RSS, disk and the partition's metrics.

Phases (each a subprocess; its peak RSS is the kernel's ``wait4`` reading of that child alone, the interpreter's
teardown skipped as in ``benchmarks/streaming.py``, and for the partition phase the larger of that and the
partitioner's and the folder writer's own peaks, since each resets the kernel's high-water mark when it starts):

1. ``generate``: ``workbench generate papers-like:num_nodes=N,avg_degree=D,num_features=F --out WORK/g.bin``, a
   seeded power-law stream with communities (ogbn-papers100M's shape: 172 classes, mean degree 29, 1.09 % train)
   written chunk by chunk, features/labels/split beside it;
2. ``partition-M`` for each method M (default SPRING and HDRF): ``workbench partition WORK/g.bin --stream
   --method M --parts P --out WORK/parts-M --with-features ... --labels ... --train/--val/--test``: the streaming
   partitioner, then the partition folder (each part's completed subgraph as CSR, feature rows, labels, split);
3. ``train-M``: CATGNN (``recipes/catgnn.py``: GCN, full batch per part, averaging every epoch, its peak following
   the parts' matrices and activations; ``--minibatch``: GraphSAGE in sampled mini-batches inside each part, each
   part's CSR and feature rows read per batch from the folder, so its peak follows the batch) on
   ``graph='parts:dir=WORK/parts-M,select=0+1'``: ``--train-parts`` parts trained in turn on one rank for
   ``--epochs`` epochs, each part read from its folder.

Also a ``baseline`` process that only imports torch, numba and the workbench (the floor of every phase's RSS).
Reported per phase: wall time, peak RSS, disk written; per method: replication factor (the folder's: owned + halo
over vertices), the streaming run's time and lines/s, the folder writer's phases, epoch times and losses; and the
in-memory CSR METIS would need for the same graph, ``8 (V + 1) + 8 * 2E`` bytes (idx_t = int64, both directions
of the E distinct edges; vertex weights and METIS's own work arrays come on top: DGL's METIS on papers100M
peaked at 599 GB), against each phase's peak.

Usage::

    python benchmarks/scale.py                                  # 100k vertices (~1.4M lines), 16 parts
    python benchmarks/scale.py --nodes 700000                   # ~10M lines
    python benchmarks/scale.py --nodes 7000000 --work /tmp/scale  # ~100M lines (papers100M / 16)
    python benchmarks/scale.py --nodes 111059956 --features 16   # papers100M-sized (~1.6B lines; see the docs)

``--keep`` keeps the files (default: each method's partition folder is removed once it has trained, so the disk
holds the input and one folder at a time, and the rest at the end). ``--reuse-input`` takes the input an earlier
run generated in ``--work`` for the same graph and keeps it (the papers100M-sized input takes 16 minutes)::

    python benchmarks/scale.py --nodes 111059956 --features 16 --minibatch --eval-sample train \
        --halo-features reference --methods hdrf --work /work/scale --reuse-input
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
CLI_SCRIPT = "import os, sys; from workbench.cli import main; rc = main(sys.argv[1:]); sys.stdout.flush(); os._exit(rc)"
TRAIN_SCRIPT = r"""
import json, os, sys, time
from recipes import catgnn
from workbench.partition.base import PARTITIONERS
from workbench.runtime import launch
folder, method, select, epochs, mode = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
make = catgnn.minibatch if mode == "minibatch" else catgnn.recipe
extra = {"sync.eval_sample": sys.argv[6]} if mode == "minibatch" else {}
cfg = make(graph=f"parts:dir={folder},select={select}", epochs=epochs, partition=PARTITIONERS[method].Config(), **extra)
t = time.perf_counter()
s = launch(cfg, runner="local", workers=1, out=None).wait(timeout=36000)
keys = ("losses", "epoch_times", "accuracy_by_epoch", "parts", "num_syncs")
print(json.dumps({**{k: s.get(k) for k in keys}, "wall_s": time.perf_counter() - t}))
sys.stdout.flush()
os._exit(0)
"""


BASELINE_SCRIPT = ("import os, json, torch, numba, recipes.catgnn, workbench.cli, workbench.runtime, "
                   "workbench.partition.streaming.folders; print(json.dumps({})); os._exit(0)")


def run_phase(argv: list[str], work: Path, name: str) -> tuple[dict, float, float]:
    """Run ``python ARGV`` in a subprocess; its last stdout line is JSON. Returns (JSON, wall s, peak RSS MiB)."""
    env = dict(os.environ, TQDM_DISABLE="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    start = time.perf_counter()
    with open(work / f"{name}.out", "w+") as out, open(work / f"{name}.err", "w+") as err:
        proc = subprocess.Popen([sys.executable, *argv], stdout=out, stderr=err, env=env, cwd=str(ROOT))
        _, status, usage = os.wait4(proc.pid, 0)   # this child's own peak (RUSAGE_CHILDREN: the max of all)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise RuntimeError(f"{name} failed: {err.read()[-3000:]}")
        out.seek(0)
        result = json.loads(out.read().strip().splitlines()[-1])
    return result, wall, usage.ru_maxrss / 1024


def disk_mb(*paths: Path) -> float:
    total = 0
    for p in paths:
        if p.is_file():
            total += p.stat().st_size
        elif p.is_dir():
            total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return total / 2**20


def reusable_input(work: Path, spec: str) -> Optional[dict]:
    """What ``workbench generate`` wrote into ``WORK/g.bin.json`` when it generated ``spec`` there and every file it
    lists still exists (``--reuse-input``), else ``None``."""
    meta = work / "g.bin.json"
    if not (work / "g.bin").is_file() or not meta.is_file():
        return None
    info = json.loads(meta.read_text())
    if info.get("spec") != spec or not all(Path(f).is_file() for f in info.get("files", {}).values()):
        return None
    return info


def run(work: Path, nodes: int, avg_degree: float, features: int, parts: int, methods: list[str],
        train_parts: int, epochs: int, seed: int = 0, classes: int = 172, mode: str = "full",
        halo_features: str = "copy", eval_sample: str = "full", keep_folders: bool = True, reuse_input: bool = False,
        log=print) -> dict:
    """All phases; returns the report (also written to ``WORK/scale.json``, after each phase as it goes, so a run
    cut short keeps what it measured). ``keep_folders=False`` removes each method's partition folder once it has
    trained (the disk then holds the input and one folder at a time)."""
    work.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        (work / "scale.json").write_text(json.dumps(report, indent=1) + "\n")

    spec = (f"papers-like:num_nodes={nodes},avg_degree={avg_degree},num_features={features},"
            f"num_classes={classes},seed={seed}")
    edges = work / "g.bin"
    report: dict = {"spec": spec, "parts": parts, "train_parts": train_parts, "epochs": epochs, "mode": mode,
                    "halo_features": halo_features, "phases": {}}
    if mode == "minibatch":
        report["eval_sample"] = eval_sample
    _, _, base = run_phase(["-c", BASELINE_SCRIPT], work, "baseline")
    report["baseline_rss_mb"] = base
    log(f"baseline (the interpreter with torch, numba and the workbench imported): {base:.0f} MiB")
    gen = reusable_input(work, spec) if reuse_input else None
    reused = gen is not None
    if not reused:
        gen, wall, peak = run_phase(["-c", CLI_SCRIPT, "generate", spec, "--out", str(edges), "--json"], work,
                                    "generate")
    files = {k: Path(v) for k, v in gen["files"].items()}
    report.update(num_nodes=gen["num_nodes"], num_lines=gen["num_lines"])
    report["phases"]["generate"] = {"wall_s": 0.0 if reused else wall, "peak_rss_mb": 0.0 if reused else peak,
                                    "reused": reused, "disk_mb": disk_mb(edges, *files.values()),
                                    "edges_mb": disk_mb(edges), "features_mb": disk_mb(files["features"])}
    save()
    if reused:
        log(f"generate: reused {edges} ({gen['num_lines']:,} lines, {gen['num_nodes']:,} vertices)")
    else:
        log(f"generate: {gen['num_lines']:,} lines, {gen['num_nodes']:,} vertices, {wall:.1f} s, peak {peak:.0f} MiB")
    select = f"0-{train_parts - 1}"
    for method in methods:
        folder = work / f"parts-{method}"
        args = ["partition", str(edges), "--stream", "--method", method, "--parts", str(parts), "--out", str(folder),
                "--with-features", str(files["features"]), "--labels", str(files["labels"]),
                "--train", str(files["train"]), "--val", str(files["val"]), "--test", str(files["test"]),
                "--halo-features", halo_features, "--json"]
        d, wall, peak = run_phase(["-c", CLI_SCRIPT, *args], work, f"partition-{method}")
        manifest = json.loads((folder / "manifest.json").read_text())
        # The partitioner and the writer each reset the kernel's peak (VmHWM) when they start, which also resets
        # what wait4 reports: the phase's peak is the largest of the three readings.
        peak = max(peak, d["peak_rss_mb"], manifest["write_peak_rss_mb"])
        report["num_edges_directed"] = manifest["num_edges_owned_rows"]
        report["phases"][f"partition-{method}"] = {
            "wall_s": wall, "peak_rss_mb": peak, "disk_mb": disk_mb(folder), "stream_s": d["elapsed_s"],
            "lines_per_s": d["edges_per_s"], "stream_peak_rss_mb": d["peak_rss_mb"],
            "write_phase_s": manifest["write_phase_s"], "write_peak_rss_mb": manifest["write_peak_rss_mb"],
            "replication_factor": manifest["replication_factor"],
            "replication_factor_lines": d["replication_factor"], "owner_balance": d["owner_balance"],
            "part_local_max": max(q["num_local"] for q in manifest["parts"]),
            "part_edges_max": max(q["num_edges"] for q in manifest["parts"])}
        save()
        log(f"partition {method}: {wall:.1f} s (stream {d['elapsed_s']:.1f} s, folder {manifest['write_phase_s']}), "
            f"peak {peak:.0f} MiB, RF {manifest['replication_factor']:.3f}, folder {disk_mb(folder):.0f} MiB")
        t, wall, peak = run_phase(["-c", TRAIN_SCRIPT, str(folder), method, select, str(epochs), mode, eval_sample],
                                  work, f"train-{method}")
        report["phases"][f"train-{method}"] = {
            "wall_s": wall, "peak_rss_mb": peak, "run_s": t["wall_s"], "epoch_s": t["epoch_times"],
            "losses": t["losses"], "val_acc": t["accuracy_by_epoch"]["val"],
            "parts": [{k: q[k] for k in ("part", "owned", "local", "local_edges")} for q in t["parts"]]}
        save()
        log(f"train {method} on parts {select}: {wall:.1f} s (epochs {[round(x, 2) for x in t['epoch_times']]} s), "
            f"peak {peak:.0f} MiB, losses {[round(x, 4) for x in t['losses']]}")
        if not keep_folders:
            shutil.rmtree(folder, ignore_errors=True)
    n, e2 = report["num_nodes"], report["num_edges_directed"]
    csr = 8 * (n + 1) + 8 * e2
    report["metis_csr_mb"] = csr / 2**20
    report["peak_over_metis_csr"] = {k: v["peak_rss_mb"] * 2**20 / csr for k, v in report["phases"].items()}
    report["disk_total_mb"] = disk_mb(work)
    folders = [v["disk_mb"] for k, v in report["phases"].items() if k.startswith("partition-")]
    report["disk_peak_mb"] = report["phases"]["generate"]["disk_mb"] + (
        sum(folders) if keep_folders else max(folders, default=0.0))   # the input and the folders held at once
    save()
    return report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=100_000, help="vertices (default 100000: ~1.4M lines)")
    p.add_argument("--avg-degree", type=float, default=29.0, help="mean degree (lines = nodes * avg_degree / 2)")
    p.add_argument("--features", type=int, default=16, help="feature width (default 16)")
    p.add_argument("--parts", type=int, default=16)
    p.add_argument("--methods", default="spring,hdrf")
    p.add_argument("--train-parts", type=int, default=2, help="parts trained in turn (default 2)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--classes", type=int, default=172, help="label classes (papers100M: 172; the logits of a "
                                                            "part, num_local x classes, dominate full-batch memory)")
    p.add_argument("--minibatch", action="store_true",
                   help="train with catgnn.minibatch (GraphSAGE, fan-outs 25,10, batches of 512 inside each part, "
                        "read per batch from the folder)")
    p.add_argument("--eval-sample", choices=("full", "train"), default="full",
                   help="with --minibatch: evaluate in batches of full-neighbour blocks (default, exact; on this "
                        "power-law graph about a full-batch pass over each part per epoch) or with the training "
                        "fan-outs (sync.eval_sample)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--halo-features", choices=("copy", "reference"), default="copy",
                   help="each part's halo feature rows copied into it (default) or read from the input features "
                        "(the folder then holds N x F feature floats, not RF x N x F)")
    p.add_argument("--work", default=None, help="folder for the files (default: a temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the files")
    p.add_argument("--reuse-input", action="store_true",
                   help="use the input already generated in --work for the same graph (g.bin, its features, labels "
                        "and splits) instead of generating it again, and keep it at the end")
    args = p.parse_args(argv)
    errors = [f"--{k.replace('_', '-')} must be >= {lo}, got {v}" for k, v, lo in
              (("nodes", args.nodes, 2), ("parts", args.parts, 1), ("train_parts", args.train_parts, 1),
               ("epochs", args.epochs, 1), ("features", args.features, 1), ("classes", args.classes, 1)) if v < lo]
    if args.train_parts > args.parts:
        errors.append(f"--train-parts must be at most --parts={args.parts}, got {args.train_parts}")
    if errors:
        p.error("; ".join(errors))
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="scale-"))
    try:
        report = run(work, args.nodes, args.avg_degree, args.features, args.parts,
                     [m.strip() for m in args.methods.split(",") if m.strip()], args.train_parts, args.epochs,
                     args.seed, args.classes, "minibatch" if args.minibatch else "full", args.halo_features,
                     args.eval_sample, keep_folders=args.keep, reuse_input=args.reuse_input)
        print(json.dumps({k: v for k, v in report.items() if k != "phases"}, indent=1))
        print("phase                wall s   peak RSS MiB   disk MiB")
        for k, v in report["phases"].items():
            print(f"{k:<20} {v['wall_s']:>7.1f} {v['peak_rss_mb']:>14.0f} {v.get('disk_mb', 0):>10.0f}")
    finally:
        if not args.keep and not args.reuse_input:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
