"""Sampling-aware partition metrics (what ByteGNN's partitioner optimises), for every edge-cut partitioner.

Full-graph metrics (:mod:`workbench.partition.metrics`) count every cut edge; sampling-based training only
reads the K-hop sampled neighbourhoods of the labelled vertices, split by split. These metrics say what a
partition costs such a trainer:

* **per-split balance**: labelled vertices of each split (train/val/test) per part, and ``max / mean``;
* **blocks**: the K-hop neighbourhood blocks of ByteGNN's step 1 (:func:`~workbench.partition.bytegnn.
  neighbourhood_blocks`; a ``bytegnn`` partition's own tie rule), their count and size distribution, and the
  fraction of block vertices that sit in their centre's part (``block_vertices_local``; 1.0 = every block kept
  whole);
* **remote K-hop accesses per split**: each split's vertices are seeds of their owner's trainer (the sample
  stage's ``own`` split, batches of ``batch_size``), sampled with the ``neighbor`` sampler's keyed draws; an
  *access* is one sampled edge (reading the source vertex's adjacency or, in the input layer, its
  features), *remote* when another part owns that source. Keyed draws do not depend on who samples, so a
  local source gives exactly the owner-routed run's edges.

Example:
    >>> from workbench.data import load_graph
    >>> from workbench.partition import partition
    >>> m = sampling_metrics(partition(load_graph("products-like:num_nodes=300,seed=0"), 2, method="random"),
    ...                      fanouts=(5, 5))
    >>> sorted(m.remote_access_fraction), 0.0 < m.remote_access_fraction["train"] < 1.0
    (['test', 'train', 'val'], True)
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import numpy as np
import torch

__all__ = ["SamplingMetrics", "sampling_metrics", "SPLITS"]

SPLITS = ("train", "val", "test")


@dataclasses.dataclass
class SamplingMetrics:
    """What a partition costs a sampling trainer (module docstring)."""

    num_parts: int
    fanouts: tuple
    split_part_counts: dict
    """Split -> labelled vertices of that split per part (a list of P ints)."""
    split_balance: dict
    """Split -> ``max / mean`` of its per-part counts (1.0 = perfect; None for an empty split)."""
    num_blocks: int
    block_size: dict
    """``min``, ``median``, ``mean``, ``p90``, ``max`` vertices per block."""
    block_vertices_local: float
    """Fraction of block vertices owned by the part of their block's centre."""
    unreached_vertices: int
    """Vertices no K-hop block reaches."""
    sampled_accesses: dict
    """Split -> sampled edges read by that split's seeds (all layers)."""
    remote_accesses: dict
    """Split -> of those, the ones whose source vertex another part owns."""

    @property
    def remote_access_fraction(self) -> dict:
        """Split -> remote / sampled accesses (0.0 for a split without accesses)."""
        return {s: (self.remote_accesses[s] / self.sampled_accesses[s] if self.sampled_accesses[s] else 0.0)
                for s in self.sampled_accesses}

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON keys (added to ``workbench partition --json`` and ``workbench sample --json``)."""
        out: dict[str, Any] = {"khop_fanouts": list(self.fanouts), "num_blocks": self.num_blocks,
                               "block_size": self.block_size, "block_vertices_local": self.block_vertices_local,
                               "unreached_vertices": self.unreached_vertices}
        for s in SPLITS:
            out[f"{s}_balance"] = self.split_balance[s]
            out[f"{s}_part_counts"] = self.split_part_counts[s]
            out[f"remote_khop_fraction_{s}"] = self.remote_access_fraction[s]
            out[f"khop_accesses_{s}"] = self.sampled_accesses[s]
        return out

    def __repr__(self) -> str:
        r = {s: round(v, 4) for s, v in self.remote_access_fraction.items()}
        b = {s: (None if v is None else round(v, 3)) for s, v in self.split_balance.items()}
        return (f"SamplingMetrics(parts={self.num_parts}, blocks={self.num_blocks}, remote_khop_fraction={r}, "
                f"split_balance={b})")


def _split_ids(graph) -> dict[str, torch.Tensor]:
    from workbench.partition.bytegnn import labelled_splits

    split = torch.from_numpy(labelled_splits(graph).astype(np.int64))
    return {name: torch.nonzero(split == code).flatten() for code, name in enumerate(SPLITS)}


def sampling_metrics(result: Any, *, fanouts: tuple = (10, 10), batch_size: int = 1024, seed: int = 0,
                     max_seeds: Optional[int] = None) -> SamplingMetrics:
    """:class:`SamplingMetrics` of an edge-cut :class:`~workbench.partition.PartitionResult`.

    Args:
        fanouts: the sampler's fan-outs, input layer first; ``K = len(fanouts)`` hops for the blocks too.
        batch_size: seeds per mini-batch (a vertex reached twice in one batch is read once).
        seed: the sampler's seed.
        max_seeds: sample at most this many seeds per split and part (the first of the keyed shuffle), to
            bound the cost on large test splits; None = all.
    """
    from workbench.partition.bytegnn import block_sizes, neighbourhood_blocks
    from workbench.sample import LocalSource, NeighborSampler, split_seeds

    graph, P = result.graph, result.num_parts
    node_part = result.owner_part
    ids = _split_ids(graph)
    counts = {s: torch.bincount(node_part[v], minlength=P).tolist() for s, v in ids.items()}
    balance = {s: (max(c) / (sum(c) / P) if sum(c) else None) for s, c in counts.items()}
    labelled = torch.cat(list(ids.values())).numpy()
    opts = result.options if result.method == "bytegnn" else {}
    block = neighbourhood_blocks(graph, labelled, len(fanouts), ties=opts.get("ties", "most"),
                                 seed=int(opts.get("seed", 0)))
    sizes = block_sizes(block)
    has = block >= 0
    npart = node_part.numpy()
    local = float((npart[has] == npart[block[has]]).mean()) if has.any() else 1.0
    stats = ({"min": int(sizes.min()), "median": float(np.median(sizes)), "mean": float(sizes.mean()),
              "p90": float(np.percentile(sizes, 90)), "max": int(sizes.max())} if sizes.size else {})
    sampler = NeighborSampler(fanouts=tuple(fanouts), batch_size=batch_size, seed=seed)
    source = LocalSource(graph)
    accesses, remote = {}, {}
    for s, v in ids.items():
        total = far = 0
        if v.numel():
            sp = split_seeds(v, node_part, P, mode="own")
            for r in range(P):
                if sp.seeds[r].numel() == 0:
                    continue
                batches = sp.batches(r, epoch=0, batch_size=batch_size, seed=seed)
                num_batches = -(-sp.seeds[r].numel() // batch_size)      # no wrap-around repeats
                taken = 0
                for step, seeds in enumerate(batches[:num_batches]):
                    if max_seeds is not None and taken >= max_seeds:
                        break
                    taken += int(seeds.numel())
                    mb = sampler.sample(seeds, source, epoch=0, step=step)
                    for b in mb.blocks:
                        src = b.src_gid[b.edge_src]
                        total += int(src.numel())
                        far += int((node_part[src] != r).sum())
        accesses[s], remote[s] = total, far
    return SamplingMetrics(num_parts=P, fanouts=tuple(fanouts), split_part_counts=counts, split_balance=balance,
                           num_blocks=int(sizes.size), block_size=stats, block_vertices_local=local,
                           unreached_vertices=int((~has).sum()), sampled_accesses=accesses,
                           remote_accesses=remote)
