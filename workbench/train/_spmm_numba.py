"""The compiled CSR kernel behind :func:`workbench.train.kernels.spmm` (imported only when numba is)."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(parallel=True, cache=True, nogil=True)
def csr_spmm_add(crow, col, val, h, out):  # pragma: no cover - compiled
    """``out += A @ h`` for ``A`` in CSR (``crow``, ``col``, ``val``); rows in parallel, each row's sum in
    one register-resident pass over its non-zeros."""
    width = h.shape[1]
    for i in numba.prange(crow.shape[0] - 1):
        for k in range(crow[i], crow[i + 1]):
            c = col[k]
            v = val[k]
            for f in range(width):
                out[i, f] += v * h[c, f]


@numba.njit(cache=True, nogil=True)
def coo_to_csr(rows, cols, vals, num_rows, crow, col_out, val_out):  # pragma: no cover - compiled
    """Counting sort of COO triplets by row (stable: a row keeps its entries' order) into CSR arrays;
    ``crow`` is ``(num_rows + 1,)`` zeros on entry."""
    for k in range(rows.shape[0]):
        crow[rows[k] + 1] += 1
    for i in range(num_rows):
        crow[i + 1] += crow[i]
    fill = crow[:-1].copy()
    for k in range(rows.shape[0]):
        p = fill[rows[k]]
        col_out[p] = cols[k]
        val_out[p] = vals[k]
        fill[rows[k]] = p + 1


@numba.njit(parallel=True, cache=True, nogil=True)
def csr_mean_rows(crow, col, h, scale, self_loop, out):  # pragma: no cover - compiled
    """``out[i] = scale[i] * (sum_k h[col[k]] (+ h[i] when self_loop))`` over row ``i``'s non-zeros: an
    unweighted CSR product with one scale per row (a mini-batch block's mean), rows in parallel; ``out`` is
    written, not added to."""
    width = h.shape[1]
    for i in numba.prange(crow.shape[0] - 1):
        for f in range(width):
            out[i, f] = h[i, f] if self_loop else 0.0
        for k in range(crow[i], crow[i + 1]):
            c = col[k]
            for f in range(width):
                out[i, f] += h[c, f]
        s = scale[i]
        for f in range(width):
            out[i, f] *= s


@numba.njit(cache=True, nogil=True)
def dst_pointers(edge_dst, num_dst):  # pragma: no cover - compiled
    """``(ptr, ok)``: the CSR row pointers of edges whose destinations ``edge_dst`` are non-decreasing
    (``ok = False``, and ``ptr`` meaningless, when they are not)."""
    ptr = np.zeros(num_dst + 1, dtype=np.int64)
    prev = 0
    for k in range(edge_dst.shape[0]):
        d = edge_dst[k]
        if d < prev or d >= num_dst:
            return ptr, False
        prev = d
        ptr[d + 1] += 1
    for i in range(num_dst):
        ptr[i + 1] += ptr[i]
    return ptr, True


@numba.njit(cache=True, nogil=True)
def csr_transpose(crow, col, num_cols):  # pragma: no cover - compiled
    """The pattern of ``A^T`` (``(crow_t, col_t)``) from ``A``'s CSR pattern by one counting sort; a column's
    entries keep their row order."""
    crow_t = np.zeros(num_cols + 1, dtype=np.int64)
    for k in range(col.shape[0]):
        crow_t[col[k] + 1] += 1
    for j in range(num_cols):
        crow_t[j + 1] += crow_t[j]
    fill = crow_t[:-1].copy()
    col_t = np.empty(col.shape[0], dtype=np.int64)
    for i in range(crow.shape[0] - 1):
        for k in range(crow[i], crow[i + 1]):
            p = fill[col[k]]
            col_t[p] = i
            fill[col[k]] = p + 1
    return crow_t, col_t
