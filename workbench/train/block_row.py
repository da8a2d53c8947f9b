"""CAGNET-style 1-D block-row full-graph training: the baseline SANCUS builds on.

Vertices are relabelled so every part is a contiguous block of rows. With ``p`` ranks, rank ``i`` owns
row block ``H_i`` of every layer's input and the block row ``{Â_ij}_j`` of the aggregation matrix; the
weights are replicated. One layer (SANCUS's Algorithm 3 without staleness, CAGNET's 1-D algorithm)::

    for j in 0..p-1:                      # fixed root order, one broadcast round per root
        H_j = broadcast(H_j, root=j)      # kind "bcast_fwd"; own block used as is
        T_i += Â_ij H_j
    Z_i = layer(T_i, H_i);  H_i' = relu(Z_i)

Backward: with ``G_i = dL/dT_i``, every rank broadcasts its ``G_i`` (kind ``bcast_bwd``) and rank ``i``
adds ``Σ_j (Â^T)_ij G_j`` into ``dL/dH_i`` (the transpose's block row is kept, so directed graphs are
exact). The first layer's input ``X`` needs no gradient, so layer 1 has no backward broadcast, and the
weight gradient is ``T_i^T δ_i`` summed by one all-reduce (kind ``allreduce``). Every broadcast is
counted as a pipelined ring (``n`` bytes on each of the ``p - 1`` links), so one epoch moves::

    fwd = (p - 1) x N x sum(input widths) x 4        bwd = (p - 1) x N x sum(input widths[1:]) x 4

Compared with halo exchange, every rank receives *all* rows (not just its halo): that is the price of
regular, dense communication that SANCUS then reduces by skipping rounds
(:mod:`workbench.train.sancus`).

Registered as the ``block_row`` exchange (:class:`BlockRowBroadcast`); staleness turns it into SANCUS.

Example:
    >>> from workbench.compose import RunConfig
    >>> cfg = RunConfig.compose(graph="karate", num_parts=2, exchange="block_row", epochs=2)
    >>> cfg.method("exchange"), cfg.build().name
    ('block_row', 'block_row')
"""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Any, Optional

import torch

from workbench._validation import ErrorCollector
from workbench.constraints import Interval, OneOf, Options
from workbench.graph import Graph
from workbench.train.exchange import EXCHANGES, Exchange, ExchangeLayout, RankExchange
from workbench.train.loop import LabelData
from workbench.train.kernels import spmm
from workbench.train.models import ModelStage, edge_weights, node_scales, sparse_aggregator, with_self_loops

__all__ = ["BlockRowBroadcast", "BlockShard", "build_block_shards", "build_block_shard",
           "predicted_broadcast_bytes", "clip_threshold"]


@dataclasses.dataclass(eq=False)
class BlockShard:
    """One rank's row block.

    Attributes:
        rank: this rank (= its block).
        block_sizes: rows of every block.
        global_nid: ``(block_sizes[rank],)`` original ids of the owned rows.
        fwd: per block ``j``, COO ``(rows, cols, weights)`` of ``Â_ij`` (local row, column in block ``j``).
        bwd: per block ``j``, COO of ``(Â^T)_ij`` (for the backward pass).
        data: features, labels and masks of the owned rows.
        num_train_global: training vertices of the whole graph.
        num_classes: classes of the whole graph.
        predicted: predicted broadcast bytes of one baseline epoch.
        fwd_scales, bwd_scales: per block ``j``, ``(r, c)`` with ``weights == r[rows] * c[cols]``
            (:func:`~workbench.train.models.node_scales`): the CPU may then use an unweighted kernel.
    """

    rank: int
    block_sizes: list[int]
    global_nid: torch.Tensor
    fwd: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
    bwd: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
    data: LabelData
    num_train_global: int
    num_classes: int
    predicted: dict
    fwd_scales: list[tuple[torch.Tensor, torch.Tensor]]
    bwd_scales: list[tuple[torch.Tensor, torch.Tensor]]


