"""CAGNET-style 1-D block-row full-graph training: the baseline SANCUS builds on.

Vertices are relabelled so every part is a contiguous block of rows. With ``p`` ranks, rank ``i`` owns
row block ``H_i`` of every layer's input and the block row ``{Â_ij}_j`` of the aggregation matrix; the
weights are replicated. One layer (SANCUS digest §4.4, CAGNET's 1-D algorithm)::

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

Example:
    >>> from workbench.train.block_row import BlockRowConfig
    >>> BlockRowConfig(graph="karate", num_parts=2, epochs=2).build().name
    'block_row'
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Optional

import torch

from workbench.events import Event
from workbench.graph import Graph
from workbench.runtime.program import RankContext
from workbench.train.full_graph import PartitionedProgram, TrainConfig, _partition_event
from workbench.train.loop import (EpochRecorder, LabelData, allreduce_gradients, global_metrics, make_optimizer,
                                  masked_loss, summarize_ranks)
from workbench.train.models import GNNModel, edge_weights, sparse_aggregator

__all__ = ["BlockRowConfig", "BlockRowProgram", "BlockShard", "build_block_shards", "predicted_broadcast_bytes"]


@dataclasses.dataclass(kw_only=True)
class BlockRowConfig(TrainConfig):
    """Settings of CAGNET-style 1-D block-row training (every block broadcast every layer)."""

    def build(self, *, graph: Optional[Graph] = None, node_part: Optional[torch.Tensor] = None) -> "BlockRowProgram":
        return BlockRowProgram(self, graph=graph, node_part=node_part)


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


def predicted_broadcast_bytes(num_nodes: int, world_size: int, input_widths: list[int], itemsize: int = 4) -> dict:
    """Broadcast bytes of one CAGNET epoch (ring-pipelined broadcasts, every round executed)."""
    fwd = (world_size - 1) * num_nodes * sum(input_widths) * itemsize
    bwd = (world_size - 1) * num_nodes * sum(input_widths[1:]) * itemsize
    return {"bcast_fwd": int(fwd), "bcast_bwd": int(bwd), "total": int(fwd + bwd)}


def build_block_shards(graph: Graph, node_part: torch.Tensor, num_parts: int, model: str,
                       input_widths: list[int]) -> list[BlockShard]:
    """Relabel rows part by part and cut ``Â`` and ``Â^T`` into per-rank block rows (vectorised)."""
    n = graph.num_nodes
    order = torch.argsort(node_part, stable=True)           # new id -> old id
    sizes = torch.bincount(node_part, minlength=num_parts)
    offsets = torch.cumsum(sizes, 0) - sizes
    new_of = torch.empty(n, dtype=torch.int64)
    new_of[order] = torch.arange(n)
    src, dst = graph.edges()
    in_deg, out_deg = graph.in_degrees(), graph.out_degrees()
    if model == "gcn":
        loops = torch.arange(n)
        src, dst = torch.cat([src, loops]), torch.cat([dst, loops])
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
    predicted = predicted_broadcast_bytes(n, num_parts, input_widths)
    shards = []
    for i in range(num_parts):
        rows = order[int(offsets[i]):int(offsets[i] + sizes[i])]
        fwd = [(ld[e], ls[e], w[e]) for e in (pair(i, j) for j in range(num_parts))]    # Â_ij: dst in i
        bwd = [(ls[e], ld[e], w[e]) for e in (pair(j, i) for j in range(num_parts))]    # (Â^T)_ij = (Â_ji)^T
        shards.append(BlockShard(rank=i, block_sizes=sizes.tolist(), global_nid=rows.clone(), fwd=fwd, bwd=bwd,
                                 data=LabelData.take(graph, rows), num_train_global=int(train.sum()),
                                 num_classes=graph.num_classes, predicted=predicted))
    return shards


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
                hj = h   # own block always fresh (SANCUS D2)
            else:
                hj = comm.broadcast(h.new_empty(size, width), src=j, kind="bcast_fwd", layer=layer)
            a = state.fwd[j]
            if a._nnz():
                out += torch.sparse.mm(a, hj)
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
            a_t = state.bwd[j]
            if a_t._nnz():
                out += torch.sparse.mm(a_t, gj)
        return out, None, None


class BlockRowProgram(PartitionedProgram):
    """CAGNET 1-D block-row training (the SANCUS baseline, staleness ``none``)."""

    name = "block_row"

    def prepare(self, world_size: int, emit: Callable[[Event], None]) -> list[BlockShard]:
        cfg = self.config
        graph, node_part, result = self._load_and_partition(world_size, emit)
        shards = build_block_shards(graph, node_part, world_size, cfg.model, self.input_widths(graph))
        self.predicted = shards[0].predicted
        # Every rank receives every other block: its "halo" is all vertices it does not own.
        emit(_partition_event(graph, node_part, world_size, cfg.partition, result,
                              [graph.num_nodes - s for s in shards[0].block_sizes], graph.num_features))
        return shards

    # -------------------------------------------------------------------------------- hooks for SANCUS
    def _wrap_comm(self, ctx: RankContext, shard: BlockShard):
        """The communicator the broadcasts go through (the baseline: the rank's own)."""
        return ctx.comm

    def _grad_clip(self, world_size: int) -> Optional[float]:
        return None

    def _before_layer(self, comm, ctx: RankContext, layer: int, epoch: int, h: torch.Tensor) -> None:
        """Called before each layer's broadcast rounds (SANCUS agrees its flags here)."""

    def _setup_model(self, model: GNNModel, comm) -> None:
        """Called once after the model is built (SANCUS's D4 variant hooks in here)."""

    def _after_backward(self, model: GNNModel, comm, state: "_BlockState") -> None:
        """Called after ``loss.backward()`` and before the gradient all-reduce."""

    def _extra_result(self, comm) -> dict:
        return {}

    # -------------------------------------------------------------------------------- rank body
    def run_rank(self, ctx: RankContext, shard: BlockShard) -> dict:
        cfg = self.config
        data, dev = shard.data, ctx.device
        model = GNNModel(cfg.model, in_dim=data.features.shape[1], hidden=cfg.hidden, out_dim=shard.num_classes,
                         num_layers=cfg.num_layers, seed=cfg.seed).to(dev)
        n_i = shard.block_sizes[shard.rank]
        fwd = [sparse_aggregator(r, c, w, (n_i, shard.block_sizes[j]))[0].to(dev) for j, (r, c, w) in enumerate(shard.fwd)]
        bwd = [sparse_aggregator(r, c, w, (n_i, shard.block_sizes[j]))[0].to(dev) for j, (r, c, w) in enumerate(shard.bwd)]
        comm = self._wrap_comm(ctx, shard)
        state = _BlockState(comm=comm, rank=shard.rank, sizes=shard.block_sizes, fwd=fwd, bwd=bwd,
                            grad_clip=self._grad_clip(ctx.world_size))
        self._setup_model(model, comm)
        x, labels = data.features.to(dev), data.labels.to(dev)
        masks = tuple(m.to(dev) for m in data.masks)
        opt = make_optimizer(cfg.optimizer, model.parameters(), cfg.lr, cfg.weight_decay)
        rec = EpochRecorder(ctx, ("bcast_fwd", "bcast_bwd"), cfg)
        epoch = 0

        def aggregate(h: torch.Tensor, layer: int) -> torch.Tensor:
            self._before_layer(comm, ctx, layer, epoch, h)
            return BlockRowAggregate.apply(h, state, layer)   # (n_i, F_layer)

        for epoch in range(cfg.epochs):
            rec.start(epoch)
            comm.set_epoch(epoch)
            ctx.check_stop()
            opt.zero_grad(set_to_none=False)
            logits = model(x, aggregate)
            loss = masked_loss(logits, labels, masks[0], shard.num_train_global)
            loss.backward()
            self._after_backward(model, comm, state)
            allreduce_gradients(model, comm, ctx.world_size)
            opt.step()
            rec.end(global_metrics(comm, ctx.world_size, loss, logits, labels, masks))
        out = rec.finish(model)
        out["predicted"] = shard.predicted
        out.update(self._extra_result(comm))
        return out

    def summarize(self, rank_results: list[dict]) -> dict:
        predicted = self.predicted or rank_results[0].get("predicted", {})
        summary = summarize_ranks(rank_results, name=self.name, predicted=predicted,
                                  extra={"model": self.config.model, "partition": self.config.partition})
        baseline = summary["predicted_bytes_per_epoch"] * summary["epochs"]
        moved = sum(summary["bytes_by_epoch"])
        # skipped rounds make epochs differ: report the mean epoch (equal to every epoch for the baseline)
        summary["bytes_per_epoch"] = int(round(moved / max(summary["epochs"], 1)))
        summary["baseline_bytes"] = int(baseline)
        summary["comm_reduction"] = (1.0 - moved / baseline) if baseline else 0.0
        return summary


def clip_threshold(threshold: float, world_size: int, scaling: str) -> float:
    """Local clipping threshold ``th_i`` from the global ``th`` (SANCUS §4.3.2; see the digest §4.6)."""
    return threshold * math.sqrt(world_size) if scaling == "sqrt_p" else threshold / math.sqrt(world_size)
