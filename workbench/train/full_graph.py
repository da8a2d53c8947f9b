"""Full-graph training with exact halo exchange (owner-compute on edge-cut partitions, 1-hop halos).

Each rank owns the vertices of one part and computes only their rows. Before every layer it receives
the current rows of its halo vertices from their owners (point-to-point pattern carried by one
``all_to_all`` per layer, counted per (src, dst) as kind ``halo_fwd``); in the backward pass the halo
rows' gradients go back to the owners along the transposed pattern (kind ``halo_bwd``). Weight
gradients are summed with one all-reduce per step (kind ``allreduce``). The loss of every rank is
normalised by the GLOBAL number of training vertices and GCN normalisation uses GLOBAL degrees
(shipped in the payload), so the run reproduces the single-process model: for the same seed, losses
and weights agree to float rounding (tested to 1e-5 relative).

The halo bytes of an epoch are predicted from the partition alone
(:func:`workbench.train.halo.predicted_halo_bytes`) and the tests check the transport counts match
exactly.

Example:
    >>> from workbench.train.full_graph import FullGraphConfig
    >>> cfg = FullGraphConfig(graph="karate", num_parts=2, partition="random", epochs=3)
    >>> program = cfg.build()
    >>> program.world_size_for(None)
    2
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import torch

from workbench._validation import Config, ErrorCollector
from workbench.events import Event, PartitionComputed, Progress
from workbench.graph import Graph
from workbench.runtime.program import Program, RankContext
from workbench.train.halo import HaloExchangePlan, build_halo_plans, comm_rows_from_parts, predicted_halo_bytes
from workbench.train.loop import (OPTIMIZERS, PARTITION_METHODS, TRAFFIC_DETAILS, EpochRecorder, LabelData, allreduce_gradients,
                                  global_metrics, load_training_graph, make_optimizer, masked_loss, partition_nodes,
                                  summarize_ranks)
from workbench.train.models import MODEL_KINDS, GNNModel, SpMM, edge_weights, sparse_aggregator

__all__ = ["TrainConfig", "FullGraphConfig", "FullGraphProgram", "RankShard", "build_shards"]


@dataclasses.dataclass(kw_only=True)
class TrainConfig(Config):
    """Settings every full-graph training program shares (model, optimiser, data, partition)."""

    graph: str = "karate"
    """Graph spec for ``workbench.data.load_graph`` (e.g. ``karate`` or ``sbm:num_nodes=2000,seed=0``)."""
    num_parts: Optional[int] = None
    """Number of parts = ranks. ``None`` takes the runner's number of workers."""
    partition: str = "metis"
    """How vertices are grouped into parts (row blocks): ``metis``, ``random`` or ``block`` (contiguous ids)."""
    model: str = "gcn"
    """``gcn`` (symmetric normalisation with self-loops) or ``sage`` (GraphSAGE-mean)."""
    num_layers: int = 2
    """Number of GNN layers (1 to 4)."""
    hidden: int = 16
    """Hidden width."""
    epochs: int = 20
    """Training epochs (one full-graph forward, backward and update each)."""
    lr: float = 0.01
    """Learning rate."""
    optimizer: str = "adam"
    """``adam`` or ``sgd``."""
    weight_decay: float = 0.0
    """L2 weight decay."""
    seed: int = 0
    """Seed of the weight initialisation and of the partitioner."""
    traffic_detail: str = "auto"
    """Per-link traffic in the run log: ``epoch`` (every epoch) or ``auto`` (every epoch for the first 100, then summed per 100-epoch window; per-epoch totals by kind are always exact)."""

    def _validate(self, errs: ErrorCollector) -> None:
        _validate_common(self, errs)


