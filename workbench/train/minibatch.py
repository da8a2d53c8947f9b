"""Mini-batch training on sampled blocks: DistDGL's trainer through all five stages (Zheng et al., 2020).

Every rank is one trainer holding one part (owner-compute, 1-hop structure of its own vertices). Per
step of an epoch, every trainer

1. takes its next batch of seeds (the **sample** stage's split: the training vertices of its own part,
   shuffled per epoch; every trainer runs the same number of steps);
2. samples the blocks **owner-routed**: each frontier vertex is sampled by the rank that owns it
   (kinds ``sample_req``/``sample_resp``), with the sampler's counter-based keys, so the sampled edges
   do not depend on which rank asks;
3. pulls the input vertices' feature rows (**cache** stage over a DistDGL-style KVStore: hits served
   locally, misses fetched from their owners, kinds ``feature_req``/``feature``);
4. runs the **model** on the blocks, and the loss of its seeds divided by the GLOBAL batch size of the
   step (the sum of every trainer's seeds), so the all-reduced gradient (kind ``allreduce``) is the
   gradient of the mean loss of the union of the trainers' batches — the synchronous SGD of DistDGL.

Decisions (the DistDGL paper leaves them open):

* **Evaluation samples.** After every epoch each trainer computes its own part's validation vertices,
  and after the last epoch its test vertices too, with the same sampler and fan-outs (as DGL's
  distributed examples do between epochs; test accuracy of earlier epochs is None), under
  the traffic phase ``eval_`` (kinds ``eval_sample_req``, ``eval_feature``, ...), pulling features through
  the plain KVStore, not the cache, so cache figures describe training alone. Every evaluation batch uses
  one key, so a vertex's evaluation sample does not depend on how vertices were batched. Training
  accuracy is counted on the epoch's seed batches as they were trained. ``train.eval_batches = M`` evaluates
  the first M batches of each trainer's per-epoch shuffle of the split (a uniform sample of its vertices).
* **Bounded epochs.** ``train.max_steps = K`` trains the first K batches of each epoch's shuffle (every trainer
  the same K; the loss is still divided by each step's global batch size), for graphs whose epoch is longer
  than a run can wait.
* **Fan-out order** is DGL's: ``fanouts[i]`` belongs to block ``i`` counted from the input layer, so the
  last entry applies at the seeds. One fan-out per model layer: as in DGL's examples, setting
  ``sample.fanouts`` alone sets ``model.num_layers`` to their number (the run summary's ``notes`` says so);
  setting both to different counts is refused (:class:`~workbench.compose.RunConfig`).
* **Models on blocks.** GraphSAGE-mean averages the sampled in-neighbours (DGL ``SAGEConv('mean')``);
  GCN averages the sampled in-neighbours and the vertex itself, ``D̄_b^{-1}(A_b + I)`` (DGL
  ``SAGEConv('gcn')``). Both depend only on a vertex's own sample, never on which other seeds share its
  batch (the symmetric ``D̄^{-1/2}`` form with block out-degrees would), so results do not depend on how
  seeds are split over trainers.
* **Single-process reference.** With ``sample.trainers=P`` a 1-rank run splits the training vertices
  over P simulated trainers exactly as a P-rank run does and trains every step on the union of their
  batches. Draws are keyed by (seed, epoch, step, layer, vertex) and never by rank, and each trainer's
  loss is divided by the global batch size, so that run reproduces the P-rank run's losses and weights
  up to float summation order (tested).
* **Overlap** (``train.batches_ahead = N``; 0, inline, by default). A background thread
  (:class:`~workbench.train.batches_ahead.SampledAhead`) prepares the run's batches (samples the blocks, pulls the
  input rows through the feature source, builds the block aggregators) up to N ahead of the step the model computes,
  in exactly the order the loop takes them: each epoch's training steps, then its validation batches, after the
  last epoch the test batches. Draws are keyed (seed, epoch, step, layer, vertex), never timed, and the one thread
  makes every pull in the inline order, so the losses, weights, bytes, sampling and cache figures are the inline
  run's (tested, on one rank and on two; the loop's own comm seconds and calls no longer hold the sampling's). On several ranks sampling and pulls are collectives: the thread runs them on the rank's
  side communicator ``sample`` (a second gloo group and socket mesh, or a second in-process group), beside the
  loop's gradient and metrics all-reduces on the main one, DistDGL's separate sampler processes as a thread; every
  rank's plan makes the same calls in the same order (:mod:`workbench.train.batches_ahead`). The trainer's wait for
  a batch is its ``sample`` phase and ``fetch`` is 0; the thread's own sampling and pulls are reported off the
  critical path (:class:`~workbench.events.StepTimes` ``overlapped``; :class:`~workbench.events.SampleStats`
  ``sample_s`` still sums the sampler's seconds). Refused with a schedule, whose workers already sample ahead, and
  on several NCCL ranks. Why a thread and not ByteGNN's scheduled program (``schedule.method=fixed-depth``): its
  workers send each batch's blocks and rows through pipes, task by task. One rank of
  ``products-like:num_nodes=100000`` (``benchmarks/minibatch.py``, 2 cores, load 0.2): inline 0.75 s/epoch, the
  scheduled program with one worker 1.91, the thread 0.78: it hides sampling and pulls only where the model's
  compute leaves a core free (with one compute thread and the other core for the thread, 1.19 -> 0.74 s/epoch).

Example:
    >>> from workbench.compose import RunConfig
    >>> cfg = RunConfig.compose(graph="karate", num_parts=2, epochs=2,
    ...                         sample={"method": "neighbor", "fanouts": (5, 5), "batch_size": 8})
    >>> type(cfg.build().trainer).__name__
    'MiniBatchTrainer'
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any, Callable, Optional

import torch

from workbench._validation import ErrorCollector
from workbench.composition import register_trainer
from workbench.events import Event, SampleStats
from workbench.runtime.program import RankContext
from workbench.stages import registry
from workbench.summary import rank_fragment
from workbench.train.batches_ahead import BatchesAhead, SampledAhead, check_batches_ahead
from workbench.train.loop import StepOutput, Steps, split_sizes
from workbench.train.minibatch_shard import MiniBatchShard, build_minibatch_shard
from workbench.train.kernels import call_compiled, compiled, csr_pair, set_kernel
from workbench.train.models import MODELS, GNNModel, ModelStage, SpMM, model_stage_class
from workbench.train.objective import LinkTargets, NodeTargets, loss_of
from workbench.train.program import Trainer

__all__ = ["MiniBatchTrainer", "MiniBatchShard", "MiniBatchSteps", "BlockAggregator", "BatchesAhead",
           "block_forward", "block_aggregators", "build_minibatch_shard"]

EVAL_STEP = -2
"""The step of every evaluation batch's sampling key (training steps are 0, 1, ...; -1 keys the shuffle)."""


