"""Where a rank's part comes from, and the rank that builds its own payload from it (ranks own their data).

A :class:`PartSource` hands out one part at a time as :class:`PartArrays`: the owned vertices (ascending global
ids), the in-edges of the owned rows as CSR over local ids, the other local vertices' global ids, and the owned
rows' features, labels and split. Two implementations:

* :class:`FolderParts`: a partition folder (:mod:`workbench.data.partfolder`). The client reads only its manifest;
  each rank memory-maps its own part's files and the owner map (``owner.npy``, read at the rank's halo ids only).
* :class:`InMemoryParts`: a :class:`~workbench.graph.Graph` and a vertex -> part assignment (small graphs,
  notebooks and tests): the same arrays cut from memory.

:func:`~workbench.train.full_graph.build_halo_shard` turns one part into the halo exchange's :class:`~workbench.train.full_graph.RankShard`
**on the rank**, as DistDGL's trainers do: each rank knows its halo vertices' owners, asks each owner for them in
one ``all_to_all`` of global ids, and the owner answers the same rows of every later layer (its send lists are the
requested ids in the requester's order). The GCN weights need every halo vertex's GLOBAL out-degree, which no
single part holds (a vertex's out-edges live with their destinations' owners): each rank sends its edge counts of
the halo vertices to their owners, which add them up and send the totals back. The three messages are int64 ids
and counts, counted under the kind ``part_setup`` (``8 x 3`` bytes per halo row over the run, once, in epoch 0's
traffic), apart from the training's ``halo_fwd``/``halo_bwd``, which equal those of the same partition trained in
memory (:func:`~workbench.train.full_graph.build_shards`, tested to the byte).

Example:
    >>> import torch
    >>> from workbench.data import load_graph
    >>> g = load_graph("karate")
    >>> parts = InMemoryParts(g, torch.arange(34) % 2)
    >>> a = parts.read(1)
    >>> a.num_owned, int(a.gid[0]), a.indptr.shape[0] == a.num_owned + 1
    (17, 1, True)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np
import torch

from workbench._validation import ErrorCollector
from workbench.data.safe_io import open_npy
from workbench.graph import Graph

if TYPE_CHECKING:
    from workbench.train.models import ModelStage

__all__ = ["PartArrays", "PartSource", "FolderParts", "InMemoryParts", "PartRef", "HaloAgreement", "agree_halo",
           "folder_partition_event", "check_folder", "start_folder_run", "part_refs", "SETUP_KIND"]

SETUP_KIND = "part_setup"
"""Traffic kind of the one-off exchange that agrees the halo plans on the ranks."""


@dataclasses.dataclass(eq=False)
class PartArrays:
    """One part as a rank reads it.

    Attributes:
        part: the part id (= the rank that trains it).
        num_parts: parts of the partition.
        gid: ``(L,)`` global ids of the local vertices: the owned ones first, ascending, then the others (int64,
            or int32 as a version-2 folder stores them, memory-mapped).
        num_owned: owned vertices (``gid[:num_owned]``).
        indptr: ``(num_owned + 1,)`` CSR over the owned rows: row ``v`` holds every in-edge of ``v``.
        indices: the in-edges' sources as local ids (into ``gid``), in the dtype the part stores them (int32 in a
            version-2 folder, read from the memory-mapped file as it is used: never copied whole to int64).
        features, labels, train_mask, val_mask, test_mask: the owned rows' data (labels int64, -1 unlabelled).
    """

    part: int
    num_parts: int
    gid: np.ndarray
    num_owned: int
    indptr: np.ndarray
    indices: np.ndarray
    features: np.ndarray
    labels: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray


class PartSource:
    """Parts one at a time, and the owner of any vertex (without holding the graph where it can)."""

    num_parts: int
    num_nodes: int

    def read(self, part: int) -> PartArrays:
        """Part ``part``'s arrays (on the rank that trains it)."""
        raise NotImplementedError

    def owners(self, gids: np.ndarray) -> np.ndarray:
        """``(n,)`` int64 owner part of each of the global ids ``gids``."""
        raise NotImplementedError

    def owner_map(self) -> np.ndarray:
        """``(N,)`` owner part of every vertex (a partition book: what owner-routed sampling looks up)."""
        raise NotImplementedError


