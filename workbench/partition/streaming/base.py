"""Streaming partitioners: the shared driver, the bounded state, neighbour completion and the result.

A :class:`StreamingPartitioner` reads an edge stream (:mod:`.stream`) in chunks, one or more passes, and keeps
only per-vertex and per-part state. Its two result shapes:

* **vertex-cut** (hash, DBH, greedy, HDRF, 2PS-L): each line to one part; a vertex is replicated where its
  lines are. The owner of a replicated vertex is a seeded pseudo-random replica (``owner_rule="random"``, the
  paper's rule) or the part of its last line (``"last"``, the reference code's rule);
* **owner + completion** (SPRING, Hollocou clustering): each vertex one owner.

Both are then **completed** in one more pass: a line also goes to its endpoints' owners, so every owned vertex
keeps its full 1-hop neighbourhood (CATGNN §1.3). Vertices with no line get an owner too: each goes to the
part owning the fewest vertices at that point (lowest index on ties).

Memory (``N`` vertices, ``P`` parts, ``W = ceil(P / 64)``, chunks of ``C`` lines)::

    the passes:  the method's per-vertex arrays, e.g. HDRF N * (8 W replica bitsets + 8 last + 8 pdeg),
                 SPRING N * (8 deg + 8 cid + 8 vol + 8 rich nbr + 8 first)
                 + one chunk: a text block of 16 C bytes, 8 C bytes per id column, 2 C bytes of parts
    completion:  N * (8 owner + 8 W bitsets, twice for owner results) + one chunk (the passes' arrays are
                 freed before it; a vertex-cut's bitsets are completed in place)

plus a few O(N) index arrays in SPRING's merge and schedule, and nothing proportional to the number of edges:
chunk buffers are reused from chunk to chunk, and an assignment that must be kept goes to a binary file chunk
by chunk. :attr:`StreamMetrics.state_bytes` is the measured size of the passes' arrays;
``benchmarks/streaming.py --memory-only`` measures the peak of the whole command against it.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import html
import json
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar, Optional

import numpy as np
import torch

from workbench._validation import ErrorCollector, ParamError
from workbench.partition.base import Partitioner, _json_safe
from workbench.partition.streaming import kernels as K
from workbench.partition.streaming.stream import GraphEdgeStream, as_numpy_mask

__all__ = ["StreamingPartitioner", "StreamPartition", "StreamMetrics", "stream_partition"]

SHAPES = ("vertex-cut", "owner")


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
        if self.file is not None:
            self.file.close()
            os.unlink(self.path)
            self.file = None


class StreamRun:
    """State of one streaming run: the stream, part count, growable per-vertex arrays, timers.

    Per-vertex arrays are registered with :meth:`array` and grow (by a quarter at least) as larger ids appear;
    kernels index them by vertex id.
    """

    def __init__(self, edges, num_parts: int, seed: int, assignment_dir: Optional[Path]):
        self.edges, self.num_parts, self.seed = edges, num_parts, seed
        self.words = (num_parts + 63) // 64
        self.num_nodes = int(getattr(edges, "num_nodes", None) or 0)
        self.capacity = max(self.num_nodes + 1, 1024)  # > num_nodes: cluster ids run to num_nodes
        self._arrays: dict[str, tuple[Any, Any]] = {}
        self.num_lines = 0
        self.phase_s: dict[str, float] = {}
        self._assignment_dir = assignment_dir
        self._scratch: dict[str, np.ndarray] = {}

    def array(self, name: str, dtype, fill, width: Optional[int] = None) -> np.ndarray:
        shape = (self.capacity,) if width is None else (self.capacity, width)
        setattr(self, name, np.full(shape, fill, dtype=dtype))
        self._arrays[name] = (dtype, fill)
        return getattr(self, name)

    def ensure(self, src: np.ndarray, dst: np.ndarray) -> None:
        """Grow every per-vertex array so ids of this chunk fit; track the vertex count."""
        if src.size == 0:
            return
        hi = int(max(src.max(), dst.max())) + 1
        if min(int(src.min()), int(dst.min())) < 0:
            raise ParamError(["The 'edges' parameter of StreamingPartitioner must be non-negative vertex ids. "
                              "Got a negative id instead."])
        self.num_nodes = max(self.num_nodes, hi)
        if hi < self.capacity:
            return
        new_cap = max(hi + 1, self.capacity + self.capacity // 4)  # not doubling: state <= 1.25 x the ids seen
        for name, (dtype, fill) in self._arrays.items():
            old = getattr(self, name)
            grown = np.full((new_cap,) + old.shape[1:], fill, dtype=dtype)
            grown[:old.shape[0]] = old
            setattr(self, name, grown)
        self.capacity = new_cap

    def chunks(self, phase: str, count_lines: bool = False):
        """Iterate the stream once, timing the pass as ``phase`` (parsing included)."""
        start = time.perf_counter()
        n = 0
        for src, dst in self.edges:
            self.ensure(src, dst)
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
        return int(sum(getattr(self, name).nbytes for name in self._arrays))

    def release(self, keep: tuple[str, ...] = ()) -> None:
        """Free the per-vertex arrays other than ``keep`` (the passes that needed them are over), so
        completion's owners and replicas do not come on top of them."""
        for name in [n for n in self._arrays if n not in keep]:
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


