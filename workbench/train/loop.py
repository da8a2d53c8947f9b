"""The one training loop of every program (:class:`TrainLoop`, its hooks) and the pieces it shares:
data loading, optimiser, gradient all-reduce, global metrics, per-epoch events and the run summary.

Every figure a program reports is global: the loss is the sum of the ranks' local losses, each
normalised by the GLOBAL number of training vertices (so it equals the single-process loss), and
accuracies come from one small all-reduce of correct/total counts (kind ``metrics``).
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from typing import Annotated, Any, ClassVar, Iterable, Optional, Union

import torch
from torch import nn

from workbench._validation import Config, ErrorCollector, ParamError, param_error
from workbench.constraints import Interval, OneOf, Options
from workbench.events import STEP_PHASES, EpochEnd, Progress, StepTimes, Traffic
from workbench.graph import Graph
from workbench.train.sync import GradientAllReduce
from workbench.train.kernels import KERNEL_CHOICES, available_kernels
from workbench.train.timing import PhaseTimer

__all__ = ["load_training_graph", "check_training_graph", "split_sizes", "make_optimizer",
           "global_metrics", "EpochRecorder", "summarize_ranks", "time_breakdown", "partition_nodes", "OPTIMIZERS",
           "LabelData", "masked_loss", "TrainLoopConfig", "TrainLoop", "StepOutput", "TRAFFIC_DETAILS",
           "TRAFFIC_DETAIL_EPOCHS", "TRAFFIC_WINDOW_EPOCHS"]

OPTIMIZERS = ("adam", "sgd")
#: G3 pipeline variants (``train.pipeline``; :mod:`workbench.train.bins_pipeline`)
PIPELINES = ("sequential", "inter", "intra", "multi-level")
#: how finely the run log keeps per-link traffic (``traffic_detail``): ``auto`` or ``epoch``
TRAFFIC_DETAILS = ("auto", "epoch")
#: ``traffic_detail="auto"``: epochs below this are logged per link and epoch ...
TRAFFIC_DETAIL_EPOCHS = 100
#: ... later epochs per link summed over windows of this many epochs (100, 200), 200, 300), ...)
TRAFFIC_WINDOW_EPOCHS = 100
#: least seconds between two epoch ``Progress`` events of a rank (the first and last epochs always report)
PROGRESS_INTERVAL_S = 0.5


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


def masked_loss(logits: torch.Tensor, labels: torch.Tensor, train: torch.Tensor, num_train_global: int) -> torch.Tensor:
    """Summed cross-entropy of the local training rows divided by the GLOBAL number of training rows,
    so the ranks' losses add up to the single-process mean loss.

    ``train`` is a boolean mask, or the training rows' indices (computed once: no mask scan per epoch)."""
    idx = train if train.dtype != torch.bool else train.nonzero().squeeze(1)
    if not idx.numel():
        return logits.sum() * 0.0
    return torch.nn.functional.cross_entropy(logits.index_select(0, idx), labels.index_select(0, idx),
                                             reduction="sum") / num_train_global


def make_optimizer(name: str, params, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=weight_decay)
    return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)


