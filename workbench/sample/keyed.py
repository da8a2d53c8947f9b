"""Counter-based randomness and the workbench's neighbour-sampling kernel (vectorised numpy).

Every random choice of the sample stage is a pure function of *what* is being sampled, never of *who*
samples it or in which order, so the single, local and Dask runners (and any split of the seeds over
trainers) draw the same edges.

**The definition** (``neighbor`` sampler). Let ``mix`` be SplitMix64's finaliser (a bijection on 64-bit
words) and ``gamma = 0x9E3779B97F4A7C15``. For mini-batch step ``s`` of epoch ``e``, block ``l``
(``blocks[l]`` of DGL's layout, fan-out ``k = fanouts[l]``) and run seed ``seed``:

* stream key ``K = mix(mix(mix(mix(seed) ^ e) ^ s) ^ l)`` (:func:`stream_key`);
* vertex ``v``'s generator state ``S_v = mix(K ^ v)``; its ``i``-th draw (``i = 0, 1, ...``) is
  ``r_i = mix(S_v + (i + 1) * gamma)``, i.e. the SplitMix64 sequence seeded with ``S_v``; a uniform integer
  in ``[0, m]`` is ``(r_i >> 1) mod (m + 1)`` (:func:`vertex_draws`);
* ``v`` has in-degree ``d`` and in-neighbours ``N(v)`` in CSR order (slot ``j`` = the ``j``-th stored edge):

  - ``k = -1``, or ``k >= d`` without replacement: all ``d`` in-edges, in CSR order;
  - without replacement and ``d > k``: the ``k`` slots of Robert Floyd's algorithm (uniform over all
    ``k``-subsets): for ``i = 0 .. k-1``, ``m = d - k + i``, ``t = r_i mod (m + 1)``; take ``t`` unless already
    taken, else take ``m``; edges in the order taken;
  - with replacement: ``k`` slots ``r_i mod d`` (none when ``d = 0``), as DGL draws ``k`` even when ``d < k``.

The key leaves out the trainer's rank on purpose: a vertex that two trainers reach in the same step and
layer gets the same neighbours, so the union of the trainers' samples equals the sample of the union of
their seeds (the sampled edges do not depend on how seeds are split over trainers).

All array work is numpy (single-threaded, no per-element Python); tensors go in and come out.

Example:
    >>> hex(mix64_int(0x9E3779B97F4A7C15))   # SplitMix64 seeded with 0: its first output
    '0xe220a8397b1dcdaf'
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple, Optional

import numpy as np
import torch

__all__ = ["mix64", "mix64_int", "stream_key", "vertex_draws", "CSRRows", "SampledEdges", "segment_gather",
           "sample_rows_keyed"]

_MASK = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
_C1 = 0xBF58476D1CE4E5B9
_C2 = 0x94D049BB133111EB
_U = np.uint64


def mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on an array of uint64 words (wrapping arithmetic).

    Example:
        >>> hex(int(mix64(np.array([0x9E3779B97F4A7C15], dtype=np.uint64))[0]))   # SplitMix64(0)'s first output
        '0xe220a8397b1dcdaf'
    """
    z = np.asarray(z, dtype=np.uint64)
    z = (z ^ (z >> _U(30))) * _U(_C1)
    z = (z ^ (z >> _U(27))) * _U(_C2)
    return z ^ (z >> _U(31))


def mix64_int(x: int) -> int:
    """:func:`mix64` on one Python int (the unsigned 64-bit result).

    Example:
        >>> hex(mix64_int(0x9E3779B97F4A7C15))
        '0xe220a8397b1dcdaf'
    """
    z = x & _MASK
    z = ((z ^ (z >> 30)) * _C1) & _MASK
    z = ((z ^ (z >> 27)) * _C2) & _MASK
    return z ^ (z >> 31)


def stream_key(seed: int, epoch: int, step: int, layer: int) -> int:
    """The unsigned 64-bit key ``K`` of one (seed, epoch, step, layer); see the module docstring."""
    k = mix64_int(seed)
    for x in (epoch, step, layer):
        k = mix64_int(k ^ (x & _MASK))
    return k


