"""Full-graph edge sampling (PSC-GCN, Wang et al.): per-edge keep probabilities, Bernoulli draws, inclusion
probabilities. Registered in the ``sample`` registry next to the block samplers.

PSC-GCN does not sample mini-batches: every inner vertex of a part stays a target in every layer and
keeps each of its in-edges ``j -> i`` with probability ``p_ij``; a kept edge weighs ``P_ij / p_ij``
(Eq. 15, unbiased), a dropped one 0, and the **same** draw serves every layer of an iteration (Eq. 16 relies on it).
So these methods are :class:`EdgeSampler` s, not :class:`~workbench.sample.base.Sampler` s: they decide
on a part's :class:`PartEdges` (inner targets, inner-or-boundary sources) and name the trainer that
trains with them (``trains_with = "edge_sampled"``): full-graph training given
:class:`workbench.train.edge_sampled.SampledEdges`, which :meth:`workbench.compose.RunConfig.build` picks from the
sample method (no other special case).

Methods (``--set sample.method=NAME``):

============== ======================================================================================
psc            Algorithm 2 with the KKT solution of Sec. IV-B (Eq. 19): ``p_ij`` minimises
               ``sum_j a_j (1/p_ij - 1) ||y_ij||^2`` under ``sum_j p_ij = epsilon |N_i|``, ``a_inner`` for
               inner sources, ``a_boundary`` for boundary ones; ``s_j = sqrt(a_j) ||y_ij||`` floored at
               ``delta`` x the target's mean ``s`` (no p_ij = 0 on a bad estimate). ``||y_ij||^2 = P_ij^2 h_j`` with
               ``h_j = sum_l ||H_j^(l) W^(l+1)||^2`` (``y_ij`` of Eq. 16); ``estimator`` picks ``h``: ``embeddings``
               (the last forward's rows and the current weights; a boundary vertex's ``h_j`` is shipped by
               its owner, one float per boundary vertex and refresh, kind ``prefetch_stats``; the paper
               says only "historical information"),
               ``features`` (``||X_j||^2``, static) or ``none`` (``h = 1``). At t = 0, before any
               forward, ``embeddings`` takes the one term already known, the features with the initial
               weights: ``h_j = ||X_j W^(1)||^2`` (Algorithm 2 estimates y from what is known before it
               draws; line 2's ``p_ij = epsilon`` is only the value without any estimate, ``h=None``);
               ``p`` is recomputed every ``refresh`` iterations (semi-dynamic; the paper gives no period).
uniform_edge   ``p_ij = epsilon`` for every edge (the uniform baseline of Lemma 3).
nodewise       GraphSAGE-style node-wise sampling: target ``i`` keeps exactly
               ``max(1, round(epsilon |N_i|))`` in-neighbours, uniformly without replacement
               (``p_ij = k_i / |N_i|``, weight ``P_ij / p_ij``).
bns            BNS-GCN: every inner edge is kept; each boundary vertex is kept with probability
               ``epsilon`` for all of its edges (weight ``P_ij / epsilon``).
============== ======================================================================================

Self-loops (GCN's ``A + I``) are always kept with their weight ``P_ii`` and are outside the budget,
so no vertex aggregates nothing at tiny ``epsilon``; ``|N_i|`` counts the other in-edges.
With ``epsilon = 1`` every method keeps every edge with weight ``P_ij``: exactly full-graph training.

The inclusion probability of boundary vertex ``j`` (the chance that an iteration needs it) is
``p_j = 1 - prod_{i in N_j ∩ I_n} (1 - p_ij)`` (Sec. V-B, computed as ``1 - exp(sum log(1 - p_ij))``);
its sum over the boundary is the expected number of boundary rows fetched per iteration, and it is what
the ``inclusion`` cache ranks by.

Everything is vectorised (segment sums, one lexsort); there is no loop per vertex or edge.

Example:
    >>> import torch
    >>> e = PartEdges(target=torch.tensor([0, 0, 0, 1, 1]), source=torch.tensor([0, 1, 2, 1, 2]),
    ...               weight=torch.ones(5), num_inner=2, num_halo=1)
    >>> s = SAMPLERS.build("uniform_edge", epsilon=0.5)
    >>> p = s.probabilities(e)
    >>> p.tolist(), s.inclusion(e, p).tolist()      # self-loops (0->0, 1->1) kept; halo vertex 2 twice at 0.5
    ([1.0, 0.5, 0.5, 1.0, 0.5], [0.75])
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, ClassVar, Optional

import numpy as np
import torch

from workbench.constraints import Interval, Options
from workbench.sample.base import SAMPLERS
from workbench.stages import Stage

__all__ = ["PartEdges", "EdgeSampler", "PSCSampler", "UniformEdgeSampler", "NodeWiseSampler",
           "BoundaryNodeSampler", "kkt_probabilities", "segment_sum", "estimator_variance", "ESTIMATORS"]

ESTIMATORS = ("embeddings", "features", "none")


@dataclasses.dataclass(eq=False)
class PartEdges:
    """The in-edges of one part's inner vertices, in local ids (the rows of ``P_{G_n}``).

    Attributes:
        target: ``(E,)`` local inner row ``i`` of each edge (``0 .. num_inner-1``).
        source: ``(E,)`` local column ``j``: inner ``< num_inner``, boundary ``num_inner + k`` (halo slot k).
        weight: ``(E,)`` ``P_ij`` (global-degree normalisation, self-loops included).
        num_inner, num_halo: inner and boundary vertex counts.
    """

    target: torch.Tensor
    source: torch.Tensor
    weight: torch.Tensor
    num_inner: int
    num_halo: int

    @property
    def num_edges(self) -> int:
        return int(self.target.numel())

    @property
    def self_loop(self) -> torch.Tensor:
        return self.target == self.source

    @property
    def boundary(self) -> torch.Tensor:
        """``(E,)`` True where the source is a boundary vertex."""
        return self.source >= self.num_inner

    def degrees(self) -> torch.Tensor:
        """``(num_inner,)`` ``|N_i|``: in-edges of each target other than its self-loop."""
        return torch.bincount(self.target[~self.self_loop], minlength=self.num_inner)

    def sampled_boundary(self, keep: torch.Tensor) -> torch.Tensor:
        """``(num_halo,)`` bool: boundary vertices with at least one kept edge (the rows to fetch)."""
        out = torch.zeros(self.num_halo, dtype=torch.bool)
        b = keep & self.boundary
        out[self.source[b] - self.num_inner] = True
        return out


def segment_sum(values: torch.Tensor, seg: torch.Tensor, num: int) -> torch.Tensor:
    """``(num,)`` sums of ``values`` by segment id ``seg`` (float64)."""
    return torch.zeros(num, dtype=torch.float64).index_add_(0, seg, values.to(torch.float64))


def kkt_probabilities(seg: torch.Tensor, s: torch.Tensor, budget: torch.Tensor) -> torch.Tensor:
    """Eq. 19 for every segment at once: ``p`` minimising ``sum a (1/p - 1) ||y||^2`` under ``sum p = B``.

    Args:
        seg: ``(E,)`` segment (target) of each entry.
        s: ``(E,)`` ``sqrt(a_j) ||y_ij|| > 0``.
        budget: ``(T,)`` ``B_i`` per segment.

    Returns:
        ``(E,)`` float64 probabilities in (0, 1], summing to ``min(B_i, |N_i|)`` per segment.

    Example:
        >>> p = kkt_probabilities(torch.tensor([0, 0, 0]), torch.tensor([1.0, 1.0, 10.0]), torch.tensor([1.5]))
        >>> [round(x, 6) for x in p.tolist()]     # the large one clamps to 1, the rest share 0.5
        [0.25, 0.25, 1.0]
    """
    seg_np = seg.numpy()
    s_np = s.to(torch.float64).numpy()
    num = int(budget.numel())
    e = seg_np.size
    if e == 0:
        return torch.zeros(0, dtype=torch.float64)
    by_s = np.argsort(s_np, kind="stable")
    order = by_s[np.argsort(seg_np[by_s], kind="stable")]      # by target, then s ascending (radix sort on ints)
    ss, sg = s_np[order], seg_np[order]
    counts = np.bincount(seg_np, minlength=num)
    starts = np.cumsum(counts) - counts
    pos = np.arange(e) - starts[sg]                          # 0-based rank within the target; k = pos + 1
    csum = np.cumsum(ss)
    base = np.where(starts > 0, csum[np.maximum(starts - 1, 0)], 0.0)
    prefix = csum - base[sg]                                 # S_k
    n = counts[sg].astype(np.float64)
    b = budget.to(torch.float64).numpy()[sg]
    ok = (b + pos + 1 - n) * ss <= prefix * (1 + 1e-12)
    kstar = torch.zeros(num, dtype=torch.int64).scatter_reduce_(
        0, torch.from_numpy(sg), torch.from_numpy(np.where(ok, pos + 1, 0)), reduce="amax").numpy()
    kk = np.maximum(kstar, 1)
    s_k = np.where(counts > 0, csum[np.minimum(starts + kk - 1, e - 1)] - base, 0.0)   # S_{k*} per target
    bb = budget.to(torch.float64).numpy()
    c = np.where(s_k > 0, (bb + kk - counts) / np.where(s_k > 0, s_k, 1.0), 0.0)
    p_sorted = np.where(pos < kstar[sg], c[sg] * ss, 1.0)
    p_sorted = np.where(b >= n, 1.0, np.clip(p_sorted, 0.0, 1.0))
    p = np.empty(e)
    p[order] = p_sorted
    return torch.from_numpy(p)


def estimator_variance(edges: PartEdges, p: torch.Tensor, y_sq: torch.Tensor) -> torch.Tensor:
    """Eq. 16 per target: ``sum_j (1/p_ij - 1) ||y_ij||^2`` (``y_sq``: ``(E,)``). ``(num_inner,)`` float64."""
    term = (1.0 / p.to(torch.float64) - 1.0) * y_sq.to(torch.float64)
    return segment_sum(term, edges.target, edges.num_inner)


class EdgeSampler(Stage):
    """Base of the full-graph edge samplers: ``probabilities``, ``draw``, ``inclusion`` (module docstring)."""

    kind = "sample"
    requires = frozenset({"embedding exchange", "sampled-edge halos"})   # the exchange moves the rows its edges read
    provides = frozenset({"inclusion probabilities"})
    trains_with: ClassVar[str] = "edge_sampled"
    """The key of this sample method's trainer in :data:`workbench.composition.TRAINERS` (read by
    :func:`workbench.composition.trainer_class`)."""
    needs_estimates: ClassVar[bool] = False
    """Whether :meth:`probabilities` uses per-vertex estimates ``h`` (then the trainer refreshes them)."""

    @dataclasses.dataclass(kw_only=True)
    class Config(Stage.Config):
        epsilon: Annotated[float, Interval(0, 1, closed="right")] = 0.1
        """Sampling rate in (0, 1]: expected kept in-edges per vertex = epsilon x its in-degree (1 = all)."""
        refresh: Annotated[int, Interval(1, None)] = 10
        """Semi-dynamic period R: probabilities (and an inclusion cache) are recomputed every R iterations."""
        seed: Annotated[int, Interval(0, None)] = 0
        """Seed of every draw (a draw depends on (seed, draw index, rank) only)."""

    # -- verbs ---------------------------------------------------------------------------------------------
    def probabilities(self, edges: PartEdges, h: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``(E,)`` float64 keep probability of every edge (self-loops 1); ``h``: ``(num_inner + num_halo,)``
        per-vertex estimate (only methods with ``needs_estimates`` read it)."""
        p = torch.ones(edges.num_edges, dtype=torch.float64)
        if float(self.config.epsilon) >= 1.0:
            return p
        other = ~edges.self_loop
        p[other] = self._probabilities(edges, other, h)
        return p

    def draw(self, edges: PartEdges, p: torch.Tensor, index: int, rank: int) -> torch.Tensor:
        """``(E,)`` bool: the edges kept in draw ``index`` of part ``rank`` (self-loops always)."""
        if float(self.config.epsilon) >= 1.0:
            return torch.ones(edges.num_edges, dtype=torch.bool)
        state = np.random.SeedSequence([int(self.config.seed), int(index), int(rank)]).generate_state(1, dtype=np.uint64)
        gen = torch.Generator().manual_seed(int(state[0]) >> 1)
        return self._draw(edges, p, gen) | edges.self_loop

    def inclusion(self, edges: PartEdges, p: torch.Tensor) -> torch.Tensor:
        """``(num_halo,)`` ``p_j = 1 - prod_i (1 - p_ij)``: the chance boundary vertex j is fetched in an iteration."""
        b = edges.boundary
        q = p[b].to(torch.float64)
        log_miss = torch.log1p(-q.clamp(max=1.0))                 # -inf where p = 1
        acc = torch.zeros(edges.num_halo, dtype=torch.float64).index_add_(0, edges.source[b] - edges.num_inner, log_miss)
        return (1.0 - torch.exp(acc)).clamp(0.0, 1.0)

    def weights(self, edges: PartEdges, p: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """``(E,)`` float32 ``P~``: ``P_ij / p_ij`` where kept, 0 elsewhere (Eq. 15)."""
        w = edges.weight.to(torch.float64) / p
        return torch.where(keep, w, torch.zeros_like(w)).to(torch.float32)

    # -- per method ----------------------------------------------------------------------------------------
    def _probabilities(self, edges: PartEdges, other: torch.Tensor, h: Optional[torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def _draw(self, edges: PartEdges, p: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        return torch.rand(edges.num_edges, generator=gen, dtype=torch.float64) < p   # independent Bernoulli (Eq. 16)


@SAMPLERS.register
class UniformEdgeSampler(EdgeSampler):
    """Every edge kept with probability epsilon (independent Bernoulli)."""

    name = "uniform_edge"

    @dataclasses.dataclass(kw_only=True)
    class Config(EdgeSampler.Config):
        """epsilon, refresh (unused: p never changes), seed."""

    def _probabilities(self, edges, other, h):
        return torch.full((int(other.sum()),), float(self.config.epsilon), dtype=torch.float64)


@SAMPLERS.register
class PSCSampler(EdgeSampler):
    """PSC-GCN's variance-reduction sampler (Algorithm 2, Eq. 19; module docstring).

    Example:
        >>> import torch
        >>> e = PartEdges(target=torch.tensor([0, 0, 0]), source=torch.tensor([1, 2, 3]),
        ...               weight=torch.tensor([0.5, 0.5, 0.5]), num_inner=2, num_halo=2)
        >>> s = PSCSampler(epsilon=0.5, a_inner=1.1)
        >>> [round(x, 3) for x in s.probabilities(e, torch.ones(4)).tolist()]   # inner source 1 favoured
        [0.516, 0.492, 0.492]
    """

    name = "psc"
    needs_estimates = True

    @dataclasses.dataclass(kw_only=True)
    class Config(EdgeSampler.Config):
        a_inner: Annotated[float, Interval(0, None, closed="neither")] = 1.1
        """Priority a_j of inner sources (the paper's 1.1): larger keeps more inner and fewer boundary edges."""
        a_boundary: Annotated[float, Interval(0, None, closed="neither")] = 1.0
        """Priority a_j of boundary sources."""
        delta: Annotated[float, Interval(0, 1)] = 0.01
        """Floor of s_j as a fraction of the target's mean s (keeps every p_ij > 0 under bad estimates)."""
        estimator: Annotated[str, Options(*ESTIMATORS)] = "embeddings"
        """What ||y_ij||^2 = P_ij^2 h_j uses for h_j: ``embeddings`` (last H and current W; boundary h shipped by
        the owners), ``features`` (||X_j||^2) or ``none`` (h = 1)."""

    def _probabilities(self, edges, other, h):
        c = self.config
        if h is None:                                             # Algorithm 2 line 2: before the first estimate
            return torch.full((int(other.sum()),), float(c.epsilon), dtype=torch.float64)
        tgt, src = edges.target[other], edges.source[other]
        a = torch.where(src >= edges.num_inner, torch.tensor(float(c.a_boundary)), torch.tensor(float(c.a_inner)))
        s = a.to(torch.float64).sqrt() * edges.weight[other].to(torch.float64).abs() \
            * h.to(torch.float64)[src].clamp(min=0).sqrt()
        deg = torch.bincount(tgt, minlength=edges.num_inner).to(torch.float64)
        mean = segment_sum(s, tgt, edges.num_inner) / deg.clamp(min=1)
        floor = torch.where(mean > 0, c.delta * mean, torch.ones_like(mean))[tgt]
        s = torch.where(mean[tgt] > 0, torch.maximum(s, floor), torch.ones_like(s))
        return kkt_probabilities(tgt, s, float(c.epsilon) * deg)


@SAMPLERS.register
class NodeWiseSampler(EdgeSampler):
    """GraphSAGE-style node-wise sampling: exactly ``max(1, round(epsilon |N_i|))`` in-neighbours per target."""

    name = "nodewise"

    @dataclasses.dataclass(kw_only=True)
    class Config(EdgeSampler.Config):
        """epsilon, refresh (unused), seed."""

    def _fanout(self, edges: PartEdges) -> torch.Tensor:
        deg = edges.degrees()
        return torch.clamp(torch.round(float(self.config.epsilon) * deg.to(torch.float64)), min=1).to(torch.int64)

    def _probabilities(self, edges, other, h):
        deg = edges.degrees()
        tgt = edges.target[other]
        return (self._fanout(edges)[tgt].to(torch.float64) / deg[tgt].clamp(min=1)).clamp(max=1.0)

    def _draw(self, edges, p, gen):
        other = (~edges.self_loop).nonzero().flatten()
        tgt = edges.target[other]
        key = torch.rand(other.numel(), generator=gen, dtype=torch.float64)
        order = np.lexsort((key.numpy(), tgt.numpy()))                # by target, random within
        counts = torch.bincount(tgt, minlength=edges.num_inner).numpy()
        starts = np.cumsum(counts) - counts
        rank_in = np.empty(order.size, dtype=np.int64)
        rank_in[order] = np.arange(order.size) - starts[tgt.numpy()[order]]
        keep = torch.zeros(edges.num_edges, dtype=torch.bool)
        keep[other] = torch.from_numpy(rank_in) < self._fanout(edges)[tgt]
        return keep


@SAMPLERS.register
class BoundaryNodeSampler(EdgeSampler):
    """BNS-GCN: inner edges always kept, each boundary vertex kept (with all its edges) with probability epsilon."""

    name = "bns"

    @dataclasses.dataclass(kw_only=True)
    class Config(EdgeSampler.Config):
        """epsilon (the boundary keep rate), refresh (unused), seed."""

    def _probabilities(self, edges, other, h):
        return torch.where(edges.source[other] >= edges.num_inner, float(self.config.epsilon), 1.0).to(torch.float64)

    def _draw(self, edges, p, gen):
        keep_halo = torch.rand(edges.num_halo, generator=gen, dtype=torch.float64) < float(self.config.epsilon)
        b = edges.boundary
        keep = torch.ones(edges.num_edges, dtype=torch.bool)
        keep[b] = keep_halo[edges.source[b] - edges.num_inner]
        return keep

    def inclusion(self, edges, p):
        touched = torch.zeros(edges.num_halo, dtype=torch.bool)
        touched[edges.source[edges.boundary] - edges.num_inner] = True
        return torch.where(touched, float(self.config.epsilon), 0.0).to(torch.float64)
