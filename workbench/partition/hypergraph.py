"""Hypergraph partitioning of the column-net model (HP) and the stochastic hypergraph (SHP), Demirci et al.

``hypergraph`` partitions the column-net hypergraph of ``Â`` (:func:`workbench.partition.volume.column_nets`:
one vertex per row, net ``j`` = ``{j} ∪ out-neighbours(j)``, self-loops included so the owner of row ``j``
is always a pin) with Mt-KaHyPar, minimising connectivity−1, which is exactly the rows one full-graph SpMM
moves. Vertex weight = nnz of the row (the SpMM work), unit net cost, imbalance ``epsilon`` (paper: 0.01).

``stochastic-hypergraph`` (SHP, Algorithm 3) samples ``b`` uniform induced mini-batches (``batch_size`` of
``n`` vertices without replacement, the artifact's sampler), takes the column nets of each batch's induced
``Â`` and merges them into one hypergraph over all ``n`` vertices; nets with identical pin sets become one
net weighted by their multiplicity, and single-pin nets (never cut) are dropped. ``b`` is given
(``num_batches``) or comes from Eq. 14 (``theta``, ``delta``): ``b = ceil(N / batch_size)`` with
``N = (p − 1)²/(2θ²)·ln(2/δ)`` nets (every drawn vertex contributes its column's net). Minimising the merged
km1 minimises the expected volume of a fresh batch; :func:`workbench.partition.volume.expected_batch_volume`
evaluates that expectation exactly.

Both use Mt-KaHyPar's Python binding (``mtkahypar`` 1.7). Its ``create_hypergraph`` takes only a sequence
of sequences (no CSR or numpy overload), so the nets are handed over as Python lists built by slicing one
``pins.tolist()``: a Python loop per net, measured at about 0.3 s per 2M pins (plus about 0.2 s of binding
conversion), small next to the partitioning itself. Mt-KaHyPar is initialised once per process
(``mtkahypar.initialize(threads)``); the first ``threads`` wins and a later different value warns.
The ``deterministic`` preset (default) gives the same parts for the same seed.

Example:
    >>> import torch
    >>> from workbench.graph import Graph
    >>> from workbench.partition import partition
    >>> ring = torch.arange(12)
    >>> g = Graph.from_edges(torch.cat([ring, (ring + 1) % 12]), torch.cat([(ring + 1) % 12, ring]), 12,
    ...                      directed=False)
    >>> r = partition(g, 2, method="hypergraph")
    >>> r.stats["km1"], r.metrics().comm_volume_rows
    (4, 4)
"""

from __future__ import annotations

import dataclasses
import math
import threading
import warnings
from typing import Annotated, Any, Optional

import numpy as np
import torch

from workbench._validation import ErrorCollector
from workbench.constraints import Interval, OneOf, Options
from workbench.graph import Graph
from workbench.partition.base import Partitioner, register_partitioner
from workbench.partition.volume import (ColumnNetHypergraph, column_nets, expected_batch_volume,
                                        hoeffding_num_nets, sample_induced_batches)

__all__ = ["HypergraphPartitioner", "StochasticHypergraphPartitioner", "stochastic_hypergraph",
           "partition_hypergraph", "PRESETS"]

PRESETS = ("deterministic", "default", "quality", "highest_quality", "large_k", "deterministic_quality")
OBJECTIVES = ("km1", "cut")
VERTEX_WEIGHTS = ("nnz", "unit")

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}


def _initializer(threads: int):
    """Mt-KaHyPar's process-wide initializer (created once; its thread count is fixed from then on)."""
    import mtkahypar

    with _LOCK:
        if "init" not in _STATE:
            _STATE["init"] = mtkahypar.initialize(threads, False)
            _STATE["threads"] = threads
        elif _STATE["threads"] != threads:
            warnings.warn(f"Mt-KaHyPar was initialised with {_STATE['threads']} threads in this process and cannot "
                          f"be re-initialised; threads={threads} is ignored", RuntimeWarning, stacklevel=4)
        return _STATE["init"]


