"""The registered streaming partitioners: hash, DBH, greedy, HDRF, 2PS-L, Hollocou clustering and SPRING.

Each is a few lines of orchestration over the compiled kernels of :mod:`.kernels_vertex_cut` and
:mod:`.kernels_clustering`; the state lives in a :class:`~workbench.partition.streaming.state.StreamRun`.
Degrees count both endpoints of every line.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Annotated

import numpy as np

from workbench.constraints import Interval, Options
from workbench.partition.base import register_partitioner
from workbench.partition.streaming.base import StreamingPartitioner
from workbench.partition.streaming.kernels import degree_chunk, list_schedule
from workbench.partition.streaming.kernels_clustering import (first_seen_of_roots, hollocou_chunk, owners_of_roots,
                                                              spring_merge, twops_cluster_chunk, twops_pre_chunk,
                                                              twops_rest_chunk)
from workbench.partition.streaming.kernels_vertex_cut import dbh_chunk, greedy_cases_chunk, hash_chunk, hdrf_chunk
from workbench.partition.streaming.state import INDEX, StreamRun, part_dtype

__all__ = ["STREAMING_METHODS", "HashPartitioner", "DBHPartitioner", "GreedyPartitioner", "HDRFPartitioner",
           "TwoPSLPartitioner", "ClusteringPartitioner", "SpringPartitioner"]

STREAMING_METHODS = ("hash", "dbh", "greedy", "hdrf", "2ps-l", "clustering", "spring")
"""The registered streaming partitioners (``workbench partition --stream --method NAME``)."""


class _VertexCut(StreamingPartitioner):
    kind = "vertex-cut"
    shape = "vertex-cut"

    @dataclasses.dataclass(kw_only=True)
    class Config(StreamingPartitioner.Config):
        owner_rule: Annotated[str, Options("random", "last")] = "random"
        """Owner of a replicated vertex: 'random' (a seeded random replica, the paper) or 'last' (the part of
        its last line, the reference code)."""

    def _state(self, run: StreamRun) -> None:
        run.array("rep", run.rep_dtype, 0, width=run.words)
        if self.config.owner_rule == "last":
            run.array("last", part_dtype(run.num_parts), -1)
        else:   # not tracked: only the owner rule 'last' reads it
            run.last = np.empty(0, part_dtype(run.num_parts))
        run.load = np.zeros(run.num_parts, np.int64)

    def _one_pass(self, run: StreamRun, phase: str, kernel, args, counts: str = ""):
        """One assignment pass; ``counts`` names a per-vertex count the kernel stops before overflowing (it
        returns the lines done): the count is widened to int64 and the chunk's rest assigned."""
        assignment = run.new_assignment()
        for src, dst in run.chunks(phase, count_lines=True):
            out = run.scratch("out", src.size, assignment.dtype)
            done = kernel(src, dst, *args(), run.rep, run.load, run.last, out)
            if counts and done < src.size:
                run.widen(counts, np.int64)
                kernel(src[done:], dst[done:], *args(), run.rep, run.load, run.last, out[done:])
            assignment.append(out)
        return assignment


def _count_limit(counts: np.ndarray) -> int:
    return int(np.iinfo(counts.dtype).max)


def _degree_pass(run: StreamRun) -> np.ndarray:
    """Full degrees, int32 unless one would pass 2^31 - 1 (then widened to int64 where it happens)."""
    run.array("deg", np.int32, 0)
    for src, dst in run.chunks("degrees", count_lines=True):
        done = degree_chunk(src, dst, run.deg, _count_limit(run.deg))
        if done < src.size:
            run.widen("deg", np.int64)
            degree_chunk(src[done:], dst[done:], run.deg, _count_limit(run.deg))
    return run.deg


@register_partitioner
class HashPartitioner(_VertexCut):
    """Random hashing: each line to ``hash(seed, min(u, v), max(u, v)) mod P`` (a true seeded hash, unlike the
    CATGNN reference code's ``i * j * random()``). One pass, no degrees.

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> g = Graph.from_edges(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 0]), 4)
        >>> HashPartitioner(seed=0).partition(g, 2).kind
        'vertex-cut'
    """

    name = "hash"

    @dataclasses.dataclass(kw_only=True)
    class Config(_VertexCut.Config):
        pass

    def _stream(self, run):
        self._state(run)
        return self._one_pass(run, "assign", hash_chunk, lambda: (run.num_parts, run.seed))


