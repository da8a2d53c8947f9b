"""The column-net hypergraph of ``Â`` and the exact communication metrics of a row partition (Demirci et al.).

Row ``i`` of ``Â = D^-1/2 (A + I) D^-1/2`` aggregates the rows ``j`` with ``Â(i, j) != 0``: for a workbench
:class:`~workbench.graph.Graph` (destination-major CSR) those are the in-neighbours of ``i`` and ``i``
itself. The **column-net model** has one vertex per row and one net per column, ``pins(n_j) = {i : Â(i, j)
!= 0} = {j} ∪ out-neighbours(j)``. Because of the self-loop the owner of row ``j`` is always a pin, so with
``λ_j`` the number of parts net ``j`` touches, the owner sends row ``j`` to exactly ``λ_j − 1`` other parts:

    rows moved by one SpMM  =  Σ_j (λ_j − 1)  =  connectivity−1 (km1)  =  Σ_q |halo(q)|.

Directed graphs get true column nets (the nets of the operator applied in the forward pass).

:func:`send_metrics` gives the paper's four per-part metrics (Table 2) from a ``(P, P)`` rows matrix:
total and maximum **send** volume (rows) and total and maximum **messages** (non-empty (src, dst) pairs),
per SpMM; multiply rows by the exchanged width and 4 bytes for bytes, messages by the number of SpMMs
(2L for an expand-style epoch).

:func:`expected_batch_volume` is the exact expected volume of one uniformly sampled induced mini-batch
(``s`` of ``n`` vertices without replacement, as the paper's artifact samples), the oracle behind the stochastic
hypergraph (:mod:`workbench.partition.hypergraph`).

Example (a graph consistent with the paper's Fig. 2 example: 9 rows and 6 messages per SpMM):
    >>> import torch
    >>> from workbench.graph import Graph
    >>> u = torch.tensor([0, 0, 1, 1, 2, 3, 3]); v = torch.tensor([1, 4, 3, 5, 3, 4, 5])
    >>> g = Graph.from_edges(torch.cat([u, v]), torch.cat([v, u]), 6, directed=False)
    >>> part = torch.tensor([0, 0, 1, 1, 2, 2])
    >>> h = column_nets(g)
    >>> h.row_nnz().tolist(), connectivity(h, part).tolist()
    ([3, 4, 2, 5, 3, 3], [2, 3, 1, 3, 3, 3])
    >>> m = send_metrics(comm_rows(g, part, 3))
    >>> m["comm_volume_rows"], m["total_messages"], m["max_send_volume_rows"]
    (9, 6, 4)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional, Sequence

import numpy as np
import torch

from workbench.graph import Graph

__all__ = ["ColumnNetHypergraph", "column_nets", "connectivity", "km1", "comm_rows", "send_metrics",
           "normalized_to", "hoeffding_num_nets", "expected_batch_volume", "induced_batch_volume",
           "sample_induced_batches", "TABLE2_KEYS", "PAPER_TABLE2"]

TABLE2_KEYS = ("comm_volume_rows", "max_send_volume_rows", "total_messages", "max_part_messages")
"""The four metrics of the paper's Table 2 (volume avg = total / P, so normalised avg = normalised total)."""

PAPER_TABLE2 = {"hypergraph": (0.13, 0.21, 0.29, 0.48), "metis": (0.15, 0.56, 0.35, 0.52)}
"""Geo-mean over 8 graphs at P = 512, normalised to random (the paper's Table 2), in :data:`TABLE2_KEYS` order."""


def _np(x: Any) -> np.ndarray:
    return x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


@dataclasses.dataclass(eq=False)
class ColumnNetHypergraph:
    """A hypergraph in net-major CSR: the pins of net ``j`` are ``pins[net_ptr[j]:net_ptr[j + 1]]``.

    Attributes:
        net_ptr: ``(num_nets + 1,)`` int64 pointers.
        pins: ``(num_pins,)`` int64 vertex ids, sorted inside each net.
        num_nodes: vertices (rows).
        net_weights: ``(num_nets,)`` int64 multiplicities (``None`` = all 1).
        owner: ``(num_nets,)`` the vertex whose row the net stands for (column ``j`` for a column net; for a
            merged stochastic net, one representative column), or ``None``.
    """

    net_ptr: np.ndarray
    pins: np.ndarray
    num_nodes: int
    net_weights: Optional[np.ndarray] = None
    owner: Optional[np.ndarray] = None

    @property
    def num_nets(self) -> int:
        return len(self.net_ptr) - 1

    @property
    def num_pins(self) -> int:
        return len(self.pins)

    def net_sizes(self) -> np.ndarray:
        return np.diff(self.net_ptr)

    def net_of_pin(self) -> np.ndarray:
        """``(num_pins,)`` the net each pin belongs to."""
        return np.repeat(np.arange(self.num_nets, dtype=np.int64), self.net_sizes())

    def row_nnz(self) -> np.ndarray:
        """``(num_nodes,)`` nets each vertex is a pin of: the nnz of its row of ``Â`` for column nets."""
        return np.bincount(self.pins, minlength=self.num_nodes).astype(np.int64)

    def weights(self) -> np.ndarray:
        return np.ones(self.num_nets, np.int64) if self.net_weights is None else self.net_weights

    def __repr__(self) -> str:
        return f"ColumnNetHypergraph(nodes={self.num_nodes:,}, nets={self.num_nets:,}, pins={self.num_pins:,})"


