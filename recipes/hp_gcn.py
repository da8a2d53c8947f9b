"""HP-GCN: full-batch GCN with point-to-point row exchange on a hypergraph (column-net) partition.

Paper: G. V. Demirci, A. Haldar, H. Ferhatosmanoglu, "Scalable Graph Convolutional Network Training on
Distributed-Memory Systems", PVLDB 16(4), 2022 (Algorithms 1-2, §4.3).

Faithful: 1-D row ownership of ``Â``, ``H`` and ``G`` by a partition of the column-net hypergraph of ``Â``
(self-loops in, vertex weight = row nnz, unit net cost, connectivity−1 objective, ε = 0.01; method
``hypergraph``, Mt-KaHyPar instead of PaToH); the communication sets are computed once before training
(:func:`workbench.layout.halo.build_halo_plans`) and every row moves once per (row, destination) per layer;
weights are replicated and their gradients all-reduced; the run equals the serial GCN.

The halo exchange IS the paper's communication scheme: rank ``q``'s halo is ``{j ∉ V_q : net j has a pin in
V_q}`` (sources of edges into ``q``), so ``Send(m → q)`` is exactly the paper's set ``cols(A_q) ∩
rows(A_m)`` (Eq. 8) and the rows moved per layer are ``Σ_j (λ_j − 1)`` = the partitioner's km1 (tested).

Accounting (exact, tested): the workbench GCN aggregates first (``Z = (ÂH)W``), sends ``H^{k-1}`` forward
(width ``d_{k-1}``) and, backward, folds the halo rows' partial gradients of ``ÂH^{k-1}`` back to their owners
(width ``d_{k-1}``, the "fold" form of the authors' GPU code, exact for directed ``Â`` too); layer 1's backward
is skipped because the features need no gradient. So one epoch moves
``km1 · (Σ_{k=1..L} d_{k-1} + Σ_{k=2..L} d_{k-1}) · 4`` bytes (:func:`fold_bytes_per_epoch`), where the
paper's expand form (Algorithm 2) would move ``km1 · Σ_k (d_{k-1} + d_k) · 4`` (:func:`paper_bytes_per_epoch`,
Eq. 11 without its factor 2, which counts both passes twice). The recipe pins the printed order
(``model.order="aggregate-first"``); the transform-first order (the DMM-first order of the paper's §4.4; per-layer
width ``min(d_{k-1}, d_k)``) is the variant :func:`transform_first` (``model.order="auto"``), whose bytes are
:func:`transform_first_bytes_per_epoch`; :func:`volume_table` logs all three.

Simplified: CPU ranks on one machine; generated graphs; Adam. The mini-batch variant is only planned, not
trained: :func:`batch_plans` builds one induced mini-batch's send/receive maps from the global (e.g. SHP)
partition with the same halo-plan code, and its rows equal the induced batch's km1 (tested); a training
loop over such batches is not built here (the SHP partitioner and its exact expected-volume evaluator are,
in :mod:`workbench.partition.hypergraph`).

Example:
    >>> from recipes.hp_gcn import recipe, fold_bytes_per_epoch, paper_bytes_per_epoch
    >>> recipe(epochs=3).method("partition")
    'hypergraph'
    >>> fold_bytes_per_epoch(10, [8, 16, 4]), paper_bytes_per_epoch(10, [8, 16, 4])
    (1600, 1760)
"""

from __future__ import annotations

from typing import Sequence

import torch

from recipes import full_graph
from workbench.compose import RunConfig
from workbench.partition import HypergraphPartitioner, MetisPartitioner, RandomPartitioner

DEFAULT_GRAPH = full_graph.DEFAULT_GRAPH
BYTES_PER_VALUE = 4


def recipe(**overrides) -> RunConfig:
    """HP-GCN: the full-graph halo GCN (2 layers, hidden 32) on the ``hypergraph`` partition (ε = 0.01), layers
    in the paper's printed order (aggregate, then transform)."""
    return full_graph.recipe(partition=HypergraphPartitioner.Config(seed=0, epsilon=0.01),
                             model={"order": "aggregate-first"}).replace(**overrides)


