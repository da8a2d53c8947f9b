"""Compiled per-chunk kernels of the streaming partitioners (numba, ``cache=True``).

Every kernel takes one chunk of edge lines ``(src, dst)`` (int64) and updates state held in numpy arrays
whose size is bounded by the number of vertices ``N`` and parts ``P``; none ever sees the whole edge set.

State names used throughout:

* ``rep``: ``(N, ceil(P / 64))`` uint64 replica bitsets, bit ``p`` of row ``v`` set when part ``p`` holds ``v``
  (``A(v)`` in the papers).
* ``load``: ``(P,)`` int64 lines per part; ``last``: ``(N,)`` int64 part of the last line touching ``v``.
* ``deg``: ``(N,)`` int64 degree (both endpoints of every line counted; a self-loop counts twice).
* ``cid``/``vol``: ``(N,)`` cluster id of each vertex (0 = unseen) and ``(N + 1,)`` cluster volumes.
* ``out``: the chunk's part per line (the caller stores it, on disk for a file).

The edge-list text parser (:func:`parse_edge_lines`) writes a block's ids into reused arrays, so reading a
chunk allocates nothing; the per-vertex reductions (:func:`count_replicas`, :func:`set_owner_bits`,
:func:`owned_counts`) run without ``(N,)`` temporaries.

Ties always go to the lowest part index unless a docstring says otherwise. Small helpers are
``inline="always"``: a call of a compiled function with array arguments otherwise pays reference counting per
call, which made the clustering pass ten times slower.
"""

from __future__ import annotations

import heapq

import numba
import numpy as np

