"""G3's bins: per-layer vertex bins sized to a device-memory budget, and an exact binned executor
(Wan et al., SIGMOD 2023, §5).

Per rank (= part), once before training:

1. **Priority order** (:func:`priority_order`, Step 1): BFS over the part's own subgraph, one component
   after another, then a stable split: vertices with a remote neighbour (an in-neighbour owned elsewhere,
   or a row another part reads) first, interior ones after.
2. **Bin limit** (Step 2): a bin of layer ``k`` holds its destination rows (width ``F_out``) and its
   source rows (the destinations and their in-neighbours, width ``F_in``). Its footprint
   ``4 * (|src| * F_in + |dst| * F_out)`` bytes must stay within **half** the device-memory budget
   (the other half holds the next bin: double buffering). ``bin_limit=k`` caps a bin at ``k`` vertices.
3. **Index-based packing** (Step 3, :func:`pack_bins`): walk the order, adding a vertex and its
   in-neighbours to the open bin until the next vertex would break the limit.

The executor (:func:`binned_forward`) runs each layer bin by bin: gather the bin's source rows from the
owned rows and the P2P-received halo rows, aggregate, transform, and scatter into the next layer's rows.
Autograd replays the bins in reverse for the backward pass (the forward bins reused in reverse). Each
output row is computed once from the same inputs as whole-part training, so the run equals single-process
full-graph training to float rounding, for any bin size and order (tested to 1e-5).

Memory: with bins, a budget whose half cannot hold the largest vertex with its in-neighbours
(:func:`largest_vertex_bin`, independent of the partition) is refused before the partitioner runs, naming
the smallest budget that works (:func:`check_bin_budget`); whole-part training (``step.method=whole_part``) whose
working set ``max_k 4 * ((inner + halo) * F_in_k + inner * F_out_k)`` exceeds the budget is refused once
the parts are known, before any worker starts (:func:`check_memory`). ``memory_budget=auto`` sizes the
budget from the graph (:func:`auto_memory_budget`: half the largest part's working set, at least 4 x the
largest one-vertex bin) and the run summary says which.

On a CPU the "device" is the host: the budget bounds the rows a bin touches, and the copies, network
sends and their overlap are accounted by the discrete-event model of :mod:`workbench.sim.bins_pipeline`.

Example:
    >>> import torch
    >>> rows, cols = torch.tensor([0, 1, 1, 2, 3]), torch.tensor([1, 0, 2, 1, 4])   # local ids; 4 is halo
    >>> order = priority_order(4, rows, cols, boundary=torch.tensor([False, False, False, True]))
    >>> order.tolist()
    [3, 0, 1, 2]
    >>> s = build_schedule(4, 1, rows, cols, torch.ones(5), order, widths_in=[2], widths_out=[2], bin_limit=2)
    >>> [b.tolist() for b in s.layers[0].dst], [b.tolist() for b in s.layers[0].src]
    ([[3, 0], [1, 2]], [[0, 1, 3, 4], [0, 1, 2]])
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Optional

import numba
import numpy as np
import torch

from workbench._format import format_bytes
from workbench._validation import ParamError, param_error
from workbench.train.models import SpMM, sparse_aggregator

__all__ = ["priority_order", "pack_bins", "LayerBins", "BinSchedule", "build_schedule", "working_set_bytes",
           "bin_byte_cap", "check_memory", "binned_forward", "BYTES_PER_VALUE", "VertexBin", "largest_vertex_bin",
           "check_bin_budget", "MemoryBudget", "auto_memory_budget", "format_bytes"]

BYTES_PER_VALUE = 4


@numba.njit(cache=True)
def _bfs_order(indptr, indices, n):  # pragma: no cover - compiled
    order = np.empty(n, dtype=np.int64)
    seen = np.zeros(n, dtype=np.bool_)
    head = 0
    tail = 0
    for s in range(n):
        if seen[s]:
            continue
        seen[s] = True
        order[tail] = s
        tail += 1
        while head < tail:
            v = order[head]
            head += 1
            for j in range(indptr[v], indptr[v + 1]):
                u = indices[j]
                if not seen[u]:
                    seen[u] = True
                    order[tail] = u
                    tail += 1
    return order


def _csr(rows: np.ndarray, cols: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(rows, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return indptr, np.ascontiguousarray(cols[order], dtype=np.int64)


def priority_order(num_inner: int, rows: torch.Tensor, cols: torch.Tensor, boundary: torch.Tensor) -> np.ndarray:
    """Step 1: BFS order of the owned vertices (edges among them, either direction), boundary first.

    Args:
        num_inner: owned vertices (local ids ``0..num_inner-1``).
        rows, cols: the local aggregation edges ``cols -> rows`` (``cols >= num_inner`` are halo rows).
        boundary: ``(num_inner,)`` bool, True where the vertex has a remote neighbour.
    """
    r, c = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    local = (c < num_inner) & (r != c)
    u = np.concatenate([r[local], c[local]])
    v = np.concatenate([c[local], r[local]])
    indptr, indices = _csr(u, v, num_inner)
    order = _bfs_order(indptr, indices, num_inner)
    b = np.asarray(boundary, dtype=bool)[order]
    return np.concatenate([order[b], order[~b]])


@numba.njit(cache=True)
def _pack(order, indptr, indices, dst_cap, byte_cap, f_in, f_out, marks):  # pragma: no cover - compiled
    """Bin end offsets into ``order``; ``-1 - i`` when vertex ``order[i]`` alone breaks ``byte_cap``."""
    ends = np.empty(order.shape[0], dtype=np.int64)
    num_bins = 0
    stamp = 1
    ndst = 0
    nsrc = 0
    for i in range(order.shape[0]):
        v = order[i]
        new = 0
        if marks[v] != stamp:
            new += 1
        for j in range(indptr[v], indptr[v + 1]):
            u = indices[j]
            if marks[u] != stamp and u != v:
                new += 1
        over = ndst + 1 > dst_cap or 4 * ((nsrc + new) * f_in + (ndst + 1) * f_out) > byte_cap
        if over and ndst > 0:
            ends[num_bins] = i
            num_bins += 1
            stamp += 1
            ndst = 0
            nsrc = 0
            new = 1
            for j in range(indptr[v], indptr[v + 1]):
                if indices[j] != v:
                    new += 1
        if 4 * (new * f_in + f_out) > byte_cap:
            ends[0] = -1 - i
            return ends[:1]
        if marks[v] != stamp:
            marks[v] = stamp
        for j in range(indptr[v], indptr[v + 1]):
            marks[indices[j]] = stamp
        ndst += 1
        nsrc += new
    if ndst > 0:
        ends[num_bins] = order.shape[0]
        num_bins += 1
    return ends[:num_bins]


def pack_bins(order: np.ndarray, indptr: np.ndarray, indices: np.ndarray, num_rows: int, *, f_in: int, f_out: int,
              dst_cap: Optional[int] = None, byte_cap: Optional[float] = None) -> np.ndarray:
    """Step 3: end offsets (into ``order``) of the bins of one layer.

    ``indptr``/``indices``: the local CSR of in-neighbours (duplicates merged). A bin closes before the vertex
    that would give it more than ``dst_cap`` destinations or a footprint above ``byte_cap`` bytes.

    Raises:
        ValueError: one vertex with its in-neighbours alone exceeds ``byte_cap``.
    """
    big = np.iinfo(np.int64).max // 4
    ends = _pack(np.ascontiguousarray(order, dtype=np.int64), indptr, indices,
                 int(dst_cap) if dst_cap else big, float(byte_cap) if byte_cap else float(big),
                 int(f_in), int(f_out), np.zeros(num_rows, dtype=np.int64))
    if ends.size == 1 and ends[0] < 0:
        v = int(order[-1 - int(ends[0])])
        raise ValueError(f"vertex {v} with its in-neighbours needs more than {byte_cap:.0f} bytes")
    return ends


@dataclasses.dataclass(eq=False)
class LayerBins:
    """The bins of one layer of one rank (local ids: owned rows, then halo rows).

    Attributes:
        dst: per bin, the owned rows it computes (in priority order).
        src: per bin, the sorted rows it reads (its destinations and their in-neighbours).
        triplets: per bin, the COO ``(rows, cols, weights, shape)`` of ``A_bin`` (``(|dst|, |src|)``, bin ids).
        aggregators: per bin, ``(A_bin, A_bin^T)`` as CSR, built on the rank by :meth:`BinSchedule.build`
            (sparse CSR tensors are not shipped between processes).
        inverse: ``(num_inner,)`` position of each owned row in the concatenated bin outputs.
        footprint: ``(num_bins,)`` bytes a bin holds on the device (``4 * (|src| F_in + |dst| F_out)``).
        num_edges: ``(num_bins,)`` aggregation edges of each bin.
        send_rows: ``(num_bins,)`` output rows of the bin other parts read (summed over destination parts).
    """

    dst: list[torch.Tensor]
    src: list[torch.Tensor]
    triplets: list[tuple]
    inverse: torch.Tensor
    footprint: np.ndarray
    num_edges: np.ndarray
    send_rows: np.ndarray
    aggregators: Optional[list[tuple[torch.Tensor, torch.Tensor]]] = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "aggregators": None}

    @property
    def num_bins(self) -> int:
        return len(self.dst)


@dataclasses.dataclass(eq=False)
class BinSchedule:
    """One rank's bins for every layer, its priority order and the time it took to pack them."""

    order: np.ndarray
    num_boundary: int
    layers: list[LayerBins]
    byte_cap: Optional[float]
    dst_cap: Optional[int]
    pack_s: float

    def build(self, kernel: str = "auto") -> float:
        """Build every bin's CSR aggregators (once, on the rank) for the sparse kernel ``kernel``; returns the
        seconds it took."""
        start = time.perf_counter()
        for lb in self.layers:
            if lb.aggregators is None:
                lb.aggregators = [sparse_aggregator(*t, kernel=kernel) for t in lb.triplets]
        return time.perf_counter() - start

    def summary(self) -> dict:
        return {"bins_per_layer": [lb.num_bins for lb in self.layers], "num_boundary": self.num_boundary,
                "max_bin_bytes": [int(lb.footprint.max()) for lb in self.layers], "pack_s": self.pack_s}