@dataclasses.dataclass(kw_only=True)
class FullGraphConfig(TrainConfig):
    """Settings of a full-graph halo-exchange training run."""

    def build(self, *, graph: Optional[Graph] = None, node_part: Optional[torch.Tensor] = None) -> "FullGraphProgram":
        """The program; ``graph``/``node_part`` (runtime objects) replace loading and partitioning."""
        return FullGraphProgram(self, graph=graph, node_part=node_part)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _validate_common(cfg: Any, errs: ErrorCollector) -> None:
    errs.check(isinstance(cfg.graph, (str, Graph)) and bool(cfg.graph), "graph", "a non-empty graph spec", cfg.graph)
    errs.check(cfg.num_parts is None or (_is_int(cfg.num_parts) and cfg.num_parts >= 1), "num_parts",
               "None or an int in [1, inf]", cfg.num_parts)
    errs.check(cfg.partition in PARTITION_METHODS, "partition", f"one of {list(PARTITION_METHODS)}", cfg.partition)
    errs.check(cfg.model in MODEL_KINDS, "model", f"one of {list(MODEL_KINDS)}", cfg.model)
    errs.check(_is_int(cfg.num_layers) and 1 <= cfg.num_layers <= 4, "num_layers", "an int in [1, 4]", cfg.num_layers)
    errs.check(_is_int(cfg.hidden) and cfg.hidden >= 1, "hidden", "an int in [1, inf]", cfg.hidden)
    errs.check(_is_int(cfg.epochs) and cfg.epochs >= 1, "epochs", "an int in [1, inf]", cfg.epochs)
    errs.check(isinstance(cfg.lr, (int, float)) and not isinstance(cfg.lr, bool) and cfg.lr > 0, "lr",
               "a number in (0, inf]", cfg.lr)
    errs.check(cfg.optimizer in OPTIMIZERS, "optimizer", f"one of {list(OPTIMIZERS)}", cfg.optimizer)
    errs.check(isinstance(cfg.weight_decay, (int, float)) and cfg.weight_decay >= 0, "weight_decay",
               "a number in [0, inf]", cfg.weight_decay)
    errs.check(_is_int(cfg.seed), "seed", "an int", cfg.seed)
    errs.check(cfg.traffic_detail in TRAFFIC_DETAILS, "traffic_detail", f"one of {list(TRAFFIC_DETAILS)}",
               cfg.traffic_detail)


@dataclasses.dataclass(eq=False)
class RankShard:
    """The payload of one rank: its rows, its local aggregation matrix and its exchange plan.

    Attributes:
        plan: the rank's :class:`HaloExchangePlan` (local ids: inner rows, then halo rows).
        agg_rows, agg_cols, agg_weights: COO triplets of ``Â`` restricted to the owned rows
            (``(num_inner, num_inner + num_halo)``, local ids; GCN self-loops included). Weights use
            GLOBAL degrees.
        data: features, labels and masks of the owned rows.
        num_train_global: number of training vertices of the whole graph (loss normaliser).
        num_classes: classes of the whole graph.
        predicted: predicted halo bytes of one epoch (``halo_fwd``, ``halo_bwd``, ``total``).
    """

    plan: HaloExchangePlan
    agg_rows: torch.Tensor
    agg_cols: torch.Tensor
    agg_weights: torch.Tensor
    data: LabelData
    num_train_global: int
    num_classes: int
    predicted: dict