_ONE = np.uint64(1)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@numba.njit(cache=True, inline="always")
def mix64(x):
    """splitmix64's finaliser: a fast, well-mixed 64-bit hash of ``x`` (uint64)."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


@numba.njit(cache=True, inline="always")
def _has(rep, v, p):
    return ((rep[v, p >> 6] >> np.uint64(p & 63)) & _ONE) != np.uint64(0)


@numba.njit(cache=True, inline="always")
def _set(rep, v, p):
    rep[v, p >> 6] |= _ONE << np.uint64(p & 63)


@numba.njit(cache=True, inline="always")
def _place(u, v, p, rep, load, last):
    _set(rep, u, p)
    _set(rep, v, p)
    load[p] += 1
    last[u] = p
    last[v] = p


@numba.njit(cache=True)
def degree_chunk(src, dst, deg):
    """Degree pass: ``deg[u] += 1; deg[v] += 1`` per line."""
    for i in range(src.shape[0]):
        deg[src[i]] += 1
        deg[dst[i]] += 1


# ----------------------------------------------------------------------------------------------- vertex-cut

@numba.njit(cache=True)
def hash_chunk(src, dst, num_parts, seed, rep, load, last, out):
    """Random hashing: part = mix64(seed, min(u, v), max(u, v)) mod P (orientation-free)."""
    s = mix64(np.uint64(seed) + np.uint64(0x9E3779B97F4A7C15))
    for i in range(src.shape[0]):
        u, v = src[i], dst[i]
        lo, hi = min(u, v), max(u, v)
        p = np.int64(mix64(mix64(np.uint64(lo) ^ s) + np.uint64(hi)) % np.uint64(num_parts))
        _place(u, v, p, rep, load, last)
        out[i] = p


@numba.njit(cache=True)
def dbh_chunk(src, dst, num_parts, seed, deg, partial, rep, load, last, out):
    """DBH: hash the lower-degree endpoint (ties: ``dst``, as the reference code). ``partial``: degrees seen
    so far, counted before the decision; otherwise ``deg`` holds full degrees from a degree pass."""
    s = mix64(np.uint64(seed) + np.uint64(0x9E3779B97F4A7C15))
    for i in range(src.shape[0]):
        u, v = src[i], dst[i]
        if partial:
            deg[u] += 1
            deg[v] += 1
        x = u if deg[u] < deg[v] else v
        p = np.int64(mix64(np.uint64(x) ^ s) % np.uint64(num_parts))
        _place(u, v, p, rep, load, last)
        out[i] = p


@numba.njit(cache=True, inline="always")
def _min_max(load):
    lo, hi = load[0], load[0]
    for p in range(1, load.shape[0]):
        lo = min(lo, load[p])
        hi = max(hi, load[p])
    return lo, hi


@numba.njit(cache=True)
def hdrf_chunk(src, dst, num_parts, lam, eps, greedy, pdeg, rep, load, last, out):
    """HDRF (``greedy=False``) or the greedy score form (``greedy=True``): argmax over parts of
    ``C_REP + lam * (maxsize - load[p]) / (eps + maxsize - minsize)``, first index on ties.

    HDRF's ``C_REP = g(u, p) + g(v, p)`` with ``g(x, p) = 1 + (1 - theta(x))`` when ``p`` holds ``x``,
    ``theta(u) = pdeg[u] / (pdeg[u] + pdeg[v])`` over partial degrees incremented before scoring.
    Greedy's ``C_REP = [p holds u] + [p holds v]``.
    """
    for i in range(src.shape[0]):
        u, v = src[i], dst[i]
        pdeg[u] += 1
        pdeg[v] += 1
        du, dv = float(pdeg[u]), float(pdeg[v])
        if greedy:
            gu, gv = 1.0, 1.0
        else:
            gu = 1.0 + (1.0 - du / (du + dv))
            gv = 1.0 + (1.0 - dv / (du + dv))
        lo, hi = _min_max(load)
        denom = eps + float(hi - lo)
        best, best_s = 0, -1.0
        for p in range(num_parts):
            s = lam * float(hi - load[p]) / denom
            if _has(rep, u, p):
                s += gu
            if _has(rep, v, p):
                s += gv
            if s > best_s:
                best, best_s = p, s
        _place(u, v, best, rep, load, last)
        out[i] = best


@numba.njit(cache=True, inline="always")
def _least_loaded_in(rep, x, y, load, num_parts, both):
    """Least-loaded part holding ``x`` (and ``y`` when ``both``); -1 if none."""
    best = -1
    for p in range(num_parts):
        if _has(rep, x, p) and (not both or _has(rep, y, p)):
            if best < 0 or load[p] < load[best]:
                best = p
    return best


@numba.njit(cache=True)
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


# ----------------------------------------------------------------------------------------------- clustering

@numba.njit(cache=True)
def hollocou_chunk(src, dst, deg, cid, vol, rn, first, counters, tau, partial):
    """SPRING's Step A (Algorithm 1, lines 2-21) = Hollocou et al.'s volume-capped streaming clustering.

    ``counters = [next cluster id k, next first-seen rank]``; ``rn`` the richest neighbour (-1: none, degree 0),
    updated for both endpoints of every line, strict ``<`` (first seen wins ties). ``partial=True`` is
    Hollocou's original online form: degrees and volumes grow by one per endpoint before the move test.
    (The counters live in locals inside the loop: kept in the array, they made the pass several times slower.)
    """
    k, f = counters[0], counters[1]
    for i in range(src.shape[0]):
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


@numba.njit(cache=True)
def twops_cluster_chunk(src, dst, deg, cid, vol, first, counters, cap):
    """2PS-L phase 1 (Mayer et al.): streaming clustering with full degrees; with
    ``real(x) = vol(c_x) - d(x)``, ``u`` joins ``c_v`` if ``real(u) <= real(v)`` and ``vol(c_v) + d(u) <= cap``,
    else ``v`` joins ``c_u`` if ``real(v) < real(u)`` and ``vol(c_u) + d(v) <= cap``."""
    k, f = counters[0], counters[1]
    for i in range(src.shape[0]):
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


@numba.njit(cache=True)
def twops_pre_chunk(src, dst, vpart, cap_load, rep, load, last, out):
    """2PS-L phase 2a: a line whose endpoints' clusters map to one part goes there unless it is full
    (``load >= cap_load``); the others get -1 for phase 2b."""
    for i in range(src.shape[0]):
        u, v = src[i], dst[i]
        p = vpart[u]
        if p == vpart[v] and load[p] < cap_load:
            _place(u, v, p, rep, load, last)
            out[i] = p
        else:
            out[i] = -1


@numba.njit(cache=True)
def twops_rest_chunk(src, dst, num_parts, deg, cid, vol, vpart, cap_load, port, rep, load, last, out):
    """2PS-L phase 2b over the lines with ``out == -1``: score only ``part(c_u)`` and ``part(c_v)``
    (``g_u + g_v + gc_u + gc_v``, ties to the later candidate); a full candidate: (higher-degree endpoint) mod
    P, then the least-loaded part. ``port=True``: CATGNN's port, which skips the scoring for lines whose
    clusters map to different parts, takes (higher-degree endpoint) mod P and falls back to part 0."""
    for i in range(src.shape[0]):
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


# ----------------------------------------------------------------------------------------------- SPRING B, C

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


@numba.njit(cache=True)
def spring_merge(deg, cid, rn, num_clusters, cap, rerank):
    """Algorithm 1 Step B (lines 22-29): representatives, then merge clusters smallest first into the cluster
    of the representative's richest neighbour while ``|C_i| + |C_t| <= cap``.

    ``rerank=True`` (the paper's prose): a grown target moves to its new place in the size order (a lazy
    heap); every cluster is scanned once. ``rerank=False`` (the reference code): one static order by
    (size, id), visited by position, the largest cluster never a source.

    Returns:
        ``(root, size)``: ``root[c]`` the cluster that cluster id ``c`` ended in, ``size`` per cluster id.
    """
    n = cid.shape[0]
    size = np.zeros(num_clusters, np.int64)
    rep = np.full(num_clusters, -1, np.int64)
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
    parent = np.arange(num_clusters)
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
    root = np.empty(num_clusters, np.int64)
    for c in range(num_clusters):
        root[c] = _find(parent, c)
    return root, size


@numba.njit(cache=True)
def list_schedule(order, weight, num_parts, part_load):
    """Graham list scheduling: each item of ``order`` to the currently least-loaded part (lowest index on
    ties), loads grown by ``weight``. ``part_load`` is updated in place. Returns the part of each item."""
    out = np.empty(order.shape[0], np.int64)
    for k in range(order.shape[0]):
        best = 0
        for p in range(1, num_parts):
            if part_load[p] < part_load[best]:
                best = p
        out[k] = best
        part_load[best] += weight[order[k]]
    return out


# ----------------------------------------------------------------------------------------------- completion

@numba.njit(cache=True)
def complete_chunk(src, dst, parts, owner, both_sides, one_side_rule, seed, rep, load, out):
    """Neighbour completion of one chunk. A line goes to its assigned part (``parts[i] >= 0``; vertex-cut
    results) and to ``owner[v]`` and, when ``both_sides`` (undirected lines), ``owner[u]``: every owned
    vertex keeps its full 1-hop neighbourhood. ``one_side_rule`` >= 0 is the K = 0 ablation for owner
    results: a cross line goes to one side only (1: the smaller id's owner, as the reference code;
    2: a seeded random side, as the paper). ``rep`` gains the replicas, ``load`` the lines per part, and
    ``out[i]`` the owner-side part (``owner[v]``)."""
    s = mix64(np.uint64(seed) + np.uint64(0x5851F42D4C957F2D))
    for i in range(src.shape[0]):
        u, v = src[i], dst[i]
        ou, ov = owner[u], owner[v]
        a = parts[i]
        if one_side_rule == 1 and ou != ov:
            ov = owner[min(u, v)]
            ou = ov
        elif one_side_rule == 2 and ou != ov:
            if (mix64(np.uint64(i) ^ mix64(np.uint64(u) ^ s) + np.uint64(v)) & _ONE) == _ONE:
                ov = ou
            else:
                ou = ov
        elif not both_sides:
            ou = ov
        if a >= 0:
            _set(rep, u, a)
            _set(rep, v, a)
            load[a] += 1
        if ov != a:
            _set(rep, u, ov)
            _set(rep, v, ov)
            load[ov] += 1
        if ou != a and ou != ov:
            _set(rep, u, ou)
            _set(rep, v, ou)
            load[ou] += 1
        out[i] = owner[v]


@numba.njit(cache=True)
def line_replicas_chunk(src, dst, parts, rep, load):
    """Replicas of a given line assignment: both endpoints of line ``i`` are held by part ``parts[i]``, which
    gains a line in ``load``. The vertex-cut view of an owner result's owner-side lines (``owner[v]``, what
    ``edge_assignment.npy`` holds), so its RF compares with the vertex-cut methods'."""
    for i in range(src.shape[0]):
        p = parts[i]
        _set(rep, src[i], p)
        _set(rep, dst[i], p)
        load[p] += 1


