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
* CUDA: ``torch.sparse.mm`` (cuSPARSE). Measured on an H100 (``python benchmarks/spmm_gpu.py``,
  2026-11-24): a compiled Triton CSR kernel (:mod:`workbench.train._spmm_triton`, one row per program,
  16 non-zeros at a time) beat cuSPARSE on the 100k-vertex SBM (0.56x its time at width 16, 0.77x at 64,
  0.90x at 128) but lost on an R-MAT graph with rows of up to 64k non-zeros (1.05x to 2.5x): a row per
  program leaves the long rows to a few programs. cuSPARSE stays the default; ``kernel="triton"``
  takes the Triton kernel on CUDA (graphs with even degrees).

The choice is a setting of the run, ``train.kernel`` (``--set train.kernel=torch``): ``auto`` (the rules
above), ``numba``, ``torch``, ``dgl`` (DGL for every factored matrix, however small) or ``triton`` (CUDA).
It travels with each matrix (:func:`csr_pair` / ``sparse_aggregator(..., kernel=)`` record it on the
tensor), so every product of a run uses the kernel its config names; a kernel this machine lacks is refused
before the run starts (:func:`available_kernels`). The kernels compute the same sums up to float rounding
(tested).

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

import contextlib
import dataclasses
import threading
from typing import Iterator, Optional

import torch

__all__ = ["spmm", "spmm_kernel", "set_kernel_threads", "csr_pair", "compiled", "call_compiled", "KERNEL_CHOICES",
           "kernel_of", "set_kernel", "available_kernels", "SPMM_KERNELS", "DGL_MIN_NNZ", "SpmmCall",
           "trace_spmm", "leading_rows"]

SPMM_KERNELS = ("dgl", "numba", "torch", "triton")
KERNEL_CHOICES = ("auto", *SPMM_KERNELS)
"""What ``train.kernel`` may say."""
DGL_MIN_NNZ = 1 << 18
"""Non-zeros from which a factored matrix goes through DGL's kernel (smaller ones: numba, no DGL import)."""
_dgl_ops = None           # dgl.ops, or False when DGL does not import
_gomp = None              # the system libgomp DGL runs its threads on (torch bundles its own)
_numba_fn = None          # the compiled kernel, or False when numba cannot be used
_numba_lock: Optional[threading.Lock] = None   # numba's workqueue layer is not thread-safe: serialise then
_triton_fn = None         # the Triton kernel (CUDA), or False when Triton does not import
_traces: list = []        # open :func:`trace_spmm` recorders (usually none: one list check per call)
_traces_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class SpmmCall:
    """One :func:`spmm` call as :func:`trace_spmm` saw it: shapes, dtypes and the kernel that ran.

    ``matrix`` is the CSR operand itself when the trace keeps matrices (to time the call again), else None.
    """

    rows: int
    cols: int
    nnz: int
    width: int
    index_bytes: int
    value_bytes: int
    accumulate: bool
    kernel: str
    device: str
    matrix: Optional[torch.Tensor] = dataclasses.field(default=None, repr=False, compare=False)
    thread: str = dataclasses.field(default="", repr=False, compare=False)
    """The calling thread's name (a thread rank's ``RUN-rankR``): whose product it was."""

    def min_bytes(self) -> int:
        """The fewest bytes the product must move through memory: the CSR arrays read once (row pointers,
        column indices, values), every input row read once (``cols x width``: each column is assumed
        referenced), the output written once (and read once more when added into ``out``).

        Example:
            >>> SpmmCall(rows=2, cols=3, nnz=4, width=8, index_bytes=8, value_bytes=4, accumulate=False,
            ...          kernel="torch", device="cpu").min_bytes()   # 7*8 + 4*4 + (3+2)*8*4
            232
        """
        return self._bytes(input_rows=self.cols)

    def gather_bytes(self) -> int:
        """Bytes moved with no reuse of input rows: every non-zero reads its whole input row from memory
        (what a product costs when the input does not fit in cache and the columns have no locality).

        Example:
            >>> SpmmCall(rows=2, cols=3, nnz=4, width=8, index_bytes=8, value_bytes=4, accumulate=False,
            ...          kernel="torch", device="cpu").gather_bytes()   # 7*8 + 4*4 + (4+2)*8*4
            264
        """
        return self._bytes(input_rows=self.nnz)

    def _bytes(self, input_rows: int) -> int:
        """CSR arrays once, ``input_rows`` input rows, the output once (twice when added into ``out``)."""
        sparse = (self.rows + 1 + self.nnz) * self.index_bytes + self.nnz * self.value_bytes
        dense = (input_rows + self.rows * (2 if self.accumulate else 1)) * self.width * self.value_bytes
        return int(sparse + dense)

    def flops(self) -> int:
        """Multiply-adds counted as two operations: ``2 x nnz x width``."""
        return 2 * self.nnz * self.width


