"""Neighbour sources: the whole graph in one process, or DistDGL's owner-routed distributed sampling.

:class:`OwnerRoutedSource` follows DistDGL's sampler (Zheng et al., 2020): each rank holds the CSR rows of
the vertices its part owns (their whole in-neighbourhood, by the HALO rule). For a frontier the trainer
groups the ids by owner and sends them in one ``all_to_all`` (kind ``sample_req``: 8 bytes per id); every
owner samples the rows it was asked for with the method's kernel and the same keyed randomness, and
returns the sampled ``(src, dst)`` pairs in one ``all_to_all`` (kind ``sample_resp``: 16 bytes per edge,
a ``(2, num_edges)`` int64 tensor per requester). The requester puts the edges back in frontier order.
Ids a rank owns itself never leave it (not counted, like DistDGL's shared-memory local sampling). Every
rank makes two collective calls per layer, with empty requests when it has nothing to ask.

Example:
    >>> import torch
    >>> from workbench.graph import Graph
    >>> src = LocalSource(Graph.from_edges(torch.tensor([1, 2]), torch.tensor([0, 0]), 3))
    >>> from workbench.sample.base import SampleKey
    >>> src.sample_neighbors(torch.tensor([0, 2]), -1, False, SampleKey(0, 0, 0, 0)).src_gid.tolist()
    [1, 2]
"""

from __future__ import annotations

from typing import Optional

import torch

from workbench.cache.kvstore import part_ids
from workbench.graph import Graph
from workbench.sample.base import Kernel, SampleKey
from workbench.sample.keyed import CSRRows, SampledEdges, sample_rows_keyed, segment_gather

__all__ = ["LocalSource", "OwnerRoutedSource", "frontier_order", "keyed_kernel", "owned_rows"]


def keyed_kernel(csr: CSRRows, gid: torch.Tensor, fanout: int, replace: bool, key: SampleKey) -> SampledEdges:
    """The workbench's keyed kernel (:func:`workbench.sample.keyed.sample_rows_keyed`) with a :class:`SampleKey`."""
    return sample_rows_keyed(csr, gid, fanout, replace, key.stream())


