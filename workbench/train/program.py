"""The one training program: a run is its :class:`Trainer` (how it trains, chosen from the composition) run by
:class:`TrainingProgram` through the one :class:`~workbench.train.loop.TrainLoop`.

A trainer is the part of a run that the other stages plug into: it prepares what each rank holds on the client
(its payload: an exchange's shards, a feature store's rows, a part's subgraph) and, on each rank, the
:class:`~workbench.train.loop.Steps` the loop runs. The program does what every run shares, once:

* ``prepare``: the trainer's payloads (it loads and partitions through the shared
  :func:`~workbench.train.full_graph.load_and_partition`, before any rank starts);
* ``run_rank``: the kernel choice, the model replicas, the steps, the sync stage (``allreduce``, or the
  ``sync`` section's method), the ``evaluate`` stage, one :class:`~workbench.train.loop.TrainLoop`;
* ``summarize``: one :class:`~workbench.summary.RunSummary`: what every run's summary holds
  (:func:`~workbench.train.recorder.summarize_ranks`, with the trainer's predicted bytes; every stage as it ran,
  :func:`~workbench.composition.stages_summary`, a partition folder's method where the run trained on its parts;
  ``peak_rss_mb``: ``{"client": MiB, "ranks": [MiB per rank]}``, each process's peak resident memory,
  :func:`~workbench.train.recorder.peak_rss_mb`, thread ranks sharing the client's process), and the fragments the
  trainer makes of the ranks' results (:meth:`Trainer.summary_fragments`).

What a rank returns is its :class:`~workbench.train.recorder.EpochRecorder` result and ``fragments``: each piece's
own figures by name (:meth:`Steps.rank_fragments <workbench.train.loop.Steps.rank_fragments>`, the sync's, and
:meth:`Trainer.rank_fragments`), which no piece merges into another's.

The trainers (:data:`workbench.composition.TRAINERS`; a sample or sync method may name its own) are records
(:class:`~workbench.composition.TrainerSpec`), each naming the :class:`Trainer` class that runs it. No trainer class
derives from another: two keys that train alike share one class, and what differs is the record's data and the
component it gives the class (:attr:`Trainer.component`):

===================  =========================  ===================================  ==================================
key                  class (component)          when                                 steps
===================  =========================  ===================================  ==================================
``full_graph``       ``FullGraphTrainer``       ``sample`` none                      whole parts through an exchange
                                                                                     (G3 bins when set)
``edge_sampled``     ``FullGraphTrainer``       an edge sampler (PSC-GCN)            sampled edges, prefetched halos
                     (``SampledEdges``)
``minibatch``        ``MiniBatchTrainer``       a block sampler                      sampled blocks, a feature source
``scheduled``        ``MiniBatchTrainer``       a block sampler and a ``schedule``   blocks from sampling workers
                     (``ScheduledSource``)
``model_averaging``  ``ModelAveragingTrainer``  ``sync.method=model_avg`` (CATGNN)   local parts, averaged models
===================  =========================  ===================================  ==================================

The components: :class:`~workbench.train.edge_sampled.SampledEdges` (the sampler and cache attached to the
``prefetch`` exchange, the live pipeline timeline, the run's figures) and
:class:`~workbench.schedule.program.ScheduledSource` (training batches from a schedule's sampling workers).

Example:
    >>> from workbench.compose import RunConfig
    >>> cfg = RunConfig.compose(graph="karate", num_parts=2, sample={"method": "neighbor", "fanouts": (5, 5)})
    >>> program = cfg.build()
    >>> type(program).__name__, type(program.trainer).__name__, program.name
    ('TrainingProgram', 'MiniBatchTrainer', 'minibatch')
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import torch
from torch import nn

from workbench.composition import stages_summary
from workbench.events import Event
from workbench.runtime.program import Program, RankContext
from workbench.stages import registry
from workbench.summary import RunSummary, merge_fragments
from workbench.train.evaluation import evaluator_of
from workbench.train.loop import Steps, TrainLoop
from workbench.train.models import MODELS
from workbench.train.recorder import peak_rss_mb, summarize_ranks
from workbench.train.timing import PhaseTimer

__all__ = ["Trainer", "TrainingProgram"]


class Trainer:
    """How a run trains: the client side (the ranks' payloads, the trainer's summary figures) and the rank side
    (the model replicas and the :class:`~workbench.train.loop.Steps`) of one way to train.

    What the composition check reads (:mod:`workbench.composition`) is not here: it is the trainer's record
    (:class:`~workbench.composition.TrainerSpec`), which names this class and makes it. One class may run several
    records (full-graph training with and without an edge sampler); no trainer class derives from another.

    Args:
        config: the run config.
        spec: the record this trainer runs (its name, capabilities, and the component it adds).
        graph: a :class:`~workbench.graph.Graph` replacing ``config.graph`` (runtime object).
        node_part: a vertex -> part assignment replacing the partitioner.
    """

    def __init__(self, config: Any, *, spec: Any, graph: Any = None, node_part: Optional[torch.Tensor] = None):
        self.config = config
        self.spec = spec
        self.name: str = spec.run_name(config)
        """Name shown in run lists (``minibatch-degree``)."""
        self.component: Any = spec.component(config) if spec.component is not None else None
        """What the record adds to this class's plain training (``None``: nothing; each class says what it calls)."""
        self._graph = graph
        self._node_part = node_part
        self._graph_from_config = False
        """Whether ``_graph`` was loaded from ``config.graph`` by the trainer itself (not given at build time)."""
        self.notes: list[str] = []
        """Lines of the summary's ``notes`` (the program's list: settings sized or taken from others)."""
        self.split_sizes: Optional[dict] = None
        self.model_stage: Any = MODELS.build(config.method("model"), config.model)
        """The run's model stage (a :class:`~workbench.train.models.ModelStage`), built once from the config: the
        layouts, shards and aggregators take it as an object (its ``self_loops``, ``edge_weights``, ``node_scales``,
        widths), never its name, so a model registered from outside the package runs everywhere."""

    def partition_folder(self) -> Any:
        """The :class:`~workbench.data.partfolder.PartsConfig` of the partition folder ``config.graph`` names
        (``parts:DIR`` or a folder's path) when the run trains on its parts, else ``None`` (another graph spec,
        or a ``graph``/``node_part`` given at build time). The folder's owner map is then the run's partition:
        :func:`~workbench.train.full_graph.load_and_partition` takes it instead of running the partitioner."""
        if (self._graph is not None and not self._graph_from_config) or self._node_part is not None:
            return None
        from workbench.data.partfolder import parts_config_of

        return parts_config_of(self.config.graph)

    def partition_method(self) -> str:
        """The partition the run trains on: the folder's method (as its manifest names it) for a partition
        folder, else the ``partition`` stage's method."""
        folder = self.partition_folder()
        return folder.folder().method if folder is not None else self.config.method("partition")

    def partition_summary(self) -> dict:
        """The summary's ``partition`` and ``stages.partition`` entries of a run on a partition folder (its method,
        path and the options its manifest records); ``{}`` otherwise (the stage's, from the config)."""
        spec = self.partition_folder()
        if spec is None:
            return {}
        folder = spec.folder()
        stage = {"method": folder.method, "folder": str(folder.path), "num_parts": folder.num_parts,
                 **dict(folder.manifest.get("options") or {})}
        return {"partition": folder.method, "stage": stage}

    @classmethod
    def check_config(cls, config: Any, errs: Any) -> None:
        """Add to ``errs`` what this trainer refuses in ``config`` beyond the declared capabilities (called by
        :func:`~workbench.composition.check_composition` before anything is loaded). Default: nothing."""

    # -- client side -------------------------------------------------------------------------------------------
    def world_size_for(self, requested: Optional[int]) -> int:
        """Ranks to use: ``num_parts`` when set, else the parts of a given ``node_part``, else the request."""
        if self.config.num_parts is not None:
            return int(self.config.num_parts)
        if self._node_part is not None:
            return int(self._node_part.max()) + 1
        return int(requested or 1)

    def world_size_reason(self) -> Optional[str]:
        """What fixes the number of ranks when :meth:`world_size_for` does not follow the request: ``num_parts``,
        or the parts of a given ``node_part`` (``None`` when the request decides)."""
        if self.config.num_parts is not None:
            return f"num_parts={int(self.config.num_parts)}"
        if self._node_part is not None:
            return f"the {int(self._node_part.max()) + 1} parts of the given node_part"
        return None

    def prepare(self, world_size: int, emit: Callable[[Event], None]) -> list:
        """Load, partition, validate; one payload per rank."""
        raise NotImplementedError

    def client_emit(self, emit: Callable[[Event], None]) -> Callable[[Event], None]:
        """The sink of the ranks' events on the client (:meth:`workbench.runtime.program.Program.client_emit`)."""
        return emit

    def predicted_bytes(self, rank_results: list[dict]) -> dict:
        """The bytes of one exact epoch by traffic kind, with ``total`` (the summary's ``predicted_bytes_per_epoch``
        fields, compared with the counted ones; default ``{}``: none predicted), from the client's layout or the
        ranks' results (in rank order)."""
        return {}

    def bytes_per_epoch(self, bytes_by_epoch: list[int]) -> int:
        """The summary's ``bytes_per_epoch`` from the exchange's bytes of every epoch (default: the last one's)."""
        return bytes_by_epoch[-1] if bytes_by_epoch else 0

    def summary_fragments(self, rank_results: list[dict], summary: RunSummary) -> dict[str, dict]:
        """The run summary's fragments made of every rank's result (``rank_results``, in rank order, each with its
        ``fragments``): ``{name: {key: value}}``, named after the stage or section whose settings and figures they
        are (``exchange``, ``staleness``, ``sample``, ``cache``, ...). ``summary`` holds what every run has (the
        counted figures and stages) for the fragments to be computed from. A fragment says what the run did: no key
        of a mechanism the run did not use. Default: none."""
        return {}

    # -- rank side ---------------------------------------------------------------------------------------------
    def rank_payload(self, ctx: RankContext, payload: Any) -> Any:
        """The payload the rank trains, from what the client sent: a trainer whose ranks read their own parts
        builds it here (with ``ctx.comm`` for the exchange that agrees them); default: as sent."""
        return payload

    def build_model(self, ctx: RankContext, in_dim: int, out_dim: int, *, seed: Optional[int] = None,
                    pinned: Optional[frozenset] = None) -> nn.Module:
        """One replica of the run's model on the rank's device (seed: ``train.seed`` unless given)."""
        cfg = self.config
        extra = {} if pinned is None else {"pinned": pinned}
        return self.model_stage.build(
            in_dim=in_dim, out_dim=out_dim, seed=cfg.train.seed if seed is None else seed, **extra).to(ctx.device)

    def models(self, ctx: RankContext, payload: Any) -> list[nn.Module]:
        """The model replicas the rank trains (the first is the loop's model)."""
        raise NotImplementedError

    def steps(self, ctx: RankContext, payload: Any, models: list[nn.Module]) -> Steps:
        """The rank's :class:`~workbench.train.loop.Steps`."""
        raise NotImplementedError

    def rank_fragments(self, payload: Any, models: list[nn.Module]) -> dict[str, dict]:
        """What the trainer adds to the rank's result after the loop, by fragment name (default: none); see
        :meth:`Steps.rank_fragments <workbench.train.loop.Steps.rank_fragments>`."""
        return {}


