"""The compiled relabelling behind :func:`workbench.sample.base.build_block` (imported only when numba is)."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def relabel_block(table, dst, src, edge_dst_gid):  # pragma: no cover - compiled
    """One pass of :func:`~workbench.sample.base.build_block`'s relabelling over a ``-1`` table.

    Returns ``(src_all, edge_src, edge_dst, ok)``: the block's source ids (the destinations, then the other
    sources in order of first appearance), every edge's local source and destination, and ``ok = False``
    when ``dst`` repeats an id. The table is all ``-1`` again on return.
    """
    nd = dst.shape[0]
    src_all = np.empty(nd + src.shape[0], dtype=np.int64)
    ok = True
    for i in range(nd):
        if table[dst[i]] >= 0:
            ok = False
        table[dst[i]] = i
        src_all[i] = dst[i]
    n = nd
    edge_src = np.empty(src.shape[0], dtype=np.int64)
    edge_dst = np.empty(edge_dst_gid.shape[0], dtype=np.int64)
    if ok:
        for e in range(src.shape[0]):
            s = src[e]
            t = table[s]
            if t < 0:
                t = n
                table[s] = n
                src_all[n] = s
                n += 1
            edge_src[e] = t
        for e in range(edge_dst_gid.shape[0]):
            edge_dst[e] = table[edge_dst_gid[e]]
    for i in range(n):
        table[src_all[i]] = -1
    return src_all[:n].copy(), edge_src, edge_dst, ok


_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)


@numba.njit(cache=True, nogil=True, inline="always")
def _mix64(z):  # pragma: no cover - compiled
    z = (z ^ (z >> np.uint64(30))) * _C1
    z = (z ^ (z >> np.uint64(27))) * _C2
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True, inline="always")
def _draw(state, j, d, fanout, replace):  # pragma: no cover - compiled
    """A vertex's draw ``j``: ``(slot, -1)`` with replacement (a slot in ``[0, d)``), else Robert Floyd's
    ``(t, m)``: slot ``j`` picks ``t`` in ``[0, m]``, or ``m`` (never taken before) when ``t`` already is."""
    r = np.int64(_mix64(state + np.uint64(j + 1) * _GAMMA) >> np.uint64(1))
    if replace:
        return r % d, np.int64(-1)
    m = np.int64(d - fanout + j)
    return r % (m + 1), m


@numba.njit(cache=True, nogil=True)
def sample_rows(indptr, indices, rows, gid, fanout, replace, key):  # pragma: no cover - compiled
    """:func:`workbench.sample.keyed.sample_rows_keyed` in one compiled pass per vertex: the same SplitMix64
    draws, the same Floyd slots in the same order, so the same edges (tested against the numpy kernel).
    Returns ``(src_gid, dst_gid)``."""
    n = gid.shape[0]
    total = 0
    max_deg = 0
    for i in range(n):
        d = indptr[rows[i] + 1] - indptr[rows[i]]
        if fanout < 0 or (not replace and d <= fanout):
            total += d
        elif replace:
            total += fanout if d > 0 else 0
        else:
            total += fanout
            max_deg = max(max_deg, d)
    src = np.empty(total, dtype=np.int64)
    dst = np.empty(total, dtype=np.int64)
    taken = np.zeros(max_deg, dtype=np.int64)   # taken[t] == i + 1: slot t already chosen for vertex i
    pos = 0
    for i in range(n):
        s = indptr[rows[i]]
        d = indptr[rows[i] + 1] - s
        v = gid[i]
        if fanout < 0 or (not replace and d <= fanout):
            for j in range(d):
                src[pos + j] = indices[s + j]
                dst[pos + j] = v
            pos += d
            continue
        if replace and d == 0:
            continue
        state = _mix64(np.uint64(v) ^ key)
        for j in range(fanout):
            t, m = _draw(state, j, d, fanout, replace)
            if m >= 0:
                if taken[t] == i + 1:
                    t = m
                taken[t] = i + 1
            src[pos + j] = indices[s + t]
            dst[pos + j] = v
        pos += fanout
    return src, dst


@numba.njit(parallel=True, cache=True, nogil=True)
def sample_rows_parallel(indptr, indices, rows, gid, fanout, replace, key):  # pragma: no cover - compiled
    """:func:`sample_rows` with the vertices in parallel
    (``prange``: each writes its own slice of the output, found by a prefix sum of the counts): the same
    SplitMix64 draws, the same Floyd slots in the same order, so the same edges (tested against the numpy
    kernel). Floyd's "slot already taken" test scans the vertex's earlier slots (at most ``fanout - 1``), so no
    table is shared between threads. Returns ``(src_gid, dst_gid)``."""
    n = gid.shape[0]
    counts = np.empty(n, dtype=np.int64)
    for i in numba.prange(n):
        d = indptr[rows[i] + 1] - indptr[rows[i]]
        if fanout < 0 or (not replace and d <= fanout):
            counts[i] = d
        elif replace:
            counts[i] = fanout if d > 0 else 0
        else:
            counts[i] = fanout
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 0
    for i in range(n):
        offsets[i + 1] = offsets[i] + counts[i]
    src = np.empty(offsets[n], dtype=np.int64)
    dst = np.empty(offsets[n], dtype=np.int64)
    for i in numba.prange(n):
        s = indptr[rows[i]]
        d = indptr[rows[i] + 1] - s
        v = gid[i]
        pos = offsets[i]
        if fanout < 0 or (not replace and d <= fanout):
            for j in range(d):
                src[pos + j] = indices[s + j]
                dst[pos + j] = v
        elif d > 0:
            state = _mix64(np.uint64(v) ^ key)
            for j in range(fanout):
                t, m = _draw(state, j, d, fanout, replace)
                for q in range(j if m >= 0 else 0):   # Floyd: m when t is one of the vertex's earlier slots
                    if src[pos + q] == t:
                        t = m
                        break
                src[pos + j] = t      # the slot, until every slot of the vertex is drawn
                dst[pos + j] = v
            for j in range(fanout):
                src[pos + j] = indices[s + src[pos + j]]
    return src, dst
