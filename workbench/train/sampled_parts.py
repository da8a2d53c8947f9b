"""A part as CATGNN's local mini-batch training reads it: CSR rows to sample from, feature rows
gathered per batch, and the owned vertices' labels and split; no ``Â``, no part-sized feature or activation
tensor.

:class:`~workbench.train.model_averaging.AveragingSteps` holds one :class:`SampledPart` per part it trains
when ``sample`` is set. A part of a partition folder (:func:`folder_sampled_part`) keeps only O(owned vertices)
arrays in memory; its CSR (``indptr.npy`` and ``indices.npy``, int32 as written) is memory-mapped and its
pages given back after each batch (:meth:`PartSource.release`), and a batch's input feature rows are read with
their pages given back every few rows (:meth:`~workbench.data.partfolder.PartFolder.feature_rows`). A rank's
resident memory is then the interpreter, the model, O(part vertices) ids (the sampler's id table) and the
pages and buffers of one batch, whatever the part's size. A part built in memory (:func:`shard_sampled_part`,
from a :class:`~workbench.train.model_averaging.PartShard`) samples from a CSR of the same rows in the same order.

**Row order.** A part's sampler rows list each vertex's in-neighbours by GLOBAL id (the folder's order, and
that of :func:`~workbench.train.model_averaging.part_subgraph`'s edges), so a folder's rows are sampled as
written, with no copy; the keyed sampler draws CSR slots, so the order is part of what is drawn.

**Evaluation** (:func:`evaluate_sampled`): a folder's parts are scored on their owned labelled
train/val/test vertices in batches, with full-neighbour blocks (every in-neighbour: the exact predictions of the
part's subgraph; ``sync.eval_sample='full'``, the default) or the training fan-outs (``'train'``). On a power-law
graph a full-neighbour batch of 512 vertices reaches much of its part's 2-hop neighbourhood (20M vertices, 16
parts: about 1.8M input rows and 3M edges per batch), so 'full' costs about a full-batch pass over the part each
epoch, in batch-sized memory.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import torch

from workbench.sample.base import Kernel, SampleKey
from workbench.sample.keyed import CSRRows, SampledEdges
from workbench.sample.sources import keyed_kernel

__all__ = ["PartSource", "SampledPart", "shard_sampled_part", "folder_sampled_part", "evaluate_sampled"]


class PartSource:
    """A part's in-neighbourhoods (local ids) for a sampler: CSR rows held in memory, or a partition folder's
    ``indptr.npy``/``indices.npy`` memory-mapped (:class:`~workbench.data.partfolder.MappedArray`, int32 as
    written) whose pages :meth:`release` gives back after each batch.

    Args:
        num_nodes: the part's local vertices.
        rows: the CSR in memory, or ``None`` with ``paths``.
        paths: ``(indptr.npy, indices.npy)`` of a folder's part.
    """

    def __init__(self, num_nodes: int, rows: Optional[CSRRows] = None, paths: Optional[tuple[Path, Path]] = None):
        assert (rows is None) != (paths is None)
        self.num_nodes = int(num_nodes)
        self.paths = paths
        self._rows = rows
        self._maps: tuple = ()

    @property
    def rows(self) -> CSRRows:
        if self._rows is None:
            from workbench.data.partfolder import MappedArray

            self._maps = tuple(MappedArray(p) for p in self.paths)
            self._rows = CSRRows(*(torch.from_numpy(m.array) for m in self._maps))
        return self._rows

    def sample_neighbors(self, frontier_gid: torch.Tensor, fanout: int, replace: bool, key: SampleKey, *,
                         kernel: Optional[Kernel] = None) -> SampledEdges:
        return (kernel or keyed_kernel)(self.rows, frontier_gid, fanout, replace, key)

    def release(self) -> None:
        """Give back the pages of a folder's CSR read so far (they leave this process's resident set)."""
        for m in self._maps:
            m.release()

    def __repr__(self) -> str:
        return f"PartSource(num_nodes={self.num_nodes}, {'mapped' if self.paths else 'in memory'})"


@dataclasses.dataclass(eq=False)
class SampledPart:
    """One part as local mini-batch training reads it (local ids; owned vertices ``0..num_owned-1``).

    Attributes:
        part: the part id.
        alpha: the part's averaging weight.
        num_owned, num_local: owned and all local vertices.
        labels: ``(num_owned,)`` int64 labels of the owned vertices (-1: none).
        train_ids: ``(num_train,)`` ascending local ids of the owned labelled training vertices.
        source: where the sampler reads in-neighbours (:class:`PartSource`).
        feature_rows: ``local ids (n,) -> (n, F)`` float feature rows.
        eval_masks: ``(num_owned,)`` bool train/val/test masks of the owned labelled vertices (what
            :func:`evaluate_sampled` scores), or ``None``.
    """

    part: int
    alpha: float
    num_owned: int
    num_local: int
    labels: torch.Tensor
    train_ids: torch.Tensor
    source: PartSource
    feature_rows: Callable[[torch.Tensor], torch.Tensor]
    eval_masks: Optional[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = None


def _grouped_by_destination(src: torch.Tensor, dst: torch.Tensor, num_nodes: int) -> CSRRows:
    """CSR rows of the edges ``src -> dst`` grouped by destination, each row's sources in the edges' order."""
    order = torch.argsort(dst, stable=True)
    indptr = torch.zeros(num_nodes + 1, dtype=torch.int64)
    torch.cumsum(torch.bincount(dst, minlength=num_nodes), 0, out=indptr[1:])
    return CSRRows(indptr, src[order])


def shard_sampled_part(shard: Any) -> SampledPart:
    """A :class:`~workbench.train.model_averaging.PartShard` (in memory) as a :class:`SampledPart`; its edges
    come in :func:`~workbench.train.model_averaging.part_subgraph`'s order (destinations, then sources, by
    global id), which the rows keep: the rows of the folder holding the same part."""
    k = shard.num_owned
    features = shard.features
    return SampledPart(part=shard.part, alpha=shard.alpha, num_owned=k, num_local=shard.num_local,
                       labels=shard.labels[:k], train_ids=torch.nonzero(shard.train_mask).flatten(),
                       source=PartSource(shard.num_local, rows=_grouped_by_destination(
                           shard.edge_src, shard.edge_dst, shard.num_local)),
                       feature_rows=lambda ids: features[ids])


def folder_sampled_part(path: Any, part: int, alpha: float, with_eval: bool) -> SampledPart:
    """Part ``part`` of the partition folder ``path`` as a :class:`SampledPart`: its owned vertices' labels and
    split read into memory (O(owned)), its CSR and feature rows read per batch from the files. ``with_eval``:
    also the owned rows' train/val/test masks (rank 0's evaluation)."""
    from workbench.data.partfolder import PartFolder

    folder = PartFolder(path)
    a = folder.open_part(part)
    k = int(folder.parts[part]["num_owned"])
    labels = torch.from_numpy(np.array(a["labels"][:k], dtype=np.int64))
    labelled = labels >= 0
    train = torch.from_numpy(np.array(a["train_mask"][:k], dtype=bool)) & labelled
    masks = None
    if with_eval:
        masks = (train,) + tuple(torch.from_numpy(np.array(a[name][:k], dtype=bool)) & labelled
                                 for name in ("val_mask", "test_mask"))
    pdir = folder.part_dir(part)
    num_local = int(a["gid"].shape[0])
    del a
    return SampledPart(part=part, alpha=alpha, num_owned=k, num_local=num_local, labels=labels,
                       train_ids=torch.nonzero(train).flatten(),
                       source=PartSource(num_local, paths=(pdir / "indptr.npy", pdir / "indices.npy")),
                       feature_rows=lambda ids: torch.from_numpy(folder.feature_rows(part, ids.numpy())),
                       eval_masks=masks)


def evaluate_sampled(model: Any, parts: list, sampler: Any, model_stage: Any, batch_size: int,
                     device: torch.device, kernel: str = "auto") -> np.ndarray:
    """Hits and counts of ``model``'s predictions on the parts' owned labelled train/val/test vertices (their
    ``eval_masks``), in batches of ``batch_size`` vertices whose blocks ``sampler`` draws inside each part
    (full neighbours: ``fanouts = -1``; with fan-outs, every batch under one key, epoch -1 and step 0, which no
    training step uses, so a vertex's sample does not depend on its batch). ``model_stage``: the model's stage
    (a :class:`~workbench.train.models.ModelStage`), whose self-loops the block aggregators take.

    Returns:
        ``(3, 2)`` float64: per split (train, val, test), ``(hits, vertices)``.
    """
    from workbench.train.minibatch import block_aggregators, block_forward

    counts = np.zeros((3, 2))
    with torch.no_grad():
        for p in parts:
            masks = p.eval_masks
            ids = torch.nonzero(masks[0] | masks[1] | masks[2]).flatten()
            for batch in ids.split(batch_size):
                mb = sampler.sample(batch, p.source, epoch=-1, step=0)
                p.source.release()
                h = p.feature_rows(mb.input_gid).to(device)
                logits = block_forward(model, block_aggregators(model_stage, mb.blocks, device, kernel), h)
                hit = (logits.argmax(dim=1).cpu() == p.labels[batch])
                for i, m in enumerate(masks):
                    m = m[batch]
                    counts[i] += (int((hit & m).sum()), int(m.sum()))
    return counts