def transform_first(**overrides) -> RunConfig:
    """Transform-first (§4.4's order): the same with every layer that narrows multiplying by ``W`` before its
    exchange."""
    return recipe(model={"order": "auto"}).replace(**overrides)


def gp_baseline(**overrides) -> RunConfig:
    """GP: the same on a METIS edge-cut partition (the paper's graph model)."""
    return recipe(partition=MetisPartitioner.Config(seed=0)).replace(**overrides)


def rp_baseline(**overrides) -> RunConfig:
    """RP: the same on a random (balanced) partition, the paper's normaliser."""
    return recipe(partition=RandomPartitioner.Config(seed=0)).replace(**overrides)


def fold_bytes_per_epoch(volume_rows: int, dims: Sequence[int]) -> int:
    """Bytes one epoch of the workbench program moves: ``dims = [d_0, ..., d_L]`` (input, hidden..., classes)."""
    inputs = list(dims)[:-1]
    return int(volume_rows) * (sum(inputs) + sum(inputs[1:])) * BYTES_PER_VALUE


def paper_bytes_per_epoch(volume_rows: int, dims: Sequence[int]) -> int:
    """Eq. 11 (§4.3.2) without its factor 2: ``km1 · Σ_k (d_{k-1} + d_k)`` values, Algorithm 2's expand-style
    backward."""
    d = list(dims)
    return int(volume_rows) * sum(d[k - 1] + d[k] for k in range(1, len(d))) * BYTES_PER_VALUE


def transform_first_bytes_per_epoch(volume_rows: int, dims: Sequence[int]) -> int:
    """Transform-first (§4.4's order): multiply by ``W`` before the exchange where a layer narrows: rows of width
    ``min(d_{k-1}, d_k)`` both ways (fold form); layer 1's backward is skipped only when it aggregates first
    (``X`` needs no gradient, ``X W`` does)."""
    d = list(dims)
    w = [min(d[k - 1], d[k]) for k in range(1, len(d))]
    back = w[1:] + ([w[0]] if d[1] < d[0] else [])
    return int(volume_rows) * (sum(w) + sum(back)) * BYTES_PER_VALUE


def volume_table(volume_rows: int, dims: Sequence[int]) -> dict[str, int]:
    """Bytes per epoch under the three accountings, for logging next to a run."""
    return {"fold (this program)": fold_bytes_per_epoch(volume_rows, dims),
            "expand (Algorithm 2, §4.3)": paper_bytes_per_epoch(volume_rows, dims),
            "transform-first (§4.4)": transform_first_bytes_per_epoch(volume_rows, dims)}


def batch_plans(graph, node_part, batch, num_parts: int):
    """The artifact's mini-batch step: the induced subgraph of ``batch`` (global ``Â`` entries, not
    renormalised) and its halo exchange plans from the global partition restricted to the batch.

    Returns:
        ``(induced Graph with local ids 0..len(batch)-1 in ascending global order, plans, rows per SpMM)``.

    Example:
        >>> from workbench.data.shapes import grid_graph
        >>> g = grid_graph(4)
        >>> sub, plans, rows = batch_plans(g, torch.arange(16) // 8, torch.arange(4, 12), 2)
        >>> sub.num_nodes, rows
        (8, 8)
    """
    from workbench.graph import Graph
    from workbench.layout.halo import build_halo_plans

    ids = torch.unique(torch.as_tensor(batch, dtype=torch.int64))       # (s,) ascending global ids
    local = torch.full((graph.num_nodes,), -1, dtype=torch.int64)
    local[ids] = torch.arange(ids.numel())
    src, dst = graph.edges()
    keep = (local[src] >= 0) & (local[dst] >= 0)
    sub = Graph.from_edges(local[src[keep]], local[dst[keep]], int(ids.numel()), directed=graph.directed,
                           name=f"{graph.name}[batch]")
    part = torch.as_tensor(node_part, dtype=torch.int64)[ids]
    plans = build_halo_plans(sub, part, num_parts)
    return sub, plans, int(sum(p.num_halo for p in plans))