# ------------------------------------------------------------------------------------------- result

def _balance(counts: np.ndarray) -> float:
    mean = counts.mean() if counts.size else 0.0
    return float(counts.max() / mean) if mean > 0 else 1.0


@dataclasses.dataclass(eq=False)
class StreamMetrics:
    """The quality and cost metrics of a streaming partition (CATGNN digest §5).

    ``replication_factor`` is the vertex-cut RF of the line assignment that ``edge_assignment.npy`` holds:
    for every vertex, the parts holding one of its lines (a vertex with no line counts once, on its owner),
    over ``num_nodes``. A vertex-cut method's lines sit in their assigned parts; an owner result's (SPRING,
    clustering) on their destination's owner, ``owner[v]``, so the number compares across methods.
    ``replication_factor_completed`` is the same after neighbour completion (owned + halo, the RF CATGNN
    reports). Balances are ``max / mean`` over parts of lines (that assignment / after completion), owned
    vertices and owned training vertices.
    """

    shape: str
    num_nodes: int
    num_lines: int
    num_parts: int
    replication_factor: float
    replication_factor_completed: float
    edge_balance: float
    edge_balance_completed: float
    owner_balance: float
    train_balance: Optional[float]
    part_lines: np.ndarray
    part_lines_completed: np.ndarray
    part_owned: np.ndarray
    part_vertices_completed: np.ndarray
    part_train: Optional[np.ndarray]
    comm_rows: np.ndarray
    """``(P, P)`` halo rows part ``p`` sends part ``q`` in one layer after completion (owned rows to replicas)."""
    phase_s: dict
    elapsed_s: float
    edges_per_s: float
    peak_rss_mb: float
    """Peak RSS of the whole process during the run (MiB; includes the interpreter and libraries)."""
    rss_start_mb: float
    """RSS when the run started (MiB): ``peak_rss_mb - rss_start_mb`` is what the run added."""
    state_bytes: int
    """Bytes of the per-vertex and per-part state arrays after the method's passes (before completion)."""

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out[f.name] = v.tolist() if isinstance(v, np.ndarray) else v
        return out

    def summary(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.to_dict().items()
                if not isinstance(v, (list, dict))}

    def table(self):
        import pandas as pd

        cols = {"owned": self.part_owned, "vertices_completed": self.part_vertices_completed,
                "lines_completed": self.part_lines_completed}
        if self.part_lines is not None:
            cols["lines"] = self.part_lines
        if self.part_train is not None:
            cols["train_vertices"] = self.part_train
        df = pd.DataFrame(cols)
        df.index.name = "part"
        return df

    def __repr__(self) -> str:
        rf = "-" if self.replication_factor is None else f"{self.replication_factor:.3f}"
        return (f"StreamMetrics({self.shape}, parts={self.num_parts}, rf={rf}, "
                f"rf_completed={self.replication_factor_completed:.3f}, owner_balance={self.owner_balance:.3f}, "
                f"edges_per_s={self.edges_per_s:,.0f}, peak_rss_mb={self.peak_rss_mb:.1f})")


