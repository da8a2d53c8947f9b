"""Partitions written by ``workbench export-distdgl`` load in DGL's own ``DistGraph`` (standalone mode), and DGL's
distributed sampler runs on them and agrees with the workbench's all-neighbours sample.

DGL's standalone mode needs a one-part partition; the check runs in a subprocess because
``dgl.distributed.initialize`` sets process-wide state.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from workbench.cli import main

pytestmark = pytest.mark.dgl

_SCRIPT = textwrap.dedent("""
    import json, os, sys
    os.environ["DGL_DIST_MODE"] = "standalone"
    import torch, dgl
    dgl.distributed.initialize(None)
    g = dgl.distributed.DistGraph(sys.argv[2], part_config=sys.argv[1])
    seeds = torch.arange(0, g.num_nodes(), 5)
    all_in = dgl.distributed.sample_neighbors(g, seeds, -1)
    three = dgl.distributed.sample_neighbors(g, seeds, 3)
    s, d = all_in.edges()
    s3, d3 = three.edges()
    out = {"num_nodes": g.num_nodes(), "num_edges": g.num_edges(),
           "edges": sorted(zip(s.tolist(), d.tolist())), "three": list(zip(s3.tolist(), d3.tolist())),
           "feat_rows": g.ndata["feat"][seeds].shape[0]}
    print(json.dumps(out))
""")


def test_export_loads_in_distgraph_standalone_and_dgl_samples_it(tmp_path, capsys):
    pytest.importorskip("dgl")
    from workbench.data import load_graph
    from workbench.sample import LocalSource, NeighborSampler

    spec = "sbm:num_nodes=200,num_blocks=4,avg_degree=8,num_features=16,seed=0"
    assert main(["export-distdgl", spec, "--parts", "1", "--out", str(tmp_path), "--graph-name", "sbm"]) == 0
    capsys.readouterr()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "DGLBACKEND": "pytorch"}
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path / "sbm.json"), "sbm"], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    g = load_graph(spec)
    assert (got["num_nodes"], got["num_edges"]) == (g.num_nodes, g.num_edges)
    seeds = torch.arange(0, g.num_nodes, 5)
    assert got["feat_rows"] == seeds.numel()
    # one part: DistDGL's new ids are the original ids, so the all-neighbours samples must agree exactly
    block = NeighborSampler(fanouts=(-1,)).sample(seeds, LocalSource(g)).blocks[0]
    ours = sorted(zip(block.src_gid[block.edge_src].tolist(), block.dst_gid[block.edge_dst].tolist()))
    assert [tuple(e) for e in got["edges"]] == ours
    edges = set(ours)
    per_dst = torch.bincount(torch.tensor([d for _, d in got["three"]]), minlength=g.num_nodes)[seeds]
    assert torch.equal(per_dst, g.in_degrees()[seeds].clamp(max=3))
    assert all(tuple(e) in edges for e in got["three"])