def build_shards(graph: Graph, node_part: torch.Tensor, num_parts: int, model: str,
                 input_widths: list[int]) -> tuple[list[RankShard], list[HaloExchangePlan]]:
    """Split ``graph`` into per-rank shards (vectorised; one pass over the edges per rank)."""
    plans = build_halo_plans(graph, node_part, num_parts)
    in_deg, out_deg = graph.in_degrees(), graph.out_degrees()
    src, dst = graph.edges()
    comm_rows = int(comm_rows_from_parts(graph, node_part, num_parts).sum())
    predicted = predicted_halo_bytes(comm_rows if num_parts > 1 else 0, input_widths)
    dst_part = node_part[dst]
    n = graph.num_nodes
    labels_all = graph.labels
    train = graph.train_mask & (labels_all >= 0)
    num_train = int(train.sum())
    shards = []
    g2l = torch.full((n,), -1, dtype=torch.int64)
    for plan in plans:
        r = plan.rank
        g2l.fill_(-1)
        g2l[plan.inner_gid] = torch.arange(plan.num_inner)
        g2l[plan.halo_gid] = plan.num_inner + torch.arange(plan.num_halo)
        sel = dst_part == r
        s, d = src[sel], dst[sel]
        if model == "gcn":  # self-loops of the owned rows
            s = torch.cat([s, plan.inner_gid])
            d = torch.cat([d, plan.inner_gid])
        w = edge_weights(model, s, d, in_deg[d], out_deg[s])
        assert bool((g2l[s] >= 0).all()), "every in-neighbour of an owned row is inner or halo"
        shards.append(RankShard(plan=plan, agg_rows=g2l[d], agg_cols=g2l[s], agg_weights=w,
                                data=LabelData.take(graph, plan.inner_gid), num_train_global=num_train,
                                num_classes=graph.num_classes, predicted=predicted))
    return shards, plans


def _partition_event(graph: Graph, node_part: torch.Tensor, num_parts: int, method: str, result: Any,
                     halo_sizes: list[int], feature_width: int) -> PartitionComputed:
    comm = comm_rows_from_parts(graph, node_part, num_parts)
    metrics: dict = {}
    if result is not None and hasattr(result, "metrics"):
        try:
            metrics = dict(result.metrics(feature_width=feature_width).to_dict())
        except Exception:  # a metrics failure must not stop training
            metrics = {}
    metrics.setdefault("num_nodes", graph.num_nodes)
    metrics.setdefault("num_edges", graph.num_edges)
    metrics.setdefault("num_parts", num_parts)
    metrics.setdefault("comm_volume_rows", int(comm.sum()))
    metrics.setdefault("max_part_comm_volume_rows", int(comm.sum(axis=1).max()) if num_parts else 0)
    sizes = torch.bincount(node_part, minlength=num_parts).tolist()
    return PartitionComputed(method=method if num_parts > 1 else "none", num_parts=num_parts, metrics=metrics,
                             part_sizes=sizes, halo_sizes=list(halo_sizes), comm_rows=comm.tolist())


class PartitionedProgram(Program):
    """Base of the programs that load a graph and give each rank one part of its vertices.

    ``graph``/``node_part`` (runtime objects) replace loading and partitioning.
    """

    def __init__(self, config: TrainConfig, *, graph: Optional[Graph] = None,
                 node_part: Optional[torch.Tensor] = None):
        super().__init__(config)
        self._graph = graph
        self._node_part = node_part
        self.predicted: dict = {}

    def world_size_for(self, requested: Optional[int]) -> int:
        if self.config.num_parts is not None:
            return int(self.config.num_parts)
        if self._node_part is not None:
            return int(self._node_part.max()) + 1
        return int(requested or 1)

    def input_widths(self, graph: Graph) -> list[int]:
        c = self.config
        return [graph.num_features] + [c.hidden] * (c.num_layers - 1)

    def _load_and_partition(self, world_size: int, emit: Optional[Callable[[Event], None]] = None
                            ) -> tuple[Graph, torch.Tensor, Any]:
        """``(graph, node_part, partition result or None)``, validated before any rank starts.

        ``emit`` receives :class:`Progress` events of the steps (stages ``graph`` and ``partition``)."""
        cfg = self.config
        emit = emit or (lambda event: None)
        spec = self._graph if self._graph is not None else cfg.graph
        emit(Progress(stage="graph", done=0, total=1, message=f"loading {getattr(spec, 'name', spec)}"))
        graph = load_training_graph(spec, type(self).__name__)
        emit(Progress(stage="graph", done=1, total=1,
                      message=f"{graph.num_nodes:,} vertices, {graph.num_edges:,} edges"))
        errs = ErrorCollector(type(cfg).__name__)
        errs.check(1 <= world_size <= graph.num_nodes, "num_parts", f"an int in [1, num_nodes={graph.num_nodes}]",
                   world_size)
        errs.raise_if_any()
        if self._node_part is not None:
            emit(Progress(stage="partition", done=1, total=1, message=f"given, {world_size} parts"))
            return graph, torch.as_tensor(self._node_part, dtype=torch.int64), None
        method = cfg.partition if world_size > 1 else "none"
        emit(Progress(stage="partition", done=0, total=1, message=f"{method}, {world_size} parts"))
        node_part, result = partition_nodes(graph, world_size, cfg.partition, cfg.seed)
        elapsed = getattr(result, "elapsed_s", None)
        emit(Progress(stage="partition", done=1, total=1, message=f"{method}, {world_size} parts"
                      + (f", {elapsed:.2f} s" if elapsed is not None else "")))
        return graph, node_part, result