def build_schedule(num_inner: int, num_halo: int, rows: torch.Tensor, cols: torch.Tensor, weights: torch.Tensor,
                   order: np.ndarray, *, widths_in: list[int], widths_out: list[int], bin_limit: Optional[int] = None,
                   byte_cap: Optional[float] = None, send_count: Optional[np.ndarray] = None) -> BinSchedule:
    """Pack every layer's bins (Steps 2-3) and build their aggregation matrices.

    Args:
        num_inner, num_halo: owned and halo rows of the rank.
        rows, cols, weights: the local aggregation COO (``Â`` restricted to the owned rows).
        order: the priority order (:func:`priority_order`).
        widths_in, widths_out: per layer input and output widths.
        bin_limit: most vertices per bin (``None`` or 0: no vertex cap).
        byte_cap: most bytes per bin (half the device-memory budget; ``None``: no cap).
        send_count: ``(num_inner,)`` parts that read each owned row (for the bins' send volume).
    """
    start = time.perf_counter()
    n_rows = num_inner + num_halo
    r = np.asarray(rows, dtype=np.int64)
    c = np.asarray(cols, dtype=np.int64)
    key = np.unique(r * n_rows + c)              # merged (row, col) pairs for the footprint
    indptr, indices = _csr(key // n_rows, key % n_rows, num_inner)
    send_count = np.zeros(num_inner, dtype=np.int64) if send_count is None else np.asarray(send_count)
    bin_of = np.empty(num_inner, dtype=np.int64)
    layers = []
    for f_in, f_out in zip(widths_in, widths_out):
        ends = pack_bins(order, indptr, indices, n_rows, f_in=f_in, f_out=f_out, dst_cap=bin_limit or None,
                         byte_cap=byte_cap)
        starts = np.concatenate([[0], ends[:-1]])
        bin_of[order] = np.repeat(np.arange(len(ends)), ends - starts)
        layers.append(_layer_bins(order, starts, ends, bin_of, r, c, weights, indptr, indices, send_count, f_in, f_out))
    return BinSchedule(order=order, num_boundary=0, layers=layers, byte_cap=byte_cap, dst_cap=bin_limit or None,
                       pack_s=time.perf_counter() - start)


def _layer_bins(order, starts, ends, bin_of, r, c, weights, indptr, indices, send_count, f_in, f_out) -> LayerBins:
    num_bins = len(ends)
    w = torch.as_tensor(weights, dtype=torch.float32)
    edge_bin = bin_of[r]
    by_bin = np.argsort(edge_bin, kind="stable")
    edge_starts = np.searchsorted(edge_bin[by_bin], np.arange(num_bins + 1))
    dst, src, aggs = [], [], []
    pos_dst = np.full(len(order), -1, dtype=np.int64)
    footprint = np.zeros(num_bins, dtype=np.int64)
    for b in range(num_bins):
        d = order[starts[b]:ends[b]]
        e = by_bin[edge_starts[b]:edge_starts[b + 1]]
        s = np.union1d(d, c[e])
        pos_dst[d] = np.arange(len(d))
        dst.append(torch.from_numpy(d.copy()))
        src.append(torch.from_numpy(s))
        aggs.append((torch.from_numpy(pos_dst[r[e]]), torch.from_numpy(np.searchsorted(s, c[e])), w[e], (len(d), len(s))))
        footprint[b] = BYTES_PER_VALUE * (len(s) * f_in + len(d) * f_out)
    inverse = torch.empty(len(order), dtype=torch.int64)
    inverse[torch.from_numpy(order.copy())] = torch.arange(len(order))
    num_edges = np.bincount(edge_bin, minlength=num_bins)
    send_rows = np.bincount(bin_of, weights=send_count, minlength=num_bins).astype(np.int64)
    return LayerBins(dst=dst, src=src, triplets=aggs, inverse=inverse, footprint=footprint,
                     num_edges=num_edges, send_rows=send_rows)


def working_set_bytes(num_inner: int, num_halo: int, widths_in: list[int], widths_out: list[int]) -> int:
    """Device bytes of whole-part training: the largest layer's input rows (owned + halo) and output rows.

    Example:
        >>> working_set_bytes(100, 20, [16, 8], [8, 4])
        10880
    """
    return max(BYTES_PER_VALUE * ((num_inner + num_halo) * fi + num_inner * fo) for fi, fo in zip(widths_in, widths_out))


def bin_byte_cap(memory_budget: Optional[int]) -> Optional[float]:
    """Step 2: half the device budget per bin (the other half double-buffers the next bin)."""
    return None if memory_budget is None else memory_budget / 2


def check_memory(sizes: list[tuple[int, int]], widths_in: list[int], widths_out: list[int], *,
                 memory_budget: Optional[int], bin_limit: Optional[int], owner: str = "RunConfig",
                 auto: Optional[str] = None) -> None:
    """Reject whole-part training whose working set exceeds ``memory_budget`` before any worker starts.

    Args:
        sizes: per part ``(num_inner, num_halo)``.
        auto: how ``memory_budget=auto`` sized ``memory_budget`` (the message then shows ``'auto'``).

    Raises:
        ParamError: naming ``memory_budget``, the part and the bytes it needs.

    Example:
        >>> check_memory([(100, 20)], [16], [8], memory_budget=4096, bin_limit=None)
        Traceback (most recent call last):
        ...
        workbench._validation.ParamError: The 'step.memory_budget' parameter of RunConfig must be at least the working set of part 0 (10880 bytes) for whole-part training (step.method=whole_part; set step.method=binned to pack bins into half the budget). Got 4096 instead.
    """
    if memory_budget is None or bin_limit is not None:
        return
    need = [working_set_bytes(i, h, widths_in, widths_out) for i, h in sizes]
    worst = int(np.argmax(need))
    if need[worst] > memory_budget:
        sized = (f"; auto gives {memory_budget} bytes, {auto}; step.memory_budget=none trains whole parts with "
                 "no budget") if auto else ""
        raise ParamError([param_error(
            "step.memory_budget", owner, f"at least the working set of part {worst} ({need[worst]} bytes) for "
            f"whole-part training (step.method=whole_part; set step.method=binned to pack bins into half the "
            f"budget{sized})",
            "auto" if auto else memory_budget)])


AUTO_VERTEX_FACTOR = 4
"""``memory_budget=auto`` is at least this many times the largest one-vertex bin (so a bin, half the budget,
holds at least two of the largest)."""
AUTO_PART_DIVISOR = 2
"""... and at least the largest part's whole-part working set divided by this (the emulated device holds
half a part, so bins are what runs, as in G3 where a part need not fit in GPU memory)."""


@dataclasses.dataclass(frozen=True)
class VertexBin:
    """The largest one-vertex bin of a graph: a vertex with its in-neighbours at one layer. Half the memory
    budget must hold it, whatever the partition (a vertex's in-neighbours are rows of its owner: owned or halo).

    Attributes:
        num_bytes: ``4 * ((1 + num_neighbours) * F_in + F_out)`` of that layer.
        vertex: its global id.
        num_neighbours: its distinct in-neighbours other than itself.
        layer: the layer where it is largest.
    """

    num_bytes: int
    vertex: int
    num_neighbours: int
    layer: int

    @property
    def min_budget(self) -> int:
        """The smallest ``memory_budget`` that packs bins: twice the bin (the other half double-buffers)."""
        return 2 * self.num_bytes

    def describe(self) -> str:
        return (f"vertex {self.vertex} with its {self.num_neighbours} in-neighbours at layer {self.layer} needs "
                f"{self.num_bytes} bytes")


def largest_vertex_bin(src: Any, dst: Any, num_nodes: int, widths_in: list[int], widths_out: list[int]) -> VertexBin:
    """The :class:`VertexBin` of the graph with edges ``src -> dst`` (any order; duplicates and self-loops
    count once, as in the bins' aggregation rows). Needs no partition, so budgets are checked before one runs.

    Example:
        >>> b = largest_vertex_bin([1, 2, 3, 0, 3], [0, 0, 0, 1, 0], 4, widths_in=[16, 8], widths_out=[8, 2])
        >>> b.vertex, b.num_neighbours, b.layer, b.num_bytes, b.min_budget
        (0, 3, 0, 288, 576)
    """
    n = int(num_nodes)
    s, d = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    keep = s != d
    key = np.unique(d[keep] * n + s[keep])
    deg = np.bincount(key // n, minlength=n) if n else np.zeros(1, dtype=np.int64)
    v = int(np.argmax(deg))
    need = [BYTES_PER_VALUE * ((1 + int(deg[v])) * fi + fo) for fi, fo in zip(widths_in, widths_out)]
    k = int(np.argmax(need))
    return VertexBin(num_bytes=int(need[k]), vertex=v, num_neighbours=int(deg[v]), layer=k)


def check_bin_budget(memory_budget: Any, largest: VertexBin, owner: str = "RunConfig") -> None:
    """Refuse a given ``memory_budget`` (bytes) whose half cannot hold the largest one-vertex bin, naming the
    smallest budget that works. Runs before partitioning (the bound does not depend on the parts).

    Example:
        >>> check_bin_budget(512, VertexBin(num_bytes=288, vertex=0, num_neighbours=3, layer=0))
        Traceback (most recent call last):
        ...
        workbench._validation.ParamError: The 'step.memory_budget' parameter of RunConfig must be 'auto' or at least 576 bytes (576 B) for bins: a bin holds at most half the budget and vertex 0 with its 3 in-neighbours at layer 0 needs 288 bytes. Got 512 instead.
    """
    if isinstance(memory_budget, int) and memory_budget < largest.min_budget:
        smallest = largest.min_budget
        raise ParamError([param_error(
            "step.memory_budget", owner, f"'auto' or at least {smallest} bytes ({format_bytes(smallest)}) for bins: a bin "
            f"holds at most half the budget and {largest.describe()}", memory_budget)])


@dataclasses.dataclass(frozen=True)
class MemoryBudget:
    """The memory budget a run uses: given, or sized from the graph (``memory_budget=auto``).

    Attributes:
        num_bytes: the budget.
        reason: how ``auto`` chose it (``None`` when given).
    """

    num_bytes: int
    reason: Optional[str] = None

    def note(self) -> str:
        """The line of the run summary's ``notes`` (empty when the budget was given)."""
        return f"memory_budget=auto -> {format_bytes(self.num_bytes)} ({self.reason})" if self.reason else ""


def auto_memory_budget(sizes: list[tuple[int, int]], widths_in: list[int], widths_out: list[int],
                       largest: VertexBin) -> MemoryBudget:
    """``memory_budget=auto``: an emulated device sized from the graph, not read from the hardware (on CPU
    ranks the device is the host, whose memory would hold every part whole and leave no bins to study):
    the larger of

    * half the largest part's whole-part working set (:data:`AUTO_PART_DIVISOR`): a part does not fit, so
      each layer runs in bins (a few per layer), as G3 trains parts larger than the GPU;
    * 4 x the largest one-vertex bin (:data:`AUTO_VERTEX_FACTOR`): every vertex fits, with room (a graph
      with a hub, e.g. Cora's vertex of degree 168 with 1,433 features).

    On a GPU, give the bytes the bins may use instead (``--set step.memory_budget=BYTES``).

    Example:
        >>> b = auto_memory_budget([(100, 20)], [16], [8], VertexBin(num_bytes=288, vertex=0, num_neighbours=3,
        ...                                                          layer=0))
        >>> b.num_bytes, b.note()
        (5440, "memory_budget=auto -> 5.3 KiB (half of part 0's whole-part working set, 10.6 KiB)")
    """
    need = [working_set_bytes(i, h, widths_in, widths_out) for i, h in sizes]
    worst = int(np.argmax(need))
    by_part = -(-need[worst] // AUTO_PART_DIVISOR)
    by_vertex = AUTO_VERTEX_FACTOR * largest.num_bytes
    if by_part >= by_vertex:
        return MemoryBudget(by_part, f"half of part {worst}'s whole-part working set, {format_bytes(need[worst])}")
    return MemoryBudget(by_vertex, f"{AUTO_VERTEX_FACTOR} x the largest vertex+neighbours working set: "
                                   f"{largest.describe()}")




def binned_forward(model: Any, x: torch.Tensor, exchange: Callable[[torch.Tensor, int], torch.Tensor],
                   schedule: BinSchedule, timings: Optional[list[list[float]]] = None,
                   pack_timings: Optional[list[list[float]]] = None) -> torch.Tensor:
    """Logits of the owned rows, computed bin by bin (see the module docstring).

    Args:
        model: a :class:`~workbench.train.models.GNNModel`.
        x: ``(num_inner, F_0)`` owned input rows.
        exchange: ``exchange(h, layer)`` returns ``(num_inner + num_halo, F)`` rows (owned, then received halo).
        schedule: the rank's bins.
        timings: when given, receives per layer the seconds each bin's computation took (forward), after its
            input block was gathered.
        pack_timings: when given, receives per layer the seconds gathering each bin's input block took (the
            packer's work of every epoch; the bins themselves are packed once, before training).
    """
    schedule.build()
    h = x
    last = model.num_layers - 1
    for i, lb in enumerate(schedule.layers):
        hx = exchange(h, i)
        outs, times, packs = [], [], []
        for dst, src, (a, a_t) in zip(lb.dst, lb.src, lb.aggregators):
            t0 = time.perf_counter()
            block = hx.index_select(0, src)                           # the bin's input block (|src|, F_in)
            t1 = time.perf_counter()
            agg = SpMM.apply(a, a_t, block)                           # (|dst|, F_in)
            z = model.layer(i, agg, h.index_select(0, dst))
            outs.append(torch.relu(z) if i < last else z)
            times.append(time.perf_counter() - t1)
            packs.append(t1 - t0)
        h = torch.cat(outs).index_select(0, lb.inverse)               # back to local-id order
        if timings is not None:
            timings.append(times)
        if pack_timings is not None:
            pack_timings.append(packs)
    return h
