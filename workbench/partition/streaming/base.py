"""Streaming partitioners: the shared driver (:class:`StreamingPartitioner`: the passes, neighbour completion,
the metrics) and :func:`stream_partition`. The bounded state of a run is in :mod:`.state`, the result in
:mod:`.result`.

A :class:`StreamingPartitioner` reads an edge stream (:mod:`.stream`) in chunks, one or more passes, and keeps
only per-vertex and per-part state. Its two result shapes:

* **vertex-cut** (hash, DBH, greedy, HDRF, 2PS-L): each line to one part; a vertex is replicated where its
  lines are. The owner of a replicated vertex is a seeded pseudo-random replica (``owner_rule="random"``, the
  paper's rule) or the part of its last line (``"last"``, the reference code's rule);
* **owner + completion** (SPRING, Hollocou clustering): each vertex one owner.

Both are then **completed** in one more pass: a line also goes to its endpoints' owners, so every owned vertex
keeps its full 1-hop neighbourhood (CATGNN §3.2). Vertices with no line get an owner too: each goes to the
part owning the fewest vertices at that point (lowest index on ties).

Memory (``N`` vertices, ``P`` parts, ``B`` bytes a replica bitset row: ``P`` bits rounded up to 8, 16, 32 or a
multiple of 64, chunks of ``C`` lines; ids, degrees and counts are int32 below 2^31 vertices, widened to int64
where a count would overflow or the vertices pass 2^31)::

    the passes:  the method's per-vertex arrays, e.g. HDRF N * (B replica bitsets + 4 pdeg; + 2 last part for
                 owner_rule='last'), SPRING N * (4 deg + 4 cid + 4 vol + 4 rich nbr + 4 first)
                 + the chunks: a text block of 16 C bytes, two chunks of ids in flight (the pass's and the
                 next, read ahead) of 16 C bytes each, 2 C bytes of parts, a text pass's 512 KiB spill buffer
    SPRING's merge: the volumes freed; per cluster 4 size + 4 representative + 4 parent + 1 visited and an
                 8-byte heap key; then degrees and richest neighbours freed before the schedule
    completion:  N * (8 owner + 2 narrow owner copy + B bitsets, twice for owner results) + one chunk (the
                 passes' arrays are freed before it; a vertex-cut's bitsets are completed in place)

measured on papers-like graphs (16 parts) about 30 bytes a vertex at SPRING's merge, 24 in its passes and
completion (74 at its schedule before the narrow types), and nothing proportional to the number of edges:
chunk buffers are reused from chunk to chunk, and an assignment that must be kept goes to a binary file chunk
by chunk. A text file is parsed once: its first pass also writes the pairs to a temporary int32 file on disk
(8 bytes a line, :class:`~workbench.partition.streaming.stream.SpilledTextStream`) that the later passes read;
the file goes at the end of the run, failed or not. A file's chunks are read (parsed, or split from a binary
window) on a background thread one chunk ahead of the pass (:func:`~workbench.partition.streaming.stream.read_ahead`),
so with two cores parsing overlaps the method's work; the kernels release the GIL (``nogil``) for that.
:attr:`StreamMetrics.state_bytes` is the most the passes' arrays held at once;
``benchmarks/streaming.py --memory-only`` measures the peak of the whole command against it.
"""

from __future__ import annotations

import abc
import dataclasses
import os
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar, Optional

import numpy as np
import torch

import workbench.partition.streaming.kernels as K
from workbench._validation import ErrorCollector, ParamError
from workbench.graph import Graph
from workbench.partition.base import Partitioner, get_partitioner
from workbench.partition.streaming.result import StreamMetrics, StreamPartition, _balance
from workbench.partition.streaming.state import (StreamRun, _Assignment, _reset_peak_rss, current_rss_mb,
                                                 fill_unowned, part_dtype, peak_rss_mb)
from workbench.partition.streaming.stream import EdgeFileStream, GraphEdgeStream, SpilledTextStream, as_numpy_mask

__all__ = ["StreamingPartitioner", "StreamPartition", "StreamMetrics", "stream_partition"]

SHAPES = ("vertex-cut", "owner")


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
               train_mask=None, assignment_dir: Optional[str | os.PathLike] = None,
               spill_text: bool = True) -> StreamPartition:
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
            spill_text: parse a text file once: the first pass also writes its pairs to a temporary int32 file
                in ``assignment_dir`` (8 bytes a line) that the later passes read instead of the text
                (:class:`~workbench.partition.streaming.stream.SpilledTextStream`); False parses every pass.

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
        spill = None
        if spill_text and isinstance(edges, EdgeFileStream) and edges.binary is None:
            spill = SpilledTextStream(edges, tmp_dir)   # every method passes at least twice: parse once
        try:
            return self._run(spill or edges, edges, num_parts, keep_assignment, k_hops, train_mask, tmp_dir,
                             rss_start, start)
        finally:
            if spill is not None:
                spill.close()

    def _run(self, stream, edges, num_parts, keep_assignment, k_hops, train_mask, tmp_dir, rss_start, start):
        run = StreamRun(stream, num_parts, self.config.seed, tmp_dir)
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
            rep_c = np.zeros((n, run.words), run.rep_dtype)
            rep_l = np.zeros((n, run.words), run.rep_dtype)
        owner_p = owner.astype(part_dtype(P))   # narrow: completion's random reads stay in cache
        K.set_owner_bits(rep_c, owner_p)
        load_c = np.zeros(P, np.int64)
        rule = 0 if (vertex_cut or k_hops == 1) else (1 if getattr(self.config, "variant", "") == "reference" else 2)
        both = not run.edges.directed
        out_assign = run.new_assignment() if keep else None
        offset = 0
        start = time.perf_counter()
        for src, dst in run.edges:
            side = run.scratch("side", src.size, part_dtype(P))
            if vertex_cut:
                K.complete_chunk(src, dst, assignment.read(offset, src.size), owner_p, both, rep_c, load_c, side)
            else:
                K.complete_owner_chunk(src, dst, owner_p, both, rule, run.seed, rep_c, load_c, rep_l, part_lines,
                                       side)
            if out_assign is not None:
                out_assign.append(side)
            offset += src.size
        run.phase_s["completion"] = time.perf_counter() - start
        run.num_lines = offset
        if not vertex_cut:
            rf = float(K.count_replicas(rep_l, 1) / n) if n else 0.0
            del rep_l
        counts_c, comm = K.completed_counts(rep_c, owner_p, P)
        metrics = dict(
            replication_factor=rf,
            replication_factor_completed=float(int(counts_c.sum()) / n) if n else 0.0,
            edge_balance=None if part_lines is None else _balance(part_lines),
            edge_balance_completed=_balance(load_c), owner_balance=_balance(np.bincount(owner, minlength=P)),
            part_lines=part_lines, part_lines_completed=load_c, part_owned=np.bincount(owner, minlength=P),
            part_vertices_completed=counts_c, comm_rows=comm)
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
