"""FeatureStore: DistDGL's KVStore pull, rows in the asked order, bytes counted at the transport."""

from __future__ import annotations

import pytest
import torch

from workbench._validation import ParamError
from workbench.cache import ID_BYTES, FeatureStore, PullBuffers, RangeBook
from workbench.partition.base import Relabeling
from workbench.testing import run_ranks
from workbench.testing.cache_harness import NUM_NODES, WIDTH, make_store, node_part_for, requests, table


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_pull_rows_and_bytes(world_size):
    node_part, feats = node_part_for(world_size), table()

    def body(comm):
        store = make_store(comm, node_part, feats)
        buffers = PullBuffers(2, WIDTH)
        ok, fetched = True, 0
        for step in range(6):
            ids = requests(comm.rank, step)
            if step % 2:   # into a reused buffer (a trainer's pulls): the same rows, written where asked
                out = buffers.take(ids.numel())
                rows = store.pull(ids, out=out)
                ok &= rows.data_ptr() == out.data_ptr()
            else:
                rows = store.pull(ids)
            ok &= rows.shape == (ids.numel(), WIDTH) and torch.equal(rows, feats[ids])
            remote = ids[node_part[ids] != comm.rank]
            fetched += torch.unique(remote).numel()  # a remote id asked twice travels once
        return ok, fetched, comm.counter.bytes_by_kind()

    results = run_ranks(world_size, body)
    assert all(ok for ok, _, _ in results)
    rows = sum(f for _, f, _ in results)
    assert sum(b.get("feature", 0) for *_, b in results) == rows * WIDTH * 4
    assert sum(b.get("feature_req", 0) for *_, b in results) == rows * ID_BYTES
    if world_size == 1:
        assert rows == 0


def test_only_local_or_only_empty():
    node_part, feats = node_part_for(2), table()

    def body(comm):
        store = make_store(comm, node_part, feats)
        mine = store.owned_gid[:5]
        a = store.pull(mine)
        b = store.pull([])
        return torch.equal(a, feats[mine]), tuple(b.shape), comm.counter.bytes_by_kind()

    for ok, shape, by_kind in run_ranks(2, body):
        assert ok and shape == (0, WIDTH)
        assert sum(by_kind.values()) == 0


def test_range_partition_book_of_a_relabeling():
    node_part = node_part_for(3)
    relab = Relabeling.from_parts(node_part, 3)
    feats_new = table()[relab.old_of_new]  # rows in new-id order

    def body(comm):
        book = RangeBook.from_relabeling(relab)
        owned = book.owned(comm.rank)
        store = FeatureStore(owned, feats_new[owned], relab, comm)
        ids = torch.tensor([0, NUM_NODES - 1, 7, 7, 30])
        return torch.equal(store.pull(ids), feats_new[ids])

    assert all(run_ranks(3, body))


def test_bad_input_is_refused():
    node_part, feats = node_part_for(2), table()

    def body(comm):
        owned = (node_part == comm.rank).nonzero().flatten()
        with pytest.raises(ParamError, match="The 'features' parameter of FeatureStore"):
            FeatureStore(owned, feats[:3], node_part, comm)
        with pytest.raises(ParamError, match="The 'owned_gid' parameter of FeatureStore must be ids owned by rank"):
            FeatureStore((node_part != comm.rank).nonzero().flatten(), feats[owned], node_part, comm)
        store = FeatureStore(owned, feats[owned], node_part, comm)
        with pytest.raises(ParamError, match=r"The 'gids' parameter of FeatureStore.pull must be global ids in \[0, 60\)"):
            store.pull([NUM_NODES])
        return True

    assert all(run_ranks(2, body))