def global_metrics(comm, world_size: int, loss: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor,
                   masks: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> dict[str, Optional[float]]:
    """Global loss and train/val/test accuracy from one all-reduce of 7 numbers (kind ``metrics``)."""
    hit = logits.detach().argmax(dim=1) == labels
    m = masks if isinstance(masks, torch.Tensor) else torch.stack(list(masks))     # (3, num_rows)
    counts = torch.stack([(m & hit).sum(1), m.sum(1)], 1).reshape(-1)             # hit, total per split
    t = torch.cat([loss.detach().reshape(1).to(torch.float64), counts.to(torch.float64)])
    # NCCL reduces device tensors only: t stays on the logits' device
    if world_size > 1:
        comm.all_reduce(t, kind="metrics")
    t = t.cpu()
    acc = [float(t[1 + 2 * k] / t[2 + 2 * k]) if t[2 + 2 * k] > 0 else None for k in range(3)]
    return {"loss": float(t[0]), "train_acc": acc[0], "val_acc": acc[1], "test_acc": acc[2]}


class EpochRecorder:
    """Times an epoch, emits ``EpochEnd``, ``StepTimes``, the epoch's ``Traffic`` and ``Progress`` events, keeps the
    rank's results.

    The epoch's time by step phase is kept by :attr:`timer` (a :class:`~workbench.train.timing.PhaseTimer` on the
    rank's comm clock, started and stopped with the epoch: :class:`~workbench.events.StepTimes` ``wall_s`` is
    :class:`~workbench.events.EpochEnd` ``wall_s``); the loop and the stages open its phases.

    Epoch progress (stage ``epochs``, ``done = epoch + 1``) is reported at most every
    :data:`PROGRESS_INTERVAL_S` seconds per rank (always for the first and the last epoch), so fast epochs
    do not flood the run log; ``finish`` reports stage ``evaluation`` with the final accuracies.

    Per-link traffic detail in the run log (``traffic_detail``): ``epoch`` logs one :class:`Traffic`
    event per (epoch, src, dst, kind, layer); ``auto`` (default) does so for the first
    :data:`TRAFFIC_DETAIL_EPOCHS` epochs, then sums each link over windows of :data:`TRAFFIC_WINDOW_EPOCHS`
    epochs (one event per window and link: ``epoch`` = the window's first, ``num_epochs`` = its length),
    so a 2,000-epoch log holds about a twentieth of the traffic lines. Sums over a window equal the
    per-epoch sums exactly, and :class:`EpochEnd` ``bytes_by_kind`` keeps the exact per-epoch totals by
    kind either way. A run stopped or failed mid-window loses that window's per-link detail only.

    Args:
        ctx: the rank's :class:`~workbench.runtime.program.RankContext`.
        exchange_kinds: traffic kinds of the program's exchange (summed per epoch in the result).
        config: the program's config; ``epochs`` (progress total) and ``traffic_detail`` are read from it
            when present.
        epochs: total epochs (progress bars), overriding ``config.epochs``.
        traffic_detail: ``auto`` or ``epoch``, overriding ``config.traffic_detail``.

    Example:
        >>> from workbench.communicate.inprocess import InProcessGroup
        >>> from workbench.events import ListSink
        >>> from workbench.runtime.program import RankContext
        >>> sink = ListSink()
        >>> ctx = RankContext(rank=0, world_size=1, comm=InProcessGroup(1).communicator(0), emit=sink.emit)
        >>> rec = EpochRecorder(ctx, (), epochs=250)
        >>> for epoch in range(250):
        ...     rec.start(epoch)
        ...     ctx.comm.counter.add(epoch, 0, 1, "halo_fwd", 0, 8)   # 8 bytes on link 0 -> 1
        ...     rec.end({"loss": 1.0, "train_acc": None, "val_acc": None, "test_acc": None})
        >>> traffic = sink.of_type(Traffic)
        >>> len(traffic), sum(t.bytes for t in traffic), [(t.epoch, t.num_epochs) for t in traffic[-2:]]
        (102, 2000, [(100, 100), (200, 50)])
    """

    def __init__(self, ctx, exchange_kinds: tuple[str, ...], config: Any = None, *, epochs: Optional[int] = None,
                 traffic_detail: Optional[str] = None):
        self.ctx = ctx
        self.kinds = exchange_kinds
        self.total = int(epochs if epochs is not None else (getattr(config, "epochs", 0) or 0))
        self.traffic_detail = traffic_detail or getattr(config, "traffic_detail", None) or "auto"
        assert self.traffic_detail in TRAFFIC_DETAILS, self.traffic_detail
        self._window: dict[tuple[int, int, str, int], list[int]] = defaultdict(lambda: [0, 0])
        self._window_start: Optional[int] = None
        self._window_end = 0
        self._last_metrics: dict = {}
        self._progress_at = 0.0
        self.timer = PhaseTimer(ctx.comm.counter)
        self.result: dict[str, Any] = {"rank": ctx.rank, "losses": [], "train_acc": [], "val_acc": [], "test_acc": [],
                                       "epoch_wall_s": [], "compute_s": [], "comm_s": [],
                                       "bytes_by_kind": defaultdict(int), "exchange_bytes_by_epoch": [],
                                       "exchange_kind_bytes_by_epoch": [], "step_times": []}

    def start(self, epoch: int) -> None:
        self.epoch = epoch
        self.ctx.comm.set_epoch(epoch)
        self._c0 = self.ctx.comm.counter.comm_seconds
        self._t0 = self.timer.start()

    def end(self, metrics: dict) -> None:
        ctx, res = self.ctx, self.result
        phases, wall = self.timer.stop()
        comm_s = ctx.comm.counter.comm_seconds - self._c0
        counter = ctx.comm.counter
        by_kind = counter.bytes_by_kind(self.epoch)
        messages = counter.total_messages(self.epoch)
        ctx.log(EpochEnd(rank=ctx.rank, epoch=self.epoch, loss=metrics["loss"], train_acc=metrics["train_acc"],
                         val_acc=metrics["val_acc"], test_acc=metrics["test_acc"],
                         compute_s=max(wall - comm_s, 0.0), comm_s=comm_s, wall_s=wall,
                         bytes_by_kind=by_kind, messages=messages))
        ctx.log(StepTimes(rank=ctx.rank, epoch=self.epoch, steps=self.timer.steps, program=ctx.program,
                          seconds=phases, wall_s=wall))
        self._log_traffic(counter.drain(ctx.run_id))
        now = time.monotonic()
        if self.epoch == 0 or self.epoch + 1 >= self.total or now - self._progress_at >= PROGRESS_INTERVAL_S:
            self._progress_at = now
            ctx.log(Progress(stage="epochs", rank=ctx.rank, done=self.epoch + 1, total=self.total))
        self._last_metrics = metrics
        res["losses"].append(metrics["loss"])
        for k in ("train_acc", "val_acc", "test_acc"):
            res[k].append(metrics[k])
        res["epoch_wall_s"].append(wall)
        res["compute_s"].append(max(wall - comm_s, 0.0))
        res["comm_s"].append(comm_s)
        res["step_times"].append(dict(phases))
        for k, b in by_kind.items():
            res["bytes_by_kind"][k] += b
        res["exchange_kind_bytes_by_epoch"].append({k: by_kind.get(k, 0) for k in self.kinds})
        res["exchange_bytes_by_epoch"].append(sum(by_kind.get(k, 0) for k in self.kinds))

    def _log_traffic(self, records: list[Traffic]) -> None:
        """Log this epoch's per-link records, or add them to the open window (``traffic_detail``)."""
        epoch = self.epoch
        if self.traffic_detail == "epoch" or epoch < TRAFFIC_DETAIL_EPOCHS:
            for ev in records:
                self.ctx.log(ev)
            return
        start = TRAFFIC_DETAIL_EPOCHS + (epoch - TRAFFIC_DETAIL_EPOCHS) // TRAFFIC_WINDOW_EPOCHS * TRAFFIC_WINDOW_EPOCHS
        if self._window_start is not None and self._window_start != start:
            self._flush_window()
        self._window_start = start
        self._window_end = epoch + 1
        for ev in records:
            rec = self._window[(ev.src_rank, ev.dst_rank, ev.kind, ev.layer)]
            rec[0] += ev.bytes
            rec[1] += ev.messages
        if self._window_end - start == TRAFFIC_WINDOW_EPOCHS or self._window_end == self.total:
            self._flush_window()

    def _flush_window(self) -> None:
        start, n = self._window_start, self._window_end - (self._window_start or 0)
        for (src, dst, kind, layer), (nbytes, messages) in sorted(self._window.items()):
            self.ctx.log(Traffic(epoch=start, num_epochs=n, src_rank=src, dst_rank=dst, kind=kind, layer=layer,
                                 bytes=nbytes, messages=messages))
        self._window.clear()
        self._window_start = None

    def finish(self, model: nn.Module) -> dict:
        if self._window_start is not None:
            self._flush_window()
        m = self._last_metrics
        accs = ", ".join(f"{k} {m[f'{k}_acc']:.3f}" for k in ("train", "val", "test") if m.get(f"{k}_acc") is not None)
        self.ctx.log(Progress(stage="evaluation", rank=self.ctx.rank, done=1, total=1, message=accs))
        self.result["bytes_by_kind"] = dict(self.result["bytes_by_kind"])
        self.result["params"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        return self.result


def time_breakdown(results: list[dict]) -> dict:
    """The run summary's ``time_breakdown`` from the ranks' results (their per-epoch ``step_times``).

    Returns:
        ``{"phases": [...], "by_rank": [{phase: [seconds per epoch]} per rank, in rank order],
        "mean_per_epoch": {phase: mean over ranks and epochs}}`` (the phases of :data:`~workbench.events.STEP_PHASES`).

    Example:
        >>> r = [{"rank": 0, "step_times": [{"forward": 1.0}, {"forward": 3.0}]}, {"rank": 1, "step_times": [{}]}]
        >>> tb = time_breakdown(r)
        >>> tb["by_rank"][0]["forward"], tb["mean_per_epoch"]["forward"], tb["mean_per_epoch"]["sample"]
        ([1.0, 3.0], 1.3333333333333333, 0.0)
    """
    results = sorted(results, key=lambda r: r.get("rank", 0))
    by_rank = [{p: [float(epoch.get(p, 0.0)) for epoch in r.get("step_times", [])] for p in STEP_PHASES}
               for r in results]
    mean = {}
    for p in STEP_PHASES:
        values = [x for rank in by_rank for x in rank[p]]
        mean[p] = sum(values) / len(values) if values else 0.0
    return {"phases": list(STEP_PHASES), "by_rank": by_rank, "mean_per_epoch": mean}


def summarize_ranks(results: list[dict], *, name: str, predicted: dict, extra: Optional[dict] = None) -> dict:
    """The JSON-safe run summary from the ranks' results (rank 0 holds the global loss/accuracy).

    ``time_breakdown`` holds every rank's time per epoch by step phase (:func:`time_breakdown`)."""
    results = sorted(results, key=lambda r: r.get("rank", 0))
    r0 = results[0]
    bytes_by_kind: dict[str, int] = defaultdict(int)
    for r in results:
        for k, b in r["bytes_by_kind"].items():
            bytes_by_kind[k] += int(b)
    num_epochs = len(r0["losses"])
    per_epoch = [sum(r["exchange_bytes_by_epoch"][e] for r in results) for e in range(num_epochs)]
    kinds = r0["exchange_kind_bytes_by_epoch"][-1].keys() if num_epochs else []
    per_epoch_kind = {k: [sum(r["exchange_kind_bytes_by_epoch"][e][k] for r in results) for e in range(num_epochs)]
                      for k in kinds}
    epoch_times = [max(r["epoch_wall_s"][e] for r in results) for e in range(num_epochs)]
    params = r0.get("params", {})
    summary = {
        "program": name,
        "world_size": len(results),
        "epochs": num_epochs,
        "losses": [float(x) for x in r0["losses"]],
        "accuracy": {k: r0[f"{k}_acc"][-1] if num_epochs else None for k in ("train", "val", "test")},
        "accuracy_by_epoch": {k: list(r0[f"{k}_acc"]) for k in ("train", "val", "test")},
        "bytes_by_kind": dict(bytes_by_kind),
        "bytes_per_epoch": int(per_epoch[-1]) if num_epochs else 0,
        "bytes_by_epoch": [int(b) for b in per_epoch],
        "bytes_per_epoch_by_kind": {k: int(v[-1]) for k, v in per_epoch_kind.items()} if num_epochs else {},
        "predicted_bytes_per_epoch": int(predicted.get("total", 0)),
        "predicted_bytes_per_epoch_by_kind": {k: int(v) for k, v in predicted.items() if k != "total"},
        "epoch_times": epoch_times,
        "compute_s": [max(r["compute_s"][e] for r in results) for e in range(num_epochs)],
        "comm_s": [max(r["comm_s"][e] for r in results) for e in range(num_epochs)],
        "param_checksums": {k: [float(v.double().sum()), float(v.double().pow(2).sum())] for k, v in params.items()},
        "time_breakdown": time_breakdown(results),
    }
    if extra:
        summary.update(extra)
    return summary


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
        **{name: frozenset({"whole-part layers"}) for name in ("bin_limit", "pipeline", "memory_budget")},
        "prefetch": frozenset({"sampling tasks"})}
    """Fields that only a trainer with these capabilities reads (``workbench.composition``): set away from
    their default under another trainer, they are refused rather than ignored (G3's bins under sampling,
    ``prefetch`` under full-graph training)."""

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
    bin_limit: Annotated[Optional[int], OneOf(None, Interval(0, None))] = None
    """G3 bins (full-graph): None trains each part whole; 0 packs each layer's vertices into bins of at most half
    of memory_budget; k > 0 also caps a bin at k vertices (exact for any value)."""
    pipeline: Annotated[str, Options(*PIPELINES)] = "multi-level"
    """G3 pipeline variant of the headline simulated epoch time: ``sequential``, ``inter``, ``intra`` or
    ``multi-level`` (every variant is reported when bins are on)."""
    memory_budget: Annotated[Optional[Union[int, str]],
                             OneOf(None, "auto", Interval(1, None, unit="bytes"))] = None
    """Device memory in bytes (full-graph): a bin holds at most half of it, whole-part training must fit in it;
    ``auto`` = sized from the graph (half the largest part's working set, at least 4 x the largest vertex with
    its neighbours; the summary says which); None = unlimited."""
    kernel: Annotated[str, Options(*KERNEL_CHOICES)] = "auto"
    """Sparse kernel of every aggregation: ``auto`` (numba on the CPU, DGL's for large factored matrices where
    DGL imports, cuSPARSE on CUDA), ``numba``, ``torch``, ``dgl`` or ``triton`` (CUDA); a kernel this machine
    lacks is refused (:mod:`workbench.train.kernels`)."""
    target_accuracy: Annotated[Optional[float], OneOf(None, Interval(0, 1))] = None
    """A validation accuracy to reach: the summary then reports ``time_to_accuracy_s`` (the training wall time
    until the first epoch that reaches it, None if none does) and ``time_to_accuracy_epoch``."""
    prefetch: Annotated[int, Interval(0, None)] = 0
    """Mini-batch training: batches sampled and pulled ahead, on one background thread, while the model computes
    the current one (0 = off, inline). Same batches, same losses (bit for bit), same bytes; one rank only (its
    sampling and pulls need no collective), refused on more (:mod:`workbench.train.minibatch`). The trainer's
    wait for a batch is timed as ``sample``. It gains where the model's compute leaves a core free."""

    def _validate(self, errs: ErrorCollector) -> None:
        if self.kernel not in ("auto", "torch"):   # the others need numba, DGL, or CUDA and Triton here
            here = list(dict.fromkeys(available_kernels("cpu")
                                      + (available_kernels("cuda") if torch.cuda.is_available() else [])))
            errs.check(self.kernel in here, "kernel", f"one of the kernels this machine has ({', '.join(here)})",
                       self.kernel)
        errs.check(not (self.bin_limit == 0 and self.memory_budget is None), "bin_limit",
                   "a vertex count > 0, or 0 together with memory_budget (bins sized to half the budget)", self.bin_limit)


@dataclasses.dataclass(eq=False)
class StepOutput:
    """What :meth:`TrainLoop.forward` returns for one step.

    Attributes:
        loss: this rank's share of the global loss (``backward()`` is called on it; the ranks' shares add
            up to the global loss, see :func:`masked_loss`).
        logits: ``(num_rows, num_classes)`` logits of the rows the step computed (owned rows, or a batch's seeds).
        labels: ``(num_rows,)`` their labels.
        masks: train/val/test masks of those rows (accuracy is counted where a mask is set).
        extra: per-step figures (sampled edges, cache hits, ...) that :meth:`TrainLoop.evaluate` or
            :meth:`TrainLoop.on_epoch_end` aggregate per epoch.
    """

    loss: torch.Tensor
    logits: torch.Tensor
    labels: torch.Tensor
    masks: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    extra: dict = dataclasses.field(default_factory=dict)


class TrainLoop:
    """The one epoch loop of every training program; programs plug in through its hooks.

    ``run()`` does, for every epoch::

        recorder.start(epoch); comm.set_epoch(epoch); ctx.check_stop()
        on_epoch_start(epoch)
        for batch in batches(epoch):          # full graph: one step (None); mini-batch: sampled batches
            zero_grad; out = forward(batch)   # features in, the exchange / sampled blocks, the model
            out.loss.backward()
            after_backward(batch, out)        # e.g. SANCUS's CAGNET weight gradient
            sync.after_step(self)             # allreduce: one all-reduce of the weight gradients (kind "allreduce")
            optimizer.step()
        sync.after_epoch(self, epoch)         # model_avg: the replicas averaged when due (kind "model_avg")
        metrics = evaluate(epoch, outputs)    # global loss and accuracies (one tiny all-reduce)
        recorder.end(metrics)                 # EpochEnd + StepTimes + Traffic events, per-epoch results
        on_epoch_end(epoch, metrics, outputs) # extra per-epoch events (staleness, cache hit rates, ...)

    and returns the rank's result dict (``recorder.finish`` plus :meth:`extra_result`). Every rank must run
    the same number of steps per epoch (collectives inside each step).

    Each part runs in a phase of :attr:`timer` (``forward``; ``backward`` with ``after_backward``; ``grad_sync``;
    ``optimizer``; ``evaluate``), and a hook may open finer ones inside (``with self.timer.phase("sample"):``);
    the epoch's account is logged as :class:`~workbench.events.StepTimes` (:mod:`workbench.train.timing`).

    Args:
        ctx: the rank's :class:`~workbench.runtime.program.RankContext`.
        model: the rank's model replica.
        config: the :class:`TrainLoopConfig`.
        comm: the communicator the steps use (default ``ctx.comm``; a staleness wrapper for instance).
        exchange_kinds: traffic kinds reported per epoch as the exchange's bytes.
        sync: the run's sync stage (:mod:`workbench.train.sync`; default ``allreduce``: synchronous SGD).

    Example:
        >>> import torch
        >>> from workbench.communicate.inprocess import InProcessGroup
        >>> from workbench.runtime.program import RankContext
        >>> class Linear(TrainLoop):
        ...     def forward(self, batch):
        ...         x, y = torch.eye(3), torch.tensor([0, 1, 1])
        ...         logits = self.model(x)
        ...         m = torch.ones(3, dtype=torch.bool)
        ...         return StepOutput(torch.nn.functional.cross_entropy(logits, y), logits, y, (m, m, m))
        >>> ctx = RankContext(rank=0, world_size=1, comm=InProcessGroup(1).communicator(0))
        >>> loop = Linear(ctx, torch.nn.Linear(3, 2), TrainLoopConfig(epochs=3, lr=0.1))
        >>> result = loop.run()
        >>> len(result["losses"]), result["losses"][-1] < result["losses"][0]
        (3, True)
    """

    prefetches: ClassVar[bool] = False
    """Whether the loop reads ``train.prefetch`` (the mini-batch loop); any other loop refuses a value other than 0
    when it is built, so the setting is never silently ignored (the composition check refuses it earlier under
    the trainers it knows)."""

    def __init__(self, ctx, model: nn.Module, config: TrainLoopConfig, *, comm=None,
                 exchange_kinds: tuple[str, ...] = (), sync: Any = None):
        prefetch = getattr(config, "prefetch", 0)
        if prefetch and not self.prefetches:
            raise ParamError([param_error("train.prefetch", type(self).__name__,
                                          "0: this trainer samples no batches ahead (only mini-batch training on "
                                          "sampled blocks reads it)", prefetch)])
        self.ctx = ctx
        self.model = model
        self.config = config
        self.sync = sync if sync is not None else GradientAllReduce()
        """The rank's sync stage: called after every step and after the epoch's last step."""
        self.comm = comm if comm is not None else ctx.comm
        params: Any = model.parameters()
        if config.weight_decay_layers == "first" and hasattr(model, "first_layer_parameters"):
            first = {id(p) for p in model.first_layer_parameters()}
            params = [{"params": [p for p in model.parameters() if id(p) in first]},
                      {"params": [p for p in model.parameters() if id(p) not in first], "weight_decay": 0.0}]
        self.optimizer = make_optimizer(config.optimizer, params, config.lr, config.weight_decay)
        self.recorder = EpochRecorder(ctx, tuple(exchange_kinds), config)
        self.timer = self.recorder.timer
        """The rank's :class:`~workbench.train.timing.PhaseTimer`: hooks open finer phases on it."""
        self.epoch = 0

    # -- hooks ---------------------------------------------------------------------------------------------
    def on_epoch_start(self, epoch: int) -> None:
        """Before the epoch's first step (after the stop check): refresh caches, reshuffle seeds, ..."""

    def batches(self, epoch: int) -> Iterable[Any]:
        """The epoch's steps. Default: one full-graph step (``None``). Same count on every rank."""
        return (None,)

    def forward(self, batch: Any) -> StepOutput:
        """Forward pass of one step (through the exchange or the sampled blocks)."""
        raise NotImplementedError

    def after_backward(self, batch: Any, out: StepOutput) -> None:
        """After ``loss.backward()``, before the gradient all-reduce."""

    def replicas(self) -> list[tuple[nn.Module, float]]:
        """The model replicas this rank trains and their averaging weights (a sync that averages models reads
        them): the model, weighted ``1 / world_size``."""
        return [(self.model, 1.0 / self.ctx.world_size)]

    def evaluate(self, epoch: int, outputs: list[StepOutput]) -> dict[str, Optional[float]]:
        """Global loss and train/val/test accuracy of the epoch (default: from the steps' outputs)."""
        if len(outputs) == 1:
            o = outputs[0]
            return global_metrics(self.comm, self.ctx.world_size, o.loss, o.logits, o.labels, o.masks)
        loss = torch.stack([o.loss.detach() for o in outputs]).mean()
        logits = torch.cat([o.logits.detach() for o in outputs])
        labels = torch.cat([o.labels for o in outputs])
        masks = tuple(torch.cat([o.masks[k] for o in outputs]) for k in range(3))
        return global_metrics(self.comm, self.ctx.world_size, loss, logits, labels, masks)

    def on_epoch_end(self, epoch: int, metrics: dict, outputs: list[StepOutput]) -> None:
        """After the epoch's ``EpochEnd`` event: emit per-epoch events of the stages."""

    def extra_result(self) -> dict:
        """Entries added to the rank's result dict."""
        return {}

    # -- body ----------------------------------------------------------------------------------------------
    def run_epoch(self, epoch: int) -> dict:
        self.epoch = epoch
        self.recorder.start(epoch)
        if self.comm is not self.ctx.comm:
            self.comm.set_epoch(epoch)
        self.ctx.check_stop()
        if hasattr(self.model, "epoch"):
            self.model.epoch = epoch   # a dropout key
        self.on_epoch_start(epoch)
        timer = self.timer
        outputs = []
        for batch in self.batches(epoch):
            self.optimizer.zero_grad(set_to_none=False)
            with timer.phase("forward"):
                out = self.forward(batch)
            with timer.phase("backward"):
                out.loss.backward()
                self.after_backward(batch, out)
            with timer.phase("grad_sync"):
                self.sync.after_step(self)
            with timer.phase("optimizer"):
                self.optimizer.step()
            timer.steps += 1
            outputs.append(out)
        with timer.phase("grad_sync"):
            self.sync.after_epoch(self, epoch)
        with timer.phase("evaluate"):
            metrics = self.evaluate(epoch, outputs)
        self.recorder.end(metrics)
        self.on_epoch_end(epoch, metrics, outputs)
        return metrics

    def run(self) -> dict:
        for epoch in range(self.config.epochs):
            self.run_epoch(epoch)
        out = self.recorder.finish(self.model)
        out.update(self.sync.result())
        out.update(self.extra_result())
        return out
