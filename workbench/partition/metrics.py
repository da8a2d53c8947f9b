"""Exact, vectorised quality metrics of a partition.

Definitions (one full-graph GNN layer; an edge ``u -> v`` means ``v`` aggregates from ``u``):

* **Edge-cut** partitions give each vertex one part. Each edge belongs to its destination's part
  (DistDGL's rule), so part ``q`` needs the feature row of every source ``u`` of an edge into ``q``:
  the **halo** of ``q`` is those sources not owned by ``q``. Row ``u`` is sent once to every other part
  holding an out-neighbour of ``u``, so the communication volume equals the sum of halo sizes, and the
  connectivity-minus-one (km1) metric of the column-net hypergraph (one net per vertex: the vertex and
  its out-neighbours).
* **Vertex-cut** partitions give each edge one part; a vertex is replicated on every part holding one of
  its edges. Its **master** is the replica holding most of its edges (ties: lowest part; a vertex with no
  edges lives on part ``v % num_parts``), the others are **mirrors** (reported as halo). One layer syncs
  each mirror twice: its partial aggregate goes to the master and the updated row comes back, so
  ``comm_volume_rows = 2 * mirror_sync_volume_rows``.

``edge_cut`` counts distinct undirected vertex pairs ``{u, v}`` (``u != v``) whose endpoints lie in
different parts; ``cut_ratio`` divides by the number of such pairs in the graph (self-loops excluded
from both). Balances are ``max / mean`` over parts (1.0 is perfect).
``max_part_comm_volume_rows`` is, over parts, the larger of the rows a part sends and the rows it
receives: the busiest link endpoint bounds the layer's communication time.
"""

from __future__ import annotations

import dataclasses
import html
from typing import Any, Optional

import numpy as np
import torch

from workbench.partition.volume import send_metrics

__all__ = ["PartitionMetrics", "compute_metrics", "halo_pairs", "vertex_cut_replicas", "BYTES_PER_VALUE"]

BYTES_PER_VALUE = 4  # float32 feature rows

JSON_KEYS = ("num_nodes", "num_edges", "num_parts", "edge_cut", "cut_ratio", "replication_factor",
             "vertex_balance", "edge_balance", "comm_volume_rows", "max_part_comm_volume_rows", "num_messages")


