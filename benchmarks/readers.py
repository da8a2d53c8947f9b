"""Benchmark: reading a 10M-line edge list with the workbench against ``pandas.read_csv`` and ``pyarrow.csv``,
and a GraphSAINT folder of the same graph.

Every reader runs in a fresh process (so peak RSS is its own), on the same file, in one run; rows/s and the
peak resident memory above the process's baseline after imports are printed, with ratios to pandas:

* ``workbench read_edge_list``: the full reader (comment and separator handling, id checks, the CSR build);
* ``pandas.read_csv``: ``sep=" ", header=None, dtype=int64`` to two NumPy columns (no checks, no CSR);
* ``pyarrow.csv.read_csv``: multi-threaded parse to an Arrow table (no checks, no CSR);
* ``workbench GraphSAINT folder``: ``adj_full.npz`` (the same edges, CSR) + ``feats.npy`` + the JSON maps,
  through :func:`workbench.data.folders.read_saint_folder` (header checks, ``allow_pickle=False``).

Usage::

    python benchmarks/readers.py                 # 10M lines, 1M vertices
    python benchmarks/readers.py --lines 1000000 # smaller
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _one(reader: str, path: str) -> None:
    """Child process: import, note the baseline RSS, read, print seconds and peak RSS above the baseline."""
    import numpy as np

    if reader == "workbench":
        from workbench.data.readers import read_edge_list
    elif reader == "saint":
        from workbench.data.folders import read_saint_folder
    elif reader == "pandas":
        import pandas as pd
    else:
        import pyarrow.csv as pacsv
    base = _rss_kb()
    t0 = time.perf_counter()
    if reader == "workbench":
        rows = read_edge_list(path, progress=False).num_edges
    elif reader == "saint":
        rows = read_saint_folder(path).num_edges
    elif reader == "pandas":
        df = pd.read_csv(path, sep=" ", header=None, dtype=np.int64, engine="c")
        rows = len(df[0].to_numpy())
    else:
        table = pacsv.read_csv(path, read_options=pacsv.ReadOptions(autogenerate_column_names=True),
                               parse_options=pacsv.ParseOptions(delimiter=" "))
        rows = table.num_rows
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"rows": rows, "seconds": seconds, "peak_mb": (peak - base) / 1024}))


def _write_inputs(folder: Path, lines: int, num_nodes: int) -> tuple[Path, Path]:
    import numpy as np
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    src = rng.integers(0, num_nodes, lines)
    dst = rng.integers(0, num_nodes, lines)
    import pandas as pd

    text = folder / "edges.txt"
    pd.DataFrame({"s": src, "d": dst}).to_csv(text, sep=" ", header=False, index=False, chunksize=1_000_000)
    saint = folder / "saint"
    saint.mkdir()
    adj = sp.csr_matrix((np.ones(lines, np.float32), (src, dst)), shape=(num_nodes, num_nodes))
    adj.sum_duplicates()
    sp.save_npz(saint / "adj_full.npz", adj, compressed=False)
    np.save(saint / "feats.npy", rng.standard_normal((num_nodes, 8)).astype(np.float32))
    labels = rng.integers(0, 10, num_nodes)
    (saint / "class_map.json").write_text(json.dumps({str(i): int(c) for i, c in enumerate(labels)}))
    perm = rng.permutation(num_nodes).tolist()
    a, b = int(0.6 * num_nodes), int(0.8 * num_nodes)
    (saint / "role.json").write_text(json.dumps({"tr": perm[:a], "va": perm[a:b], "te": perm[b:]}))
    return text, saint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=10_000_000)
    parser.add_argument("--num-nodes", type=int, default=1_000_000)
    parser.add_argument("--one", nargs=2, metavar=("READER", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        _one(*args.one)
        return
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TQDM_DISABLE": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        text, saint = _write_inputs(Path(tmp), args.lines, args.num_nodes)
        size_mb = text.stat().st_size / 2 ** 20
        print(f"{args.lines:,} lines ({size_mb:.0f} MiB), {args.num_nodes:,} vertices; inputs written in "
              f"{time.perf_counter() - t0:.1f} s")
        results = {}
        import importlib.util

        for reader, path in (("pandas", text), ("pyarrow", text), ("workbench", text), ("saint", saint)):
            if reader == "pyarrow" and importlib.util.find_spec("pyarrow") is None:
                print("pyarrow is not installed in this environment: its row is skipped")
                continue
            out = subprocess.run([sys.executable, __file__, "--one", reader, str(path)], env=env, check=True,
                                 capture_output=True, text=True).stdout
            results[reader] = json.loads(out.strip().splitlines()[-1])
        base = results["pandas"]["seconds"]
        names = {"pandas": "pandas.read_csv", "pyarrow": "pyarrow.csv.read_csv",
                 "workbench": "workbench read_edge_list", "saint": "workbench GraphSAINT folder"}
        print(f"{'reader':30s} {'seconds':>8s} {'rows/s':>12s} {'vs pandas':>10s} {'peak MB':>8s}")
        for reader, r in results.items():
            print(f"{names[reader]:30s} {r['seconds']:8.2f} {r['rows'] / r['seconds']:12,.0f} "
                  f"{r['seconds'] / base:9.2f}x {r['peak_mb']:8.0f}")
        print("(seconds: lower is better; 'vs pandas' = time / pandas time; the GraphSAINT row reads the same "
              "edges deduplicated, plus features, labels and the split)")


if __name__ == "__main__":
    main()
