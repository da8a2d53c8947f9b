"""G3's per-part cost factors (digest 004 §1.4): the remote-vertex metrics of an edge-cut partition.

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

__all__ = ["remote_metrics", "refinement_metrics", "REMOTE_KEYS"]

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