class FolderParts(PartSource):
    """The parts of a partition folder: each :meth:`read` memory-maps one part's files, :meth:`owners` reads the
    folder's ``owner.npy`` at the given ids only (a folder without one: every part's owned ids, once).

    Args:
        path: the folder (holding ``manifest.json``).
    """

    def __init__(self, path: Any):
        from workbench.data.partfolder import PartFolder

        self.path = Path(path)
        self.folder = PartFolder(self.path, owner="FolderParts")
        self.num_parts, self.num_nodes = self.folder.num_parts, self.folder.num_nodes

    def read(self, part: int) -> PartArrays:
        pf = self.folder
        a = pf.open_part(part)
        owned = int(pf.parts[part]["num_owned"])
        indptr = np.asarray(a["indptr"][:owned + 1], dtype=np.int64)
        labels = np.asarray(a["labels"][:owned], dtype=np.int64)
        # copy-on-write memory maps (writable views, nothing written back): the global ids, edges and feature rows
        # as stored, their pages read as they are used, never copied whole
        mapped = {k: open_npy(pf.part_dir(part) / f"{k}.npy", mmap_mode="c") for k in ("gid", "indices", "features")}
        return PartArrays(part=part, num_parts=pf.num_parts, gid=mapped["gid"],
                          num_owned=owned, indptr=indptr,
                          indices=mapped["indices"][:int(indptr[-1])],
                          features=mapped["features"][:owned], labels=labels,
                          **{k: np.array(a[k][:owned], dtype=bool) for k in ("train_mask", "val_mask", "test_mask")})

    def owners(self, gids: np.ndarray) -> np.ndarray:
        from workbench.data.partfolder import gather_rows

        path = self.path / "owner.npy"
        if path.is_file():
            return gather_rows(path, np.asarray(gids, dtype=np.int64)).astype(np.int64)
        return self.folder.owner_part()[np.asarray(gids, dtype=np.int64)]

    def owner_map(self) -> np.ndarray:
        """The owner map in the smallest integer type that holds the parts (a byte a vertex up to 127 parts),
        converted from ``owner.npy`` a chunk at a time: a papers100M-sized partition book is 111 MB, not 0.9 GB."""
        path = self.path / "owner.npy"
        if not path.is_file():
            return self.folder.owner_part()
        stored = open_npy(path)
        out = np.empty(stored.shape[0], dtype=np.min_scalar_type(-max(self.num_parts, 1)))
        for lo in range(0, out.shape[0], 1 << 24):
            out[lo:lo + (1 << 24)] = stored[lo:lo + (1 << 24)]
        return out

    def __getstate__(self):   # a payload travels as its path; each rank opens the folder itself
        return {"path": str(self.path)}

    def __setstate__(self, state):
        self.__init__(state["path"])

    def __repr__(self) -> str:
        return f"FolderParts({str(self.path)!r}, parts={self.num_parts})"


