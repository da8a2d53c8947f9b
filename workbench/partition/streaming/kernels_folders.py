"""Compiled per-chunk kernels of the partition-folder writer (:mod:`.folders`; numba, ``cache=True``).

A chunk is edge lines ``(src, dst)`` (int64). An undirected line ``u v`` is the two directed edges ``u -> v`` and
``v -> u``; a directed one only ``u -> v``. Self-loops are skipped (the cleaned graph has none). State:

* ``owner``: ``(N,)`` part of each vertex; ``ins``: ``(N, ceil(P / 64))`` uint64 bitsets, bit ``p`` of row ``v``
  set when ``v`` is in part ``p``'s completed subgraph (owned, or an in-neighbour of a vertex ``p`` owns);
* ``deg``: ``(N,)`` lines touching each vertex (an upper bound of any of its rows in any part), saturating at
  the largest value of its type (it only sizes the temporary buckets: any cut of the rows gives the same folder).
"""

from __future__ import annotations

import numba
import numpy as np

# inlined helpers: this file changes with them (numba's cache note in kernels.py)
from workbench.partition.streaming.kernels import _has, _set

__all__ = ["inside_chunk", "own_bits", "select_chunk", "group_pairs", "csr_bucket", "range_limits"]


@numba.njit(cache=True, nogil=True)
def own_bits(owner, ins):
    """Bit ``owner[v]`` of every row (each vertex is in its owner's subgraph)."""
    for v in range(owner.shape[0]):
        _set(ins, v, owner[v])


@numba.njit(cache=True, nogil=True)
def inside_chunk(src, dst, owner, both, ins, deg, deg_max, part_rows):
    """``u -> v`` puts ``u`` in ``owner[v]``'s subgraph (and ``v`` in ``owner[u]``'s when ``both``); degrees;
    ``part_rows[p]``: the directed edges part ``p`` may keep (``owner[d] == p``, or ``owner[s] == p`` across
    parts), repeats included: the size of its temporary buckets."""
    for i in range(src.shape[0]):
        u, v = src[i], dst[i]
        if u == v:
            continue
        if deg[u] < deg_max:
            deg[u] += 1
        if deg[v] < deg_max:
            deg[v] += 1
        ou, ov = owner[u], owner[v]
        _set(ins, u, ov)
        part_rows[ov] += 1
        if ou != ov:
            part_rows[ou] += 1
        if both:
            _set(ins, v, ou)
            part_rows[ou] += 1
            if ou != ov:
                part_rows[ov] += 1


@numba.njit(cache=True, inline="always")
def _range_of(bounds, lo, hi, d):
    """Index in ``bounds[lo:hi]`` (ascending exclusive upper limits) of the range holding ``d``."""
    a, b = lo, hi - 1
    while a < b:
        m = (a + b) >> 1
        if bounds[m] > d:
            b = m
        else:
            a = m + 1
    return a


@numba.njit(cache=True, inline="always")
def _emit(s, d, p, kind, slot, bucket_base, bounds, bounds_lo, bounds_hi, k, out_b, out_s, out_d):
    j = slot[p] * 2 + kind
    out_b[k] = bucket_base[j] + _range_of(bounds, bounds_lo[j], bounds_hi[j], d) - bounds_lo[j]
    out_s[k] = s
    out_d[k] = d


@numba.njit(cache=True, nogil=True)
def select_chunk(src, dst, owner, ins, both, slot, bucket_base, bounds, bounds_lo, bounds_hi, out_b, out_s, out_d):
    """The directed edges of a chunk that the parts of the current group keep, each with its bucket.

    Part ``p`` keeps ``s -> d`` when it owns ``d`` (row of an owned vertex: kind 0) or owns ``s`` and ``d`` is in
    its subgraph (row of a halo vertex: kind 1), :func:`~workbench.train.model_averaging.part_subgraph`'s rule
    for one hop. ``slot[p]`` is ``p``'s index in the group (-1: not in it); rows of kind ``k`` of slot ``j`` go
    to buckets ``bucket_base[2j + k] + r`` where ``r`` is the range of ``bounds[bounds_lo[2j + k]:...hi]`` (global
    ids, ascending exclusive limits) holding ``d``. Returns the count written to ``out_*`` (room: 2 per line
    and direction)."""
    k = 0
    for i in range(src.shape[0]):
        u, v = src[i], dst[i]
        if u == v:
            continue
        for rep in range(2 if both else 1):
            s, d = (u, v) if rep == 0 else (v, u)
            pd, ps = owner[d], owner[s]
            if slot[pd] >= 0:
                _emit(s, d, pd, 0, slot, bucket_base, bounds, bounds_lo, bounds_hi, k, out_b, out_s, out_d)
                k += 1
            if ps != pd and slot[ps] >= 0 and _has(ins, d, ps):
                _emit(s, d, ps, 1, slot, bucket_base, bounds, bounds_lo, bounds_hi, k, out_b, out_s, out_d)
                k += 1
    return k


