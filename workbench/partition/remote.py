"""G3's per-part cost factors (Wan et al., §4.1): the remote-vertex metrics of an edge-cut partition.

For part ``p``: ``|V_p|`` (dense NN cost), ``Σ_{v∈V_p} d_v`` (aggregation cost, in-degrees: the edges a
part aggregates) and ``|V_p^remote|``, the vertices owned elsewhere that ``p`` reads in one layer (its halo;
for an undirected graph, the out-of-part neighbours). ``|V_p^remote|`` rows arrive at ``p`` per layer in
per-layer peer-to-peer exchange, so ``max_p |V_p^remote|`` bounds a layer's communication time (Eq. 4)
and ``Σ_p |V_p^remote|`` is its total (Eq. 3).

Example:
    >>> import numpy as np
    >>> m = remote_metrics(np.array([3, 3]), np.array([5, 7]), np.array([2, 1]))
    >>> m["max_part_vertices"], m["max_part_degree"], m["total_remote_vertices"], m["remote_ratio"]
    (3, 7, 3, 0.5)
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["remote_metrics", "refinement_metrics", "REMOTE_KEYS", "lhop_halo_sizes", "p2p_vs_replication"]

REMOTE_KEYS = ("max_part_vertices", "max_part_degree", "total_remote_vertices", "max_remote_vertices",
               "min_remote_vertices", "remote_ratio")


def remote_metrics(part_vertices: np.ndarray, part_degree: np.ndarray, part_remote: np.ndarray) -> dict[str, Any]:
    """The scalar cost factors of Eqs. 1-4 from per-part counts (all ``(P,)``).

    ``remote_ratio`` is ``min_p |V_p^remote| / max_p |V_p^remote|`` (1.0 = perfectly balanced
    communication; G3's stage 2 stops at ``>= 1 - gamma``).
    """
    rv = np.asarray(part_remote, dtype=np.int64)
    hi = int(rv.max()) if rv.size else 0
    lo = int(rv.min()) if rv.size else 0
    return {
        "max_part_vertices": int(np.max(part_vertices)) if len(part_vertices) else 0,
        "max_part_degree": int(np.max(part_degree)) if len(part_degree) else 0,
        "total_remote_vertices": int(rv.sum()),
        "max_remote_vertices": hi,
        "min_remote_vertices": lo,
        "remote_ratio": float(lo / hi) if hi else 1.0,
    }


def refinement_metrics(info: dict) -> dict[str, Any]:
    """The JSON keys of a refiner's record (``PartitionResult.refinement``).

    Example:
        >>> refinement_metrics({"iterations": 4, "time_s": 0.01, "method": "g3"})
        {'refine_iterations': 4, 'refine_time_s': 0.01}
    """
    return {"refine_iterations": int(info.get("iterations", 0)), "refine_time_s": float(info.get("time_s", 0.0))}


def lhop_halo_sizes(src: np.ndarray, dst: np.ndarray, node_part: np.ndarray, num_parts: int,
                    max_hops: int) -> np.ndarray:
    """``(max_hops, P)``: vertices owned elsewhere within ``h`` in-hops of part ``p`` (row ``h - 1``).

    Row 0 is ``|V_p^remote|`` (the 1-hop halo). Vectorised: one sparse product per hop over all parts.

    Example:
        >>> src, dst = np.array([0, 1, 2, 1, 2, 3]), np.array([1, 2, 3, 0, 1, 2])   # path 0-1-2-3
        >>> lhop_halo_sizes(src, dst, np.array([0, 0, 1, 1]), 2, 2).tolist()
        [[1, 1], [2, 2]]
    """
    import scipy.sparse as sp

    n = len(node_part)
    into = sp.csr_matrix((np.ones(len(src), dtype=np.float32), (np.asarray(dst), np.asarray(src))), shape=(n, n))
    reach = np.zeros((n, num_parts), dtype=bool)                     # (N, P) reached from part p
    reach[np.arange(n), np.asarray(node_part)] = True
    own = np.bincount(node_part, minlength=num_parts)
    out = np.zeros((max_hops, num_parts), dtype=np.int64)
    for h in range(max_hops):
        # u is reached at hop h+1 if u -> v for a reached v: reach' = reach | (A_into^T reach)
        reach = reach | (into.T @ reach.astype(np.float32) > 0)
        out[h] = reach.sum(0) - own
    return out


def p2p_vs_replication(src: np.ndarray, dst: np.ndarray, node_part: np.ndarray, num_parts: int, num_layers: int,
                       widths: list[int], bytes_per_value: int = 4) -> dict[str, Any]:
    """Bytes of one epoch: G3's per-layer P2P exchange against L-hop halo replication (DistDGL/ROC style).

    * **P2P**: before layer ``k`` every part receives its 1-hop halo rows of width ``widths[k]``; the backward
      pass returns their gradients: ``2 * Σ_k Σ_p |V_p^remote| * widths[k] * 4`` bytes.
    * **Replication**: each part fetches the input features of its whole ``L``-hop halo once
      (``Σ_p |halo_L(p)| * widths[0] * 4`` bytes) and computes the halo vertices within ``L - k`` hops again at
      layer ``k`` (``duplicate_computations``); no embedding moves after that.

    Returns:
        ``{"p2p_bytes", "replication_bytes", "replication_over_p2p", "duplicate_computations"}``.

    Example:
        >>> src, dst = np.array([0, 1, 2, 1, 2, 3]), np.array([1, 2, 3, 0, 1, 2])
        >>> p2p_vs_replication(src, dst, np.array([0, 0, 1, 1]), 2, 2, [8, 8])["duplicate_computations"]
        2
    """
    halo = lhop_halo_sizes(src, dst, node_part, num_parts, num_layers)
    remote = int(halo[0].sum())
    p2p = 2 * remote * sum(widths[:num_layers]) * bytes_per_value
    replication = int(halo[num_layers - 1].sum()) * widths[0] * bytes_per_value
    duplicates = int(sum(halo[num_layers - k - 1].sum() for k in range(1, num_layers)))
    return {"p2p_bytes": int(p2p), "replication_bytes": replication,
            "replication_over_p2p": float(replication / p2p) if p2p else 0.0, "duplicate_computations": duplicates}