class InMemoryParts(PartSource):
    """The parts of an in-memory partition: ``graph`` cut by ``node_part`` (the arrays a folder of it would hold).

    Args:
        graph: a graph with features, labels and a split.
        node_part: ``(N,)`` part of every vertex.
    """

    def __init__(self, graph: Graph, node_part: Any):
        self.graph = graph
        self.node_part = torch.as_tensor(node_part, dtype=torch.int64)
        self.num_parts, self.num_nodes = int(self.node_part.max()) + 1, graph.num_nodes

    def read(self, part: int) -> PartArrays:
        g, node_part = self.graph, self.node_part
        src, dst = g.edges()
        owned = torch.nonzero(node_part == part).squeeze(1)                # ascending
        sel = node_part[dst] == part
        s, d = src[sel], dst[sel]
        order = torch.argsort(d * max(g.num_nodes, 1) + s)                 # rows by destination, sources ascending
        s, d = s[order], d[order]
        others = torch.unique(s[node_part[s] != part])
        gid = torch.cat([owned, others])
        local = torch.full((g.num_nodes,), -1, dtype=torch.int64)
        local[gid] = torch.arange(gid.numel())
        indptr = torch.zeros(owned.numel() + 1, dtype=torch.int64)
        indptr[1:] = torch.cumsum(torch.bincount(local[d], minlength=owned.numel()), 0)
        n = g.num_nodes

        def mask(m):
            return (m if m is not None else torch.zeros(n, dtype=torch.bool))[owned].numpy()

        return PartArrays(part=part, num_parts=self.num_parts, gid=gid.numpy(), num_owned=int(owned.numel()),
                          indptr=indptr.numpy(), indices=local[s].numpy(), features=g.features[owned].numpy(),
                          labels=g.labels[owned].numpy().astype(np.int64), train_mask=mask(g.train_mask),
                          val_mask=mask(g.val_mask), test_mask=mask(g.test_mask))

    def owners(self, gids: np.ndarray) -> np.ndarray:
        return self.node_part.numpy()[np.asarray(gids, dtype=np.int64)]

    def owner_map(self) -> np.ndarray:
        return self.node_part.numpy()


@dataclasses.dataclass
class PartRef:
    """What the client hands a rank instead of its shard: where its part is and what the whole graph's manifest
    says (the rank reads the part itself:
    :func:`~workbench.train.full_graph.build_halo_shard`)."""

    source: PartSource
    part: int
    model: ModelStage
    """The run's model stage (a :class:`~workbench.train.models.ModelStage`, pickled with the ref): the shard the
    rank builds holds its ``Â``."""
    num_train_global: int
    num_classes: int
    predicted: dict
    split_counts: dict = dataclasses.field(default_factory=dict)
    """``{"train": [...], "val": [...], "test": [...]}``: each part's labelled vertices of each split (a
    mini-batch rank splits the training vertices from them: :func:`~workbench.sample.split.split_ranges`)."""


def folder_partition_event(folder: Any) -> Any:
    """The :class:`~workbench.events.PartitionComputed` of a :class:`~workbench.data.partfolder.PartFolder`'s
    parts from its manifest alone: owned and halo vertices per part, the comm-rows matrix and the metrics the
    manifest records (the event of every run on a folder)."""
    from workbench.events import PartitionComputed

    m, info = folder.manifest, folder.parts
    comm = m.get("comm_rows") or []
    metrics = {"num_nodes": folder.num_nodes, "num_edges": m.get("num_edges_owned_rows"),
               "num_parts": folder.num_parts, "replication_factor": m.get("replication_factor"),
               "comm_volume_rows": int(np.sum(comm)) if comm else None,
               "max_part_comm_volume_rows": int(np.max(np.sum(comm, axis=1))) if comm else None}
    return PartitionComputed(method=folder.method, num_parts=folder.num_parts,
                             metrics={k: v for k, v in metrics.items() if v is not None},
                             part_sizes=[int(q["num_owned"]) for q in info],
                             halo_sizes=[int(q["num_halo"]) for q in info], comm_rows=comm)


