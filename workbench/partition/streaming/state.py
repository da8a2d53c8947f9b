"""The bounded state of one streaming run: the per-vertex arrays, grown as larger ids appear (:class:`StreamRun`),
the part of every line (in memory, or a binary file written and read chunk by chunk), and the process-memory
readings that :class:`~workbench.partition.streaming.result.StreamMetrics` reports.

What this state costs per vertex and per chunk is in :mod:`workbench.partition.streaming.base`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any, Optional

import numpy as np

import workbench.partition.streaming.kernels as K
from workbench._validation import ParamError

__all__ = ["StreamRun", "part_dtype", "index_dtype", "INDEX", "fill_unowned", "current_rss_mb", "peak_rss_mb"]


# ------------------------------------------------------------------------------------------- memory helpers

def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter of this process (Linux ``clear_refs``); False if unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    try:
        import ctypes

        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):   # not glibc
        return None


def _trim_heap() -> None:
    """Hand freed heap pages back to the kernel (glibc's ``malloc_trim``; nothing elsewhere).

    glibc serves blocks below its mmap threshold from the heap and raises that threshold to the size of every
    mapped block freed (up to 32 MiB): once a pass has freed its 16 MiB text buffer, per-vertex arrays come
    from the heap, and freeing them leaves their pages resident until trimmed.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def current_rss_mb() -> float:
    """Resident set size of this process now, in MiB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB (``VmHWM``, since the last reset; else ``ru_maxrss``)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ------------------------------------------------------------------------------------------- run context

def part_dtype(num_parts: int):
    """The smallest signed integer type holding a part id or -1 (the dtype of per-line part arrays)."""
    return np.int16 if num_parts < 2 ** 15 else np.int32


def index_dtype(capacity: int):
    """The type of per-vertex arrays holding vertex ids, cluster ids or first-seen ranks (all below
    ``capacity``) and -1: int32 while ``capacity < 2^31``, else int64."""
    return np.int32 if capacity < 2 ** 31 else np.int64


INDEX = "index"
"""The ``dtype`` of :meth:`StreamRun.array` for ids below the capacity: :func:`index_dtype`, widened on growth."""


def _grown(buf: np.ndarray, size: int, dtype) -> np.ndarray:
    """``buf`` if it holds ``size`` entries of ``dtype``, else a new buffer with room for 1/16 more (chunks vary a
    little in length: growing to each longer chunk would reallocate on many of them)."""
    if buf.size >= size and buf.dtype == dtype:
        return buf
    return np.empty(size + size // 16, dtype)


class _Assignment:
    """Part per line, in stream order (:func:`part_dtype`): an in-memory list of chunks or a binary file.

    A file is written and read chunk by chunk; :meth:`read` returns a view of one buffer reused from read to
    read, valid until the next read.
    """

    def __init__(self, num_parts: int, path: Optional[Path]):
        self.dtype = part_dtype(num_parts)
        self.path = path
        self.chunks: list[np.ndarray] = []
        self.file = open(path, "w+b") if path is not None else None
        # the file goes when this object does (a StreamPartition kept it and was dropped), or at exit
        self._remove = weakref.finalize(self, _remove_file, self.file, path) if path is not None else None
        self.size = 0
        self._buf = np.empty(0, self.dtype)

    def _write_at(self, offset: int, parts: np.ndarray) -> None:
        if parts.dtype != self.dtype:
            self._buf = _grown(self._buf, parts.size, self.dtype)
            small = self._buf[:parts.size]
            np.copyto(small, parts, casting="unsafe")
            parts = small
        self.file.seek(offset * parts.itemsize)
        parts.tofile(self.file)

    def append(self, parts: np.ndarray) -> None:
        if self.file is None:
            self.chunks.append(parts.astype(self.dtype))
        else:
            self._write_at(self.size, parts)
        self.size += parts.size

    def _flat(self) -> np.ndarray:
        if len(self.chunks) != 1:
            self.chunks = [np.concatenate(self.chunks) if self.chunks else np.zeros(0, self.dtype)]
        return self.chunks[0]

    def read(self, offset: int, n: int) -> np.ndarray:
        if self.file is None:
            return self._flat()[offset:offset + n].copy()
        self._buf = _grown(self._buf, n, self.dtype)
        out = self._buf[:n]
        self.file.seek(offset * out.itemsize)
        got = self.file.readinto(memoryview(out.view(np.uint8)))
        assert got == out.nbytes, "the assignment file is shorter than the stream"
        return out

    def write(self, offset: int, parts: np.ndarray) -> None:
        if self.file is None:
            self._flat()[offset:offset + parts.size] = parts
        else:
            self._write_at(offset, parts)

    def to_array(self) -> np.ndarray:
        if self.file is None:
            return np.concatenate(self.chunks).astype(np.int64) if self.chunks else np.zeros(0, np.int64)
        self.file.flush()
        return np.fromfile(self.path, dtype=self.dtype).astype(np.int64)

    def save_npy(self, dest: Path, chunk: int = 1 << 20) -> None:
        """Write as ``.npy`` (int64) chunk by chunk."""
        with open(dest, "wb") as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<i8", "fortran_order": False, "shape": (self.size,)})
            for lo in range(0, self.size, chunk):
                self.read(lo, min(chunk, self.size - lo)).astype("<i8", copy=False).tofile(f)

    def close(self) -> None:
        if self._remove is not None:
            self._remove()
        self.file = None


def _remove_file(file, path: Path) -> None:
    file.close()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


class StreamRun:
    """State of one streaming run: the stream, part count, growable per-vertex arrays, timers.

    Per-vertex arrays are registered with :meth:`array` and grow (by a quarter at least) as larger ids appear;
    kernels index them by vertex id. Arrays of ids (``dtype=INDEX``) are int32 until the capacity reaches 2^31,
    then widened to int64.
    """

    def __init__(self, edges, num_parts: int, seed: int, assignment_dir: Optional[Path]):
        self.edges, self.num_parts, self.seed = edges, num_parts, seed
        self.rep_dtype, self.words = K.rep_dtype(num_parts), K.rep_words(num_parts)   # replica bitset rows
        self.num_nodes = int(getattr(edges, "num_nodes", None) or 0)
        self.capacity = max(self.num_nodes + 1, 1024)  # > num_nodes: cluster ids run to num_nodes
        self._arrays: dict[str, tuple[Any, Any]] = {}
        self.num_lines = 0
        self.phase_s: dict[str, float] = {}
        self._assignment_dir = assignment_dir
        self._scratch: dict[str, np.ndarray] = {}
        self._state_peak = 0   # the largest state_bytes before a release

    def array(self, name: str, dtype, fill, width: Optional[int] = None) -> np.ndarray:
        """Register and allocate a per-vertex array; ``dtype=INDEX`` for ids below the capacity (and -1)."""
        shape = (self.capacity,) if width is None else (self.capacity, width)
        setattr(self, name, np.full(shape, fill, dtype=self._dtype(dtype, self.capacity)))
        self._arrays[name] = (dtype, fill)
        return getattr(self, name)

    @staticmethod
    def _dtype(dtype, capacity: int):
        return index_dtype(capacity) if isinstance(dtype, str) and dtype == INDEX else dtype

    def widen(self, name: str, dtype) -> np.ndarray:
        """Re-type a registered array (a count about to overflow its type), keeping its values."""
        setattr(self, name, getattr(self, name).astype(dtype))
        self._arrays[name] = (dtype, self._arrays[name][1])
        return getattr(self, name)

    def ensure(self, src: np.ndarray, dst: np.ndarray, id_range: Optional[tuple[int, int]] = None) -> None:
        """Grow every per-vertex array so ids of this chunk fit; track the vertex count. ``id_range``: the
        chunk's smallest and largest id when the reader found them (else one compiled pass finds them)."""
        if src.size == 0:
            return
        lo, hi = id_range if id_range is not None else K.id_range(src, dst)
        hi = int(hi) + 1
        if lo < 0:
            raise ParamError(["The 'edges' parameter of StreamingPartitioner must be non-negative vertex ids. "
                              "Got a negative id instead."])
        self.num_nodes = max(self.num_nodes, hi)
        if hi < self.capacity:
            return
        new_cap = max(hi + 1, self.capacity + self.capacity // 4)  # not doubling: state <= 1.25 x the ids seen
        for name, (dtype, fill) in self._arrays.items():
            old = getattr(self, name)
            grown = np.full((new_cap,) + old.shape[1:], fill, dtype=self._dtype(dtype, new_cap))
            grown[:old.shape[0]] = old
            setattr(self, name, grown)
        self.capacity = new_cap

    def chunks(self, phase: str, count_lines: bool = False):
        """Iterate the stream once, timing the pass as ``phase`` (parsing included)."""
        start = time.perf_counter()
        n = 0
        for src, dst in self.edges:
            self.ensure(src, dst, getattr(self.edges, "chunk_range", None))
            yield src, dst
            n += src.size
        if count_lines:
            self.num_lines = n
        self.phase_s[phase] = self.phase_s.get(phase, 0.0) + time.perf_counter() - start

    def new_assignment(self) -> _Assignment:
        path = None
        if self._assignment_dir is not None:
            self._assignment_dir.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix="assign-", suffix=".bin", dir=self._assignment_dir)
            os.close(fd)
            path = Path(name)
        return _Assignment(self.num_parts, path)

    def scratch(self, name: str, size: int, dtype) -> np.ndarray:
        """A per-chunk buffer of ``size`` entries, reused (grown when needed) from chunk to chunk, so chunk
        temporaries never pile up; not part of the state."""
        buf = self._scratch[name] = _grown(self._scratch.get(name, np.empty(0, dtype)), size, dtype)
        return buf[:size]

    def trimmed(self, name: str) -> np.ndarray:
        return getattr(self, name)[:self.num_nodes]

    def state_bytes(self) -> int:
        """Bytes of the per-vertex arrays: the most they held together (arrays freed by :meth:`release` count
        until then)."""
        return max(self._state_peak, int(sum(getattr(self, name).nbytes for name in self._arrays)))

    def release(self, keep: tuple[str, ...] = (), names: Optional[tuple[str, ...]] = None) -> None:
        """Free the per-vertex arrays other than ``keep`` (or only ``names``: the passes that needed them are
        over), so what comes next does not come on top of them."""
        self._state_peak = self.state_bytes()
        for name in [n for n in self._arrays if n not in keep and (names is None or n in names)]:
            del self._arrays[name]
            delattr(self, name)
        self._scratch.clear()
        _trim_heap()


def fill_unowned(owner: np.ndarray, num_parts: int) -> None:
    """Give each vertex with ``owner == -1`` to the part owning the fewest vertices (lowest index on ties)."""
    lonely = np.flatnonzero(owner < 0)
    if lonely.size:
        counts = K.owned_counts(owner, num_parts)
        owner[lonely] = K.list_schedule(np.zeros(lonely.size, np.int64), np.ones(1, np.int64), num_parts, counts)
