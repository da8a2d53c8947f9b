"""ByteGNN's graph store: owners-mode batches equal whole-graph batches, bytes are counted exactly, a worker holds
its part only, and the servers close after a run (also a failed one)."""

from __future__ import annotations

import threading
from collections import defaultdict

import numpy as np
import pytest
import torch

from workbench.communicate.base import TrafficCounter
from workbench.sample import NeighborSampler
from workbench.schedule import SCHEDULERS
from workbench.schedule.graphstore import GraphStoreError, GraphStoreServer, PartStore

FANOUTS = (3, 4)
BATCHES = [(s, torch.arange(s * 25, s * 25 + 25)) for s in range(4)]   # seeds of both parts in every batch


def _parts(g, num_parts=2):
    node_part = torch.arange(g.num_nodes) % num_parts   # most in-neighbours are remote
    return node_part, [PartStore.of(g, node_part, r) for r in range(num_parts)]


@pytest.fixture
def two_ranks(small_sbm):
    """Two ranks' part stores with their servers up (addresses exchanged as at setup)."""
    sampler = NeighborSampler(fanouts=FANOUTS, seed=4)
    node_part, parts = _parts(small_sbm)
    servers = [GraphStoreServer(p, sampler._kernel) for p in parts]
    for p in parts:
        p.addresses = [s.address for s in servers]
    yield sampler, node_part, parts
    for s in servers:
        s.close()


def _run(source, sampler, counter=None, **options):
    with SCHEDULERS.build("asap", workers=2, chunk_size=7, **options).pipeline(sampler, source, counter) as pipe:
        pipe.start_epoch(3, BATCHES)
        got = [pipe.get(s) for s, _ in BATCHES]
        pipe.end_epoch()
    return got


def test_owners_batches_equal_whole_graph_batches(small_sbm, two_ranks):
    sampler, _, parts = two_ranks
    ref = _run(small_sbm, sampler)
    for part in parts:
        for a, b in zip(_run(part, sampler), ref):
            assert torch.equal(a.minibatch.input_gid, b.minibatch.input_gid)
            for x, y in zip(a.minibatch.blocks, b.minibatch.blocks):
                assert x.num_dst == y.num_dst and torch.equal(x.src_gid, y.src_gid)
                assert torch.equal(x.edge_src, y.edge_src) and torch.equal(x.edge_dst, y.edge_dst)
            assert np.array_equal(a.features[0], b.features[0])


def test_bytes_equal_the_volume_of_the_remote_reads(small_sbm, two_ranks):
    sampler, node_part, parts = two_ranks
    rank, width = 1, small_sbm.num_features
    counter = TrafficCounter()
    got = _run(parts[rank], sampler, counter)
    want: dict = defaultdict(int)
    for b in got:
        mb = b.minibatch
        for layer, blk in enumerate(mb.blocks):
            dst = blk.src_gid[:blk.num_dst]
            edge_dst = blk.src_gid[blk.edge_dst]
            want[(rank, 0, "sample_req", layer)] += 8 * int((node_part[dst] != rank).sum())
            want[(0, rank, "sample_resp", layer)] += 16 * int((node_part[edge_dst] != rank).sum())
        remote = int((node_part[mb.input_gid] != rank).sum())
        want[(rank, 0, "feature_req", -1)] += 8 * remote
        want[(0, rank, "feature", -1)] += remote * width * 4
    have = {(t.src_rank, t.dst_rank, t.kind, t.layer): t.bytes for t in counter.records()}
    assert all(t.epoch == 3 for t in counter.records())
    assert have == dict(want) and min(have.values()) > 0


def _probe(state, payload):
    """What a worker holds (a custom operator, sent to a worker by hand)."""
    return state.rows.num_rows, state.rows.indices.numel(), state.features.shape, type(state.store).__name__


def test_a_worker_holds_its_part_only(small_sbm, two_ranks):
    from workbench.schedule import LogicalDAG, Pipeline, AsapPolicy

    sampler, node_part, parts = two_ranks
    owned = int((node_part == 0).sum())
    with Pipeline(LogicalDAG(sampler, operators={"probe": _probe}), parts[0], AsapPolicy(), workers=1) as pipe:
        pipe._conns[0].send(((0, 0), "probe", {}))
        _key, ok, (rows, edges, feats, store), _s, traffic = pipe._conns[0].recv()
    assert ok and traffic == {} and store == "GraphStoreClient"
    assert rows == owned < small_sbm.num_nodes and feats == (owned, small_sbm.num_features)
    assert edges == int(small_sbm.in_degrees()[node_part == 0].sum()) < small_sbm.num_edges


