"""G3's locality-aware iterative partitioning (Wan et al., SIGMOD 2023, §4).

* **Stage 1** (:class:`G3Partitioner`): multi-constraint METIS balancing ``|V_p|`` and ``Σ d_v`` (two weight
  columns: 1 and the in-degree) with the communication-volume objective (``objtype=vol``), through the
  libmetis path of :class:`~workbench.partition.metis.MetisPartitioner`.
* **Stage 2** (:func:`refine_remote`, Algorithm 1): while ``(max_p R_p - min_p R_p) / max_p R_p > gamma``
  (``R_p = |V_p^remote|``), swap one vertex pair between the part ``A`` with the most and the part ``B``
  with the fewest remote vertices: out of ``A`` the vertex with the most out-of-part neighbours, out of
  ``B`` the vertex with the fewest neighbours outside ``A``. Swaps are 1-for-1, so every ``|V_p|`` stays as
  stage 1 made it. **Fast neighbour tracking**: per (part, vertex) counters ``cnt[p, u] = |N(u) ∩ V_p|`` for
  ``u ∉ V_p`` make a move ``O(d_v)`` (the paper's fast neighbour tracking); ``R_p`` is the number of non-zero
  counters. The loop is compiled with numba.

Stop rules: the spread is within ``gamma`` (0.5 %, the paper's), a swap undoes the previous one
(the paper's cyclic swapping), ``patience`` swaps without a new best spread, or ``max_iterations``.
The partition returned is the best one seen (swaps after it are undone), so refining never makes the
spread worse.

The refiner works on the symmetrised graph (neighbours = in- or out-neighbours, no self-loops), where
``V_p^remote`` is exactly the halo of the metrics; the counters are a dense ``(P, N)`` int32 array
(64 MB for 16 parts of 1M vertices).

Any edge-cut partitioner takes it as a refiner: ``--set partition.refine=g3`` after ``random``, ``block`` or
``metis``; ``--method g3`` is stage 1 followed by the refiner (always; its ``refine`` field changes nothing).

Example:
    >>> import torch
    >>> from workbench.graph import Graph
    >>> from workbench.partition import partition
    >>> ring = torch.arange(12)
    >>> g = Graph.from_edges(torch.cat([ring, (ring + 1) % 12]), torch.cat([(ring + 1) % 12, ring]), 12,
    ...                      directed=False)
    >>> r = partition(g, 3, method="random", refine="g3")
    >>> r.metrics().remote["remote_ratio"] >= partition(g, 3, method="random").metrics().remote["remote_ratio"]
    True
    >>> sorted(r.refinement)
    ['best_iteration', 'iterations', 'method', 'spread_after', 'spread_before', 'stop', 'time_s']
"""

from __future__ import annotations

import dataclasses
import time
from typing import Annotated, Any, Optional

import numba
import numpy as np
import torch

from workbench._validation import ErrorCollector
from workbench.constraints import Interval, Options
from workbench.graph import Graph
from workbench.partition.base import Partitioner, register_partitioner, register_refiner
from workbench.partition.metis import MetisPartitioner, symmetric_csr

__all__ = ["G3Partitioner", "RemoteTracker", "refine_remote", "remote_counts", "GAMMA"]

GAMMA = 0.005
"""The paper's convergence threshold: max/min |V_p^remote| within 0.5 %."""
STOPS = ("converged", "cycle", "patience", "max_iterations", "stuck")


# --------------------------------------------------------------------------------------------------------
# Compiled kernels
# --------------------------------------------------------------------------------------------------------