class TrainingProgram(Program):
    """The one training program: ``trainer`` prepared on the client, run through the one loop on every rank,
    summarised with every stage (module docstring). :meth:`workbench.compose.RunConfig.build` makes it.

    Args:
        config: the run config (its composition already checked).
        trainer: the :class:`~workbench.composition.TrainerSpec` the composition chose (it makes the trainer).
        graph, node_part: runtime objects replacing loading and partitioning.
    """

    def __init__(self, config: Any, trainer: Any, *, graph: Any = None, node_part: Optional[torch.Tensor] = None):
        super().__init__(config)
        self.trainer: Trainer = trainer(config, graph=graph, node_part=node_part)
        self.trainer.notes = self.notes   # one list: the trainer adds what it sized (G3's memory budget)
        self.name = self.trainer.name
        self.rank_processes = bool(trainer.rank_processes)

    def world_size_for(self, requested: Optional[int]) -> int:
        return self.trainer.world_size_for(requested)

    def world_size_reason(self) -> Optional[str]:
        return self.trainer.world_size_reason()

    def config_dict(self) -> dict:
        """The config as the run log and :class:`~workbench.events.RunStarted` record it: a run on a partition
        folder records the folder's partition (its method, path and options), not the recipe's unused one."""
        out = self.config.to_dict()
        folder = self.trainer.partition_summary()
        if folder:
            out["partition"] = dict(folder["stage"])
        return out

    def prepare(self, world_size: int, emit: Callable[[Event], None]) -> list:
        return self.trainer.prepare(world_size, emit)

    def client_emit(self, emit: Callable[[Event], None]) -> Callable[[Event], None]:
        return self.trainer.client_emit(emit)

    def run_rank(self, ctx: RankContext, payload: Any) -> dict:
        cfg, trainer = self.config, self.trainer
        ctx.kernel = cfg.train.kernel
        ctx.timer = PhaseTimer(ctx.comm.counter)   # before the steps and their exchange, which open phases on it
        payload = trainer.rank_payload(ctx, payload)
        models = trainer.models(ctx, payload)
        steps = trainer.steps(ctx, payload, models)
        try:
            sync = registry("sync").build(cfg.method("sync"), cfg.sync) if getattr(cfg, "sync", None) is not None \
                else None
            loop = TrainLoop(ctx, models, cfg.train, steps, sync=sync, evaluator=evaluator_of(cfg))
        except BaseException:
            steps.close()   # the loop closes them once it runs
            raise
        out = loop.run()
        out["fragments"] = merge_fragments(out.get("fragments"), trainer.rank_fragments(payload, models))
        out["peak_rss_mb"] = peak_rss_mb()
        return out

    def summarize(self, rank_results: list[dict]) -> RunSummary:
        trainer = self.trainer
        ranks = sorted(rank_results, key=lambda r: r.get("rank", 0))
        counted = summarize_ranks(ranks, name=self.name, predicted=trainer.predicted_bytes(ranks),
                                  bytes_per_epoch=trainer.bytes_per_epoch)
        stages = stages_summary(self.config)
        folder = trainer.partition_summary()
        if folder:   # the folder's parts trained, not the partition stage's
            stages["partition"] = folder["partition"]
            stages["stages"] = {**stages["stages"], "partition": folder["stage"]}
        summary = dataclasses.replace(counted, **stages, peak_rss_mb={"client": peak_rss_mb(),
                                                                      "ranks": [r.get("peak_rss_mb") for r in ranks]})
        return summary.with_fragments(trainer.summary_fragments(ranks, summary))