@dataclasses.dataclass(eq=False, repr=False)
class StreamPartition:
    """The result of a streaming partitioner: owners, metrics and (optionally) the part of every line.

    ``owner`` ``(num_nodes,)`` is each vertex's owner part (completion included). ``line_part`` (when kept)
    is the part of each line in stream order: the assigned part for vertex-cut, the owner-side part
    ``owner[dst]`` for owner results.
    """

    method: str
    shape: str
    num_parts: int
    owner: np.ndarray
    metrics: StreamMetrics
    options: dict
    source: str
    line_part: Optional[np.ndarray] = None
    _assignment: Optional[_Assignment] = None

    def save(self, out_dir: str | os.PathLike) -> Path:
        """Write the partition.

        Layout::

            out_dir/
              edge_assignment.npy  # int64 (num_lines,): part of each edge line, in file order
                                   # (vertex-cut: the assigned part; owner: owner[dst], the owner side)
              owner.npy            # int64 (num_nodes,): owner part of each vertex (completion included)
              metrics.json         # StreamMetrics.to_dict() + method, shape, options, source

        Returns:
            The output directory.
        """
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        if self.line_part is not None:
            np.save(out / "edge_assignment.npy", self.line_part.astype(np.int64, copy=False))
        elif self._assignment is not None:
            self._assignment.save_npy(out / "edge_assignment.npy")
        np.save(out / "owner.npy", self.owner.astype(np.int64, copy=False))
        info = self.metrics.to_dict()
        info.update(method=self.method, shape=self.shape, options=_json_safe(self.options), source=self.source)
        (out / "metrics.json").write_text(json.dumps(info, indent=2) + "\n")
        return out

    def to_event(self):
        """A :class:`workbench.events.PartitionComputed` for the partition view (owned vertices, halo =
        completed minus owned, the completed result's halo rows per pair of parts)."""
        from workbench.events import PartitionComputed

        m = self.metrics
        metrics = {k: v for k, v in m.summary().items() if v is not None}   # both RFs: lines and completed
        metrics["comm_volume_rows"] = int(m.comm_rows.sum())
        return PartitionComputed(method=self.method, num_parts=self.num_parts, metrics=metrics,
                                 part_sizes=m.part_owned.tolist(),
                                 halo_sizes=(m.part_vertices_completed - m.part_owned).tolist(),
                                 comm_rows=m.comm_rows.tolist())

    def line_parts(self) -> Optional[np.ndarray]:
        """The part of every line (``(num_lines,)`` int64, read from the temporary file if there is one), or
        ``None`` when the assignment was not kept."""
        if self.line_part is not None:
            return self.line_part
        return None if self._assignment is None else self._assignment.to_array()

    def close(self) -> None:
        """Remove the temporary assignment file, if any."""
        if self._assignment is not None:
            self._assignment.close()
            self._assignment = None

    def __repr__(self) -> str:
        return f"StreamPartition({self.method!r}, {self.shape}, num_parts={self.num_parts}, {self.metrics!r})"

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td style='text-align:left'>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>"
                       for k, v in self.metrics.summary().items())
        return (f"<b>StreamPartition</b> <code>{html.escape(self.method)}</code> ({self.shape}, "
                f"{self.num_parts} parts)<div style='display:flex;gap:2em'><table>{rows}</table>"
                f"<div>{self.metrics.table().to_html()}</div></div>")


# ------------------------------------------------------------------------------------------- partitioner base

