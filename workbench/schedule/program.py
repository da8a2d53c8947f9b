"""Mini-batch training fed by sampling DAGs: ByteGNN's S-Worker / T-Worker split on one machine (VLDB 2022).

:class:`ScheduledSource` is what the ``scheduled`` trainer record adds to the mini-batch trainer
(:mod:`workbench.train.minibatch`), its one change: a trainer's training batches come from a
:class:`~workbench.schedule.executor.Pipeline` (sampling worker processes under the run's ``schedule`` method)
instead of being sampled inline, step by step. The batches
are the sample stage's keyed batches of the same steps and the trainer takes them in step order, so the
losses, weights and accuracies are those of the same run with any other scheduler (tested), and of the
plain mini-batch program up to float summation order. Evaluation samples inline, as the mini-batch program
does.

What the workers hold is ``schedule.graph_store`` (:mod:`~workbench.schedule.graphstore`):

* ``owners`` (the default, ByteGNN's Graph Store): each rank serves its part (the CSR rows of the vertices it owns
  and their feature rows) from a server thread in the trainer's process; its workers hold that part only and
  ask the owners' servers for the neighbours (NSC) and feature rows (FF) of other parts' vertices. The
  servers' addresses are exchanged once at setup (one ``all_gather`` of kind ``control``), every rank forks
  its workers before any request (a barrier), and the servers close with the steps (also on error). The
  bytes the workers count (``sample_req`` / ``sample_resp`` / ``feature_req`` / ``feature``) come back with
  each task and are added to the rank's traffic counter under the epoch, so the epoch's ``Traffic`` events
  and the summary's ``sample_bytes`` / ``feature_bytes`` hold them: for the same batches, the bytes of
  ``distdgl``'s owner-routed sampling and KVStore pulls (tested). With one rank nothing is remote (no server).
* ``local``: every worker inherits the whole graph at fork (one machine's Graph Store with every partition
  local); the sampled vertices another part owns are counted per epoch (``remote_input_nodes``), their bytes
  are not. Kept for comparison.

Either way a batch is the same keyed batch (tested). With a cache (``--set cache.method=degree`` on
``bytegnn``) the input rows of every batch go through the run's feature source instead: the trainer pulls them
from their owners' KVStore behind the cache, so hits, misses and ``feature_req`` / ``feature`` bytes are
counted exactly as in ``distdgl`` (with ``owners`` the workers' FF tasks then read no rows; with ``local``
they read them from the whole graph, unused). Per epoch each trainer emits
:class:`~workbench.events.ScheduleStats` and :class:`~workbench.events.ScheduleTrace`.

Example:
    >>> from workbench.compose import RunConfig
    >>> cfg = RunConfig.compose(graph="karate", num_parts=1, sample={"method": "neighbor", "fanouts": (5, 5),
    ...                         "batch_size": 8}, epochs=1, schedule="fixed-depth")
    >>> program = cfg.build()
    >>> type(program.trainer).__name__, program.trainer.spec.key, program.name
    ('MiniBatchTrainer', 'scheduled', 'bytegnn-fixed-depth')
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any, Callable, Optional

import numpy as np

from workbench.composition import register_trainer
from workbench.events import Event, ScheduleStats, ScheduleTrace
from workbench.graph import Graph
from workbench.runtime.program import RankContext
from workbench.schedule.executor import trace_samples
from workbench.schedule.graphstore import GraphStoreServer, PartStore, exchange_addresses
from workbench.stages import registry
from workbench.summary import rank_fragment
from workbench.train.minibatch import MiniBatchShard, MiniBatchTrainer
from workbench.train.objective import LinkTargets, loss_of

__all__ = ["ScheduledSource", "ScheduledBatches", "schedule_summary"]


class ScheduledSource:
    """Where a scheduled run's training batches come from: the component of the ``scheduled`` record, which
    :class:`~workbench.train.minibatch.MiniBatchTrainer` is given (module docstring).

    Its sampling workers hold the rank's part (``graph_store = "owners"``) or the whole graph (``"local"``) and
    hand the trainer finished batches (:class:`ScheduledBatches`); with a cache the trainer pulls their input rows
    through the feature source, so the record provides one. Inclusion probabilities are not pre-sampled here (the
    workers sample the batches).

    Args:
        config: the run config (its ``schedule`` section).
    """

    def __init__(self, config: Any):
        self.config = config
        self.parts_on_ranks = config.schedule.graph_store == "owners"
        """Whether the ranks may read their own parts of a partition folder: with ``owners`` each serves its part to
        the other ranks' workers; ``local`` gives every worker the whole graph, so the client loads it."""

    def shards(self, shards: list[MiniBatchShard], graph: Graph) -> list[MiniBatchShard]:
        """The client's shards with what the workers read: the whole graph (``local``), or every vertex's in-degree
        (``owners``: the NSC cost model's, ``(N,)``)."""
        local = self.config.schedule.graph_store == "local"
        in_degrees = None if local else graph.in_degrees().numpy()
        return [dataclasses.replace(s, graph=graph if local else None, in_degrees=in_degrees) for s in shards]

    def pipeline(self, ctx: RankContext, shard: MiniBatchShard) -> Callable[[Any, bool], ScheduledBatches]:
        """What the rank's :class:`~workbench.train.minibatch.MiniBatchSteps` make their training batches' source
        with (from the steps' sampler and whether a cache serves the input rows)."""
        cfg = self.config
        objective = loss_of(cfg)
        links = objective.config.num_negative if objective.targets is LinkTargets else 0   # the loss scores pairs

        def pipeline(sampler: Any, cached: bool) -> ScheduledBatches:
            return ScheduledBatches(ctx, cfg, shard, sampler, fetch_features=not cached, num_negative=links)

        return pipeline

    def figures(self, rank_results: list[dict]) -> dict:
        """The run's scheduling figures (:func:`schedule_summary`) and its ``schedule`` method."""
        return {**schedule_summary([rank_fragment(r, "schedule") for r in rank_results]),
                "schedule": self.config.method("schedule")}