@register_partitioner
class DBHPartitioner(_VertexCut):
    """Degree-based hashing (Xie, Yan, Li, Zhang, "Distributed power-law graph computing: theoretical and
    empirical analysis", NIPS 2014): hash the lower-degree endpoint, so high-degree vertices are the ones cut.

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> g = Graph.from_edges(torch.tensor([0, 0, 0, 1]), torch.tensor([1, 2, 3, 2]), 4)
        >>> DBHPartitioner().partition(g, 2).edge_part.numel()
        4
    """

    name = "dbh"

    @dataclasses.dataclass(kw_only=True)
    class Config(_VertexCut.Config):
        degrees: Annotated[str, Options("full", "partial")] = "full"
        """'full' (a degree pass first, as the reference code) or 'partial' (degrees seen so far)."""

    def _stream(self, run):
        partial = self.config.degrees == "partial"
        if partial:
            run.array("deg", np.int64, 0)
        else:
            _degree_pass(run)
        self._state(run)
        return self._one_pass(run, "assign", dbh_chunk, lambda: (run.num_parts, run.seed, run.deg, partial))


@register_partitioner
class HDRFPartitioner(_VertexCut):
    """HDRF (Petroni, Querzoni, Daudjee, Kamali, Iacoboni, "HDRF: stream-based partitioning for power-law
    graphs", CIKM 2015): ``argmax_p g(u,p) + g(v,p) + lam (maxsize - |P_p|) / (eps + maxsize - minsize)`` with
    ``g(x,p) = 1 + (1 - theta(x))`` when ``p`` holds ``x`` and partial degrees counted before scoring;
    ties to the lowest part (the CATGNN reference code). O(P) per line.

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> g = Graph.from_edges(torch.tensor([0, 1, 2, 3, 4]), torch.tensor([1, 2, 0, 4, 5]), 6)  # 2 components
        >>> HDRFPartitioner(lam=1.0).partition(g, 2).edge_part.tolist()
        [0, 0, 0, 1, 1]
    """

    name = "hdrf"

    @dataclasses.dataclass(kw_only=True)
    class Config(_VertexCut.Config):
        lam: Annotated[float, Interval(0, None)] = 1.0
        """Balance weight lambda (> 1 pushes towards balance, 0 is pure replication greed)."""
        eps: Annotated[float, Interval(0, None, closed="neither")] = 1.0
        """Epsilon in the balance term's denominator (> 0)."""

    _greedy = False

    def _stream(self, run):
        self._state(run)
        run.array("pdeg", np.int32, 0)
        c = self.config
        return self._one_pass(run, "assign", hdrf_chunk,
                              lambda: (run.num_parts, float(c.lam), float(c.eps), self._greedy, run.pdeg,
                                       _count_limit(run.pdeg)), counts="pdeg")


@register_partitioner
class GreedyPartitioner(_VertexCut):
    """PowerGraph's greedy vertex-cut (Gonzalez, Low, Gu, Bickson, Guestrin, "PowerGraph: distributed
    graph-parallel computation on natural graphs", OSDI 2012).

    ``rule="score"`` is the score form CATGNN uses (HDRF's encoding: ``[p holds u] + [p holds v]`` plus the
    balance term with ``lam = eps = 1``); ``rule="cases"`` the paper's four case rules (a degree pass first,
    for the "more unassigned edges" rule).

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> g = Graph.from_edges(torch.tensor([0, 1, 2, 3, 4]), torch.tensor([1, 2, 0, 4, 5]), 6)  # 2 components
        >>> GreedyPartitioner(rule="cases").partition(g, 2).edge_part.tolist()
        [0, 0, 0, 1, 1]
    """

    name = "greedy"

    @dataclasses.dataclass(kw_only=True)
    class Config(_VertexCut.Config):
        rule: Annotated[str, Options("score", "cases")] = "score"
        """'score' (the HDRF-paper encoding CATGNN runs) or 'cases' (PowerGraph's four rules)."""

    def _stream(self, run):
        if self.config.rule == "score":
            self._state(run)
            run.array("pdeg", np.int32, 0)
            return self._one_pass(run, "assign", hdrf_chunk,
                                  lambda: (run.num_parts, 1.0, 1.0, True, run.pdeg, _count_limit(run.pdeg)),
                                  counts="pdeg")
        _degree_pass(run)
        self._state(run)
        run.array("seen", np.int64, 0)
        return self._one_pass(run, "assign", greedy_cases_chunk, lambda: (run.num_parts, run.deg, run.seen))


def _cluster_state(run: StreamRun) -> None:
    """Cluster state, after a pass that counted the lines: volumes are sums of degrees, at most twice the lines,
    so int32 while that fits (narrow state keeps the pass's random accesses in cache)."""
    run.array("cid", INDEX, 0)      # cluster ids run to the vertices seen + 1 <= capacity
    run.array("vol", np.int32 if 2 * run.num_lines < np.iinfo(np.int32).max else np.int64, 0)
    run.array("first", INDEX, -1)
    run.counters = np.array([1, 0], np.int64)