class StreamingPartitioner(Partitioner):
    """Base of the streaming partitioners: :meth:`stream` partitions an edge stream in bounded memory;
    the registry's :meth:`partition` streams an in-memory graph's edges through the same kernels.

    Subclasses set ``shape`` and implement ``_stream(run)``: vertex-cut ones return the line assignment
    (an ``_Assignment``) and fill ``run.rep``/``run.load``/``run.last``; owner ones return ``owner``.
    """

    shape: ClassVar[str] = "vertex-cut"

    @dataclasses.dataclass(kw_only=True)
    class Config(Partitioner.Config):
        pass

    @abc.abstractmethod
    def _stream(self, run: StreamRun):
        """Run the method's passes over ``run.edges``."""

    # -------------------------------------------------------------------------------- public verbs
    def stream(self, edges, num_parts: int, *, keep_assignment: bool = False, k_hops: int = 1,
               train_mask=None, assignment_dir: Optional[str | os.PathLike] = None) -> StreamPartition:
        """Partition an edge stream into ``num_parts`` parts in bounded memory, then complete it.

        Args:
            edges: an :class:`~workbench.partition.streaming.EdgeFileStream` or
                :class:`~workbench.partition.streaming.GraphEdgeStream` (anything re-iterable over
                ``(src, dst)`` int64 chunks with ``directed`` and ``num_nodes`` attributes).
            num_parts: number of parts, >= 1.
            keep_assignment: keep the part of every line (in memory for an in-memory graph, else in a
                temporary binary file written chunk by chunk; :meth:`StreamPartition.save` writes it).
            k_hops: 1 (full 1-hop completion) or 0 (owner results: a cross line on one side only, the K = 0
                ablation; vertex-cut results are not completed).
            train_mask: optional ``(num_nodes,)`` bool mask for the training-vertex balance (default the
                stream's).
            assignment_dir: folder of the temporary assignment file (default the system temp folder; unused
                for in-memory graphs).

        Raises:
            ParamError: bad part count or ``k_hops``.
        """
        errs = ErrorCollector(type(self).__name__)
        errs.check(isinstance(num_parts, int) and not isinstance(num_parts, bool) and num_parts >= 1,
                   "num_parts", "an int >= 1", num_parts)
        errs.check(k_hops in (0, 1), "k_hops", "0 or 1", k_hops)
        errs.raise_if_any()
        in_memory = isinstance(edges, GraphEdgeStream)
        tmp_dir = None if in_memory else Path(assignment_dir or tempfile.gettempdir())
        _reset_peak_rss()
        rss_start = current_rss_mb()
        start = time.perf_counter()
        run = StreamRun(edges, num_parts, self.config.seed, tmp_dir)
        produced = self._stream(run)
        state_bytes = run.state_bytes()
        # The passes are over: only the replicas (and the last parts, for the owners) are read from here on.
        run.release(keep=("rep", "last") if self.shape == "vertex-cut" else ())
        if self.shape == "vertex-cut":
            assignment = produced
            owner = np.full(run.num_nodes, -1, np.int64)
            if getattr(self.config, "owner_rule", "random") == "last":
                owner[:] = run.trimmed("last")
            else:
                K.pick_owner(run.trimmed("rep"), num_parts, self.config.seed, owner)
        else:
            assignment, owner = None, produced
        fill_unowned(owner, num_parts)
        run.release(keep=("rep",) if self.shape == "vertex-cut" else ())
        keep = keep_assignment and assignment is None
        metrics, out_assign = self._complete(run, owner, assignment, k_hops, keep)
        if assignment is not None and not keep_assignment:
            assignment.close()
            assignment = None
        kept = assignment if assignment is not None else out_assign
        elapsed = time.perf_counter() - start
        mask = as_numpy_mask(train_mask if train_mask is not None else getattr(edges, "train_mask", None))
        part_train = None
        if mask is not None:
            if mask.size != run.num_nodes:
                raise ParamError([f"The 'train_mask' parameter of {type(self).__name__} must be a mask of "
                                  f"num_nodes={run.num_nodes} vertices. Got {mask.size} entries instead."])
            part_train = np.bincount(owner[mask], minlength=num_parts)
        m = StreamMetrics(
            shape=self.shape, num_nodes=run.num_nodes, num_lines=run.num_lines, num_parts=num_parts,
            part_train=part_train, train_balance=None if part_train is None else _balance(part_train),
            phase_s={k: round(v, 4) for k, v in run.phase_s.items()}, elapsed_s=elapsed,
            edges_per_s=run.num_lines / elapsed if elapsed > 0 else 0.0, peak_rss_mb=peak_rss_mb(), rss_start_mb=rss_start,
            state_bytes=state_bytes, **metrics)
        line_part = None
        if kept is not None and kept.file is None:
            line_part = kept.to_array()
            kept = None
        return StreamPartition(method=self.name, shape=self.shape, num_parts=num_parts, owner=owner, metrics=m,
                               options=self.config.to_dict(), source=getattr(edges, "name", repr(edges)),
                               line_part=line_part, _assignment=kept)

    def _partition(self, graph, num_parts: int) -> torch.Tensor:
        edges = GraphEdgeStream(graph)
        result = self.stream(edges, num_parts, keep_assignment=self.shape == "vertex-cut")
        if self.shape == "owner":
            return torch.from_numpy(result.owner[:graph.num_nodes])
        return torch.from_numpy(result.line_part[edges.line_of_edge])

    # -------------------------------------------------------------------------------- completion
    def _complete(self, run: StreamRun, owner: np.ndarray, assignment: Optional[_Assignment], k_hops: int,
                  keep: bool):
        P, n = run.num_parts, run.num_nodes
        vertex_cut = assignment is not None
        if vertex_cut:
            rep = run.trimmed("rep")
            rf = float(K.count_replicas(rep, 1) / n) if n else 0.0
            part_lines = run.load.copy()
            rep_c = rep  # completed in place: nothing reads the assignment's replicas after this
        else:   # the owner-side lines (edge_assignment.npy) as a vertex-cut: its RF compares across methods
            rf, part_lines = None, np.zeros(P, np.int64)
            rep_c = np.zeros((n, run.words), np.uint64)
            rep_l = np.zeros((n, run.words), np.uint64)
        K.set_owner_bits(rep_c, owner)
        load_c = np.zeros(P, np.int64)
        rule = 0 if (vertex_cut or k_hops == 1) else (1 if getattr(self.config, "variant", "") == "reference" else 2)
        both = not run.edges.directed
        out_assign = run.new_assignment() if keep else None
        offset = 0
        start = time.perf_counter()
        for src, dst in run.edges:
            if vertex_cut:
                parts = assignment.read(offset, src.size)
            else:
                parts = run.scratch("parts", src.size, part_dtype(P))
                parts.fill(-1)
            side = run.scratch("side", src.size, part_dtype(P))
            K.complete_chunk(src, dst, parts, owner, both, rule, run.seed, rep_c, load_c, side)
            if not vertex_cut:
                K.line_replicas_chunk(src, dst, side, rep_l, part_lines)
            if out_assign is not None:
                out_assign.append(side)
            offset += src.size
        run.phase_s["completion"] = time.perf_counter() - start
        run.num_lines = offset
        if not vertex_cut:
            rf = float(K.count_replicas(rep_l, 1) / n) if n else 0.0
            del rep_l
        metrics = dict(
            replication_factor=rf,
            replication_factor_completed=float(K.count_replicas(rep_c, 0) / n) if n else 0.0,
            edge_balance=None if part_lines is None else _balance(part_lines),
            edge_balance_completed=_balance(load_c), owner_balance=_balance(np.bincount(owner, minlength=P)),
            part_lines=part_lines, part_lines_completed=load_c, part_owned=np.bincount(owner, minlength=P),
            part_vertices_completed=K.part_counts(rep_c, P), comm_rows=K.owner_comm_rows(rep_c, owner, P))
        return metrics, out_assign