# --------------------------------------------------------------------------------------------------------
# Models on blocks
# --------------------------------------------------------------------------------------------------------


def block_aggregators(model: ModelStage, blocks: list, device: torch.device, kernel: str = "auto") -> list:
    """One :class:`BlockAggregator` per block: how each sampled layer averages its sources.

    ``sage``: ``A_b[d, s] = 1 / deg_b(d)``, the mean over the sampled in-neighbours; ``gcn``: the mean over
    the sampled in-neighbours and ``d`` itself (``d`` is source row ``d``: destinations come first). The model
    stage says which (:attr:`~workbench.train.models.ModelStage.self_loops`). ``kernel``: the run's ``train.kernel``
    (``auto`` and ``numba``: the compiled block kernel on the CPU; otherwise the weighted CSR product of that kernel).

    Example:
        >>> import torch
        >>> from workbench.sample import Block
        >>> b = Block(src_gid=torch.tensor([7, 3, 5]), num_dst=1, edge_src=torch.tensor([1, 2]),
        ...           edge_dst=torch.tensor([0, 0]))
        >>> agg = block_aggregators(MODELS.build("gcn"), [b], torch.device("cpu"))[0]
        >>> agg(torch.tensor([[3.0], [6.0], [9.0]])).tolist(), agg.num_dst
        ([[6.0]], 1)
    """
    self_loop = bool(model_stage_class(model).self_loops)
    return [BlockAggregator.of(b, self_loop, device, kernel) for b in blocks]