@numba.njit(cache=True, inline="always")
def _popcount_row(rep, v):
    c = 0
    for w in range(rep.shape[1]):
        x = rep[v, w]
        while x != np.uint64(0):
            x &= x - _ONE
            c += 1
    return c


@numba.njit(cache=True)
def count_replicas(rep, at_least):
    """``sum_v max(popcount(rep[v]), at_least)``: replicas over all vertices (a vertex with none counts
    ``at_least``), with no ``(N,)`` temporary."""
    total = 0
    for v in range(rep.shape[0]):
        total += max(_popcount_row(rep, v), at_least)
    return total


@numba.njit(cache=True)
def set_owner_bits(rep, owner):
    """Set bit ``owner[v]`` of every row ``v`` (each vertex is held by its owner)."""
    for v in range(owner.shape[0]):
        _set(rep, v, owner[v])


@numba.njit(cache=True)
def owned_counts(owner, num_parts):
    """Vertices per part over the entries with ``owner >= 0``."""
    out = np.zeros(num_parts, np.int64)
    for v in range(owner.shape[0]):
        if owner[v] >= 0:
            out[owner[v]] += 1
    return out


@numba.njit(cache=True)
def pick_owner(rep, num_parts, seed, owner):
    """Owner of each replicated vertex: a seeded pseudo-random replica (the paper's random choice), i.e.
    the ``k``-th set bit with ``k = mix64(seed, v) mod popcount``; -1 for a vertex with no replica."""
    s = mix64(np.uint64(seed) + np.uint64(0x2545F4914F6CDD1D))
    for v in range(rep.shape[0]):
        cnt = _popcount_row(rep, v)
        if cnt == 0:
            owner[v] = -1
            continue
        k = np.int64(mix64(np.uint64(v) ^ s) % np.uint64(cnt))
        for p in range(num_parts):
            if _has(rep, v, p):
                if k == 0:
                    owner[v] = p
                    break
                k -= 1


