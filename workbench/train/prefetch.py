"""The ``prefetch`` exchange: the boundary rows of full-graph training on sampled edges (PSC-GCN, Wang et al.;
PipeGCN with ``tau = 1`` and no sampler). What training on sampled edges adds around it (the sampler, the cache,
the timing account and the run's figures) is :mod:`workbench.train.edge_sampled`.

Every rank owns one part (inner rows) and holds its 1-hop boundary as halo slots, as in the ``halo``
exchange. Each iteration ``t`` trains on the draw ``TG_t`` of an edge sampler (:mod:`workbench.sample.psc`;
no sampler = every edge) with the rescaled ``P~`` (``P_ij / p_ij`` on kept edges), the same draw for every
layer. The boundary statistics are **prefetched** ``tau`` iterations ahead (Algorithm 1 with its warm-up
defined and its off-by-one fixed):

* draw ``d`` is made at iteration ``d - tau`` (the first ``tau`` at ``t = 0``: warm-up) from the
  probabilities current then; its boundary set ``B_d`` (boundary vertices with a kept edge) is sent to
  the owners once (kind ``prefetch_req``, 8 bytes per id; not sent without a sampler: the set is the
  whole halo, known from the plan);
* forward layer ``l`` of iteration ``t`` fetches the owners' **current** rows of ``B_{t+tau}`` (kind
  ``prefetch_fwd``; layer 0 through the cache stage when the run has one: hits served locally, misses
  pulled as ``feature_req``/``feature``) and consumes the rows fetched at ``t - tau`` for ``B_t``
  (``t >= tau``: Algorithm 1's ``t > tau`` would never use the first fetch; zeros before, PipeGCN's
  convention); ``tau = 0`` is the synchronous exchange (Algorithm 1 does not cover it);
* backward layer ``l >= 1`` sends the gradients of ``B_t``'s rows to their owners (kind ``prefetch_bwd``)
  and adds the ones received at ``t - tau`` into its inner rows' gradient (Eq. 7);
* weight gradients are all-reduced every iteration (the training loop).

So every consumed buffer has realised staleness exactly ``tau`` after warm-up (recorded per stream and
emitted as :class:`~workbench.events.Staleness`), and with ``tau = 0`` and no sampling (or epsilon = 1)
the run is the ``halo`` run (tested to 1e-5). SANCUS's :class:`~workbench.train.staleness.StalenessPolicy`
does not fit here: it decides per epoch whether a block is *sent* and reuses cached copies, while a pipeline
sends every iteration and fixes the age by construction; the exchange therefore refuses ``staleness`` and
emits the same ``Staleness`` events (ages = tau) so the staleness view shows it.

Figures of a run on sampled edges (:func:`~workbench.train.edge_sampled.prefetch_figures`, per iteration):
``cache_hit_rate`` (hits / distinct boundary rows asked at layer 0), ``remote_feature_rows``, ``feature_bytes``,
``staleness_realised`` (forward) and ``staleness_realised_backward`` (None in warm-up), ``sampled_boundary_rows``
against ``expected_boundary_rows`` (sum of inclusion probabilities), ``variance`` (Eq. 16 for VR and for uniform
at each refresh, summed over ranks), ``probability_age`` (iterations since p was refreshed when the draw
``t + tau`` was made; it is used ``tau`` later), ``simulated_iteration_s``, ``simulated_blocked_s`` (seconds
the slowest worker waited on a fetch issued ``tau`` earlier) and ``simulated_compute_s``.

Bytes of iteration ``t`` on a rank (``b = 4``), given the sets: ``prefetch_req`` = 8 |B_{t+tau}|;
``prefetch_fwd`` = |B_{t+tau}| x (sum of hidden input widths + D if no cache); features through a cache:
``feature`` = misses x D x b, ``feature_req`` = 8 x misses; ``prefetch_bwd`` = |B_t| x sum of hidden
input widths x b; ``prefetch_stats`` = 4 per halo row sent per estimate refresh; ``cache_fill`` /
``cache_refresh`` = (D x b + 8) per row entering the cache (the paper gives no byte formula).

Simulated time: :mod:`workbench.sim.pipeline_time` replays every rank's iterations (compute modelled
from flops, bytes from the sets above) on one serial link per worker; the link bandwidth is scaled so
that the synchronous exact iteration spends ``comm_ratio`` times its compute in communication. The same
account is also made while the run goes: every rank logs its iteration's cost
(:class:`~workbench.train.edge_sampled.RankTiming`, a :class:`~workbench.events.PipelineCost` going to the client
with its other events, no traffic between ranks) and the client's event sink
(:meth:`SampledEdges.client_emit <workbench.train.edge_sampled.SampledEdges.client_emit>`) simulates each
iteration once every rank's cost is in, logging :class:`~workbench.events.PipelineTimeline` events (the pipeline view).

Example:
    >>> EXCHANGES.build("prefetch", tau=2).config.tau
    2
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Optional

import torch

from workbench._validation import ErrorCollector
from workbench.constraints import Interval
from workbench.events import SampleStats, Staleness
from workbench.train.exchange import EXCHANGES, Exchange, ExchangeLayout, RankExchange
from workbench.train.full_graph import OwnerComputeHalo, halo_shard
from workbench.train.part_source import agree_halo
from workbench.train.models import SpMM, sparse_aggregator

__all__ = ["PrefetchExchange", "PrefetchRank"]
_KINDS = {"halo_fwd": "prefetch_fwd", "halo_bwd": "prefetch_bwd"}   # the halo exchange's kinds, as this one counts them


@EXCHANGES.register
class PrefetchExchange(Exchange):
    """Halo rows and their gradients prefetched ``tau`` iterations ahead (module docstring)."""

    name = "prefetch"
    provides = frozenset({"sampled-edge halos"})
    forward_kind = "prefetch_fwd"
    backward_kind = "prefetch_bwd"

    @dataclasses.dataclass(kw_only=True)
    class Config(Exchange.Config):
        tau: Annotated[int, Interval(0, None)] = 0
        """Staleness in iterations of boundary embeddings and gradients (0 = synchronous, 1 = PipeGCN)."""
        full_eval: bool = True
        """Measure accuracy on the whole graph after every update (kind ``eval_halo``); False: on the step's
        sampled, stale forward."""
        comm_ratio: Annotated[float, Interval(0, None, closed="neither")] = 3.0
        """Timing account: communication / compute of a synchronous exact iteration (sets the link bandwidth)."""

        def _validate(self, errs: ErrorCollector) -> None:
            super()._validate(errs)
            errs.check(self.staleness == "none", "staleness",
                       "'none' for the prefetch exchange (its staleness is tau)", self.staleness)
            errs.check(not self.pin_static_input, "pin_static_input",
                       "False for the prefetch exchange (its input rows come through the feature source, "
                       "which cache.method caches)", self.pin_static_input)

    def pinned_layers(self, num_layers: int) -> frozenset:
        """Every layer aggregate-first: the streams and the byte formulas of the module docstring (and the features
        behind the cache) are the printed order's layer inputs."""
        return frozenset(range(num_layers))

    def layout(self, graph, node_part, num_parts, model, input_widths, backward_widths=None) -> ExchangeLayout:
        layout = OwnerComputeHalo().layout(graph, node_part, num_parts, model, input_widths)  # default bwd widths
        predicted, out_deg = {_KINDS.get(k, k): v for k, v in layout.predicted.items()}, graph.out_degrees()
        shards = [dataclasses.replace(s, predicted=predicted, node_part=node_part, out_degrees=out_deg)
                  for s in layout.shards]
        return dataclasses.replace(layout, predicted=predicted, shards=shards)

    def part_layout(self, part_sizes, comm_rows, input_widths, backward_widths=None) -> ExchangeLayout:
        """The ``halo`` exchange's (as :meth:`layout`, the default backward widths), kinds renamed ``prefetch_*``."""
        layout = OwnerComputeHalo().part_layout(part_sizes, comm_rows, input_widths)
        return dataclasses.replace(layout, predicted={_KINDS.get(k, k): v for k, v in layout.predicted.items()})

    def shard_from_part(self, ref, comm):
        """The halo shard built on the rank, the folder's owner map as the feature source's partition book, and
        the global out-degrees of the rank's own and halo vertices (the cache's candidates; no cache reads more)."""
        h = agree_halo(ref, comm)
        node_part = torch.from_numpy(ref.source.owner_map())
        out_degrees = torch.zeros(node_part.numel(), dtype=torch.int64)
        out_degrees[torch.cat([h.inner_gid, h.halo_gid])] = h.out_deg
        return dataclasses.replace(halo_shard(ref, h), node_part=node_part, out_degrees=out_degrees)

    def attach(self, ctx, shard, *, sampler=None, cache=None, timing=None) -> "PrefetchRank":
        return PrefetchRank(self, ctx, shard, sampler=sampler, cache=cache, timing=timing)


