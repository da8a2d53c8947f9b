"""Halo exchange for owner-compute full-graph training on edge-cut partitions (1-hop halos).

Every rank owns the vertices of its part (*inner*, ``local_nid`` ``0 .. num_inner-1``, sorted by global
id) and replicates the remote in-neighbours of its inner vertices (*halo*, local ids
``num_inner .. num_inner+num_halo-1``, ordered by (owner rank, global id)). Before each layer the
owners send the current rows of those vertices; in the backward pass the gradients of the halo rows
travel back along the transposed pattern and are added into the owners' gradients.

The plan is computed once, for all ranks at the same time, with vectorised torch ops over the edge
list (no per-vertex Python loop): :func:`build_halo_plans`. Row ``v`` of part ``p`` is sent once to each
other part ``q`` that holds an out-neighbour of ``v``, so the rows sent per layer equal the partition's
communication volume (``comm_rows_matrix`` of the partition stage), and one epoch moves exactly::

    fwd = rows x sum(input widths of all layers) x 4 bytes
    bwd = rows x sum(input widths of layers 2..L) x 4 bytes    # X needs no gradient

(:func:`predicted_halo_bytes`).

Example:
    >>> import torch
    >>> from workbench.graph import Graph
    >>> from workbench.layout.halo import build_halo_plans
    >>> g = Graph.from_edges(torch.tensor([0, 1, 1, 2]), torch.tensor([1, 0, 2, 1]), num_nodes=3, directed=False)
    >>> plans = build_halo_plans(g, torch.tensor([0, 0, 1]), 2)
    >>> plans[1].halo_gid.tolist(), plans[0].send_local_nid[1].tolist()
    ([1], [1])
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np
import torch

from workbench.graph import Graph

__all__ = ["HaloExchangePlan", "HaloExchange", "build_halo_plans", "local_index", "comm_rows_from_parts",
           "predicted_halo_bytes", "halo_sizes"]


@dataclasses.dataclass(eq=False)
class HaloExchangePlan:
    """What one rank sends and receives in a halo exchange.

    Attributes:
        rank: this rank (= its part id).
        world_size: number of ranks.
        inner_gid: ``(num_inner,)`` global ids of the owned vertices, ascending (local ids ``0..``).
        halo_gid: ``(num_halo,)`` global ids of the halo vertices, ordered by (owner, global id);
            local id of ``halo_gid[k]`` is ``num_inner + k``.
        halo_owner: ``(num_halo,)`` owning rank of each halo vertex.
        send_local_nid: per destination rank, the local ids of owned rows sent there (empty for self),
            in the order the destination stores them.
        recv_counts: rows received from each rank (0 for self); halo rows from rank ``j`` are the
            contiguous slice ``recv_offsets[j] : recv_offsets[j+1]`` of the halo.
    """

    rank: int
    world_size: int
    inner_gid: torch.Tensor
    halo_gid: torch.Tensor
    halo_owner: torch.Tensor
    send_local_nid: list[torch.Tensor]
    recv_counts: list[int]

    @property
    def num_inner(self) -> int:
        return int(self.inner_gid.numel())

    @property
    def num_halo(self) -> int:
        return int(self.halo_gid.numel())

    @property
    def send_counts(self) -> list[int]:
        return [int(t.numel()) for t in self.send_local_nid]

    @property
    def recv_offsets(self) -> list[int]:
        return [0] + list(np.cumsum(self.recv_counts).tolist())

    def buffer(self, layer: int, like: torch.Tensor) -> torch.Tensor:
        """The ``(num_inner + num_halo, F)`` rows buffer of ``layer``, allocated once and reused every epoch
        (the aggregation reads it and keeps no reference, so the next epoch may overwrite it)."""
        shape = (self.num_inner + self.num_halo, like.shape[1])
        cache = self.__dict__.setdefault("_buffers", {})
        buf = cache.get(layer)
        if buf is None or buf.shape != shape or buf.dtype != like.dtype or buf.device != like.device:
            buf = cache[layer] = like.new_empty(shape)
        return buf

    def exchange(self, h: torch.Tensor, comm, layer: int) -> torch.Tensor:
        """``(num_inner + num_halo, F)`` rows: the owned rows followed by the received halo rows."""
        if self.world_size == 1:
            return h
        return HaloExchange.apply(h, self, comm, layer)


class HaloExchange(torch.autograd.Function):
    """Forward: send owned rows to the ranks that need them (kind ``halo_fwd``). Backward: send the halo
    rows' gradients back to their owners (kind ``halo_bwd``), who add them into their own gradients."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, plan: HaloExchangePlan, comm, layer: int) -> torch.Tensor:
        ctx.plan, ctx.comm, ctx.layer = plan, comm, layer
        width = h.shape[1]
        sends = [h.new_zeros(0, width) if j == plan.rank else h.index_select(0, idx)
                 for j, idx in enumerate(plan.send_local_nid)]
        received = comm.all_to_all(sends, kind="halo_fwd", layer=layer)
        out = plan.buffer(layer, h)            # (num_inner + num_halo, F), reused: no allocation per epoch
        out[:plan.num_inner].copy_(h)
        off, n = plan.recv_offsets, plan.num_inner
        for j in range(plan.world_size):
            if j != plan.rank and plan.recv_counts[j]:
                out[n + off[j]:n + off[j + 1]].copy_(received[j].reshape(-1, width))
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        plan, comm = ctx.plan, ctx.comm
        n, width = plan.num_inner, grad.shape[1]
        off = plan.recv_offsets
        halo_grad = grad[n:]
        sends = [grad.new_zeros(0, width) if j == plan.rank else halo_grad[off[j]:off[j + 1]]
                 for j in range(plan.world_size)]
        received = comm.all_to_all(sends, kind="halo_bwd", layer=ctx.layer)
        # the incoming gradient is the aggregation's fresh output and has no other reader: add in place
        out = grad[:n] if grad.is_contiguous() else grad[:n].clone()
        for j, idx in enumerate(plan.send_local_nid):
            if j != plan.rank and idx.numel():
                out.index_add_(0, idx, received[j].reshape(-1, width))
        return out, None, None, None