def partition_hypergraph(h: ColumnNetHypergraph, num_parts: int, node_weights: np.ndarray, *, epsilon: float,
                         preset: str, threads: int, seed: int, objective: str = "km1") -> tuple[np.ndarray, dict]:
    """Partition ``h`` with Mt-KaHyPar. Returns ``(node_part (N,) int64, stats)`` with the partitioner's own
    ``km1``, ``cut`` and ``imbalance``."""
    import mtkahypar

    init = _initializer(threads)
    ctx = init.context_from_preset(getattr(mtkahypar.PresetType, preset.upper()))
    ctx.set_partitioning_parameters(num_parts, float(epsilon), getattr(mtkahypar.Objective, objective.upper()))
    ctx.logging = False
    sizes = h.net_sizes()
    keep = sizes > 1   # single-pin nets are never cut: dropping them changes no objective
    flat = h.pins.tolist()
    starts, ends = h.net_ptr[:-1][keep].tolist(), h.net_ptr[1:][keep].tolist()
    nets = [flat[a:b] for a, b in zip(starts, ends)]   # the binding takes only a sequence of sequences
    hg = init.create_hypergraph(ctx, h.num_nodes, len(nets), nets, np.asarray(node_weights, np.int64).tolist(),
                                h.weights()[keep].tolist())
    mtkahypar.set_seed(int(seed))
    phg = hg.partition(ctx)
    node_part = np.asarray(phg.get_partition(), dtype=np.int64)
    stats = {"km1": int(phg.km1()), "cut": int(phg.cut()), "imbalance": float(phg.imbalance(ctx))}
    return node_part, stats


class _MtKaHyParPartitioner(Partitioner):
    """Shared config and plumbing of the two Mt-KaHyPar partitioners."""

    @dataclasses.dataclass(kw_only=True)
    class Config(Partitioner.Config):
        epsilon: Annotated[float, Interval(0, 10, closed="right")] = 0.01
        """Allowed imbalance: every part's vertex weight stays within (1 + epsilon) x the mean (paper: 0.01)."""
        preset: Annotated[str, Options(*PRESETS)] = "deterministic"
        """Mt-KaHyPar preset: deterministic (same seed, same parts), default, quality, highest_quality,
        large_k or deterministic_quality."""
        threads: Annotated[int, Interval(1, 1024)] = 1
        """Mt-KaHyPar threads; fixed by the first call in a process (Mt-KaHyPar initialises once)."""
        vertex_weight: Annotated[str, Options(*VERTEX_WEIGHTS)] = "nnz"
        """'nnz': nnz of the row of Â (the SpMM work, the paper); 'unit': one per vertex (the artifact's GP/SHP)."""
        objective: Annotated[str, Options(*OBJECTIVES)] = "km1"
        """'km1' (connectivity−1 = exact volume, the paper) or 'cut' (cut nets)."""

    def __init__(self, config: Optional[Any] = None, **options: Any):
        super().__init__(config, **options)
        self._stats: dict = {}

    def _node_weights(self, h: ColumnNetHypergraph) -> np.ndarray:
        return h.row_nnz() if self.config.vertex_weight == "nnz" else np.ones(h.num_nodes, np.int64)

    def _run(self, h: ColumnNetHypergraph, num_parts: int, node_weights: np.ndarray) -> torch.Tensor:
        c = self.config
        if num_parts == 1:
            self._stats = {"km1": 0, "cut": 0, "imbalance": 0.0}
            return torch.zeros(h.num_nodes, dtype=torch.int64)
        part, self._stats = partition_hypergraph(h, num_parts, node_weights, epsilon=c.epsilon, preset=c.preset,
                                                 threads=c.threads, seed=c.seed, objective=c.objective)
        return torch.from_numpy(part)


