"""Sampler harness: what every mini-batch of a block sampler must satisfy.

:func:`check_minibatch` asserts the blocks of one :class:`~workbench.sample.base.MiniBatch` are well formed
(DGL layout, ids in range, every sampled edge exists, the right number of edges per destination);
:func:`same_minibatch` and :func:`edge_set` compare two samples; :func:`build_sampler` builds a registered
method and skips (``unittest.SkipTest``, which pytest reports as a skip) where its library does not import.

Example:
    >>> from workbench.sample import LocalSource
    >>> from workbench.testing import tiny_graph
    >>> g = tiny_graph(num_nodes=30)
    >>> mb = build_sampler("neighbor", fanouts=(3, 2), seed=1).sample(torch.arange(4), LocalSource(g))
    >>> check_minibatch(mb, g, (3, 2), replace=False)
    >>> len(mb.blocks), same_minibatch(mb, mb)
    (2, True)
"""

from __future__ import annotations

import unittest

import torch

from workbench.graph import Graph
from workbench.sample import SAMPLERS, MiniBatch, dgl_available

__all__ = ["build_sampler", "edge_keys", "check_minibatch", "same_minibatch", "edge_set"]


def build_sampler(method: str, **options):
    """The method ``method`` with ``options``; skips the test where the method's library does not import."""
    if method == "dgl" and not dgl_available():
        raise unittest.SkipTest("DGL does not import here")
    return SAMPLERS.build(method, **options)


def edge_keys(graph: Graph) -> torch.Tensor:
    """Sorted unique ``dst * num_nodes + src`` of every stored edge."""
    src, dst = graph.edges()
    return torch.unique(dst * graph.num_nodes + src)


def check_minibatch(mb: MiniBatch, graph: Graph, fanouts, replace: bool) -> None:
    """Blocks well-formed: DGL layout, ids in range, edges exist, the right number per destination."""
    assert torch.equal(mb.blocks[-1].dst_gid, mb.seeds), "the last block's destinations are the seeds"
    assert len(mb.blocks) == len(fanouts), f"{len(mb.blocks)} blocks for {len(fanouts)} fan-outs"
    keys = edge_keys(graph)
    deg = graph.in_degrees()
    for i, b in enumerate(mb.blocks):
        if i + 1 < len(mb.blocks):
            assert torch.equal(b.dst_gid, mb.blocks[i + 1].src_gid), \
                f"block {i}'s destinations = block {i + 1}'s sources"
        assert torch.equal(b.src_gid[: b.num_dst], b.dst_gid), f"block {i}: sources start with the destinations"
        assert torch.unique(b.src_gid).numel() == b.num_src, f"block {i}: source ids are unique"
        assert b.edge_src.dtype == torch.int64 and b.edge_dst.dtype == torch.int64, f"block {i}: int64 edge ids"
        if b.num_edges:
            assert 0 <= int(b.edge_src.min()) and int(b.edge_src.max()) < b.num_src, f"block {i}: edge_src in range"
            assert 0 <= int(b.edge_dst.min()) and int(b.edge_dst.max()) < b.num_dst, f"block {i}: edge_dst in range"
        s, d = b.src_gid[b.edge_src], b.dst_gid[b.edge_dst]
        k = d * graph.num_nodes + s
        pos = torch.searchsorted(keys, k).clamp(max=max(keys.numel() - 1, 0))
        assert bool((keys[pos] == k).all()), f"block {i}: every sampled edge exists in the graph"
        per_dst = torch.bincount(b.edge_dst, minlength=b.num_dst)
        d_deg = deg[b.dst_gid]
        f = fanouts[i]
        if f == -1:
            expected = d_deg
        elif replace:
            expected = torch.where(d_deg > 0, f, 0)
        else:
            expected = torch.clamp(d_deg, max=f)
        assert torch.equal(per_dst, expected), f"edges per destination in block {i}"
        if not replace:
            assert torch.unique(k).numel() == k.numel(), f"block {i}: no repeated edge without replacement"
        # every non-destination source is the source of some edge
        used = torch.zeros(b.num_src, dtype=torch.bool)
        used[b.edge_src] = True
        assert bool(used[b.num_dst:].all()), f"block {i}: every non-destination source is the source of an edge"


def same_minibatch(a: MiniBatch, b: MiniBatch) -> bool:
    """Whether ``a`` and ``b`` have the same seeds and blocks (ids and edges)."""
    return torch.equal(a.seeds, b.seeds) and len(a.blocks) == len(b.blocks) and all(
        torch.equal(x.src_gid, y.src_gid) and x.num_dst == y.num_dst and torch.equal(x.edge_src, y.edge_src)
        and torch.equal(x.edge_dst, y.edge_dst) for x, y in zip(a.blocks, b.blocks))


def edge_set(mb: MiniBatch) -> list[set]:
    """Per block, the set of sampled ``(src, dst)`` global-id pairs."""
    return [set(zip(b.src_gid[b.edge_src].tolist(), b.dst_gid[b.edge_dst].tolist())) for b in mb.blocks]
