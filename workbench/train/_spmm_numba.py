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
