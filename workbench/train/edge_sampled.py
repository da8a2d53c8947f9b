"""Full-graph training on sampled edges (PSC-GCN, Wang et al.): what it adds to full-graph training, and its
timing account and figures.

The ``edge_sampled`` key is :class:`~workbench.train.full_graph.FullGraphTrainer` given :class:`SampledEdges`
(its record's component, :class:`~workbench.composition.TrainerSpec`): chosen when the sample method names it
(every :class:`~workbench.sample.psc.EdgeSampler`), it trains through the ``prefetch`` exchange
(:mod:`workbench.train.prefetch`; the composition refuses another, which would not move the sampled edges' halo
rows) and adds

* on every rank, the edge sampler, the cache and the :class:`RankTiming` it attaches to the exchange (each
  iteration's cost goes to the client as a :class:`~workbench.events.PipelineCost` event);
* on the client, the :class:`~workbench.sim.pipeline_time.TimelineRecorder` that turns those costs into the
  run's :class:`~workbench.events.PipelineTimeline` as the iterations complete;
* the run's figures (:func:`prefetch_figures`), which replace the full-graph ones: the predicted bytes of whole
  halos do not hold for sampled boundaries.

Without a sampler the ``prefetch`` exchange is PipeGCN under plain full-graph training, which adds none of this.

Example:
    >>> from workbench.compose import RunConfig
    >>> program = RunConfig.compose(graph="karate", num_parts=2, sample="psc", epochs=1).build()
    >>> type(program.trainer).__name__, program.trainer.spec.key, program.name
    ('FullGraphTrainer', 'edge_sampled', 'prefetch')
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable

from workbench.composition import register_trainer
from workbench.events import Event, PipelineCost
from workbench.summary import rank_fragment
from workbench.train.full_graph import FULL_GRAPH_INSTEAD, FullGraphTrainer, full_graph_name
from workbench.sim.pipeline_time import IterationCost, TimelineRecorder, scaled_bandwidth, simulate_pipeline

if TYPE_CHECKING:
    from workbench.train.prefetch import PrefetchRank

__all__ = ["SampledEdges", "RankTiming", "allreduce_bytes", "iteration_cost", "prefetch_figures", "FLOPS_PER_S"]

FLOPS_PER_S = 1e9
"""Nominal compute rate of the timing account (only ratios matter: the bandwidth is scaled to it)."""
ID_BYTES = 8


class SampledEdges:
    """What full-graph training on sampled edges adds to :class:`~workbench.train.full_graph.FullGraphTrainer`
    (module docstring): the component of the ``edge_sampled`` record.

    Args:
        config: the run config (its ``sample``, ``cache`` and ``prefetch`` exchange sections).
    """

    def __init__(self, config: Any):
        self.config = config

    def client_emit(self, emit: Callable[[Event], None], world_size: int) -> Callable[[Event], None]:
        """The ranks' :class:`~workbench.events.PipelineCost` events become the run's
        :class:`~workbench.events.PipelineTimeline` (simulated on the client as the iterations complete)."""
        ex = self.config.exchange
        return TimelineRecorder(emit, world_size, int(ex.tau), float(ex.comm_ratio),
                                last_iteration=int(self.config.train.epochs) - 1)

    def attach_args(self, ctx: Any, model: Any, widths: list[int]) -> dict:
        """The exchange's ``attach`` arguments on a rank: the edge sampler, the cache (if any), the timing."""
        from workbench.cache.policies import CACHES
        from workbench.sample.base import SAMPLERS

        cfg = self.config
        sampler = SAMPLERS.build(cfg.method("sample"), cfg.sample)
        cache = CACHES.build(cfg.method("cache"), cfg.cache) if cfg.cache is not None else None
        timing = RankTiming(widths=list(widths), cached=cache is not None, sampled=cfg.sample is not None,
                            allreduce_bytes=allreduce_bytes(sum(p.numel() for p in model.parameters()), ctx.world_size))
        return {"sampler": sampler, "cache": cache, "timing": timing}

    def rank_fragments(self, models: list) -> dict[str, dict]:
        """The rank's ``model`` fragment: the model's size, which the figures' all-reduce bytes are made of."""
        return {"model": {"num_params": sum(p.numel() for p in models[0].parameters())}}

    def summary_fragments(self, rank_results: list[dict], widths: list[int]) -> dict[str, dict]:
        """The run summary's fragments (:meth:`Trainer.summary_fragments
        <workbench.train.program.Trainer.summary_fragments>`): the ``exchange``, ``sample`` and ``cache`` methods,
        and ``prefetch``, the figures of :func:`prefetch_figures`."""
        cfg = self.config
        return {"exchange": {"exchange": cfg.method("exchange")}, "sample": {"sample": cfg.method("sample")},
                "cache": {"cache": cfg.method("cache")}, "prefetch": prefetch_figures(rank_results, widths, cfg)}


