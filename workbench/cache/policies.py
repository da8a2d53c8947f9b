"""Feature caches: policies that wrap a :class:`~workbench.cache.kvstore.FeatureStore` pull.

A cache keeps the rows of some vertices this rank does **not** own, so a pull serves them locally
instead of asking their owners. :meth:`Cache.wrap` turns a store into a :class:`CachedFeatureStore` with
the same ``pull(gids)``: hits come from the cache buffer, everything else (owned rows and misses) goes
through the store's one pull per call, so the SPMD contract (every rank pulls the same number of
times) is unchanged.

Capacity is ``ratio`` x the number of vertices the rank does not own (1.0 caches all of them; then a
training pull moves no feature bytes at all). Policies (``CACHES``, registry ``cache``):

========== =========== ======================================================================================
method      kind        content
========== =========== ======================================================================================
none        -           nothing (capacity 0 whatever ``ratio`` says); stats still report remote rows
degree      static      highest degree first (PaGraph; ``direction='out'``: a vertex with many out-edges is
                        the sampled in-neighbour of many vertices; global degree, ties by id)
random      static      a seeded random subset
inclusion   semi-static highest inclusion probability first (PSC-GCN, Sec. V): the caller supplies
                        ``probabilities`` (one per global id); :meth:`CachedFeatureStore.refresh` re-ranks
                        with new ones
lru         dynamic     admission on miss, least recently used evicted
fifo        dynamic     admission on miss, oldest admission evicted
========== =========== ======================================================================================

Traffic (all counted at the transport by the communicator):

* ``cache_fill``: a static cache's initial content, fetched once in :meth:`Cache.wrap` (ids and rows);
  it is setup, not training, so it has its own kind.
* ``cache_refresh``: rows fetched by :meth:`CachedFeatureStore.refresh` for vertices that entered the
  cache (PSC-GCN's semi-dynamic refresh: the ones leaving are dropped for free). Dynamic policies
  admit the rows a miss fetched anyway, so admission costs nothing beyond the ``feature`` traffic of
  that miss and their refresh moves nothing (features do not change during training; a cache of
  changing embeddings would re-fetch here).

Stats (:meth:`CachedFeatureStore.epoch_stats`, one :class:`~workbench.events.CacheStats` per rank and
epoch): ``remote_rows`` = distinct remote ids asked for per pull (before the cache), ``hits`` of
those served by the cache, ``misses`` fetched, ``bytes_saved = hits x (row bytes + 8)`` (the row and
its id never travel), ``refresh_bytes`` (ids sent + rows received by this rank's refreshes).

Example:
    >>> import threading, torch
    >>> from workbench.communicate import InProcessGroup
    >>> node_part = torch.tensor([0, 0, 1, 1, 1])
    >>> feats = torch.arange(5.0).reshape(5, 1)
    >>> degrees = torch.tensor([1, 1, 9, 1, 5])
    >>> group, out = InProcessGroup(2), [None, None]
    >>> def body(rank):
    ...     owned = (node_part == rank).nonzero().flatten()
    ...     store = FeatureStore(owned, feats[owned], node_part, group.communicator(rank))
    ...     cached = CACHES.build("degree", ratio=0.67).wrap(store, degrees=degrees)
    ...     rows = cached.pull(torch.tensor([2, 3, 4, 0]))
    ...     out[rank] = (cached.cached_gid.tolist(), rows.flatten().tolist(), cached.epoch_stats(0).hits)
    >>> threads = [threading.Thread(target=body, args=(r,)) for r in range(2)]
    >>> for t in threads: t.start()
    >>> for t in threads: t.join()
    >>> out[0]
    ([2, 4], [2.0, 3.0, 4.0, 0.0], 2)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Any, ClassVar, Optional

import torch

from workbench._validation import ErrorCollector, ParamError
from workbench.constraints import Interval, Options
from workbench.cache.kvstore import ID_BYTES, FeatureStore
from workbench.events import CacheStats
from workbench.stages import Stage, registry

__all__ = ["Cache", "CACHES", "CachedFeatureStore", "NoCache", "DegreeCache", "RandomCache", "InclusionCache",
           "LRUCache", "FIFOCache", "capacity_for", "rank_candidates"]

CACHES = registry("cache")
"""The registered cache methods (``--set cache.method=NAME``)."""


def capacity_for(ratio: float, num_candidates: int) -> int:
    """Rows a cache of ``ratio`` holds when ``num_candidates`` vertices are not owned (floor)."""
    return min(num_candidates, int(math.floor(ratio * num_candidates + 1e-9)))


def rank_candidates(candidates: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """``candidates`` (ascending ids) ordered by ``scores[candidates]`` descending, ties by id."""
    order = torch.sort(-scores[candidates].to(torch.float64), stable=True).indices
    return candidates[order]


class Cache(Stage):
    """Base of a cache method. ``wrap(store, ...)`` gives the cached store; subclasses say what to keep.

    Static methods implement :meth:`scores` (higher is kept first); dynamic ones set ``dynamic = True``
    and implement :meth:`_on_pull` (admission and eviction after each pull).
    """

    kind = "cache"
    requires = frozenset({"feature source"})
    dynamic: ClassVar[bool] = False
    """True when the content changes during training (admission on miss, eviction)."""

    @dataclasses.dataclass(kw_only=True)
    class Config(Stage.Config):
        ratio: Annotated[float, Interval(0, 1)] = 0.1
        """Capacity as a fraction of the vertices this rank does not own, in [0, 1] (1.0 caches all)."""

    # -- what static methods rank by -----------------------------------------------------------------------
    def scores(self, num_nodes: int, *, graph: Any = None, degrees: Any = None,
               probabilities: Any = None) -> Optional[torch.Tensor]:
        """``(num_nodes,)`` score per global id (higher is cached first), or ``None`` to start empty."""
        return None

    def capacity(self, num_candidates: int) -> int:
        return capacity_for(float(self.config.ratio), num_candidates)

    # -- building -------------------------------------------------------------------------------------------
    def wrap(self, store: FeatureStore, *, graph: Any = None, degrees: Any = None,
             probabilities: Any = None, candidates: Any = None) -> "CachedFeatureStore":
        """The cached store over ``store``; a static cache is filled here (kind ``cache_fill``; a collective).

        Args:
            store: this rank's feature store.
            graph: the global graph (``degree`` reads its degrees when ``degrees`` is not given).
            degrees: ``(num_nodes,)`` degree per global id (``degree``).
            probabilities: ``(num_nodes,)`` inclusion probability per global id (``inclusion``).
            candidates: the ids that may be cached (default: every id the rank does not own). Pass the
                rank's boundary vertices to make ``ratio`` PSC-GCN's fraction of boundary nodes.
        """
        cached = CachedFeatureStore(store, self, candidates)
        cached.refresh(graph=graph, degrees=degrees, probabilities=probabilities, _kind="cache_fill")
        return cached

    def _on_pull(self, cached: "CachedFeatureStore", hit_slot: torch.Tensor, miss_gid: torch.Tensor,
                 miss_rows: torch.Tensor) -> None:
        """After a pull: ``hit_slot`` slots served, ``miss_gid`` remote ids fetched (rows ``miss_rows``)."""


def _check_vector(value: Any, name: str, owner: str, num_nodes: int, *, unit: bool = False) -> torch.Tensor:
    errs = ErrorCollector(owner)
    t = None
    try:
        t = torch.as_tensor(value).flatten()
    except (TypeError, ValueError, RuntimeError):
        pass
    ok = t is not None and t.numel() == num_nodes and (t.is_floating_point() or t.dtype in (torch.int32, torch.int64))
    if ok:
        tf = t.to(torch.float64)
        ok = bool(torch.isfinite(tf).all()) and (not unit or bool(((tf >= 0) & (tf <= 1)).all()))
    shape = tuple(t.shape) if t is not None else type(value).__name__
    errs.check(ok, name, f"a ({num_nodes},) tensor of finite numbers{' in [0, 1]' if unit else ''} "
                         "(one per global id)", shape)
    errs.raise_if_any()
    return t.to(torch.float64)


@CACHES.register
class NoCache(Cache):
    """No cache: every remote row is fetched (capacity 0 whatever ``ratio`` says)."""

    name = "none"
    requires = frozenset()

    @dataclasses.dataclass(kw_only=True)
    class Config(Cache.Config):
        """No options of its own (``ratio`` is accepted and ignored, so ``--set cache.ratio`` composes)."""

    def capacity(self, num_candidates: int) -> int:
        return 0


@CACHES.register
class DegreeCache(Cache):
    """PaGraph's static cache: the highest-degree vertices the rank does not own (global degree)."""

    name = "degree"

    @dataclasses.dataclass(kw_only=True)
    class Config(Cache.Config):
        direction: Annotated[str, Options("in", "out")] = "out"
        """Which degree ranks the vertices: ``out`` (PaGraph: sampled as in-neighbour most often) or ``in``."""

    def scores(self, num_nodes, *, graph=None, degrees=None, probabilities=None):
        if degrees is None:
            if graph is None:
                raise ParamError(["The 'degrees' parameter of DegreeCache.wrap must be a (num_nodes,) tensor "
                                  "(or pass graph=). Got None instead."])
            degrees = graph.out_degrees() if self.config.direction == "out" else graph.in_degrees()
        return _check_vector(degrees, "degrees", "DegreeCache.wrap", num_nodes)


