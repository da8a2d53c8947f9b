"""Counter-based randomness and the workbench's neighbour-sampling kernel (vectorised torch, int64).

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

Example:
    >>> import torch
    >>> hex(int(mix64(torch.tensor([0x9E3779B97F4A7C15 - 2**64]))[0]) % 2**64)  # SplitMix64(0)'s first output
    '0xe220a8397b1dcdaf'
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple, Optional

import torch

__all__ = ["mix64", "mix64_int", "stream_key", "vertex_draws", "CSRRows", "SampledEdges", "segment_gather",
           "sample_rows_keyed"]

_MASK = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
_C1 = 0xBF58476D1CE4E5B9
_C2 = 0x94D049BB133111EB


def _signed(x: int) -> int:
    x &= _MASK
    return x - (1 << 64) if x >= 1 << 63 else x


_GAMMA_S, _C1_S, _C2_S = _signed(_GAMMA), _signed(_C1), _signed(_C2)


def _lsr(z: torch.Tensor, s: int) -> torch.Tensor:
    """Logical right shift of int64 words (torch's ``>>`` is arithmetic)."""
    return (z >> s) & ((1 << (64 - s)) - 1)


def mix64(z: torch.Tensor) -> torch.Tensor:
    """SplitMix64's finaliser on int64 words (wrapping arithmetic, the bits of the unsigned version)."""
    z = (z ^ _lsr(z, 30)) * _C1_S
    z = (z ^ _lsr(z, 27)) * _C2_S
    return z ^ _lsr(z, 31)


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
    """The signed int64 key ``K`` of one (seed, epoch, step, layer); see the module docstring."""
    k = mix64_int(seed)
    for x in (epoch, step, layer):
        k = mix64_int(k ^ (x & _MASK))
    return _signed(k)


def vertex_draws(key: int, gid: torch.Tensor, num: int) -> torch.Tensor:
    """``(len(gid), num)`` non-negative int64 draws ``r_i >> 1`` of each vertex's generator."""
    state = mix64(gid.to(torch.int64) ^ key)                            # (n,)
    steps = torch.arange(1, num + 1, dtype=torch.int64) * _GAMMA_S      # (num,)
    return _lsr(mix64(state[:, None] + steps[None, :]), 1)              # (n, num)


class SampledEdges(NamedTuple):
    """Sampled edges ``src_gid[i] -> dst_gid[i]`` in global ids, grouped by destination in frontier order."""

    src_gid: torch.Tensor
    dst_gid: torch.Tensor


@dataclasses.dataclass(eq=False)
class CSRRows:
    """Some destination rows of a graph's CSR: what one owner (or the whole graph) can sample from.

    Attributes:
        indptr: ``(num_rows + 1,)`` row pointers.
        indices: ``(num_stored_edges,)`` global id of each in-neighbour, grouped by row.
        row_of_gid: ``(num_nodes,)`` the row of each global id (only owned ids are ever looked up), or
            ``None`` when row ``v`` is global id ``v`` (the whole graph).
        row_gid: ``(num_rows,)`` the global id of each row, or ``None`` (row ``v`` is global id ``v``).
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    row_of_gid: Optional[torch.Tensor] = None
    row_gid: Optional[torch.Tensor] = None

    @property
    def num_rows(self) -> int:
        return self.indptr.numel() - 1

    def rows(self, gid: torch.Tensor) -> torch.Tensor:
        return gid if self.row_of_gid is None else self.row_of_gid[gid]


def segment_gather(starts: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Concatenated ``arange(starts[i], starts[i] + lengths[i])`` for every ``i`` (no Python loop).

    Example:
        >>> segment_gather(torch.tensor([5, 0, 9]), torch.tensor([2, 0, 3])).tolist()
        [5, 6, 9, 10, 11]
    """
    total = int(lengths.sum())
    if total == 0:
        return torch.zeros(0, dtype=torch.int64)
    offsets = torch.cumsum(lengths, 0) - lengths                        # start of each segment in the output
    return torch.arange(total, dtype=torch.int64) + torch.repeat_interleave(starts - offsets, lengths, output_size=total)


def sample_rows_keyed(csr: CSRRows, gid: torch.Tensor, fanout: int, replace: bool, key: int) -> SampledEdges:
    """Sample in-neighbours of the vertices ``gid`` (unique) exactly as the module docstring defines.

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
    gid = gid.to(torch.int64)
    rows = csr.rows(gid)
    start = csr.indptr[rows]
    deg = csr.indptr[rows + 1] - start
    if fanout < 0 or (not replace and bool((deg <= fanout).all())):
        slots = segment_gather(start, deg)
        return SampledEdges(csr.indices[slots], torch.repeat_interleave(gid, deg))
    if replace:
        has = deg > 0
        draws = vertex_draws(key, gid[has], fanout)                      # (n_has, k)
        slots = (start[has, None] + draws % deg[has, None]).reshape(-1)  # (n_has * k,)
        return SampledEdges(csr.indices[slots], torch.repeat_interleave(gid[has], fanout))
    # without replacement: vertices with d <= k keep every edge, the others run Floyd's algorithm
    big = deg > fanout
    counts = torch.where(big, fanout, deg)                               # (n,) edges per vertex
    offsets = torch.cumsum(counts, 0) - counts
    total = int(counts.sum())
    slots = torch.empty(total, dtype=torch.int64)
    small = ~big
    s_off, s_len = offsets[small], deg[small]
    out_pos = segment_gather(s_off, s_len)
    slots[out_pos] = segment_gather(start[small], s_len)
    if bool(big.any()):
        b_gid, b_deg = gid[big], deg[big]
        draws = vertex_draws(key, b_gid, fanout)                         # (nb, k)
        chosen = torch.empty(b_gid.numel(), fanout, dtype=torch.int64)
        for i in range(fanout):  # loops over the fan-out's slots, vectorised over all vertices
            m = b_deg - fanout + i                                       # (nb,)
            t = draws[:, i] % (m + 1)
            if i:
                dup = (chosen[:, :i] == t[:, None]).any(1)
                t = torch.where(dup, m, t)
            chosen[:, i] = t
        out = offsets[big, None] + torch.arange(fanout)                  # (nb, k) output positions
        slots[out.reshape(-1)] = (start[big, None] + chosen).reshape(-1)
    return SampledEdges(csr.indices[slots], torch.repeat_interleave(gid, counts, output_size=total))