def bytegnn_name(config: Any) -> str:
    """``bytegnn-`` and the schedule method (``bytegnn-fixed-depth``)."""
    return f"bytegnn-{config.method('schedule')}"


register_trainer("scheduled", name=bytegnn_name, trainer="mini-batch training with a schedule",
                 provides=frozenset({"sampling tasks", "feature source", "node labels", "link pairs",
                                     "a global seed split", "sampled evaluation"}),
                 # each rank starts its sampling worker processes (an embedded Dask cluster allows it)
                 rank_processes=True, needs_in_degrees=True, component=ScheduledSource,
                 batches="scheduled blocks: sampled by the schedule's worker processes, one DAG per batch",
                 chosen_by="a block sampler and schedule.method=NAME")(MiniBatchTrainer)


def schedule_summary(per_rank: list[dict]) -> dict:
    """The run's scheduling figures from the ranks' per-epoch lists: ``seeds_per_s`` (all trainers' seeds over
    the slowest trainer's training time), ``cpu_util_mean``, ``trainer_idle_fraction`` and ``dag_latency_ms``
    (means over ranks and epochs), and per-epoch ``seeds_per_s_by_epoch``."""
    if not per_rank or not per_rank[0]["seconds"]:
        return {}
    epochs = len(per_rank[0]["seconds"])
    secs = [max(r["seconds"][e] for r in per_rank) for e in range(epochs)]
    seeds = [sum(r["seeds"][e] for r in per_rank) for e in range(epochs)]

    def mean(key: str) -> float:
        return sum(sum(r[key]) for r in per_rank) / (epochs * len(per_rank))

    lat = [x for r in per_rank for x in r["dag_latency_ms_all"]]
    return {"seeds_per_s": sum(seeds) / sum(secs) if sum(secs) > 0 else 0.0,
            "seeds_per_s_by_epoch": [s / t if t > 0 else 0.0 for s, t in zip(seeds, secs)],
            "cpu_util_mean": mean("cpu_util_mean"), "trainer_idle_fraction": mean("trainer_idle_fraction"),
            "dag_latency_ms": sum(lat) / len(lat) if lat else 0.0, "train_seconds": secs}


