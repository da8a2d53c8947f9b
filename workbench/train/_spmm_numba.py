"""The compiled CSR kernel behind :func:`workbench.train.kernels.spmm` (imported only when numba is)."""

from __future__ import annotations

import numba


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
