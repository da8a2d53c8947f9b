"""Compiled per-chunk kernels of the streaming partitioners (numba, ``cache=True``).

Every kernel takes one chunk of edge lines ``(src, dst)`` (int64) and updates state held in numpy arrays
whose size is bounded by the number of vertices ``N`` and parts ``P``; none ever sees the whole edge set.

State names used throughout:

* ``rep``: ``(N, W)`` replica bitsets, bit ``p`` of row ``v`` set when part ``p`` holds ``v`` (``A(v)`` in the
  papers); words of :func:`rep_dtype` (uint8 up to 8 parts, ..., uint64 words beyond 64), ``W = rep_words(P)``.
* ``load``: ``(P,)`` int64 lines per part; ``last``: ``(N,)`` part of the last line touching ``v`` (int16 below
  2^15 parts), or an empty array when nothing reads it (the owner rule 'random').
* ``deg``: ``(N,)`` degree (both endpoints of every line counted; a self-loop counts twice): int32, widened to
  int64 by the degree pass if a degree would overflow it.
* ``cid``/``vol``: ``(N,)`` cluster id of each vertex (0 = unseen; int32 below 2^31 vertices, as every array of
  ids, ranks and richest neighbours) and ``(N + 1,)`` cluster volumes (sums of degrees: int32 while twice the
  lines fit, else int64).
* ``out``: the chunk's part per line (the caller stores it, on disk for a file).

This module holds the bit-set helpers every family shares, the degree pass, list scheduling, neighbour
completion and the edge-list text parser; the methods' own passes are in
:mod:`~workbench.partition.streaming.kernels_vertex_cut` (hash, DBH, HDRF, greedy) and
:mod:`~workbench.partition.streaming.kernels_clustering` (Hollocou / SPRING, 2PS-L).

The edge-list text parser (:func:`parse_edge_lines`) writes a block's ids into reused arrays, so reading a
chunk allocates nothing. Every kernel is compiled ``nogil``: the reader's thread parses the next chunk
(:func:`~workbench.partition.streaming.stream.read_ahead`) while a pass's kernel runs, neither waiting on the
GIL; the per-vertex reductions (:func:`count_replicas`, :func:`set_owner_bits`,
:func:`owned_counts`) run without ``(N,)`` temporaries.

Ties always go to the lowest part index unless a docstring says otherwise. Small helpers are
``inline="always"``: a call of a compiled function with array arguments otherwise pays reference counting per
call, which made the clustering pass ten times slower. numba's cache of a module is keyed on that file alone, so
a module that inlines these helpers keeps their old code in its cache until it changes too: a change to a helper
here goes with a change to every module importing it (the stale inlined ``_place`` of an earlier version wrote
past an empty ``last`` array).
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_ONE = np.uint64(1)
AHEAD = 16
"""Lines ahead that the passes prefetch the per-vertex rows of (:func:`prefetch`)."""


@intrinsic
def prefetch(typingctx, arr, idx):
    """Ask the CPU to bring row ``idx`` of ``arr`` into the cache (``llvm.prefetch``, for a read and write, high
    locality); never faults, so any index is safe. The passes prefetch the rows of the vertices ``AHEAD`` lines
    on: the per-vertex arrays outgrow the L2 cache and a line's random reads otherwise wait on memory one after
    the other (SPRING's clustering pass went from ~165 to ~100 ns a line on a loaded machine)."""
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        index = [args[1]] + [context.get_constant(types.intp, 0)] * (aryty.ndim - 1)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, index, wraparound=False, boundscheck=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        name = "llvm.prefetch.p0" if getattr(i8p, "is_opaque", False) else "llvm.prefetch.p0i8"   # LLVM's mangling
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), name)
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(1), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(arr, idx), codegen
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@numba.njit(cache=True, inline="always")
def mix64(x):
    """splitmix64's finaliser: a fast, well-mixed 64-bit hash of ``x`` (uint64)."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def rep_dtype(num_parts: int):
    """The word type of replica bitsets over ``num_parts`` parts: the narrowest of uint8/16/32/64 holding all
    ``P`` bits in one word, uint64 words beyond 64 parts (narrow rows keep the random accesses of a pass in
    cache: at P = 8 one byte a vertex instead of eight)."""
    for bits, dtype in ((8, np.uint8), (16, np.uint16), (32, np.uint32)):
        if num_parts <= bits:
            return dtype
    return np.uint64


def rep_words(num_parts: int) -> int:
    """Words of :func:`rep_dtype` per bitset row: ``ceil(P / bits)``."""
    return -(-num_parts // (8 * np.dtype(rep_dtype(num_parts)).itemsize))


@numba.njit(cache=True, inline="always")
def _shift(rep):
    """log2 of the bits per word of ``rep`` (a compile-time constant of each word type)."""
    s = rep.itemsize
    return 3 if s == 1 else 4 if s == 2 else 5 if s == 4 else 6


@numba.njit(cache=True, inline="always")
def _has(rep, v, p):
    sh = _shift(rep)
    return ((np.uint64(rep[v, p >> sh]) >> np.uint64(p & ((1 << sh) - 1))) & _ONE) != np.uint64(0)


@numba.njit(cache=True, inline="always")
def _set(rep, v, p):
    sh = _shift(rep)
    rep[v, p >> sh] |= _ONE << np.uint64(p & ((1 << sh) - 1))


@numba.njit(cache=True, inline="always")
def _place(u, v, p, rep, load, last):
    _set(rep, u, p)
    _set(rep, v, p)
    load[p] += 1
    if last.shape[0]:   # an empty ``last``: not tracked (the owner rule does not read it)
        last[u] = p
        last[v] = p


@numba.njit(cache=True, inline="always")
def _prefetch_rows(a, b, x, y):
    """Prefetch rows ``a`` and ``b`` of ``x`` and of ``y``."""
    prefetch(x, a)
    prefetch(x, b)
    prefetch(y, a)
    prefetch(y, b)


@numba.njit(cache=True, nogil=True)
def degree_chunk(src, dst, deg, limit):
    """Degree pass: ``deg[u] += 1; deg[v] += 1`` per line, stopping before a line that would take a degree
    past ``limit`` (the largest value of ``deg``'s type). Returns the lines counted (the caller widens ``deg``
    and counts the rest when fewer than the chunk's)."""
    n = src.shape[0]
    for i in range(n):
        if i + AHEAD < n:
            prefetch(deg, src[i + AHEAD])
            prefetch(deg, dst[i + AHEAD])
        u, v = src[i], dst[i]
        if deg[u] >= limit - 1 or deg[v] >= limit - 1:
            return i
        deg[u] += 1
        deg[v] += 1
    return src.shape[0]


@numba.njit(cache=True, nogil=True)
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

@numba.njit(cache=True, inline="always")
def _place_line(u, v, p, rep, load):
    _set(rep, u, p)
    _set(rep, v, p)
    load[p] += 1


@numba.njit(cache=True, nogil=True)
def complete_chunk(src, dst, parts, owner, both_sides, rep, load, out):
    """Neighbour completion of one chunk of a vertex-cut result: a line goes to its assigned part ``parts[i]``,
    to ``owner[v]`` and, when ``both_sides`` (undirected lines), to ``owner[u]``: every owned vertex keeps its
    full 1-hop neighbourhood. ``rep`` gains the replicas, ``load`` the lines per part (each part once per
    line), and ``out[i]`` the owner-side part ``owner[v]``."""
    n = src.shape[0]
    if rep.shape[1] == 1:   # one word a row: the (up to) three parts as one mask, no branch
        for i in range(n):
            if i + AHEAD < n:
                _prefetch_rows(src[i + AHEAD], dst[i + AHEAD], owner, rep)
            u, v = src[i], dst[i]
            ov = owner[v]
            ou = owner[u] if both_sides else ov
            a = parts[i]
            m = (_ONE << np.uint64(a)) | (_ONE << np.uint64(ov)) | (_ONE << np.uint64(ou))
            rep[u, 0] |= m
            rep[v, 0] |= m
            load[a] += 1
            load[ov] += ov != a
            load[ou] += (ou != a) & (ou != ov)
            out[i] = ov
        return
    for i in range(src.shape[0]):
        u, v = src[i], dst[i]
        ov = owner[v]
        ou = owner[u] if both_sides else ov
        a = parts[i]
        _place_line(u, v, a, rep, load)
        if ov != a:
            _place_line(u, v, ov, rep, load)
        if ou != a and ou != ov:
            _place_line(u, v, ou, rep, load)
        out[i] = ov


@numba.njit(cache=True, nogil=True)
def complete_owner_chunk(src, dst, owner, both_sides, one_side_rule, seed, rep, load, rep_l, load_l, out):
    """Neighbour completion of one chunk of an owner result: a line goes to ``owner[v]`` and, when
    ``both_sides``, ``owner[u]`` (``rep``, ``load``), and its owner-side part ``out[i] = owner[v]`` is kept as a
    vertex-cut line (``rep_l``, ``load_l``: what ``edge_assignment.npy`` holds, so the RF compares with the
    vertex-cut methods'). ``one_side_rule`` > 0 is the K = 0 ablation: a cross line goes to one side only (1:
    the smaller id's owner, as the reference code; 2: a seeded random side, as the paper)."""
    s = mix64(np.uint64(seed) + np.uint64(0x5851F42D4C957F2D))
    one_word = rep.shape[1] == 1
    n = src.shape[0]
    for i in range(n):
        if i + AHEAD < n:
            _prefetch_rows(src[i + AHEAD], dst[i + AHEAD], owner, rep)
            _prefetch_rows(src[i + AHEAD], dst[i + AHEAD], rep_l, rep_l)
        u, v = src[i], dst[i]
        ou, ov = owner[u], owner[v]
        o = ov
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
        if one_word:   # both parts as one mask, no branch
            m = (_ONE << np.uint64(ov)) | (_ONE << np.uint64(ou))
            rep[u, 0] |= m
            rep[v, 0] |= m
            load[ov] += 1
            load[ou] += ou != ov
        else:
            _place_line(u, v, ov, rep, load)
            if ou != ov:
                _place_line(u, v, ou, rep, load)
        _place_line(u, v, o, rep_l, load_l)
        out[i] = o


@numba.njit(cache=True, inline="always")
def _popcount_row(rep, v):
    c = 0
    for w in range(rep.shape[1]):
        x = np.uint64(rep[v, w])
        while x != np.uint64(0):
            x &= x - _ONE
            c += 1
    return c


@numba.njit(cache=True, nogil=True)
def count_replicas(rep, at_least):
    """``sum_v max(popcount(rep[v]), at_least)``: replicas over all vertices (a vertex with none counts
    ``at_least``), with no ``(N,)`` temporary."""
    total = 0
    for v in range(rep.shape[0]):
        total += max(_popcount_row(rep, v), at_least)
    return total


@numba.njit(cache=True, nogil=True)
def set_owner_bits(rep, owner):
    """Set bit ``owner[v]`` of every row ``v`` (each vertex is held by its owner)."""
    for v in range(owner.shape[0]):
        _set(rep, v, owner[v])


@numba.njit(cache=True, nogil=True)
def owned_counts(owner, num_parts):
    """Vertices per part over the entries with ``owner >= 0``."""
    out = np.zeros(num_parts, np.int64)
    for v in range(owner.shape[0]):
        if owner[v] >= 0:
            out[owner[v]] += 1
    return out


@numba.njit(cache=True, nogil=True)
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


@numba.njit(cache=True, nogil=True)
def part_counts(rep, num_parts):
    """Vertices per part (set bits per column) of a bitset matrix."""
    out = np.zeros(num_parts, np.int64)
    for v in range(rep.shape[0]):
        for p in range(num_parts):
            if _has(rep, v, p):
                out[p] += 1
    return out


@numba.njit(cache=True, nogil=True)
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


@numba.njit(cache=True, nogil=True)
def completed_counts(rep, owner, num_parts):
    """:func:`part_counts` and :func:`owner_comm_rows` in one branch-free pass over the rows: ``(P,)`` vertices
    per part and ``(P, P)`` halo rows owner -> holder (every vertex must hold its owner's bit, as after
    completion). Their sum of part counts is the completed replicas."""
    counts = np.zeros(num_parts, np.int64)
    comm = np.zeros((num_parts, num_parts), np.int64)
    sh = _shift(rep)
    mask = (1 << sh) - 1
    for v in range(rep.shape[0]):
        o = owner[v]
        for p in range(num_parts):
            b = np.int64((np.uint64(rep[v, p >> sh]) >> np.uint64(p & mask)) & _ONE)
            counts[p] += b
            comm[o, p] += b
    for p in range(num_parts):
        comm[p, p] = 0
    return counts, comm


# ----------------------------------------------------------------------------------------------- reading

@numba.njit(cache=True, nogil=True)
def split_pairs(pairs, src, dst):
    """Copy the ``(n, 2)`` id pairs ``pairs`` into ``src[:n]``/``dst[:n]`` (int64) in one read; returns the
    smallest and largest id, ``(0, -1)`` for no pair (the chunk's range, without reducing it again)."""
    lo, hi = np.int64(0), np.int64(-1)
    if pairs.shape[0]:
        lo = np.int64(pairs[0, 0])
    for i in range(pairs.shape[0]):
        a, b = np.int64(pairs[i, 0]), np.int64(pairs[i, 1])
        src[i] = a
        dst[i] = b
        lo = min(lo, min(a, b))
        hi = max(hi, max(a, b))
    return lo, hi


@numba.njit(cache=True, nogil=True)
def id_range(src, dst):
    """The smallest and largest id of a chunk in one read, ``(0, -1)`` for an empty one."""
    lo, hi = np.int64(0), np.int64(-1)
    if src.shape[0]:
        lo = np.int64(src[0])
    for i in range(src.shape[0]):
        a, b = np.int64(src[i]), np.int64(dst[i])
        lo = min(lo, min(a, b))
        hi = max(hi, max(a, b))
    return lo, hi


@numba.njit(cache=True, nogil=True)
def pack_pairs(src, dst, pairs):
    """Interleave a chunk into ``pairs[:n]`` (``(n, 2)``, e.g. int32 for a spill file) in one read; returns the
    smallest and largest id, ``(0, -1)`` for an empty chunk (the caller checks they fit ``pairs``' type)."""
    lo, hi = np.int64(0), np.int64(-1)
    if src.shape[0]:
        lo = np.int64(src[0])
    for i in range(src.shape[0]):
        a, b = np.int64(src[i]), np.int64(dst[i])
        pairs[i, 0] = a
        pairs[i, 1] = b
        lo = min(lo, min(a, b))
        hi = max(hi, max(a, b))
    return lo, hi


# ----------------------------------------------------------------------------------------------- edge-list text

_INT64_MAX = np.int64(2 ** 63 - 1)


@numba.njit(cache=True, nogil=True)
def last_newline(buf, n):
    """Index of the last ``b"\\n"`` in ``buf[:n]`` (uint8), -1 if there is none."""
    for i in range(n - 1, -1, -1):
        if buf[i] == 10:
            return i
    return -1


@numba.njit(cache=True, nogil=True)
def count_newlines(buf, n):
    """Number of ``b"\\n"`` in ``buf[:n]`` (uint8)."""
    c = 0
    for i in range(n):
        if buf[i] == 10:
            c += 1
    return c


@numba.njit(cache=True, nogil=True)
def parse_edge_lines(buf, n, src, dst):
    """Parse the plain form of an edge-list block ``buf[:n]`` (uint8) into ``src``/``dst`` (int64).

    The plain form: lines of two unsigned decimal ids between blanks (spaces, tabs, commas, ``\\r`` as in CRLF
    files), ``#``/``%`` comments to the end of a line, blank lines; the last line may lack its newline (the
    same reading as :func:`workbench.data.read_edge_list`'s pandas parser).

    Returns ``(num_edges, status)``: status 0 when the whole block is in the plain form; 1 at the first thing
    outside it (a sign, a third field, a letter, an id past int64, ...: the caller re-parses the block with the
    full parser, which reads or names the problem); 2 when ``src`` has no room for another edge (the caller
    grows it and parses again). A comment after leading blanks is a comment line, as in the full parser.
    """
    k = 0
    fields = 0
    in_token = False
    comment = False
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
        elif c == 35 or c == 37:
            comment = True
        elif c == 32 or c == 9 or c == 44 or c == 13:
            pass
        else:
            return k, 1
    return k, 0