@contextlib.contextmanager
def trace_spmm(keep_matrices: bool = False) -> Iterator[list]:
    """Record every :func:`spmm` call (any thread) made inside the block as :class:`SpmmCall` in the
    yielded list: what a run's sparse products must move, for a bandwidth bound (``benchmarks/full_graph.py
    --bound``). ``keep_matrices`` also keeps each CSR operand, so the calls can be timed again alone.

    Example:
        >>> from workbench.train.models import sparse_aggregator
        >>> a, _ = sparse_aggregator(torch.tensor([0, 1]), torch.tensor([1, 0]), torch.ones(2), (2, 2))
        >>> with trace_spmm() as calls:
        ...     _ = spmm(a, torch.ones(2, 4))
        >>> [(c.rows, c.nnz, c.width) for c in calls]
        [(2, 2, 4)]
    """
    calls: list = []
    entry = (calls, bool(keep_matrices))
    with _traces_lock:
        _traces.append(entry)
    try:
        yield calls
    finally:
        with _traces_lock:
            _traces.remove(entry)


def _record(a: torch.Tensor, h: torch.Tensor, accumulate: bool, kernel: str) -> None:
    m, n = a.shape
    for calls, keep in list(_traces):
        calls.append(SpmmCall(rows=int(m), cols=int(n), nnz=int(a._nnz()), width=int(h.shape[1]),
                              index_bytes=a.col_indices().element_size(), value_bytes=h.element_size(),
                              accumulate=accumulate, kernel=kernel, device=str(h.device),
                              matrix=a if keep else None, thread=threading.current_thread().name))


def _load_numba():
    global _numba_fn, _numba_lock
    if _numba_fn is not None:
        return _numba_fn
    try:
        import numba

        from workbench.train._spmm_numba import csr_spmm_add

        import numpy as np

        out = np.zeros((2, 1), np.float32)    # compile (or load from the cache) and start the thread pool
        threads = torch.get_num_threads()
        csr_spmm_add(np.array([0, 1, 1], np.int64), np.zeros(1, np.int64), np.ones(1, np.float32),
                     np.ones((1, 1), np.float32), out)
        if torch.get_num_threads() != threads:
            # numba's OpenMP pool shares torch's libgomp, and starting it set this thread's OpenMP count to the
            # pool's size (every core): a rank given 1 of 2 cores then ran torch on 2 spinning threads
            torch.set_num_threads(threads)
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


def kernel_of(a: torch.Tensor) -> str:
    """The kernel choice recorded on a matrix (``auto`` when none was)."""
    return a.__dict__.get("wb_kernel", "auto")


def set_kernel(a: torch.Tensor, kernel: str) -> torch.Tensor:
    """Record the kernel choice ``kernel`` on the matrix ``a`` (what :func:`spmm` will use for it)."""
    if kernel not in KERNEL_CHOICES:
        raise ValueError(f"The 'kernel' parameter of set_kernel must be one of {list(KERNEL_CHOICES)}. "
                         f"Got {kernel!r} instead.")
    if kernel != "auto":
        a.__dict__["wb_kernel"] = kernel
    return a


def available_kernels(device: str = "cpu") -> list[str]:
    """The kernel choices that can run on ``device`` here (``auto`` always can).

    Example:
        >>> "auto" in available_kernels() and "torch" in available_kernels()
        True
    """
    out = ["auto", "torch"]
    if torch.device(device).type == "cpu":
        out += [k for k, ok in (("numba", _load_numba), ("dgl", _load_dgl)) if ok()]
    elif _load_triton():
        out.append("triton")
    return out


def _uses_dgl(a: torch.Tensor, h: torch.Tensor) -> bool:
    if h.device.type != "cpu" or h.dtype != torch.float32 or a.__dict__.get("wb_scales") is None:
        return False
    choice = kernel_of(a)
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


def _load_triton():
    """The Triton CSR kernel (:mod:`workbench.train._spmm_triton`), or False where Triton does not import."""
    global _triton_fn
    if _triton_fn is None:
        try:
            from workbench.train._spmm_triton import csr_spmm

            _triton_fn = csr_spmm
        except Exception:  # noqa: BLE001 - no Triton (the CPU build of torch): cuSPARSE
            _triton_fn = False
    return _triton_fn


def spmm_kernel(device: torch.device | str = "cpu", factored: bool = False, choice: str = "auto") -> str:
    """The kernel :func:`spmm` uses on ``device`` for a matrix whose recorded choice is ``choice``: ``dgl``,
    ``numba``, ``torch`` or ``triton``. ``factored``: for a large matrix whose weights factor
    (``csr_pair(..., scales=...)``).

    Example:
        >>> spmm_kernel("cuda"), spmm_kernel("cpu", choice="torch")
        ('torch', 'torch')
    """
    if torch.device(device).type != "cpu":
        return "triton" if choice == "triton" and _load_triton() else "torch"
    if choice == "torch":
        return "torch"
    if factored and choice in ("auto", "dgl") and _load_dgl():
        return "dgl"
    return "numba" if _load_numba() else "torch"