def column_nets(graph: Graph) -> ColumnNetHypergraph:
    """The column-net hypergraph of ``Â`` (self-loops added; an existing self-loop is not doubled).

    Net ``j`` holds ``j`` and every out-neighbour of ``j`` (every row that needs row ``j``), sorted.
    Vectorised: one sort of ``num_edges + num_nodes`` keys.
    """
    n = graph.num_nodes
    src, dst = graph.edges()
    keys = np.concatenate([src.numpy() * n + dst.numpy(), np.arange(n, dtype=np.int64) * (n + 1)])
    keys = np.unique(keys)   # sorted by (net j = source, pin = destination), duplicates merged
    net_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(keys // max(n, 1), minlength=n), out=net_ptr[1:])
    return ColumnNetHypergraph(net_ptr=net_ptr, pins=keys % max(n, 1), num_nodes=n,
                               owner=np.arange(n, dtype=np.int64))


def _net_part_pairs(h: ColumnNetHypergraph, node_part: np.ndarray, num_parts: int) -> np.ndarray:
    """Distinct ``net * P + part`` keys: the (net, part) pairs of the connectivity sets, sorted."""
    return np.unique(h.net_of_pin() * num_parts + node_part[h.pins])


def connectivity(h: ColumnNetHypergraph, node_part: Any, num_parts: Optional[int] = None) -> np.ndarray:
    """``(num_nets,)`` λ of every net: the number of distinct parts among its pins."""
    part = _np(node_part).astype(np.int64)
    p = int(part.max()) + 1 if num_parts is None else int(num_parts)
    pairs = _net_part_pairs(h, part, p)
    return np.bincount(pairs // p, minlength=h.num_nets).astype(np.int64)


def km1(h: ColumnNetHypergraph, node_part: Any, num_parts: Optional[int] = None) -> int:
    """Connectivity−1 cut ``Σ_j w_j (λ_j − 1)`` (nets without pins count 0)."""
    lam = connectivity(h, node_part, num_parts)
    return int((h.weights() * np.maximum(lam - 1, 0)).sum())


def comm_rows(graph: Graph, node_part: Any, num_parts: int) -> np.ndarray:
    """``(P, P)`` int64: rows part ``p`` sends part ``q`` in one SpMM (from the column nets: part ``q``
    receives row ``j`` once if any pin of net ``j`` is in ``q`` and ``j`` is owned elsewhere)."""
    part = _np(node_part).astype(np.int64)
    h = column_nets(graph)
    pairs = _net_part_pairs(h, part, num_parts)
    net, q = pairs // num_parts, pairs % num_parts
    p = part[h.owner[net]]
    cross = p != q
    flat = np.bincount(p[cross] * num_parts + q[cross], minlength=num_parts * num_parts)
    return flat.reshape(num_parts, num_parts).astype(np.int64)


def send_metrics(comm: Any) -> dict[str, Any]:
    """The paper's four metrics (per SpMM) from a ``(P, P)`` rows matrix ``comm[p, q]`` (p sends q).

    Returns:
        ``comm_volume_rows`` (total), ``max_send_volume_rows``, ``max_recv_volume_rows``,
        ``total_messages``, ``max_part_messages`` (max over parts of messages sent) and the per-part lists
        ``part_send_rows``, ``part_messages``.

    Example:
        >>> send_metrics([[0, 2, 0], [1, 0, 0], [3, 3, 0]])["max_part_messages"]
        2
    """
    c = np.asarray(comm, dtype=np.int64).copy()
    np.fill_diagonal(c, 0)
    send, recv, msgs = c.sum(1), c.sum(0), np.count_nonzero(c, axis=1)
    return {"comm_volume_rows": int(c.sum()),
            "max_send_volume_rows": int(send.max()) if send.size else 0,
            "max_recv_volume_rows": int(recv.max()) if recv.size else 0,
            "total_messages": int(msgs.sum()),
            "max_part_messages": int(msgs.max()) if msgs.size else 0,
            "part_send_rows": send.tolist(), "part_messages": msgs.tolist()}


def normalized_to(metrics: dict, baseline: dict, keys: Sequence[str] = TABLE2_KEYS) -> dict[str, float]:
    """``metrics[k] / baseline[k]`` for the Table 2 keys (the paper normalises to random partitioning).

    Example:
        >>> normalized_to({"comm_volume_rows": 1}, {"comm_volume_rows": 4}, keys=["comm_volume_rows"])
        {'comm_volume_rows': 0.25}
    """
    return {k: (float(metrics[k]) / baseline[k] if baseline[k] else float("nan")) for k in keys}


# -------------------------------------------------------------------------------------------------
# Mini-batches: uniform induced sampling (the paper's §4.3.3; the artifact's sampler)
# -------------------------------------------------------------------------------------------------


def hoeffding_num_nets(num_parts: int, theta: float = 0.1, delta: float = 0.5) -> int:
    """Eq. 14: nets needed so the mean sampled connectivity is within ``theta`` of its expectation with
    probability ``1 − delta``: ``ceil((p − 1)² / (2θ²) · ln(2/δ))``.

    Example:
        >>> hoeffding_num_nets(27), hoeffding_num_nets(2)
        (46857, 70)
    """
    return int(math.ceil((num_parts - 1) ** 2 / (2.0 * theta ** 2) * math.log(2.0 / delta)))


def sample_induced_batches(num_nodes: int, batch_size: int, num_batches: int, seed: int = 0) -> np.ndarray:
    """``(num_batches, batch_size)`` int64: each row ``batch_size`` distinct vertices drawn uniformly.

    Vectorised per batch (one ``Generator.choice`` each; a loop per batch, never per vertex).
    """
    rng = np.random.default_rng(seed)
    out = np.empty((num_batches, batch_size), np.int64)
    for b in range(num_batches):
        out[b] = rng.choice(num_nodes, size=batch_size, replace=False)
    return out


def induced_batch_volume(h: ColumnNetHypergraph, node_part: Any, batch: Any, num_parts: int) -> int:
    """Rows one SpMM of the induced mini-batch moves: ``Σ_{j in batch} (λ'_j − 1)`` with ``λ'_j`` the parts
    of net ``j``'s pins inside the batch (the owner ``j`` is one of them)."""
    part = _np(node_part).astype(np.int64)
    mask = np.zeros(h.num_nodes, bool)
    mask[_np(batch)] = True
    net = h.net_of_pin()
    keep = mask[net] & mask[h.pins]
    pairs = np.unique(net[keep] * num_parts + part[h.pins[keep]])
    return int(len(pairs) - mask[h.owner].sum())


def expected_batch_volume(h: ColumnNetHypergraph, node_part: Any, batch_size: int, num_parts: int) -> float:
    """Exact ``E[rows per SpMM]`` of an induced batch of ``s = batch_size`` of ``n`` vertices drawn uniformly
    without replacement:

        E = Σ_j (s/n) Σ_{q ≠ part(j)} [1 − C(n−1−c_jq, s−1) / C(n−1, s−1)],

    ``c_jq`` = pins of net ``j`` in part ``q``: net ``j`` exists iff ``j`` is drawn (its diagonal entry), and
    then sends to ``q`` iff one of those pins is drawn among the other ``s − 1``.

    Example:
        >>> import numpy as np
        >>> h = ColumnNetHypergraph(np.array([0, 2, 4]), np.array([0, 1, 0, 1]), 2, owner=np.array([0, 1]))
        >>> expected_batch_volume(h, np.array([0, 1]), 2, 2), expected_batch_volume(h, np.array([0, 1]), 1, 2)
        (2.0, 0.0)
    """
    part = _np(node_part).astype(np.int64)
    n, s = h.num_nodes, int(batch_size)
    if s <= 1 or n <= 1:
        return 0.0
    net = h.net_of_pin()
    keys, counts = np.unique(net * num_parts + part[h.pins], return_counts=True)
    j, q = keys // num_parts, keys % num_parts
    other = q != part[h.owner[j]]
    c = counts[other].astype(np.float64)
    # C(n-1-c, s-1) / C(n-1, s-1) = (n-1-c)! (n-s)! / ((n-c-s)! (n-1)!), zero when n-c-s < 0
    ok = n - c - s >= 0
    lg = np.zeros_like(c)
    cc = c[ok]
    lg[ok] = (math.lgamma(n - s + 1) - math.lgamma(n)
              + _lgamma(n - cc) - _lgamma(n - cc - s + 1))
    miss = np.where(ok, np.exp(lg), 0.0)
    w = h.weights()[j[other]].astype(np.float64)
    return float((s / n) * (w * (1.0 - miss)).sum())


def _lgamma(x: np.ndarray) -> np.ndarray:
    from scipy.special import gammaln

    return gammaln(x)
