"""What one mini-batch trainer holds (:class:`MiniBatchShard`), cut from the whole graph on the client
(:meth:`MiniBatchTrainer.prepare <workbench.train.minibatch.MiniBatchTrainer.prepare>`) or read from its own part
on the rank (:func:`build_minibatch_shard`, a run on a partition folder)."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import numpy as np
import torch

__all__ = ["MiniBatchShard", "build_minibatch_shard", "random_access"]


@dataclasses.dataclass(eq=False)
class MiniBatchShard:
    """What one trainer holds: its part's sampling rows and feature rows, and the global small vectors.

    Attributes:
        rows: the CSR rows (in-neighbours) of the vertices the part owns (owner-routed sampling).
        node_part: ``(N,)`` owner of every vertex (the partition book).
        owned_gid: ``(n_p,)`` global ids of the owned vertices, ascending.
        features: ``(n_p, F)`` their feature rows (the rank's KVStore shard).
        labels: ``(N,)`` every label (small; DistDGL keeps them in the KVStore too).
        degrees: ``(N,)`` out-degrees (what a degree cache ranks by: how often a vertex is sampled).
        train_split, val_split, test_split: :class:`~workbench.sample.SeedSplit` of the training,
            validation and test vertices.
        num_classes: classes of the whole graph.
        trainers: the trainers of the split this rank runs (``[rank]``; every trainer in the
            single-process reference of a P-trainer run).
    """

    rows: Any
    node_part: torch.Tensor
    owned_gid: torch.Tensor
    features: torch.Tensor
    labels: torch.Tensor
    degrees: torch.Tensor
    train_split: Any
    val_split: Any
    test_split: Any
    num_classes: int
    trainers: list
    label_gid: Optional[torch.Tensor] = None
    """``None``: ``labels`` is every vertex's; else the ascending global ids whose labels ``labels`` holds (a rank
    that read its own part: its owned vertices and the seeds other parts sent it)."""
    in_degrees: Optional[np.ndarray] = None
    """``(N,)`` int64 in-degree of every vertex: ByteGNN's NSC cost model (:mod:`workbench.schedule`), else
    ``None``."""
    graph: Any = None
    """ByteGNN's ``graph_store="local"``: the whole graph its sampling workers inherit, else ``None``."""


GATHER_CHUNK = 1 << 22
"""Edges translated to global ids at a time (:func:`global_ids`): 32 MiB of int64 whatever the part."""


def global_ids(gid: np.ndarray, local: np.ndarray, dtype: Any) -> np.ndarray:
    """``gid[local]`` as ``dtype``, a chunk of :data:`GATHER_CHUNK` at a time: a rank's peak stays at the result
    (the part's edges, read from the memory-mapped file as they are translated), never an int64 copy of them.

    Example:
        >>> global_ids(np.array([7, 3, 9]), np.array([2, 0, 1, 2], dtype=np.int32), np.int32)
        array([9, 7, 3, 9], dtype=int32)
    """
    out = np.empty(local.shape[0], dtype=dtype)
    for lo in range(0, local.shape[0], GATHER_CHUNK):
        out[lo:lo + GATHER_CHUNK] = gid[local[lo:lo + GATHER_CHUNK]]
    return out


def random_access(*arrays: Any) -> None:
    """Tell the kernel that the memory-mapped ``arrays`` (a folder's part) are read at random (``MADV_RANDOM``):
    a page fault then reads that page, not the 128 KiB around it. A sampling rank touches one row here and there;
    with read-around, a papers100M-sized part whose pages do not all fit the page cache read 1.1 GB/s from the
    disk on four ranks at 15-18 % of a core each. Arrays that are not memory maps are left alone.

    Example:
        >>> random_access(np.zeros(3))   # not a map: nothing to advise
    """
    import mmap

    for a in arrays:
        m = getattr(a, "_mmap", None)
        if m is not None and hasattr(m, "madvise") and hasattr(mmap, "MADV_RANDOM"):
            m.madvise(mmap.MADV_RANDOM)