# named as full-graph runs are, after the exchange (``prefetch``): run lists and summaries have always said so
register_trainer("edge_sampled", name=full_graph_name, trainer="full-graph training on sampled edges",
                 provides=frozenset({"embedding exchange", "feature source", "node labels", "whole-part logits"}),
                 default_exchange="prefetch", instead=FULL_GRAPH_INSTEAD, component=SampledEdges,
                 batches="sampled edges: the whole part, each layer on the edges an edge sampler keeps",
                 chosen_by="an edge sampler")(FullGraphTrainer)


@dataclasses.dataclass
class RankTiming:
    """What a rank needs to cost its iterations for the live timeline (the figures' :func:`iteration_cost`)."""

    widths: list
    cached: bool
    sampled: bool
    allreduce_bytes: float

    def cost(self, ex: "PrefetchRank", rec: dict, exact: bool = False) -> IterationCost:
        return iteration_cost(rec, self.widths, num_inner=ex.n, num_halo=ex.nh, full_edges=ex.edges.num_edges,
                              cached=self.cached, sampled=self.sampled, allreduce_bytes=self.allreduce_bytes,
                              exact=exact)

    def event(self, ex: "PrefetchRank", rec: dict, epoch: int) -> PipelineCost:
        """This rank's cost of iteration ``epoch`` (with the exact synchronous cost at the first one)."""
        c = self.cost(ex, rec)
        exact = dataclasses.asdict(self.cost(ex, rec, exact=True)) if epoch == 0 else None
        return PipelineCost(rank=ex.plan.rank, epoch=epoch, fwd_s=c.fwd_s, bwd_s=c.bwd_s, fetch_bytes=c.fetch_bytes,
                            grad_bytes=c.grad_bytes, allreduce_bytes=c.allreduce_bytes, exact=exact)


def allreduce_bytes(num_params: int, world_size: int) -> float:
    """Bytes one worker moves in a ring all-reduce of ``num_params`` float32 weight gradients."""
    return 2 * (world_size - 1) / world_size * num_params * 4 if world_size > 1 else 0.0


def iteration_cost(rec: dict, widths: list[int], *, num_inner: int, num_halo: int, full_edges: int, cached: bool,
                   sampled: bool, allreduce_bytes: float, exact: bool = False) -> IterationCost:
    """One rank's iteration in the timing account, from its record (``prefetch_records``): compute from
    flops on the kept edges (``exact``: every edge, every halo row, no cache: a synchronous exact iteration)
    and the bytes of the streams (the byte formulas of :mod:`workbench.train.prefetch`)."""
    D = widths[0]
    nnz = rec["kept_edges"] if not exact else full_edges
    rows_f = rec["sg_rows"] if not exact else num_halo
    rows_b = rec["tg_rows"] if not exact else num_halo
    out_w = [*widths[1:], max(widths[-1], 1)]
    fwd = [(2 * nnz * w + 2 * num_inner * w * o) / FLOPS_PER_S for w, o in zip(widths, out_w)]
    bwd = [2 * f for f in fwd]
    fmiss = rec["feature_misses"] if (rec["feature_misses"] is not None and not exact) else rows_f
    fetch = [(fmiss * (D * 4 + (ID_BYTES if cached and not exact else 0))) if l == 0 else rows_f * w * 4
             for l, w in enumerate(widths)]
    if not exact and rec["sg_rows"] and sampled:
        fetch[0] += ID_BYTES * rec["sg_rows"]
    grad = [0 if l == 0 else rows_b * w * 4 for l, w in enumerate(widths)]
    return IterationCost(fwd_s=fwd, bwd_s=bwd, fetch_bytes=fetch, grad_bytes=grad, allreduce_bytes=allreduce_bytes)


