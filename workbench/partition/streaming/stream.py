"""Edge streams: an edge file read in chunks, or an in-memory graph's edge list, as re-iterable chunk sources.

Each line is one edge ``(u, v)``. With ``directed=False`` (the default for files) a line is an undirected edge
and is assigned once; neighbour completion sends it to both endpoints' owners. With ``directed=True`` a line
is the directed edge ``u -> v`` and completion sends it to ``v``'s owner (``v`` aggregates from ``u``).

Reading never waits on the caller, nor the caller on reading more than it must: a file's chunks are made on a
background thread one chunk ahead (:func:`read_ahead`: the text parsed, or a binary window split, by compiled
loops that release the GIL, so on a second core) while the caller works on the previous chunk; at most two
chunks are in flight (the one the caller holds and the next), in the same order and the same chunks as reading
them in the caller's thread, and an error of the reader is raised in the caller with its own type and message.
A text file read by a multi-pass method is parsed once (:class:`SpilledTextStream`): its first pass writes the
parsed pairs, chunk by chunk from the reading thread, to a temporary int32 file (8 bytes a line, in the run's
``assignment_dir``: the system temp folder, or the ``--out`` folder) that the later passes read as binary; the file
is removed at the end of the run, failed or not.
"""

from __future__ import annotations

import gzip
import os
import queue
import tempfile
import threading
import weakref
import zlib
from pathlib import Path
from typing import Iterator, Optional

import numpy as np
import torch

from workbench._validation import ParamError, param_error

__all__ = ["EdgeFileStream", "GraphEdgeStream", "SpilledTextStream", "BYTES_PER_LINE_GUESS", "read_ahead"]

BYTES_PER_LINE_GUESS = 16
"""Text bytes read per requested edge line (``chunk_edges * 16`` bytes a block)."""

SPILL_ROWS = 1 << 16
"""Pairs packed and written to a spill file at a time (a 512 KiB buffer, whatever the chunk size)."""

READ_AHEAD = len(os.sched_getaffinity(0)) > 1 if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1) > 1
"""Make a file's chunks on a background thread one ahead of the caller (:func:`read_ahead`; the default where this
process may run on two cores or more); False reads them in the caller's thread (the same chunks)."""

_END = object()


class _Failed:
    """The reader's exception, handed to the caller to raise."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException):
        self.exc = exc


def read_ahead(chunks, stream) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The ``(src, dst)`` chunks of ``chunks`` (a generator of ``(src, dst, id_range)`` whose buffers alternate
    between two sets), each made on a background thread while the caller works on the one before;
    ``stream.chunk_range`` is set to a chunk's ``id_range`` as it is handed over.

    At most two chunks in flight: the reader makes chunk ``k + 1`` while the caller holds chunk ``k``, and starts
    chunk ``k + 2`` (into chunk ``k``'s buffers) only once the caller asks for ``k + 1``. The chunks and their order
    are those of ``chunks`` itself. An exception of the reader is raised in the caller, the same object (type and
    message), when the caller asks for the chunk it failed on. When the caller stops early (a ``break``, an
    exception, the generator closed or dropped), the reader stops after its chunk in hand, and ``chunks`` is
    closed (its file with it) before this generator returns. ``READ_AHEAD = False``: the same chunks in the
    caller's thread.
    """
    if not READ_AHEAD:
        try:
            for src, dst, stream.chunk_range in chunks:
                yield src, dst
        finally:
            chunks.close()
        return
    free = threading.Semaphore(2)   # chunk buffers the reader may fill: the caller's chunk and the next
    ready: queue.SimpleQueue = queue.SimpleQueue()
    stop = threading.Event()

    def produce():
        try:
            while True:
                free.acquire()
                if stop.is_set():
                    return
                item = next(chunks, _END)
                ready.put(item)
                if item is _END:
                    return
        except BaseException as exc:   # noqa: BLE001 -- raised in the caller
            ready.put(_Failed(exc))
        finally:
            chunks.close()

    thread = threading.Thread(target=produce, name=f"read-ahead {getattr(stream, 'name', '')}", daemon=True)
    thread.start()
    try:
        while True:
            item = ready.get()
            if item is _END:
                return
            if isinstance(item, _Failed):
                raise item.exc
            src, dst, stream.chunk_range = item
            yield src, dst
            free.release()   # the caller is done with this chunk: its buffers may take the one after next
    finally:
        stop.set()
        free.release()
        thread.join()


