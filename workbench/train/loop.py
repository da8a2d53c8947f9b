"""The one training loop of every run (:class:`TrainLoop`), the :class:`Steps` a trainer plugs into it, and the
pieces they share: data loading, optimiser, global metrics (the epoch's events and the run summary:
:mod:`workbench.train.recorder`).

Every figure a program reports is global: the loss is the sum of the ranks' local losses, each
normalised by the GLOBAL number of training vertices (so it equals the single-process loss), and
accuracies come from one small all-reduce of correct/total counts (kind ``metrics``; the run's ``evaluate``
stage scores each epoch: :mod:`workbench.train.evaluation`).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, ClassVar, Iterable, Optional, Union

import torch
from torch import nn

from workbench._validation import Config, ErrorCollector
from workbench.constraints import Interval, OneOf, Options
from workbench.graph import Graph
from workbench.summary import merge_fragments
from workbench.train.evaluation import AutoEvaluation
from workbench.train.kernels import KERNEL_CHOICES, available_kernels
from workbench.train.objective import CrossEntropy
from workbench.train.recorder import (TRAFFIC_DETAIL_EPOCHS, TRAFFIC_DETAILS, TRAFFIC_WINDOW_EPOCHS, EpochRecorder,
                                      summarize_ranks, time_breakdown)
from workbench.train.sync import GradientAllReduce

__all__ = ["load_training_graph", "check_training_graph", "split_sizes", "make_optimizer", "EpochRecorder", "summarize_ranks", "time_breakdown",
           "partition_nodes", "OPTIMIZERS", "LabelData", "TrainLoopConfig", "TrainLoop", "Steps",
           "StepOutput", "TRAFFIC_DETAILS", "TRAFFIC_DETAIL_EPOCHS", "TRAFFIC_WINDOW_EPOCHS"]

OPTIMIZERS = ("adam", "sgd")


def load_training_graph(spec: Any, owner: str) -> Graph:
    """A :class:`Graph` from a spec string (through ``workbench.data.load_graph``) or a Graph as is."""
    if isinstance(spec, Graph):
        graph = spec
    else:
        from workbench.data import load_graph

        graph = load_graph(spec)
    check_training_graph(graph, owner)
    return graph


def split_sizes(graph: Graph) -> dict[str, int]:
    """Labelled vertices in each split (what the run trains and evaluates on; the run summary repeats it)."""
    labelled = graph.labels >= 0 if graph.labels is not None else torch.zeros(graph.num_nodes, dtype=torch.bool)
    return {k: int((getattr(graph, f"{k}_mask") & labelled).sum()) if getattr(graph, f"{k}_mask") is not None else 0
            for k in ("train", "val", "test")}


def check_training_graph(graph: Graph, owner: str) -> None:
    errs = ErrorCollector(owner)
    errs.check(graph.features is not None, "graph", "a graph with node features", graph.name)
    errs.check(graph.labels is not None, "graph", "a graph with node labels", graph.name)
    errs.check(graph.train_mask is not None and bool(graph.train_mask.any()), "graph",
               "a graph with at least one training vertex (train_mask)", graph.name)
    errs.raise_if_any()


def partition_nodes(graph: Graph, num_parts: int, method: str, config: Any = None):
    """``(node_part, PartitionResult | None)`` from the ``partition`` registry's ``method`` with ``config``
    (its ``Config``; ``None`` = defaults); one part needs no partitioner."""
    if num_parts == 1:
        return torch.zeros(graph.num_nodes, dtype=torch.int64), None
    from workbench.partition import PARTITIONERS

    result = PARTITIONERS.build(method, config).partition(graph, num_parts)
    return torch.as_tensor(result.owner_part, dtype=torch.int64), result


def make_optimizer(name: str, params, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=weight_decay)
    return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)


@dataclasses.dataclass(eq=False)
class LabelData:
    """Features, labels and split masks of the rows a rank owns."""

    features: torch.Tensor
    labels: torch.Tensor
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor
    global_nid: Optional[torch.Tensor] = None
    """Global vertex ids of the rows (dropout keys its masks by them)."""

    @classmethod
    def take(cls, graph: Graph, rows: torch.Tensor) -> "LabelData":
        n = graph.num_nodes

        def mask(m):
            return (m if m is not None else torch.zeros(n, dtype=torch.bool))[rows].clone()

        labels = graph.labels[rows].clone()
        return cls(features=graph.features[rows].clone(), labels=labels,
                   train_mask=mask(graph.train_mask) & (labels >= 0), val_mask=mask(graph.val_mask) & (labels >= 0),
                   test_mask=mask(graph.test_mask) & (labels >= 0), global_nid=torch.as_tensor(rows).clone())

    @property
    def masks(self):
        return (self.train_mask, self.val_mask, self.test_mask)


# --------------------------------------------------------------------------------------------------------
# The training loop
# --------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(kw_only=True)
class TrainLoopConfig(Config):
    """Settings of the training loop (the ``train`` section of a run config)."""

    field_requires: ClassVar[dict[str, frozenset[str]]] = {
        "batches_ahead": frozenset({"trainer-sampled batches"}),
        **{name: frozenset({"sampling tasks"}) for name in ("max_steps", "eval_batches")}}
    """Fields that only a trainer with these capabilities reads (``workbench.composition``): set away from
    their default under another trainer, they are refused rather than ignored (``batches_ahead`` under full-graph
    training or with a schedule, whose workers sample ahead already; ``max_steps`` and ``eval_batches`` without a
    schedule)."""

    epochs: Annotated[int, Interval(1, None)] = 20
    """Training epochs (full-graph: one forward, backward and update each; mini-batch: one pass over the seeds)."""
    lr: Annotated[float, Interval(0, None, closed="neither")] = 0.01
    """Learning rate."""
    optimizer: Annotated[str, Options(*OPTIMIZERS)] = "adam"
    """``adam`` or ``sgd``."""
    weight_decay: Annotated[float, Interval(0, None)] = 0.0
    """L2 weight decay."""
    weight_decay_layers: Annotated[str, Options("all", "first")] = "all"
    """Which weights ``weight_decay`` applies to: all, or first (the first layer's weights, as Kipf & Welling)."""
    seed: Annotated[int, Interval()] = 0
    """Seed of the weight initialisation (``--set seed=S`` also seeds the partitioner and the sampler)."""
    traffic_detail: Annotated[str, Options(*TRAFFIC_DETAILS)] = "auto"
    """Per-link traffic in the run log: ``epoch`` (every epoch) or ``auto`` (every epoch for the first 100, then
    summed per 100-epoch window; per-epoch totals by kind are always exact)."""
    kernel: Annotated[str, Options(*KERNEL_CHOICES)] = "auto"
    """Sparse kernel of every aggregation: ``auto`` (numba on the CPU, DGL's for large factored matrices where
    DGL imports, cuSPARSE on CUDA), ``numba``, ``torch``, ``dgl`` or ``triton`` (CUDA); a kernel this machine
    lacks is refused (:mod:`workbench.train.kernels`)."""
    target_accuracy: Annotated[Optional[float], OneOf(None, Interval(0, 1))] = None
    """A validation accuracy to reach: the summary then reports ``time_to_accuracy_s`` (the training wall time
    until the first epoch that reaches it, None if none does) and ``time_to_accuracy_epoch``."""
    batches_ahead: Annotated[int, Interval(0, None)] = 0
    """Mini-batch training: batches sampled and pulled ahead, on one background thread, while the model computes
    the current one (0 = off, inline). Same batches, same losses, same bytes; on several ranks the thread's
    sampling and pulls run on the rank's side communicator (:mod:`workbench.train.batches_ahead`). The trainer's
    wait for a batch is timed as ``sample``, the thread's work as overlapped. It gains where the model's compute
    leaves a core free."""

    max_steps: Annotated[Optional[int], OneOf(None, Interval(1, None))] = None
    """Mini-batch training: at most this many steps per epoch, the first of the epoch's shuffled batches (every
    trainer runs the same steps; None = one pass over the seeds). For graphs whose epoch is longer than a run
    can wait (a papers100M-sized graph has ~9,400 steps per trainer at 32 seeds)."""
    eval_batches: Annotated[Optional[int], OneOf(None, Interval(1, None))] = None
    """Mini-batch training: validation and test accuracy of at most this many batches per trainer, the first of
    the split's per-epoch shuffle (a uniform sample of its vertices, another one every epoch; None = every
    vertex of the split)."""

    def _validate(self, errs: ErrorCollector) -> None:
        if self.kernel not in ("auto", "torch"):   # the others need numba, DGL, or CUDA and Triton here
            here = list(dict.fromkeys(available_kernels("cpu")
                                      + (available_kernels("cuda") if torch.cuda.is_available() else [])))
            errs.check(self.kernel in here, "kernel", f"one of the kernels this machine has ({', '.join(here)})",
                       self.kernel)


@dataclasses.dataclass(eq=False)
class StepOutput:
    """What :meth:`Steps.forward` returns for one step.

    Attributes:
        loss: this rank's share of the global loss (``backward()`` is called on it; the ranks' shares add
            up to the global loss, see :mod:`~workbench.train.objective`).
        logits: ``(num_rows, num_classes)`` logits of the rows the step computed (owned rows, or a batch's seeds).
        labels: ``(num_rows,)`` their labels.
        masks: train/val/test masks of those rows (accuracy is counted where a mask is set).
        extra: per-step figures (sampled edges, cache hits, ...) that the evaluator or
            :meth:`Steps.on_epoch_end` aggregate per epoch.
    """

    loss: torch.Tensor
    logits: torch.Tensor
    labels: torch.Tensor
    masks: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    extra: dict = dataclasses.field(default_factory=dict)


class Steps:
    """What a trainer does inside the one :class:`TrainLoop`: its batches, a step's forward pass, the epoch's
    evaluation and its per-epoch events.

    A trainer (full-graph layers through an exchange, G3's bins, sampled blocks, a ByteGNN schedule, sampled
    edges with prefetched halos, CATGNN's local parts) is one subclass; the loop calls its hooks in a fixed
    order and owns everything else (epochs, optimiser, backward, sync, events, results). The hooks reach the
    loop's state through the shortcuts below (:attr:`model`, :attr:`timer`, :attr:`config`, :attr:`epoch`) once
    the loop has bound them (:meth:`bind`).

    Args:
        ctx: the rank's :class:`~workbench.runtime.program.RankContext`.
        comm: the communicator the steps use (default ``ctx.comm``; a staleness wrapper for instance): the loop
            sets its epoch and evaluates through it.
        exchange_kinds: traffic kinds reported per epoch as the exchange's bytes.
        objective: the run's ``loss`` stage (:mod:`workbench.train.objective`; default ``cross_entropy``): a step's
            loss is ``objective.loss(targets)``.
    """

    evaluation: ClassVar[str] = "outputs"
    """The ``evaluate`` method that scores these steps' epochs when the run leaves it to the trainer
    (``evaluate.method=auto``; :mod:`workbench.train.evaluation`)."""
    child_processes: bool = False
    """Whether the steps start worker processes whose CPU time belongs to the epoch's (a scheduled trainer's
    sampling workers): the loop then reads the live children's CPU seconds too (``StepTimes.train_cpu_s``)."""

    def __init__(self, ctx, *, comm=None, exchange_kinds: tuple[str, ...] = (), objective: Any = None):
        self.ctx = ctx
        self.objective = objective if objective is not None else CrossEntropy()
        """The run's ``loss`` stage."""
        self.comm = comm if comm is not None else ctx.comm
        self.exchange_kinds = tuple(exchange_kinds)
        self.loop: Optional["TrainLoop"] = None

    def bind(self, loop: "TrainLoop") -> None:
        """Called once by the loop it runs in (after the loop built its optimiser and recorder)."""
        self.loop = loop

    # -- the loop's state (read only) ------------------------------------------------------------------------
    @property
    def model(self) -> nn.Module:
        """The replica the current step trains (the loop picks it: :meth:`replica_of`)."""
        return self.loop.model

    @property
    def timer(self):
        """The rank's :class:`~workbench.train.timing.PhaseTimer`: hooks open finer phases on it."""
        return self.loop.timer

    @property
    def config(self) -> "TrainLoopConfig":
        return self.loop.config

    @property
    def epoch(self) -> int:
        return self.loop.epoch

    # -- hooks ---------------------------------------------------------------------------------------------
    def on_epoch_start(self, epoch: int) -> None:
        """Before the epoch's first step (after the stop check): refresh caches, reshuffle seeds, ..."""

    def batches(self, epoch: int) -> Iterable[Any]:
        """The epoch's steps. Default: one full-graph step (``None``). Same count on every rank."""
        return (None,)

    def replica_of(self, batch: Any) -> int:
        """Which of the rank's replicas trains ``batch`` (the loop steps that one with its own optimiser).
        Default: the one model."""
        return 0

    def forward(self, batch: Any) -> StepOutput:
        """Forward pass of one step (through the exchange or the sampled blocks)."""
        raise NotImplementedError

    def after_backward(self, batch: Any, out: StepOutput) -> None:
        """After ``loss.backward()``, before the sync (SANCUS's CAGNET weight gradient)."""

    def replica_weights(self, count: int) -> list[float]:
        """The averaging weight of each of the rank's ``count`` replicas (a sync that averages models reads them):
        ``1 / world_size`` each by default."""
        return [1.0 / self.ctx.world_size] * count

    def end_training(self, epoch: int) -> None:
        """After the epoch's training steps and sync, before its evaluation (a schedule's workers stop feeding
        training batches; the epoch's training traffic is read before evaluation adds its own)."""

    def on_epoch_end(self, epoch: int, metrics: dict, outputs: list[StepOutput]) -> None:
        """After the epoch's ``EpochEnd`` event: emit per-epoch events of the stages."""

    def rank_fragments(self) -> dict[str, dict]:
        """What these steps add to the rank's result, by the name of the piece that contributed it
        (``{"minibatch": {...}, "schedule": {...}}``; the exchange's, the step's): the rank result's ``fragments``,
        which the trainer turns into the run summary's (:meth:`Trainer.summary_fragments
        <workbench.train.program.Trainer.summary_fragments>`). Default: none."""
        return {}

    def close(self) -> None:
        """Release what the steps started (threads, worker processes); called once the loop ends, also on error."""


class TrainLoop:
    """The one epoch loop of every run; a trainer plugs in as its :class:`Steps`.

    ``run()`` does, for every epoch::

        recorder.start(epoch); comm.set_epoch(epoch); ctx.check_stop()
        steps.on_epoch_start(epoch)
        for batch in steps.batches(epoch):    # full graph: one step (None); mini-batch: sampled batches
            k = steps.replica_of(batch)       # the replica this batch trains (CATGNN: its part's model)
            model = models[k]; optimizers[k].zero_grad()
            out = steps.forward(batch)        # features in, the exchange / sampled blocks, the model
            out.loss.backward()
            steps.after_backward(batch, out)  # e.g. SANCUS's CAGNET weight gradient
            sync.after_step(self)             # allreduce: one all-reduce of the weight gradients (kind "allreduce")
            optimizers[k].step()
        sync.after_epoch(self, epoch)         # model_avg: the replicas averaged when due (kind "model_avg")
        recorder.training_done()              # the CPU seconds of the training steps (StepTimes.train_cpu_s)
        steps.end_training(epoch)             # a schedule's workers stop; the training bytes are read
        metrics = evaluator.evaluate(steps, epoch, outputs)   # global loss and accuracies (the evaluate stage)
        recorder.end(metrics)                 # EpochEnd + StepTimes + Traffic events, per-epoch results
        steps.on_epoch_end(epoch, metrics, outputs)   # extra per-epoch events (staleness, cache hit rates, ...)

    and returns the rank's result dict (``recorder.finish``, with ``fragments``: the sync's and the steps'
    :meth:`Steps.rank_fragments`, merged by :func:`~workbench.summary.merge_fragments`). Every rank must
    run the same number of steps per epoch (collectives inside each step).

    Each part runs in a phase of :attr:`timer` (``forward``; ``backward`` with ``after_backward``; ``grad_sync``;
    ``optimizer``; ``evaluate``), and a hook may open finer ones inside (``with self.timer.phase("sample"):``);
    the epoch's account is logged as :class:`~workbench.events.StepTimes` (:mod:`workbench.train.timing`).

    Args:
        ctx: the rank's :class:`~workbench.runtime.program.RankContext`.
        models: the rank's model replicas (one, or one per part under model averaging; a module is one
            replica), each stepped by its own optimiser; the first is the model the summary reports.
        config: the :class:`TrainLoopConfig`.
        steps: the trainer's :class:`Steps`.
        sync: the run's sync stage (:mod:`workbench.train.sync`; default ``allreduce``: synchronous SGD).
        evaluator: the run's ``evaluate`` stage (:mod:`workbench.train.evaluation`; default ``auto``: the way the
            steps name).

    Example:
        >>> import torch
        >>> from workbench.communicate.inprocess import InProcessGroup
        >>> from workbench.runtime.program import RankContext
        >>> class Linear(Steps):
        ...     def forward(self, batch):
        ...         x, y = torch.eye(3), torch.tensor([0, 1, 1])
        ...         logits = self.model(x)
        ...         m = torch.ones(3, dtype=torch.bool)
        ...         return StepOutput(torch.nn.functional.cross_entropy(logits, y), logits, y, (m, m, m))
        >>> ctx = RankContext(rank=0, world_size=1, comm=InProcessGroup(1).communicator(0))
        >>> loop = TrainLoop(ctx, torch.nn.Linear(3, 2), TrainLoopConfig(epochs=3, lr=0.1), Linear(ctx))
        >>> result = loop.run()
        >>> len(result["losses"]), result["losses"][-1] < result["losses"][0]
        (3, True)
    """

    def __init__(self, ctx, models: Union[nn.Module, list[nn.Module]], config: TrainLoopConfig, steps: Steps, *,
                 sync: Any = None, evaluator: Any = None):
        self.ctx = ctx
        self.models: list[nn.Module] = list(models) if isinstance(models, (list, tuple)) else [models]
        self.model = self.models[0]
        """The replica the current step trains (set by the loop before each step; the first between steps)."""
        self.config = config
        self.steps = steps
        self.sync = sync if sync is not None else GradientAllReduce()
        """The rank's sync stage: called after every step and after the epoch's last step."""
        self.evaluator = evaluator if evaluator is not None else AutoEvaluation()
        """The rank's ``evaluate`` stage: scores every epoch after its training steps."""
        self.comm = steps.comm
        self.optimizers = [self._optimizer(m) for m in self.models]
        """One optimiser per replica."""
        self.recorder = EpochRecorder(ctx, steps.exchange_kinds, config, child_processes=steps.child_processes)
        self.timer = self.recorder.timer
        """The rank's :class:`~workbench.train.timing.PhaseTimer`: the steps open finer phases on it."""
        self.epoch = 0
        steps.bind(self)

    def _optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        config = self.config
        params: Any = model.parameters()
        if config.weight_decay_layers == "first" and hasattr(model, "first_layer_parameters"):
            first = {id(p) for p in model.first_layer_parameters()}
            params = [{"params": [p for p in model.parameters() if id(p) in first]},
                      {"params": [p for p in model.parameters() if id(p) not in first], "weight_decay": 0.0}]
        return make_optimizer(config.optimizer, params, config.lr, config.weight_decay)

    def replicas(self) -> list[tuple[nn.Module, float]]:
        """The model replicas this rank trains and their averaging weights (:meth:`Steps.replica_weights`)."""
        return list(zip(self.models, self.steps.replica_weights(len(self.models))))

    def run_epoch(self, epoch: int) -> dict:
        steps, timer = self.steps, self.timer
        self.epoch = epoch
        self.recorder.start(epoch)
        if self.comm is not self.ctx.comm:
            self.comm.set_epoch(epoch)
        self.ctx.check_stop()
        for model in self.models:
            if hasattr(model, "epoch"):
                model.epoch = epoch   # a dropout key
        steps.on_epoch_start(epoch)
        outputs = []
        for batch in steps.batches(epoch):
            replica = steps.replica_of(batch)
            self.model, optimizer = self.models[replica], self.optimizers[replica]
            optimizer.zero_grad(set_to_none=False)
            with timer.phase("forward"):
                out = steps.forward(batch)
            with timer.phase("backward"):
                out.loss.backward()
                steps.after_backward(batch, out)
            with timer.phase("grad_sync"):
                self.sync.after_step(self)
            with timer.phase("optimizer"):
                optimizer.step()
            timer.steps += 1
            outputs.append(out)
        self.model = self.models[0]
        with timer.phase("grad_sync"):
            self.sync.after_epoch(self, epoch)
        self.recorder.training_done()
        steps.end_training(epoch)
        with timer.phase("evaluate"):
            metrics = self.evaluator.evaluate(steps, epoch, outputs)
        self.recorder.end(metrics)
        steps.on_epoch_end(epoch, metrics, outputs)
        return metrics

    def run(self) -> dict:
        try:
            for epoch in range(self.config.epochs):
                self.run_epoch(epoch)
        finally:
            self.steps.close()
        out = self.recorder.finish(self.model)
        out["fragments"] = merge_fragments(self.sync.rank_fragments(), self.steps.rank_fragments())
        return out
