"""KaMinPar: shared-memory multilevel graph partitioning (minimum edge cut), through its Python binding.

KaMinPar (Gottesbüren et al., "Deep Multilevel Graph Partitioning", ESA 2021; ``pip install kaminpar``)
partitions the same METIS input graph as :class:`~workbench.partition.metis.MetisPartitioner` (symmetrised, no
self-loops, duplicates merged: :func:`~workbench.partition.metis.symmetric_csr`) and balances vertex counts
within ``1 + imbalance`` of the mean. Its binding (3.7) builds a graph only from a file, so the CSR is written
in ParHIP's binary format (:func:`write_parhip`, a few vectorised writes) into a temporary folder that is
removed when the call returns; ``result.stats`` says how long writing took and how large the file was.

Determinism: KaMinPar's random generator is process-wide (``kaminpar.reseed``); it is reseeded with ``seed``
before every call, under a lock. With ``threads=1`` (the default) the same seed gives the same parts; with
more threads the parallel label propagation depends on the thread schedule, so two calls may differ.

Example:
    >>> import torch
    >>> from workbench.graph import Graph
    >>> ring = torch.arange(8)
    >>> g = Graph.from_edges(torch.cat([ring, (ring + 1) % 8]), torch.cat([(ring + 1) % 8, ring]), 8,
    ...                      directed=False)
    >>> r = KaMinParPartitioner(seed=0).partition(g, 2)
    >>> r.metrics().edge_cut, r.part_sizes().tolist()
    (2, [4, 4])
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import numpy as np
import torch

from workbench._validation import ParamError, param_error
from workbench.constraints import Interval, Options
from workbench.graph import Graph
from workbench.partition.base import Partitioner, register_partitioner
from workbench.partition.metis import symmetric_csr

__all__ = ["KaMinParPartitioner", "write_parhip", "read_parhip", "PRESETS", "kaminpar_unavailable"]

PRESETS = ("fast", "default", "eco", "strong", "largek", "largek-fast", "largek-eco", "largek-strong",
           "terapart", "terapart-eco", "terapart-largek")
"""KaMinPar's named contexts (``kaminpar.context_by_name``) offered here: its public presets."""

_HEADER_BYTES = 24
_LOCK = threading.Lock()   # kaminpar.reseed is process-wide: one seeded call at a time
_CHUNK = 1 << 22           # values converted and written per step (bounds the temporary copies)


def kaminpar_unavailable() -> Optional[str]:
    """Why KaMinPar cannot run here (its binding does not import), or None when it can."""
    try:
        import kaminpar  # noqa: F401
    except Exception as exc:  # a wheel built for another platform raises ImportError or OSError
        return f"'kaminpar' needs the kaminpar package (pip install kaminpar): {type(exc).__name__}: {exc}"
    return None


# --------------------------------------------------------------------------------------------------------
# ParHIP binary graph files
# --------------------------------------------------------------------------------------------------------


def _write(f, values: np.ndarray, dtype: np.dtype, add: int = 0, scale: int = 1) -> None:
    """Write ``values * scale + add`` as ``dtype`` in chunks (no full-size temporary copy)."""
    for start in range(0, len(values), _CHUNK):
        chunk = values[start:start + _CHUNK]
        if scale != 1 or add:
            chunk = chunk.astype(np.int64) * scale + add
        np.ascontiguousarray(chunk, dtype=dtype).tofile(f)