@CACHES.register
class RandomCache(Cache):
    """A static cache of a seeded random subset of the vertices the rank does not own."""

    name = "random"

    @dataclasses.dataclass(kw_only=True)
    class Config(Cache.Config):
        seed: Annotated[int, Interval(0, None)] = 0
        """Seed of the random choice (same seed, same content)."""

    def scores(self, num_nodes, *, graph=None, degrees=None, probabilities=None):
        gen = torch.Generator().manual_seed(int(self.config.seed))
        return torch.rand(num_nodes, generator=gen, dtype=torch.float64)


@CACHES.register
class InclusionCache(Cache):
    """PSC-GCN's inclusion-aware cache: the highest inclusion probabilities first (supplied by the caller).

    ``probabilities[v]`` is the chance that vertex ``v`` is an input of this rank's next mini-batch. Edge
    samplers compute it exactly (PSC-GCN: ``1 - prod (1 - p_ij)`` over the rank's inner neighbours ``i``) and
    it is semi-dynamic: call :meth:`CachedFeatureStore.refresh` with new probabilities every R steps; entering
    rows are fetched as ``cache_refresh``, leaving ones dropped. Under node-wise neighbour sampling the
    mini-batch trainer estimates it before training by pre-sampling ``presample_epochs`` epochs (GNNLab's
    PreSC, the static policy GNNLab finds best; an exact value would sum over every multi-hop path and batch
    composition): the fraction of the rank's pre-sampled batches in which ``v`` is an input, static after
    the fill. Ties are broken by vertex id (the paper does not say how).
    """

    name = "inclusion"
    requires = frozenset({"feature source", "inclusion probabilities"})

    @dataclasses.dataclass(kw_only=True)
    class Config(Cache.Config):
        """The probabilities come with :meth:`Cache.wrap` and :meth:`CachedFeatureStore.refresh`."""

        presample_epochs: Annotated[int, Interval(1, None)] = 1
        """Epochs a node-wise sampler pre-samples before training to estimate the probabilities (PreSC; their
        draws are keyed by epochs -1, -2, ..., apart from training's; traffic kinds ``presample_*``). Edge
        samplers compute the probabilities exactly and do not pre-sample."""

    def scores(self, num_nodes, *, graph=None, degrees=None, probabilities=None):
        if probabilities is None:
            raise ParamError(["The 'probabilities' parameter of InclusionCache.wrap must be a (num_nodes,) tensor "
                              "of inclusion probabilities. Got None instead."])
        return _check_vector(probabilities, "probabilities", "InclusionCache.wrap", num_nodes, unit=True)