@dataclasses.dataclass(eq=False)
class HaloAgreement:
    """A part as its rank holds it once the owners agreed its halo (:func:`agree_halo`). Local ids: the owned
    vertices ``0 .. num_owned-1`` (ascending global ids), then the halo ordered by (owner, global id).

    Attributes:
        num_parts, num_owned: parts, owned vertices.
        inner_gid, halo_gid, halo_owner: global ids of the owned and halo vertices, the halo's owners.
        recv_counts: halo vertices per owner (the halo rows from part ``j`` are one contiguous slice).
        send: per part ``j``, the local ids of the owned vertices ``j`` asked for, in ``j``'s order (empty for
            this part).
        rows, cols: the owned rows' in-edges (destination, source) in local ids, rows ascending.
        in_deg: ``(num_owned,)`` global in-degrees; out_deg: ``(num_owned + num_halo,)`` global out-degrees.
        data: the owned rows' features, labels and split.
    """

    num_parts: int
    num_owned: int
    inner_gid: torch.Tensor
    halo_gid: torch.Tensor
    halo_owner: torch.Tensor
    recv_counts: list[int]
    send: list[torch.Tensor]
    rows: torch.Tensor
    cols: torch.Tensor
    in_deg: torch.Tensor
    out_deg: torch.Tensor
    data: Any


def _int64(values: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.int64))


def agree_halo(ref: PartRef, comm: Any) -> HaloAgreement:
    """Read part ``ref.part`` on its rank and agree its halo with the owners (module docstring): one
    ``all_to_all`` of the requested global ids (each owner's send lists), one of the halo vertices' edge counts
    (summed at their owners into global out-degrees) and one of those totals back, all counted as
    :data:`SETUP_KIND`.

    Raises:
        RuntimeError: a part asked for a vertex it does not own (the folder's owner map and parts disagree).
    """
    from workbench.train.loop import LabelData

    a = ref.source.read(ref.part)
    P, r, owned = a.num_parts, ref.part, a.num_owned
    inner_gid = a.gid[:owned]
    used = np.unique(a.indices[a.indices >= owned])                     # local ids of the halo the rows read
    halo_owner = ref.source.owners(a.gid[used])
    order = np.lexsort((a.gid[used], halo_owner))                         # (owner, global id)
    halo_local, halo_owner = used[order], halo_owner[order]
    nh = halo_local.size
    remap = np.full(a.gid.size, -1, dtype=np.int64)
    remap[:owned] = np.arange(owned)
    remap[halo_local] = owned + np.arange(nh)
    cols = remap[a.indices]
    recv_counts = np.bincount(halo_owner, minlength=P).astype(np.int64)
    bounds = np.concatenate([[0], np.cumsum(recv_counts)])
    empty = torch.zeros(0, dtype=torch.int64)

    def to_owners(values: np.ndarray) -> list[torch.Tensor]:   # halo-ordered values, one slice per owner
        return [empty if j == r else _int64(values[bounds[j]:bounds[j + 1]]) for j in range(P)]

    # 1. ask each owner for its rows: the owner's send list is the requested ids, in the requester's order
    asked = comm.all_to_all(to_owners(a.gid[halo_local]), kind=SETUP_KIND)
    send = []
    for j in range(P):
        ids = asked[j].numpy() if j != r else np.zeros(0, np.int64)
        pos = np.searchsorted(inner_gid, ids)
        if ids.size and not ((pos < owned).all() and (inner_gid[np.minimum(pos, owned - 1)] == ids).all()):
            raise RuntimeError(f"part {r} was asked by part {j} for vertices it does not own: the partition's "
                               "owner map and its parts disagree")
        send.append(_int64(pos))
    # 2. global out-degrees: every part's in-edge counts of each source, summed at the source's owner
    counts = np.bincount(cols, minlength=owned + nh).astype(np.int64)
    got = comm.all_to_all(to_owners(counts[owned:]), kind=SETUP_KIND)
    out_deg = counts[:owned].copy()
    for j in range(P):
        if j != r and send[j].numel():
            np.add.at(out_deg, send[j].numpy(), got[j].numpy())
    # 3. the owners send their vertices' totals back (halo order: by owner)
    back = comm.all_to_all([empty if j == r else _int64(out_deg[send[j].numpy()]) for j in range(P)],
                           kind=SETUP_KIND)
    out_deg = np.concatenate([out_deg] + [back[j].numpy() for j in range(P) if j != r])
    labels = torch.from_numpy(a.labels)
    labelled = labels >= 0
    inner = _int64(inner_gid)
    data = LabelData(features=torch.from_numpy(np.ascontiguousarray(a.features)), labels=labels,
                     **{k: torch.from_numpy(getattr(a, k)) & labelled for k in ("train_mask", "val_mask", "test_mask")},
                     global_nid=inner.clone())
    return HaloAgreement(num_parts=P, num_owned=owned, inner_gid=inner, halo_gid=_int64(a.gid[halo_local]),
                         halo_owner=_int64(halo_owner), recv_counts=recv_counts.tolist(), send=send,
                         rows=_int64(np.repeat(np.arange(owned), np.diff(a.indptr))), cols=_int64(cols),
                         in_deg=_int64(np.diff(a.indptr)), out_deg=_int64(out_deg), data=data)