@register_partitioner
class TwoPSLPartitioner(_VertexCut):
    """2PS-L (Mayer, Orujzade, Jacobsen, "Out-of-core edge partitioning at linear run-time", ICDE 2022):
    phase 1 streaming clustering (``passes`` passes, volume cap ``0.1 * sum(deg) / P``), clusters by volume
    descending to the part with least volume, phase 2a lines inside one part's clusters, phase 2b the rest
    scored over the two candidate parts only, hard cap ``1.05 * lines / P``.

    ``scoring="port"`` is CATGNN's port: lines across parts skip the scoring and take
    (higher-degree endpoint) mod P, falling back to part 0.

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> g = Graph.from_edges(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 0]), 4)
        >>> TwoPSLPartitioner().partition(g, 2).edge_part.numel()
        4
    """

    name = "2ps-l"

    @dataclasses.dataclass(kw_only=True)
    class Config(_VertexCut.Config):
        scoring: Annotated[str, Options("original", "port")] = "original"
        """'original' (2PS-L's phase-2 scoring) or 'port' (CATGNN's port)."""
        passes: Annotated[int, Interval(1, None)] = 2
        """Clustering passes over the stream (re-streaming; 2PS-L's default 2)."""
        cap_factor: Annotated[float, Interval(0, None, closed="neither")] = 0.1
        """Cluster volume cap = cap_factor * sum(deg) / P."""

    def _stream(self, run):
        c, P = self.config, run.num_parts
        deg = _degree_pass(run)
        _cluster_state(run)
        cap = int(c.cap_factor * int(deg.sum()) / P)
        for k in range(c.passes):
            for src, dst in run.chunks(f"cluster{k + 1}"):
                twops_cluster_chunk(src, dst, run.deg, run.cid, run.vol, run.first, run.counters, cap)
        start = time.perf_counter()
        num_clusters = int(run.counters[0])
        vol = run.vol[:num_clusters]
        order = np.lexsort((np.arange(num_clusters), -vol))
        order = order[vol[order] > 0]
        cpart = np.zeros(num_clusters, np.int64)
        cpart[order] = list_schedule(order, vol.astype(np.int64), P, np.zeros(P, np.int64))
        run.array("vpart", part_dtype(P), 0)
        run.vpart[:] = cpart[np.minimum(run.cid, num_clusters - 1)]
        run.phase_s["schedule"] = time.perf_counter() - start
        self._state(run)
        cap_load = 1.05 * run.num_lines / P
        assignment = self._one_pass(run, "assign_2a", twops_pre_chunk, lambda: (run.vpart, cap_load))
        offset = 0
        for src, dst in run.chunks("assign_2b"):
            out = assignment.read(offset, src.size)
            twops_rest_chunk(src, dst, P, run.deg, run.cid, run.vol, run.vpart, cap_load, c.scoring == "port",
                               run.rep, run.load, run.last, out)
            assignment.write(offset, out)
            offset += src.size
        return assignment


# ------------------------------------------------------------------------------------------- owner results

class _Owner(StreamingPartitioner):
    kind = "edge-cut"
    shape = "owner"

    @dataclasses.dataclass(kw_only=True)
    class Config(StreamingPartitioner.Config):
        tau_factor: Annotated[float, Interval(0, None, closed="neither")] = 0.1
        """Cluster volume cap tau_vol = tau_factor * sum(deg) / P (the reference code's 0.1 |E_stream| / p)."""
        passes: Annotated[int, Interval(1, None)] = 1
        """Clustering passes over the stream."""

    def _cluster(self, run: StreamRun, partial: bool = False) -> None:
        """Degree pass (unless ``partial``) and Step A passes."""
        if partial:
            run.array("deg", np.int64, 0)
            for _ in run.chunks("scan", count_lines=True):  # lines and max id, for tau
                pass
            tau = self.config.tau_factor * 2 * run.num_lines / run.num_parts
        else:
            _degree_pass(run)
            tau = self.config.tau_factor * int(run.deg.sum()) / run.num_parts
        _cluster_state(run)
        run.array("rn", INDEX, -1)
        for k in range(self.config.passes):
            for src, dst in run.chunks(f"cluster{k + 1}"):
                hollocou_chunk(src, dst, run.deg, run.cid, run.vol, run.rn, run.first, run.counters, tau, partial)

    def _schedule(self, run: StreamRun, root: np.ndarray, size: np.ndarray, order_rule: str) -> np.ndarray:
        """Step C: clusters to parts by node count; ``order_rule`` 'lpt' (size descending, ties to the cluster
        seen first), 'lpt-id' (size descending, ties to the lower id) or 'first' (first-occurrence order)."""
        n = run.num_nodes
        cid = run.cid[:n]
        # per cluster, when its first vertex was seen (first-seen ranks are distinct, so no ties): one compiled
        # pass, so the memory stays that of the vertex state (an argsort of the seen vertices took 8 of them at
        # 10^8 vertices)
        none = np.iinfo(run.first.dtype).max
        first_rank = first_seen_of_roots(cid, run.first[:n], root, np.full(root.size, none, run.first.dtype))
        run.release(names=("first",))
        clusters = np.flatnonzero((first_rank < none) & (size > 0))
        if order_rule == "first":
            order = clusters[np.argsort(first_rank[clusters], kind="stable")]
        elif order_rule == "lpt":
            order = clusters[np.lexsort((first_rank[clusters], -size[clusters]))]
        else:
            order = clusters[np.lexsort((clusters, -size[clusters]))]
        del first_rank, clusters
        part_load = np.zeros(run.num_parts, np.int64)
        cpart = np.zeros(root.size, part_dtype(run.num_parts))
        cpart[order] = list_schedule(order, size, run.num_parts, part_load)
        del order
        return owners_of_roots(cid, root, cpart)