@numba.njit(cache=True, nogil=True)
def group_pairs(out_b, out_s, out_d, k, counts, starts, pairs):
    """Counting sort of the first ``k`` selected edges by bucket into ``pairs`` (``(k, 2)``: source, destination);
    ``counts``/``starts`` (one per bucket) are overwritten."""
    counts[:] = 0
    for i in range(k):
        counts[out_b[i]] += 1
    acc = 0
    for b in range(counts.shape[0]):
        starts[b] = acc
        acc += counts[b]
    for i in range(k):
        b = out_b[i]
        j = starts[b]
        pairs[j, 0] = out_s[i]
        pairs[j, 1] = out_d[i]
        starts[b] = j + 1
    acc = 0
    for b in range(counts.shape[0]):
        starts[b] = acc
        acc += counts[b]




@numba.njit(cache=True, nogil=True)
def csr_bucket(pairs, g2l, tmp, out, counts):
    """One bucket's CSR rows: edges ``pairs[i] = (global source, global destination)`` (destinations in one
    range of consecutive local ids), counting-sorted by destination, each row's sources sorted by global id with
    repeats dropped, written as local ids to ``out`` row after row; ``counts[r + 1]`` = the sources kept in row
    ``r``. ``tmp`` has room for the bucket. Returns the count written."""
    r0, r1 = np.int64(1) << 62, np.int64(-1)
    for i in range(pairs.shape[0]):
        r = g2l[pairs[i, 1]]
        r0 = min(r0, r)
        r1 = max(r1, r)
    nrows = r1 - r0 + 1
    start = np.zeros(nrows + 1, np.int64)
    for i in range(pairs.shape[0]):
        start[g2l[pairs[i, 1]] - r0 + 1] += 1
    for r in range(nrows):
        start[r + 1] += start[r]
    fill = start[:nrows].copy()
    for i in range(pairs.shape[0]):
        r = g2l[pairs[i, 1]] - r0
        tmp[fill[r]] = pairs[i, 0]
        fill[r] += 1
    k = 0
    for r in range(nrows):
        seg = tmp[start[r]:start[r + 1]]
        seg.sort()
        kept = 0
        for j in range(seg.shape[0]):
            if j == 0 or seg[j] != seg[j - 1]:
                out[k] = g2l[seg[j]]
                k += 1
                kept += 1
        counts[r0 + r + 1] = kept
    return k


@numba.njit(cache=True, nogil=True)
def range_limits(ids, deg, budget, n):
    """Ascending exclusive upper limits (global ids, the last ``n``) cutting ``ids`` into ranges: a range starts at
    ``ids[i]`` where ``(sum of deg[ids[:i]]) // budget`` changes (at most ``budget`` plus one vertex's degree a
    range). No temporaries the size of ``ids``."""
    count = 1
    acc, prev = np.int64(0), np.int64(0)
    for i in range(ids.shape[0]):
        g = acc // budget
        if i > 0 and g != prev:
            count += 1
        prev = g
        acc += deg[ids[i]]
    out = np.empty(count, np.int64)
    k = 0
    acc, prev = np.int64(0), np.int64(0)
    for i in range(ids.shape[0]):
        g = acc // budget
        if i > 0 and g != prev:
            out[k] = ids[i]
            k += 1
        prev = g
        acc += deg[ids[i]]
    out[k] = n
    return out
