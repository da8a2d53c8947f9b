"""Conformance of every registered sampling method (parametrised over ``SAMPLERS``), plus the keyed kernel."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from workbench._validation import ParamError
from workbench.sample import SAMPLERS, LocalSource, MiniBatch, NeighborSampler
from workbench.sample.base import block_samplers
from workbench.sample.keyed import CSRRows, sample_rows_keyed, stream_key
from workbench.testing import build_sampler, check_minibatch, edge_set, same_minibatch

METHODS = block_samplers()   # edge samplers (full-graph): tests/sample/test_psc.py
FANOUTS = [(3, 2), (-1, 4), (2, -1, 1), (-1,)]


@pytest.fixture
def graphs(small_sbm, random_graph):
    return {"sbm": small_sbm, "directed": random_graph(120, 600, seed=3, directed=True)}


def test_every_method_is_registered():
    assert {"neighbor", "dgl"} <= set(SAMPLERS)
    assert all(SAMPLERS[m].kind == "sample" for m in METHODS)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("fanouts", FANOUTS)
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("graph_name", ["sbm", "directed"])
def test_blocks_well_formed(graphs, method, fanouts, replace, graph_name):
    g = graphs[graph_name]
    sampler = build_sampler(method, fanouts=fanouts, replace=replace, seed=5)
    seeds = torch.arange(0, g.num_nodes, 7)
    mb = sampler.sample(seeds, LocalSource(g), epoch=1, step=2)
    assert isinstance(mb, MiniBatch)
    check_minibatch(mb, g, fanouts, replace)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("replace", [False, True])
def test_reproducible_with_the_same_seed_different_with_another(graphs, method, replace):
    g = graphs["sbm"]
    seeds = torch.arange(0, 200, 3)
    run = lambda seed, epoch=0, step=0: build_sampler(method, fanouts=(3, 2), replace=replace, seed=seed).sample(  # noqa: E731
        seeds, LocalSource(g), epoch=epoch, step=step)
    assert same_minibatch(run(1), run(1))
    assert edge_set(run(1)) != edge_set(run(2))
    assert edge_set(run(1)) != edge_set(run(1, epoch=1))
    assert edge_set(run(1)) != edge_set(run(1, step=1))


@pytest.mark.parametrize("method", METHODS)
def test_all_neighbours_and_empty_and_repeated_seeds(graphs, method):
    g = graphs["directed"]
    sampler = build_sampler(method, fanouts=(-1, -1))
    mb = sampler.sample(torch.tensor([5]), LocalSource(g))
    expected = set(g.indices[g.indptr[5]:g.indptr[6]].tolist())
    assert set(mb.blocks[1].src_gid[mb.blocks[1].edge_src].tolist()) == expected
    empty = sampler.sample(torch.zeros(0, dtype=torch.int64), LocalSource(g))
    assert empty.num_sampled_edges == 0 and empty.num_input_nodes == 0
    with pytest.raises(ParamError, match="'seeds' parameter of Sampler.sample must be unique"):
        sampler.sample(torch.tensor([1, 2, 1]), LocalSource(g))
    with pytest.raises(ParamError, match=r"must be global ids in \[0, 120\). Got ids in \[-1, 3\]"):
        sampler.sample(torch.tensor([3, -1]), LocalSource(g))
    # the id table is clean again after the error
    assert same_minibatch(sampler.sample(torch.tensor([5]), LocalSource(g)), mb)


@pytest.mark.parametrize("method", METHODS)
def test_config_rejects_bad_values_all_at_once(method):
    cls = SAMPLERS[method]
    with pytest.raises(ParamError) as info:
        cls.Config(fanouts=(0, -2), batch_size=0, seed=-1)
    msg = str(info.value)
    assert "3 invalid parameters" in msg
    assert "The 'fanouts' parameter of" in msg and "each -1 or an int >= 1. Got (0, -2) instead." in msg
    assert "The 'batch_size' parameter" in msg and "The 'seed' parameter" in msg
    with pytest.raises(ParamError, match="has no option 'fanout'"):
        SAMPLERS.build(method, fanout=(1,))
    assert cls.Config().with_strings({"fanouts": "15,10,5", "replace": "true"}).fanouts == (15, 10, 5)


def test_fanouts_follow_dgl_order(graphs):
    """fanouts[i] is the fan-out of blocks[i]; sampling starts at the seeds with the last entry."""
    g = graphs["sbm"]
    mb = NeighborSampler(fanouts=(-1, 1)).sample(torch.arange(10), LocalSource(g))
    assert mb.blocks[1].num_edges == int((g.in_degrees()[:10] > 0).sum())   # one per seed
    assert mb.blocks[0].num_edges == int(g.in_degrees()[mb.blocks[0].dst_gid].sum())  # all at the input


def test_to_dgl_blocks(graphs):
    pytest.importorskip("dgl")
    import dgl

    g = graphs["sbm"]
    mb = NeighborSampler(fanouts=(4, 3)).sample(torch.arange(20), LocalSource(g))
    for b, db in zip(mb.blocks, mb.to_dgl()):
        assert (db.num_src_nodes(), db.num_dst_nodes(), db.num_edges()) == (b.num_src, b.num_dst, b.num_edges)
        assert torch.equal(db.srcdata[dgl.NID], b.src_gid)
        s, d = db.edges()
        assert torch.equal(s, b.edge_src) and torch.equal(d, b.edge_dst)


def test_keyed_kernel_is_uniform():
    """5000 vertices with the same 10 in-neighbours: every neighbour is drawn about equally often, and every one
    of the C(10, 3) = 120 subsets appears (Floyd's algorithm is uniform over subsets)."""
    n, d, k = 5000, 10, 3
    csr = CSRRows(torch.arange(0, (n + 1) * d, d), torch.arange(d).repeat(n))
    e = sample_rows_keyed(csr, torch.arange(n), k, False, stream_key(0, 0, 0, 0))
    counts = np.bincount(e.src_gid.numpy(), minlength=d)
    expected, sd = n * k / d, (n * k / d * (1 - k / d)) ** 0.5
    assert np.all(np.abs(counts - expected) < 5 * sd), counts
    subsets = {tuple(sorted(r)) for r in e.src_gid.reshape(n, k).tolist()}
    assert len(subsets) == 120
    r = sample_rows_keyed(csr, torch.arange(n), k, True, stream_key(0, 0, 0, 0))
    counts = np.bincount(r.src_gid.numpy(), minlength=d)
    assert np.all(np.abs(counts - expected) < 5 * (expected * 0.9) ** 0.5), counts


def test_keyed_kernel_depends_only_on_the_vertex():
    """A vertex's sample is the same whichever frontier it is part of (what makes owner routing exact)."""
    from workbench.data import load_graph

    g = load_graph("sbm:num_nodes=200,num_blocks=4,avg_degree=8,num_features=16,seed=0")
    csr, key = CSRRows(g.indptr, g.indices), stream_key(3, 1, 2, 0)
    whole = sample_rows_keyed(csr, torch.arange(200), 3, False, key)
    part = sample_rows_keyed(csr, torch.tensor([150, 7]), 3, False, key)
    pick = lambda e, v: e.src_gid[e.dst_gid == v].tolist()  # noqa: E731
    assert pick(whole, 150) == pick(part, 150) and pick(whole, 7) == pick(part, 7)


def test_dgl_method_says_clearly_when_dgl_does_not_import(monkeypatch):
    import workbench.sample.samplers as samplers

    monkeypatch.setattr(samplers, "dgl_available", lambda: False)
    with pytest.raises(ParamError, match="'dgl' needs DGL"):
        SAMPLERS.build("dgl", fanouts=(2,))