class ScheduledBatches:
    """Where a scheduled trainer's training batches come from: a :class:`~workbench.schedule.executor.Pipeline`
    of sampling worker processes under the run's ``schedule`` method, reading the rank's Graph Store (module
    docstring). The mini-batch steps take them in step order (:class:`~workbench.train.minibatch.MiniBatchSteps`
    with ``pipeline=``), and this component reports the schedule's events and figures.

    Args:
        ctx: the rank's context.
        cfg: the run config (its ``schedule`` section).
        shard: the rank's :class:`~workbench.train.minibatch.MiniBatchShard`.
        sampler: the steps' sampler (the workers run its kernel).
        fetch_features: whether the workers gather the input rows (False when a cache serves them).
        num_negative: negatives per seed of a link objective's three-branch DAG (0: supervised batches).
    """

    def __init__(self, ctx: RankContext, cfg: Any, shard: MiniBatchShard, sampler: Any, *, fetch_features: bool,
                 num_negative: int = 0):
        self.ctx, self.epochs = ctx, int(cfg.train.epochs)
        self.scheduler = registry("schedule").build(cfg.method("schedule"), cfg.schedule)
        self.server: Optional[GraphStoreServer] = None
        self.schedule: dict[str, list] = defaultdict(list)
        self._epoch_schedule: Any = None
        try:
            store = self._graph_store(ctx, shard, sampler, fetch_features)
            self.pipeline = self.scheduler.pipeline(sampler, store, counter=ctx.comm.counter, num_negative=num_negative)
            if self.server is not None:
                ctx.comm.barrier()   # every rank forked its workers before a server answers (no lock held at a fork)
        except BaseException:
            self._close_server()
            raise

    def _graph_store(self, ctx: RankContext, shard: MiniBatchShard, sampler: Any, fetch_features: bool) -> Any:
        """The workers' Graph Store: the whole graph (``local``), or the shard's part with this rank's server
        started and every rank's address exchanged (``owners``; a collective)."""
        if self.scheduler.config.graph_store == "local":
            return shard.graph
        part = PartStore(ctx.rank, shard.rows, np.ascontiguousarray(shard.features.numpy()),
                         shard.node_part.numpy(), shard.in_degrees, fetch_features=fetch_features)
        if ctx.world_size > 1:
            self.server = GraphStoreServer(part, sampler._kernel, host=ctx.host)
            part.addresses = exchange_addresses(ctx.comm, self.server.address)
        return part

    def _close_server(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None

    def start_epoch(self, epoch: int, batches: list) -> None:
        self.pipeline.start_epoch(epoch, batches)

    def get(self, step: int) -> Any:
        """The batch of training step ``step`` (waits for the workers)."""
        return self.pipeline.get(step)

    def end_epoch(self) -> None:
        self._epoch_schedule = self.pipeline.end_epoch()

    def epoch_events(self, epoch: int, epochs: int) -> list[Event]:
        """The epoch's :class:`~workbench.events.ScheduleStats` and :class:`~workbench.events.ScheduleTrace`."""
        st, cfg = self._epoch_schedule, self.scheduler.config
        name = self.scheduler.name
        lat = [1000.0 * x for x in st.dag_latency_s]
        stats = ScheduleStats(rank=self.ctx.rank, epoch=epoch, policy=name, ready_queue=cfg.ready_queue,
                              workers=cfg.workers, num_dags=st.num_dags, num_tasks=st.num_tasks, seeds=st.seeds,
                              seconds=st.seconds, seeds_per_s=st.seeds_per_s, trainer_idle_s=st.trainer_idle_s,
                              trainer_idle_fraction=st.trainer_idle_fraction, cpu_util_mean=st.cpu_util_mean,
                              dag_latency_ms=lat, dag_latency_ms_mean=st.dag_latency_ms_mean, launch_s=list(st.launch_t))
        trace = st.trace(trace_samples(epoch, epochs, st.seconds, cfg.trace_ms))
        s = self.schedule
        s["seconds"].append(st.seconds)
        s["seeds"].append(st.seeds)
        s["cpu_util_mean"].append(st.cpu_util_mean)
        s["trainer_idle_fraction"].append(st.trainer_idle_fraction)
        s["dag_latency_ms_all"].extend(lat)
        return [stats, ScheduleTrace(rank=self.ctx.rank, epoch=epoch, policy=name, **trace)]

    def result(self) -> dict:
        return dict(self.schedule)

    def close(self) -> None:
        try:
            self.pipeline.close()
        finally:
            self._close_server()