def halo_pairs(src: torch.Tensor, dst: torch.Tensor, node_part: torch.Tensor, num_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Distinct ``(global_nid, part_id)`` pairs where ``part_id`` needs vertex ``global_nid`` as halo.

    Returns:
        ``(halo_nid, halo_part)``, sorted by part then vertex id.
    """
    src_part, dst_part = node_part[src], node_part[dst]
    cross = src_part != dst_part
    key = torch.unique(dst_part[cross] * num_nodes + src[cross])  # sorted: part-major
    return key % num_nodes, key // num_nodes


def vertex_cut_replicas(src: torch.Tensor, dst: torch.Tensor, edge_part: torch.Tensor, num_nodes: int,
                        num_parts: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Replicas of a vertex-cut partition.

    Returns:
        ``(master_part, replica_nid, replica_part)``: the master part of each vertex ``(N,)`` and every
        distinct (vertex, part) replica, sorted by vertex then part (vertices with no edge get one replica
        on their master part).
    """
    ends = torch.cat([src, dst])
    parts = torch.cat([edge_part, edge_part])
    key, counts = torch.unique(ends * num_parts + parts, return_counts=True)
    nid, part = key // num_parts, key % num_parts
    # Master: most incident edges, ties to the lowest part. Order by (vertex, -count, part), take the first.
    order = np.lexsort((part.numpy(), -counts.numpy(), nid.numpy()))
    nid_sorted = nid.numpy()[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = nid_sorted[1:] != nid_sorted[:-1]
    master = torch.arange(num_nodes, dtype=torch.int64) % max(num_parts, 1)
    master[torch.from_numpy(nid_sorted[first])] = part[torch.from_numpy(order[first])]
    lonely = torch.ones(num_nodes, dtype=torch.bool)
    lonely[nid] = False
    lonely_ids = torch.nonzero(lonely).flatten()
    if lonely_ids.numel():
        key = torch.sort(torch.cat([key, lonely_ids * num_parts + master[lonely_ids]])).values
        nid, part = key // num_parts, key % num_parts
    return master, nid, part


def _balance(counts: np.ndarray) -> float:
    mean = counts.mean() if counts.size else 0.0
    return float(counts.max() / mean) if mean > 0 else 1.0


@dataclasses.dataclass(eq=False)
class PartitionMetrics:
    """Exact quality metrics of one partition (see the module docstring for definitions).

    ``to_dict()`` gives JSON-ready scalars (the keys of ``workbench partition --json``) plus per-part
    lists; ``table()`` a per-part data frame; ``comm_rows[p, q]`` rows part ``p`` sends part ``q``.
    """

    kind: str
    num_nodes: int
    num_edges: int
    num_parts: int
    num_undirected_edges: int
    edge_cut: int
    cut_ratio: float
    replication_factor: float
    vertex_balance: float
    edge_balance: float
    comm_volume_rows: int
    max_part_comm_volume_rows: int
    num_messages: int
    part_vertices: np.ndarray
    """Owned (inner / master) vertices per part."""
    part_edges: np.ndarray
    part_halo: np.ndarray
    """Halo vertices per part (mirrors, for a vertex-cut partition)."""
    comm_rows: np.ndarray
    """``(P, P)`` int64 feature rows part ``p`` sends part ``q`` in one full-graph layer."""
    part_train: Optional[np.ndarray] = None
    feature_width: Optional[int] = None
    mirror_sync_volume_rows: Optional[int] = None
    num_cut_vertices: Optional[int] = None
    remote: Optional[dict] = None
    """G3's cost factors (edge-cut only; :mod:`workbench.partition.remote`): max |V_p|, max Σd, Σ and max
    |V_p^remote|, min/max remote ratio, and the refiner's iterations and time when one ran."""

    @property
    def part_send_rows(self) -> np.ndarray:
        return self.comm_rows.sum(1)

    @property
    def part_recv_rows(self) -> np.ndarray:
        return self.comm_rows.sum(0)

    @property
    def train_balance(self) -> Optional[float]:
        return None if self.part_train is None else _balance(self.part_train)

    def bytes(self, rows: int, feature_width: Optional[int] = None) -> Optional[int]:
        """Bytes of ``rows`` float32 rows of ``feature_width`` values (default: the metrics' width)."""
        width = self.feature_width if feature_width is None else feature_width
        return None if width is None else int(rows) * int(width) * BYTES_PER_VALUE

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "num_nodes": self.num_nodes, "num_edges": self.num_edges, "num_parts": self.num_parts,
            "edge_cut": self.edge_cut, "cut_ratio": self.cut_ratio,
            "replication_factor": self.replication_factor, "vertex_balance": self.vertex_balance,
            "edge_balance": self.edge_balance, "comm_volume_rows": self.comm_volume_rows,
            "max_part_comm_volume_rows": self.max_part_comm_volume_rows, "num_messages": self.num_messages,
            "kind": self.kind, "num_undirected_edges": self.num_undirected_edges,
        }
        if self.feature_width is not None:
            out["feature_width"] = self.feature_width
            out["comm_volume_bytes"] = self.bytes(self.comm_volume_rows)
            out["max_part_comm_volume_bytes"] = self.bytes(self.max_part_comm_volume_rows)
        if self.part_train is not None:
            out["train_balance"] = self.train_balance
        # the per-part send metrics of Demirci et al.'s Table 2: max rows sent, messages in total and per part
        sent = send_metrics(self.comm_rows)
        out.update({k: sent[k] for k in ("max_send_volume_rows", "total_messages", "max_part_messages")})
        if self.mirror_sync_volume_rows is not None:
            out["mirror_sync_volume_rows"] = self.mirror_sync_volume_rows
            out["num_cut_vertices"] = self.num_cut_vertices
        if self.remote is not None:
            out.update(self.remote)
        out["part_vertices"] = self.part_vertices.tolist()
        out["part_edges"] = self.part_edges.tolist()
        out["part_halo"] = self.part_halo.tolist()
        return out

    def summary(self) -> dict[str, Any]:
        """The scalar metrics only (no per-part lists), rounded for display."""
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.to_dict().items()
                if not isinstance(v, list)}

    def table(self):
        """Per-part metrics as a pandas ``DataFrame`` indexed by part."""
        import pandas as pd

        cols = {"vertices": self.part_vertices, "edges": self.part_edges, "halo": self.part_halo,
                "send_rows": self.part_send_rows, "recv_rows": self.part_recv_rows}
        if self.part_train is not None:
            cols["train_vertices"] = self.part_train
        if self.feature_width is not None:
            cols["send_bytes"] = self.part_send_rows * self.feature_width * BYTES_PER_VALUE
        df = pd.DataFrame(cols)
        df.index.name = "part"
        return df

    def __repr__(self) -> str:
        s = self.summary()
        return (f"PartitionMetrics({self.kind}, parts={self.num_parts}, edge_cut={s['edge_cut']}, "
                f"cut_ratio={s['cut_ratio']}, replication_factor={s['replication_factor']}, "
                f"comm_volume_rows={s['comm_volume_rows']}, vertex_balance={s['vertex_balance']})")

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td style='text-align:left'>{html.escape(k)}</td>"
                       f"<td style='text-align:right'>{html.escape(str(v))}</td></tr>"
                       for k, v in self.summary().items())
        return (f"<b>PartitionMetrics</b><div style='display:flex;gap:2em'><table>{rows}</table>"
                f"<div>{self.table().to_html()}</div></div>")