@register_partitioner
class HypergraphPartitioner(_MtKaHyParPartitioner):
    """Column-net hypergraph partitioning (HP): minimum connectivity−1 = minimum full-batch volume.

    ``result.stats`` holds Mt-KaHyPar's reported ``km1`` (equal to ``result.metrics().comm_volume_rows``),
    ``cut`` and ``imbalance``.

    Example:
        >>> from workbench.data import load_graph
        >>> g = load_graph("sbm:num_nodes=200,num_blocks=4,avg_degree=6,seed=0")
        >>> r = HypergraphPartitioner(seed=0).partition(g, 4)
        >>> r.stats["km1"] == r.metrics().comm_volume_rows
        True
    """

    name = "hypergraph"
    defines_run = True   # HP-GCN's rows moved per layer are this partition's km1: its run is defined by it

    @dataclasses.dataclass(kw_only=True)
    class Config(_MtKaHyParPartitioner.Config):
        pass

    def _partition(self, graph: Graph, num_parts: int) -> torch.Tensor:
        h = column_nets(graph)
        return self._run(h, num_parts, self._node_weights(h))


def stochastic_hypergraph(graph: Graph, batch_size: int, num_batches: int, seed: int = 0,
                          h: Optional[ColumnNetHypergraph] = None) -> tuple[ColumnNetHypergraph, dict]:
    """Algorithm 3's merged hypergraph of ``num_batches`` uniform induced batches (vectorised per batch).

    Nets with identical pin sets are merged (weight = multiplicity), identified by two independent random
    64-bit sums over their pins plus their size (a false merge has probability about 2^-128 per pair);
    single-pin nets are dropped.

    Returns:
        ``(hypergraph over all graph vertices, info)`` with ``num_sampled_nets`` (all drawn columns, single-pin
        ones included), ``num_multi_pin_nets`` and ``num_distinct_nets``.
    """
    h = column_nets(graph) if h is None else h
    n = graph.num_nodes
    batches = sample_induced_batches(n, batch_size, num_batches, seed)
    net_of_pin = h.net_of_pin()
    rng = np.random.default_rng([seed, 0x5348])
    r1 = rng.integers(0, 2**63, size=n, dtype=np.int64).astype(np.uint64) * np.uint64(2) + np.uint64(1)
    r2 = rng.integers(0, 2**63, size=n, dtype=np.int64).astype(np.uint64)
    all_pins, all_sizes, all_owner = [], [], []
    mask = np.zeros(n, bool)
    for batch in batches:
        mask[batch] = True
        keep = mask[net_of_pin] & mask[h.pins]
        nets, pins = net_of_pin[keep], h.pins[keep]   # ascending nets, pins sorted inside each net
        ids = np.sort(batch)                               # every drawn column is a net (its diagonal entry)
        sizes = np.bincount(nets, minlength=h.num_nets)[ids]
        sel = np.repeat(sizes > 1, sizes)
        all_pins.append(pins[sel])
        all_sizes.append(sizes[sizes > 1])
        all_owner.append(ids[sizes > 1])
        mask[batch] = False
    pins = np.concatenate(all_pins) if all_pins else np.zeros(0, np.int64)
    sizes = np.concatenate(all_sizes) if all_sizes else np.zeros(0, np.int64)
    owner = np.concatenate(all_owner) if all_owner else np.zeros(0, np.int64)
    ptr = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=ptr[1:])
    info = {"num_sampled_nets": int(num_batches) * int(batch_size), "num_multi_pin_nets": int(len(sizes))}
    if len(sizes) == 0:
        info["num_distinct_nets"] = 0
        return ColumnNetHypergraph(ptr, pins, n, np.zeros(0, np.int64), owner), info
    with np.errstate(over="ignore"):
        h1 = np.add.reduceat(r1[pins], ptr[:-1])
        h2 = np.add.reduceat(r2[pins], ptr[:-1])
    sig = np.stack([h1.view(np.int64), h2.view(np.int64), sizes], axis=1)
    _, first, weights = np.unique(sig, axis=0, return_index=True, return_counts=True)
    first_sizes = sizes[first]
    new_ptr = np.zeros(len(first) + 1, np.int64)
    np.cumsum(first_sizes, out=new_ptr[1:])
    # gather the pins of each representative net (vectorised segment gather)
    offs = np.repeat(ptr[first] - new_ptr[:-1], first_sizes) + np.arange(new_ptr[-1])
    merged = ColumnNetHypergraph(new_ptr, pins[offs], n, weights.astype(np.int64), owner[first])
    info["num_distinct_nets"] = int(len(first))
    return merged, info