class LocalSource:
    """Every in-neighbourhood of ``graph``, in this process (one rank, or a reference for tests)."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.rows = CSRRows(graph.indptr, graph.indices)
        self.num_nodes = graph.num_nodes

    def sample_neighbors(self, frontier_gid: torch.Tensor, fanout: int, replace: bool, key: SampleKey, *,
                         kernel: Optional[Kernel] = None) -> SampledEdges:
        return (kernel or keyed_kernel)(self.rows, frontier_gid, fanout, replace, key)

    def __repr__(self) -> str:
        return f"LocalSource({self.graph!r})"


def owned_rows(graph: Graph, node_part: torch.Tensor, part: int,
               row_of_gid: Optional[torch.Tensor] = None) -> CSRRows:
    """The CSR rows of the vertices ``part`` owns (ascending global id), in-neighbours in global ids.

    Args:
        row_of_gid: ``(N,)`` each vertex's index inside its own part (:func:`workbench.layout.halo.local_index`);
            computed when not given.
    """
    if row_of_gid is None:
        from workbench.layout.halo import local_index

        row_of_gid = local_index(node_part, int(node_part.max()) + 1 if node_part.numel() else 1)
    inner = torch.nonzero(node_part == part).flatten()
    deg = graph.indptr[inner + 1] - graph.indptr[inner]
    indptr = torch.zeros(inner.numel() + 1, dtype=torch.int64)
    torch.cumsum(deg, 0, out=indptr[1:])
    indices = graph.indices[torch.from_numpy(segment_gather(graph.indptr[inner].numpy(), deg.numpy()))]
    return CSRRows(indptr, indices, row_of_gid, row_gid=inner)


def frontier_order(dst: torch.Tensor, frontier_gid: torch.Tensor) -> torch.Tensor:
    """The permutation that puts edges grouped by destination (each destination's edges one run, the runs in any
    order) into the order of the unique ``frontier_gid``, each run's edges kept in their order: what a stable sort
    by frontier position gives, in O(edges) without sorting the edges (only the runs are looked up).

    Example:
        >>> frontier_order(torch.tensor([7, 7, 2, 5, 5, 5]), torch.tensor([5, 9, 2, 7])).tolist()
        [3, 4, 5, 2, 0, 1]
    """
    n = int(dst.numel())
    if n == 0:
        return torch.zeros(0, dtype=torch.int64)
    first = torch.ones(n, dtype=torch.bool)
    first[1:] = dst[1:] != dst[:-1]
    starts = torch.nonzero(first).flatten()                               # each run's first edge
    lengths = torch.diff(starts, append=torch.tensor([n]))
    sorted_f, perm = torch.sort(frontier_gid)
    pos = perm[torch.searchsorted(sorted_f, dst[starts])]                 # each run's frontier position
    run_start = torch.zeros(frontier_gid.numel(), dtype=torch.int64)
    run_length = torch.zeros(frontier_gid.numel(), dtype=torch.int64)
    run_start[pos], run_length[pos] = starts, lengths                     # destinations without edges: length 0
    return torch.from_numpy(segment_gather(run_start.numpy(), run_length.numpy()))


class OwnerRoutedSource:
    """DistDGL's distributed sampling: frontier ids go to their owners, sampled edges come back.

    Args:
        rows: the CSR rows this rank owns (:func:`owned_rows`).
        node_part: ``(N,)`` owner part of every global id (the partition book; part = rank).
        comm: this rank's :class:`~workbench.communicate.base.Communicator`.
    """

    def __init__(self, rows: CSRRows, node_part: torch.Tensor, comm):
        self.rows = rows
        self.node_part = part_ids(node_part)
        self.comm = comm
        self.num_nodes = int(self.node_part.numel())

    @classmethod
    def from_partition(cls, graph: Graph, node_part: torch.Tensor, comm,
                       row_of_gid: Optional[torch.Tensor] = None) -> "OwnerRoutedSource":
        """The source of rank ``comm.rank``, holding the rows of part ``comm.rank``."""
        node_part = torch.as_tensor(node_part, dtype=torch.int64)
        return cls(owned_rows(graph, node_part, comm.rank, row_of_gid), node_part, comm)

    def sample_neighbors(self, frontier_gid: torch.Tensor, fanout: int, replace: bool, key: SampleKey, *,
                         kernel: Optional[Kernel] = None) -> SampledEdges:
        kernel = kernel or keyed_kernel
        comm, p = self.comm, self.comm.world_size
        frontier_gid = frontier_gid.to(torch.int64)
        if p == 1:   # one rank owns every row: nothing to route, and a kernel groups edges in frontier order
            return kernel(self.rows, frontier_gid, fanout, replace, key)
        owner = self.node_part[frontier_gid].to(torch.int64)
        order = torch.argsort(owner, stable=True)
        grouped = frontier_gid[order]                                    # frontier grouped by owner
        requests = list(torch.split(grouped, torch.bincount(owner, minlength=p).tolist()))
        empty = grouped.new_zeros(0)
        asked = comm.all_to_all([empty if j == comm.rank else r for j, r in enumerate(requests)],
                                kind="sample_req", layer=key.layer)
        replies = []
        for j in range(p):  # one kernel call per requesting rank (a loop over ranks, not vertices)
            ids = requests[j] if j == comm.rank else asked[j].reshape(-1)
            e = kernel(self.rows, ids, fanout, replace, key)
            replies.append(torch.stack([e.src_gid, e.dst_gid]))          # (2, edges)
        got = comm.all_to_all([empty.reshape(2, 0) if j == comm.rank else r for j, r in enumerate(replies)],
                              kind="sample_resp", layer=key.layer)
        got[comm.rank] = replies[comm.rank]
        pairs = torch.cat([g.reshape(2, g.numel() // 2) for g in got], dim=1)   # (2, edges), grouped by owner
        return SampledEdges(*pairs[:, frontier_order(pairs[1], frontier_gid)])

    def __repr__(self) -> str:
        return f"OwnerRoutedSource(rank={self.comm.rank}, rows={self.rows.num_rows})"
