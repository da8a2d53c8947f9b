"""The sparse kernel every training program uses: ``spmm(A, H)`` for a CSR ``A`` (full-graph halo and
block-row aggregation, their backward passes, and the mini-batch blocks).

The kernel was chosen by measurement (``python benchmarks/full_graph.py --kernels``; 2-core CPU, 100k
vertices, 4.1M non-zeros, float32, load average 1.8): a compiled row-parallel CSR loop (numba, ``prange``
over rows) took 106 ms at width 64 where ``torch.sparse.mm`` on CSR took 403 ms, DGL's ``u_mul_e_sum``
591 ms and a gather + ``index_add_`` 2.2 s; at width 16 numba and torch CSR were level (20 ms; DGL 290 ms,
``index_add_`` 472 ms). Under load average 10 the order was the same. So:

* CPU: the numba kernel (``numba`` imported lazily; torch CSR when numba is missing);
* CUDA: ``torch.sparse.mm`` (cuSPARSE).

``WORKBENCH_SPMM=torch`` (or ``numba``) overrides the choice, for comparisons. Results are the same
sums in the same row order, so both kernels agree to float rounding (tested).

Threads: the numba kernel runs on numba's own pool with as many threads as torch's intra-op count
(``torch.get_num_threads()``, which the runtimes set to ``cores / ranks on this host``,
:func:`workbench.runtime.runners.threads_per_rank`); numba's count is per calling thread, so thread
ranks in one process each use their share.

Example:
    >>> import torch
    >>> from workbench.train.models import sparse_aggregator
    >>> a, _ = sparse_aggregator(torch.tensor([0, 0, 1]), torch.tensor([0, 1, 1]), torch.ones(3), (2, 2))
    >>> spmm(a, torch.tensor([[1.0], [2.0]])).tolist()
    [[3.0], [2.0]]
"""

from __future__ import annotations

import os
import threading
from typing import Optional

import torch

__all__ = ["spmm", "spmm_kernel", "set_kernel_threads", "csr_pair", "SPMM_KERNELS"]

SPMM_KERNELS = ("numba", "torch")
_numba_fn = None          # the compiled kernel, or False when numba cannot be used
_numba_lock: Optional[threading.Lock] = None   # numba's workqueue layer is not thread-safe: serialise then


def _load_numba():
    global _numba_fn, _numba_lock
    if _numba_fn is not None:
        return _numba_fn
    try:
        import numba

        from workbench.train._spmm_numba import csr_spmm_add

        import numpy as np

        out = np.zeros((2, 1), np.float32)    # compile (or load from the cache) and start the thread pool
        csr_spmm_add(np.array([0, 1, 1], np.int64), np.zeros(1, np.int64), np.ones(1, np.float32),
                     np.ones((1, 1), np.float32), out)
        if numba.threading_layer() == "workqueue":
            _numba_lock = threading.Lock()
        _numba_fn = csr_spmm_add
    except Exception:  # noqa: BLE001 - numba missing or unusable: torch's kernel still works
        _numba_fn = False
    return _numba_fn


def spmm_kernel(device: torch.device | str = "cpu") -> str:
    """The kernel :func:`spmm` uses on ``device``: ``numba`` or ``torch``.

    Example:
        >>> spmm_kernel("cuda")
        'torch'
    """
    if torch.device(device).type != "cpu":
        return "torch"
    choice = os.environ.get("WORKBENCH_SPMM", "").strip().lower()
    if choice == "torch":
        return "torch"
    return "numba" if _load_numba() else "torch"


def spmm(a: torch.Tensor, h: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``A @ H`` for a CSR ``A`` (``(m, n)``) and dense ``H`` (``(n, F)``); added into ``out`` when given.

    Not differentiable by itself (:class:`workbench.train.models.SpMM` is the autograd wrapper).
    """
    m, width = a.shape[0], h.shape[1]
    if spmm_kernel(h.device) == "numba" and h.dtype == torch.float32:
        if out is None:
            out = torch.zeros(m, width, dtype=h.dtype)
        if a._nnz() and width:
            crow, col, val = a.crow_indices(), a.col_indices(), a.values()
            args = (crow.numpy(), col.numpy(), val.numpy(), h.detach().contiguous().numpy(), out.detach().numpy())
            _follow_torch_threads()
            if _numba_lock is None:
                _numba_fn(*args)
            else:
                with _numba_lock:
                    _numba_fn(*args)
        return out
    if not a._nnz():
        return h.new_zeros(m, width) if out is None else out
    res = torch.sparse.mm(a, h.contiguous())
    return res if out is None else out.add_(res)


def csr_pair(rows: torch.Tensor, cols: torch.Tensor, weights: torch.Tensor,
             shape: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(A, A^T)`` as CSR tensors from COO triplets by a stable counting sort each (columns keep the input
    order inside a row; repeated entries are kept: the kernel sums them as a coalesced matrix would).
    Cheap enough to build per mini-batch block (the kernel reads any column order).

    Example:
        >>> a, a_t = csr_pair(torch.tensor([1, 0]), torch.tensor([0, 2]), torch.tensor([2.0, 3.0]), (2, 3))
        >>> a.to_dense().tolist(), a_t.shape
        ([[0.0, 0.0, 3.0], [2.0, 0.0, 0.0]], torch.Size([3, 2]))
    """
    compiled = rows.device.type == "cpu" and bool(_load_numba())

    def one(r: torch.Tensor, c: torch.Tensor, m: int, n: int) -> torch.Tensor:
        crow = torch.zeros(m + 1, dtype=torch.int64, device=r.device)
        if compiled:   # a counting sort: O(nnz), no comparison sort per block
            from workbench.train._spmm_numba import coo_to_csr

            col, val = torch.empty_like(c), torch.empty_like(weights)
            coo_to_csr(r.numpy(), c.numpy(), weights.numpy(), m, crow.numpy(), col.numpy(), val.numpy())
            return torch.sparse_csr_tensor(crow, col, val, (m, n))
        order = torch.argsort(r, stable=True)
        crow[1:] = torch.cumsum(torch.bincount(r, minlength=m), 0)
        return torch.sparse_csr_tensor(crow, c[order], weights[order], (m, n))

    import warnings

    with warnings.catch_warnings():  # "sparse CSR support is in beta": the ops used here are stable
        warnings.simplefilter("ignore", UserWarning)
        return one(rows, cols, shape[0], shape[1]), one(cols, rows, shape[1], shape[0])


def set_kernel_threads(num_threads: int) -> None:
    """Threads of the sparse kernel for the calling thread (numba's per-thread count), capped at numba's
    pool size; :func:`spmm` sets it to torch's intra-op count before every call."""
    if _load_numba():
        import numba

        numba.set_num_threads(max(1, min(int(num_threads), numba.config.NUMBA_NUM_THREADS)))


def _follow_torch_threads() -> None:
    import numba

    want = min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS)
    if numba.get_num_threads() != want:
        numba.set_num_threads(want)