def vertex_draws(key: int, gid: np.ndarray, num: int) -> np.ndarray:
    """``(len(gid), num)`` int64 draws ``r_i >> 1`` (non-negative) of each vertex's generator."""
    state = mix64(gid.astype(np.uint64) ^ _U(key))                          # (n,)
    steps = np.arange(1, num + 1, dtype=np.uint64) * _U(_GAMMA)              # (num,)
    return (mix64(state[:, None] + steps[None, :]) >> _U(1)).astype(np.int64)  # (n, num)


class SampledEdges(NamedTuple):
    """Sampled edges ``src_gid[i] -> dst_gid[i]`` in global ids, grouped by destination in frontier order."""

    src_gid: torch.Tensor
    dst_gid: torch.Tensor


@dataclasses.dataclass(eq=False)
class CSRRows:
    """Some destination rows of a graph's CSR: what one owner (or the whole graph) can sample from.

    Attributes:
        indptr: ``(num_rows + 1,)`` int64 row pointers (or int32, a partition folder's: the compiled kernel reads
            either).
        indices: ``(num_stored_edges,)`` global id of each in-neighbour, grouped by row (int64, or int32 where
            the ids fit: the compiled kernel reads either).
        row_of_gid: ``(num_nodes,)`` the row of each global id (only owned ids are ever looked up), or
            ``None``: row ``v`` is global id ``v`` (the whole graph), or, where ``row_gid`` is given, the row is
            found in ``row_gid`` by binary search (a part read from a folder: nothing on the rank is ``(N,)``).
        row_gid: ``(num_rows,)`` the global id of each row (ascending), or ``None`` (row ``v`` is global id ``v``).
        col_gid: ``None``: ``indices`` are global ids; else ``indices`` are local ids and ``col_gid[indices]``
            their global ids (a folder's part as stored: its int32 local ids memory-mapped, translated only for
            the sampled edges, so a rank never holds its part's edges in global ids).

    Example:
        >>> rows = CSRRows(torch.tensor([0, 2, 3]), torch.tensor([0, 2, 1], dtype=torch.int32),
        ...                row_gid=torch.tensor([4, 9]), col_gid=torch.tensor([4, 9, 7]))
        >>> rows.rows(torch.tensor([9, 4])).tolist(), rows.global_cols(torch.tensor([2, 1])).tolist()
        ([1, 0], [7, 9])
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    row_of_gid: Optional[torch.Tensor] = None
    row_gid: Optional[torch.Tensor] = None
    col_gid: Optional[torch.Tensor] = None

    @property
    def num_rows(self) -> int:
        return self.indptr.numel() - 1

    def rows(self, gid: torch.Tensor) -> torch.Tensor:
        if self.row_of_gid is not None:
            return self.row_of_gid[gid]
        return gid if self.row_gid is None else torch.searchsorted(self.row_gid, gid.contiguous())

    def global_cols(self, cols: torch.Tensor) -> torch.Tensor:
        """Global ids (int64) of stored column entries ``cols`` (``indices`` values)."""
        cols = cols.to(torch.int64)
        return cols if self.col_gid is None else self.col_gid[cols].to(torch.int64)


def segment_gather(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(starts[i], starts[i] + lengths[i])`` for every ``i`` (no Python loop).

    Example:
        >>> segment_gather(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist()
        [5, 6, 9, 10, 11]
    """
    starts, lengths = np.asarray(starts, dtype=np.int64), np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths                                # start of each segment in the output
    return np.arange(total, dtype=np.int64) + np.repeat(starts - offsets, lengths)


_COMPILED: list = []
_PARALLEL = [True]


def serial_kernel() -> None:
    """Sample with the serial kernel in this process from now on: a process forked from one whose OpenMP pool
    runs (ByteGNN's sampling workers, one core each) must not start its own."""
    _PARALLEL[0] = False


def _compiled_sampler():
    """The numba kernel with this definition (``workbench.sample._blocks_numba.sample_rows``, or
    ``sample_rows_parallel`` over the frontier's vertices: the same edges), or None where numba does not import
    (the numpy passes below then, the same edges)."""
    if not _COMPILED:
        try:
            from workbench.sample._blocks_numba import sample_rows, sample_rows_parallel
        except ImportError:
            sample_rows = sample_rows_parallel = None
        _COMPILED.extend([sample_rows, sample_rows_parallel])
    return _COMPILED[1] if _PARALLEL[0] else _COMPILED[0]