class FullGraphProgram(PartitionedProgram):
    """Halo-exchange full-graph training, SPMD over the ranks (see the module docstring)."""

    name = "full_graph"

    def prepare(self, world_size: int, emit: Callable[[Event], None]) -> list[RankShard]:
        cfg = self.config
        graph, node_part, result = self._load_and_partition(world_size, emit)
        widths = self.input_widths(graph)
        shards, plans = build_shards(graph, node_part, world_size, cfg.model, widths)
        self.predicted = shards[0].predicted
        emit(_partition_event(graph, node_part, world_size, cfg.partition, result, [p.num_halo for p in plans],
                              graph.num_features))
        return shards

    def run_rank(self, ctx: RankContext, shard: RankShard) -> dict:
        cfg = self.config
        data, plan = shard.data, shard.plan
        model = GNNModel(cfg.model, in_dim=data.features.shape[1], hidden=cfg.hidden, out_dim=shard.num_classes,
                         num_layers=cfg.num_layers, seed=cfg.seed).to(ctx.device)
        shape = (plan.num_inner, plan.num_inner + plan.num_halo)
        a, a_t = sparse_aggregator(shard.agg_rows, shard.agg_cols, shard.agg_weights, shape)
        a, a_t = a.to(ctx.device), a_t.to(ctx.device)
        x = data.features.to(ctx.device)
        labels = data.labels.to(ctx.device)
        masks = tuple(m.to(ctx.device) for m in data.masks)
        plan = _plan_to(plan, ctx.device)
        opt = make_optimizer(cfg.optimizer, model.parameters(), cfg.lr, cfg.weight_decay)
        comm = ctx.comm

        def aggregate(h: torch.Tensor, layer: int) -> torch.Tensor:
            return SpMM.apply(a, a_t, plan.exchange(h, comm, layer))   # (num_inner, F_layer)

        rec = EpochRecorder(ctx, ("halo_fwd", "halo_bwd"), cfg)
        for epoch in range(cfg.epochs):
            rec.start(epoch)
            ctx.check_stop()
            opt.zero_grad(set_to_none=False)
            logits = model(x, aggregate)
            loss = masked_loss(logits, labels, masks[0], shard.num_train_global)
            loss.backward()
            allreduce_gradients(model, comm, ctx.world_size)
            opt.step()
            rec.end(global_metrics(comm, ctx.world_size, loss, logits, labels, masks))
        out = rec.finish(model)
        out["predicted"] = shard.predicted
        return out

    def summarize(self, rank_results: list[dict]) -> dict:
        predicted = self.predicted or rank_results[0].get("predicted", {})
        return summarize_ranks(rank_results, name=self.name, predicted=predicted,
                               extra={"model": self.config.model, "partition": self.config.partition})



def _plan_to(plan: HaloExchangePlan, device: torch.device) -> HaloExchangePlan:
    if torch.device(device).type == "cpu":
        return plan
    return dataclasses.replace(plan, send_local_nid=[t.to(device) for t in plan.send_local_nid])