def stream_partition(path_or_graph, num_parts: int, method: str = "spring", *, chunk_edges: int = 1 << 20,
                     directed: bool = False, num_nodes: Optional[int] = None, keep_assignment: bool = False,
                     seed: int = 0, **options: Any) -> StreamPartition:
    """Partition an edge file (or an in-memory graph) with a streaming method.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "g.txt"
        >>> _ = p.write_text("0 1\\n1 2\\n2 0\\n3 4\\n4 5\\n5 3\\n")
        >>> r = stream_partition(p, 2, method="spring")
        >>> sorted(r.owner.tolist()), r.metrics.replication_factor_completed
        ([0, 0, 0, 1, 1, 1], 1.0)
    """
    from workbench.graph import Graph
    from workbench.partition.base import get_partitioner
    from workbench.partition.streaming.stream import EdgeFileStream

    cls = get_partitioner(method)
    if not issubclass(cls, StreamingPartitioner):
        raise ParamError([f"The 'method' parameter of stream_partition must be a streaming partitioner. "
                          f"Got {method!r} instead."])
    part = cls(seed=seed, **options)
    if isinstance(path_or_graph, Graph):
        edges = GraphEdgeStream(path_or_graph, chunk_edges=chunk_edges)
    else:
        edges = EdgeFileStream(path_or_graph, chunk_edges=chunk_edges, directed=directed, num_nodes=num_nodes)
    return part.stream(edges, num_parts, keep_assignment=keep_assignment)
