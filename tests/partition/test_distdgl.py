"""DistDGL export round trip, checked with DGL itself."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from workbench._validation import ParamError
from workbench.partition import PartitionResult, export_distdgl, partition

try:
    import dgl
except Exception:  # not installed, or installed for another torch
    pytest.skip("DGL does not import", allow_module_level=True)
pytestmark = pytest.mark.dgl


def _graph_with_data(directed: bool, multigraph):
    g = multigraph(60, 200, directed=directed, seed=4, with_masks=True)
    feats = torch.arange(60 * 3, dtype=torch.float32).reshape(60, 3)
    return g.with_data(features=feats, labels=torch.arange(60) % 5)


@pytest.mark.parametrize("method,directed", [("metis", False), ("random", True), ("block", False)])
def test_round_trip_through_dgl_load_partition(tmp_path, monkeypatch, method, directed, multigraph):
    monkeypatch.setenv("DGL_DIST_DEBUG", "1")  # load_partition then verifies ids against the partition book
    g = _graph_with_data(directed, multigraph)
    r = partition(g, 3, method=method, seed=0)
    config = export_distdgl(g, r, tmp_path, graph_name="toy")
    meta = json.loads(config.read_text())
    assert meta["num_parts"] == 3 and meta["num_nodes"] == 60 and meta["num_edges"] == g.num_edges
    orig_nids = np.load(tmp_path / "orig_nids.npy")
    orig_eids = np.load(tmp_path / "orig_eids.npy")
    src, dst = (t.numpy() for t in g.edges())
    seen_edges = []
    for p in range(3):
        part_g, node_feats, edge_feats, gpb, name, ntypes, etypes = dgl.distributed.load_partition(str(config), p)
        assert name == "toy" and gpb.num_partitions() == 3
        inner = part_g.ndata["inner_node"].bool()
        global_new = part_g.ndata[dgl.NID][inner]
        # the inner vertices are exactly the workbench's part p
        assert sorted(orig_nids[global_new.numpy()].tolist()) == r.inner_nodes(p).tolist()
        assert torch.equal(part_g.ndata["orig_id"][inner], torch.from_numpy(orig_nids[global_new.numpy()]))
        assert (gpb.nid2partid(global_new) == p).all()
        # the halo is the workbench's 1-hop halo
        assert sorted(part_g.ndata["orig_id"][~inner].tolist()) == r.halo_nodes(p).tolist()
        # features travel with their vertices
        inner_orig = part_g.ndata["orig_id"][inner]
        assert torch.equal(node_feats["_N/feat"], g.features[inner_orig])
        assert torch.equal(node_feats["_N/train_mask"].bool(), g.train_mask[inner_orig])
        # every local edge is an original edge into this part
        ls, ld = part_g.edges()
        os_, od = part_g.ndata["orig_id"][ls], part_g.ndata["orig_id"][ld]
        eids = part_g.edata["orig_id"]
        assert (src[eids.numpy()] == os_.numpy()).all() and (dst[eids.numpy()] == od.numpy()).all()
        assert (r.node_part[od] == p).all()
        assert (gpb.eid2partid(part_g.edata[dgl.EID]) == p).all()
        assert torch.equal(torch.from_numpy(orig_eids[part_g.edata[dgl.EID].numpy()]), eids)
        seen_edges.append(eids)
    assert sorted(torch.cat(seen_edges).tolist()) == list(range(g.num_edges))


def test_vertex_cut_cannot_be_exported(tmp_path, karate):
    r = PartitionResult(graph=karate, num_parts=2, method="hand-made", edge_part=torch.arange(156) % 2)
    with pytest.raises(ParamError, match="edge-cut partition"):
        export_distdgl(karate, r, tmp_path)