class _IdBuffers:
    """Two reused ``(src, dst)`` int64 buffer pairs, alternated chunk by chunk: the pair of the chunk last handed
    out (the caller may still hold it) and the free one; the second pair is made when a second chunk needs it."""

    def __init__(self):
        empty = np.empty(0, np.int64)
        self.pairs = [(empty, empty), (empty, empty)]
        self.last = 1

    def free(self, rows: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """The pair the caller does not hold, made anew with ``rows`` ids if it has fewer (the old one freed first:
        never both at once)."""
        s = 1 - self.last
        if self.pairs[s][0].size < rows:
            self.pairs[s] = None
            self.pairs[s] = (np.empty(rows, np.int64), np.empty(rows, np.int64))
        return self.pairs[s]

    def hand_out(self) -> None:
        """The free pair goes to the caller (its chunk is yielded); the other one is free from now on."""
        self.last = 1 - self.last


class EdgeFileStream:
    """An edge file as chunks of ``(src, dst)`` int64 arrays, re-readable for multi-pass algorithms.

    Text files (``.gz`` allowed) are read in blocks of about ``chunk_edges * 16`` bytes cut after the last
    newline, the same blocks as :func:`workbench.data.read_edge_list`'s reader; a block in the plain form
    (two unsigned ids a line, blanks, commas, ``#``/``%`` comments) is parsed by a compiled loop, any other
    block by the same pandas parser and error messages as :func:`~workbench.data.read_edge_list`. Binary
    files (:mod:`workbench.data.edgefiles`: an ``(E, 2)`` int32/int64 ``.npy``, or a ``.bin`` of raw pairs whose
    dtype is ``dtype`` or its sidecar's) are read ``chunk_edges`` rows at a time through a memory map of that
    window alone; ``num_nodes`` defaults to the sidecar's vertex count.

    Chunks are made on a background thread one ahead of the caller (:func:`read_ahead`), in the same order.

    Memory: one text block (or one mapped window) and two chunks of ids (the caller's and the next), in buffers
    reused from chunk to chunk (nothing grows with the file). The arrays of a chunk are therefore overwritten by
    the chunk after next: copy them to keep them.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "g.txt"
        >>> _ = p.write_text("0 1\\n1 2\\n# a comment\\n2 0\\n")
        >>> [c[0].tolist() for c in EdgeFileStream(p, chunk_edges=2)]
        [[0, 1, 2]]
    """

    def __init__(self, path: str | os.PathLike, *, chunk_edges: int = 1 << 20, directed: bool = False,
                 num_nodes: Optional[int] = None, dtype: Optional[str] = None):
        from workbench.data.edgefiles import EDGE_DTYPES, edge_file_info, is_binary_edge_file

        owner = "EdgeFileStream"
        self.path = Path(path)
        errors = []
        if not self.path.is_file():
            errors.append(param_error("path", owner, "an existing file", str(self.path)))
        if not isinstance(chunk_edges, int) or isinstance(chunk_edges, bool) or chunk_edges < 1:
            errors.append(param_error("chunk_edges", owner, "a positive int", chunk_edges))
        if num_nodes is not None and (not isinstance(num_nodes, int) or num_nodes < 1):
            errors.append(param_error("num_nodes", owner, "a positive int or None", num_nodes))
        if dtype is not None and dtype not in EDGE_DTYPES:
            errors.append(param_error("dtype", owner, f"one of {list(EDGE_DTYPES)} or None", dtype))
        if errors:
            raise ParamError(errors)
        self.binary = None
        if is_binary_edge_file(self.path, dtype):
            self.binary = edge_file_info(self.path, dtype, owner=owner)
            if num_nodes is None:
                num_nodes = self.binary.num_nodes
        elif dtype is not None:
            raise ParamError([param_error("dtype", owner, "None for a text edge file (a .bin or .npy has ids of "
                                                          "a dtype)", dtype)])
        self.chunk_edges, self.directed, self.num_nodes = chunk_edges, directed, num_nodes
        self.name = self.path.name
        self.train_mask: Optional[np.ndarray] = None
        self.chunk_range: Optional[tuple[int, int]] = None
        """The smallest and largest id of the chunk last yielded, when reading it found them (else ``None``)."""

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return read_ahead(self._binary_chunks() if self.binary is not None else self._text_chunks(), self)

    def _binary_chunks(self):
        """Windows of a binary edge file (one mapped at a time) copied into reused int64 buffers; ids at or above
        ``num_nodes`` (when known) are refused naming the line."""
        from workbench.data.edgefiles import binary_chunks

        from workbench.partition.streaming.kernels import split_pairs

        rows = max(min(self.chunk_edges, self.binary.num_lines), 1)
        ids = _IdBuffers()
        lo = 0
        for window in binary_chunks(self.binary, self.chunk_edges):
            n = window.shape[0]
            src, dst = ids.free(rows)
            id_range = split_pairs(window, src, dst)
            del window
            if self.num_nodes is not None and n and id_range[1] >= self.num_nodes:
                i = int(np.flatnonzero((src[:n] >= self.num_nodes) | (dst[:n] >= self.num_nodes))[0])
                raise ParamError([param_error("path", "EdgeFileStream", f"vertex ids below num_nodes="
                                              f"{self.num_nodes} ({self.path.name})",
                                              f"line {lo + i}: {int(src[i])} {int(dst[i])}")])
            lo += n
            ids.hand_out()
            yield src[:n], dst[:n], id_range

    def _text_chunks(self):
        """Blocks of whole lines (``line_blocks``' cuts: read ``chunk_edges * 16`` bytes after the carried partial
        line, cut after the last newline; at the end the carried rest) read into one reused byte buffer (the
        reading thread's alone), parsed as ``(src, dst, None)``."""
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
                        yield chunk[0], chunk[1], None
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
    """Parsing state of one pass over a text file: two reused id buffer pairs (the caller's chunk and the next) and
    the full parser's line count and column count (for its error messages)."""

    def __init__(self, path: Path, num_nodes: Optional[int]):
        from workbench.data.readers import _EdgeListState

        self.full = _EdgeListState(path=path, num_nodes=num_nodes)
        self.ids = _IdBuffers()   # sized by the first blocks

    def parse(self, buf: np.ndarray, n: int) -> Optional[tuple[np.ndarray, np.ndarray]]:
        """The edges of the block ``buf[:n]`` (views of the reused buffers, or fresh arrays from the full parser),
        or ``None`` for a block without edges."""
        import workbench.partition.streaming.kernels as K

        st = self.full
        if st.num_cols in (None, 2):
            src, dst = self.ids.free()
            k, status = K.parse_edge_lines(buf, n, src, dst)
            if status == 2:  # more lines than room: the block's lines and 1/16 more (blocks vary a little)
                size = K.count_newlines(buf, n) + 1
                size += size // 16
                del src, dst
                src, dst = self.ids.free(size)
                k, status = K.parse_edge_lines(buf, n, src, dst)
            if status == 0:
                src, dst = src[:k], dst[:k]
                if k and st.num_nodes is not None and max(int(src.max()), int(dst.max())) >= st.num_nodes:
                    status = 1  # the full parser names the line
                else:
                    st.line += K.count_newlines(buf, n)
                    if k == 0:
                        return None
                    if st.num_cols is None:
                        st.num_cols = 2
                    self.ids.hand_out()
                    return src, dst
        import pandas as pd

        from workbench.data.readers import _parse_block

        _parse_block(pd, buf[:n].tobytes(), st)
        return (st.src.pop(), st.dst.pop()) if st.src else None


class SpilledTextStream:
    """A text :class:`EdgeFileStream` parsed once: its first whole pass parses the text and writes the pairs, as
    they go by, to a temporary raw int32 file in ``folder``; every later pass reads that file as a binary stream
    (a mapped window at a time, no parsing). Same lines in the same order and in the same chunks. Both kinds of
    pass run on the reading thread of :func:`read_ahead` (parsing, packing and writing the spill beside the
    caller's work on the chunk before).

    An id past int32 drops the spill (the passes then parse the text each time). The file (8 bytes a line) goes
    with :meth:`close` (which first stops a pass still reading), or with this object. Memory: one int32 buffer of
    ``SPILL_ROWS`` pairs at most (a chunk is packed and written a slice at a time) on top of the text stream's.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (d / "g.txt").write_text("0 1\\n1 2\\n2 0\\n")
        >>> s = SpilledTextStream(EdgeFileStream(d / "g.txt"), d)
        >>> [c[1].tolist() for c in s], s.spilled, [c[1].tolist() for c in s]
        ([[1, 2, 0]], True, [[1, 2, 0]])
        >>> s.close()
    """

    def __init__(self, text: EdgeFileStream, folder: str | os.PathLike):
        self.text, self.folder = text, Path(folder)
        self.directed, self.num_nodes, self.chunk_edges = text.directed, text.num_nodes, text.chunk_edges
        self.name, self.train_mask, self.path = text.name, text.train_mask, text.path
        self.chunk_range: Optional[tuple[int, int]] = None
        self._binary: Optional[EdgeFileStream] = None
        self._sizes: list[int] = []   # lines per chunk of the text pass
        self._remove = None
        self._passes: weakref.WeakSet = weakref.WeakSet()   # the passes under way (close() stops them)

    @property
    def spilled(self) -> bool:
        """Whether the later passes read the spill file."""
        return self._binary is not None

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        if self._binary is not None:
            chunks = self._read_spill()
        else:
            self.close()
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix="edges-", suffix=".bin", dir=self.folder)
            f = os.fdopen(fd, "wb")
            self._remove = weakref.finalize(self, _remove_spill, f, Path(name))
            chunks = self._parse_and_spill(f, Path(name))
        it = read_ahead(chunks, self)
        self._passes.add(it)
        return it

    def _read_spill(self):
        """The spill's pairs in the text pass's chunks (a line's place in its chunk is part of some results: the
        K = 0 ablation's random side), one mapped window at a time, into reused int64 buffers."""
        from workbench.partition.streaming.kernels import split_pairs

        info = self._binary.binary
        rows = max(self._sizes, default=0)   # the largest chunk: no buffer grows during a pass
        ids = _IdBuffers()
        lo = 0
        for n in self._sizes:
            window = np.memmap(info.path, dtype=info.dtype, mode="r", offset=info.offset + lo * 8, shape=(n, 2))
            src, dst = ids.free(rows)
            id_range = split_pairs(window, src, dst)
            del window
            lo += n
            ids.hand_out()
            yield src[:n], dst[:n], id_range

    def _parse_and_spill(self, f, path: Path):
        """The text pass (on the reading thread): each chunk parsed, then packed and written to the spill ``f``."""
        from workbench.partition.streaming.kernels import pack_pairs

        pairs = np.empty((0, 2), np.int32)
        limit = np.iinfo(np.int32).max
        self._sizes = []
        for src, dst, _ in self.text._text_chunks():
            n = src.size
            self._sizes.append(n)
            id_range = None
            if f is not None:
                need = min(n, SPILL_ROWS)
                if pairs.shape[0] < need:   # the old buffer freed first: never two at once
                    pairs = None
                    pairs = np.empty((min(need + need // 16, SPILL_ROWS), 2), np.int32)
                id_range = (0, -1) if n == 0 else None
                for a in range(0, n, SPILL_ROWS):   # packed and written a slice at a time
                    b = min(a + SPILL_ROWS, n)
                    lo, hi = pack_pairs(src[a:b], dst[a:b], pairs)
                    if lo < 0 or hi > limit:   # the spill cannot hold it: parse every pass
                        self._drop_spill()
                        f, id_range = None, None   # the reader's ensure() finds the chunk's range itself
                        break
                    pairs[:b - a].tofile(f)
                    id_range = (int(lo), int(hi)) if id_range is None else (min(id_range[0], int(lo)),
                                                                              max(id_range[1], int(hi)))
            yield src, dst, id_range
        if f is not None:   # a whole pass written: the next ones read it
            f.flush()
            self._binary = EdgeFileStream(path, chunk_edges=self.chunk_edges, directed=self.directed,
                                          num_nodes=self.num_nodes, dtype="int32")

    def _drop_spill(self) -> None:
        if self._remove is not None:
            self._remove()
        self._remove, self._binary = None, None

    def close(self) -> None:
        """Stop the passes under way (their reading threads end) and remove the spill file (the next pass parses
        the text again)."""
        for it in list(self._passes):
            it.close()
        self._drop_spill()

    def __repr__(self) -> str:
        return f"SpilledTextStream({self.text!r}, spilled={self.spilled})"


def _remove_spill(file, path: Path) -> None:
    file.close()
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


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
