"""HP-GCN (Demirci et al.): the halo exchange on a hypergraph partition moves exactly km1 rows per layer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recipes import hp_gcn
from tests.recipes.test_recipes import _run
from workbench.data import load_graph
from workbench.partition import partition
from workbench.partition.volume import comm_rows
from workbench.layout.halo import build_halo_plans

SPEC = "sbm:num_nodes=300,num_blocks=4,avg_degree=6,num_features=8,seed=0"


@pytest.mark.parametrize("directed", [False, True])
def test_halo_send_sets_are_the_column_net_communication_sets(directed):
    g = load_graph(SPEC)
    if directed:   # keep one direction of every edge: true column nets of a directed Â
        src, dst = g.edges()
        keep = src < dst
        g = type(g).from_edges(src[keep], dst[keep], g.num_nodes, directed=True)
    r = partition(g, 3, method="hypergraph", seed=0)
    comm = comm_rows(g, r.node_part, 3)
    plans = build_halo_plans(g, r.node_part, 3)
    sent = np.array([[len(t) for t in p.send_local_nid] for p in plans])
    assert (sent == comm).all() and comm.sum() == r.stats["km1"]
    assert sum(p.num_halo for p in plans) == r.stats["km1"]


def test_hp_gcn_bytes_per_epoch_equal_the_volume_formula(tmp_path):
    cfg = hp_gcn.recipe(graph=SPEC, epochs=3, model={"hidden": 8})
    summary = _run(cfg, workers=3, out=tmp_path)
    g = load_graph(SPEC)
    r = partition(g, 3, method="hypergraph", seed=0)
    dims = [g.num_features, 8, g.num_classes]
    assert summary["bytes_per_epoch"] == hp_gcn.fold_bytes_per_epoch(r.stats["km1"], dims)
    assert summary["bytes_per_epoch"] == summary["predicted_bytes_per_epoch"]
    assert hp_gcn.paper_bytes_per_epoch(r.stats["km1"], dims) > summary["bytes_per_epoch"]
    gp = _run(hp_gcn.rp_baseline(graph=SPEC, epochs=3, model={"hidden": 8}), workers=3, out=tmp_path / "rp")
    assert summary["bytes_per_epoch"] < gp["bytes_per_epoch"]
    assert summary["losses"][-1] == pytest.approx(gp["losses"][-1], rel=1e-4)   # same model, any partition


def test_batch_plans_move_the_induced_batch_km1():
    from workbench.partition.volume import column_nets, induced_batch_volume, sample_induced_batches

    g = load_graph(SPEC)
    r = partition(g, 4, method="stochastic-hypergraph", batch_size=30, num_batches=20, seed=0)
    h = column_nets(g)
    for batch in sample_induced_batches(g.num_nodes, 30, 5, seed=7):
        _, plans, rows = hp_gcn.batch_plans(g, r.node_part, torch.from_numpy(batch), 4)
        assert rows == induced_batch_volume(h, r.node_part, batch, 4)
        assert rows == sum(sum(p.send_counts) for p in plans)


def test_transform_first_variant_moves_the_section_3_7_bytes(tmp_path):
    g = load_graph(SPEC)
    r = partition(g, 3, method="hypergraph", seed=0)
    dims = [g.num_features, 8, g.num_classes]
    printed = _run(hp_gcn.recipe(graph=SPEC, epochs=3, model={"hidden": 8}), workers=3, out=tmp_path / "a")
    first = _run(hp_gcn.transform_first(graph=SPEC, epochs=3, model={"hidden": 8}), workers=3, out=tmp_path / "b")
    assert first["bytes_per_epoch"] == hp_gcn.transform_first_bytes_per_epoch(r.stats["km1"], dims)
    assert first["bytes_per_epoch"] < printed["bytes_per_epoch"]
    assert first["losses"] == pytest.approx(printed["losses"], rel=1e-4)   # the order changes bytes, not the model