def test_a_failed_request_raises_with_the_owners_traceback(two_ranks):
    sampler, _, parts = two_ranks
    client = parts[0].client()
    parts[0].node_part = parts[0].node_part.copy()
    parts[0].node_part[:] = 1                  # a wrong partition book: rank 1 is asked for ids it does not own
    with pytest.raises(GraphStoreError) as info:
        client.fetch(np.array([0, 2]))
    assert info.value.owner == 1 and "does not own" in info.value.remote_traceback
    client.close()


def test_graph_store_is_validated():
    from workbench._validation import ParamError

    with pytest.raises(ParamError, match="'graph_store' parameter .* Got 'remote' instead"):
        SCHEDULERS.build("fixed-depth", graph_store="remote")


SMALL = dict(graph="sbm:num_nodes=300,num_blocks=4,avg_degree=6,num_features=8,seed=0", epochs=2, hidden=8,
             batch_size=32, num_parts=2)


@pytest.fixture
def servers(monkeypatch):
    """Every graph-store server a run starts."""
    made = []
    init = GraphStoreServer.__init__

    def record(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(GraphStoreServer, "__init__", record)
    return made


def _closed(made):
    return all(not s.alive and s._listen.fileno() == -1 and not s._conns for s in made) and not [
        t for t in threading.enumerate() if t.name.startswith("graph-store")]


def test_a_two_rank_run_counts_distdgls_bytes_and_closes_its_servers(servers):
    from recipes.bytegnn import recipe
    from workbench.runtime import launch

    cfg = recipe(**SMALL).with_strings({"schedule.workers": "1"})
    owners = launch(cfg, runner="local", workers=2, out=None).wait(timeout=300)
    assert len(servers) == 2 and _closed(servers) and sum(s.requests for s in servers) > 0
    local = launch(cfg.with_strings({"schedule.graph_store": "local"}), runner="local", workers=2,
                   out=None).wait(timeout=300)
    inline = launch(cfg.replace(schedule=None), runner="local", workers=2, out=None).wait(timeout=300)
    assert owners["losses"] == local["losses"] == inline["losses"]
    assert min(owners["sample_bytes"]) > 0 and min(owners["feature_bytes"]) > 0
    assert owners["sample_bytes"] == inline["sample_bytes"] and owners["feature_bytes"] == inline["feature_bytes"]
    assert local["sample_bytes"] == local["feature_bytes"] == [0, 0]


def test_servers_close_when_the_run_raises(servers, monkeypatch):
    from recipes.bytegnn import recipe
    from workbench.runtime import launch
    from workbench.train.minibatch import MiniBatchSteps

    forward = MiniBatchSteps.forward

    def fail(self, batch):
        if self.epoch == 1 and self.ctx.rank == 1:
            raise RuntimeError("boom")
        return forward(self, batch)

    monkeypatch.setattr(MiniBatchSteps, "forward", fail)
    handle = launch(recipe(**SMALL).with_strings({"schedule.workers": "1"}), runner="local", workers=2, out=None)
    with pytest.raises(Exception, match="boom"):
        handle.wait(timeout=300)
    assert len(servers) == 2 and _closed(servers)


def test_a_fresh_process_starts_its_workers_without_hanging():
    """numba's thread pool starts in the trainer before the fork: a worker starting it after the fork, in a
    process whose OpenMP pool ran, hung (the tutorial's first scheduled run, in a fresh kernel)."""
    import subprocess
    import sys

    code = ("from recipes.bytegnn import recipe\nfrom workbench.runtime import launch\n"
            "cfg = recipe(graph='products-like:num_nodes=1500,seed=0', num_parts=1, epochs=1, batch_size=64)\n"
            "print(launch(cfg.with_strings({'schedule.method': 'fixed-depth'}), runner='single', out=None).wait()"
            "['losses'])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("["), done.stderr[-2000:]
