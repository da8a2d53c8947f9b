"""Benchmark: the CUDA sparse kernels of ``Â H`` against each other and against the memory-bandwidth bound.

Candidates: ``torch.sparse.mm`` on CSR (cuSPARSE) with int64 and int32 indices, and the compiled Triton
CSR kernel (:mod:`workbench.train._spmm_triton`) in several block shapes. Each is first checked against a
float64 reference on fresh random inputs (relative error, every output element written: the output is
poisoned with NaN first; the added-into form is checked too), then timed with CUDA events (median). The bound is the
fewest bytes the product must move (:meth:`workbench.train.kernels.SpmmCall.min_bytes`) over the copy
bandwidth measured in the same run. Needs a GPU and Triton::

    python benchmarks/spmm_gpu.py
    python benchmarks/spmm_gpu.py --graphs sbm:num_nodes=100000,num_blocks=16,avg_degree=40,seed=0 --widths 16,64
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from full_graph import copy_bandwidth, gcn_matrix, timed  # noqa: E402

from workbench.data import load_graph  # noqa: E402
from workbench.train.kernels import SpmmCall  # noqa: E402

GRAPHS = ("sbm:num_nodes=100000,num_blocks=16,avg_degree=40,num_features=8,seed=0",
          "rmat:scale=20,edge_factor=16,num_features=8,seed=0")
SHAPES = {"e16-r1-w2": (16, 1, 2), "e32-r1-w4": (32, 1, 4), "e32-r4-w4": (32, 4, 4), "e64-r1-w4": (64, 1, 4),
          "e16-r4-w2": (16, 4, 2), "e32-r8-w8": (32, 8, 8)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graphs", default=";".join(GRAPHS), help="graph specs separated by ';'")
    parser.add_argument("--widths", default="8,16,64,128")
    args = parser.parse_args(argv)
    from workbench.train import _spmm_triton as tri

    dev = torch.device("cuda")
    bw = copy_bandwidth(dev)
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e9:.0f} GB/s (read + write, measured)")
    tri.CONFIGS.update(SHAPES)
    best: dict = {}
    for spec in args.graphs.split(";"):
        graph = load_graph(spec)
        a, _ = gcn_matrix(graph)
        crow, col, val = (t.to(dev) for t in (a.crow_indices(), a.col_indices(), a.values()))
        n, nnz = graph.num_nodes, int(col.numel())
        rows = torch.repeat_interleave(torch.arange(n, device=dev), crow.diff())
        a64 = torch.sparse_csr_tensor(crow, col, val, (n, n))
        a32 = torch.sparse_csr_tensor(crow.int(), col.int(), val, (n, n))
        deg = crow.diff()
        print(f"\n{spec}: {n} rows, {nnz} non-zeros, row length mean {nnz / n:.1f}, max {int(deg.max())}")
        for width in [int(w) for w in args.widths.split(",")]:
            h = torch.randn(n, width, device=dev)
            ref = torch.zeros(n, width, dtype=torch.float64, device=dev).index_add_(
                0, rows, h.double()[col] * val.double()[:, None])
            base = torch.randn(n, width, device=dev)
            cands = {"cuSPARSE int64": lambda: torch.sparse.mm(a64, h),
                     "cuSPARSE int32": lambda: torch.sparse.mm(a32, h)}
            for name in tri.CONFIGS:
                cands[f"triton {name}"] = (lambda name=name: tri.csr_spmm(crow, col, val, h, config=name))
            bound = SpmmCall(rows=n, cols=n, nnz=nnz, width=width, index_bytes=8, value_bytes=4,
                             accumulate=False, kernel="", device="cuda").min_bytes() / bw
            line = []
            for name, fn in cands.items():
                poison = torch.full((n, width), float("nan"), device=dev)   # the block the next output reuses
                del poison
                err = (fn().double() - ref).norm() / ref.norm()
                if name.startswith("triton"):   # the added-into form
                    out = base.clone()
                    tri.csr_spmm(crow, col, val, h, out=out, config=name[7:])
                    err = max(err, (out.double() - base.double() - ref).norm() / ref.norm())
                ok = bool(err < 1e-5)
                sec = timed(fn, dev, reps=20, warmup=3)
                line.append((sec, name, ok, float(err)))
            line.sort()
            for sec, name, ok, err in line:
                print(f"  width {width:4d} {name:22s} {sec * 1e3:8.3f} ms  {sec / bound:6.2f}x bound  "
                      f"rel err {err:.1e}{'' if ok else '  WRONG'}")
            fastest_ok = next(x for x in line if x[2])
            best.setdefault(spec, {})[width] = fastest_ok[1]
            cus = min(x[0] for x in line if x[1].startswith("cuSPARSE"))
            tr = min((x[0] for x in line if x[1].startswith("triton") and x[2]), default=float("nan"))
            print(f"  width {width:4d}: best Triton / best cuSPARSE = {tr / cus:.2f}")
    print("\nfastest correct kernel:", best)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