def prefetch_figures(rank_results: list[dict], widths: list[int], config: Any) -> dict:
    """The PSC-GCN figures of a run (per epoch = iteration): cache hit rate, remote feature rows and bytes,
    realised staleness per stream, sampled vs expected boundary rows, variance, simulated time."""
    results = sorted(rank_results, key=lambda r: r.get("rank", 0))
    exchanges = [rank_fragment(r, "exchange") for r in results]   # the prefetch exchange's records and sizes
    recs = [x["prefetch_records"] for x in exchanges]
    T = len(recs[0])
    D = widths[0]
    cached = getattr(config, "cache", None) is not None
    remote_rows = [sum(r[t]["sg_rows"] for r in recs) for t in range(T)]
    misses = [sum((r[t]["feature_misses"] if r[t]["feature_misses"] is not None else r[t]["sg_rows"]) for r in recs)
              for t in range(T)]
    feature_bytes = [m * (D * 4 + (ID_BYTES if cached else 0)) for m in misses]
    hit = [1.0 - m / rr if rr else None for m, rr in zip(misses, remote_rows)]

    def realised(key):
        out = []
        for t in range(T):
            ages = [a for r in recs for a in r[t][key] if a is not None]
            out.append(max(ages) if ages else None)
        return out

    refreshes = [x["prefetch_refreshes"] for x in exchanges]
    variance = []
    for k in range(len(refreshes[0])):
        rows = [r[k] for r in refreshes]
        item = {"iteration": rows[0]["iteration"], "expected_boundary_rows": sum(x["expected_rows"] for x in rows)}
        if all("variance_vr" in x for x in rows):
            item["variance_vr"] = sum(x["variance_vr"] for x in rows)
            item["variance_uniform"] = sum(x["variance_uniform"] for x in rows)
        variance.append(item)
    # timing account
    tau = int(config.exchange.tau)
    world = len(results)
    ar = allreduce_bytes(int(rank_fragment(results[0], "model").get("num_params", 0)), world)
    sampled = getattr(config, "sample", None) is not None

    def cost(x, t, exact=False):
        return iteration_cost(x["prefetch_records"][t], widths, num_inner=x["num_inner"], num_halo=x["num_halo"],
                              full_edges=x["full_edges"], cached=cached, sampled=sampled, allreduce_bytes=ar,
                              exact=exact)

    exact = [cost(x, 0, exact=True) for x in exchanges]
    bw = scaled_bandwidth(exact, config.exchange.comm_ratio)
    detail: dict = {}
    sim = simulate_pipeline([[cost(x, t) for t in range(T)] for x in exchanges], tau, bw, record=detail)
    sync = simulate_pipeline([[c] * 2 for c in exact], 0, bw)[-1]
    return {
        "tau": tau, "cache_hit_rate": hit, "remote_feature_rows": remote_rows, "feature_bytes": feature_bytes,
        "staleness_realised": realised("fwd_age"), "staleness_realised_backward": realised("bwd_age"),
        "sampled_boundary_rows": [sum(r[t]["tg_rows"] for r in recs) for t in range(T)],
        "expected_boundary_rows": [sum(r[t]["expected_rows"] for r in recs) for t in range(T)],
        "kept_edges": [sum(r[t]["kept_edges"] for r in recs) for t in range(T)],
        "variance": variance, "simulated_iteration_s": sim, "simulated_time_s": [sum(sim[:t + 1]) for t in range(T)],
        "simulated_sync_iteration_s": sync, "simulated_bandwidth_Bps": bw,
        "simulated_blocked_s": detail["blocked_s"], "simulated_compute_s": detail["compute_s"],
        "probability_age": [r[t]["p_age"] for t in range(T) for r in recs[:1]],
    }