@register_partitioner
class StochasticHypergraphPartitioner(_MtKaHyParPartitioner):
    """Stochastic hypergraph partitioning (SHP, Algorithm 3) for uniform induced mini-batches.

    ``result.stats`` adds ``num_batches``, ``batch_size``, the merged hypergraph's size, Mt-KaHyPar's
    weighted ``km1`` of the merged hypergraph and ``expected_batch_volume_rows``, the exact expected rows
    per SpMM of a fresh batch (:func:`workbench.partition.volume.expected_batch_volume`).

    Example:
        >>> from workbench.data import load_graph
        >>> g = load_graph("sbm:num_nodes=200,num_blocks=4,avg_degree=6,seed=0")
        >>> r = StochasticHypergraphPartitioner(batch_size=50, num_batches=20).partition(g, 2)
        >>> r.stats["num_batches"], r.stats["expected_batch_volume_rows"] > 0
        (20, True)
    """

    name = "stochastic-hypergraph"

    @dataclasses.dataclass(kw_only=True)
    class Config(_MtKaHyParPartitioner.Config):
        batch_size: Annotated[Optional[int], OneOf(None, Interval(1, None))] = None
        """Vertices per sampled mini-batch (uniform, induced); None = a tenth of the vertices (at least 2)."""
        num_batches: Annotated[Optional[int], OneOf(None, Interval(1, None))] = None
        """Mini-batches b to merge; None = from Eq. 14 with theta and delta."""
        theta: Annotated[float, Interval(0, None, closed="neither")] = 0.1
        """Eq. 14: tolerated error of the mean sampled connectivity (paper: 0.1)."""
        delta: Annotated[float, Interval(0, 2, closed="neither")] = 0.5
        """Eq. 14: allowed failure probability (paper: 0.5, i.e. 50 % confidence)."""

    def _check(self, graph: Graph, num_parts: Optional[int], errs: ErrorCollector) -> None:
        bs = self.config.batch_size
        if bs is not None:
            errs.check(bs <= graph.num_nodes, "batch_size", f"at most num_nodes={graph.num_nodes}", bs)

    def sizes(self, num_nodes: int, num_parts: int) -> tuple[int, int]:
        """``(batch_size, num_batches)`` this config uses for a graph of ``num_nodes`` and ``num_parts``."""
        c = self.config
        s = c.batch_size if c.batch_size is not None else min(num_nodes, max(2, num_nodes // 10))
        b = c.num_batches if c.num_batches is not None else max(
            1, math.ceil(hoeffding_num_nets(num_parts, c.theta, c.delta) / s))
        return s, b

    def _partition(self, graph: Graph, num_parts: int) -> torch.Tensor:
        s, b = self.sizes(graph.num_nodes, num_parts)
        full = column_nets(graph)
        merged, info = stochastic_hypergraph(graph, s, b, seed=self.config.seed, h=full)
        part = self._run(merged, num_parts, self._node_weights(full))
        self._stats.update(info, num_batches=b, batch_size=s,
                           expected_batch_volume_rows=expected_batch_volume(full, part.numpy(), s, num_parts))
        return part