def write_parhip(path: str | os.PathLike, xadj: np.ndarray, adjncy: np.ndarray,
                 node_weights: Optional[np.ndarray] = None, edge_weights: Optional[np.ndarray] = None) -> int:
    """Write a symmetric CSR graph as a ParHIP binary file (KaHIP's ``parhip`` format, as KaMinPar reads it).

    Layout (little-endian; ``n`` vertices, ``m`` directed edges, i.e. twice the undirected ones)::

        header      3 x uint64: version, n, m
        offsets     (n + 1) x E: byte offset of each vertex's first neighbour from the file start
                    (header bytes + (n + 1) * E + xadj[u] * V); the last one is where the neighbours end
        adjacency   m x V: neighbour ids, row after row
        node wgts   n x W (only when the version says so)
        edge wgts   m x W (only when the version says so), in adjacency order

    The version's bits say what is absent or narrow: 1 no edge weights, 2 no node weights, 4 32-bit offsets
    (E = 4, else 8), 8 32-bit vertex ids (V = 4, else 8), 16 32-bit node weights, 32 32-bit edge weights.
    This writer picks 32 bits wherever the values fit (unweighted graphs below 2^32 vertices and 4 GiB:
    version 15) and 64-bit weights.

    Args:
        path: the file to write.
        xadj: ``(n + 1,)`` row offsets.
        adjncy: ``(m,)`` neighbour ids; each undirected edge stored in both rows.
        node_weights: optional ``(n,)`` positive integer vertex weights.
        edge_weights: optional ``(m,)`` positive integer edge weights.

    Returns:
        The file size in bytes.

    Example:
        >>> import tempfile, numpy as np
        >>> with tempfile.TemporaryDirectory() as d:
        ...     size = write_parhip(f"{d}/g.parhip", np.array([0, 1, 3, 4]), np.array([1, 0, 2, 1]))
        ...     header, xadj, adjncy, _, _ = read_parhip(f"{d}/g.parhip")
        >>> size, header, xadj.tolist(), adjncy.tolist()
        (56, (15, 3, 4), [0, 1, 3, 4], [1, 0, 2, 1])
    """
    xadj, adjncy = np.asarray(xadj), np.asarray(adjncy)
    n, m = len(xadj) - 1, len(adjncy)
    assert int(xadj[-1]) == m, "xadj[-1] must equal len(adjncy)"
    node_width = 4 if n < 2**32 else 8
    small_end = _HEADER_BYTES + (n + 1) * 4 + m * node_width   # the last offset with 4-byte offsets
    offset_width = 4 if small_end < 2**32 else 8
    version = (1 if edge_weights is None else 0) | (2 if node_weights is None else 0)
    version |= (4 if offset_width == 4 else 0) | (8 if node_width == 4 else 0)
    u32 = {4: np.dtype("<u4"), 8: np.dtype("<u8")}
    with open(path, "wb") as f:
        np.array([version, n, m], dtype="<u8").tofile(f)
        _write(f, xadj, u32[offset_width], add=_HEADER_BYTES + (n + 1) * offset_width, scale=node_width)
        _write(f, adjncy, u32[node_width])
        for weights in (node_weights, edge_weights):
            if weights is not None:
                _write(f, np.asarray(weights), u32[8])
        return f.tell()


def read_parhip(path: str | os.PathLike) -> tuple[tuple[int, int, int], np.ndarray, np.ndarray,
                                                    Optional[np.ndarray], Optional[np.ndarray]]:
    """Read a ParHIP binary file (:func:`write_parhip`'s layout).

    Returns:
        ``((version, n, m), xadj (n + 1,), adjncy (m,), node weights (n,) or None, edge weights (m,) or None)``,
        int64 arrays; ``xadj`` as row offsets (the file's byte offsets converted back).
    """
    raw = np.fromfile(path, dtype=np.uint8)
    version, n, m = (int(v) for v in raw[:_HEADER_BYTES].view("<u8"))
    offset_width = 4 if version & 4 else 8
    node_width = 4 if version & 8 else 8
    pos = _HEADER_BYTES
    offsets = raw[pos:pos + (n + 1) * offset_width].view(f"<u{offset_width}").astype(np.int64)
    pos += (n + 1) * offset_width
    xadj = (offsets - pos) // node_width
    adjncy = raw[pos:pos + m * node_width].view(f"<u{node_width}").astype(np.int64)
    pos += m * node_width
    weights: list[Optional[np.ndarray]] = []
    for absent, bit, count in ((version & 2, 16, n), (version & 1, 32, m)):
        if absent:
            weights.append(None)
            continue
        width = 4 if version & bit else 8
        weights.append(raw[pos:pos + count * width].view(f"<u{width}").astype(np.int64))
        pos += count * width
    return (version, n, m), xadj, adjncy, weights[0], weights[1]


