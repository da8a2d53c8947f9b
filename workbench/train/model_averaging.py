"""Local training per part with periodic weighted model averaging (CATGNN's training module).

Each part is a standalone subgraph: its owned vertices (the only training targets) plus a halo of ``halo_hops``
hops, with every edge that touches a vertex within ``halo_hops - 1`` hops of the owned set (``halo_hops = 1``:
every owned vertex keeps its full 1-hop neighbourhood; ``0``: the ablation where a cross edge sits only in the
part that owns its smaller endpoint id, as CATGNN's reference code does). Normalisation uses the subgraph's own
degrees, as a standalone DGL partition graph would.

A rank trains its parts' models locally with no gradient all-reduce: full batch (the default), or in
mini-batches sampled inside the part (``sample``: any block sampler, e.g. ``--set sample.method=neighbor``;
CATGNN's local training, digest 002 §1.4): every epoch a part's owned training vertices are shuffled (keyed by
the sampler's seed, the epoch and the part) and cut into batches of ``batch_size`` seeds, whose blocks are
sampled from the part's subgraph only (its halo is the edge of its world), one optimiser step per batch.
Every ``sync.interval`` epochs (and after the last epoch) the models are averaged, ``W = sum_k alpha_k W_k``
with ``alpha_k`` the part's share of training vertices (``weighting="train"``, CATGNN §1.5) or ``1 / P``, in ONE all-reduce of the
flattened parameters (kind ``model_avg``; a ring all-reduce of ``4 * num_params`` bytes). Optimiser state is
never averaged (each part keeps its Adam moments, as the reference code). More parts than ranks: rank ``r``
trains parts ``r, r + q, ...`` one after another, each with its own model and optimiser (§1.5's ``p > q``).

Evaluation is on the full graph with full-neighbour inference, on rank 0, with the model rank 0 holds (the
averaged one after a sync); the summary reports the last epoch and the best-validation epoch (§5).

It is the program of ``sync.method=model_avg`` (:class:`~workbench.train.sync.ModelAveraging`, whose config
holds ``interval``, ``halo_hops``, ``weighting`` and ``replica_init``) in a :class:`~workbench.compose.RunConfig`:
any partitioner, either model, full batch or any block sampler.

Example:
    >>> from workbench.compose import RunConfig
    >>> cfg = RunConfig.compose(graph="karate", num_parts=2, partition="spring", sync="model_avg", interval=2)
    >>> cfg.method("exchange"), cfg.build().world_size_for(4)
    ('none', 2)
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Callable, Optional

import torch

from workbench._validation import ErrorCollector
from workbench.composition import stages_summary
from workbench.events import Event, Progress
from workbench.graph import Graph
from workbench.runtime.program import Program, RankContext
from workbench.stages import registry
from workbench.sample.base import Sampler, block_samplers
from workbench.sample.sources import LocalSource
from workbench.train.loop import StepOutput, TrainLoop, make_optimizer, summarize_ranks
from workbench.train.minibatch import block_aggregators, block_forward
from workbench.train.models import MODELS, SpMM, edge_weights, node_scales, sparse_aggregator, with_self_loops

__all__ = ["check_model_averaging", "ModelAveragingProgram", "PartShard", "part_subgraph", "AveragingLoop"]


def check_model_averaging(cfg: Any, errs: ErrorCollector) -> None:
    """What model averaging refuses in a run config: a sampler that is not a block sampler (each part samples
    its own blocks) and sampler settings it would ignore (``split``, ``trainers``)."""
    if cfg.sample is None:
        return
    name = cfg.method("sample")
    if name not in block_samplers():
        errs.check(False, "sample.method", f"none or a block sampler ({'|'.join(block_samplers())}) under "
                   "sync.method=model_avg: each part samples its own blocks", name)
        return
    default = Sampler.Config()
    for field, why in (("split", "each part trains its own training vertices"),
                       ("trainers", "each part is its own trainer")):
        value = getattr(cfg.sample, field)
        errs.check(value == getattr(default, field), f"sample.{field}",
                   f"{getattr(default, field)!r} under sync.method=model_avg ({why}; the setting would have no "
                   "effect)", value)


# --------------------------------------------------------------------------------------------------------
# Part subgraphs
# --------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class PartShard:
    """One part's standalone subgraph (local ids ``0..num_local-1``; owned vertices first).

    Attributes:
        part: the part id.
        gid: ``(num_local,)`` global id of each local vertex.
        num_owned: owned vertices (local ids ``0..num_owned-1``).
        agg_rows, agg_cols, agg_weights: COO of the local ``Â`` (local degrees; GCN self-loops included).
        features, labels: rows of the local vertices.
        train_mask: owned training vertices (halo vertices are never targets).
        edge_src, edge_dst: the subgraph's edges in local ids (no self-loops).
        alpha: the part's averaging weight.
        agg_scales: ``(r, c)`` with ``agg_weights == r[agg_rows] * c[agg_cols]``
            (:func:`~workbench.train.models.node_scales`): the CPU may then use an unweighted kernel.
    """

    part: int
    gid: torch.Tensor
    num_owned: int
    agg_rows: torch.Tensor
    agg_cols: torch.Tensor
    agg_weights: torch.Tensor
    features: torch.Tensor
    labels: torch.Tensor
    train_mask: torch.Tensor
    alpha: float = 1.0
    agg_scales: Optional[tuple[torch.Tensor, torch.Tensor]] = None
    edge_src: Optional[torch.Tensor] = None
    """Local ids of the subgraph's edges' sources (no self-loops): what a sampler draws in-neighbours from."""
    edge_dst: Optional[torch.Tensor] = None

    @property
    def num_local(self) -> int:
        return int(self.gid.numel())

    @property
    def num_train(self) -> int:
        return int(self.train_mask.sum())


def _triplets(model: str, src: torch.Tensor, dst: torch.Tensor, num_nodes: int):
    """``(rows, cols, weights, (r, c))`` of ``Â`` for the edges ``src -> dst`` of a standalone graph (its
    degrees); ``weights == r[rows] * c[cols]``."""
    in_deg = torch.bincount(dst, minlength=num_nodes)
    out_deg = torch.bincount(src, minlength=num_nodes)
    s, d = with_self_loops(model, src, dst, torch.arange(num_nodes))
    return d, s, edge_weights(model, s, d, in_deg[d], out_deg[s]), node_scales(model, in_deg, out_deg)


def part_subgraph(graph: Graph, node_part: torch.Tensor, part: int, halo_hops: int, model: str) -> PartShard:
    """Part ``part``'s standalone subgraph with a ``halo_hops`` halo (see the module docstring; vectorised).

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> g = Graph.from_edges(torch.tensor([0, 1, 1, 2, 2, 3]), torch.tensor([1, 0, 2, 1, 3, 2]), 4,
        ...                      directed=False, features=torch.eye(4), labels=torch.tensor([0, 1, 0, 1]),
        ...                      train_mask=torch.ones(4, dtype=torch.bool))
        >>> s = part_subgraph(g, torch.tensor([0, 0, 1, 1]), 0, 1, "sage")
        >>> s.gid.tolist(), s.num_owned, s.train_mask.tolist()
        ([0, 1, 2], 2, [True, True, False])
    """
    src, dst = graph.edges()
    n = graph.num_nodes
    owned = node_part == part
    if halo_hops == 0:
        lo = torch.minimum(src, dst)
        keep = (owned[src] & owned[dst]) | ((node_part[src] != node_part[dst]) & (node_part[lo] == part))
        inside = owned.clone()
        inside[src[keep]] = True
        inside[dst[keep]] = True
    else:
        core = owned.clone()   # vertices within halo_hops - 1 hops: their full in-neighbourhood is kept
        for _ in range(halo_hops - 1):
            grown = core.clone()
            grown[src[core[dst]]] = True
            core = grown
        inside = core.clone()
        inside[src[core[dst]]] = True
        keep = (core[dst] | core[src]) & inside[src] & inside[dst]
    gid = torch.cat([torch.nonzero(owned).flatten(), torch.nonzero(inside & ~owned).flatten()])
    g2l = torch.full((n,), -1, dtype=torch.int64)
    g2l[gid] = torch.arange(gid.numel())
    local_src, local_dst = g2l[src[keep]], g2l[dst[keep]]
    rows, cols, w, scales = _triplets(model, local_src, local_dst, gid.numel())
    num_owned = int(owned.sum())
    labels = graph.labels[gid]
    train = torch.zeros(gid.numel(), dtype=torch.bool)
    if graph.train_mask is not None:
        train[:num_owned] = graph.train_mask[gid[:num_owned]] & (labels[:num_owned] >= 0)
    return PartShard(part=part, gid=gid, num_owned=num_owned, agg_rows=rows, agg_cols=cols, agg_weights=w,
                     agg_scales=scales, features=graph.features[gid], labels=labels, train_mask=train,
                     edge_src=local_src, edge_dst=local_dst)


@dataclasses.dataclass(eq=False)
class _Payload:
    shards: list
    num_classes: int
    full: Optional[dict] = None   # rank 0: the full graph for evaluation
    num_params_bytes: int = 0


# --------------------------------------------------------------------------------------------------------
# Program and loop
# --------------------------------------------------------------------------------------------------------


class ModelAveragingProgram(Program):
    """Prepare the parts' subgraphs on the client; train locally and average on the ranks."""

    name = "catgnn"
    trainer = "local training per part with model averaging (CATGNN)"

    def __init__(self, config: Any, *, graph: Optional[Graph] = None, node_part: Any = None):
        super().__init__(config)
        self._graph = graph
        self._node_part = node_part
        self.partition_result: Any = None
        self.shard_sizes: list[dict] = []

    @classmethod
    def check_config(cls, config: Any, errs: ErrorCollector) -> None:
        check_model_averaging(config, errs)

    def world_size_for(self, requested: Optional[int]) -> int:
        ranks = int(requested or 1)
        return min(ranks, self.config.num_parts) if self.config.num_parts else ranks

    def prepare(self, world_size: int, emit: Callable[[Event], None]) -> list:
        from workbench.train.full_graph import load_and_partition

        cfg = self.config
        num_parts = cfg.num_parts or world_size
        graph, node_part, result = load_and_partition(cfg, world_size, graph=self._graph, node_part=self._node_part,
                                                      owner=type(self).__name__, emit=emit, num_parts=num_parts)
        self.partition_result = result
        if result is not None:
            try:
                emit(result.to_event())
            except Exception:  # a metrics failure must not stop training
                pass
        model = cfg.method("model")
        emit(Progress(stage="subgraphs", done=0, total=num_parts, message=f"K = {cfg.sync.halo_hops}"))
        shards = [part_subgraph(graph, node_part, p, cfg.sync.halo_hops, model) for p in range(num_parts)]
        total_train = sum(s.num_train for s in shards)
        for s in shards:
            s.alpha = (s.num_train / total_train if total_train else 1.0 / num_parts) if cfg.sync.weighting == "train" \
                else 1.0 / num_parts
        self.shard_sizes = [{"part": s.part, "owned": s.num_owned, "local": s.num_local, "train": s.num_train,
                             "alpha": s.alpha, "local_edges": int(s.agg_rows.numel())} for s in shards]
        emit(Progress(stage="subgraphs", done=num_parts, total=num_parts))
        src, dst = graph.edges()
        rows, cols, w, scales = _triplets(model, src, dst, graph.num_nodes)
        full = {"rows": rows, "cols": cols, "weights": w, "scales": scales, "features": graph.features,
                "labels": graph.labels,
                "masks": tuple(m if m is not None else torch.zeros(graph.num_nodes, dtype=torch.bool)
                               for m in (graph.train_mask, graph.val_mask, graph.test_mask))}
        return [_Payload(shards=shards[r::world_size], num_classes=graph.num_classes, full=full if r == 0 else None)
                for r in range(world_size)]

    def run_rank(self, ctx: RankContext, payload: _Payload) -> dict:
        cfg = self.config
        ctx.kernel = cfg.train.kernel
        stage = MODELS.build(cfg.method("model"), cfg.model)
        in_dim = payload.shards[0].features.shape[1]
        models = [stage.build(in_dim=in_dim, out_dim=payload.num_classes,
                              seed=cfg.train.seed + (s.part if cfg.sync.replica_init == "independent" else 0)).to(ctx.device)
                  for s in payload.shards]
        return AveragingLoop(ctx, models, cfg, payload).run()

    def summarize(self, rank_results: list[dict]) -> dict:
        cfg = self.config
        r0 = min(rank_results, key=lambda r: r.get("rank", 0))
        summary = summarize_ranks(rank_results, name=self.name, predicted={},
                                  extra={**stages_summary(cfg), "sample": cfg.method("sample"),
                                         **({"fanouts": list(cfg.sample.fanouts), "batch_size": cfg.sample.batch_size}
                                            if cfg.sample is not None else {}),
                                         "sync_interval": cfg.sync.interval,
                                         "halo_hops": cfg.sync.halo_hops,
                                         "num_parts": cfg.num_parts or len(rank_results), "parts": self.shard_sizes})
        summary.update({k: r0[k] for k in ("best_epoch", "best_val_acc", "test_acc_at_best_val", "num_syncs",
                                           "num_params")})
        summary["steps"] = [sum(r["steps"][e] for r in rank_results) for e in range(len(r0["steps"]))]
        p = len(rank_results)
        per_sync = sum(2 * (p - 1) * 4 * r0["num_params"] // p for _ in range(p)) if p > 1 else 0
        summary["predicted_model_avg_bytes"] = per_sync * r0["num_syncs"]
        return summary


class AveragingLoop(TrainLoop):
    """Local training of a rank's parts (full batch, or mini-batches sampled inside each part; no gradient
    all-reduce) and weighted model averaging."""

    def __init__(self, ctx, models: list, config: Any, payload: _Payload):
        tc = config.train
        super().__init__(ctx, models[0], tc, exchange_kinds=("model_avg",),
                         sync=registry("sync").build(config.method("sync"), config.sync))
        self.cfg = config
        self.models = models
        self.optimizers = [self.optimizer] + [make_optimizer(tc.optimizer, m.parameters(), tc.lr, tc.weight_decay)
                                              for m in models[1:]]
        dev = ctx.device
        self.parts = []
        for s in payload.shards:
            a, a_t = sparse_aggregator(s.agg_rows, s.agg_cols, s.agg_weights, (s.num_local, s.num_local), dev,
                                       scales=s.agg_scales, kernel=ctx.kernel)
            self.parts.append((s, a, a_t, s.features.to(dev), s.labels.to(dev), s.train_mask.to(dev)))
        self.full = None
        if payload.full is not None:
            f = payload.full
            n = f["features"].shape[0]
            a, a_t = sparse_aggregator(f["rows"], f["cols"], f["weights"], (n, n), dev, scales=f["scales"],
                                       kernel=ctx.kernel)
            self.full = (a, a_t, f["features"].to(dev), f["labels"].to(dev),
                         tuple(m.to(dev) for m in f["masks"]))
        self.sampler = self.sources = None
        if config.sample is not None:
            self.sampler = registry("sample").build(config.method("sample"), config.sample)
            self.sources = [LocalSource(Graph.from_edges(s.edge_src, s.edge_dst, s.num_local)) for s in payload.shards]
            self.kind = config.method("model")
        self.num_params = sum(p.numel() for p in models[0].parameters())
        self.steps: list[int] = []
        """Optimiser steps per epoch, over this rank's parts (one per part in full-batch training)."""
        self.best = (-1, -1.0, None)

    def batches(self, epoch: int):
        self.steps.append(0)
        for k in range(len(self.models)):
            self.model, self.optimizer = self.models[k], self.optimizers[k]
            if self.sampler is None:
                self.steps[-1] += 1
                yield k
                continue
            for step, seeds in enumerate(self._part_batches(k, epoch)):
                self.steps[-1] += 1
                yield k, step, seeds

    def _part_batches(self, k: int, epoch: int) -> list[torch.Tensor]:
        """Part ``k``'s owned training vertices (local ids) shuffled by (sampler seed, epoch, part), in batches."""
        s = self.parts[k][0]
        ids = torch.nonzero(s.train_mask).flatten()
        gen = torch.Generator().manual_seed(((self.cfg.sample.seed * 1_000_003 + epoch) * 1_000_033 + s.part) % (1 << 63))
        ids = ids[torch.randperm(ids.numel(), generator=gen)]
        return list(ids.split(self.cfg.sample.batch_size))

    def forward(self, batch) -> StepOutput:
        if self.sampler is not None:
            return self._forward_sampled(*batch)
        s, a, a_t, x, labels, train = self.parts[batch]
        logits = self.model(x, lambda h, layer: SpMM.apply(a, a_t, h))
        if bool(train.any()):
            loss = torch.nn.functional.cross_entropy(logits[train], labels[train], reduction="sum") / int(train.sum())
        else:
            loss = logits.sum() * 0.0
        none = torch.zeros_like(train)
        return StepOutput(loss, logits, labels, (train, none, none), extra={"alpha": s.alpha})

    def _forward_sampled(self, k: int, step: int, seeds: torch.Tensor) -> StepOutput:
        """One mini-batch of part ``k``: blocks sampled from the part's subgraph (key: epoch, part, step)."""
        s, _, _, x, labels, _ = self.parts[k]
        with self.timer.phase("sample"):
            mb = self.sampler.sample(seeds, self.sources[k], epoch=self.epoch, step=(s.part << 24) + step)
        with self.timer.phase("fetch"):
            h = x[mb.input_gid.to(x.device)]
        logits = block_forward(self.model, block_aggregators(self.kind, mb.blocks, self.ctx.device, self.ctx.kernel), h)
        y = labels[seeds.to(labels.device)]
        loss = torch.nn.functional.cross_entropy(logits, y)
        yes = torch.ones(seeds.numel(), dtype=torch.bool, device=logits.device)
        return StepOutput(loss, logits.detach(), y, (yes, ~yes, ~yes), extra={"alpha": s.alpha, "part": k})

    def replicas(self) -> list:
        """Every part's model with its averaging weight ``alpha_k`` (what ``sync.method=model_avg`` averages)."""
        return [(m, s.alpha) for (s, *_), m in zip(self.parts, self.models)]

    def evaluate(self, epoch: int, outputs: list[StepOutput]) -> dict:
        per_part: dict = {}   # the epoch's loss: sum over parts of alpha_k x the part's mean step loss
        for o in outputs:
            per_part.setdefault(o.extra.get("part", id(o)), []).append(o)
        loss = sum(sum(float(o.loss.detach()) for o in outs) / len(outs) * outs[0].extra["alpha"]
                   for outs in per_part.values())
        vals = [loss, 0.0, 0.0, 0.0]
        if self.full is not None:
            a, a_t, x, labels, masks = self.full
            with torch.no_grad():
                pred = self.models[0](x, lambda h, layer: SpMM.apply(a, a_t, h)).argmax(dim=1)
            for i, m in enumerate(masks):
                m = m & (labels >= 0)
                vals[1 + i] = float((pred[m] == labels[m]).float().mean()) if bool(m.any()) else float("nan")
        t = torch.tensor(vals, dtype=torch.float64, device=self.ctx.device)
        if self.ctx.world_size > 1:
            self.comm.all_reduce(t, kind="metrics")
        t = t.cpu().tolist()
        metrics = {"loss": t[0], "train_acc": t[1], "val_acc": t[2], "test_acc": t[3]}
        if t[2] == t[2] and t[2] > self.best[1]:
            self.best = (epoch, t[2], t[3])
        return metrics

    def extra_result(self) -> dict:
        return {"best_epoch": self.best[0], "best_val_acc": self.best[1], "test_acc_at_best_val": self.best[2],
                "num_params": self.num_params, "steps": self.steps}
