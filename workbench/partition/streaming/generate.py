"""Write large synthetic edge files chunk by chunk (never holding the edge list): power-law degrees with
communities, for the streaming partitioners' figures and benchmarks.

Vertex ``i`` of block ``b`` (blocks are equal id ranges before a random relabelling) has weight
``(rank + 1) ** (-1 / (exponent - 1))`` where ``rank`` is its position inside its block, so every block has the
same power-law profile. A line's first endpoint is drawn with probability proportional to weight; the second
is drawn the same way inside the first's block with probability ``homophily``, else from the whole graph.
Lower ``exponent`` = more skew. Self-loops are dropped; duplicate lines may occur (as in real edge lists).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

__all__ = ["write_edge_file"]


def write_edge_file(path: str | os.PathLike, num_nodes: int, num_edges: int, *, exponent: float = 2.5,
                    num_blocks: int = 64, homophily: float = 0.8, seed: int = 0, chunk: int = 1 << 20) -> Path:
    """Write ``num_edges`` undirected lines over ``num_nodes`` vertices to ``path``.

    ``.npy`` paths get an ``(E, 2)`` int64 array (written chunk by chunk through a memory map); any other
    path a text file with one ``u v`` line per edge. Returns the path.

    Example:
        >>> import tempfile, pathlib
        >>> p = write_edge_file(pathlib.Path(tempfile.mkdtemp()) / "g.txt", 100, 500, seed=0)
        >>> len(p.read_text().splitlines()) <= 500
        True
    """
    import pandas as pd

    path = Path(path)
    rng = np.random.default_rng(seed)
    block = max(num_nodes // num_blocks, 1)
    num_blocks = -(-num_nodes // block)
    rank = np.arange(block)
    w_block = (rank + 1.0) ** (-1.0 / (exponent - 1.0))
    cdf_block = np.cumsum(w_block) / w_block.sum()
    relabel = rng.permutation(num_nodes)

    def draw_in_block(blocks: np.ndarray) -> np.ndarray:
        v = blocks * block + np.searchsorted(cdf_block, rng.random(blocks.size))
        return np.minimum(v, num_nodes - 1)

    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.int64, shape=(num_edges, 2)) \
        if path.suffix == ".npy" else None
    written = 0
    with (open(path, "w") if out is None else open(os.devnull, "w")) as f:
        while written < num_edges:
            n = min(chunk, num_edges - written)
            u = draw_in_block(rng.integers(0, num_blocks, n))
            same = rng.random(n) < homophily
            v = draw_in_block(np.where(same, u // block, rng.integers(0, num_blocks, n)))
            u, v = relabel[u], relabel[v]
            keep = u != v
            u, v = u[keep], v[keep]
            if out is not None:
                out[written:written + u.size, 0] = u
                out[written:written + u.size, 1] = v
            else:
                pd.DataFrame({"u": u, "v": v}).to_csv(f, sep=" ", header=False, index=False)
            written += n if out is None else u.size
            if out is not None and u.size == 0:
                break
    if out is not None:
        out.flush()
        del out
    return path