@numba.njit(cache=True)
def _move(indptr, indices, part, cnt, R, rem, v, a, b):  # pragma: no cover - compiled
    """Move ``v`` from part ``a`` to part ``b``, updating the counters in ``O(d_v)`` (fast neighbour tracking)."""
    ka = 0
    kb = 0
    for j in range(indptr[v], indptr[v + 1]):
        u = indices[j]
        if u == v:
            continue
        pu = part[u]
        if pu != a:                       # a loses neighbour v
            cnt[a, u] -= 1
            if cnt[a, u] == 0:
                R[a] -= 1
        if pu != b:                       # b gains neighbour v
            if cnt[b, u] == 0:
                R[b] += 1
            cnt[b, u] += 1
        if pu == a:                       # v becomes remote for u
            rem[u] += 1
            ka += 1
        if pu == b:                       # v stops being remote for u
            rem[u] -= 1
            kb += 1
    if ka > 0:                            # v now sits outside a, next to a
        cnt[a, v] = ka
        R[a] += 1
    if cnt[b, v] > 0:                     # v is now inside b
        cnt[b, v] = 0
        R[b] -= 1
    deg = 0
    for j in range(indptr[v], indptr[v + 1]):
        if indices[j] != v:
            deg += 1
    rem[v] = deg - kb
    part[v] = b


@numba.njit(cache=True)
def _apply_swaps(indptr, indices, part, cnt, R, rem, swaps):  # pragma: no cover - compiled
    """Apply ``swaps`` rows ``(v_a, v_b)``: ``v_a`` and ``v_b`` trade parts."""
    for k in range(swaps.shape[0]):
        va, vb = swaps[k, 0], swaps[k, 1]
        a, b = part[va], part[vb]
        if a == b:
            continue
        _move(indptr, indices, part, cnt, R, rem, va, a, b)
        _move(indptr, indices, part, cnt, R, rem, vb, b, a)


@numba.njit(cache=True)
def _refine_loop(indptr, indices, part, cnt, R, rem, members, pos, offsets, gamma, max_iterations,
                 patience, log):  # pragma: no cover - compiled
    """Algorithm 1. ``members[offsets[p]:offsets[p+1]]`` lists part ``p`` (``pos[v]`` = v's slot; a 1-for-1
    swap trades the two slots). ``log[k] = (v_max, v_min, A, B)``. Returns ``(swaps, best, stop code)``."""
    num_parts = R.shape[0]
    best_spread = 2.0
    best = 0
    it = 0
    stop = 3
    while it <= max_iterations:
        A = 0
        B = 0
        for p in range(num_parts):
            if R[p] > R[A]:
                A = p
            if R[p] < R[B]:
                B = p
        spread = (R[A] - R[B]) / R[A] if R[A] > 0 else 0.0
        if spread < best_spread:
            best_spread = spread
            best = it
        if spread <= gamma:
            stop = 0
            break
        if it - best >= patience:
            stop = 2
            break
        if it == max_iterations:
            stop = 3
            break
        # v_max: most out-of-part neighbours in A; v_min: fewest neighbours outside A in B
        vmax = -1
        top = -1
        for k in range(offsets[A], offsets[A + 1]):
            v = members[k]
            if rem[v] > top:
                top = rem[v]
                vmax = v
        vmin = -1
        low = 1 << 62
        for k in range(offsets[B], offsets[B + 1]):
            v = members[k]
            deg = indptr[v + 1] - indptr[v]
            outside = deg - cnt[A, v]
            if outside < low:
                low = outside
                vmin = v
        if vmax < 0 or vmin < 0:
            stop = 4
            break
        if it > 0 and ((log[it - 1, 0] == vmin and log[it - 1, 1] == vmax)
                       or (log[it - 1, 0] == vmax and log[it - 1, 1] == vmin)):   # would undo the last swap
            stop = 1
            break
        _move(indptr, indices, part, cnt, R, rem, vmax, A, B)
        _move(indptr, indices, part, cnt, R, rem, vmin, B, A)
        ka, kb = pos[vmax], pos[vmin]
        members[ka] = vmin
        members[kb] = vmax
        pos[vmin] = ka
        pos[vmax] = kb
        log[it, 0] = vmax
        log[it, 1] = vmin
        log[it, 2] = A
        log[it, 3] = B
        it += 1
    return it, best, stop


@numba.njit(cache=True)
def _undo(part, log, start, stop):  # pragma: no cover - compiled
    for k in range(stop - 1, start - 1, -1):
        part[log[k, 0]] = log[k, 2]
        part[log[k, 1]] = log[k, 3]


