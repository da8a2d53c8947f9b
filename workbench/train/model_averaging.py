"""Local training per part with periodic weighted model averaging (CATGNN's training module).

Each part is a standalone subgraph: its owned vertices (the only training targets) plus a halo of ``halo_hops``
hops, with every edge that touches a vertex within ``halo_hops - 1`` hops of the owned set (``halo_hops = 1``:
every owned vertex keeps its full 1-hop neighbourhood; ``0``: the ablation where a cross edge sits only in the
part that owns its smaller endpoint id, as CATGNN's reference code does). Normalisation uses the subgraph's own
degrees, as a standalone DGL partition graph would.

A rank trains its parts' models locally with no gradient all-reduce: full batch (the default), or in
mini-batches sampled inside the part (``sample``: any block sampler, e.g. ``--set sample.method=neighbor``;
CATGNN's local training, §3.3): every epoch a part's owned training vertices are shuffled (keyed by
the sampler's seed, the epoch and the part) and cut into batches of ``batch_size`` seeds, whose blocks are
sampled from the part's subgraph only (its halo is the edge of its world), one optimiser step per batch.
Every ``sync.interval`` epochs (and after the last epoch) the models are averaged, ``W = sum_k alpha_k W_k``
with ``alpha_k`` the part's share of training vertices (``weighting="train"``, CATGNN §3.3) or ``1 / P``, in
ONE all-reduce of the flattened parameters (kind ``model_avg``; a ring all-reduce of ``4 * num_params``
bytes). Optimiser state is never averaged (each part keeps its Adam moments, as the reference code). More
parts than ranks: rank ``r`` trains parts ``r, r + q, ...`` one after another, each with its own model and
optimiser (§3.3's ``p > q``).

Evaluation is on the full graph with full-neighbour inference, on rank 0, with the model rank 0 holds (the
averaged one after a sync); the summary reports the last epoch and the best-validation epoch (CATGNN §5.1
reports the latter).

From a partition folder (``graph="parts:DIR"`` or ``"parts:dir=DIR,select=0+1"``, written by ``workbench partition
FILE --stream --out DIR --with-features X.npy --labels Y.npy``) nothing is loaded on the client: each rank reads
its own parts from their files (:func:`folder_shard`, the same shards as :func:`part_subgraph` of the whole
graph), so its memory follows its parts, not the graph. The whole graph is then never in one place, so rank 0
evaluates its own parts instead, each on its owned vertices (:class:`_FolderEval`): the accuracies of every
selected part when one rank trains them all, of rank 0's parts otherwise.

In mini-batch mode a part is never loaded whole (:mod:`workbench.train.sampled_parts`: no ``Â``; a folder's CSR
and feature rows are read per batch, the evaluation runs in batches, ``sync.eval_sample``), so a rank's memory
follows the batch. Full batch keeps each part's matrices (a folder's part drops its triplets once they are built).

It is the program of ``sync.method=model_avg`` (:class:`~workbench.train.sync.ModelAveraging`, whose config
holds ``interval``, ``halo_hops``, ``weighting``, ``replica_init`` and ``eval_sample``) in a
:class:`~workbench.compose.RunConfig`: any partitioner, any model stage, full batch or any block sampler.

Example:
    >>> from workbench.compose import RunConfig
    >>> cfg = RunConfig.compose(graph="karate", num_parts=2, partition="spring",
    ...                         sync={"method": "model_avg", "interval": 2})
    >>> cfg.method("exchange"), cfg.build().world_size_for(4)
    ('none', 2)
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import numpy as np
import torch

from workbench._validation import ErrorCollector
from workbench.composition import register_trainer
from workbench.events import Event, Progress
from workbench.graph import Graph
from workbench.runtime.program import RankContext
from workbench.stages import registry
from workbench.summary import rank_fragment
from workbench.train.loop import StepOutput, Steps
from workbench.train.minibatch import block_aggregators, block_forward
from workbench.train.evaluation import EVALUATORS, Evaluator
from workbench.train.kernels import leading_rows
from workbench.train.models import (MODELS, ModelStage, SpMM, edge_weights, node_scales, sparse_aggregator,
                                    with_self_loops)
from workbench.train.objective import NodeTargets, loss_of
from workbench.train.program import Trainer
from workbench.train.sampled_parts import evaluate_sampled, folder_sampled_part, shard_sampled_part

__all__ = ["check_model_averaging", "ModelAveragingTrainer", "PartShard", "part_subgraph", "folder_shard",
           "AveragingSteps"]


def check_model_averaging(cfg: Any, errs: ErrorCollector) -> None:
    """What model averaging refuses in a run config beyond the declared capabilities (an edge sampler needs an
    embedding exchange; ``sample.split`` and ``sample.trainers`` a global seed split): ``sync.eval_sample`` other
    than 'full' where nothing is evaluated in batches (full batch, or a graph that is not a partition folder)."""
    from workbench.data.partfolder import parts_config_of

    eval_sample = getattr(cfg.sync, "eval_sample", "full")
    errs.check(eval_sample == "full" or (cfg.sample is not None and parts_config_of(cfg.graph) is not None),
               "sync.eval_sample", "'full' unless a partition folder's parts train in mini-batches (sample set, "
               "graph='parts:...'; the setting would have no effect)", eval_sample)


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

    @property
    def num_features(self) -> int:
        return int(self.features.shape[1])


def _triplets(model: ModelStage, src: torch.Tensor, dst: torch.Tensor, num_nodes: int):
    """``(rows, cols, weights, (r, c))`` of the model stage's ``Â`` for the edges ``src -> dst`` of a standalone
    graph (its degrees); ``weights == r[rows] * c[cols]``."""
    in_deg = torch.bincount(dst, minlength=num_nodes)
    out_deg = torch.bincount(src, minlength=num_nodes)
    s, d = with_self_loops(model, src, dst, torch.arange(num_nodes))
    return d, s, edge_weights(model, s, d, in_deg[d], out_deg[s]), node_scales(model, in_deg, out_deg)


def part_subgraph(graph: Graph, node_part: torch.Tensor, part: int, halo_hops: int, model: ModelStage) -> PartShard:
    """Part ``part``'s standalone subgraph with a ``halo_hops`` halo (see the module docstring; vectorised).

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> g = Graph.from_edges(torch.tensor([0, 1, 1, 2, 2, 3]), torch.tensor([1, 0, 2, 1, 3, 2]), 4,
        ...                      directed=False, features=torch.eye(4), labels=torch.tensor([0, 1, 0, 1]),
        ...                      train_mask=torch.ones(4, dtype=torch.bool))
        >>> s = part_subgraph(g, torch.tensor([0, 0, 1, 1]), 0, 1, MODELS.build("sage"))
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
    num_owned = int(owned.sum())
    train = None if graph.train_mask is None else graph.train_mask[gid[:num_owned]]
    return _shard(part, gid, num_owned, local_src, local_dst, graph.features[gid], graph.labels[gid], train, model)


