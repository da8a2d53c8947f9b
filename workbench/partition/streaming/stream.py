"""Edge streams: an edge file read in chunks, or an in-memory graph's edge list, as re-iterable chunk sources.

Each line is one edge ``(u, v)``. With ``directed=False`` (the default for files) a line is an undirected edge
and is assigned once; neighbour completion sends it to both endpoints' owners. With ``directed=True`` a line
is the directed edge ``u -> v`` and completion sends it to ``v``'s owner (``v`` aggregates from ``u``).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Iterator, Optional

import numpy as np
import torch

from workbench._validation import ParamError, param_error

__all__ = ["EdgeFileStream", "GraphEdgeStream", "BYTES_PER_LINE_GUESS"]

BYTES_PER_LINE_GUESS = 16
"""Text bytes read per requested edge line (``chunk_edges * 16`` bytes a block)."""


class EdgeFileStream:
    """An edge file as chunks of ``(src, dst)`` int64 arrays, re-readable for multi-pass algorithms.

    Text files (``.gz`` allowed) are parsed with the same chunked pandas parser and error messages as
    :func:`workbench.data.read_edge_list`, blocks of about ``chunk_edges`` lines at a time; ``.npy`` files of
    shape ``(E, 2)`` are memory-mapped and sliced. Memory: one chunk, never the whole edge list.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "g.txt"
        >>> _ = p.write_text("0 1\\n1 2\\n# a comment\\n2 0\\n")
        >>> [c[0].tolist() for c in EdgeFileStream(p, chunk_edges=2)]
        [[0, 1, 2]]
    """

    def __init__(self, path: str | os.PathLike, *, chunk_edges: int = 1 << 20, directed: bool = False,
                 num_nodes: Optional[int] = None):
        owner = "EdgeFileStream"
        self.path = Path(path)
        errors = []
        if not self.path.is_file():
            errors.append(param_error("path", owner, "an existing file", str(self.path)))
        if not isinstance(chunk_edges, int) or isinstance(chunk_edges, bool) or chunk_edges < 1:
            errors.append(param_error("chunk_edges", owner, "a positive int", chunk_edges))
        if num_nodes is not None and (not isinstance(num_nodes, int) or num_nodes < 1):
            errors.append(param_error("num_nodes", owner, "a positive int or None", num_nodes))
        if errors:
            raise ParamError(errors)
        self.chunk_edges, self.directed, self.num_nodes = chunk_edges, directed, num_nodes
        self.name = self.path.name
        self.train_mask: Optional[np.ndarray] = None

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        if self.path.suffix == ".npy":
            yield from self._npy_chunks()
            return
        yield from self._text_chunks()

    def _npy_chunks(self):
        """Plain reads of an ``(E, 2)`` ``.npy`` (no memory map: mapped file pages would count as resident)."""
        with open(self.path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(f)
            if len(shape) != 2 or shape[1] != 2 or fortran or dtype.kind not in "iu":
                raise ParamError([param_error("path", "EdgeFileStream", "a C-order integer .npy array of shape (E, 2)",
                                              f"shape {shape}, dtype {dtype}")])
            for lo in range(0, shape[0], self.chunk_edges):
                n = min(self.chunk_edges, shape[0] - lo)
                block = np.fromfile(f, dtype=dtype, count=2 * n).reshape(n, 2).astype(np.int64, copy=False)
                yield np.ascontiguousarray(block[:, 0]), np.ascontiguousarray(block[:, 1])

    def _text_chunks(self):
        import pandas as pd

        from workbench.data.readers import _EdgeListState, _parse_block, line_blocks

        state = _EdgeListState(path=self.path, num_nodes=self.num_nodes)
        block_bytes = self.chunk_edges * BYTES_PER_LINE_GUESS
        with open(self.path, "rb") as raw:
            stream = gzip.GzipFile(fileobj=raw) if self.path.suffix == ".gz" else raw
            for data in line_blocks(stream, block_bytes, "EdgeFileStream", self.path):
                _parse_block(pd, data, state)
                if state.src:
                    yield state.src.pop(), state.dst.pop()

    def __repr__(self) -> str:
        return f"EdgeFileStream({str(self.path)!r}, chunk_edges={self.chunk_edges}, directed={self.directed})"


class GraphEdgeStream:
    """An in-memory :class:`~workbench.graph.Graph`'s edges as a stream (for the registry path and tests).

    An undirected graph streams each stored pair once (the stored edges with ``src <= dst``, in storage
    order), so ``line_of_edge`` maps every stored edge (both directions) to the line that carries it.

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> g = Graph.from_edges(torch.tensor([0, 1, 1, 2]), torch.tensor([1, 0, 2, 1]), 3, directed=False)
        >>> s = GraphEdgeStream(g)
        >>> [c[0].tolist() for c in s], s.line_of_edge.tolist()
        ([[0, 1]], [0, 0, 1, 1])
    """

    def __init__(self, graph, *, chunk_edges: int = 1 << 20):
        src, dst = (t.numpy() for t in graph.edges())
        self.directed = bool(graph.directed)
        self.num_nodes = graph.num_nodes
        self.chunk_edges = chunk_edges
        self.name = graph.name
        self.train_mask = None if graph.train_mask is None else graph.train_mask.numpy()
        if self.directed:
            self.src, self.dst = src, dst
            self.line_of_edge = np.arange(src.size)
        else:
            keep = src <= dst
            self.src, self.dst = src[keep], dst[keep]
            # Each stored edge (both directions) -> the first line with the same unordered pair.
            n = max(self.num_nodes, 1)
            line_key = self.src * n + self.dst
            lo, hi = np.minimum(src, dst), np.maximum(src, dst)
            order = np.argsort(line_key, kind="stable")
            pos = np.searchsorted(line_key[order], lo * n + hi)
            self.line_of_edge = order[np.minimum(pos, max(order.size - 1, 0))]

    def __iter__(self):
        for lo in range(0, self.src.size, self.chunk_edges):
            yield self.src[lo:lo + self.chunk_edges], self.dst[lo:lo + self.chunk_edges]

    def __repr__(self) -> str:
        return f"GraphEdgeStream({self.name!r}, lines={self.src.size}, directed={self.directed})"


def as_numpy_mask(mask) -> Optional[np.ndarray]:
    if mask is None:
        return None
    return mask.numpy() if isinstance(mask, torch.Tensor) else np.asarray(mask, dtype=bool)