def spmm(a: torch.Tensor, h: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``A @ H`` for a CSR ``A`` (``(m, n)``) and dense ``H`` (``(n, F)``); added into ``out`` when given.

    Not differentiable by itself (:class:`workbench.train.models.SpMM` is the autograd wrapper).
    """
    m, width = a.shape[0], h.shape[1]
    if _traces:
        _record(a, h, out is not None, "dgl" if _uses_dgl(a, h) else spmm_kernel(h.device, choice=kernel_of(a)))
    if _uses_dgl(a, h):
        res = _dgl_spmm(a, h) if a._nnz() and width else h.new_zeros(m, width)
        return res if out is None else out.add_(res)
    if spmm_kernel(h.device, choice=kernel_of(a)) == "numba" and h.dtype == torch.float32:
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
    if h.device.type == "cuda" and h.dtype == torch.float32 and spmm_kernel(h.device, choice=kernel_of(a)) == "triton":
        return _triton_fn(a.crow_indices(), a.col_indices(), a.values(), h.detach(), out)
    res = torch.sparse.mm(a, h.contiguous())
    return res if out is None else out.add_(res)


def csr_pair(rows: torch.Tensor, cols: torch.Tensor, weights: torch.Tensor,
             shape: tuple[int, int], scales: Optional[tuple[torch.Tensor, torch.Tensor]] = None,
             kernel: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    """``(A, A^T)`` as CSR tensors from COO triplets by a stable counting sort each (columns keep the input
    order inside a row; repeated entries are kept: the kernel sums them as a coalesced matrix would).
    Cheap enough to build per mini-batch block (the kernel reads any column order).

    ``scales=(r, c)`` (``(m,)`` and ``(n,)``) says that ``weights == r[rows] * c[cols]``: :func:`spmm` may
    then use an unweighted kernel between two diagonal scalings (``A`` keeps them as ``wb_scales``, ``A^T``
    gets ``(c, r)``). ``kernel``: the choice :func:`spmm` makes for both (see the module docstring).

    Example:
        >>> a, a_t = csr_pair(torch.tensor([1, 0]), torch.tensor([0, 2]), torch.tensor([2.0, 3.0]), (2, 3))
        >>> a.to_dense().tolist(), a_t.shape
        ([[0.0, 0.0, 3.0], [2.0, 0.0, 0.0]], torch.Size([3, 2]))
    """
    compiled = rows.device.type == "cpu" and bool(_load_numba())

    def one(r: torch.Tensor, c: torch.Tensor, m: int, n: int) -> torch.Tensor:
        crow = torch.zeros(m + 1, dtype=torch.int64, device=r.device)
        if r.numel() < 2 or bool((r[1:] >= r[:-1]).all()):   # already by row (sampled blocks): no reorder
            crow[1:] = torch.cumsum(torch.bincount(r, minlength=m), 0)
            return torch.sparse_csr_tensor(crow, c.contiguous(), weights.contiguous(), (m, n))
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
    return set_kernel(a, kernel), set_kernel(a_t, kernel)


def attach_scales(a: torch.Tensor, a_t: torch.Tensor, scales: tuple[torch.Tensor, torch.Tensor]) -> None:
    """Mark ``A`` (and its transpose) as ``diag(r) B diag(c)`` with ``B`` the unweighted pattern."""
    r, c = (x.to(torch.float32).contiguous() for x in scales)
    if r.shape != (a.shape[0],) or c.shape != (a.shape[1],):
        raise ValueError(f"The 'scales' parameter of csr_pair must be vectors of shapes ({a.shape[0]},) and "
                         f"({a.shape[1]},). Got {tuple(r.shape)} and {tuple(c.shape)} instead.")
    a.__dict__["wb_scales"] = (r, c)
    a_t.__dict__["wb_scales"] = (c, r)


def leading_rows(a: torch.Tensor, num_rows: int) -> torch.Tensor:
    """The first ``num_rows`` rows of the CSR matrix ``a`` as a CSR matrix over views of its arrays (no copy),
    with its kernel choice and its row and column scales (:func:`csr_pair`)."""
    import warnings

    crow = a.crow_indices()[:num_rows + 1]
    nnz = int(crow[-1])
    with warnings.catch_warnings():  # "sparse CSR support is in beta": the ops used here are stable
        warnings.simplefilter("ignore", UserWarning)
        out = torch.sparse_csr_tensor(crow, a.col_indices()[:nnz], a.values()[:nnz], (num_rows, a.shape[1]))
    if "wb_kernel" in a.__dict__:
        out.__dict__["wb_kernel"] = a.__dict__["wb_kernel"]
    if "wb_scales" in a.__dict__:
        r, c = a.__dict__["wb_scales"]
        out.__dict__["wb_scales"] = (r[:num_rows], c)
    return out


def compiled(name: str):
    """The compiled kernel ``name`` of :mod:`workbench.train._spmm_numba`, or None where numba cannot be used."""
    if not _load_numba():
        return None
    import workbench.train._spmm_numba as _spmm_numba

    return getattr(_spmm_numba, name)


def call_compiled(fn, *args):
    """Call a compiled parallel kernel on the calling rank's share of the cores (serialised where numba's
    threading layer is not thread-safe)."""
    _load_numba()   # starts the pool once and finds the threading layer (the lock where it is workqueue)
    _follow_torch_threads()
    if _numba_lock is None:
        return fn(*args)
    with _numba_lock:
        return fn(*args)


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