@register_partitioner
class ClusteringPartitioner(_Owner):
    """Hollocou et al.'s streaming clustering ("A streaming algorithm for graph clustering", NIPS workshop
    2017) without merging, clusters to parts by LPT on node counts (ties in first-occurrence order): the
    CATGNN reference code's "Clustering" baseline, the ablation of SPRING's merge.

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> g = Graph.from_edges(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 0]), 4)
        >>> ClusteringPartitioner().partition(g, 2).part_sizes().tolist()
        [2, 2]
    """

    name = "clustering"

    @dataclasses.dataclass(kw_only=True)
    class Config(_Owner.Config):
        degrees: Annotated[str, Options("full", "partial")] = "full"
        """'full' (a degree pass first, as SPRING and the reference code) or 'partial' (Hollocou's original
        online degrees and volumes)."""

    def _stream(self, run):
        self._cluster(run, partial=self.config.degrees == "partial")
        start = time.perf_counter()
        num_clusters = int(run.counters[0])
        run.release(names=("deg", "vol", "rn"))
        size = np.bincount(run.cid[:run.num_nodes], minlength=num_clusters).astype(np.int64)
        size[0] = 0
        owner = self._schedule(run, np.arange(num_clusters), size, "lpt")
        run.phase_s["schedule"] = time.perf_counter() - start
        return owner


@register_partitioner
class SpringPartitioner(_Owner):
    """SPRING (Huang et al., "CATGNN: cost-efficient and scalable distributed training for graph neural
    networks", Algorithm 1): Step A Hollocou clustering with full degrees and richest neighbours, Step B
    merge each cluster (smallest first) into the cluster of its representative's richest neighbour while
    ``|C_i| + |C_t| <= beta |V| / P``, Step C clusters to parts by LPT on node counts; vertices with no
    line then go to the least-filled parts.

    ``variant="reference"`` follows the authors' code: a static merge order (no re-ranking, the
    largest cluster never a source), list scheduling in first-occurrence order instead of LPT, and the
    K = 0 ablation's cross line on the smaller id's side (the paper: a random side).

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> g = Graph.from_edges(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 0]), 4)
        >>> SpringPartitioner().partition(g, 2).part_sizes().tolist()
        [2, 2]
    """

    name = "spring"

    @dataclasses.dataclass(kw_only=True)
    class Config(_Owner.Config):
        beta: Annotated[float, Interval(0, None, closed="neither")] = 1.05
        """Merge size cap factor: merged clusters hold at most beta * |V| / P vertices."""
        variant: Annotated[str, Options("paper", "reference")] = "paper"
        """'paper' (Algorithm 1 and its prose) or 'reference' (the authors' code's deviations from it)."""

    def _stream(self, run):
        paper = self.config.variant == "paper"
        self._cluster(run)
        start = time.perf_counter()
        n = run.num_nodes
        cap = self.config.beta * n / run.num_parts
        run.release(names=("vol",))   # Step A's: from here on degrees, clusters, richest neighbours, ranks
        root, size = spring_merge(run.deg[:n], run.cid[:n], run.rn[:n], int(run.counters[0]), cap, paper)
        run.release(names=("deg", "rn"))
        run.phase_s["merge"] = time.perf_counter() - start
        start = time.perf_counter()
        owner = self._schedule(run, root, size, "lpt-id" if paper else "first")
        if not paper:
            owner[owner < 0] = 0  # the reference code's default for vertices never streamed
        run.phase_s["schedule"] = time.perf_counter() - start
        return owner
