"""Benchmark: the workbench's full-graph GCN epoch (1 rank) against PyG's ``GCNConv``, the baseline that runs
where DGL does not import (the GPU machines have torch 2.11 and PyG 2.8, no DGL).

Same graph, same model (2-layer GCN, symmetric normalisation with self-loops, Adam), one process; PyG's
``edge_index`` comes from ``graph.to_pyg()``. Epoch times exclude the first (warm-up) epoch; the ratio is
from this one run. A separate file so ``benchmarks/full_graph.py`` (DGL baseline, rank sweep) stays as is.

Usage::

    python benchmarks/full_graph_pyg.py --quick
    python benchmarks/full_graph_pyg.py --device cuda
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from full_graph import DEFAULT_GRAPH, QUICK_GRAPH, _steady, run_workbench  # noqa: E402

from workbench.data import load_graph  # noqa: E402


def run_pyg(graph, args) -> float:
    """Mean epoch seconds of PyG ``GCNConv`` full-graph training on ``graph.to_pyg()``."""
    from torch_geometric.nn import GCNConv

    device = torch.device(args.device)
    data = graph.to_pyg().to(device)
    dims = [graph.num_features] + [args.hidden] * (args.layers - 1) + [graph.num_classes]
    # cached=True: PyG normalises the adjacency once, as the workbench builds its Â once per run
    convs = torch.nn.ModuleList(GCNConv(dims[i], dims[i + 1], cached=True) for i in range(args.layers)).to(device)
    opt = torch.optim.Adam(convs.parameters(), lr=0.01)
    train = (data.train_mask & (data.y >= 0))
    times = []
    for _ in range(args.epochs):
        t0 = time.perf_counter()
        h = data.x
        for i, conv in enumerate(convs):
            h = conv(h, data.edge_index)
            if i < len(convs) - 1:
                h = torch.relu(h)
        loss = torch.nn.functional.cross_entropy(h[train], data.y[train])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return _steady(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", default=None)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--partition", default="metis")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    spec = args.graph or (QUICK_GRAPH if args.quick else DEFAULT_GRAPH)
    graph = load_graph(spec)
    print(f"graph {spec}: {graph.num_nodes} vertices, {graph.num_edges} stored edges; device {args.device}")
    pyg_s = run_pyg(graph, args)
    wb_s = _steady(run_workbench(graph, 1, args)["epoch_times"])
    print(f"PyG GCNConv        {pyg_s:8.3f} s/epoch")
    print(f"workbench, 1 rank  {wb_s:8.3f} s/epoch  ({wb_s / pyg_s:.2f}x PyG)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