def _admit(cached: "CachedFeatureStore", miss_gid: torch.Tensor, miss_rows: torch.Tensor, age: torch.Tensor) -> None:
    """Put the first ``min(misses, capacity)`` misses into the slots with the smallest ``age`` (free first)."""
    m = min(int(miss_gid.numel()), cached.capacity)
    if m == 0:
        return
    key = torch.where(cached.slot_gid < 0, torch.full_like(age, -1), age)
    victims = torch.sort(key, stable=True).indices[:m]
    cached._place(victims, miss_gid[:m], miss_rows[:m])


@CACHES.register
class LRUCache(Cache):
    """Dynamic: a missed row is admitted (it was fetched anyway), the least recently used row evicted."""

    name = "lru"

    @dataclasses.dataclass(kw_only=True)
    class Config(Cache.Config):
        """Capacity only."""
    dynamic = True

    def _on_pull(self, cached, hit_slot, miss_gid, miss_rows):
        cached.last_used[hit_slot] = cached.step
        _admit(cached, miss_gid, miss_rows, cached.last_used)


@CACHES.register
class FIFOCache(Cache):
    """Dynamic: a missed row is admitted, the row admitted longest ago evicted (hits do not renew)."""

    name = "fifo"

    @dataclasses.dataclass(kw_only=True)
    class Config(Cache.Config):
        """Capacity only."""
    dynamic = True

    def _on_pull(self, cached, hit_slot, miss_gid, miss_rows):
        _admit(cached, miss_gid, miss_rows, cached.admitted_at)


