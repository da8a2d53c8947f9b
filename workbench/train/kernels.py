"""The sparse kernel every training program uses: ``spmm(A, H)`` for a CSR ``A`` (full-graph halo and
block-row aggregation, their backward passes, and the mini-batch blocks).

The kernel was chosen by measurement (``python benchmarks/full_graph.py --kernels``; 2-core CPU, 100k
vertices, 4.1M non-zeros, float32, load average 1.8): a compiled row-parallel CSR loop (numba, ``prange``
over rows) took 106 ms at width 64 where ``torch.sparse.mm`` on CSR took 403 ms, DGL's ``u_mul_e_sum``
591 ms and a gather + ``index_add_`` 2.2 s; at width 16 numba and torch CSR were level (20 ms; DGL 290 ms,
``index_add_`` 472 ms). Under load average 10 the order was the same. So:

* CPU: the numba kernel (``numba`` imported lazily; torch CSR when numba is missing);
* CPU, large matrices whose weights factor as ``w_ij = r_i c_j`` (GCN's ``D^-1/2 (A + I) D^-1/2``, SAGE's
  mean; :func:`csr_pair` ``scales=``) when DGL imports: DGL's unweighted ``copy_u_sum`` (libxsmm, cache
  blocked) between two diagonal scalings, ``r * (A (c * H))``. Measured on the same graph (2 threads,
  ``nice -n -15`` on a machine at load average 2.2, ``python benchmarks/full_graph.py --kernels``): 92 ms
  against numba's 111 ms at width 64, 6 ms against 16 ms at width 16. DGL's weighted ``u_mul_e_sum`` takes
  no fast path (483 and 87 ms: it broadcasts the edge weight), hence the
  factoring. Below :data:`DGL_MIN_NNZ` non-zeros (or without DGL, e.g. on a newer torch) numba runs: the
  choice does not matter there and DGL is not imported;
* CUDA: ``torch.sparse.mm`` (cuSPARSE).

``WORKBENCH_SPMM=torch`` (or ``numba``, or ``dgl``: DGL for every factored matrix, however small) overrides
the choice, for comparisons. The kernels compute the same sums up to float rounding (tested).

Threads: the numba kernel runs on numba's own pool with as many threads as torch's intra-op count
(``torch.get_num_threads()``, which the runtimes set to ``cores / ranks on this host``,
:func:`workbench.runtime.runners.threads_per_rank`); numba's count is per calling thread, so thread
ranks in one process each use their share. DGL runs on the system's libgomp (torch bundles another), whose
per-thread count :func:`spmm` sets to the same share before every DGL call.

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

__all__ = ["spmm", "spmm_kernel", "set_kernel_threads", "csr_pair", "SPMM_KERNELS", "DGL_MIN_NNZ"]

SPMM_KERNELS = ("dgl", "numba", "torch")
DGL_MIN_NNZ = 1 << 18
"""Non-zeros from which a factored matrix goes through DGL's kernel (smaller ones: numba, no DGL import)."""
_dgl_ops = None           # dgl.ops, or False when DGL does not import
_gomp = None              # the system libgomp DGL runs its threads on (torch bundles its own)
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


def _load_dgl():
    """``dgl.ops`` (imported once), or False when DGL is missing or does not import on this torch."""
    global _dgl_ops, _gomp
    if _dgl_ops is not None:
        return _dgl_ops
    try:
        import ctypes
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import dgl.ops
        try:
            _gomp = ctypes.CDLL("libgomp.so.1")
        except OSError:
            _gomp = None
        _dgl_ops = dgl.ops
    except Exception:  # noqa: BLE001 - no DGL (or one built for another torch): numba does the work
        _dgl_ops = False
    return _dgl_ops


def _uses_dgl(a: torch.Tensor, h: torch.Tensor) -> bool:
    if h.device.type != "cpu" or h.dtype != torch.float32 or a.__dict__.get("wb_scales") is None:
        return False
    choice = os.environ.get("WORKBENCH_SPMM", "").strip().lower()
    if choice in ("numba", "torch"):
        return False
    if choice != "dgl" and a._nnz() < DGL_MIN_NNZ:
        return False
    return bool(_load_dgl())