def check_folder(cfg: Any, folder: Any, parts: int, num_parts: Optional[int]) -> None:
    """Refuse a run on a partition folder whose parts are not the run's, another partition method chosen by name,
    or a folder of another method than the recipe's own where that method defines the run (HP-GCN's hypergraph
    partition: ``Partitioner.defines_run``); all errors at once, before anything is read but the manifest."""
    pf = folder.folder()
    errs = ErrorCollector(type(cfg).__name__)
    given = getattr(cfg, "num_parts", None) if num_parts is None else num_parts
    errs.check(parts == pf.num_parts, "num_parts", f"{pf.num_parts}, the parts of the partition folder "
               f"graph={cfg.graph!r} (the run trains them, one per rank"
               + ("" if given is not None else "; num_parts unset: the number of workers") + ")", parts)
    named = cfg.named_method("partition") if hasattr(cfg, "named_method") else None
    errs.check(named in (None, pf.method), "partition.method", f"unset or the folder's method {pf.method!r} "
               f"(graph={cfg.graph!r} trains the folder's parts; the setting would be ignored)", named)
    own = cfg.method("partition")
    if named is None and own != pf.method:
        from workbench.partition import PARTITIONERS

        defines = own in PARTITIONERS and getattr(PARTITIONERS.get_class(own), "defines_run", False)
        errs.check(not defines, "graph", f"a partition folder of the run's own method {own!r}, which defines the "
                   f"run (write one: workbench partition GRAPH --parts {pf.num_parts} --method {own} --folder DIR)",
                   f"{cfg.graph} (its parts are {pf.method!r})")
    errs.raise_if_any()


def start_folder_run(trainer: Any, world_size: int, emit: Callable[[Any], None]) -> tuple[Any, Any]:
    """The client side of a run whose ranks read their own parts, from the folder's manifest alone: the folder
    checked against the run (:func:`check_folder`), a progress line, ``trainer.split_sizes``. Returns the
    :class:`~workbench.data.partfolder.PartFolder` and its partition event (for the caller to emit)."""
    from workbench.events import Progress

    cfg, spec = trainer.config, trainer.partition_folder()
    check_folder(cfg, spec, world_size, None)
    pf = spec.folder()
    emit(Progress(stage="graph", done=1, total=1, message=f"{pf.num_nodes:,} vertices in {pf.num_parts} parts "
                  f"of {pf.path} (each rank reads its own)"))
    trainer.split_sizes = {k: int(pf.manifest["splits"][k]) for k in ("train", "val", "test")}
    return pf, folder_partition_event(pf)


def part_refs(folder: Any, model: ModelStage, predicted: dict) -> list[PartRef]:
    """One :class:`PartRef` per part of ``folder`` (a :class:`~workbench.data.partfolder.PartFolder`), with the
    manifest's global figures: training vertices, classes, each part's split counts; ``model``: the run's model
    stage."""
    counts = {k: [int(q[f"num_{k}"]) for q in folder.parts] for k in ("train", "val", "test")}
    source = FolderParts(folder.path)
    return [PartRef(source=source, part=p, model=model, num_train_global=sum(counts["train"]),
                    num_classes=int(folder.manifest["num_classes"]), predicted=predicted, split_counts=counts)
            for p in range(folder.num_parts)]
