"""Edge streams: an edge file read in chunks, or an in-memory graph's edge list, as re-iterable chunk sources.

Each line is one edge ``(u, v)``. With ``directed=False`` (the default for files) a line is an undirected edge
and is assigned once; neighbour completion sends it to both endpoints' owners. With ``directed=True`` a line
is the directed edge ``u -> v`` and completion sends it to ``v``'s owner (``v`` aggregates from ``u``).
"""

from __future__ import annotations

import gzip
import os
import zlib
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

    Text files (``.gz`` allowed) are read in blocks of about ``chunk_edges * 16`` bytes cut after the last
    newline, the same blocks as :func:`workbench.data.read_edge_list`'s reader; a block in the plain form
    (two unsigned ids a line, blanks, commas, ``#``/``%`` comments) is parsed by a compiled loop, any other
    block by the same pandas parser and error messages as :func:`~workbench.data.read_edge_list`. ``.npy``
    files of shape ``(E, 2)`` are read in slices of ``chunk_edges`` rows.

    Memory: one text block and one chunk of ids, in buffers reused from chunk to chunk (nothing grows with
    the file). The arrays of a chunk are therefore overwritten by the next one: copy them to keep them.

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
        """Plain reads of an ``(E, 2)`` ``.npy`` into reused buffers (no memory map: mapped file pages would count
        as resident)."""
        with open(self.path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(f)
            if len(shape) != 2 or shape[1] != 2 or fortran or dtype.kind not in "iu":
                raise ParamError([param_error("path", "EdgeFileStream", "a C-order integer .npy array of shape (E, 2)",
                                              f"shape {shape}, dtype {dtype}")])
            rows = min(self.chunk_edges, shape[0])
            block = np.empty((rows, 2), dtype)
            src, dst = np.empty(rows, np.int64), np.empty(rows, np.int64)
            for lo in range(0, shape[0], self.chunk_edges):
                n = min(self.chunk_edges, shape[0] - lo)
                got = _read_into(f, block[:n].reshape(-1).view(np.uint8), "EdgeFileStream", self.path)
                if got != block[:n].nbytes:
                    raise ParamError([param_error("path", "EdgeFileStream", f"a complete .npy file of {shape[0]} rows",
                                                  f"{lo + got // block.itemsize // 2} rows")])
                np.copyto(src[:n], block[:n, 0], casting="unsafe")
                np.copyto(dst[:n], block[:n, 1], casting="unsafe")
                yield src[:n], dst[:n]

    def _text_chunks(self):
        """Blocks of whole lines (``line_blocks``' cuts: read ``chunk_edges * 16`` bytes after the carried partial
        line, cut after the last newline; at the end the carried rest) read into one reused byte buffer."""
        import workbench.partition.streaming.kernels as K

        block_bytes = self.chunk_edges * BYTES_PER_LINE_GUESS
        state = _TextState(self.path, self.num_nodes)
        buf = np.empty(block_bytes + 4096, np.uint8)
        carry = 0  # bytes of buf holding the partial line after the last cut
        with open(self.path, "rb") as raw:
            stream = gzip.GzipFile(fileobj=raw) if self.path.suffix == ".gz" else raw
            while True:
                if carry + block_bytes > buf.size:  # a line longer than a block: keep all of it
                    grown = np.empty(carry + block_bytes, np.uint8)
                    grown[:carry] = buf[:carry]
                    buf = grown
                got = _read_into(stream, buf[carry:carry + block_bytes], "EdgeFileStream", self.path)
                total = carry + got
                end = total
                if got:
                    cut = K.last_newline(buf, total)
                    if cut < 0:  # no complete line yet
                        carry = total
                        continue
                    end = cut + 1
                if end:
                    chunk = state.parse(buf, end)
                    if chunk is not None:
                        yield chunk
                if not got:
                    return
                carry = total - end
                buf[:carry] = buf[end:total].copy()

    def __repr__(self) -> str:
        return f"EdgeFileStream({str(self.path)!r}, chunk_edges={self.chunk_edges}, directed={self.directed})"


def _read_into(stream, out: np.ndarray, owner: str, path: Path) -> int:
    """Fill ``out`` (uint8) from ``stream`` (several reads if short, as ``read(n)`` does); bytes read. A truncated
    or corrupt ``.gz`` is one :class:`~workbench.data.readers.DataFormatError` naming ``path``."""
    from workbench.data.readers import DataFormatError

    view = memoryview(out)
    got = 0
    while got < out.size:
        try:
            n = stream.readinto(view[got:])
        except (OSError, EOFError, zlib.error) as exc:
            raise DataFormatError(owner, path, "a complete gzip file", f"{type(exc).__name__}: {exc}") from None
        if not n:
            break
        got += n
    return got


class _TextState:
    """Parsing state of one pass over a text file: reused id buffers and the full parser's line count and
    column count (for its error messages)."""

    def __init__(self, path: Path, num_nodes: Optional[int]):
        from workbench.data.readers import _EdgeListState

        self.full = _EdgeListState(path=path, num_nodes=num_nodes)
        self.src = self.dst = np.empty(0, np.int64)   # sized by the first block

    def parse(self, buf: np.ndarray, n: int) -> Optional[tuple[np.ndarray, np.ndarray]]:
        """The edges of the block ``buf[:n]`` (views of the reused buffers, or fresh arrays from the full parser),
        or ``None`` for a block without edges."""
        import workbench.partition.streaming.kernels as K

        st = self.full
        if st.num_cols in (None, 2):
            k, status = K.parse_edge_lines(buf, n, self.src, self.dst)
            if status == 2:  # more lines than room: the block's lines and 1/16 more (blocks vary a little)
                size = K.count_newlines(buf, n) + 1
                size += size // 16
                self.src = self.dst = None
                self.src, self.dst = np.empty(size, np.int64), np.empty(size, np.int64)
                k, status = K.parse_edge_lines(buf, n, self.src, self.dst)
            if status == 0:
                src, dst = self.src[:k], self.dst[:k]
                if k and st.num_nodes is not None and max(int(src.max()), int(dst.max())) >= st.num_nodes:
                    status = 1  # the full parser names the line
                else:
                    st.line += K.count_newlines(buf, n)
                    if k == 0:
                        return None
                    if st.num_cols is None:
                        st.num_cols = 2
                    return src, dst
        import pandas as pd

        from workbench.data.readers import _parse_block

        _parse_block(pd, buf[:n].tobytes(), st)
        return (st.src.pop(), st.dst.pop()) if st.src else None


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