def local_index(node_part: torch.Tensor, num_parts: int) -> torch.Tensor:
    """``(N,)`` local id of every vertex inside its own part (parts keep ascending global-id order)."""
    n = node_part.numel()
    order = torch.argsort(node_part, stable=True)
    counts = torch.bincount(node_part, minlength=num_parts)
    starts = torch.cumsum(counts, 0) - counts
    out = torch.empty(n, dtype=torch.int64)
    out[order] = torch.arange(n) - starts[node_part[order]]
    return out


def _cross_pairs(graph: Graph, node_part: torch.Tensor, num_parts: int):
    """Unique (dst part q, owner p, global vertex v) with v in p having an out-neighbour in q != p,
    sorted by (q, p, v)."""
    n = graph.num_nodes
    src, dst = graph.edges()
    ps, pd = node_part[src], node_part[dst]
    cross = ps != pd
    key = torch.unique((pd[cross] * num_parts + ps[cross]) * n + src[cross])  # sorted by (q, p, v)
    v = key % n
    qp = key // n
    return qp // num_parts, qp % num_parts, v


def comm_rows_from_parts(graph: Graph, node_part: torch.Tensor, num_parts: int) -> np.ndarray:
    """``(P, P)`` rows part ``p`` sends to part ``q`` in one layer (the partition's comm volume)."""
    q, p, _ = _cross_pairs(graph, node_part, num_parts)
    flat = torch.bincount(p * num_parts + q, minlength=num_parts * num_parts)
    return flat.reshape(num_parts, num_parts).numpy().astype(np.int64)


def build_halo_plans(graph: Graph, node_part: torch.Tensor, num_parts: int) -> list[HaloExchangePlan]:
    """The exchange plan of every rank, computed once from the partition (vectorised)."""
    node_part = torch.as_tensor(node_part, dtype=torch.int64)
    q, p, v = _cross_pairs(graph, node_part, num_parts)
    loc = local_index(node_part, num_parts)
    pair_counts = torch.bincount(q * num_parts + p, minlength=num_parts * num_parts).reshape(num_parts, num_parts)
    bounds = [0] + torch.cumsum(pair_counts.flatten(), 0).tolist()   # segment of (q, p) in sorted pairs
    order = torch.argsort(node_part, stable=True)
    part_starts = [0] + torch.cumsum(torch.bincount(node_part, minlength=num_parts), 0).tolist()
    plans = []
    for r in range(num_parts):
        seg = slice(bounds[r * num_parts], bounds[(r + 1) * num_parts])      # halos of rank r (q == r)
        sends = []
        for dst in range(num_parts):
            k = dst * num_parts + r
            sends.append(loc[v[bounds[k]:bounds[k + 1]]] if dst != r else torch.zeros(0, dtype=torch.int64))
        plans.append(HaloExchangePlan(
            rank=r, world_size=num_parts,
            inner_gid=order[part_starts[r]:part_starts[r + 1]].clone(),
            halo_gid=v[seg].clone(), halo_owner=p[seg].clone(),
            send_local_nid=sends, recv_counts=pair_counts[r].tolist()))
    return plans


def predicted_halo_bytes(comm_rows: int, input_widths: Sequence[int], *, itemsize: int = 4,
                         input_needs_grad: bool = False,
                         backward_widths: Optional[Sequence[int]] = None) -> dict[str, int]:
    """Halo bytes of one epoch predicted from the partition alone.

    Args:
        comm_rows: rows sent per layer over all ranks (sum of the comm-rows matrix).
        input_widths: width of the rows exchanged for each layer (the model's ``exchange_widths``).
        itemsize: bytes per value (4 for float32).
        input_needs_grad: whether the first layer's input carries a gradient (not for features).
        backward_widths: width of the gradients sent back per layer (the model's ``backward_widths``);
            overrides ``input_needs_grad``.

    Returns:
        ``{"halo_fwd": ..., "halo_bwd": ..., "total": ...}``.
    """
    widths = list(input_widths)
    if backward_widths is None:
        backward_widths = widths if input_needs_grad else widths[1:]
    fwd = comm_rows * sum(widths) * itemsize
    bwd = comm_rows * sum(backward_widths) * itemsize
    return {"halo_fwd": int(fwd), "halo_bwd": int(bwd), "total": int(fwd + bwd)}


def halo_sizes(plans: Sequence[HaloExchangePlan]) -> list[int]:
    return [p.num_halo for p in plans]
