"""Checks every sampling method must pass (a conformance harness for the sample stage)."""

from __future__ import annotations

import pytest
import torch

from workbench.graph import Graph
from workbench.sample import SAMPLERS, MiniBatch, dgl_available


def build_sampler(method: str, **options):
    """The method ``method`` with ``options``; skips the test where the method's library does not import."""
    if method == "dgl" and not dgl_available():
        pytest.skip("DGL does not import here")
    return SAMPLERS.build(method, **options)


def edge_keys(graph: Graph) -> torch.Tensor:
    src, dst = graph.edges()
    return torch.unique(dst * graph.num_nodes + src)


def check_minibatch(mb: MiniBatch, graph: Graph, fanouts, replace: bool) -> None:
    """Blocks well-formed: DGL layout, ids in range, edges exist, the right number per destination."""
    assert torch.equal(mb.blocks[-1].dst_gid, mb.seeds)
    assert len(mb.blocks) == len(fanouts)
    keys = edge_keys(graph)
    deg = graph.in_degrees()
    for i, b in enumerate(mb.blocks):
        if i + 1 < len(mb.blocks):
            assert torch.equal(b.dst_gid, mb.blocks[i + 1].src_gid), "block i's destinations = block i+1's sources"
        assert torch.equal(b.src_gid[: b.num_dst], b.dst_gid)
        assert torch.unique(b.src_gid).numel() == b.num_src, "source ids are unique"
        assert b.edge_src.dtype == torch.int64 and b.edge_dst.dtype == torch.int64
        if b.num_edges:
            assert 0 <= int(b.edge_src.min()) and int(b.edge_src.max()) < b.num_src
            assert 0 <= int(b.edge_dst.min()) and int(b.edge_dst.max()) < b.num_dst
        s, d = b.src_gid[b.edge_src], b.dst_gid[b.edge_dst]
        k = d * graph.num_nodes + s
        pos = torch.searchsorted(keys, k).clamp(max=max(keys.numel() - 1, 0))
        assert bool((keys[pos] == k).all()), "every sampled edge exists in the graph"
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
            assert torch.unique(k).numel() == k.numel(), "no repeated edge without replacement"
        # every non-destination source is the source of some edge
        used = torch.zeros(b.num_src, dtype=torch.bool)
        used[b.edge_src] = True
        assert bool(used[b.num_dst:].all())


def same_minibatch(a: MiniBatch, b: MiniBatch) -> bool:
    return torch.equal(a.seeds, b.seeds) and len(a.blocks) == len(b.blocks) and all(
        torch.equal(x.src_gid, y.src_gid) and x.num_dst == y.num_dst and torch.equal(x.edge_src, y.edge_src)
        and torch.equal(x.edge_dst, y.edge_dst) for x, y in zip(a.blocks, b.blocks))


def edge_set(mb: MiniBatch) -> list[set]:
    return [set(zip(b.src_gid[b.edge_src].tolist(), b.dst_gid[b.edge_dst].tolist())) for b in mb.blocks]