@numba.njit(cache=True)
def part_counts(rep, num_parts):
    """Vertices per part (set bits per column) of a bitset matrix."""
    out = np.zeros(num_parts, np.int64)
    for v in range(rep.shape[0]):
        for p in range(num_parts):
            if _has(rep, v, p):
                out[p] += 1
    return out


@numba.njit(cache=True)
def owner_comm_rows(rep, owner, num_parts):
    """``(P, P)`` rows part ``p`` sends part ``q`` per layer after completion: every replica of ``v`` on a part
    ``q != owner[v]`` is a halo row that ``owner[v]`` sends to ``q``."""
    out = np.zeros((num_parts, num_parts), np.int64)
    for v in range(rep.shape[0]):
        o = owner[v]
        for q in range(num_parts):
            if q != o and _has(rep, v, q):
                out[o, q] += 1
    return out


# ----------------------------------------------------------------------------------------------- edge-list text

_INT64_MAX = np.int64(2 ** 63 - 1)


@numba.njit(cache=True)
def last_newline(buf, n):
    """Index of the last ``b"\\n"`` in ``buf[:n]`` (uint8), -1 if there is none."""
    for i in range(n - 1, -1, -1):
        if buf[i] == 10:
            return i
    return -1


@numba.njit(cache=True)
def count_newlines(buf, n):
    """Number of ``b"\\n"`` in ``buf[:n]`` (uint8)."""
    c = 0
    for i in range(n):
        if buf[i] == 10:
            c += 1
    return c


@numba.njit(cache=True)
def parse_edge_lines(buf, n, src, dst):
    """Parse the plain form of an edge-list block ``buf[:n]`` (uint8) into ``src``/``dst`` (int64).

    The plain form: lines of two unsigned decimal ids between blanks (spaces, tabs, commas, ``\\r`` as in CRLF
    files), ``#``/``%`` comments to the end of a line, blank lines; the last line may lack its newline (the
    same reading as :func:`workbench.data.read_edge_list`'s pandas parser).

    Returns ``(num_edges, status)``: status 0 when the whole block is in the plain form; 1 at the first thing
    outside it (a sign, a third field, a letter, an id past int64, ...: the caller re-parses the block with the
    full parser, which reads or names the problem); 2 when ``src`` has no room for another edge (the caller
    grows it and parses again). A comment after leading blanks is outside the plain form too: pandas reads
    that line as a row of missing values, and the full parser decides what it means.
    """
    k = 0
    fields = 0
    in_token = False
    comment = False
    blank = False  # blanks seen on a line without fields yet
    val = np.int64(0)
    first = np.int64(0)
    for i in range(n + 1):
        c = np.int64(buf[i]) if i < n else np.int64(10)
        if comment:
            if c != 10:
                continue
            comment = False
        if 48 <= c <= 57:
            if not in_token:
                in_token = True
                fields += 1
                if fields > 2:
                    return k, 1
                val = np.int64(0)
            d = c - 48
            if val > (_INT64_MAX - d) // 10:
                return k, 1
            val = val * 10 + d
            continue
        if in_token:
            in_token = False
            if fields == 1:
                first = val
        if c == 10:
            if fields == 2:
                if k >= src.shape[0]:
                    return k, 2
                src[k] = first
                dst[k] = val
                k += 1
            elif fields != 0:
                return k, 1
            fields = 0
            blank = False
        elif c == 35 or c == 37:
            if blank and fields == 0:
                return k, 1
            comment = True
        elif c == 32 or c == 9 or c == 44 or c == 13:
            blank = True
        else:
            return k, 1
    return k, 0
