"""The inclusion-probability cache (PSC-GCN): validated probabilities, semi-dynamic refresh counted."""

from __future__ import annotations

import pytest
import torch

from workbench._validation import ParamError
from workbench.cache import CACHES, ID_BYTES
from workbench.testing import run_ranks
from workbench.testing.cache_harness import NUM_NODES, WIDTH, make_store, node_part_for, table


def test_refresh_fetches_only_entering_rows_as_cache_refresh():
    node_part, feats = node_part_for(2), table()
    p1 = torch.linspace(0, 1, NUM_NODES)            # highest ids first
    p2 = torch.linspace(1, 0, NUM_NODES)            # lowest ids first

    def body(comm):
        cached = CACHES.build("inclusion", ratio=0.5).wrap(make_store(comm, node_part, feats), probabilities=p1)
        first = cached.cached_gid
        comm.set_epoch(1)
        moved = cached.refresh(probabilities=p2)
        second = cached.cached_gid
        ids = torch.arange(NUM_NODES)
        ok = torch.equal(cached.pull(ids), feats)
        st = cached.epoch_stats(1)
        return first, second, moved, ok, st, comm.counter.bytes_by_kind(1), cached.capacity

    for rank, (first, second, moved, ok, st, by_kind, cap) in enumerate(run_ranks(2, body)):
        others = (node_part != rank).nonzero().flatten()
        assert first.tolist() == sorted(others[-cap:].tolist()) and second.tolist() == others[:cap].tolist()
        entered = len(set(second.tolist()) - set(first.tolist()))
        assert moved == entered and st.refresh_bytes == entered * (WIDTH * 4 + ID_BYTES)
        assert ok and st.hits == cap
        assert by_kind.get("cache_refresh", 0) > 0  # the sum over ranks is checked exactly below


def test_refresh_traffic_is_counted_at_the_transport():
    node_part, feats = node_part_for(3), table()

    def body(comm):
        cached = CACHES.build("inclusion", ratio=0.3).wrap(make_store(comm, node_part, feats),
                                                           probabilities=torch.rand(NUM_NODES, generator=torch.Generator().manual_seed(0)))
        comm.set_epoch(1)
        cached.refresh(probabilities=torch.rand(NUM_NODES, generator=torch.Generator().manual_seed(1)))
        return cached.epoch_stats(1).refresh_bytes, comm.counter.bytes_by_kind(1).get("cache_refresh", 0)

    results = run_ranks(3, body)
    assert sum(r for r, _ in results) == sum(b for _, b in results) > 0


@pytest.mark.parametrize("bad", [torch.ones(5), torch.full((NUM_NODES,), 2.0), None, "x"])
def test_probabilities_are_validated(bad):
    node_part, feats = node_part_for(1), table()

    def body(comm):
        with pytest.raises(ParamError, match="The 'probabilities' parameter of InclusionCache.wrap must be"):
            CACHES.build("inclusion", ratio=0.5).wrap(make_store(comm, node_part, feats), probabilities=bad)
        return True

    assert run_ranks(1, body) == [True]


def test_candidates_restrict_what_is_cached_and_set_the_capacity():
    node_part, feats = node_part_for(2), table()
    probs = torch.linspace(0, 1, NUM_NODES)

    def body(comm):
        others = (node_part != comm.rank).nonzero().flatten()
        boundary = others[::3]  # e.g. the rank's 1-hop remote neighbours
        cached = CACHES.build("inclusion", ratio=0.5).wrap(make_store(comm, node_part, feats), probabilities=probs,
                                                           candidates=boundary)
        with pytest.raises(ParamError, match="The 'candidates' parameter of NoCache.wrap must be ids rank"):
            CACHES.build("none").wrap(make_store(comm, node_part, feats), candidates=node_part.new_tensor([
                int((node_part == comm.rank).nonzero()[0])]))
        return boundary, cached.cached_gid, cached.capacity

    for boundary, cached, cap in run_ranks(2, body):
        assert cap == boundary.numel() // 2 and cached.tolist() == boundary[-cap:].tolist()


def test_from_graph():
    import workbench as wb
    from workbench.cache import FeatureStore
    g = wb.load_graph("karate")
    node_part = torch.arange(g.num_nodes) % 2

    def body(comm):
        store = FeatureStore.from_graph(g, node_part, comm)
        return torch.equal(store.pull(torch.arange(g.num_nodes)), g.features)

    assert run_ranks(2, body) == [True, True]