@dataclasses.dataclass(eq=False)
class BlockAggregator:
    """``T = A_b H`` for one block: each destination's mean over its sampled sources (and itself with
    ``self_loop``), ``A_b = diag(scale) (B + [I 0])`` with ``B`` the block's unweighted pattern in CSR.

    On the CPU a compiled kernel sums each destination's rows and scales once (no per-edge weight, no
    transpose until a backward pass needs it: evaluation never builds one); elsewhere (or without numba) the
    weighted CSR product of every program (:func:`workbench.train.kernels.spmm`)."""

    crow: torch.Tensor
    """``(num_dst + 1,)`` row pointers of the block's edges grouped by destination."""
    col: torch.Tensor
    """``(num_edges,)`` local source of each edge, in ``crow``'s order."""
    scale: torch.Tensor
    """``(num_dst,)`` float32: ``1 / (sampled in-degree (+ 1 with self_loop))`` (0 in-neighbours: 1)."""
    num_dst: int
    self_loop: bool = False
    device: torch.device = torch.device("cpu")
    kernel: str = "auto"

    @classmethod
    def of(cls, block: Any, self_loop: bool, device: torch.device, kernel: str = "auto") -> "BlockAggregator":
        """The aggregator of ``block`` (its edges grouped by destination: one compiled pass, or a sort)."""
        nd = block.num_dst
        src, dst = block.edge_src, block.edge_dst
        crow = ok = None
        pointers = compiled("dst_pointers")
        if pointers is not None:
            ptr, ok = pointers(dst.numpy(), nd)
            crow = torch.from_numpy(ptr)
        if not ok:   # edges not grouped by destination (a DGL block, or no numba): a stable sort
            order = torch.argsort(dst, stable=True)
            src = src[order]
            crow = torch.zeros(nd + 1, dtype=torch.int64)
            crow[1:] = torch.cumsum(torch.bincount(dst, minlength=nd), 0)
        deg = (crow[1:] - crow[:-1]).to(torch.float32) + float(self_loop)
        return cls(crow, src.contiguous(), 1.0 / deg.clamp_min(1.0), nd, self_loop, torch.device(device), kernel)

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        if (h.device.type == "cpu" and h.dtype == torch.float32 and self.kernel in ("auto", "numba")
                and compiled("csr_mean_rows") is not None):
            return _BlockMean.apply(h, self)
        pair = self.__dict__.get("_csr")
        if pair is None or pair[0].shape[1] != h.shape[0]:
            rows = torch.repeat_interleave(torch.arange(self.num_dst), self.crow[1:] - self.crow[:-1])
            cols, weight = self.col, self.scale[rows]
            if self.self_loop:
                loops = torch.arange(self.num_dst)
                rows, cols, weight = torch.cat([rows, loops]), torch.cat([cols, loops]), torch.cat([weight, self.scale])
            pair = self.__dict__["_csr"] = tuple(
                set_kernel(x.to(self.device), self.kernel)
                for x in csr_pair(rows, cols, weight, (self.num_dst, h.shape[0]), kernel=self.kernel))
        return SpMM.apply(pair[0], pair[1], h)

    def transpose(self, num_src: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``B^T``'s CSR pattern (built on the first backward pass, then kept)."""
        t = self.__dict__.get("_t")
        if t is None or t[0].shape[0] != num_src + 1:
            crow_t, col_t = compiled("csr_transpose")(self.crow.numpy(), self.col.numpy(), num_src)
            t = self.__dict__["_t"] = (torch.from_numpy(crow_t), torch.from_numpy(col_t))
        return t


class _BlockMean(torch.autograd.Function):
    """``diag(scale) (B + [I 0]) H`` and its backward ``(B + [I 0])^T diag(scale) G`` through compiled kernels."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, agg: BlockAggregator) -> torch.Tensor:
        ctx.agg, ctx.num_src = agg, h.shape[0]
        out = torch.empty(agg.num_dst, h.shape[1], dtype=h.dtype)
        if h.shape[1]:
            call_compiled(compiled("csr_mean_rows"), agg.crow.numpy(), agg.col.numpy(), h.detach().contiguous().numpy(),
                          agg.scale.numpy(), agg.self_loop, out.numpy())
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        agg, num_src = ctx.agg, ctx.num_src
        g = (grad * agg.scale[:, None]).contiguous()
        out = torch.empty(num_src, g.shape[1], dtype=g.dtype)
        if g.shape[1]:
            crow_t, col_t = agg.transpose(num_src)
            call_compiled(compiled("csr_mean_rows"), crow_t.numpy(), col_t.numpy(), g.numpy(),
                          torch.ones(num_src).numpy(), False, out.numpy())
        if agg.self_loop:
            out[: agg.num_dst] += g
        return out, None


def block_forward(model: GNNModel, aggregators: list[BlockAggregator], x: torch.Tensor) -> torch.Tensor:
    """Logits of the seeds: layer ``i`` maps block ``i``'s source rows to its destination rows."""
    return model.forward_blocks(x, lambda h, i: aggregators[i](h), [a.num_dst for a in aggregators])


# --------------------------------------------------------------------------------------------------------
# Per-rank payload
# --------------------------------------------------------------------------------------------------------


def minibatch_name(config: Any) -> str:
    """``minibatch``, and the cache method if any (``minibatch-degree``)."""
    return "minibatch" + ("" if config.cache is None else f"-{config.method('cache')}")


@register_trainer("minibatch", name=minibatch_name, trainer="mini-batch training on sampled blocks",
                  provides=frozenset({"feature source", "sampling tasks", "inclusion probabilities", "node labels",
                                      "trainer-sampled batches", "a global seed split", "sampled evaluation"}),
                  batches="sampled blocks: seeds split among the trainers, sampled by the trainer's own process",
                  chosen_by="a block sampler, schedule.method=none")
class MiniBatchTrainer(Trainer):
    """Mini-batch training with a sampler, a feature cache and a model (see the module docstring). Its record's
    ``component`` (the ``scheduled`` key's :class:`~workbench.schedule.program.ScheduledSource`) is where the
    training batches come from when this thread does not sample them: a schedule's sampling workers."""

    # -- client side ---------------------------------------------------------------------------------------
    def prepare(self, world_size: int, emit: Callable[[Event], None]) -> list[MiniBatchShard]:
        from workbench.sample import owned_rows, split_seeds
        from workbench.train.full_graph import _partition_event, load_and_partition
        from workbench.layout.halo import build_halo_plans, local_index

        cfg = self.config
        k = cfg.sample.trainers or world_size
        cfg.validate()   # one fan-out per layer, among others (a config's sections may have been edited in place)
        errs = ErrorCollector(type(cfg).__name__)
        errs.check(k == world_size or world_size == 1, "sample.trainers",
                   f"None, the number of ranks ({world_size}), or any count on one rank", cfg.sample.trainers)
        check_batches_ahead(errs, cfg, world_size)
        errs.raise_if_any()
        if self.parts_on_ranks(world_size):
            return self._prepare_on_ranks(world_size, emit)
        graph, node_part, result = load_and_partition(cfg, world_size, graph=self._graph, node_part=self._node_part,
                                                      owner=type(self).__name__, emit=emit,
                                                      folder=self.partition_folder())
        self.split_sizes = split_sizes(graph)
        # the trainers' split: by the ranks' parts, or (single-process reference) by a k-way partition
        split_part = node_part if k == world_size else load_and_partition(cfg, world_size, graph=graph,
                                                                          num_parts=k)[1]
        labels = graph.labels.to(torch.int64)
        valid = labels >= 0

        def ids(mask):
            m = (mask if mask is not None else torch.zeros(graph.num_nodes, dtype=torch.bool)) & valid
            return torch.nonzero(m).flatten()

        train_split = split_seeds(ids(graph.train_mask), split_part, k, mode=cfg.sample.split)
        val, test = ids(graph.val_mask), ids(graph.test_mask)
        val_split, test_split = (split_seeds(v, split_part, k, mode="own") for v in (val, test))
        row_of_gid = local_index(node_part, world_size)
        degrees = graph.out_degrees()
        shards = []
        for r in range(world_size):
            owned = torch.nonzero(node_part == r).flatten()
            shards.append(MiniBatchShard(rows=owned_rows(graph, node_part, r, row_of_gid), node_part=node_part,
                                         owned_gid=owned, features=graph.features[owned].clone(), labels=labels,
                                         degrees=degrees, train_split=train_split, val_split=val_split,
                                         test_split=test_split, num_classes=graph.num_classes,
                                         trainers=[r] if k == world_size else list(range(k))))
        plans = build_halo_plans(graph, node_part, world_size)
        emit(_partition_event(graph, node_part, world_size, self.partition_method(), result,
                              [p.num_halo for p in plans], graph.num_features))
        return shards if self.component is None else self.component.shards(shards, graph)   # what its workers read

    def parts_on_ranks(self, world_size: int) -> bool:
        """Whether each rank reads its own part of a partition folder (:func:`build_minibatch_shard`): a folder
        run with one trainer per rank (not the single-process reference of several) whose batch source, if any,
        allows it; the client then reads the manifest only."""
        return (self._graph is None and self.partition_folder() is not None
                and self.config.sample.trainers in (None, world_size)
                and (self.component is None or self.component.parts_on_ranks))

    def _prepare_on_ranks(self, world_size: int, emit: Callable[[Event], None]) -> list:
        from workbench.train.part_source import part_refs, start_folder_run

        pf, event = start_folder_run(self, world_size, emit)
        emit(event)
        return part_refs(pf, self.model_stage, {})

    # -- rank side -----------------------------------------------------------------------------------------
    def rank_payload(self, ctx: RankContext, payload: Any) -> Any:
        from workbench.train.part_source import PartRef

        if not isinstance(payload, PartRef):
            return payload
        return build_minibatch_shard(payload, ctx.comm, split_mode=self.config.sample.split,
                                     degrees=self.config.cache is not None, in_degrees=self.spec.needs_in_degrees)

    def models(self, ctx: RankContext, shard: MiniBatchShard) -> list:
        return [self.build_model(ctx, shard.features.shape[1], shard.num_classes)]

    def steps(self, ctx: RankContext, shard: MiniBatchShard, models: list) -> Steps:
        pipeline = None if self.component is None else self.component.pipeline(ctx, shard)
        return MiniBatchSteps(ctx, self.config, shard, model_stage=self.model_stage, pipeline=pipeline)

    def summary_fragments(self, rank_results: list[dict], summary: Any) -> dict[str, dict]:
        """``sample`` (the sampler, its settings and per-epoch statistics), ``cache`` (the method, its hits and
        fill), ``data`` (the split sizes) and, with a schedule, ``schedule`` (the component's figures)."""
        cfg = self.config
        stats = [rank_fragment(r, "minibatch") for r in rank_results]
        per_epoch = {key: [int(sum(s[key][e] for s in stats)) for e in range(summary.epochs)]
                     for key in ("steps", "sampled_edges", "input_nodes", "remote_feature_rows", "cache_hits",
                                 "feature_bytes", "sample_bytes")}
        hits, remote = per_epoch.pop("cache_hits"), per_epoch["remote_feature_rows"]
        per_epoch["steps"] = [s // max(len(rank_results), 1) for s in per_epoch["steps"]]
        out = {"sample": {"sample": cfg.method("sample"), "fanouts": list(cfg.sample.fanouts),
                          "batch_size": cfg.sample.batch_size, **per_epoch},
               "cache": {"cache": cfg.method("cache"), "cache_hits": hits,
                         "cache_hit_rate": [h / r if r else 0.0 for h, r in zip(hits, remote)],
                         "cache_fill_bytes": int(sum(s["fill_bytes"] for s in stats))},
               "data": {"split_sizes": self.split_sizes}}
        if self.component is not None:
            out["schedule"] = self.component.figures(rank_results)
        return out


class MiniBatchSteps(Steps):
    """The steps of sampled mini-batches (one trainer).

    With ``train.batches_ahead = N > 0`` a :class:`SampledAhead` samples, pulls and builds the
    aggregators of the run's batches on a background thread, N ahead of the step being computed, in the
    order the loop takes them: every epoch's training steps, then its validation batches (and the test
    batches after the last epoch), so evaluation batches and the next epoch's first batches are prepared
    while the model computes (module docstring, "Overlap").

    ``pipeline`` (a scheduled trainer's) makes, from the sampler and whether a cache serves the input rows, where
    the training batches come from instead (:class:`~workbench.schedule.program.ScheduledBatches`: a schedule's
    sampling worker processes). Evaluation batches are sampled here either way (:meth:`evaluate_split`, what the
    ``sampled`` evaluator scores)."""

    evaluation = "sampled"
    eval_step = EVAL_STEP

    def __init__(self, ctx: RankContext, cfg: Any, shard: MiniBatchShard, *, model_stage: ModelStage,
                 pipeline: Optional[Callable[[Any, bool], Any]] = None):
        super().__init__(ctx, objective=loss_of(cfg))
        self.batches_ahead = int(getattr(cfg.train, "batches_ahead", 0))
        self._ahead: Optional[SampledAhead] = None
        from workbench.cache import FeatureStore, PullBuffers
        from workbench.sample import OwnerRoutedSource

        if self.batches_ahead:
            errs = ErrorCollector(type(cfg).__name__)
            check_batches_ahead(errs, cfg, ctx.world_size, getattr(ctx.comm, "dist_backend", None))
            errs.raise_if_any()
        self.sample_comm = ctx.comm.side("sample") if self.batches_ahead else ctx.comm
        """Where sampling and feature pulls communicate: with batches ahead, the rank's side communicator (the
        thread's collectives run beside the loop's), else the rank's own."""
        self.cfg, self.shard = cfg, shard
        self.sampler = registry("sample").build(cfg.method("sample"), cfg.sample)
        self.source = OwnerRoutedSource(shard.rows, shard.node_part, self.sample_comm)
        self.store = FeatureStore(shard.owned_gid, shard.features, shard.node_part, self.sample_comm)
        self.cache = None
        self.batch_size = cfg.sample.batch_size
        if cfg.cache is not None:
            ctx.comm.set_epoch(0)
            self.sample_comm.set_epoch(0)
            cache = registry("cache").build(cfg.method("cache"), cfg.cache)
            probabilities = self._presample(int(cfg.cache.presample_epochs)) \
                if "inclusion probabilities" in cache.requires else None
            self.cache = cache.wrap(self.store, degrees=shard.degrees, probabilities=probabilities)
        self.features = self.cache if self.cache is not None else self.store
        self.pull_buffers = PullBuffers(self.batches_ahead + 2, self.store.width, shard.features.dtype)
        """Where the batches' input rows are pulled to: the current batch's and those prepared ahead of it."""
        self.model_stage = model_stage   # the trainer's: its self-loops make the block aggregators
        self.labels = shard.labels.to(ctx.device)
        self.label_gid = shard.label_gid.to(ctx.device) if shard.label_gid is not None else None
        self.global_sizes: list[int] = []
        self.stats: dict[str, list] = defaultdict(list)
        self.fill_bytes = self.cache.fill_bytes if self.cache is not None else 0
        self.pipeline = pipeline(self.sampler, self.cache is not None) if pipeline is not None else None
        """Where the training batches come from when not from this thread (a schedule's workers)."""
        self.child_processes = self.pipeline is not None   # its workers' CPU seconds belong to the epoch's
        self._pipelined = False

    def _presample(self, epochs: int) -> torch.Tensor:
        """GNNLab's PreSC: ``(num_nodes,)`` the fraction of this rank's steps of ``epochs`` pre-sampled epochs
        (keys -1, -2, ...: never a training draw) in which each vertex is an input of the batch. A collective:
        every rank samples its steps (traffic kinds ``presample_sample_req`` / ``presample_sample_resp``)."""
        counts = torch.zeros(self.shard.node_part.numel(), dtype=torch.float64)
        steps = 0
        with self.sample_comm.phase("presample_"):
            for k in range(epochs):
                for step, seeds in enumerate(self._split_batches(self.shard.train_split, -1 - k)[0]):
                    counts[self.sampler.sample(seeds, self.source, epoch=-1 - k, step=step).input_gid] += 1.0
                    steps += 1
        return counts / max(steps, 1)

    def _labels(self, seeds: torch.Tensor) -> torch.Tensor:
        seeds = seeds.to(self.ctx.device)
        return self.labels[seeds if self.label_gid is None else torch.searchsorted(self.label_gid, seeds)]

    # -- batches -------------------------------------------------------------------------------------------
    def _split_batches(self, split, epoch: int) -> tuple[list[torch.Tensor], list[int]]:
        """This rank's batch of every step (the union over its trainers) and, per step, the global number of
        seeds (every trainer's batches: known to all from the split, no collective); the first
        ``train.max_steps`` of a training split, the first ``train.eval_batches`` of an evaluation split."""
        seed, trainers = self.cfg.sample.seed, self.shard.trainers
        limit = getattr(self.cfg.train, "max_steps" if split is self.shard.train_split else "eval_batches", None)
        per_trainer = {t: split.batches(t, epoch=epoch, batch_size=self.batch_size, seed=seed) for t in trainers}
        steps = split.num_steps(self.batch_size)
        steps = steps if limit is None else min(steps, int(limit))
        mine = [torch.cat([per_trainer[t][s] for t in trainers]) for s in range(steps)]
        return mine, split.step_sizes(self.batch_size)[:steps]

    def on_epoch_start(self, epoch: int) -> None:
        self._acc = defaultdict(int)
        self._sample_s = 0.0
        if self.batches_ahead and self._ahead is None and epoch == 0:   # inside the first epoch's clock
            self._ahead = SampledAhead(self, self.batches_ahead)

    def close(self) -> None:
        try:
            if self._ahead is not None:
                self._ahead.close()
                self._ahead = None
        finally:
            if self.pipeline is not None:
                self.pipeline.close()

    # -- overlap -------------------------------------------------------------------------------------------
    def _eval_tag(self, split) -> Optional[str]:
        return "val" if split is self.shard.val_split else "test" if split is self.shard.test_split else None

    def aggregators(self, mb) -> list[BlockAggregator]:
        """The block aggregators of a sampled batch (the run's model and kernel)."""
        return block_aggregators(self.model_stage, mb.blocks, self.ctx.device, self.ctx.kernel)

    def _batch(self, key: tuple, seeds: torch.Tensor, epoch: int, step: int, features) -> tuple:
        """``(minibatch, input rows, aggregators)``: from the batches-ahead thread (the wait timed as ``sample``), or
        sampled and pulled here (``sample``, ``fetch``; the aggregators in the caller's phase)."""
        if self._ahead is not None and key[1] is not None:
            with self.timer.phase("sample"):
                return self._ahead.get(key)
        mb, x = self._sample_and_pull(seeds, epoch, step, features)
        return mb, x, self.aggregators(mb)

    def batches(self, epoch: int):
        mine, self.global_sizes = self._split_batches(self.shard.train_split, epoch)
        out = list(enumerate(mine))
        if self.pipeline is not None:
            with self.timer.phase("sample"):   # launching the epoch's sampling DAGs
                self.pipeline.start_epoch(epoch, out)
            self._pipelined = True
        return out

    def _pipeline_rows(self, minibatch, worker_rows) -> torch.Tensor:
        """A pipeline batch's input rows: through the cache (counted as in distdgl), else the workers' rows."""
        if self.cache is not None:
            return self.features.pull(minibatch.input_gid).to(self.ctx.device)
        return torch.from_numpy(worker_rows).to(self.ctx.device)

    def _sample_and_pull(self, seeds: torch.Tensor, epoch: int, step: int, features) -> tuple:
        """The batch's blocks (timed as ``sample``, owner-routed traffic included) and its input rows (``fetch``);
        a training batch of a pipeline: waiting for it (``sample``) and its rows (``fetch``)."""
        if self._pipelined and features is self.features:
            with self.timer.phase("sample"):
                got = self.pipeline.get(step)
            with self.timer.phase("fetch"):
                return got.minibatch, self._pipeline_rows(got.minibatch, got.features[0])
        with self.timer.phase("sample"):
            mb = self.sampler.sample(seeds, self.source, epoch=epoch, step=step)
        with self.timer.phase("fetch"):   # beside a batches-ahead thread (a split out of its plan): a fresh tensor
            x = self.pull_rows(features, mb.input_gid, reuse=self._ahead is None)
        return mb, x

    def pull_rows(self, features: Any, gids: torch.Tensor, reuse: bool = True) -> torch.Tensor:
        """The input rows of ``gids`` from ``features`` (the cache or the store), on the rank's device: pulled into
        the next of the ring's buffers (``reuse``; only ever from one thread), else into a fresh tensor."""
        out = self.pull_buffers.take(int(gids.numel())) if reuse else None
        return features.pull(gids, out=out).to(self.ctx.device)

    def forward(self, batch: tuple[int, torch.Tensor]) -> StepOutput:
        if self.objective.targets is LinkTargets:
            return self._forward_links(batch)
        step, seeds = batch
        mb, x, aggregators = self._batch((self.epoch, "train", step), seeds, self.epoch, step, self.features)
        logits = block_forward(self.model, aggregators, x)
        labels = self._labels(seeds)
        total = max(self.global_sizes[step], 1)
        loss = self.objective.loss(NodeTargets(logits, labels, total=total))
        self._count([mb], mb.input_gid, seeds)
        self._sample_s += mb.elapsed_s
        yes = torch.ones(seeds.numel(), dtype=torch.bool, device=logits.device)
        return StepOutput(loss, logits.detach(), labels, (yes, ~yes, ~yes))

    def _count(self, batches: list, input_gid: torch.Tensor, seeds: torch.Tensor) -> None:
        """Add a training step's sampled edges, input and remote input vertices and seeds to the epoch's counts."""
        acc = self._acc
        acc["steps"] += 1
        acc["sampled_edges"] += sum(b.num_sampled_edges for b in batches)
        acc["input_nodes"] += sum(b.num_input_nodes for b in batches)
        acc["remote_input_nodes"] += int((self.shard.node_part[input_gid] != self.ctx.rank).sum())
        acc["seeds"] += int(seeds.numel())

    def _forward_links(self, batch: tuple[int, torch.Tensor]) -> StepOutput:
        """A step of a link objective (``loss.method=link``): the seeds', their positives' and negatives' outputs
        from the pipeline's three-branch batch, scored by the objective and divided by the global batch size. The
        logits reported for accuracy are the seeds' outputs (an unsupervised run's accuracy is not a target)."""
        step, seeds = batch
        with self.timer.phase("sample"):   # waiting for the pipeline's batch
            got = self.pipeline.get(step)
        with self.timer.phase("fetch"):
            rows = [self._pipeline_rows(mb, x) for mb, x in zip(got.batches, got.features)]
        out = [block_forward(self.model, self.aggregators(mb), x) for mb, x in zip(got.batches, rows)]
        h, pos, neg = out[0], out[1][torch.from_numpy(got.links[1])], out[2][torch.from_numpy(got.links[2])]
        loss = self.objective.loss(LinkTargets(h, pos, neg, max(self.global_sizes[step], 1)))
        self._count(got.batches, got.minibatch.input_gid, seeds)
        yes = torch.ones(seeds.numel(), dtype=torch.bool, device=h.device)
        return StepOutput(loss, h.detach(), self._labels(seeds), (yes, ~yes, ~yes))

    # -- evaluation ----------------------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate_split(self, split, epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits and labels of this rank's vertices of ``split`` (traffic kinds ``eval_*``; its sampling and
        feature pulls are timed as ``evaluate``)."""
        batches, _ = self._split_batches(split, epoch)
        logits, labels = [], []
        tag = self._eval_tag(split)
        with self.ctx.comm.phase("eval_"), self.timer.phase("evaluate", absorb=True):
            for i, seeds in enumerate(batches):  # one key for all evaluation batches: a vertex's sample ignores its batch
                mb, x, aggregators = self._batch((epoch, tag, i), seeds, epoch, EVAL_STEP, self.store)
                logits.append(block_forward(self.model, aggregators, x))
                labels.append(self._labels(seeds))
        if not logits:
            return torch.zeros(0, self.shard.num_classes, device=self.ctx.device), self.labels[:0]
        return torch.cat(logits), torch.cat(labels)

    def end_training(self, epoch: int) -> None:
        if self.pipeline is not None:   # the epoch's training batches are done: evaluation samples here
            self.pipeline.end_epoch()
            self._pipelined = False
        by_kind = self.ctx.comm.counter.bytes_by_kind(epoch)   # the training steps' traffic (before eval_)
        self._sample_bytes = by_kind.get("sample_req", 0) + by_kind.get("sample_resp", 0)
        self._feature_bytes = by_kind.get("feature_req", 0) + by_kind.get("feature", 0)

    def on_epoch_end(self, epoch: int, metrics: dict, outputs: list[StepOutput]) -> None:
        ctx, acc = self.ctx, self._acc
        sample_bytes, feature_bytes = self._sample_bytes, self._feature_bytes
        ctx.log(SampleStats(rank=ctx.rank, epoch=epoch, steps=acc["steps"], seeds=acc["seeds"],
                            sampled_edges=acc["sampled_edges"], input_nodes=acc["input_nodes"],
                            remote_input_nodes=acc["remote_input_nodes"], sample_bytes=sample_bytes,
                            feature_bytes=feature_bytes, sample_s=self._sample_s))
        hits = 0
        if self.cache is not None:
            ev = self.cache.epoch_stats(epoch, counts=self._ahead.cache_counts(epoch) if self._ahead else None)
            hits = ev.hits
            ctx.log(ev)
        s = self.stats
        s["steps"].append(acc["steps"])
        s["sampled_edges"].append(acc["sampled_edges"])
        s["input_nodes"].append(acc["input_nodes"])
        s["remote_feature_rows"].append(acc["remote_input_nodes"])
        s["cache_hits"].append(hits)
        s["feature_bytes"].append(feature_bytes)
        s["sample_bytes"].append(sample_bytes)
        for event in self.pipeline.epoch_events(epoch, self.config.epochs) if self.pipeline is not None else ():
            ctx.log(event)

    def rank_fragments(self) -> dict[str, dict]:
        out = {"minibatch": {**self.stats, "fill_bytes": self.fill_bytes}}
        return out if self.pipeline is None else {**out, "schedule": self.pipeline.result()}