def build_minibatch_shard(ref: Any, comm: Any, *, split_mode: str, degrees: bool,
                          in_degrees: bool = False) -> MiniBatchShard:
    """Rank ``ref.part``'s :class:`MiniBatchShard`, built on the rank from its own part
    (:class:`~workbench.train.part_source.PartRef`): its rows' in-neighbours, its feature rows and labels, and
    its trainer's seeds. The training split is :func:`~workbench.sample.split.split_seeds`'s, made from every
    part's training count alone (:func:`~workbench.sample.split.split_ranges`): each part sends the trainers
    their pieces of its training vertices with their labels, in one ``all_to_all`` (``(id, label)`` int64 pairs,
    16 bytes a seed). With a cache (``degrees``), the global out-degrees are summed from every part's in-edges
    in one ``all_reduce`` of ``(N,)`` int64; with ``in_degrees`` (ByteGNN's cost model), every part's rows'
    in-degrees likewise. All are counted as ``part_setup``. The partition book is the
    folder's owner map (``(N,)``, as DistDGL's trainers hold theirs)."""
    from workbench.sample.keyed import CSRRows
    from workbench.sample.split import SeedSplit, split_ranges
    from workbench.train.part_source import SETUP_KIND

    a = ref.source.read(ref.part)
    r, p, owned, n = ref.part, a.num_parts, a.num_owned, ref.source.num_nodes
    node_part = torch.from_numpy(ref.source.owner_map())                  # the smallest integer type of the parts
    inner = torch.from_numpy(np.array(a.gid[:owned], dtype=np.int64))
    # the rows as the part stores them: local in-neighbour ids (int32, memory-mapped), translated to global ids for
    # the sampled edges only, and rows found by binary search in the owned ids: nothing on the rank is (N,) int64
    rows = CSRRows(torch.from_numpy(a.indptr), torch.from_numpy(a.indices), row_gid=inner,
                   col_gid=torch.from_numpy(a.gid))
    labels = torch.from_numpy(a.labels)
    labelled = labels >= 0

    def own(mask: np.ndarray) -> torch.Tensor:
        return inner[torch.from_numpy(mask) & labelled]

    counts = ref.split_counts
    ranges = split_ranges(counts["train"], split_mode)
    mine = own(a.train_mask)
    pairs = torch.stack([mine, labels[torch.from_numpy(a.train_mask) & labelled]], 1)
    sends = [torch.cat([pairs.new_zeros(0, 2)] + [pairs[lo:hi] for q, lo, hi in ranges[t] if q == r])
             for t in range(p)]
    got = comm.all_to_all([pairs.new_zeros(0, 2) if t == r else sends[t] for t in range(p)], kind=SETUP_KIND) \
        if p > 1 else [sends[0]]
    got[r] = sends[r]
    seeds = torch.cat([got[q].reshape(-1, 2) for q in range(p)])           # (id, label) of this trainer's seeds
    extra = seeds[seeds[:, 0] >= 0]
    extra = extra[node_part[extra[:, 0]] != r]                             # seeds from other parts: their labels
    ids = torch.cat([inner, extra[:, 0]])
    order = torch.argsort(ids)
    empty = torch.zeros(0, dtype=torch.int64)

    def split(ids_mine: torch.Tensor, sizes: list[int], mode: str) -> SeedSplit:
        return SeedSplit(seeds=[torch.sort(ids_mine).values if t == r else empty for t in range(p)], mode=mode,
                         counts=list(sizes))

    train_split = split(seeds[:, 0], [sum(hi - lo for _, lo, hi in ranges[t]) for t in range(p)], split_mode)
    deg = None
    if degrees:
        deg = torch.zeros(n, dtype=torch.int64)
        for lo in range(0, a.indices.shape[0], GATHER_CHUNK):   # the part's edges a chunk at a time
            deg += torch.from_numpy(np.bincount(global_ids(a.gid, a.indices[lo:lo + GATHER_CHUNK], np.int64),
                                                minlength=n))
        deg = comm.all_reduce(deg, kind=SETUP_KIND) if p > 1 else deg
    random_access(a.indices, a.gid, a.features)   # from here on the rank reads them a sampled row at a time
    in_deg = None
    if in_degrees:
        in_deg = torch.zeros(n, dtype=torch.int64)
        in_deg[inner] = torch.from_numpy(np.diff(a.indptr).astype(np.int64))
        in_deg = (comm.all_reduce(in_deg, kind=SETUP_KIND) if p > 1 else in_deg).numpy()
    return MiniBatchShard(rows=rows, node_part=node_part, owned_gid=inner,
                          features=torch.from_numpy(np.ascontiguousarray(a.features)),
                          labels=torch.cat([labels, extra[:, 1]])[order], label_gid=ids[order], degrees=deg,
                          train_split=train_split, val_split=split(own(a.val_mask), counts["val"], "own"),
                          test_split=split(own(a.test_mask), counts["test"], "own"), num_classes=ref.num_classes,
                          trainers=[r], in_degrees=in_deg)