def compute_metrics(src: torch.Tensor, dst: torch.Tensor, num_nodes: int, num_parts: int, *,
                    node_part: Optional[torch.Tensor] = None, edge_part: Optional[torch.Tensor] = None,
                    train_mask: Optional[torch.Tensor] = None, feature_width: Optional[int] = None,
                    halo: Optional[tuple[torch.Tensor, torch.Tensor]] = None,
                    replicas: Optional[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = None) -> PartitionMetrics:
    """Metrics of an edge-cut (``node_part``) or vertex-cut (``edge_part``) partition.

    ``halo``/``replicas`` pass precomputed :func:`halo_pairs`/:func:`vertex_cut_replicas` results.

    Example:
        >>> import torch
        >>> src, dst = torch.tensor([0, 1, 1, 2]), torch.tensor([1, 0, 2, 1])  # path 0 - 1 - 2
        >>> m = compute_metrics(src, dst, 3, 2, node_part=torch.tensor([0, 0, 1]))
        >>> m.edge_cut, m.comm_volume_rows, m.comm_rows.tolist()
        (1, 2, [[0, 1], [1, 0]])
    """
    P, N = num_parts, num_nodes
    lo, hi = torch.minimum(src, dst), torch.maximum(src, dst)
    proper = lo != hi
    pair_key = torch.unique(lo[proper] * N + hi[proper])
    num_pairs = int(pair_key.numel())
    extra: dict[str, Any] = {}
    if node_part is not None:
        kind = "edge-cut"
        owner = node_part
        part_edges = torch.bincount(node_part[dst], minlength=P)
        halo_nid, halo_part = halo if halo is not None else halo_pairs(src, dst, node_part, N)
        part_halo = torch.bincount(halo_part, minlength=P)
        comm = torch.bincount(node_part[halo_nid] * P + halo_part, minlength=P * P).reshape(P, P)
        cut = int((node_part[pair_key // N] != node_part[pair_key % N]).sum()) if num_pairs else 0
        total_replicas = N + int(halo_nid.numel())
        from workbench.partition.remote import remote_metrics

        extra["remote"] = remote_metrics(torch.bincount(node_part, minlength=P).numpy(), part_edges.numpy(),
                                         part_halo.numpy())
    else:
        kind = "vertex-cut"
        owner, rep_nid, rep_part = replicas if replicas is not None else vertex_cut_replicas(src, dst, edge_part, N, P)
        part_edges = torch.bincount(edge_part, minlength=P)
        is_mirror = rep_part != owner[rep_nid]
        mirror_nid, mirror_part = rep_nid[is_mirror], rep_part[is_mirror]
        part_halo = torch.bincount(mirror_part, minlength=P)
        # Partial aggregates mirror -> master, updated rows master -> mirror.
        up = torch.bincount(mirror_part * P + owner[mirror_nid], minlength=P * P).reshape(P, P)
        comm = up + up.T
        cut = 0
        total_replicas = int(rep_nid.numel())
        extra["mirror_sync_volume_rows"] = int(mirror_nid.numel())
        num_replicas = torch.bincount(rep_nid, minlength=N)
        extra["num_cut_vertices"] = int((num_replicas > 1).sum())
    part_vertices = torch.bincount(owner, minlength=P).numpy()
    comm_np = comm.numpy().astype(np.int64)
    send, recv = comm_np.sum(1), comm_np.sum(0)
    part_train = None
    if train_mask is not None:
        part_train = torch.bincount(owner[train_mask], minlength=P).numpy()
    return PartitionMetrics(
        kind=kind, num_nodes=N, num_edges=int(src.numel()), num_parts=P, num_undirected_edges=num_pairs,
        edge_cut=cut, cut_ratio=float(cut / num_pairs) if num_pairs else 0.0,
        replication_factor=float(total_replicas / N) if N else 0.0,
        vertex_balance=_balance(part_vertices), edge_balance=_balance(part_edges.numpy()),
        comm_volume_rows=int(comm_np.sum()),
        max_part_comm_volume_rows=int(np.maximum(send, recv).max()) if P else 0,
        num_messages=int(np.count_nonzero(comm_np)),
        part_vertices=part_vertices, part_edges=part_edges.numpy(), part_halo=part_halo.numpy(),
        comm_rows=comm_np, part_train=part_train, feature_width=feature_width, **extra)
