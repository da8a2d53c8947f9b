"""Compiled per-chunk kernels of the clustering streaming partitioners (numba, ``cache=True``): Hollocou et
al.'s volume-capped clustering (SPRING's Step A), SPRING's cluster merge (Step B), and 2PS-L's clustering and
two-phase assignment. State names as in :mod:`workbench.partition.streaming.kernels`: ``cid``/``vol`` cluster
id per vertex (0 = unseen) and cluster volumes, ``rn`` the richest neighbour, ``first`` the first-seen rank.
"""

from __future__ import annotations

import heapq

import numba
import numpy as np

# inlined helpers: this file changes with them (numba's cache note in kernels.py)
from workbench.partition.streaming.kernels import AHEAD, _has, _place, _prefetch_rows, prefetch

__all__ = ["hollocou_chunk", "twops_cluster_chunk", "twops_pre_chunk", "twops_rest_chunk", "spring_merge",
           "first_seen_of_roots", "owners_of_roots"]


@numba.njit(cache=True, nogil=True)
def hollocou_chunk(src, dst, deg, cid, vol, rn, first, counters, tau, partial):
    """SPRING's Step A (Algorithm 1, lines 2-21) = Hollocou et al.'s volume-capped streaming clustering.

    ``counters = [next cluster id k, next first-seen rank]``; ``rn`` the richest neighbour (-1: none, degree 0),
    updated for both endpoints of every line, strict ``<`` (first seen wins ties). ``partial=True`` is
    Hollocou's original online form: degrees and volumes grow by one per endpoint before the move test.
    (The counters live in locals inside the loop: kept in the array, they made the pass several times slower.)
    """
    k, f = counters[0], counters[1]
    n = src.shape[0]
    for i in range(n):
        if i + AHEAD < n:   # the rows of the vertices AHEAD lines on, then their clusters' and neighbours'
            a, b = src[i + AHEAD], dst[i + AHEAD]
            _prefetch_rows(a, b, cid, deg)
            prefetch(rn, a)
            prefetch(rn, b)
        if i + AHEAD // 2 < n:
            a, b = src[i + AHEAD // 2], dst[i + AHEAD // 2]
            prefetch(vol, cid[a])
            prefetch(vol, cid[b])
            prefetch(deg, rn[a])
            prefetch(deg, rn[b])
        u, v = src[i], dst[i]
        if cid[u] == 0:
            cid[u] = k
            k += 1
            first[u] = f
            f += 1
            if not partial:
                vol[cid[u]] += deg[u]
        if cid[v] == 0:
            cid[v] = k
            k += 1
            first[v] = f
            f += 1
            if not partial:
                vol[cid[v]] += deg[v]
        if partial:
            deg[u] += 1
            deg[v] += 1
            vol[cid[u]] += 1
            vol[cid[v]] += 1
        cu, cv = cid[u], cid[v]
        if vol[cu] <= tau and vol[cv] <= tau:
            if vol[cu] <= vol[cv]:
                vol[cu] -= deg[u]
                vol[cv] += deg[u]
                cid[u] = cv
            else:
                vol[cu] += deg[v]
                vol[cv] -= deg[v]
                cid[v] = cu
        du = deg[rn[u]] if rn[u] >= 0 else 0
        if du < deg[v]:
            rn[u] = v
        dv = deg[rn[v]] if rn[v] >= 0 else 0
        if dv < deg[u]:
            rn[v] = u
    counters[0], counters[1] = k, f


@numba.njit(cache=True, nogil=True)
def twops_cluster_chunk(src, dst, deg, cid, vol, first, counters, cap):
    """2PS-L phase 1 (Mayer et al.): streaming clustering with full degrees; with
    ``real(x) = vol(c_x) - d(x)``, ``u`` joins ``c_v`` if ``real(u) <= real(v)`` and ``vol(c_v) + d(u) <= cap``,
    else ``v`` joins ``c_u`` if ``real(v) < real(u)`` and ``vol(c_u) + d(v) <= cap``."""
    k, f = counters[0], counters[1]
    n = src.shape[0]
    for i in range(n):
        if i + AHEAD < n:
            _prefetch_rows(src[i + AHEAD], dst[i + AHEAD], cid, deg)
        if i + AHEAD // 2 < n:
            prefetch(vol, cid[src[i + AHEAD // 2]])
            prefetch(vol, cid[dst[i + AHEAD // 2]])
        u, v = src[i], dst[i]
        if cid[u] == 0:
            cid[u] = k
            k += 1
            first[u] = f
            f += 1
            vol[cid[u]] += deg[u]
        if cid[v] == 0:
            cid[v] = k
            k += 1
            first[v] = f
            f += 1
            vol[cid[v]] += deg[v]
        cu, cv = cid[u], cid[v]
        if cu == cv or vol[cu] > cap or vol[cv] > cap:
            continue
        ru, rv = vol[cu] - deg[u], vol[cv] - deg[v]
        if ru <= rv and vol[cv] + deg[u] <= cap:
            vol[cu] -= deg[u]
            vol[cv] += deg[u]
            cid[u] = cv
        elif rv < ru and vol[cu] + deg[v] <= cap:
            vol[cv] -= deg[v]
            vol[cu] += deg[v]
            cid[v] = cu
    counters[0], counters[1] = k, f


@numba.njit(cache=True, nogil=True)
def twops_pre_chunk(src, dst, vpart, cap_load, rep, load, last, out):
    """2PS-L phase 2a: a line whose endpoints' clusters map to one part goes there unless it is full
    (``load >= cap_load``); the others get -1 for phase 2b."""
    n = src.shape[0]
    for i in range(n):
        if i + AHEAD < n:
            _prefetch_rows(src[i + AHEAD], dst[i + AHEAD], vpart, rep)
        u, v = src[i], dst[i]
        p = vpart[u]
        if p == vpart[v] and load[p] < cap_load:
            _place(u, v, p, rep, load, last)
            out[i] = p
        else:
            out[i] = -1


@numba.njit(cache=True, nogil=True)
def twops_rest_chunk(src, dst, num_parts, deg, cid, vol, vpart, cap_load, port, rep, load, last, out):
    """2PS-L phase 2b over the lines with ``out == -1``: score only ``part(c_u)`` and ``part(c_v)``
    (``g_u + g_v + gc_u + gc_v``, ties to the later candidate); a full candidate: (higher-degree endpoint) mod
    P, then the least-loaded part. ``port=True``: CATGNN's port, which skips the scoring for lines whose
    clusters map to different parts, takes (higher-degree endpoint) mod P and falls back to part 0."""
    n = src.shape[0]
    for i in range(n):
        if i + AHEAD < n and out[i + AHEAD] < 0:
            a, b = src[i + AHEAD], dst[i + AHEAD]
            _prefetch_rows(a, b, vpart, rep)
            _prefetch_rows(a, b, deg, cid)
        if i + AHEAD // 2 < n and out[i + AHEAD // 2] < 0:
            prefetch(vol, cid[src[i + AHEAD // 2]])
            prefetch(vol, cid[dst[i + AHEAD // 2]])
        if out[i] >= 0:
            continue
        u, v = src[i], dst[i]
        pu, pv = vpart[u], vpart[v]
        hi = u if deg[u] > deg[v] else v
        if port and pu != pv:
            p = np.int64(hi % num_parts)
            if load[p] >= cap_load:
                p = 0
        elif load[pu] >= cap_load or load[pv] >= cap_load:
            p = np.int64(hi % num_parts)
            if load[p] >= cap_load:
                p = 0
                for q in range(1, num_parts):
                    if load[q] < load[p]:
                        p = q
        else:
            du, dv = float(deg[u]), float(deg[v])
            volu, volv = float(vol[cid[u]]), float(vol[cid[v]])
            best, best_s = pu, -1.0
            for k in range(2):
                c = pu if k == 0 else pv
                s = 0.0
                if _has(rep, u, c):
                    s += 1.0 + (1.0 - du / (du + dv))
                    if pu == c:
                        s += volu / (volu + volv)
                if _has(rep, v, c):
                    s += 1.0 + (1.0 - dv / (du + dv))
                    if pv == c:
                        s += volv / (volu + volv)
                if s >= best_s:
                    best, best_s = c, s
            p = best
        _place(u, v, p, rep, load, last)
        out[i] = p


# ----------------------------------------------------------------------------------------------- SPRING B

@numba.njit(cache=True, inline="always")
def _find(parent, i):
    root = i
    while parent[root] != root:
        root = parent[root]
    while parent[i] != root:  # path compression
        nxt = parent[i]
        parent[i] = root
        i = nxt
    return root


@numba.njit(cache=True, nogil=True)
def spring_merge(deg, cid, rn, num_clusters, cap, rerank):
    """Algorithm 1 Step B (lines 22-29): representatives, then merge clusters smallest first into the cluster
    of the representative's richest neighbour while ``|C_i| + |C_t| <= cap``.

    ``rerank=True`` (the paper's prose): a grown target moves to its new place in the size order (a lazy
    heap); every cluster is scanned once. ``rerank=False`` (the reference code): one static order by
    (size, id), visited by position, the largest cluster never a source.

    Returns:
        ``(root, size)``: ``root[c]`` the cluster that cluster id ``c`` ended in, ``size`` per cluster id (both
        of ``cid``'s type).
    """
    n = cid.shape[0]
    size = np.zeros(num_clusters, cid.dtype)   # sizes, ids and vertices all below the capacity: cid's type
    rep = np.full(num_clusters, -1, cid.dtype)
    for v in range(n):
        c = cid[v]
        if c == 0:
            continue
        size[c] += 1
        dn = deg[rn[v]] if rn[v] >= 0 else 0
        r = rep[c]
        dr = (deg[rn[r]] if rn[r] >= 0 else 0) if r >= 0 else 0
        if r < 0 or dr < dn:
            rep[c] = v
    parent = np.empty(num_clusters, cid.dtype)
    for c in range(num_clusters):
        parent[c] = c
    visited = np.zeros(num_clusters, np.bool_)
    big = np.int64(num_clusters + 1)
    heap = [np.int64(0)]
    heap.pop()
    for c in range(1, num_clusters):
        if size[c] > 0:
            heap.append(size[c] * big + c)
    heap.sort()
    stop = len(heap) if rerank else len(heap) - 1
    pos = 0
    while True:
        if rerank:
            if len(heap) == 0:
                break
            key = heapq.heappop(heap)
        else:
            if pos >= stop:
                break
            key = heap[pos]
            pos += 1
        i = key % big
        if visited[i] or size[i] == 0 or (rerank and key // big != size[i]):
            continue
        visited[i] = True
        t = rn[rep[i]] if rep[i] >= 0 else -1
        if t < 0:
            continue
        j = _find(parent, cid[t])
        if j != i and size[i] + size[j] <= cap:
            parent[i] = j
            size[j] += size[i]
            size[i] = 0
            ri, rj = rep[i], rep[j]
            di = deg[rn[ri]] if rn[ri] >= 0 else 0
            dj = deg[rn[rj]] if rn[rj] >= 0 else 0
            if dj < di or (dj == di and ri < rj):
                rep[j] = ri
            if rerank and not visited[j]:
                heapq.heappush(heap, size[j] * big + j)
    for c in range(num_clusters):   # the roots, in place of the parents (no second array)
        parent[c] = _find(parent, c)
    return parent, size


@numba.njit(cache=True, nogil=True)
def first_seen_of_roots(cid, first, root, key):
    """Per merged cluster (``root``), the least first-seen rank ``first[v]`` over its seen vertices into ``key``
    (filled by the caller with a value above every rank: left for a root with none). Ranks are distinct, so
    clusters ordered by it are in the order their first vertex was seen. One pass over the vertices, no
    per-vertex temporaries (SPRING's Step C at 10^8 vertices). Returns ``key``."""
    for v in range(cid.shape[0]):
        c = cid[v]
        if c > 0:
            r = root[c]
            if first[v] < key[r]:
                key[r] = first[v]
    return key


@numba.njit(cache=True, nogil=True)
def owners_of_roots(cid, root, cpart):
    """``owner[v] = cpart[root[cid[v]]]`` for every seen vertex, -1 for the others (one pass)."""
    n = cid.shape[0]
    owner = np.empty(n, dtype=np.int64)
    for v in range(n):
        c = cid[v]
        owner[v] = cpart[root[c]] if c > 0 else -1
    return owner
