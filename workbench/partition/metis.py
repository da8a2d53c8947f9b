"""METIS with DistDGL's multi-constraint balancing.

METIS runs on the symmetrised graph without self-loops (duplicate edges merged), like DGL's
``metis_partition_assignment``. Backends:

* **pymetis** for one balance constraint (plain vertex counts, or one weight column). Zero-copy when the
  graph is undirected, clean and has sorted rows.
* **libmetis** (Debian ``libmetis5`` through ctypes, :mod:`workbench.partition._libmetis`) for several
  constraints: pymetis hard-codes ``ncon = 1`` and silently drops extra weights, so we never give it more.
* **dgl** (``dgl.metis_partition_assignment``), the multi-constraint fallback when libmetis is missing and
  DGL imports. It cannot take edge weights or custom vertex weights.

Balancing follows DGL's recipe: ``balance_train`` adds one 0/1 column per split present (train, val, test,
other); ``balance_edges`` adds the in-degree (one column per split when ``balance_train`` is on, otherwise
one column). METIS balances every column within ``1 + imbalance`` of the mean.

Two guards keep the columns satisfiable (METIS otherwise gives up on balance altogether, and a split of one
vertex over two parts left the other part empty):

* a split with fewer vertices than parts cannot reach every part, so :func:`balance_categories` pools such
  splits, and a pool still smaller than the part count joins the largest split (DGL's DistDGL example passes
  ``balance_ntypes=train_mask``, train against everything else: the same merge at its coarsest; DGL's
  ``metis_partition_assignment`` itself keeps every type); user ``vertex_weights`` columns on fewer vertices
  than parts are refused;
* a column that no placement balances within ``1 + imbalance`` (5 val vertices over 4 parts: one part holds 2,
  1.6 times the mean) gets the tolerance it admits (:func:`balance_tolerances`), so METIS does not trade the
  other columns' balance for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import warnings
from typing import Annotated, Any, Optional

import numpy as np
import torch

from workbench._validation import ErrorCollector, ParamError
from workbench.constraints import Interval, Options
from workbench.graph import Graph
from workbench.partition._libmetis import load_libmetis
from workbench.partition.base import Partitioner, register_partitioner

__all__ = ["MetisPartitioner", "symmetric_csr", "split_categories", "balance_categories", "balance_weights",
           "balance_tolerances"]

BACKENDS = ("auto", "pymetis", "libmetis", "dgl")
SPLIT_NAMES = ("train", "val", "test", "other")
_INSTALL_HINT = ("multi-constraint METIS needs the system METIS library: `apt-get install libmetis5` "
                 "(or install DGL for its bundled METIS)")


def _dgl_available() -> bool:
    try:
        import dgl  # noqa: F401
    except Exception:  # DGL raises FileNotFoundError/OSError on an unsupported torch, not only ImportError
        return False
    return True


def _is_metis_ready(indptr: np.ndarray, indices: np.ndarray) -> bool:
    """True when every CSR row is strictly increasing (sorted, no duplicates) and has no self-loop."""
    n = len(indptr) - 1
    if indices.size and bool((indices == np.repeat(np.arange(n), np.diff(indptr))).any()):
        return False
    if indices.size < 2:
        return True
    row_start = np.zeros(indices.size, dtype=bool)
    starts = indptr[:-1]
    row_start[starts[starts < indices.size]] = True
    return bool((np.diff(indices) > 0)[~row_start[1:]].all())


def symmetric_csr(graph: Graph, edge_weights: Optional[torch.Tensor] = None
                  ) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """The METIS input graph: symmetric CSR, no self-loops, duplicates merged.

    Args:
        graph: the graph.
        edge_weights: optional ``(num_edges,)`` weights of the stored edges; the weight of a vertex pair
            is the sum over the stored edges between them (both directions).

    Returns:
        ``(xadj, adjncy, adjwgt)`` int64 numpy arrays (``adjwgt`` is ``None`` without weights).
    """
    n = graph.num_nodes
    indptr, indices = graph.indptr.numpy(), graph.indices.numpy()
    if edge_weights is None and not graph.directed and _is_metis_ready(indptr, indices):
        return indptr, indices, None  # already METIS-ready: zero copy
    src, dst = graph.indices, graph.dst_ids()
    keep = src != dst
    u = torch.cat([src[keep], dst[keep]])
    v = torch.cat([dst[keep], src[keep]])
    if edge_weights is None:
        key = torch.unique(u * n + v)
        weights = None
    else:
        w = edge_weights.to(torch.int64)[keep]
        key, inverse = torch.unique(u * n + v, return_inverse=True)
        weights = torch.zeros(key.numel(), dtype=torch.int64).index_add_(0, inverse, torch.cat([w, w])).numpy()
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(torch.bincount(key // n, minlength=n).numpy(), out=xadj[1:])
    return xadj, (key % n).numpy(), weights


def split_categories(graph: Graph) -> torch.Tensor:
    """``(N,)`` split of each vertex: 0 train, 1 val, 2 test, 3 other (train wins overlaps, then val)."""
    cat = torch.full((graph.num_nodes,), 3, dtype=torch.int64)
    for code, mask in ((2, graph.test_mask), (1, graph.val_mask), (0, graph.train_mask)):
        if mask is not None:
            cat[mask] = code
    return cat


def balance_categories(graph: Graph, num_parts: int = 1) -> torch.Tensor:
    """``(N,)`` balance category of each vertex: its split (:func:`split_categories`), with the splits of fewer
    than ``num_parts`` vertices merged.

    Such a split cannot reach every part, so its column can never be balanced. The small splits are pooled
    into the largest of them; a pool still smaller than ``num_parts`` joins the largest split (lowest code on
    ties).

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> g = Graph.from_edges(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 3]), 6)
        >>> g = g.with_data(train_mask=torch.tensor([1, 1, 1, 0, 0, 0]).bool(),
        ...                 val_mask=torch.tensor([0, 0, 0, 1, 1, 0]).bool())
        >>> split_categories(g).tolist()
        [0, 0, 0, 1, 1, 3]
        >>> balance_categories(g, 2).tolist()   # 'other' (one vertex) joins the largest split, train
        [0, 0, 0, 1, 1, 0]
        >>> balance_categories(g, 3).tolist()   # val and other pool into 3 vertices, enough for 3 parts
        [0, 0, 0, 1, 1, 1]
    """
    cat = split_categories(graph)
    counts = torch.bincount(cat, minlength=len(SPLIT_NAMES))
    small = [c for c in range(len(SPLIT_NAMES)) if 0 < int(counts[c]) < num_parts]
    if not small:
        return cat
    if int(counts[small].sum()) >= num_parts:
        target = max(small, key=lambda c: (int(counts[c]), -c))
    else:
        target = int(torch.argmax(counts))  # the first maximum: lowest code on ties
    for c in small:
        cat[cat == c] = target
    return cat


def balance_weights(graph: Graph, balance_train: bool, balance_edges: bool,
                    vertex_weights: Optional[torch.Tensor] = None, num_parts: int = 1) -> Optional[np.ndarray]:
    """DistDGL's constraint columns, ``(N, ncon)`` int64, or ``None`` when only vertex counts matter.

    The split columns follow :func:`balance_categories` for ``num_parts`` parts (the default 1 keeps every
    split). All-zero columns are dropped (METIS divides by each column's total).
    """
    cols: list[torch.Tensor] = []
    degree = graph.in_degrees()
    if balance_train:
        cat = balance_categories(graph, num_parts)
        present = [c for c in range(len(SPLIT_NAMES)) if bool((cat == c).any())]
        cols += [(cat == c).to(torch.int64) for c in present]
        if balance_edges:
            cols += [degree * (cat == c) for c in present]
    elif balance_edges:
        cols.append(degree)
    if vertex_weights is not None:
        vw = vertex_weights.to(torch.int64)
        cols += list((vw if vw.dim() == 2 else vw[:, None]).T)
    cols = [c for c in cols if bool(c.any())]
    if not cols:
        return None
    return torch.stack(cols, 1).numpy()


def balance_tolerances(vwgt: np.ndarray, num_parts: int, imbalance: float) -> np.ndarray:
    """METIS's ``ubvec``: ``(ncon,)`` allowed max/mean per column, ``1 + imbalance`` or the balance the column
    admits when that is worse.

    A column on ``k`` vertices puts ``ceil(k / P)`` of them in some part, and its heaviest vertex sits in one
    part whole; asking for more than that is infeasible, and METIS then gives up the other columns' balance
    instead (the 6 val vertices of ``products-like:num_nodes=400,seed=0`` on 4 parts left 1.32 x the mean
    vertices and 1.25 x the mean train vertices in one part).

    Example:
        >>> w = np.array([[1, 1], [1, 0], [1, 0], [1, 0], [1, 1], [1, 1], [1, 1], [1, 1]])  # 8 and 5 vertices
        >>> balance_tolerances(w, 4, 0.03).round(3).tolist()
        [1.03, 1.602]
    """
    total = vwgt.sum(0).astype(np.float64)
    nnz = (vwgt > 0).sum(0)
    admits = np.maximum(np.ceil(nnz / num_parts) * num_parts / np.maximum(nnz, 1),
                        vwgt.max(0) * num_parts / np.maximum(total, 1))
    return np.maximum(1.0 + imbalance, admits * 1.001)  # METIS compares in float32: a little slack


def _check_int_tensor(errs: ErrorCollector, name: str, value: Any, shapes: list[tuple], low: int) -> None:
    desc = " or ".join(str(s) for s in shapes)
    if not isinstance(value, (torch.Tensor, np.ndarray)):
        errs.check(False, name, f"a tensor of shape {desc}", type(value).__name__)
        return
    t = torch.as_tensor(value)
    if tuple(t.shape) not in shapes:
        errs.check(False, name, f"a tensor of shape {desc}", tuple(t.shape))
        return
    integral = not t.is_floating_point() or bool((t == t.round()).all())
    errs.check(integral and t.dtype != torch.bool and (t.numel() == 0 or int(t.min()) >= low), name,
               f"integers >= {low}", f"dtype {t.dtype}, min {t.min().item() if t.numel() else None}")


@register_partitioner
class MetisPartitioner(Partitioner):
    """Minimum edge-cut METIS, optionally with DistDGL's multi-constraint balancing and edge weights.

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> ring = torch.arange(8)
        >>> g = Graph.from_edges(torch.cat([ring, (ring + 1) % 8]), torch.cat([(ring + 1) % 8, ring]), 8,
        ...                      directed=False)
        >>> r = MetisPartitioner(seed=0).partition(g, 2)
        >>> r.metrics().edge_cut, r.part_sizes().tolist()
        (2, [4, 4])
    """

    name = "metis"

    @dataclasses.dataclass(kw_only=True)
    class Config(Partitioner.Config):
        balance_train: bool = False
        """Balance the train/val/test/other vertices of every part (DistDGL's balance_ntypes); needs masks."""
        balance_edges: bool = False
        """Balance in-degree (edges per part) too (DistDGL's balance_edges)."""
        vertex_weights: Optional[Any] = None
        """Extra (N,) or (N, C) integer vertex weights, each column balanced as its own constraint."""
        edge_weights: Optional[Any] = None
        """(num_edges,) positive integer weights of the stored edges; METIS minimises the weighted cut."""
        imbalance: Annotated[float, Interval(0.001, 10)] = 0.03
        """Allowed load imbalance per constraint: parts stay within (1 + imbalance) x mean (METIS ufactor/1000)."""
        recursive: bool = False
        """Recursive bisection instead of k-way (DistDGL uses k-way)."""
        objective: Annotated[str, Options("cut", "vol")] = "cut"
        """'cut' minimises the edge cut, 'vol' the total communication volume."""
        backend: Annotated[str, Options(*BACKENDS)] = "auto"
        """'auto', 'pymetis' (one constraint), 'libmetis' (system METIS via ctypes) or 'dgl'."""

        def _validate(self, errs: ErrorCollector) -> None:
            super()._validate(errs)
            errs.check(not (self.recursive is True and self.objective == "vol"), "objective",
                       "'cut' with recursive=True (recursive bisection only minimises the cut)", self.objective)

    # ------------------------------------------------------------------------------------ checks
    def _check(self, graph: Graph, num_parts: Optional[int], errs: ErrorCollector) -> None:
        c = self.config
        n, e = graph.num_nodes, graph.num_edges
        if c.balance_train:
            errs.check(graph.train_mask is not None, "balance_train", "False for a graph without train_mask",
                       c.balance_train)
        if c.vertex_weights is not None:
            vw = c.vertex_weights
            ncols = int(vw.shape[1]) if getattr(vw, "ndim", 0) == 2 and vw.shape[1] >= 1 else "C"
            _check_int_tensor(errs, "vertex_weights", vw, [(n,), (n, ncols)], 0)
            if not errs.errors and num_parts is not None:
                t = torch.as_tensor(vw)
                nnz = (t.reshape(n, -1) > 0).sum(0).tolist()
                errs.check(not any(0 < k < num_parts for k in nnz), "vertex_weights",
                           f"columns weighing at least num_parts={num_parts} vertices each (a column on fewer "
                           "vertices cannot reach every part)",
                           f"positive entries per column {nnz}")
        if c.edge_weights is not None:
            _check_int_tensor(errs, "edge_weights", c.edge_weights, [(e,)], 1)
        if errs.errors:
            return
        ncon = self._num_constraints(graph, num_parts or 1)
        backend = self._backend(ncon)
        if backend == "pymetis" and ncon > 1:
            errs.check(False, "backend", f"'libmetis', 'dgl' or 'auto' for {ncon} balance constraints "
                       "(pymetis supports one)", c.backend)
        elif backend == "libmetis" and load_libmetis() is None:
            errs.add(f"The 'backend' parameter of MetisPartitioner needs libmetis: {_INSTALL_HINT}.")
        elif backend == "dgl":
            if not _dgl_available():
                errs.check(False, "backend", "a backend that imports here ('dgl' needs DGL: pip install -e "
                           "'.[dgl]'; 'pymetis' or 'libmetis' need no DGL)", c.backend)
            elif c.edge_weights is not None or c.vertex_weights is not None:
                errs.add("The 'backend' parameter of MetisPartitioner cannot be 'dgl' with edge_weights or "
                         "vertex_weights (dgl.metis_partition_assignment takes neither); "
                         f"{_INSTALL_HINT}.")
        elif backend is None:
            errs.add(f"MetisPartitioner has {ncon} balance constraints, but {_INSTALL_HINT}.")

    def _num_constraints(self, graph: Graph, num_parts: int) -> int:
        w = balance_weights(graph, self.config.balance_train, self.config.balance_edges,
                            None if self.config.vertex_weights is None else torch.as_tensor(self.config.vertex_weights),
                            num_parts)
        return 1 if w is None else int(w.shape[1])

    def _backend(self, ncon: int) -> Optional[str]:
        c = self.config
        if c.backend != "auto":
            return c.backend
        if ncon <= 1:
            return "pymetis"
        if load_libmetis() is not None:
            return "libmetis"
        if c.edge_weights is None and c.vertex_weights is None and _dgl_available():
            return "dgl"
        return None

    # ------------------------------------------------------------------------------------ partition
    def _partition(self, graph: Graph, num_parts: int) -> torch.Tensor:
        c = self.config
        if num_parts == 1:
            return torch.zeros(graph.num_nodes, dtype=torch.int64)
        if c.balance_train:
            self._warn_if_train_merged(graph, num_parts)
        vw = None if c.vertex_weights is None else torch.as_tensor(c.vertex_weights)
        vwgt = balance_weights(graph, c.balance_train, c.balance_edges, vw, num_parts)
        ncon = 1 if vwgt is None else vwgt.shape[1]
        backend = self._backend(ncon)
        if backend == "dgl":
            return self._partition_dgl(graph, num_parts)
        ew = None if c.edge_weights is None else torch.as_tensor(c.edge_weights)
        xadj, adjncy, adjwgt = symmetric_csr(graph, ew)
        ufactor = max(1, int(round(c.imbalance * 1000)))
        if backend == "libmetis":
            lib = load_libmetis()
            ubvec = None if vwgt is None else balance_tolerances(vwgt, num_parts, c.imbalance)
            part = lib.part_graph(xadj, adjncy, num_parts, vwgt=vwgt, adjwgt=adjwgt, ubvec=ubvec, seed=c.seed,
                                  ufactor=ufactor, recursive=c.recursive, objtype=int(c.objective == "vol"))
            return torch.from_numpy(part)
        return torch.from_numpy(self._partition_pymetis(xadj, adjncy, adjwgt, vwgt, num_parts, ufactor))

    def _warn_if_train_merged(self, graph: Graph, num_parts: int) -> None:
        """balance_train cannot do its job when the train split has fewer vertices than parts."""
        num_train = int((split_categories(graph) == 0).sum())
        if 0 < num_train < num_parts:
            warnings.warn(f"balance_train: the {num_train} train vertices cannot reach all {num_parts} parts, so "
                          "they are balanced together with other splits (balance_categories)", RuntimeWarning,
                          stacklevel=4)

    def _partition_pymetis(self, xadj, adjncy, adjwgt, vwgt, num_parts: int, ufactor: int) -> np.ndarray:
        import pymetis

        c = self.config
        if vwgt is not None and vwgt.shape != (len(xadj) - 1, 1):  # pymetis would silently ignore the rest
            raise ParamError([f"pymetis takes one vertex-weight column; got shape {vwgt.shape}"])
        dt = pymetis.zero_copy_dtype()
        options = pymetis.Options(seed=c.seed, ufactor=ufactor)
        if not c.recursive:  # METIS_PartGraphRecursive rejects OBJTYPE
            options.objtype = int(c.objective == "vol")
        res = pymetis.part_graph(
            num_parts, adjacency=pymetis.CSRAdjacency(xadj.astype(dt, copy=False), adjncy.astype(dt, copy=False)),
            vweights=None if vwgt is None else np.ascontiguousarray(vwgt[:, 0], dtype=dt),
            eweights=None if adjwgt is None else adjwgt.astype(dt, copy=False),
            recursive=c.recursive, options=options)
        return np.asarray(res.vertex_part, dtype=np.int64)

    def _partition_dgl(self, graph: Graph, num_parts: int) -> torch.Tensor:
        import dgl

        c = self.config
        src, dst = graph.edges()
        g = dgl.graph((src, dst), num_nodes=graph.num_nodes)
        with contextlib.redirect_stdout(io.StringIO()):  # DGL prints timings
            part = dgl.metis_partition_assignment(
                g, num_parts, balance_ntypes=balance_categories(graph, num_parts) if c.balance_train else None,
                balance_edges=c.balance_edges, mode="recursive" if c.recursive else "k-way",
                objtype=c.objective)
        return torch.as_tensor(part).to(torch.int64)
