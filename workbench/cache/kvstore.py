"""DistDGL's KVStore for vertex features: every rank holds the rows of its part and pulls the others'.

DistDGL (Zheng et al., 2020) keeps each vertex's feature row on the machine that owns the vertex; a trainer
``pull``\\ s the rows of a mini-batch's input vertices: local rows are read in place, remote ones are
requested from their owners and scattered back into the order asked for. :class:`FeatureStore` does
the same over the counted :class:`~workbench.communicate.base.Communicator`, in two collectives per pull:

1. one ``all_to_all`` of the requested ids, grouped by owner (kind ``feature_req``, 8 bytes per id);
2. one ``all_to_all`` of the answering rows (kind ``feature``, rows x width x element size bytes).

Remote ids are de-duplicated before they are sent (a row asked for twice in one pull crosses the
network once). ``pull`` is a collective: every rank must call it the same number of times (SPMD), with
an empty id list when it needs nothing. Which rank owns a vertex comes from a partition book: the
``node_part`` tensor (global id -> part) or a :class:`RangeBook` (DistDGL's range partition book over
relabelled ids, :class:`~workbench.partition.base.Relabeling`).

Example:
    >>> import threading, torch
    >>> from workbench.communicate import InProcessGroup
    >>> node_part = torch.tensor([0, 1, 0, 1])
    >>> feats = torch.arange(8.0).reshape(4, 2)            # row v = [2v, 2v + 1]
    >>> group, out = InProcessGroup(2), [None, None]
    >>> def body(rank):
    ...     owned = (node_part == rank).nonzero().flatten()
    ...     store = FeatureStore(owned, feats[owned], node_part, group.communicator(rank))
    ...     out[rank] = store.pull(torch.tensor([3, 0, 3]) if rank == 0 else torch.tensor([], dtype=torch.long))
    >>> threads = [threading.Thread(target=body, args=(r,)) for r in range(2)]
    >>> for t in threads: t.start()
    >>> for t in threads: t.join()
    >>> out[0].tolist()
    [[6.0, 7.0], [0.0, 1.0], [6.0, 7.0]]
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Union

import torch

from workbench._validation import ErrorCollector, ParamError

__all__ = ["FeatureStore", "PullBuffers", "RangeBook", "TableBook", "as_partition_book", "ID_BYTES"]

ID_BYTES = 8
"""Bytes per requested vertex id (int64) on the wire."""


@dataclasses.dataclass(eq=False)
class TableBook:
    """Owner of every global id from a ``(N,)`` part-id tensor (``node_part``)."""

    node_part: torch.Tensor

    @property
    def num_nodes(self) -> int:
        return int(self.node_part.numel())

    @property
    def num_parts(self) -> int:
        return int(self.node_part.max()) + 1 if self.node_part.numel() else 1

    def owner(self, gids: torch.Tensor) -> torch.Tensor:
        return self.node_part[gids].to(torch.int64)

    def owned(self, rank: int) -> torch.Tensor:
        """Global ids owned by ``rank``, ascending."""
        return (self.node_part == rank).nonzero().flatten()


@dataclasses.dataclass(eq=False)
class RangeBook:
    """DistDGL's range partition book: part ``p`` owns the ids ``part_offsets[p]:part_offsets[p+1]``
    (the *new* ids of a :class:`~workbench.partition.base.Relabeling`)."""

    part_offsets: torch.Tensor

    @classmethod
    def from_relabeling(cls, relabeling: Any) -> "RangeBook":
        return cls(relabeling.part_offsets.to(torch.int64))

    @property
    def num_nodes(self) -> int:
        return int(self.part_offsets[-1])

    @property
    def num_parts(self) -> int:
        return int(self.part_offsets.numel()) - 1

    def owner(self, gids: torch.Tensor) -> torch.Tensor:
        return torch.searchsorted(self.part_offsets, gids, right=True) - 1

    def owned(self, rank: int) -> torch.Tensor:
        return torch.arange(int(self.part_offsets[rank]), int(self.part_offsets[rank + 1]))


PartitionBook = Union[TableBook, RangeBook]


def part_ids(node_part: Any) -> torch.Tensor:
    """``node_part`` as a tensor of part ids: an integer one keeps its type (a folder run's book: one byte a
    vertex), anything else becomes int64.

    Example:
        >>> part_ids(torch.tensor([0, 1], dtype=torch.int8)).dtype, part_ids([0.0, 1.0]).dtype
        (torch.int8, torch.int64)
    """
    t = torch.as_tensor(node_part)
    return t if not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool) else t.to(torch.int64)


def as_partition_book(book: Any) -> PartitionBook:
    """A partition book from a ``node_part`` tensor/array, a ``Relabeling`` or a book (returned as is)."""
    if isinstance(book, (TableBook, RangeBook)):
        return book
    if hasattr(book, "part_offsets"):
        return RangeBook.from_relabeling(book)
    try:
        node_part = part_ids(book).flatten()
    except (TypeError, ValueError, RuntimeError):
        raise ParamError([f"The 'node_part' parameter of FeatureStore must be a (num_nodes,) part-id tensor, "
                          f"a Relabeling or a partition book. Got {type(book).__name__} instead."]) from None
    return TableBook(node_part)


class FeatureStore:
    """The feature rows of one rank's part, and a counted ``pull`` of anyone's rows (DistDGL's KVStore).

    Args:
        owned_gid: ``(num_owned,)`` global ids of the rows this rank holds (any order; each owned by
            this rank in ``node_part``).
        features: ``(num_owned, F)`` their rows, in the order of ``owned_gid``.
        node_part: who owns what: a ``(N,)`` part id per global id, a ``Relabeling`` or a partition book.
        comm: this rank's communicator (its ``rank`` is the part it serves).
        kind: traffic kind of the answering rows.
        req_kind: traffic kind of the requested ids.

    Raises:
        ParamError: shapes that do not match, or ``owned_gid`` not owned by ``comm.rank``.
    """

    def __init__(self, owned_gid: Any, features: torch.Tensor, node_part: Any, comm: Any, *,
                 kind: str = "feature", req_kind: str = "feature_req"):
        self.book = as_partition_book(node_part)
        self.comm = comm
        self.rank = int(comm.rank)
        self.world_size = int(comm.world_size)
        self.kind, self.req_kind = kind, req_kind
        owned = torch.as_tensor(owned_gid, dtype=torch.int64).flatten()
        errs = ErrorCollector("FeatureStore")
        errs.check(features.dim() == 2 and features.shape[0] == owned.numel(), "features",
                   f"a (len(owned_gid)={owned.numel()}, F) tensor", tuple(features.shape))
        n = self.book.num_nodes
        in_range = bool(((owned >= 0) & (owned < n)).all()) if owned.numel() else True
        errs.check(in_range, "owned_gid", f"global ids in [0, {n})", _preview(owned))
        if in_range and owned.numel():
            errs.check(bool((self.book.owner(owned) == self.rank).all()), "owned_gid",
                       f"ids owned by rank {self.rank} in node_part", _preview(owned))
        errs.check(self.book.num_parts <= self.world_size, "node_part",
                   f"a partition into at most world_size={self.world_size} parts", self.book.num_parts)
        errs.raise_if_any()
        if bool((owned[1:] > owned[:-1]).all()):   # already ascending (a folder's part): the rows as given, no copy
            self._sorted_gid, self.features = owned, features
        else:
            self._sorted_gid, perm = torch.sort(owned)
            self.features = features[perm].contiguous()  # rows in ascending global-id order
        # owning every id (one rank): a global id is its row, no search
        self._owns_all = self._sorted_gid.numel() == self.book.num_nodes
        self.width = int(features.shape[1])
        self.row_bytes = self.width * features.element_size()
        self._scratch = threading.local()   # per pulling thread: a pull's private row buffers, reused

    @classmethod
    def from_graph(cls, graph: Any, node_part: Any, comm: Any, **kwargs: Any) -> "FeatureStore":
        """The store of ``comm.rank``: the rows of ``graph.features`` that ``node_part`` gives this rank."""
        book = as_partition_book(node_part)
        owned = book.owned(int(comm.rank))
        if graph.features is None:
            raise ParamError([f"The 'graph' parameter of FeatureStore.from_graph must have features. "
                              f"Got {graph.name!r} without features instead."])
        return cls(owned, graph.features[owned], book, comm, **kwargs)

    @property
    def num_nodes(self) -> int:
        return self.book.num_nodes

    @property
    def owned_gid(self) -> torch.Tensor:
        """``(num_owned,)`` the owned global ids, ascending."""
        return self._sorted_gid

    def owner(self, gids: torch.Tensor) -> torch.Tensor:
        return self.book.owner(gids)

    def local_rows(self, gids: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Rows of owned ids (``gids`` must all be owned by this rank), written into ``out`` if given."""
        pos = gids if self._owns_all else torch.searchsorted(self._sorted_gid, gids)
        if out is None:
            return self.features.index_select(0, pos)
        return torch.index_select(self.features, 0, pos, out=out)

    def _check_ids(self, gids: Any) -> torch.Tensor:
        gids = torch.as_tensor(gids, dtype=torch.int64).flatten()
        if gids.numel() and (int(gids.min()) < 0 or int(gids.max()) >= self.num_nodes):
            raise ParamError([f"The 'gids' parameter of FeatureStore.pull must be global ids in "
                              f"[0, {self.num_nodes}). Got {_preview(gids)} instead."])
        return gids

    def pull(self, gids: Any, *, kind: str | None = None, req_kind: str | None = None,
             out: torch.Tensor | None = None) -> torch.Tensor:
        """``(len(gids), F)`` rows of ``gids`` in their order (a collective: every rank calls it).

        ``kind``/``req_kind`` override the traffic kinds (a cache's fill and refresh use their own). ``out``: a
        ``(len(gids), F)`` tensor to write them into (:class:`PullBuffers`), returned.
        """
        gids = self._check_ids(gids)
        if self.world_size == 1:   # every row is local and no other rank takes part: no collective to match
            return self.local_rows(gids, out=out)
        out = self.features.new_empty((gids.numel(), self.width)) if out is None else out
        local = self.owner(gids) == self.rank
        local_pos, remote_pos = local.nonzero().flatten(), (~local).nonzero().flatten()
        if local_pos.numel():
            mine = self.local_rows(gids.index_select(0, local_pos), out=self._buffer("local", local_pos.numel()))
            out.index_copy_(0, local_pos, mine)
        uniq, inverse = torch.unique(gids[remote_pos], return_inverse=True)  # sorted ids, one request each
        uniq_owner = self.owner(uniq)
        requests = [uniq[uniq_owner == j] for j in range(self.world_size)]
        requests[self.rank] = uniq.new_empty(0)
        asked = self.comm.all_to_all(requests, kind=req_kind or self.req_kind)
        answers = [self.features.new_empty((0, self.width)) if j == self.rank else self.local_rows(ids.flatten())
                   for j, ids in enumerate(asked)]
        received = self.comm.all_to_all(answers, kind=kind or self.kind)
        rows = self._buffer("received", uniq.numel())
        for j in range(self.world_size):  # one slot per rank, not per id
            if j != self.rank and requests[j].numel():
                rows[uniq_owner == j] = received[j].reshape(-1, self.width)
        if remote_pos.numel():
            out.index_copy_(0, remote_pos, torch.index_select(rows, 0, inverse,
                                                              out=self._buffer("remote", remote_pos.numel())))
        return out

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_scratch"}   # thread-local buffers do not travel

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _scratch=threading.local())

    def _buffer(self, name: str, rows: int) -> torch.Tensor:
        """``(rows, F)`` of the calling thread's private buffer ``name`` (a one-buffer :class:`PullBuffers`): the
        pull's own intermediate rows, never handed to another rank. A fresh tensor of a batch's rows is tens of MB,
        mapped and faulted in on every pull."""
        buffers = getattr(self._scratch, name, None)
        if buffers is None:
            buffers = PullBuffers(1, self.width, self.features.dtype)
            setattr(self._scratch, name, buffers)
        return buffers.take(rows)

    def __repr__(self) -> str:
        return (f"FeatureStore(rank={self.rank}, world_size={self.world_size}, num_owned={self._sorted_gid.numel()}, "
                f"width={self.width})")