def predicted_broadcast_bytes(num_nodes: int, world_size: int, input_widths: list[int], itemsize: int = 4,
                              backward_widths: Optional[list[int]] = None) -> dict:
    """Broadcast bytes of one CAGNET epoch (ring-pipelined broadcasts, every round executed).

    ``input_widths``: width of the rows broadcast per layer (the model's ``exchange_widths``);
    ``backward_widths``: of the gradients (default: none for layer 0, whose input is the features)."""
    if backward_widths is None:
        backward_widths = [0, *input_widths[1:]]
    fwd = (world_size - 1) * num_nodes * sum(input_widths) * itemsize
    bwd = (world_size - 1) * num_nodes * sum(backward_widths) * itemsize
    return {"bcast_fwd": int(fwd), "bcast_bwd": int(bwd), "total": int(fwd + bwd)}


def build_block_shards(graph: Graph, node_part: torch.Tensor, num_parts: int, model: ModelStage,
                       input_widths: list[int], backward_widths: Optional[list[int]] = None) -> list[BlockShard]:
    """Relabel rows part by part and cut ``Â`` and ``Â^T`` into per-rank block rows (vectorised); ``model``: the
    model stage (or its class), whose ``Â`` it is."""
    n = graph.num_nodes
    order = torch.argsort(node_part, stable=True)           # new id -> old id
    sizes = torch.bincount(node_part, minlength=num_parts)
    offsets = torch.cumsum(sizes, 0) - sizes
    new_of = torch.empty(n, dtype=torch.int64)
    new_of[order] = torch.arange(n)
    src, dst = graph.edges()
    in_deg, out_deg = graph.in_degrees(), graph.out_degrees()
    src, dst = with_self_loops(model, src, dst, torch.arange(n))
    w = edge_weights(model, src, dst, in_deg[dst], out_deg[src])
    bs, bd = node_part[src], node_part[dst]
    ls, ld = new_of[src] - offsets[bs], new_of[dst] - offsets[bd]  # ids inside their blocks
    key = bd * num_parts + bs
    perm = torch.argsort(key, stable=True)                    # group edges by (dst block, src block)
    counts = torch.bincount(key, minlength=num_parts * num_parts).tolist()
    bounds = [0]
    for c in counts:
        bounds.append(bounds[-1] + c)

    def pair(i: int, j: int) -> torch.Tensor:
        return perm[bounds[i * num_parts + j]:bounds[i * num_parts + j + 1]]

    train = graph.train_mask & (graph.labels >= 0)
    r_all, c_all = node_scales(model, in_deg, out_deg)        # edge weight (v <- u) == r_all[v] * c_all[u]
    block_ids = [order[int(offsets[j]):int(offsets[j] + sizes[j])] for j in range(num_parts)]
    predicted = predicted_broadcast_bytes(n, num_parts, input_widths, backward_widths=backward_widths)
    shards = []
    for i in range(num_parts):
        rows = order[int(offsets[i]):int(offsets[i] + sizes[i])]
        fwd = [(ld[e], ls[e], w[e]) for e in (pair(i, j) for j in range(num_parts))]    # Â_ij: dst in i
        bwd = [(ls[e], ld[e], w[e]) for e in (pair(j, i) for j in range(num_parts))]    # (Â^T)_ij = (Â_ji)^T
        shards.append(BlockShard(rank=i, block_sizes=sizes.tolist(), global_nid=rows.clone(), fwd=fwd, bwd=bwd,
                                 data=LabelData.take(graph, rows), num_train_global=int(train.sum()),
                                 num_classes=graph.num_classes, predicted=predicted,
                                 fwd_scales=[(r_all[rows], c_all[block_ids[j]]) for j in range(num_parts)],
                                 bwd_scales=[(c_all[rows], r_all[block_ids[j]]) for j in range(num_parts)]))
    return shards