class CachedFeatureStore:
    """A :class:`FeatureStore` behind a cache: the same ``pull(gids)``, hits served from a local buffer.

    Built by :meth:`Cache.wrap`. The cache map is one slot index per global id (``-1`` = not cached;
    PSC-GCN's "cache map"), the buffer ``(capacity, F)`` rows.

    Attributes:
        store: the wrapped store. policy: the :class:`Cache`. capacity: rows the buffer holds.
        fill_bytes: bytes this rank's initial fill moved (ids sent + rows received).
    """

    def __init__(self, store: FeatureStore, policy: Cache, candidates: Any = None):
        self.store, self.policy = store, policy
        self.rank = store.rank
        if candidates is None:
            all_ids = torch.arange(store.num_nodes)
            self.candidates = all_ids[store.owner(all_ids) != store.rank]  # ascending
        else:
            cand = torch.unique(store._check_ids(candidates))
            if cand.numel() and bool((store.owner(cand) == store.rank).any()):
                raise ParamError([f"The 'candidates' parameter of {type(policy).__name__}.wrap must be ids rank "
                                  f"{store.rank} does not own. Got some of its own ids instead."])
            self.candidates = cand
        self.capacity = policy.capacity(int(self.candidates.numel()))
        self.slot_of = torch.full((store.num_nodes,), -1, dtype=torch.int64)
        self.slot_gid = torch.full((self.capacity,), -1, dtype=torch.int64)
        self.buffer = store.features.new_zeros((self.capacity, store.width))
        self.last_used = torch.full((self.capacity,), -1, dtype=torch.int64)
        self.admitted_at = torch.full((self.capacity,), -1, dtype=torch.int64)
        self.step = 0
        self.fill_bytes = 0
        self._reset_counts()

    def _reset_counts(self) -> None:
        self.hits = self.misses = self.remote_rows = self.refresh_bytes = 0

    # -- content ----------------------------------------------------------------------------------------------
    @property
    def cached_gid(self) -> torch.Tensor:
        """Global ids in the cache, ascending."""
        return torch.sort(self.slot_gid[self.slot_gid >= 0]).values

    @property
    def size(self) -> int:
        return int((self.slot_gid >= 0).sum())

    @property
    def request_bytes(self) -> int:
        """Bytes one fetched row costs: its id there, its row back."""
        return self.store.row_bytes + ID_BYTES

    def _place(self, slots: torch.Tensor, gids: torch.Tensor, rows: torch.Tensor) -> None:
        old = self.slot_gid[slots]
        self.slot_of[old[old >= 0]] = -1
        self.slot_gid[slots] = gids
        self.slot_of[gids] = slots
        self.buffer[slots] = rows
        self.last_used[slots] = self.step
        self.admitted_at[slots] = self.step

    def refresh(self, *, graph: Any = None, degrees: Any = None, probabilities: Any = None,
                _kind: str = "cache_refresh") -> int:
        """Re-rank a static cache (e.g. new inclusion probabilities) and fetch the rows that enter it.

        A collective: every rank calls it together (one pull, empty when nothing enters). Dynamic and
        ``none`` caches keep their content. Returns the number of rows fetched.
        """
        scores = self.policy.scores(self.store.num_nodes, graph=graph, degrees=degrees, probabilities=probabilities)
        enter = self.candidates.new_empty(0)
        keep = self.candidates.new_empty(0)
        if scores is not None and self.capacity:
            chosen = rank_candidates(self.candidates, scores)[:self.capacity]
            cached = self.slot_of[chosen] >= 0
            enter, keep = chosen[~cached], chosen[cached]
        rows = self.store.pull(enter, kind=_kind, req_kind=_kind)
        if scores is not None and self.capacity:
            keep_rows = self.buffer[self.slot_of[keep]]
            self.slot_of[self.slot_gid[self.slot_gid >= 0]] = -1
            self.slot_gid.fill_(-1)
            slots = torch.arange(keep.numel() + enter.numel())
            self._place(slots, torch.cat([keep, enter]), torch.cat([keep_rows, rows]))
        moved = int(enter.numel()) * self.request_bytes
        if _kind == "cache_fill":
            self.fill_bytes += moved
        else:
            self.refresh_bytes += moved
        return int(enter.numel())

    # -- the verb ---------------------------------------------------------------------------------------------
    def pull(self, gids: Any, *, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``(len(gids), F)`` rows of ``gids`` in their order (written into ``out`` if given); a collective like
        :meth:`FeatureStore.pull`."""
        gids = self.store._check_ids(gids)
        uniq, inverse = torch.unique(gids, return_inverse=True)
        slot = self.slot_of[uniq]
        hit = slot >= 0
        remote = self.store.owner(uniq) != self.rank
        rows = self.buffer.new_empty((uniq.numel(), self.store.width))
        rows[hit] = self.buffer[slot[hit]]
        need = ~hit
        rows[need] = self.store.pull(uniq[need])
        miss = need & remote
        self.step += 1
        self.hits += int(hit.sum())
        self.misses += int(miss.sum())
        self.remote_rows += int(remote.sum())
        if self.capacity:
            self.policy._on_pull(self, slot[hit], uniq[miss], rows[miss])
        return rows[inverse] if out is None else torch.index_select(rows, 0, inverse, out=out)

    # -- stats ------------------------------------------------------------------------------------------------
    def take_counts(self) -> dict[str, int]:
        """``hits``, ``misses``, ``remote_rows`` and ``refresh_bytes`` since the last call or :meth:`epoch_stats`
        (then they restart): what a thread that pulls ahead of the epochs adds to the epoch of each pull."""
        out = {"hits": self.hits, "misses": self.misses, "remote_rows": self.remote_rows,
               "refresh_bytes": self.refresh_bytes}
        self._reset_counts()
        return out

    def epoch_stats(self, epoch: int, run_id: str = "", counts: Optional[dict] = None) -> CacheStats:
        """This rank's :class:`CacheStats` since the last call (then the counts restart), or of ``counts``
        (:meth:`take_counts` summed over the epoch's pulls; the cache's own counts are then left alone)."""
        c = self.take_counts() if counts is None else counts
        return CacheStats(run_id=run_id, rank=self.rank, epoch=epoch, hits=c["hits"], misses=c["misses"],
                          bytes_saved=c["hits"] * self.request_bytes, policy=self.policy.name,
                          ratio=float(self.policy.config.ratio), refresh_bytes=c["refresh_bytes"],
                          remote_rows=c["remote_rows"], fill_bytes=self.fill_bytes)

    def __repr__(self) -> str:
        return (f"CachedFeatureStore(policy={self.policy.name!r}, rank={self.rank}, capacity={self.capacity}, "
                f"size={self.size})")