# --------------------------------------------------------------------------------------------------------
# Tracker
# --------------------------------------------------------------------------------------------------------


def remote_counts(indptr: np.ndarray, indices: np.ndarray, part: np.ndarray, num_parts: int) -> np.ndarray:
    """``(P,)`` |V_p^remote| recounted from scratch (vectorised; symmetric CSR without self-loops).

    Example:
        >>> remote_counts(np.array([0, 1, 3, 4]), np.array([1, 0, 2, 1]), np.array([0, 0, 1]), 2).tolist()
        [1, 1]
    """
    n = len(indptr) - 1
    v = np.repeat(np.arange(n), np.diff(indptr))
    cross = part[v] != part[indices]
    keys = np.unique(part[v[cross]].astype(np.int64) * n + indices[cross])
    return np.bincount(keys // n, minlength=num_parts).astype(np.int64)


class RemoteTracker:
    """The incremental state of Algorithm 1 on a symmetric CSR graph: ``part``, ``cnt``, ``R``, ``rem``.

    Example:
        >>> indptr, indices = np.array([0, 1, 3, 5, 6]), np.array([1, 0, 2, 1, 3, 2])   # path 0-1-2-3
        >>> t = RemoteTracker(indptr, indices, np.array([0, 0, 1, 1]), 2)
        >>> t.R.tolist()
        [1, 1]
        >>> t.swap([[1, 3]]); t.part.tolist(), t.R.tolist(), bool((t.R == t.recount()).all())
        ([0, 1, 1, 0], [2, 2], True)
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, part: np.ndarray, num_parts: int):
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(indices, dtype=np.int64)
        self.part = np.array(part, dtype=np.int64)
        self.num_parts = int(num_parts)
        n = len(self.indptr) - 1
        v = np.repeat(np.arange(n), np.diff(self.indptr))
        u = self.indices
        cross = (self.part[v] != self.part[u]) & (u != v)
        self.cnt = np.bincount(self.part[v[cross]] * n + u[cross], minlength=self.num_parts * n
                               ).astype(np.int32).reshape(self.num_parts, n)    # (P, N)
        self.R = np.count_nonzero(self.cnt, axis=1).astype(np.int64)
        self.rem = np.bincount(v[cross], minlength=n).astype(np.int64)

    def recount(self) -> np.ndarray:
        """``(P,)`` |V_p^remote| from scratch (what ``R`` must equal)."""
        return remote_counts(self.indptr, self.indices, self.part, self.num_parts)

    def swap(self, pairs: Any) -> None:
        """Trade the parts of each ``(v_a, v_b)`` pair, in order (pairs in one part are skipped)."""
        swaps = np.ascontiguousarray(np.asarray(pairs, dtype=np.int64).reshape(-1, 2))
        _apply_swaps(self.indptr, self.indices, self.part, self.cnt, self.R, self.rem, swaps)


def refine_remote(indptr: np.ndarray, indices: np.ndarray, part: np.ndarray, num_parts: int, *,
                  gamma: float = GAMMA, max_iterations: int = 100_000, patience: int = 2000
                  ) -> tuple[np.ndarray, dict]:
    """Algorithm 1 on a symmetric CSR graph without self-loops.

    Returns:
        ``(part, info)``: the best partition seen and ``{iterations, best_iteration, stop, spread_before,
        spread_after, time_s}`` (spread = ``(max R - min R) / max R``).
    """
    start = time.perf_counter()
    t = RemoteTracker(indptr, indices, part, num_parts)
    before = _spread(t.R)
    order = np.argsort(t.part, kind="stable")
    offsets = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum(np.bincount(t.part, minlength=num_parts), out=offsets[1:])
    members = order.astype(np.int64)
    pos = np.empty_like(members)
    pos[members] = np.arange(len(members))
    log = np.zeros((max_iterations + 1, 4), dtype=np.int64)
    iters, best, stop = _refine_loop(t.indptr, t.indices, t.part, t.cnt, t.R, t.rem, members, pos, offsets,
                                     float(gamma), int(max_iterations), int(patience), log)
    _undo(t.part, log, best, iters)
    out = t.part
    info = {"method": "g3", "iterations": int(iters), "best_iteration": int(best), "stop": STOPS[stop],
            "spread_before": before, "spread_after": _spread(remote_counts(t.indptr, t.indices, out, num_parts)),
            "time_s": time.perf_counter() - start}
    return out, info


def _spread(R: np.ndarray) -> float:
    hi = int(R.max()) if R.size else 0
    return float((hi - int(R.min())) / hi) if hi else 0.0


@register_refiner("g3")
def g3_refiner(graph: Graph, node_part: torch.Tensor, num_parts: int, config: Any = None) -> tuple[torch.Tensor, dict]:
    """The ``g3`` refiner: Algorithm 1 on ``graph``'s symmetrised adjacency (options ``gamma``,
    ``max_iterations`` and ``patience`` are read from ``config`` when it has them)."""
    indptr, indices, _ = symmetric_csr(graph)
    opts = {k: getattr(config, k) for k in ("gamma", "max_iterations", "patience") if hasattr(config, k)}
    part, info = refine_remote(indptr, indices, node_part.numpy(), num_parts, **opts)
    return torch.from_numpy(part), info


# --------------------------------------------------------------------------------------------------------
# The partitioner
# --------------------------------------------------------------------------------------------------------


@register_partitioner
class G3Partitioner(Partitioner):
    """G3: multi-constraint METIS (|V_p| and Σd_v balanced, communication-volume objective), then the
    ``g3`` refiner (see the module docstring).

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> ring = torch.arange(16)
        >>> g = Graph.from_edges(torch.cat([ring, (ring + 1) % 16]), torch.cat([(ring + 1) % 16, ring]), 16,
        ...                      directed=False)
        >>> r = G3Partitioner(seed=0).partition(g, 4)
        >>> r.part_sizes().tolist(), r.refinement["stop"]
        ([4, 4, 4, 4], 'converged')
    """

    name = "g3"

    @dataclasses.dataclass(kw_only=True)
    class Config(Partitioner.Config):
        gamma: Annotated[float, Interval(0, 1, closed="left")] = GAMMA
        """Stage 2 stops when (max - min) / max of the parts' remote-vertex counts is at most gamma."""
        max_iterations: Annotated[int, Interval(1, None)] = 100_000
        """Most vertex-pair swaps of stage 2."""
        patience: Annotated[int, Interval(1, None)] = 2000
        """Stage 2 stops after this many swaps without a new best spread."""
        imbalance: Annotated[float, Interval(0.001, 10)] = 0.03
        """Stage 1: allowed imbalance of |V_p| and Σd_v (METIS ubvec = 1 + imbalance)."""
        objective: Annotated[str, Options("cut", "vol")] = "vol"
        """Stage 1 METIS objective: 'vol' (communication volume, the paper's) or 'cut'."""

    def _check(self, graph: Graph, num_parts: Optional[int], errs: ErrorCollector) -> None:
        metis = MetisPartitioner(seed=self.config.seed, balance_edges=True,
                                 vertex_weights=torch.ones(graph.num_nodes, dtype=torch.int64))
        metis._check(graph, num_parts, errs)

    def _partition(self, graph: Graph, num_parts: int) -> torch.Tensor:
        c = self.config
        metis = MetisPartitioner(seed=c.seed, balance_edges=True, imbalance=c.imbalance, objective=c.objective,
                                 vertex_weights=torch.ones(graph.num_nodes, dtype=torch.int64))
        return metis._partition(graph, num_parts)

    def _refine(self, graph: Graph, node_part: torch.Tensor, num_parts: int) -> tuple[torch.Tensor, Optional[dict]]:
        if num_parts < 2:
            return node_part, None
        return g3_refiner(graph, node_part, num_parts, self.config)   # stage 2 always runs for method g3
