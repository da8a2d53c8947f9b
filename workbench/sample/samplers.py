"""The registered sampling methods: the workbench's keyed ``neighbor`` sampler and DGL's as a reference.

Example:
    >>> from workbench.sample.base import block_samplers
    >>> block_samplers()
    ['dgl', 'neighbor']
    >>> SAMPLERS.build("neighbor", fanouts=(15, 10, 5)).config.fanouts
    (15, 10, 5)
"""

from __future__ import annotations

import torch

from workbench._validation import ParamError
from workbench.sample.base import SAMPLERS, SampleKey, Sampler
from workbench.sample.keyed import CSRRows, SampledEdges, sample_rows_keyed

__all__ = ["NeighborSampler", "DGLSampler", "dgl_available"]


@SAMPLERS.register
class NeighborSampler(Sampler):
    """Uniform neighbour sampling with counter-based keys (vectorised torch; exact w.r.t. the definition in
    :mod:`workbench.sample.keyed`), so every runner and every split of the seeds draws the same edges.

    Example:
        >>> import torch
        >>> from workbench.data import load_graph
        >>> from workbench.sample import LocalSource
        >>> g = load_graph("karate")
        >>> s = NeighborSampler(fanouts=(3, 2), seed=1)
        >>> a, b = s.sample([0, 33], LocalSource(g)), s.sample([0, 33], LocalSource(g))
        >>> bool(torch.equal(a.input_gid, b.input_gid)), a.blocks[-1].num_edges
        (True, 4)
    """

    name = "neighbor"

    def _kernel(self, csr: CSRRows, gid: torch.Tensor, fanout: int, replace: bool, key: SampleKey) -> SampledEdges:
        return sample_rows_keyed(csr, gid, fanout, replace, key.stream())


def dgl_available() -> bool:
    """Whether DGL imports here."""
    try:
        import dgl  # noqa: F401
    except Exception:  # ImportError, or DGL built for another torch
        return False
    return True


@SAMPLERS.register
class DGLSampler(Sampler):
    """``dgl.sampling.sample_neighbors`` on the owner's rows: the reference for speed and distribution.

    DGL's (process-wide) random stream is seeded from the same key before each call, so a run in one
    thread is reproducible; but a vertex's sample depends on the whole request, so owner-routed sampling
    does not reproduce a local run edge for edge (``exact_routing = False``), and thread ranks seeding the
    one stream at once are not reproducible. Needs DGL.

    Raises:
        ParamError: DGL does not import here.
    """

    name = "dgl"
    exact_routing = False

    @classmethod
    def unavailable(cls) -> "str | None":
        """Why this sampler cannot run here: DGL does not import (None when it does)."""
        return None if dgl_available() else "'dgl' needs DGL (pip install -e '.[dgl]')"

    def __init__(self, config=None, **options):
        super().__init__(config, **options)
        if (why := self.unavailable()) is not None:
            raise ParamError([f"The 'method' parameter of sample must be a method whose library imports here: "
                              f"{why}. Got 'dgl' instead."])
        self._graphs: dict[int, object] = {}

    def _dgl_graph(self, csr: CSRRows):
        """The rows as a DGL graph over all global ids (rows not held here have no in-edges); cached."""
        import dgl

        g = self._graphs.get(id(csr))
        if g is None or g[0] is not csr:
            if csr.row_gid is None:
                indptr = csr.indptr
                num_nodes = csr.num_rows
            else:
                num_nodes = int(csr.row_of_gid.numel()) if csr.row_of_gid is not None else \
                    1 + max(int(csr.row_gid.max()), int(csr.col_gid.max()) if csr.col_gid is not None else -1)
                deg = torch.zeros(num_nodes, dtype=torch.int64)
                deg[csr.row_gid] = csr.indptr[1:] - csr.indptr[:-1]
                indptr = torch.zeros(num_nodes + 1, dtype=torch.int64)
                torch.cumsum(deg, 0, out=indptr[1:])
                # rows are held in ascending global id, so the stored edges are already in full-CSR order
            eids = torch.arange(csr.indices.numel())
            cols = csr.global_cols(csr.indices)          # DGL's graph holds them in global ids, as it would
            g = (csr, dgl.graph(("csc", (indptr, cols, eids)), num_nodes=num_nodes))
            self._graphs[id(csr)] = g
        return g[1]

    def _kernel(self, csr: CSRRows, gid: torch.Tensor, fanout: int, replace: bool, key: SampleKey) -> SampledEdges:
        import dgl

        if gid.numel() == 0:
            return SampledEdges(gid.new_zeros(0), gid.new_zeros(0))
        dgl.seed(key.stream() % (2**31))
        sg = dgl.sampling.sample_neighbors(self._dgl_graph(csr), gid, fanout, edge_dir="in", replace=replace)
        src, dst = sg.edges()
        sorted_g, perm = torch.sort(gid)
        back = torch.argsort(perm[torch.searchsorted(sorted_g, dst)], stable=True)   # frontier order
        return SampledEdges(src[back].to(torch.int64), dst[back].to(torch.int64))