def sample_rows_keyed(csr: CSRRows, gid: torch.Tensor, fanout: int, replace: bool, key: int) -> SampledEdges:
    """Sample in-neighbours of the vertices ``gid`` exactly as the module docstring defines.

    Args:
        csr: the rows to sample from (every ``gid`` must be one of its rows).
        gid: ``(n,)`` global ids of the frontier.
        fanout: neighbours per vertex, ``-1`` for all.
        replace: draw with replacement.
        key: the stream key (:func:`stream_key`).

    Returns:
        The sampled edges, grouped by destination in the order of ``gid``.

    Example:
        >>> csr = CSRRows(torch.tensor([0, 3, 4]), torch.tensor([1, 2, 3, 0]))
        >>> e = sample_rows_keyed(csr, torch.tensor([0, 1]), 2, False, stream_key(0, 0, 0, 0))
        >>> e.dst_gid.tolist(), len(set(e.src_gid[:2].tolist()) & {1, 2, 3})
        ([0, 0, 1], 2)
    """
    g = np.asarray(gid.numpy() if isinstance(gid, torch.Tensor) else gid, dtype=np.int64)
    indptr, indices = csr.indptr.numpy(), csr.indices.numpy()
    rows = csr.rows(torch.from_numpy(g)).numpy()
    compiled = _compiled_sampler()
    # int32 row pointers and column indices (a partition folder's, memory-mapped) are read as they are: no int64
    # copy
    if compiled is not None and indptr.dtype in (np.int32, np.int64) and indices.dtype in (np.int32, np.int64):
        from workbench.train.kernels import call_compiled   # the rank's share of the cores, as the SpMM's

        src, dst = call_compiled(compiled, indptr, indices, np.ascontiguousarray(rows, dtype=np.int64),
                                 np.ascontiguousarray(g), int(fanout), bool(replace), np.uint64(key & _MASK))
        return SampledEdges(csr.global_cols(torch.from_numpy(src)), torch.from_numpy(dst))
    indptr = indptr.astype(np.int64, copy=False)   # draws are uint64: int32 offsets would mix into floats
    start = indptr[rows]
    deg = indptr[rows + 1] - start
    if fanout < 0 or (not replace and bool((deg <= fanout).all())):
        slots = segment_gather(start, deg)
        dst = np.repeat(g, deg)
    elif replace:
        has = deg > 0
        draws = vertex_draws(key, g[has], fanout)                          # (n_has, k)
        slots = (start[has, None] + draws % deg[has, None]).reshape(-1)    # (n_has * k,)
        dst = np.repeat(g[has], fanout)
    else:  # vertices with d <= k keep every edge, the others run Floyd's algorithm
        big = deg > fanout
        counts = np.where(big, fanout, deg)                                # (n,) edges per vertex
        offsets = np.cumsum(counts) - counts
        slots = np.empty(int(counts.sum()), dtype=np.int64)
        small = ~big
        slots[segment_gather(offsets[small], deg[small])] = segment_gather(start[small], deg[small])
        b_deg = deg[big]
        draws = np.ascontiguousarray(vertex_draws(key, g[big], fanout).T)  # (k, nb)
        chosen = np.empty((fanout, b_deg.size), dtype=np.int64)            # (k, nb): slot i of every vertex
        for i in range(fanout):  # loops over the fan-out's slots (k^2 / 2 steps), vectorised over all vertices
            m = b_deg - fanout + i                                         # (nb,)
            t = draws[i] % (m + 1)
            if i:
                taken = chosen[0] == t
                for j in range(1, i):
                    taken |= chosen[j] == t
                t = np.where(taken, m, t)
            chosen[i] = t
        out = offsets[big, None] + np.arange(fanout)                       # (nb, k) output positions
        slots[out.reshape(-1)] = (start[big, None] + chosen.T).reshape(-1)
        dst = np.repeat(g, counts)
    return SampledEdges(csr.global_cols(torch.from_numpy(indices[slots])), torch.from_numpy(dst))