def _shard(part: int, gid: torch.Tensor, num_owned: int, local_src: torch.Tensor, local_dst: torch.Tensor,
           features: torch.Tensor, labels: torch.Tensor, train_owned: Optional[torch.Tensor], model: ModelStage):
    """A :class:`PartShard` from a part's local edges and node data (``train_owned``: the owned vertices' train
    mask, or ``None``): the one construction of :func:`part_subgraph` and :func:`folder_shard`."""
    rows, cols, w, scales = _triplets(model, local_src, local_dst, gid.numel())
    train = torch.zeros(gid.numel(), dtype=torch.bool)
    if train_owned is not None:
        train[:num_owned] = train_owned & (labels[:num_owned] >= 0)
    e = local_src.numel()   # Â's entries start with the edges (self-loops after): the edges are views of them
    return PartShard(part=part, gid=gid, num_owned=num_owned, agg_rows=rows, agg_cols=cols, agg_weights=w,
                     agg_scales=scales, features=features, labels=labels, train_mask=train,
                     edge_src=cols[:e], edge_dst=rows[:e])


def folder_shard(folder: Any, part: int, model: ModelStage) -> PartShard:
    """Part ``part`` of a partition folder (:class:`~workbench.data.partfolder.PartFolder`) as a :class:`PartShard`:
    the folder holds ``part_subgraph(graph, owner, part, 1, model)``'s subgraph, and its edges are put in that
    function's order (destinations, then sources, by global id), so the shard is the same. Reads the part's
    memory maps into this process's memory (full-batch training; mini-batch training reads a part per batch,
    :func:`~workbench.train.sampled_parts.folder_sampled_part`)."""
    a = folder.open_part(part)
    num_owned = int(folder.parts[part]["num_owned"])
    gid = np.array(a["gid"], dtype=np.int64)
    indptr = np.asarray(a["indptr"])
    rows = np.argsort(gid, kind="stable")          # local rows in global id order
    lens = np.diff(indptr)[rows]
    ends = np.cumsum(lens)
    edge = np.arange(int(lens.sum())) - np.repeat(ends - lens - indptr[rows], lens)
    local_src = torch.from_numpy(np.asarray(a["indices"])[edge].astype(np.int64))
    local_dst = torch.from_numpy(np.repeat(rows, lens).astype(np.int64))
    features = torch.from_numpy(folder.part_features(part, a))
    labels = torch.from_numpy(np.array(a["labels"], dtype=np.int64))
    train = torch.from_numpy(np.array(a["train_mask"][:num_owned], dtype=bool))
    return _shard(part, torch.from_numpy(gid), num_owned, local_src, local_dst, features, labels, train, model)


