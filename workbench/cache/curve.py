"""Hit rate against cache ratio for each static policy, from the ids a trainer asked for (no trainer).

A static cache's hits over a stream of requests are the requests of the ids it holds, and the ids it
holds at capacity ``C`` are the first ``C`` of the policy's ranking; so one ranking and one cumulative
sum give every ratio at once (:func:`hit_rate_curve`). Dynamic policies (``lru``, ``fifo``) depend on
the order and the batch boundaries of the requests and are not covered here.

Example:
    >>> import torch
    >>> node_part = torch.tensor([0, 0, 1, 1, 1, 1])
    >>> stream = torch.tensor([2, 2, 2, 3, 4, 0])              # rank 0 asked for these input vertices
    >>> degrees = torch.tensor([1, 1, 5, 1, 2, 1])
    >>> df = hit_rate_curve(stream, node_part, 0, ["degree"], [0.25, 0.5], degrees=degrees, width=2)
    >>> df[["policy", "ratio", "capacity", "hits", "misses", "hit_rate", "bytes"]].to_dict("records")[1]
    {'policy': 'degree', 'ratio': 0.5, 'capacity': 2, 'hits': 4, 'misses': 1, 'hit_rate': 0.8, 'bytes': 16}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence

import numpy as np
import torch

from workbench._validation import ErrorCollector, ParamError
from workbench.cache.kvstore import ID_BYTES, as_partition_book
from workbench.cache.policies import CACHES, capacity_for, rank_candidates

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["hit_rate_curve", "ORACLE"]

ORACLE = "oracle"
"""Pseudo-policy of :func:`hit_rate_curve`: the most requested ids first (the best any static cache can do)."""

_COLUMNS = ["policy", "ratio", "capacity", "hits", "misses", "remote_requests", "hit_rate", "bytes",
            "bytes_saved", "fill_bytes"]


def hit_rate_curve(accesses: Any, node_part: Any, rank: int, policies: Sequence[str] = ("degree", "random"),
                   ratios: Iterable[float] = (0.0, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0), *,
                   counts: Any = None, graph: Any = None, degrees: Any = None, probabilities: Any = None,
                   width: int = 1, options: Optional[Mapping[str, Mapping[str, Any]]] = None) -> "pd.DataFrame":
    """Hits, misses and bytes of each static policy at each ratio for the requests of one rank.

    Args:
        accesses: 1-D global ids the rank requested, all batches concatenated (each batch's input ids
            once, as a pull de-duplicates them), e.g. ``torch.cat([mb.blocks[0].src_gid for mb in epoch])``;
            ``None`` when ``counts`` is given.
        node_part: ``(N,)`` part per global id (or a ``Relabeling``/partition book).
        rank: the rank whose cache is simulated (its owned ids are never requested remotely).
        policies: registered static cache methods, and ``"oracle"`` (most requested first).
        ratios: capacities as fractions of the ids ``rank`` does not own.
        counts: ``(N,)`` requests per global id, instead of ``accesses``.
        graph, degrees, probabilities: what the policies rank by (as :meth:`Cache.wrap`).
        width: feature width, for the byte columns (float32 rows + int64 ids).
        options: per-policy config options, e.g. ``{"random": {"seed": 3}}``.

    Returns:
        one row per (policy, ratio): ``capacity`` rows, ``hits``/``misses`` over the remote requests,
        ``hit_rate``, ``bytes`` fetched during the stream after the cache, ``bytes_saved``, ``fill_bytes``.
    """
    import pandas as pd

    book = as_partition_book(node_part)
    n = book.num_nodes
    ratios = [float(r) for r in ratios]
    errs = ErrorCollector("hit_rate_curve")
    errs.check(isinstance(rank, int) and 0 <= rank < book.num_parts, "rank", f"an int in [0, {book.num_parts})", rank)
    errs.check(all(0.0 <= r <= 1.0 for r in ratios), "ratios", "numbers in [0, 1]", ratios)
    static = sorted([name for name, cls in CACHES.items() if not cls.dynamic] + [ORACLE])
    for name in policies:
        errs.check(name in static, "policies", f"names among {static}", name)
    errs.raise_if_any()
    if counts is None:
        ids = np.asarray(torch.as_tensor(accesses).flatten().numpy(), dtype=np.int64) if accesses is not None \
            else np.zeros(0, np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            raise ParamError([f"The 'accesses' parameter of hit_rate_curve must be global ids in [0, {n}). "
                              f"Got ids in [{ids.min()}, {ids.max()}] instead."])
        counts = np.bincount(ids, minlength=n)
    counts = np.asarray(torch.as_tensor(counts).flatten().numpy(), dtype=np.int64)
    if counts.size != n:
        raise ParamError([f"The 'counts' parameter of hit_rate_curve must be a ({n},) array. "
                          f"Got shape {counts.shape} instead."])
    all_ids = torch.arange(n)
    candidates = all_ids[book.owner(all_ids) != rank]
    total = int(counts[candidates.numpy()].sum())
    row_bytes = width * 4 + ID_BYTES
    rows = []
    for name in policies:
        if name == ORACLE:
            scores = torch.as_tensor(counts, dtype=torch.float64)
        else:
            policy = CACHES.build(name, **dict((options or {}).get(name, {})))
            scores = policy.scores(n, graph=graph, degrees=degrees, probabilities=probabilities)
        if scores is None:  # none: holds nothing
            cum = np.zeros(candidates.numel() + 1, dtype=np.int64)
        else:
            ranked = rank_candidates(candidates, scores).numpy()
            cum = np.concatenate([[0], np.cumsum(counts[ranked])])
        for r in ratios:
            cap = capacity_for(r, int(candidates.numel())) if scores is not None else 0
            hits = int(cum[cap])
            rows.append({"policy": name, "ratio": r, "capacity": cap, "hits": hits, "misses": total - hits,
                         "remote_requests": total, "hit_rate": hits / total if total else float("nan"),
                         "bytes": (total - hits) * row_bytes, "bytes_saved": hits * row_bytes,
                         "fill_bytes": cap * row_bytes})
    return pd.DataFrame(rows, columns=_COLUMNS)