def build_block_shard(ref: Any, comm: Any) -> BlockShard:
    """Rank ``ref.part``'s :class:`BlockShard`, built on the rank from its own part: equal to the one
    :func:`build_block_shards` cuts from the whole graph (the same blocks, weights and scales).

    After the halo is agreed (:func:`~workbench.train.part_source.agree_halo`), three more one-off exchanges,
    counted as ``part_setup`` like it: each owner tells the requesters where their halo vertices sit in its
    block; every rank sends every other its block's global in- and out-degrees (the scales of that block's
    columns: ``16 (p - 1)`` bytes per vertex); and every rank sends each part the entries of ``Â`` whose source
    that part owns (the rows of its ``Â^T`` blocks, which no part holds: a part stores its vertices' in-edges).
    """
    from workbench.train.part_source import SETUP_KIND, agree_halo

    h = agree_halo(ref, comm)
    p, i, n_own, model = h.num_parts, ref.part, h.num_owned, ref.model
    empty = torch.zeros(0, dtype=torch.int64)
    # where each halo vertex sits in its owner's block: the owner's send lists, sent back
    back = comm.all_to_all([empty if j == i else h.send[j] for j in range(p)], kind=SETUP_KIND)
    halo_pos = torch.cat([empty] + [back[j] for j in range(p) if j != i])
    mine = torch.stack([h.in_deg, h.out_deg[:n_own]], 1)                          # (n_own, 2) global degrees
    blocks = comm.all_to_all([empty.reshape(0, 2) if j == i else mine for j in range(p)], kind=SETUP_KIND)
    blocks[i] = mine
    sizes = [int(b.shape[0]) for b in blocks]
    s, d = with_self_loops(model, h.cols, h.rows, torch.arange(n_own))
    w = edge_weights(model, s, d, h.in_deg[d], h.out_deg[s])
    halo = s >= n_own
    src_block = torch.full_like(s, i)
    src_pos = s.clone()
    src_block[halo] = h.halo_owner[s[halo] - n_own]
    src_pos[halo] = halo_pos[s[halo] - n_own]
    fwd, to_owner = [], []
    for j in range(p):
        m = src_block == j
        fwd.append((d[m], src_pos[m], w[m]))
        to_owner.append((torch.stack([src_pos[m], d[m]], 1), w[m]))
    ids = comm.all_to_all([empty.reshape(0, 2) if j == i else to_owner[j][0] for j in range(p)], kind=SETUP_KIND)
    vals = comm.all_to_all([w[:0] if j == i else to_owner[j][1] for j in range(p)], kind=SETUP_KIND)
    bwd = [(fwd[i][1], fwd[i][0], fwd[i][2]) if j == i else (ids[j][:, 0], ids[j][:, 1], vals[j]) for j in range(p)]
    scales = [node_scales(model, b[:, 0], b[:, 1]) for b in blocks]              # (r, c) of every block
    return BlockShard(rank=i, block_sizes=sizes, global_nid=h.inner_gid, fwd=fwd, bwd=bwd, data=h.data,
                      num_train_global=ref.num_train_global, num_classes=ref.num_classes, predicted=ref.predicted,
                      fwd_scales=[(scales[i][0], scales[j][1]) for j in range(p)],
                      bwd_scales=[(scales[i][1], scales[j][0]) for j in range(p)])


@dataclasses.dataclass(eq=False)
class _BlockState:
    """What the aggregation needs at run time on one rank."""

    comm: Any
    rank: int
    sizes: list[int]
    fwd: list[torch.Tensor]   # CSR Â_ij per block j
    bwd: list[torch.Tensor]   # CSR (Â^T)_ij per block j
    grad_clip: Optional[float] = None


