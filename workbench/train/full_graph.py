"""Full-graph training: ONE trainer for every full-graph exchange (owner-compute halo, CAGNET block rows,
SANCUS staleness on either), and the ``halo`` exchange method.

Halo exchange (:class:`OwnerComputeHalo`, ``--set exchange.method=halo``): each rank owns the vertices
of one part and computes only their rows. Before every layer it receives the current rows of its halo
vertices from their owners (point-to-point pattern carried by one ``all_to_all`` per layer, counted per
(src, dst) as kind ``halo_fwd``); in the backward pass the halo rows' gradients go back to the owners
along the transposed pattern (kind ``halo_bwd``). Weight gradients are summed with one all-reduce per
step (kind ``allreduce``). The loss of every rank is normalised by the GLOBAL number of training
vertices and GCN normalisation uses GLOBAL degrees (shipped in the payload), so the run reproduces the
single-process model: for the same seed, losses and weights agree to float rounding (tested to 1e-5
relative).

The halo bytes of an epoch are predicted from the partition alone
(:func:`workbench.layout.halo.predicted_halo_bytes`) and the tests check the transport counts match
exactly; with a staleness policy (``--set exchange.staleness=epoch-fixed``) every epoch's bytes are
predicted from the agreed flags (:func:`workbench.train.staleness.predicted_bytes_by_epoch`).

:class:`FullGraphTrainer` runs any registered exchange: ``prepare`` loads and partitions the graph (the
``partition`` stage) and asks the exchange for the per-rank layout; on a rank it builds the model (the
``model`` stage) and attaches the exchange, whose :class:`~workbench.train.full_graph_loop.FullGraphSteps` the
one :class:`~workbench.train.loop.TrainLoop` runs (:class:`~workbench.train.program.TrainingProgram`).

Example:
    >>> from workbench.compose import RunConfig
    >>> cfg = RunConfig.compose(graph="karate", num_parts=2, partition="random", exchange="halo", epochs=3)
    >>> program = cfg.build()
    >>> program.world_size_for(None), cfg.method("exchange")
    (2, 'halo')
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import torch

from workbench._validation import ErrorCollector
from workbench.composition import register_trainer
from workbench.events import Event, PartitionComputed, Progress
from workbench.graph import Graph
from workbench.runtime.program import RankContext
from workbench.summary import merge_fragments, rank_fragment
from workbench.train.exchange import EXCHANGES, Exchange, ExchangeLayout, RankExchange
from workbench.layout.halo import HaloExchangePlan, build_halo_plans, comm_rows_from_parts, predicted_halo_bytes
from workbench.train.full_graph_loop import FullGraphSteps
from workbench.train.loop import LabelData, Steps, load_training_graph, partition_nodes, split_sizes
from workbench.train.models import ModelStage, SpMM, edge_weights, node_scales, sparse_aggregator, with_self_loops
from workbench.train.objective import loss_of
from workbench.train.part_source import check_folder, part_refs, start_folder_run
from workbench.train.program import Trainer
from workbench.train.staleness import predicted_bytes_by_epoch
from workbench.train.step import step_of

__all__ = ["FullGraphTrainer", "FullGraphSteps", "OwnerComputeHalo", "RankShard", "build_shards",
           "build_halo_shard", "halo_shard", "load_and_partition"]


FULL_GRAPH_INSTEAD = {"cache": "full-graph training moves the first layer's remote input rows through the exchange, "
                               "and exchange.pin_static_input=true caches all of them: sent in the first epoch, never "
                               "again (layer 0 then aggregates first)"}
"""What full-graph training offers instead of a refused cache (the refusal says it)."""


def load_and_partition(cfg: Any, world_size: int, *, graph: Any = None, node_part: Optional[torch.Tensor] = None,
                       owner: str = "program", emit: Optional[Callable[[Event], None]] = None,
                       num_parts: Optional[int] = None, check: Optional[Callable[[Graph], None]] = None,
                       folder: Any = None) -> tuple[Graph, torch.Tensor, Any]:
    """Load ``cfg.graph`` (or ``graph``) and partition it into ``num_parts`` (default ``world_size``) parts with
    ``cfg``'s partition stage (or take ``node_part``, or the parts of ``folder``), emitting :class:`Progress`
    (stages ``graph`` and ``partition``): the one place where the client partitions, for every trainer.

    Args:
        cfg: the run config (its ``graph`` and ``partition`` sections).
        world_size: the run's ranks.
        graph: a :class:`Graph` (or spec) replacing ``cfg.graph``.
        node_part: a vertex -> part assignment replacing the partitioner.
        owner: the name the errors give.
        emit: receives the :class:`Progress` events.
        num_parts: parts (default ``world_size``).
        check: called with the loaded graph before the partitioner runs (raises ``ParamError``).
        folder: the :class:`~workbench.data.partfolder.PartsConfig` of a partition folder whose parts the run
            trains (:meth:`Trainer.partition_folder <workbench.train.program.Trainer.partition_folder>`): the
            partition is the folder's owner of every vertex (:meth:`PartFolder.owner_part
            <workbench.data.partfolder.PartFolder.owner_part>`), no partitioner runs. The folder's parts must be
            the run's, and a partition method chosen by name (``--set partition.method=...``) must be the
            folder's: one is never silently ignored (the recipe's own partition config is; a partition option
            set by name without the method, ``--set partition.seed=1``, is not tracked and is ignored too).

    Returns:
        ``(graph, node_part, partition result or None)``: a folder's is a
        :class:`~workbench.partition.base.PartitionResult` named after the folder's method.

    Raises:
        ParamError: before any rank starts: parts out of range, a part owning no vertex
            (:func:`~workbench.partition.base.check_parts_filled`), what ``check(graph)`` refuses (before the
            partitioner runs), a folder whose parts are not the run's or a partition method other than the
            folder's chosen by name.

    Example:
        >>> from workbench.compose import RunConfig
        >>> g, node_part, result = load_and_partition(RunConfig.compose(graph="karate", partition="random"), 2)
        >>> g.num_nodes, sorted(set(node_part.tolist())), result.method
        (34, [0, 1], 'random')
    """
    from workbench.partition.base import check_parts_filled

    emit = emit or (lambda event: None)
    parts = world_size if num_parts is None else num_parts
    if folder is not None and node_part is None:
        check_folder(cfg, folder, parts, num_parts)
    spec = graph if graph is not None else cfg.graph
    emit(Progress(stage="graph", done=0, total=1, message=f"loading {getattr(spec, 'name', spec)}"))
    graph = load_training_graph(spec, owner)
    emit(Progress(stage="graph", done=1, total=1, message=f"{graph.num_nodes:,} vertices, {graph.num_edges:,} edges"))
    errs = ErrorCollector(type(cfg).__name__)
    errs.check(1 <= parts <= graph.num_nodes, "num_parts", f"an int in [1, num_nodes={graph.num_nodes}]", parts)
    errs.raise_if_any()
    if check is not None:
        check(graph)
    if node_part is not None:
        node_part = torch.as_tensor(node_part, dtype=torch.int64)
        check_parts_filled(node_part, parts, owner)   # a rank without vertices would idle through the run
        emit(Progress(stage="partition", done=1, total=1, message=f"given, {parts} parts"))
        return graph, node_part, None
    if folder is not None:
        from workbench.partition.base import PartitionResult

        pf = folder.folder()
        node_part = torch.from_numpy(pf.owner_part())
        check_parts_filled(node_part, parts, owner)
        result = PartitionResult(graph=graph, num_parts=parts, method=pf.method, node_part=node_part,
                                 options=dict(pf.manifest.get("options") or {}))
        emit(Progress(stage="partition", done=1, total=1, message=f"{pf.method}, {parts} parts of {pf.path}"))
        return graph, node_part, result
    method = cfg.method("partition") if parts > 1 else "none"
    emit(Progress(stage="partition", done=0, total=1, message=f"{method}, {parts} parts"))
    node_part, result = partition_nodes(graph, parts, cfg.method("partition"), cfg.partition)
    check_parts_filled(node_part, parts, owner)   # vertex-cut owners too: every part needs vertices to train
    elapsed = getattr(result, "elapsed_s", None)
    emit(Progress(stage="partition", done=1, total=1, message=f"{method}, {parts} parts"
                  + (f", {elapsed:.2f} s" if elapsed is not None else "")))
    return graph, node_part, result


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
    bins: Any = None
    """G3 bin schedule of the rank (``workbench.train.bins.BinSchedule``) when ``step.method=binned``."""
    rank_bins: Any = None
    """G3 on a partition folder: what the rank planned itself (:class:`~workbench.train.bins_ranks.RankBins`:
    the budget, its bins' dependencies, the consecutive-id bins), returned to the client's summary; ``None`` when
    the client planned the bins."""
    agg_scales: Any = None
    """``(r, c)``: ``agg_weights == r[agg_rows] * c[agg_cols]`` (:func:`~workbench.train.models.node_scales`),
    so the CPU may run an unweighted kernel between two scalings."""
    node_part: Any = None
    """The ``prefetch`` exchange (PSC-GCN): ``(N,)`` owner of every vertex, its feature source's partition book."""
    out_degrees: Any = None
    """The ``prefetch`` exchange: ``(N,)`` global out-degrees (a cache's candidates; on a rank that read its part,
    those of its own and halo vertices, zero elsewhere)."""


def build_shards(graph: Graph, node_part: torch.Tensor, num_parts: int, model: ModelStage,
                 input_widths: list[int], backward_widths: Optional[list[int]] = None
                 ) -> tuple[list[RankShard], list[HaloExchangePlan]]:
    """Split ``graph`` into per-rank shards (vectorised; one pass over the edges per rank); ``model``: the model
    stage (or its class), whose ``Â`` the shards hold."""
    plans = build_halo_plans(graph, node_part, num_parts)
    in_deg, out_deg = graph.in_degrees(), graph.out_degrees()
    src, dst = graph.edges()
    comm_rows = int(comm_rows_from_parts(graph, node_part, num_parts).sum())
    predicted = predicted_halo_bytes(comm_rows if num_parts > 1 else 0, input_widths, backward_widths=backward_widths)
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
        s, d = with_self_loops(model, s, d, plan.inner_gid)   # GCN: the owned rows' self-loops
        w = edge_weights(model, s, d, in_deg[d], out_deg[s])
        assert bool((g2l[s] >= 0).all()), "every in-neighbour of an owned row is inner or halo"
        local_gid = torch.cat([plan.inner_gid, plan.halo_gid])
        scales = node_scales(model, in_deg[plan.inner_gid], out_deg[local_gid])
        shards.append(RankShard(plan=plan, agg_rows=g2l[d], agg_cols=g2l[s], agg_weights=w, agg_scales=scales,
                                data=LabelData.take(graph, plan.inner_gid), num_train_global=num_train,
                                num_classes=graph.num_classes, predicted=predicted))
    return shards, plans


def build_halo_shard(ref: Any, comm: Any) -> RankShard:
    """The halo exchange's :class:`RankShard` of ``ref.part``, built on its rank from its own part
    (:func:`~workbench.train.part_source.agree_halo`): equal to the one :func:`build_shards` cuts from the whole
    graph (same local ids, plan, weights and rows).

    Args:
        ref: the :class:`~workbench.train.part_source.PartRef` of the part and the run's global figures.
        comm: the rank's communicator (the setup exchange is counted as ``part_setup``).
    """
    from workbench.train.part_source import agree_halo

    return halo_shard(ref, agree_halo(ref, comm))


def halo_shard(ref: Any, h: Any) -> RankShard:
    """The :class:`RankShard` of a part whose halo its rank agreed (:func:`~workbench.train.part_source.agree_halo`
    gave ``h``): GCN's self-loops, the weights from the global degrees, the plan."""
    s, d = with_self_loops(ref.model, h.cols, h.rows, torch.arange(h.num_owned))
    w = edge_weights(ref.model, s, d, h.in_deg[d], h.out_deg[s])
    plan = HaloExchangePlan(rank=ref.part, world_size=h.num_parts, inner_gid=h.inner_gid, halo_gid=h.halo_gid,
                            halo_owner=h.halo_owner, send_local_nid=h.send, recv_counts=h.recv_counts)
    return RankShard(plan=plan, agg_rows=d, agg_cols=s, agg_weights=w, agg_scales=node_scales(ref.model, h.in_deg,
                                                                                                h.out_deg),
                     data=h.data, num_train_global=ref.num_train_global, num_classes=ref.num_classes,
                     predicted=ref.predicted)


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


@EXCHANGES.register
class OwnerComputeHalo(Exchange):
    """Owner-compute halo exchange on edge-cut partitions (DistDGL's HALO vertices, full-graph).

    Example:
        >>> EXCHANGES["halo"]().forward_kind
        'halo_fwd'
    """

    name = "halo"
    requires = frozenset({"embedding exchange", "whole-part layers"})
    forward_kind = "halo_fwd"
    backward_kind = "halo_bwd"

    @dataclasses.dataclass(kw_only=True)
    class Config(Exchange.Config):
        pass

    @classmethod
    def provides_for(cls, config: Any) -> frozenset[str]:
        """Without staleness every layer's halo rows go point to point, fresh (what G3's bins exchange through)."""
        return cls.provides | ({"p2p halo layers"} if getattr(config, "staleness", "none") == "none" else set())

    def layout(self, graph: Graph, node_part: torch.Tensor, num_parts: int, model: ModelStage,
               input_widths: list[int], backward_widths: Optional[list[int]] = None) -> ExchangeLayout:
        shards, plans = build_shards(graph, node_part, num_parts, model, input_widths, backward_widths)
        comm = comm_rows_from_parts(graph, node_part, num_parts)   # (P, P) rows p sends q per layer
        return ExchangeLayout(shards=shards, predicted=shards[0].predicted,
                              root_rows=[int(x) for x in comm.sum(axis=1)],
                              backward_rows=[int(x) for x in comm.sum(axis=0)],   # a rank returns its halo's grads
                              halo_sizes=[p.num_halo for p in plans])

    def part_layout(self, part_sizes: list[int], comm_rows: Any, input_widths: list[int],
                    backward_widths: Optional[list[int]] = None) -> ExchangeLayout:
        import numpy as np

        comm = np.asarray(comm_rows, dtype=np.int64)
        predicted = predicted_halo_bytes(int(comm.sum()), input_widths, backward_widths=backward_widths)
        return ExchangeLayout(shards=[], predicted=predicted, root_rows=comm.sum(1).tolist(),
                              backward_rows=comm.sum(0).tolist(), halo_sizes=comm.sum(0).tolist())

    def shard_from_part(self, ref: Any, comm: Any) -> RankShard:
        return build_halo_shard(ref, comm)

    def attach(self, ctx, shard: RankShard) -> "_HaloRank":
        return _HaloRank(self, ctx, shard)


class _HaloRank(RankExchange):
    fixed_aggregator = True

    def __init__(self, stage: OwnerComputeHalo, ctx, shard: RankShard):
        super().__init__(ctx, stage.policy(), (stage.forward_kind, stage.backward_kind))
        plan = shard.plan
        shape = (plan.num_inner, plan.num_inner + plan.num_halo)
        a, a_t = sparse_aggregator(shard.agg_rows, shard.agg_cols, shard.agg_weights, shape, ctx.device,
                                   scales=shard.agg_scales, kernel=ctx.kernel)
        self.a, self.a_t = a.to(ctx.device), a_t.to(ctx.device)
        self.plan = _plan_to(plan, ctx.device)

    def _aggregate(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        return self._multiply(self._exchange_rows(h, layer), layer)   # (num_inner, F_layer)

    def _exchange_rows(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        return self.plan.exchange(h, self.comm, layer)                # (num_inner + num_halo, F_layer)

    def _multiply(self, rows: torch.Tensor, layer: int) -> torch.Tensor:
        return SpMM.apply(self.a, self.a_t, rows)


def full_graph_name(config: Any) -> str:
    """Run lists name the composition: ``full_graph`` (halo), ``block_row``, and the staleness policy if any."""
    exchange, staleness = config.method("exchange"), getattr(config.exchange, "staleness", "none")
    return ("full_graph" if exchange == "halo" else exchange) + ("" if staleness == "none" else f"-{staleness}")


@register_trainer("full_graph", name=full_graph_name, trainer="full-graph training (sample.method=none)",
                  provides=frozenset({"embedding exchange", "whole-part layers", "node labels",
                                      "whole-part logits"}),
                  default_exchange="halo", instead=FULL_GRAPH_INSTEAD,
                  batches="whole parts: one step an epoch, every layer on every edge", chosen_by="sample.method=none")
class FullGraphTrainer(Trainer):
    """Full-graph training with any registered exchange, SPMD over the ranks (see the module docstring).

    ``graph``/``node_part`` (runtime objects) replace loading and partitioning. Its record's ``component`` (the
    ``edge_sampled`` key's :class:`~workbench.train.edge_sampled.SampledEdges`) is what training on sampled edges
    adds: the sampler and cache it attaches to the exchange, the client's event sink, the rank's result and the
    run's summary, whose figures replace the full-graph ones (the predicted bytes of whole halos do not hold there).
    """

    def __init__(self, config: Any, *, spec: Any, graph: Optional[Graph] = None,
                 node_part: Optional[torch.Tensor] = None):
        super().__init__(config, spec=spec, graph=graph, node_part=node_part)
        self.predicted: dict = {}
        self.layout_info: Optional[ExchangeLayout] = None
        self.world_size = 1
        self._widths: list[int] = []
        self._backward_widths: list[int] = []
        self._largest_bin = None        # G3: the graph's largest one-vertex bin, found before partitioning
        self.bin_step = config.step     # G3: the step settings with memory_budget in bytes (auto sized)
        self.budget_auto: Optional[str] = None
        self.bin_plan = None            # G3: every rank's bins (workbench.train.bins_program.BinPlan)
        self.bins_on_ranks = False      # G3 on a partition folder: the ranks plan their bins, the summary gathers them
        self._bin_widths_out: list[int] = []

    def exchange(self) -> Exchange:
        cfg = self.config
        return EXCHANGES.build(cfg.method("exchange"), cfg.exchange)

    def _load_and_partition(self, world_size: int, emit: Optional[Callable[[Event], None]] = None
                            ) -> tuple[Graph, torch.Tensor, Any]:
        """``(graph, node_part, partition result or None)``, validated before any rank starts (what the
        graph alone decides, such as a G3 budget too small for its largest vertex, before the partitioner runs).

        ``emit`` receives :class:`Progress` events of the steps (stages ``graph`` and ``partition``)."""
        return load_and_partition(self.config, world_size, graph=self._graph, node_part=self._node_part,
                                  owner=type(self).__name__, emit=emit, folder=self.partition_folder(),
                                  check=self._check_bins if self._binned() else None)

    def _layer_widths(self, graph: Any) -> tuple[list[int], list[int]]:
        """``(exchange widths, backward widths)`` per layer of the model on ``graph`` (or on ``(feature width,
        classes)``)."""
        stage = self.model_stage
        in_dim, classes = graph if isinstance(graph, tuple) else (graph.num_features, graph.num_classes)
        dims = (in_dim, classes, self._pinned(self.exchange()))
        return stage.exchange_widths(*dims), stage.backward_widths(*dims)

    def parts_on_ranks(self) -> bool:
        """Whether each rank reads its own part of a partition folder and builds its shard itself
        (:meth:`Exchange.shard_from_part <workbench.train.exchange.Exchange.shard_from_part>`): the exchanges with a
        ``part_layout`` (``halo``, ``block_row``, ``prefetch``; any staleness) on a folder, G3's bins included (on
        the ``halo`` exchange, the only one they run on: each rank then packs its own bins,
        :mod:`workbench.train.bins_ranks`); the client then reads the manifest only. The other exchanges cut the
        shards from the whole graph on the client."""
        return self.partition_folder() is not None and type(self.exchange()).part_layout is not Exchange.part_layout

    def _prepare_on_ranks(self, world_size: int, emit: Callable[[Event], None]) -> list:
        """A folder run: the manifest's figures here, one :class:`~workbench.train.part_source.PartRef` per rank.

        G3's bins: what the config alone decides was refused before (bins on an exchange other than plain ``halo``:
        :mod:`workbench.composition`), the rest is on the ranks (:func:`~workbench.train.bins_ranks.plan_bins_on_rank`): the client never reads the
        edges, so a given ``memory_budget`` below twice the largest vertex with its in-neighbours, or whole parts
        that do not fit it, fail the run as the ranks read their parts (the same ``ParamError`` messages as in
        memory, raised by the ranks), and the budget ``auto`` sizes reaches ``notes`` with the ranks' results."""
        import numpy as np

        pf, event = start_folder_run(self, world_size, emit)
        m = pf.manifest
        widths, backward = self._layer_widths((int(m["feature_dim"]), int(m["num_classes"])))
        comm = np.asarray(m["comm_rows"], dtype=np.int64).reshape(world_size, world_size)
        self.layout_info = self.exchange().part_layout([int(q["num_owned"]) for q in pf.parts], comm, widths,
                                                       backward_widths=backward)
        self.predicted = self.layout_info.predicted
        self._widths, self._backward_widths = widths, backward
        self.bin_plan = None
        self.bins_on_ranks = self._binned()
        self._bin_widths_out = widths[1:] + [int(m["num_classes"])]
        self.partition_metrics = {k: v for k, v in event.metrics.items() if not isinstance(v, list)}
        emit(event)
        return part_refs(pf, self.model_stage, self.predicted)

    def rank_payload(self, ctx: RankContext, payload: Any) -> Any:
        """The rank's shard: as sent, or built from its part (a :class:`~workbench.train.part_source.PartRef`),
        with its G3 bins planned on the rank when the run is binned
        (:func:`~workbench.train.bins_ranks.plan_bins_on_rank`)."""
        from workbench.train.part_source import PartRef

        if not isinstance(payload, PartRef):
            return payload
        shard = self.exchange().shard_from_part(payload, ctx.comm)
        if not self._binned():
            return shard
        from workbench.train.bins_ranks import plan_bins_on_rank

        widths = self._layer_widths((int(shard.data.features.shape[1]), shard.num_classes))[0]
        planned = plan_bins_on_rank(ctx.comm, shard, widths, widths[1:] + [shard.num_classes], self.config.step)
        return dataclasses.replace(shard, bins=planned.schedule, rank_bins=planned)

    def _check_bins(self, graph: Graph) -> None:
        # the G3 bins (workbench.train.bins_program) compile numba kernels: only a binned run imports them
        from workbench.train.bins_program import check_bins_before_partition

        cfg, widths = self.config, self._layer_widths(graph)[0]
        self._largest_bin = check_bins_before_partition(graph, cfg.step, widths, widths[1:] + [graph.num_classes])

    def prepare(self, world_size: int, emit: Callable[[Event], None]) -> list:
        cfg = self.config
        self.world_size = world_size
        if self.parts_on_ranks():
            return self._prepare_on_ranks(world_size, emit)
        graph, node_part, result = self._load_and_partition(world_size, emit)
        self.split_sizes = split_sizes(graph)
        widths, backward = self._layer_widths(graph)
        layout = self.exchange().layout(graph, node_part, world_size, self.model_stage, widths,
                                        backward_widths=backward)
        self.predicted = layout.predicted
        self.layout_info = dataclasses.replace(layout, shards=[])
        self._widths, self._backward_widths = widths, backward
        self.bin_plan = None
        if self._binned():   # G3 bins (checked before ranks start)
            self._plan_bins(graph, node_part, layout.shards, widths)
        event = _partition_event(graph, node_part, world_size, self.partition_method(), result, layout.halo_sizes,
                                 graph.num_features)
        self.partition_metrics = {k: v for k, v in event.metrics.items() if not isinstance(v, list)}
        emit(event)
        return layout.shards

    def _plan_bins(self, graph: Graph, node_part: torch.Tensor, shards: list, widths: list[int]) -> None:
        """Size the budget (``auto``: from the graph and the parts, said in ``notes``), pack every rank's bins."""
        from workbench.train.bins_program import plan_bins, size_budget

        cfg, widths_out = self.config, widths[1:] + [graph.num_classes]
        largest = self._largest_bin
        budget = size_budget(graph, shards, widths, widths_out, cfg.step, largest)
        self._take_budget(budget)
        self.bin_plan = plan_bins(graph, node_part, shards, widths, widths_out, cfg.step, largest=largest,
                                  budget=budget)
        for shard, schedule in zip(shards, self.bin_plan.schedules if self.bin_plan else []):
            shard.bins = schedule

    def _take_budget(self, budget: Any) -> None:
        """The run's G3 memory budget (a :class:`~workbench.train.bins.MemoryBudget` or ``None``): how ``auto``
        sized it said in ``notes``, the step settings with it in bytes for the summary."""
        if budget is not None and budget.reason and budget.note() not in self.notes:
            self.notes.append(budget.note())
        self.budget_auto = budget.reason if budget is not None else None
        cfg = self.config
        self.bin_step = cfg.step if budget is None else dataclasses.replace(cfg.step, memory_budget=budget.num_bytes)

    def _binned(self) -> bool:
        """Whether G3's planning runs before the ranks start: bins (``step.method=binned``), or a whole-part step's
        ``memory_budget`` that the parts must fit."""
        return step_of(self.config).planned()

    def _pinned(self, exchange: Any) -> frozenset:
        """Layers kept aggregate-first: those the exchange needs, and every layer of a binned (G3) run,
        whose bins compute each layer in the printed order."""
        n = self.config.model.num_layers
        return frozenset(range(n)) if self._binned() else frozenset(exchange.pinned_layers(n))

    def models(self, ctx: RankContext, shard: Any) -> list:
        return [self.build_model(ctx, shard.data.features.shape[1], shard.num_classes,
                                 pinned=self._pinned(self.exchange()))]

    def client_emit(self, emit: Callable[[Event], None]) -> Callable[[Event], None]:
        return self.component.client_emit(emit, self.world_size) if self.component is not None else emit

    def steps(self, ctx: RankContext, shard: Any, models: list) -> Steps:
        more = self.component.attach_args(ctx, models[0], self._widths) if self.component is not None else {}
        exchange = self.exchange().attach(ctx, shard, **more)
        exchange.setup_model(models[0])
        step = step_of(self.config).attach(ctx, shard)   # the whole part, or G3's bins
        return FullGraphSteps(ctx, exchange=exchange, shard=shard, objective=loss_of(self.config), step=step)

    def rank_fragments(self, shard: Any, models: list) -> dict[str, dict]:
        """The rank's ``layout`` (its shard's predicted bytes) and, where the rank planned its G3 bins, ``bins`` (the
        plan the client gathers); the component's (sampled edges: ``model``)."""
        out = {"layout": {"predicted": shard.predicted}}
        if getattr(shard, "rank_bins", None) is not None:
            out["bins"] = {"g3_plan": shard.rank_bins.for_client()}
        return merge_fragments(out, self.component.rank_fragments(models) if self.component is not None else None)

    def predicted_bytes(self, rank_results: list[dict]) -> dict:
        if self.component is not None:   # sampled edges: no whole-halo prediction holds
            return {}
        return self.predicted or rank_fragment(rank_results[0], "layout").get("predicted", {})

    def bytes_per_epoch(self, bytes_by_epoch: list[int]) -> int:
        """Skipped rounds make epochs differ: the mean epoch (every epoch's for an exact exchange)."""
        if self.component is not None:
            return super().bytes_per_epoch(bytes_by_epoch)
        return int(round(sum(bytes_by_epoch) / max(len(bytes_by_epoch), 1)))

    def summary_fragments(self, rank_results: list[dict], summary: Any) -> dict[str, dict]:
        """``exchange`` (its method, the bytes an exact run would move and the share saved, the bytes predicted per
        epoch; the prefetch exchange's realised ``max_age``), ``data`` (the split sizes), ``staleness`` (SANCUS's
        rounds, ages and cache: only when a staleness policy is on), ``partition`` (its metrics) and ``step`` (G3's
        bins, when binned); sampled edges: the component's (:meth:`SampledEdges.summary_fragments
        <workbench.train.edge_sampled.SampledEdges.summary_fragments>`)."""
        if self.component is not None:
            return self.component.summary_fragments(rank_results, self._widths)
        cfg, r0 = self.config, rank_results[0]
        baseline, moved = summary.predicted_bytes_per_epoch * summary.epochs, sum(summary.bytes_by_epoch)
        exchange = {"exchange": cfg.method("exchange"), "baseline_bytes": int(baseline),
                    "comm_reduction": (1.0 - moved / baseline) if baseline else 0.0}
        if "max_age" in rank_fragment(r0, "exchange"):   # the prefetch exchange's realised age (tau)
            exchange["max_age"] = max(rank_fragment(r, "exchange")["max_age"] for r in rank_results)
        out = {"exchange": exchange, "data": {"split_sizes": self.split_sizes}}
        stale = [rank_fragment(r, "staleness") for r in rank_results]
        skipped = stale[0].get("broadcast_skipped")   # None: no staleness policy, every round sent
        if stale[0]:
            ex = cfg.exchange
            out["staleness"] = {
                "staleness": ex.staleness, **({"epsilon": ex.epsilon} if ex.staleness != "none" else {}),
                "broadcast_skipped": skipped, "broadcasts_skipped": int(sum(sum(la) for ep in skipped for la in ep)),
                "broadcast_rounds": int(sum(len(la) for ep in skipped for la in ep)),
                "max_age": max(s["max_age"] for s in stale), "cache_bytes": max(s["cache_bytes"] for s in stale)}
        if getattr(self, "partition_metrics", None):
            out["partition"] = {"partition_metrics": self.partition_metrics}
        if self.bins_on_ranks:   # a folder run: the bins its ranks planned, as the client plans them in memory
            from workbench.train.bins_program import plan_from_ranks

            planned = [rank_fragment(r, "bins")["g3_plan"] for r in rank_results]
            self._take_budget(planned[0].budget)
            self.bin_plan = plan_from_ranks(planned, self._widths, self._bin_widths_out)
        if self.bin_plan is not None:
            from workbench.train.bins_program import bins_summary

            num_params = sum(int(torch.as_tensor(v).numel()) for v in r0.get("params", {}).values())
            out["step"] = {"g3": bins_summary(self.bin_plan, rank_results, self.bin_step, num_params,
                                              self.budget_auto)}
        info = self.layout_info
        if info is not None and skipped:
            flags = [[[not s for s in layer] for layer in epoch] for epoch in skipped]
            exchange["predicted_bytes_by_epoch"] = predicted_bytes_by_epoch(
                flags, info.root_rows, self.widths(), skip=cfg.exchange.skip, backward_rows=info.backward_rows,
                backward_widths=self._backward_widths or None)
        elif info is not None and skipped is None:   # nothing skipped: every epoch moves the predicted bytes
            exchange["predicted_bytes_by_epoch"] = [summary.predicted_bytes_per_epoch] * summary.epochs
        return out

    def widths(self) -> list[int]:
        """Widths of the rows exchanged per layer (the model's ``exchange_widths``; needs ``prepare``)."""
        return list(self._widths)


def _plan_to(plan: HaloExchangePlan, device: torch.device) -> HaloExchangePlan:
    if torch.device(device).type == "cpu":
        return plan
    return dataclasses.replace(plan, send_local_nid=[t.to(device) for t in plan.send_local_nid])