class PullBuffers:
    """A ring of ``count`` reused row buffers for a trainer's pulls (``pull(gids, out=buffers.take(n))``).

    A mini-batch's input rows are tens of MB: a fresh tensor of that size is mapped from the operating system and
    every page of it faulted in and zeroed on first touch (above glibc's largest mmap threshold, 32 MB, every
    allocation is), which costs several times the gather itself. A buffer is handed out again ``count`` takes
    later, so at most ``count`` batches' rows may be alive at once: the trainer's current batch and those
    prepared ahead of it (``train.batches_ahead + 2``). A buffer grows (by a quarter more) when a batch needs more
    rows than it holds.

    Example:
        >>> b = PullBuffers(2, width=3)
        >>> x, y = b.take(4), b.take(2)
        >>> z = b.take(5)           # the ring is back at x's buffer, which holds 4 + 1 rows
        >>> z.shape, z.data_ptr() == x.data_ptr(), y.data_ptr() == x.data_ptr()
        (torch.Size([5, 3]), True, False)
    """

    def __init__(self, count: int, width: int, dtype: torch.dtype = torch.float32):
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        self.width, self.dtype = int(width), dtype
        self._buffers: list[torch.Tensor] = [torch.empty((0, self.width), dtype=dtype) for _ in range(count)]
        self._next = 0

    def take(self, rows: int) -> torch.Tensor:
        """A ``(rows, width)`` view of the next buffer of the ring (its previous contents are overwritten)."""
        i = self._next
        self._next = (i + 1) % len(self._buffers)
        if self._buffers[i].shape[0] < rows:
            self._buffers[i] = torch.empty((rows + rows // 4, self.width), dtype=self.dtype)
        return self._buffers[i][:rows]


def _preview(t: torch.Tensor, k: int = 6) -> str:
    vals = t[:k].tolist()
    return f"{vals}{'...' if t.numel() > k else ''}"