class _FolderPart:
    """A part of a partition folder, loaded by the rank that trains it the first time it reads the subgraph
    (:func:`folder_shard`). ``part``, ``alpha``, ``num_owned``, ``num_local`` and ``num_train`` come from the
    manifest (``num_features`` too); every other attribute is the loaded :class:`PartShard`'s (full-batch
    training; local mini-batch training reads the part per batch instead,
    :func:`~workbench.train.sampled_parts.folder_sampled_part`). Pickled without the loaded shard."""

    def __init__(self, path: str, part: int, model: ModelStage, info: dict, num_features: int):
        self.path, self.part, self.model = str(path), part, model
        self.num_owned, self.num_local, self.num_train = info["num_owned"], info["num_local"], info["num_train"]
        self.num_features = int(num_features)
        self.alpha = 1.0
        self._shard: Optional[PartShard] = None

    def load(self) -> PartShard:
        if self._shard is None:
            from workbench.data.partfolder import PartFolder

            self._shard = folder_shard(PartFolder(self.path), self.part, self.model)
            self._shard.alpha = self.alpha
        return self._shard

    def release(self) -> None:
        """Drop the loaded shard (what is still used of it is held elsewhere: full-batch training keeps the
        matrices built from its triplets and its node data, not the triplets themselves)."""
        self._shard = None

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.load(), name)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_shard": None}


class _FolderEval:
    """Rank 0's evaluation of a partition folder: its parts, each scored on its owned train/val/test vertices
    through the matrices it trains on (:class:`AveragingSteps`: last layer on the owned rows; in mini-batch mode in
    batches of full-neighbour blocks, :func:`~workbench.train.sampled_parts.evaluate_sampled`), so the accuracies
    are over all of rank 0's parts (all selected parts when one rank trains them). It holds the parts' handles
    only: nothing is read on the client, and it pickles small."""

    _d = None   # no graph of its own: the parts are scored where they are trained

    def __init__(self, parts: list):
        self.parts = parts


def _owned_masks(part: Any, shard: Any) -> tuple:
    """A folder part's owned rows' train/val/test masks, labelled vertices only (what :class:`_FolderEval` scores)."""
    from workbench.data.partfolder import PartFolder

    k = shard.num_owned
    arrays = PartFolder(part.path).open_part(part.part)
    labelled = shard.labels[:k] >= 0
    return (shard.train_mask[:k],) + tuple(torch.from_numpy(np.array(arrays[name][:k], dtype=bool)) & labelled
                                           for name in ("val_mask", "test_mask"))


@dataclasses.dataclass(eq=False)
class _Payload:
    shards: list                   # PartShard, or _FolderPart (a partition folder's part, loaded in the rank)
    num_classes: int
    full: Any = None   # rank 0: the full graph for evaluation (a Mapping), or _FolderEval (its parts)
    num_params_bytes: int = 0