class BlockRowAggregate(torch.autograd.Function):
    """``T_i = Σ_j Â_ij H_j`` through one broadcast round per root; backward broadcasts ``dL/dT``."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, state: _BlockState, layer: int) -> torch.Tensor:
        ctx.state, ctx.layer = state, layer
        comm, width = state.comm, h.shape[1]
        out = h.new_zeros(state.sizes[state.rank], width)
        for j, size in enumerate(state.sizes):
            if j == state.rank:
                comm.broadcast(h.detach().contiguous(), src=j, kind="bcast_fwd", layer=layer)
                hj = h   # own block always fresh (SANCUS: only other ranks' blocks can be stale)
            else:
                hj = comm.broadcast(h.new_empty(size, width), src=j, kind="bcast_fwd", layer=layer)
            spmm(state.fwd[j], hj, out=out)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        state, comm = ctx.state, ctx.state.comm
        grad = grad.contiguous()
        if state.grad_clip is not None:   # local gradient clipping before communication
            norm = float(grad.norm())
            if norm > state.grad_clip:
                grad = grad * (state.grad_clip / norm)
        out = grad.new_zeros(state.sizes[state.rank], grad.shape[1])
        for j, size in enumerate(state.sizes):
            gj = comm.broadcast(grad if j == state.rank else grad.new_empty(size, grad.shape[1]), src=j,
                                kind="bcast_bwd", layer=ctx.layer)
            spmm(state.bwd[j], gj, out=out)
        return out, None, None


@EXCHANGES.register
class BlockRowBroadcast(Exchange):
    """CAGNET 1-D block rows: every root's block broadcast at every layer (``--set exchange.method=block_row``).

    With ``staleness`` set this is SANCUS (:mod:`workbench.train.sancus`): rounds of STALE roots are
    skipped and the receivers reuse their historical copy.
    """

    name = "block_row"
    requires = frozenset({"embedding exchange", "whole-part layers"})
    forward_kind = "bcast_fwd"
    backward_kind = "bcast_bwd"

    @dataclasses.dataclass(kw_only=True)
    class Config(Exchange.Config):
        weight_grad: Annotated[str, Options("exact", "cagnet")] = "exact"
        """``exact`` (T_iᵀ δ_i, gradient of the forward computed) or ``cagnet`` (H_iᵀ (Âᵀ δ)_i, CAGNET's form:
        a broadcast of every δ_j at every layer; the two differ once blocks are stale)."""
        clip_threshold: Annotated[Optional[float],
                                  OneOf(None, Interval(0, None, closed="neither"))] = None
        """Global gradient-clipping threshold th (None = no clipping); each rank clips its block at th_i."""
        clip_scaling: Annotated[str, Options("sqrt_p", "inv_sqrt_p")] = "sqrt_p"
        """``sqrt_p`` (th_i = √p·th, as printed) or ``inv_sqrt_p`` (th_i = th/√p, the variance argument)."""

        def _validate(self, errs: ErrorCollector) -> None:
            super()._validate(errs)
            if self.skip == "gradients":
                errs.check(self.weight_grad == "exact", "weight_grad",
                           "'exact' with skip='gradients' (the 'cagnet' form broadcasts its own δ blocks)",
                           self.weight_grad)

    def layout(self, graph: Graph, node_part: torch.Tensor, num_parts: int, model: ModelStage,
               input_widths: list[int], backward_widths: Optional[list[int]] = None) -> ExchangeLayout:
        shards = build_block_shards(graph, node_part, num_parts, model, input_widths, backward_widths)
        ring = [(num_parts - 1) * s for s in shards[0].block_sizes]   # a ring broadcast crosses p - 1 links
        # Every rank receives every other block: its "halo" is all vertices it does not own.
        return ExchangeLayout(shards=shards, predicted=shards[0].predicted, root_rows=ring, backward_rows=ring,
                              halo_sizes=[graph.num_nodes - s for s in shards[0].block_sizes])

    def part_layout(self, part_sizes: list[int], comm_rows: Any, input_widths: list[int],
                    backward_widths: Optional[list[int]] = None) -> ExchangeLayout:
        p, n = len(part_sizes), sum(part_sizes)
        ring = [(p - 1) * s for s in part_sizes]
        return ExchangeLayout(shards=[], predicted=predicted_broadcast_bytes(n, p, input_widths,
                                                                             backward_widths=backward_widths),
                              root_rows=ring, backward_rows=ring, halo_sizes=[n - s for s in part_sizes])

    def shard_from_part(self, ref: Any, comm: Any) -> BlockShard:
        return build_block_shard(ref, comm)

    def pinned_layers(self, num_layers: int) -> frozenset:
        """The ``cagnet`` weight gradient ``H_iᵀ (Âᵀ δ)_i`` needs every layer's input exchanged: all layers
        stay aggregate-first."""
        if self.config.weight_grad == "cagnet":
            return frozenset(range(num_layers))
        return super().pinned_layers(num_layers)

    def attach(self, ctx, shard: BlockShard) -> "_BlockRowRank":
        return _BlockRowRank(self, ctx, shard)


class _BlockRowRank(RankExchange):
    """One rank of block-row training (the ``cagnet`` weight gradient, CAGNET's form, hooks in here)."""

    def __init__(self, stage: BlockRowBroadcast, ctx, shard: BlockShard):
        super().__init__(ctx, stage.policy(), (stage.forward_kind, stage.backward_kind))
        c, dev = stage.config, ctx.device
        n_i = shard.block_sizes[shard.rank]
        fwd = [sparse_aggregator(r, cl, w, (n_i, shard.block_sizes[j]), dev, scales=shard.fwd_scales[j],
                                 kernel=ctx.kernel)[0] for j, (r, cl, w) in enumerate(shard.fwd)]
        bwd = [sparse_aggregator(r, cl, w, (n_i, shard.block_sizes[j]), dev, scales=shard.bwd_scales[j],
                                 kernel=ctx.kernel)[0] for j, (r, cl, w) in enumerate(shard.bwd)]
        clip = None if c.clip_threshold is None else clip_threshold(c.clip_threshold, ctx.world_size, c.clip_scaling)
        self.state = _BlockState(comm=self.comm, rank=shard.rank, sizes=shard.block_sizes, fwd=fwd, bwd=bwd,
                                 grad_clip=clip)
        self.cagnet = c.weight_grad == "cagnet"
        self.inputs: dict = {}    # layer -> H_i (weight_grad="cagnet")
        self.deltas: dict = {}    # layer -> δ_i = dL/dZ_i (weight_grad="cagnet")

    def before_layer(self, h: torch.Tensor, layer: int) -> None:
        if self.cagnet:
            self.inputs[layer] = h.detach()

    def _aggregate(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        return BlockRowAggregate.apply(h, self.state, layer)   # (n_i, F_layer)

    def setup_model(self, model) -> None:
        if not self.cagnet:
            return

        def capture(layer: int):
            def hook(_module, _inputs, out):
                if out.requires_grad:   # δ of the neighbour linear's output = dL/dZ (Z is a sum)
                    out.register_hook(lambda g: self.deltas.__setitem__(layer, g.detach()))
            return hook

        for layer, lin in enumerate(model.neigh):
            lin.register_forward_hook(capture(layer))

    def after_backward(self, model) -> None:
        """``cagnet``: replace each ∇W_neigh by H_iᵀ (Âᵀ δ)_i, broadcasting every δ_j (kind bcast_bwd)."""
        if not self.cagnet:
            return
        state, comm = self.state, self.comm
        for layer, lin in enumerate(model.neigh):
            delta = self.deltas[layer].contiguous()
            u = delta.new_zeros(delta.shape)
            for j, size in enumerate(state.sizes):
                dj = comm.broadcast(delta if j == state.rank else delta.new_empty(size, delta.shape[1]), src=j,
                                    kind="bcast_bwd", layer=layer)
                spmm(state.bwd[j], dj, out=u)
            lin.weight.grad.copy_(u.T @ self.inputs[layer])   # (out, in)


def clip_threshold(threshold: float, world_size: int, scaling: str) -> float:
    """Local clipping threshold ``th_i`` from the global ``th`` (SANCUS §4.3.2 prints ``√p · th``; its own
    variance argument, local norms ≈ σ against a global ≈ √p σ, implies ``th / √p``)."""
    return threshold * math.sqrt(world_size) if scaling == "sqrt_p" else threshold / math.sqrt(world_size)