class _PrefetchHalo(torch.autograd.Function):
    """Forward: inner rows then the (prefetched) boundary rows. Backward: boundary gradients to their owners,
    the ones received ``tau`` iterations ago added into the inner rows."""

    @staticmethod
    def forward(ctx, h, rows, ex, layer):
        ctx.ex, ctx.layer = ex, layer
        return torch.cat([h, rows], dim=0)

    @staticmethod
    def backward(ctx, grad):
        return ctx.ex._backward(grad, ctx.layer), None, None, None


class PrefetchRank(RankExchange):
    """One rank of the ``prefetch`` exchange (see the module docstring)."""

    def __init__(self, stage: PrefetchExchange, ctx, shard, *, sampler=None, cache=None,
                 timing: Any = None):
        kinds = ["prefetch_fwd", "prefetch_bwd"]
        if sampler is not None:
            kinds += ["prefetch_req", "prefetch_stats"]
        if cache is not None:
            kinds += ["feature_req", "feature", "cache_fill", "cache_refresh"]
        super().__init__(ctx, stage.policy(), tuple(kinds))
        from workbench.sample.psc import PartEdges

        self.tau = int(stage.config.tau)
        self.full_eval = bool(stage.config.full_eval)
        self.timing = timing
        """What this rank's :class:`~workbench.events.PipelineCost` events are made of
        (:class:`~workbench.train.edge_sampled.RankTiming`; None: no such events)."""
        self.plan = plan = shard.plan
        self.shard = shard
        self.n, self.nh = plan.num_inner, plan.num_halo
        self.edges = PartEdges(target=shard.agg_rows, source=shard.agg_cols, weight=shard.agg_weights,
                               num_inner=self.n, num_halo=self.nh)
        self.sampler, self.cache_stage, self.cached = sampler, cache, None
        off = plan.recv_offsets
        self.slices = [(off[j], off[j + 1]) for j in range(plan.world_size)]
        self.p: Optional[torch.Tensor] = None
        self.model = None
        self.inputs: dict[int, torch.Tensor] = {}
        self.draws: dict[int, dict] = {}
        self.fbuf: dict[int, dict] = {}
        self.bbuf: dict[int, dict] = {}
        self.iteration = -1
        self.records: list[dict] = []
        self._stats_rows = 0
        self.refreshes: list[dict] = []
        self.rec: dict = {}

    # -- hooks -------------------------------------------------------------------------------------------
    def setup_model(self, model) -> None:
        self.model = model

    def aggregate(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        if layer == 0 and self.iteration != self.epoch:
            with self.timer.phase("sample"):   # the iteration's draws, probabilities and row requests
                self._begin(self.epoch)
        return self._aggregate(h, layer)

    # -- iteration ---------------------------------------------------------------------------------------
    def _begin(self, t: int) -> None:
        self.iteration = t
        self._stats_rows = 0
        for d in [d for d in self.draws if d < t]:                 # used up (forward at d - tau, backward at d)
            del self.draws[d]
        for k in [k for k in self.bbuf if k < t - self.tau]:
            del self.bbuf[k]
        R = int(self.sampler.config.refresh) if self.sampler is not None else 0
        if self.p is None or (self.sampler is not None and t % R == 0):
            self._refresh(t)
        first = 0 if not self.draws and t == 0 else t + self.tau
        for d in range(first, t + self.tau + 1):
            self._draw(d)
        requested = sum(int(self.draws[d]["mask"].sum()) for d in range(first, t + self.tau + 1))
        tg = self.draws[t]
        keep = tg["keep"]
        w = tg["weights"]
        shape = (self.n, self.n + self.nh)
        self._a, self._a_t = sparse_aggregator(self.edges.target[keep], self.edges.source[keep], w[keep], shape,
                                               self.ctx.device, kernel=self.ctx.kernel)
        self.rec = {"iteration": t, "sg_rows": int(self.draws[t + self.tau]["mask"].sum()),
                    "tg_rows": int(tg["mask"].sum()), "kept_edges": int(keep.sum()), "feature_misses": None,
                    "fwd_age": [], "bwd_age": [], "expected_rows": float(self.expected_rows),
                    "requested_rows": requested if self.sampler is not None else 0, "stats_rows": self._stats_rows,
                    "p_age": t - self._refreshed_at}
        self.records.append(self.rec)

    def _refresh(self, t: int) -> None:
        """Recompute p (Algorithm 2 lines 4-7) and re-rank the cache with the new inclusion probabilities."""
        sampler = self.sampler
        self._refreshed_at = t
        h = None
        if sampler is not None and sampler.needs_estimates:
            est = sampler.config.estimator
            if est == "none":
                h = torch.ones(self.n + self.nh, dtype=torch.float64)
            else:                                   # embeddings at t = 0: features x initial weights
                h = self._estimates(est)
        self.p = sampler.probabilities(self.edges, h) if sampler is not None else \
            torch.ones(self.edges.num_edges, dtype=torch.float64)
        incl = sampler.inclusion(self.edges, self.p) if sampler is not None else torch.ones(self.nh, dtype=torch.float64)
        self.inclusion = incl
        self.expected_rows = float(incl.sum())
        info = {"iteration": t, "expected_rows": self.expected_rows, "estimates": h is not None}
        if h is not None:
            from workbench.sample.psc import estimator_variance

            y_sq = self.edges.weight.to(torch.float64) ** 2 * h[self.edges.source]
            uni = torch.where(self.edges.self_loop, 1.0, float(sampler.config.epsilon)).to(torch.float64)
            info["variance_vr"] = float(estimator_variance(self.edges, self.p, y_sq).sum())
            info["variance_uniform"] = float(estimator_variance(self.edges, uni, y_sq).sum())
        self.refreshes.append(info)
        if self.cache_stage is not None:
            probs = torch.zeros(self.shard.node_part.numel(), dtype=torch.float64)
            probs[self.plan.halo_gid] = incl
            if self.cached is None:
                from workbench.cache.kvstore import FeatureStore

                store = FeatureStore(self.plan.inner_gid, self.shard.data.features, self.shard.node_part, self.comm)
                self.cached = self.cache_stage.wrap(store, degrees=self.shard.out_degrees, probabilities=probs,
                                                    candidates=self.plan.halo_gid)
            else:
                self.cached.refresh(degrees=self.shard.out_degrees, probabilities=probs)

    def _estimates(self, est: str) -> torch.Tensor:
        """``(n + nh,)`` h_j: inner from the last forward's rows and the current weights (or features),
        boundary shipped by the owners (one float per row, kind ``prefetch_stats``). Before the first forward
        (t = 0) the only layer input known is the features: ``h_j = ||X_j W^(1)||^2`` with the initial weights."""
        if est == "features":
            x = self.shard.data.features.to(torch.float64)
            h_inner = (x * x).sum(1)
        else:
            h_inner = torch.zeros(self.n, dtype=torch.float64)
            inputs = self.inputs or {0: self.shard.data.features}
            with torch.no_grad():
                for layer, hin in sorted(inputs.items()):
                    w = self.model.neigh[layer].weight
                    h_inner += (hin.to(w.device) @ w.t()).to(torch.float64).pow(2).sum(1).cpu()
        me = self.plan.rank
        sends = [torch.zeros(0) if j == me else h_inner[self.plan.send_local_nid[j]].to(torch.float32)
                 for j in range(self.plan.world_size)]
        got = self.comm.all_to_all(sends, kind="prefetch_stats")
        self._stats_rows = sum(int(x.numel()) for x in sends)
        h_halo = torch.zeros(self.nh, dtype=torch.float64)
        for j, (a, b) in enumerate(self.slices):
            if j != me and b > a:
                h_halo[a:b] = got[j].flatten().to(torch.float64)
        return torch.cat([h_inner, h_halo])

    def _draw(self, d: int) -> None:
        """Draw ``d`` (its keep mask, weights, boundary set) and tell the owners which rows it needs."""
        me, world = self.plan.rank, self.plan.world_size
        if self.sampler is None:
            keep = torch.ones(self.edges.num_edges, dtype=torch.bool)
            weights = self.edges.weight.to(torch.float32)
        else:
            keep = self.sampler.draw(self.edges, self.p, d, me)
            weights = self.sampler.weights(self.edges, self.p, keep)
        mask = self.edges.sampled_boundary(keep)
        recv_pos, send_idx = [], []
        if self.sampler is None:
            recv_pos = [torch.arange(a, b) for a, b in self.slices]
            send_idx = list(self.plan.send_local_nid)
        else:
            requests = []
            for j, (a, b) in enumerate(self.slices):
                pos = mask[a:b].nonzero().flatten()
                recv_pos.append(pos + a)
                requests.append(pos if j != me else pos.new_zeros(0))
            asked = self.comm.all_to_all(requests, kind="prefetch_req")
            send_idx = [self.plan.send_local_nid[j][asked[j].flatten().long()] if j != me
                        else torch.zeros(0, dtype=torch.int64) for j in range(world)]
        self.draws[d] = {"keep": keep, "weights": weights, "mask": mask, "recv_pos": recv_pos, "send_idx": send_idx}

    # -- layers ------------------------------------------------------------------------------------------
    def _fetch(self, h: torch.Tensor, layer: int, d: int) -> torch.Tensor:
        """``(nh, F)`` the owners' current rows of draw ``d``'s boundary set (zeros elsewhere)."""
        draw = self.draws[d]
        width = h.shape[1]
        out = h.new_zeros(self.nh, width)
        if layer == 0 and self.cached is not None:
            gids = self.plan.halo_gid[draw["mask"]]
            before = self.cached.misses
            with self.timer.phase("fetch"):
                out[draw["mask"].to(h.device)] = self.cached.pull(gids).to(h.device)
            self.rec["feature_misses"] = self.cached.misses - before
            return out
        me = self.plan.rank
        sends = [h.new_zeros(0, width) if j == me else h.index_select(0, idx.to(h.device))
                 for j, idx in enumerate(draw["send_idx"])]
        got = self.comm.all_to_all(sends, kind="prefetch_fwd", layer=layer)
        for j, pos in enumerate(draw["recv_pos"]):
            if j != me and pos.numel():
                out[pos.to(h.device)] = got[j].reshape(-1, width)
        return out

    def _aggregate(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        t, tau = self.iteration, self.tau
        self.inputs[layer] = h.detach()
        self.fbuf.setdefault(t + tau, {})[layer] = (self._fetch(h.detach(), layer, t + tau), t)
        if t >= tau:
            rows, produced = self.fbuf[t].pop(layer)
            age = t - produced
        else:                                                       # warm-up: nothing fetched yet (zeros, as PipeGCN)
            rows, age = h.new_zeros(self.nh, h.shape[1]), None
        if not self.fbuf.get(t, True):
            del self.fbuf[t]
        self.rec["fwd_age"].append(age)
        me = self.plan.rank
        self.ctx.log(Staleness(rank=me, layer=layer, epoch=t, state="STALE" if age else "ACTIVE",
                               ages=[0 if (j == me or age is None) else age for j in range(self.plan.world_size)]))
        return SpMM.apply(self._a, self._a_t, _PrefetchHalo.apply(h, rows, self, layer))

    def _backward(self, grad: torch.Tensor, layer: int) -> torch.Tensor:
        t, tau, me = self.iteration, self.tau, self.plan.rank
        n, width = self.n, grad.shape[1]
        draw = self.draws[t]
        gb = grad[n:]
        sends = [grad.new_zeros(0, width) if j == me else gb.index_select(0, pos.to(grad.device))
                 for j, pos in enumerate(draw["recv_pos"])]
        got = self.comm.all_to_all(sends, kind="prefetch_bwd", layer=layer)
        acc = grad.new_zeros(n, width)
        for j, idx in enumerate(draw["send_idx"]):
            if j != me and idx.numel():
                acc.index_add_(0, idx.to(grad.device), got[j].reshape(-1, width))
        self.bbuf.setdefault(t, {})[layer] = (acc, t)
        out = grad[:n].clone()
        src = self.bbuf.get(t - tau, {}) if t >= tau else {}
        if layer in src:
            g, produced = src.pop(layer)
            out += g
            self.rec["bwd_age"].append(t - produced)
        else:
            self.rec["bwd_age"].append(None)
        return out

    def full_forward(self, model, x: torch.Tensor) -> torch.Tensor:
        """Logits of the owned rows on the whole graph with current boundary rows (evaluation; no gradient).
        One all-to-all of the full halo per layer, kind ``eval_halo`` (not an exchange kind)."""
        if getattr(self, "_a_full", None) is None:
            self._a_full = sparse_aggregator(self.edges.target, self.edges.source, self.edges.weight,
                                             (self.n, self.n + self.nh), self.ctx.device, kernel=self.ctx.kernel)[0]
        me = self.plan.rank

        def agg(h, layer):
            w = h.shape[1]
            sends = [h.new_zeros(0, w) if j == me else h.index_select(0, idx.to(h.device))
                     for j, idx in enumerate(self.plan.send_local_nid)]
            got = self.comm.all_to_all(sends, kind="eval_halo", layer=layer)
            halo = [got[j].reshape(-1, w) for j in range(self.plan.world_size) if j != me]
            return torch.sparse.mm(self._a_full, torch.cat([h, *halo], dim=0))

        with torch.no_grad():
            return model(x, agg)

    def evaluation_logits(self, model, x: torch.Tensor) -> Optional[torch.Tensor]:
        """Accuracies on the whole graph after the update (``exchange.full_eval``, the default): a sampled,
        stale forward says little about the model at small epsilon. The epoch's loss stays the training step's."""
        return self.full_forward(model, x) if self.full_eval else None

    def epoch_events(self, epoch: int) -> list:
        """The iteration's cache hits, sampled edges and boundary rows, and its pipeline cost (PSC-GCN)."""
        events, rec, ctx = [], self.rec, self.ctx
        if self.cached is not None:
            events.append(self.cached.epoch_stats(epoch, ctx.run_id))
        if self.sampler is not None:
            events.append(SampleStats(rank=ctx.rank, epoch=epoch, steps=1, seeds=self.n,
                                      sampled_edges=rec.get("kept_edges", 0), input_nodes=self.n + rec.get("tg_rows", 0),
                                      remote_input_nodes=rec.get("tg_rows", 0)))
        if self.timing is not None:
            events.append(self.timing.event(self, rec, epoch))
        return events

    def rank_fragments(self) -> dict[str, dict]:
        """The ``exchange`` fragment: the realised age of the rows it consumed, its iterations' records and
        refreshes, and its sizes. No ``staleness`` fragment: it agrees no rounds to skip (every iteration sends, the
        age is tau by construction) and keeps no stale copies."""
        return {"exchange": {"max_age": max([a for r in self.records for a in r["fwd_age"] if a is not None], default=0),
                             "prefetch_records": self.records, "prefetch_refreshes": self.refreshes,
                             "num_inner": self.n, "num_halo": self.nh, "full_edges": self.edges.num_edges}}
