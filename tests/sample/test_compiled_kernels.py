"""The compiled sampling kernels draw exactly what the numpy definition draws (the same edges, in the same
order), and build the same blocks: every runner and every machine without numba trains the same run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from workbench.sample import base, keyed
from workbench.sample.base import SampledEdges, build_block
from workbench.sample.keyed import CSRRows, sample_rows_keyed, stream_key

pytest.importorskip("numba")


@pytest.fixture(scope="module")
def power_law():
    from workbench.data import load_graph

    return load_graph("products-like:num_nodes=3000,seed=0")


def _both(slot: list, fn):
    slot[:] = [None, None]    # the numpy passes
    try:
        reference = fn()
    finally:
        slot.clear()          # the compiled kernel again
    return reference, fn()


@pytest.fixture(params=["parallel", "serial"])
def kernel(request, monkeypatch):
    """The frontier-parallel kernel (trainers) and the serial one (ByteGNN's forked sampling workers)."""
    monkeypatch.setattr(keyed, "_PARALLEL", [request.param == "parallel"])
    return request.param


@pytest.mark.parametrize("fanout,replace", [(-1, False), (1, False), (5, False), (15, False), (40, False),
                                            (5, True), (15, True)])
def test_compiled_sampler_draws_the_numpy_definition(power_law, fanout, replace, kernel):
    rng = np.random.default_rng(fanout + 1 + 100 * replace)
    for trial in range(5):
        gid = torch.from_numpy(rng.permutation(power_law.num_nodes)[: int(rng.integers(1, 2000))])
        key = stream_key(7, trial, 3, 1)
        csr = CSRRows(power_law.indptr, power_law.indices)
        a, b = _both(keyed._COMPILED, lambda: sample_rows_keyed(csr, gid, fanout, replace, key))
        assert torch.equal(a.src_gid, b.src_gid) and torch.equal(a.dst_gid, b.dst_gid)


def test_compiled_sampler_on_owned_rows(power_law, kernel):
    """An owner's rows (``row_of_gid``): the kernel reads the rows the gids map to."""
    owned = torch.arange(0, power_law.num_nodes, 2)
    deg = power_law.indptr[owned + 1] - power_law.indptr[owned]
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(deg, 0)])
    indices = torch.cat([power_law.indices[power_law.indptr[v]:power_law.indptr[v + 1]] for v in owned.tolist()])
    row_of_gid = torch.full((power_law.num_nodes,), -1, dtype=torch.int64)
    row_of_gid[owned] = torch.arange(owned.numel())
    csr = CSRRows(indptr, indices, row_of_gid=row_of_gid, row_gid=owned)
    a, b = _both(keyed._COMPILED, lambda: sample_rows_keyed(csr, owned[::3], 10, False, stream_key(1, 2, 3, 0)))
    assert torch.equal(a.src_gid, b.src_gid) and torch.equal(a.dst_gid, b.dst_gid)


def test_compiled_relabelling_builds_the_same_block():
    rng = np.random.default_rng(0)
    dst = torch.from_numpy(rng.permutation(5000)[:300])
    edges = SampledEdges(src_gid=torch.from_numpy(rng.integers(0, 5000, 3000)), dst_gid=dst.repeat_interleave(10))
    a, b = _both(base._RELABEL, lambda: build_block(dst, edges, 5000))
    for field in ("src_gid", "edge_src", "edge_dst"):
        assert torch.equal(getattr(a, field), getattr(b, field)), field
    assert a.num_dst == b.num_dst == 300
    with pytest.raises(Exception, match="unique global ids"):
        build_block(torch.tensor([4, 4]), edges, 5000)
    assert build_block(dst, edges, 5000).src_gid[:300].tolist() == dst.tolist()   # the table is clean again