# --------------------------------------------------------------------------------------------------------
# Partitioner
# --------------------------------------------------------------------------------------------------------


@register_partitioner
class KaMinParPartitioner(Partitioner):
    """Minimum edge-cut KaMinPar (vertex counts balanced), a faster alternative to METIS.

    ``result.stats`` holds ``write_s`` (writing the ParHIP file), ``load_s`` (KaMinPar reading it),
    ``partition_s`` (KaMinPar partitioning) and ``file_bytes``.

    Example:
        >>> from workbench.data import load_graph
        >>> g = load_graph("sbm:num_nodes=400,num_blocks=4,avg_degree=8,seed=0")
        >>> r = KaMinParPartitioner(seed=0).partition(g, 4)
        >>> bool(r.part_sizes().max() <= 1.03 * 400 / 4), sorted(r.stats)
        (True, ['file_bytes', 'load_s', 'partition_s', 'write_s'])
    """

    name = "kaminpar"

    @dataclasses.dataclass(kw_only=True)
    class Config(Partitioner.Config):
        preset: Annotated[str, Options(*PRESETS)] = "fast"
        """KaMinPar context: 'fast' (the quickest), 'default', 'eco' and 'strong' trade time for a smaller cut;
        'largek*' are tuned for many parts, 'terapart*' for little memory."""
        threads: Annotated[int, Interval(1, 1024)] = 1
        """KaMinPar threads. 1 (the default) is deterministic under a seed; more threads are faster but two
        calls with the same seed may give different parts."""
        imbalance: Annotated[float, Interval(0.001, 10)] = 0.03
        """Allowed load imbalance (KaMinPar's epsilon): every part holds at most (1 + imbalance) x the mean
        number of vertices."""

    @classmethod
    def unavailable(cls) -> Optional[str]:
        """Why this partitioner cannot run here: the kaminpar package does not import (None when it does)."""
        return kaminpar_unavailable()

    def __init__(self, config: Optional[Any] = None, **options: Any):
        super().__init__(config, **options)
        if (why := self.unavailable()) is not None:
            raise ParamError([param_error("method", "partition", f"a method whose library imports here: {why}",
                                          self.name)])
        self._stats: dict = {}

    def _partition(self, graph: Graph, num_parts: int) -> torch.Tensor:
        import kaminpar

        c = self.config
        if num_parts == 1:
            self._stats = {"write_s": 0.0, "load_s": 0.0, "partition_s": 0.0, "file_bytes": 0}
            return torch.zeros(graph.num_nodes, dtype=torch.int64)
        xadj, adjncy, _ = symmetric_csr(graph)
        with tempfile.TemporaryDirectory(prefix="workbench-kaminpar-") as tmp:
            path = Path(tmp) / "graph.parhip"
            start = time.perf_counter()
            size = write_parhip(path, xadj, adjncy)
            write_s = time.perf_counter() - start
            with _LOCK:
                start = time.perf_counter()
                kgraph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP)
                load_s = time.perf_counter() - start
                kaminpar.reseed(int(c.seed))
                start = time.perf_counter()
                part = kaminpar.KaMinPar(c.threads, kaminpar.context_by_name(c.preset)).compute_partition(
                    kgraph, num_parts, float(c.imbalance))
                partition_s = time.perf_counter() - start
        self._stats = {"write_s": write_s, "load_s": load_s, "partition_s": partition_s, "file_bytes": size}
        return torch.from_numpy(np.asarray(part, dtype=np.int64))
