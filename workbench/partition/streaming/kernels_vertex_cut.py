"""Compiled per-chunk kernels of the vertex-cut streaming partitioners: hash, DBH, HDRF and greedy (numba,
``cache=True``). Each assigns every line of a chunk to one part (``out``) and updates the replica bitsets
``rep``, the lines per part ``load`` and the last part per vertex ``last``; state names as in
:mod:`workbench.partition.streaming.kernels`. Ties go to the lowest part index unless a docstring says otherwise.
"""

from __future__ import annotations

import numba
import numpy as np

# inlined helpers: this file changes with them (numba's cache note in kernels.py)
from workbench.partition.streaming.kernels import AHEAD, _ONE, _has, _place, _prefetch_rows, _shift, mix64

__all__ = ["hash_chunk", "dbh_chunk", "hdrf_chunk", "greedy_cases_chunk"]


@numba.njit(cache=True, nogil=True)
def hash_chunk(src, dst, num_parts, seed, rep, load, last, out):
    """Random hashing: part = mix64(seed, min(u, v), max(u, v)) mod P (orientation-free)."""
    s = mix64(np.uint64(seed) + np.uint64(0x9E3779B97F4A7C15))
    n = src.shape[0]
    for i in range(n):
        if i + AHEAD < n:
            _prefetch_rows(src[i + AHEAD], dst[i + AHEAD], rep, rep)
        u, v = src[i], dst[i]
        lo, hi = min(u, v), max(u, v)
        p = np.int64(mix64(mix64(np.uint64(lo) ^ s) + np.uint64(hi)) % np.uint64(num_parts))
        _place(u, v, p, rep, load, last)
        out[i] = p


@numba.njit(cache=True, nogil=True)
def dbh_chunk(src, dst, num_parts, seed, deg, partial, rep, load, last, out):
    """DBH: hash the lower-degree endpoint (ties: ``dst``, as the reference code). ``partial``: degrees seen
    so far, counted before the decision; otherwise ``deg`` holds full degrees from a degree pass."""
    s = mix64(np.uint64(seed) + np.uint64(0x9E3779B97F4A7C15))
    n = src.shape[0]
    for i in range(n):
        if i + AHEAD < n:
            _prefetch_rows(src[i + AHEAD], dst[i + AHEAD], deg, rep)
        u, v = src[i], dst[i]
        if partial:
            deg[u] += 1
            deg[v] += 1
        x = u if deg[u] < deg[v] else v
        p = np.int64(mix64(np.uint64(x) ^ s) % np.uint64(num_parts))
        _place(u, v, p, rep, load, last)
        out[i] = p


@numba.njit(cache=True, inline="always")
def _bit(rep, v, p):
    """1.0 when part ``p`` holds ``v``, else 0.0 (for branch-free scores)."""
    sh = _shift(rep)
    return float((np.uint64(rep[v, p >> sh]) >> np.uint64(p & ((1 << sh) - 1))) & _ONE)


@numba.njit(cache=True, nogil=True)
def hdrf_chunk(src, dst, num_parts, lam, eps, greedy, pdeg, limit, rep, load, last, out):
    """HDRF (``greedy=False``) or the greedy score form (``greedy=True``): argmax over parts of
    ``C_REP + lam * (maxsize - load[p]) / (eps + maxsize - minsize)``, first index on ties.

    HDRF's ``C_REP = g(u, p) + g(v, p)`` with ``g(x, p) = 1 + (1 - theta(x))`` when ``p`` holds ``x``,
    ``theta(u) = pdeg[u] / (pdeg[u] + pdeg[v])`` over partial degrees incremented before scoring.
    Greedy's ``C_REP = [p holds u] + [p holds v]``.

    The scores are summed branch-free (``g * [p holds x]``: adding 0.0 leaves a sum unchanged, so the floats are
    those of conditional sums) and ``minsize``/``maxsize`` follow the one load that grows per line (the
    minimum is recounted only when its last part leaves it) instead of an O(P) scan per line.

    Stops before a line that would take a partial degree past ``limit`` (the largest value of ``pdeg``'s
    type); returns the lines assigned (the caller widens ``pdeg`` and assigns the rest).
    """
    lo, hi = load[0], load[0]
    for p in range(1, num_parts):
        lo = min(lo, load[p])
        hi = max(hi, load[p])
    at_lo = 0   # parts whose load is lo
    for p in range(num_parts):
        at_lo += load[p] == lo
    n = src.shape[0]
    for i in range(n):
        if i + AHEAD < n:
            _prefetch_rows(src[i + AHEAD], dst[i + AHEAD], pdeg, rep)
        u, v = src[i], dst[i]
        if pdeg[u] >= limit - 1 or pdeg[v] >= limit - 1:
            return i
        pdeg[u] += 1
        pdeg[v] += 1
        du, dv = float(pdeg[u]), float(pdeg[v])
        if greedy:
            gu, gv = 1.0, 1.0
        else:
            gu = 1.0 + (1.0 - du / (du + dv))
            gv = 1.0 + (1.0 - dv / (du + dv))
        denom = eps + float(hi - lo)
        best, best_s = 0, -1.0
        for p in range(num_parts):
            s = lam * float(hi - load[p]) / denom + gu * _bit(rep, u, p) + gv * _bit(rep, v, p)
            better = s > best_s
            best = p if better else best
            best_s = s if better else best_s
        _place(u, v, best, rep, load, last)
        out[i] = best
        x = load[best]
        hi = max(hi, x)
        if x - 1 == lo:
            at_lo -= 1
            if at_lo == 0:   # every part is above lo now: lo + 1 is the new minimum
                lo += 1
                for p in range(num_parts):
                    at_lo += load[p] == lo
    return src.shape[0]


@numba.njit(cache=True, inline="always")
def _least_loaded_in(rep, x, y, load, num_parts, both):
    """Least-loaded part holding ``x`` (and ``y`` when ``both``); -1 if none."""
    best = -1
    for p in range(num_parts):
        if _has(rep, x, p) and (not both or _has(rep, y, p)):
            if best < 0 or load[p] < load[best]:
                best = p
    return best


@numba.njit(cache=True, nogil=True)
def greedy_cases_chunk(src, dst, num_parts, deg, seen, rep, load, last, out):
    """PowerGraph's greedy case rules: (1) a common part of ``A(u) ∩ A(v)``; (2) both seen but disjoint: a
    part of the endpoint with more unassigned edges (``deg - seen``); (3) one seen: one of its parts;
    (4) neither: any part. Always the least-loaded candidate (lowest index on ties)."""
    for i in range(src.shape[0]):
        u, v = src[i], dst[i]
        p = _least_loaded_in(rep, u, v, load, num_parts, True)
        if p < 0:
            su, sv = seen[u] > 0, seen[v] > 0
            if su and sv:
                x = u if deg[u] - seen[u] >= deg[v] - seen[v] else v
                p = _least_loaded_in(rep, x, x, load, num_parts, False)
            elif su:
                p = _least_loaded_in(rep, u, u, load, num_parts, False)
            elif sv:
                p = _least_loaded_in(rep, v, v, load, num_parts, False)
            else:
                p = 0
                for q in range(1, num_parts):
                    if load[q] < load[p]:
                        p = q
        seen[u] += 1
        seen[v] += 1
        _place(u, v, p, rep, load, last)
        out[i] = p