def _dgl_spmm(a: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """``r * (A (c * H))`` with DGL's unweighted kernel; the bipartite graph is built once per matrix."""
    graph = a.__dict__.get("wb_dgl_graph")
    if graph is None:
        import dgl

        m, n = a.shape
        eids = torch.empty(0, dtype=torch.int64)
        graph = dgl.heterograph({("col", "nz", "row"): ("csc", (a.crow_indices(), a.col_indices(), eids))},
                                num_nodes_dict={"col": n, "row": m})
        a.__dict__["wb_dgl_graph"] = graph
    r, c = a.__dict__["wb_scales"]
    if _gomp is not None:       # DGL's OpenMP pool: the calling rank's share of the cores
        _gomp.omp_set_num_threads(torch.get_num_threads())
    return _dgl_ops.copy_u_sum(graph, h.detach().contiguous() * c[:, None]).mul_(r[:, None])


def spmm_kernel(device: torch.device | str = "cpu", factored: bool = False) -> str:
    """The kernel :func:`spmm` uses on ``device``: ``dgl``, ``numba`` or ``torch``. ``factored``: for a
    large matrix whose weights factor (``csr_pair(..., scales=...)``).

    Example:
        >>> spmm_kernel("cuda")
        'torch'
    """
    if torch.device(device).type != "cpu":
        return "torch"
    choice = os.environ.get("WORKBENCH_SPMM", "").strip().lower()
    if choice == "torch":
        return "torch"
    if factored and choice in ("", "dgl") and _load_dgl():
        return "dgl"
    return "numba" if _load_numba() else "torch"


def spmm(a: torch.Tensor, h: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``A @ H`` for a CSR ``A`` (``(m, n)``) and dense ``H`` (``(n, F)``); added into ``out`` when given.

    Not differentiable by itself (:class:`workbench.train.models.SpMM` is the autograd wrapper).
    """
    m, width = a.shape[0], h.shape[1]
    if _uses_dgl(a, h):
        res = _dgl_spmm(a, h) if a._nnz() and width else h.new_zeros(m, width)
        return res if out is None else out.add_(res)
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
             shape: tuple[int, int], scales: Optional[tuple[torch.Tensor, torch.Tensor]] = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(A, A^T)`` as CSR tensors from COO triplets by a stable counting sort each (columns keep the input
    order inside a row; repeated entries are kept: the kernel sums them as a coalesced matrix would).
    Cheap enough to build per mini-batch block (the kernel reads any column order).

    ``scales=(r, c)`` (``(m,)`` and ``(n,)``) says that ``weights == r[rows] * c[cols]``: :func:`spmm` may
    then use an unweighted kernel between two diagonal scalings (``A`` keeps them as ``wb_scales``, ``A^T``
    gets ``(c, r)``).

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
        a, a_t = one(rows, cols, shape[0], shape[1]), one(cols, rows, shape[1], shape[0])
    if scales is not None:
        attach_scales(a, a_t, scales)
    return a, a_t


def attach_scales(a: torch.Tensor, a_t: torch.Tensor, scales: tuple[torch.Tensor, torch.Tensor]) -> None:
    """Mark ``A`` (and its transpose) as ``diag(r) B diag(c)`` with ``B`` the unweighted pattern."""
    r, c = (x.to(torch.float32).contiguous() for x in scales)
    if r.shape != (a.shape[0],) or c.shape != (a.shape[1],):
        raise ValueError(f"The 'scales' parameter of csr_pair must be vectors of shapes ({a.shape[0]},) and "
                         f"({a.shape[1]},). Got {tuple(r.shape)} and {tuple(c.shape)} instead.")
    a.__dict__["wb_scales"] = (r, c)
    a_t.__dict__["wb_scales"] = (c, r)


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