# --------------------------------------------------------------------------------------------------------
# Program and loop
# --------------------------------------------------------------------------------------------------------


@register_trainer("model_averaging", name="catgnn", trainer="local training per part with model averaging (CATGNN)",
                  provides=frozenset({"node labels", "one model per part"}),
                  batches="one part after another, each training its own model", chosen_by="a sync method that trains per part")
class ModelAveragingTrainer(Trainer):
    """Prepare the parts' subgraphs on the client; train locally and average on the ranks."""

    def __init__(self, config: Any, *, spec: Any, graph: Optional[Graph] = None, node_part: Any = None):
        super().__init__(config, spec=spec, graph=graph, node_part=node_part)
        self.partition_result: Any = None
        self.shard_sizes: list[dict] = []

    @classmethod
    def check_config(cls, config: Any, errs: ErrorCollector) -> None:
        check_model_averaging(config, errs)

    def world_size_for(self, requested: Optional[int]) -> int:
        ranks = int(requested or 1)
        return min(ranks, self.config.num_parts) if self.config.num_parts else ranks

    def prepare(self, world_size: int, emit: Callable[[Event], None]) -> list:
        from workbench.data.partfolder import parts_config_of
        from workbench.train.full_graph import load_and_partition

        folder = None if self._graph is not None else parts_config_of(self.config.graph)
        if folder is not None:
            return self._prepare_folder(folder, world_size, emit)
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
        model = self.model_stage
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

    def _prepare_folder(self, spec: Any, world_size: int, emit: Callable[[Event], None]) -> list:
        """``graph='parts:DIR'``: train the folder's selected parts; each rank reads only its own (lazily, in the
        rank), nothing is loaded here. Evaluation: :class:`_FolderEval` (rank 0's parts, owned vertices)."""
        from workbench.train.part_source import folder_partition_event

        cfg = self.config
        folder = spec.folder()
        m, selected = folder.manifest, spec.selected()
        errs = ErrorCollector(type(cfg).__name__)
        errs.check(cfg.num_parts in (None, len(selected)), "num_parts",
                   f"None or {len(selected)} (the parts graph={cfg.graph!r} selects)", cfg.num_parts)
        errs.check(world_size <= len(selected), "num_parts",
                   f"at least the world size {world_size} (a rank trains at least one part; the folder's selected "
                   "parts)", len(selected))
        errs.check(cfg.sync.halo_hops == 1, "sync.halo_hops",
                   "1 with a partition folder (its parts hold the 1-hop completed subgraphs)", cfg.sync.halo_hops)
        named = cfg.named_method("partition") if hasattr(cfg, "named_method") else cfg.method("partition")
        errs.check(named in (None, m["method"]), "partition.method",
                   f"unset or the folder's method {m['method']!r} (graph={cfg.graph!r} trains the parts it holds; "
                   "the setting would be ignored)", named)
        errs.raise_if_any()
        info = folder.parts
        try:
            emit(folder_partition_event(folder))
        except Exception:  # a metrics failure must not stop training
            pass
        model = self.model_stage
        shards = [_FolderPart(folder.path, p, model, info[p], int(m["feature_dim"])) for p in selected]
        total_train = sum(s.num_train for s in shards)
        for s in shards:
            s.alpha = (s.num_train / total_train if total_train else 1.0 / len(shards)) \
                if cfg.sync.weighting == "train" else 1.0 / len(shards)
        loops = model.self_loops
        self.shard_sizes = [{"part": s.part, "owned": s.num_owned, "local": s.num_local, "train": s.num_train,
                             "alpha": s.alpha, "local_edges": info[s.part]["num_edges"] + (s.num_local if loops else 0)}
                            for s in shards]
        emit(Progress(stage="subgraphs", done=len(shards), total=len(shards), message=f"folder {folder.path}"))
        return [_Payload(shards=shards[r::world_size], num_classes=int(m["num_classes"]),
                         full=_FolderEval(shards[0::world_size]) if r == 0 else None) for r in range(world_size)]

    def models(self, ctx: RankContext, payload: _Payload) -> list:
        cfg = self.config
        in_dim = payload.shards[0].num_features
        return [self.build_model(ctx, in_dim, payload.num_classes,
                                 seed=cfg.train.seed + (s.part if cfg.sync.replica_init == "independent" else 0))
                for s in payload.shards]

    def steps(self, ctx: RankContext, payload: _Payload, models: list) -> Steps:
        return AveragingSteps(ctx, models, self.config, payload, self.model_stage)

    def summary_fragments(self, rank_results: list[dict], summary: Any) -> dict[str, dict]:
        """``sample`` (its method and settings) and ``model_averaging`` (settings, parts, best epoch, syncs, steps)."""
        cfg, p, steps = self.config, len(rank_results), [rank_fragment(r, "model_averaging")["steps"] for r in rank_results]
        own, sync = rank_fragment(rank_results[0], "model_averaging"), rank_fragment(rank_results[0], "sync")
        per_sync = sum(2 * (p - 1) * 4 * own["num_params"] // p for _ in range(p)) if p > 1 else 0
        return {"sample": {"sample": cfg.method("sample"),
                           **({"fanouts": list(cfg.sample.fanouts), "batch_size": cfg.sample.batch_size}
                              if cfg.sample is not None else {})},
                "model_averaging": {"sync_interval": cfg.sync.interval, "halo_hops": cfg.sync.halo_hops,
                                    "num_parts": cfg.num_parts or p, "parts": self.shard_sizes,
                                    **{k: own[k] for k in ("best_epoch", "best_val_acc", "test_acc_at_best_val")},
                                    "num_syncs": sync["num_syncs"], "num_params": own["num_params"],
                                    "steps": [sum(s[e] for s in steps) for e in range(len(steps[0]))],
                                    "predicted_model_avg_bytes": per_sync * sync["num_syncs"]}}


class AveragingSteps(Steps):
    """Local training of a rank's parts (full batch, or mini-batches sampled inside each part; no gradient
    all-reduce) and weighted model averaging. Full batch holds every part's matrices and feature rows; mini-batch
    one :class:`~workbench.train.sampled_parts.SampledPart` per part (a folder's: read per batch), and it evaluates
    a folder's parts in batches (:func:`~workbench.train.sampled_parts.evaluate_sampled`, ``sync.eval_sample``)."""

    evaluation = "per_part"

    def __init__(self, ctx, models: list, config: Any, payload: _Payload, model_stage: ModelStage):
        super().__init__(ctx, exchange_kinds=("model_avg",), objective=loss_of(config))
        self.cfg, self.model_stage = config, model_stage   # the stage's self-loops make the block aggregators
        self.models = models
        dev = ctx.device
        folder_eval = isinstance(payload.full, _FolderEval)
        self.parts: list = []
        """Per part: full batch, ``(shard, Â, Âᵀ, features, owned labels, owned train_mask)``; mini-batch, a
        :class:`~workbench.train.sampled_parts.SampledPart`."""
        self.owned_rows = []
        """Full batch, per part, ``Â``'s owned rows and their transpose (the last layer's aggregation: only owned
        vertices carry the loss, so a part's halo rows get no logits; at replication factor 9 that is most of a
        part's rows). The rows are a view of ``Â``'s first rows (owned vertices come first), not a copy."""
        self.sampler = None
        self.eval_parts: Optional[list] = None
        """A partition folder's evaluation on rank 0 (full batch): per part, the owned rows' train/val/test masks;
        the parts are scored one by one through the matrices they train on (their side-by-side graph is
        block-diagonal: the same predictions, without a second copy of the matrices or the halo rows' logits).
        Mini-batch: the parts' own ``eval_masks``."""
        if config.sample is not None:
            self.sampler = registry("sample").build(config.method("sample"), config.sample)
            self.parts = [folder_sampled_part(s.path, s.part, s.alpha, folder_eval) if isinstance(s, _FolderPart)
                          else shard_sampled_part(s) for s in payload.shards]
            if folder_eval:   # full neighbours (exact), or the training fan-outs
                self.eval_sampler = self.sampler if config.sync.eval_sample == "train" else \
                    registry("sample").build("neighbor", fanouts=(-1,) * models[0].num_layers)
        else:
            for s in payload.shards:
                a, a_t = sparse_aggregator(s.agg_rows, s.agg_cols, s.agg_weights, (s.num_local, s.num_local), dev,
                                           scales=s.agg_scales, kernel=ctx.kernel)
                k = s.num_owned   # only the owned rows carry the loss
                self.parts.append((s, a, a_t, s.features.to(dev), s.labels[:k].clone().to(dev),
                                   s.train_mask[:k].clone().to(dev)))
                own = s.agg_rows < s.num_owned
                scales = None if s.agg_scales is None else (s.agg_scales[0][:s.num_owned], s.agg_scales[1])
                _, own_t = sparse_aggregator(s.agg_rows[own], s.agg_cols[own], s.agg_weights[own],
                                             (s.num_owned, s.num_local), dev, scales=scales, kernel=ctx.kernel)
                self.owned_rows.append((leading_rows(a, s.num_owned), own_t))
                if folder_eval:
                    self.eval_parts = (self.eval_parts or []) + [tuple(m.to(dev) for m in _owned_masks(s, s))]
                if isinstance(s, _FolderPart):   # the part's COO triplets and ids: not needed once in CSR
                    s.release()
        self.full = None
        if payload.full is not None and not folder_eval:
            f = payload.full
            n = f["features"].shape[0]
            a, a_t = sparse_aggregator(f["rows"], f["cols"], f["weights"], (n, n), dev, scales=f["scales"],
                                       kernel=ctx.kernel)
            self.full = (a, a_t, f["features"].to(dev), f["labels"].to(dev),
                         tuple(m.to(dev) for m in f["masks"]))
        self.folder_eval = folder_eval
        self.num_params = sum(p.numel() for p in models[0].parameters())
        self.step_counts: list[int] = []
        """Optimiser steps per epoch, over this rank's parts (one per part in full-batch training)."""
        self.best = (-1, -1.0, None)

    def batches(self, epoch: int):
        """Part after part: its one full-batch step (``k``), or its mini-batches (``(k, step, seeds)``)."""
        self.step_counts.append(0)
        for k in range(len(self.models)):
            if self.sampler is None:
                self.step_counts[-1] += 1
                yield k
                continue
            for step, seeds in enumerate(self._part_batches(k, epoch)):
                self.step_counts[-1] += 1
                yield k, step, seeds

    def _part_batches(self, k: int, epoch: int) -> list[torch.Tensor]:
        """Part ``k``'s owned training vertices (local ids) shuffled by (sampler seed, epoch, part), in batches."""
        p = self.parts[k]
        ids = p.train_ids
        gen = torch.Generator().manual_seed(((self.cfg.sample.seed * 1_000_003 + epoch) * 1_000_033 + p.part) % (1 << 63))
        ids = ids[torch.randperm(ids.numel(), generator=gen)]
        return list(ids.split(self.cfg.sample.batch_size))

    def forward(self, batch) -> StepOutput:
        if self.sampler is not None:
            return self._forward_sampled(*batch)
        s, _, _, _, labels, train = self.parts[batch]
        logits = self.owned_logits(self.model, batch)
        loss = self.objective.loss(NodeTargets(logits, labels, train, int(train.sum())))
        none = torch.zeros_like(train)
        return StepOutput(loss, logits, labels, (train, none, none), extra={"alpha": s.alpha})

    def owned_logits(self, model: Any, k: int) -> torch.Tensor:
        """Part ``k``'s logits of its owned rows: every layer on the part's rows, the last on its owned rows."""
        s, a, a_t, x, _, _ = self.parts[k]
        own, own_t = self.owned_rows[k]
        last = model.num_layers - 1
        return model(x, lambda h, layer: SpMM.apply(own, own_t, h) if layer == last else SpMM.apply(a, a_t, h),
                     num_dst=[x.shape[0]] * last + [s.num_owned])

    def _forward_sampled(self, k: int, step: int, seeds: torch.Tensor) -> StepOutput:
        """One mini-batch of part ``k``: blocks sampled from the part's subgraph (key: epoch, part, step), then
        the input rows' features (a folder's part: read for this batch)."""
        p = self.parts[k]
        with self.timer.phase("sample"):
            mb = self.sampler.sample(seeds, p.source, epoch=self.epoch, step=(p.part << 24) + step)
            p.source.release()
        with self.timer.phase("fetch"):
            h = p.feature_rows(mb.input_gid).to(self.ctx.device)
        aggregators = block_aggregators(self.model_stage, mb.blocks, self.ctx.device, self.ctx.kernel)
        logits = block_forward(self.model, aggregators, h)
        y = p.labels[seeds].to(logits.device)
        loss = self.objective.loss(NodeTargets(logits, y))
        yes = torch.ones(seeds.numel(), dtype=torch.bool, device=logits.device)
        return StepOutput(loss, logits.detach(), y, (yes, ~yes, ~yes), extra={"alpha": p.alpha, "part": k})

    def replica_of(self, batch) -> int:
        """Part ``k``'s batches train part ``k``'s model."""
        return batch if self.sampler is None else batch[0]

    def replica_weights(self, count: int) -> list[float]:
        """Every part's averaging weight ``alpha_k`` (what ``sync.method=model_avg`` averages)."""
        return [(p if self.sampler is not None else p[0]).alpha for p in self.parts]

    def on_epoch_end(self, epoch: int, metrics: dict, outputs: list[StepOutput]) -> None:
        val = metrics.get("val_acc")
        if val is not None and val == val and val > self.best[1]:
            self.best = (epoch, val, metrics.get("test_acc"))

    def rank_fragments(self) -> dict[str, dict]:
        return {"model_averaging": {"best_epoch": self.best[0], "best_val_acc": self.best[1],
                                    "test_acc_at_best_val": self.best[2], "num_params": self.num_params,
                                    "steps": self.step_counts}}


@EVALUATORS.register
class PerPartEvaluation(Evaluator):
    """The averaged model scored over the parts (CATGNN): the epoch's loss is the sum over parts of ``alpha_k`` x
    the part's mean step loss; the accuracies are the first replica's (the models are averaged when due) over the
    whole graph, or, on a partition folder, over the folder's parts one by one (full batch: through the matrices
    they train on; mini-batch: in sampled batches, ``sync.eval_sample``)."""

    name = "per_part"
    requires = frozenset({"one model per part"})

    @dataclasses.dataclass(kw_only=True)
    class Config(Evaluator.Config):   # no options: a folder's sampled evaluation is sync.eval_sample
        pass

    def evaluate(self, steps: Any, epoch: int, outputs: list) -> dict:
        per_part: dict = {}
        for o in outputs:
            per_part.setdefault(o.extra.get("part", id(o)), []).append(o)
        loss = sum(sum(float(o.loss.detach()) for o in outs) / len(outs) * outs[0].extra["alpha"]
                   for outs in per_part.values())
        vals, counts, model = [loss, 0.0, 0.0, 0.0], None, steps.models[0]
        if steps.folder_eval and steps.sampler is not None:
            counts = evaluate_sampled(model, steps.parts, steps.eval_sampler, steps.model_stage,
                                      steps.cfg.sample.batch_size, steps.ctx.device, steps.ctx.kernel)
        elif steps.eval_parts is not None:
            counts = np.zeros((3, 2))
            with torch.no_grad():
                for k, masks in enumerate(steps.eval_parts):
                    hit = steps.owned_logits(model, k).argmax(dim=1) == steps.parts[k][4]
                    for i, m in enumerate(masks):
                        counts[i] += (int((hit & m).sum()), int(m.sum()))
        elif steps.full is not None:
            a, a_t, x, labels, masks = steps.full
            with torch.no_grad():
                pred = model(x, lambda h, layer: SpMM.apply(a, a_t, h)).argmax(dim=1)
            for i, m in enumerate(masks):
                m = m & (labels >= 0)
                vals[1 + i] = float((pred[m] == labels[m]).float().mean()) if bool(m.any()) else float("nan")
        if counts is not None:
            for i in range(3):
                vals[1 + i] = counts[i, 0] / counts[i, 1] if counts[i, 1] else float("nan")
        t = torch.tensor(vals, dtype=torch.float64, device=steps.ctx.device)
        if steps.ctx.world_size > 1:
            steps.comm.all_reduce(t, kind="metrics")
        t = t.cpu().tolist()
        return {"loss": t[0], "train_acc": t[1], "val_acc": t[2], "test_acc": t[3]}
