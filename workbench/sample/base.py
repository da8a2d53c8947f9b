"""The sample stage: typed mini-batches of message-flow-graph blocks, and the :class:`Sampler` base.

A sampler turns a batch of seed vertices into one :class:`Block` per GNN layer, in DGL's layout:
``blocks[0]`` is the **input** layer (its sources are the vertices whose features are needed) and
``blocks[-1]`` ends at the seeds. Fan-outs follow DGL's ``NeighborSampler(fanouts)``: ``fanouts[i]`` is
the fan-out of ``blocks[i]``, so sampling starts at the seeds with ``fanouts[-1]`` (DistDGL's "15, 10, 5" =
5 neighbours per seed, then 10, then 15).

Where neighbours come from is a :class:`NeighborSource` (the whole graph, or the owners of the vertices
through the communicator, see :mod:`workbench.sample.sources`); *how* an owner samples its rows is the
method's kernel (:meth:`Sampler._kernel`). A new method is one subclass plus its registration::

    @SAMPLERS.register
    class MySampler(Sampler):
        name = "mine"

        def _kernel(self, csr, gid, fanout, replace, key):
            ...  # -> SampledEdges grouped by destination in the order of gid

Example:
    >>> import torch
    >>> from workbench.graph import Graph
    >>> from workbench.sample import SAMPLERS, LocalSource
    >>> g = Graph.from_edges(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 0]), 4)
    >>> mb = SAMPLERS.build("neighbor", fanouts=(-1, -1)).sample(torch.tensor([0]), LocalSource(g))
    >>> [b.dst_gid.tolist() for b in mb.blocks], mb.input_gid.tolist(), mb.num_sampled_edges
    ([[0, 3], [0]], [0, 3, 2], 3)
"""

from __future__ import annotations

import dataclasses
import html
import threading
import time
from typing import Annotated, Any, ClassVar, Optional, Protocol, runtime_checkable

import numpy as np
import torch

from workbench._validation import ParamError
from workbench.constraints import Interval, OneOf, Options, TupleOf
from workbench.sample.keyed import CSRRows, SampledEdges
from workbench.sample.split import SPLIT_MODES
from workbench.stages import Stage, registry

__all__ = ["Block", "MiniBatch", "SampleKey", "NeighborSource", "Kernel", "Sampler", "SAMPLERS", "build_block",
           "block_samplers"]

SAMPLERS = registry("sample")
"""Every registered sampling method, by name (``--set sample.method=NAME``)."""


@dataclasses.dataclass(eq=False)
class Block:
    """One layer of a message-flow graph (DGL's block): edges from ``src`` vertices into ``dst`` vertices.

    The destination vertices come first among the sources: ``src_gid[:num_dst]`` are the destinations.

    Example:
        >>> b = Block(src_gid=torch.tensor([7, 3, 9]), num_dst=1, edge_src=torch.tensor([1, 2]),
        ...           edge_dst=torch.tensor([0, 0]))
        >>> b.dst_gid.tolist(), b.num_src, b.num_edges
        ([7], 3, 2)
    """

    src_gid: torch.Tensor
    """``(num_src,)`` int64 global ids of the source vertices, destinations first."""
    num_dst: int
    """Number of destination vertices (the first ``num_dst`` entries of ``src_gid``)."""
    edge_src: torch.Tensor
    """``(num_edges,)`` int64 local index into ``src_gid`` of each edge's source."""
    edge_dst: torch.Tensor
    """``(num_edges,)`` int64 local index into ``dst_gid`` of each edge's destination."""

    @property
    def dst_gid(self) -> torch.Tensor:
        """``(num_dst,)`` global ids of the destination vertices."""
        return self.src_gid[: self.num_dst]

    @property
    def num_src(self) -> int:
        return int(self.src_gid.numel())

    @property
    def num_edges(self) -> int:
        return int(self.edge_src.numel())

    def to_dgl(self):
        """The same block as a ``dgl.create_block`` (``srcdata``/``dstdata[dgl.NID]`` = global ids)."""
        import dgl

        b = dgl.create_block((self.edge_src, self.edge_dst), num_src_nodes=self.num_src, num_dst_nodes=self.num_dst)
        b.srcdata[dgl.NID] = self.src_gid
        b.dstdata[dgl.NID] = self.dst_gid
        return b

    def __repr__(self) -> str:
        return f"Block(num_src={self.num_src}, num_dst={self.num_dst}, num_edges={self.num_edges})"


@dataclasses.dataclass(eq=False)
class MiniBatch:
    """A sampled mini-batch: the seeds and one :class:`Block` per layer (``blocks[0]`` = input layer)."""

    seeds: torch.Tensor
    """``(batch,)`` global ids of the output vertices (``blocks[-1].dst_gid``)."""
    blocks: list[Block]
    """The layers, input first (DGL's order)."""
    epoch: int = 0
    step: int = 0
    elapsed_s: float = 0.0
    """Seconds spent sampling (including the owners' round trips)."""

    @property
    def input_gid(self) -> torch.Tensor:
        """Global ids of the vertices whose features the batch needs (``blocks[0].src_gid``)."""
        return self.blocks[0].src_gid

    @property
    def num_input_nodes(self) -> int:
        return int(self.input_gid.numel())

    @property
    def num_sampled_edges(self) -> int:
        """Edges over all blocks."""
        return sum(b.num_edges for b in self.blocks)

    def to_dgl(self) -> list:
        """The blocks as DGL blocks (input first), ready for a DGL model."""
        return [b.to_dgl() for b in self.blocks]

    def __repr__(self) -> str:
        return (f"MiniBatch(seeds={int(self.seeds.numel())}, input_nodes={self.num_input_nodes}, "
                f"sampled_edges={self.num_sampled_edges}, blocks={self.blocks})")

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{i}</td><td>{b.num_src}</td><td>{b.num_dst}</td><td>{b.num_edges}</td></tr>"
                       for i, b in enumerate(self.blocks))
        return (f"<b>MiniBatch</b> {html.escape(repr(int(self.seeds.numel())))} seeds, epoch {self.epoch}, "
                f"step {self.step}<table><tr><th>block</th><th>src</th><th>dst</th><th>edges</th></tr>{rows}</table>")


@dataclasses.dataclass(frozen=True)
class SampleKey:
    """What a random draw is about: run seed, epoch, step and block index (never the rank)."""

    seed: int
    epoch: int
    step: int
    layer: int
    """The block index (``blocks[layer]``, input = 0); also the ``layer`` of the traffic it causes."""

    def stream(self) -> int:
        """The int64 stream key ``K`` (:func:`workbench.sample.keyed.stream_key`)."""
        from workbench.sample.keyed import stream_key

        return stream_key(self.seed, self.epoch, self.step, self.layer)


class Kernel(Protocol):
    """How an owner samples some of its rows: ``(csr, gid, fanout, replace, key) -> SampledEdges``."""

    def __call__(self, csr: CSRRows, gid: torch.Tensor, fanout: int, replace: bool,
                 key: SampleKey) -> SampledEdges: ...


@runtime_checkable
class NeighborSource(Protocol):
    """Where in-neighbours come from (see :mod:`workbench.sample.sources`)."""

    num_nodes: int

    def sample_neighbors(self, frontier_gid: torch.Tensor, fanout: int, replace: bool, key: SampleKey, *,
                         kernel: Optional[Kernel] = None) -> SampledEdges:
        """Sampled in-edges of every frontier vertex (unique ids), grouped by destination in frontier order."""
        ...


# ------------------------------------------------------------------------------------------------ blocks
class _IdTable(threading.local):
    """A per-thread ``(num_nodes,)`` global -> local id table, all ``-1`` between uses."""

    table: Optional[np.ndarray] = None

    def get(self, num_nodes: int) -> np.ndarray:
        if self.table is None or self.table.size < num_nodes:
            self.table = np.full(num_nodes, -1, dtype=np.int64)
        return self.table


_TABLES = _IdTable()


_RELABEL: list = []


def _compiled_relabel():
    """The numba relabelling kernel, or None where numba does not import (the numpy passes then)."""
    if not _RELABEL:
        try:
            from workbench.sample._blocks_numba import relabel_block
        except ImportError:
            relabel_block = None
        _RELABEL.append(relabel_block)
    return _RELABEL[0]


def build_block(dst_gid: torch.Tensor, edges: SampledEdges, num_nodes: int) -> Block:
    """The block of ``edges`` into the (unique) ``dst_gid``: sources are the destinations followed by the other
    sources in order of first appearance (as ``dgl.to_block`` orders them). O(edges), no sort.

    Raises:
        ParamError: ``dst_gid`` has repeated ids.
    """
    table = _TABLES.get(num_nodes)
    dst = dst_gid.numpy()
    nd = dst.size
    relabel = _compiled_relabel()
    if relabel is not None:   # one compiled pass (the numpy passes below cost ~3 ms per 100k-edge block)
        src_all, loc, edge_dst, ok = relabel(table, np.ascontiguousarray(dst, dtype=np.int64),
                                             np.ascontiguousarray(edges.src_gid.numpy(), dtype=np.int64),
                                             np.ascontiguousarray(edges.dst_gid.numpy(), dtype=np.int64))
        if not ok:
            raise ParamError(["The 'seeds' parameter of Sampler.sample must be unique global ids. "
                              "Got repeated ids instead."])
        return Block(src_gid=torch.from_numpy(src_all), num_dst=nd, edge_src=torch.from_numpy(loc),
                     edge_dst=torch.from_numpy(edge_dst))
    table[dst] = np.arange(nd)
    if nd and not bool((table[dst] == np.arange(nd)).all()):
        table[dst] = -1
        raise ParamError(["The 'seeds' parameter of Sampler.sample must be unique global ids. "
                          "Got repeated ids instead."])
    src = edges.src_gid.numpy()
    loc = table[src]
    new = loc < 0
    cand = src[new]
    if cand.size:
        pos = np.arange(cand.size)
        table[cand[::-1]] = pos[::-1]                                 # sequential assignment: the first wins
        uniq = cand[table[cand] == pos]                               # new sources, in order of first appearance
        table[uniq] = np.arange(nd, nd + uniq.size)
        loc[new] = table[cand]
        src_all = np.concatenate([dst, uniq])
    else:
        src_all = dst.copy()
    edge_dst = table[edges.dst_gid.numpy()]
    table[src_all] = -1                                               # every entry set above, back to -1
    return Block(src_gid=torch.from_numpy(src_all), num_dst=nd, edge_src=torch.from_numpy(loc),
                 edge_dst=torch.from_numpy(edge_dst))


# ------------------------------------------------------------------------------------------------ sampler
class Sampler(Stage):
    """Base of the sampling methods: per-layer neighbour sampling into DGL-layout blocks.

    The public :meth:`sample` validates the seeds, walks the layers from the seeds outwards, asks the
    source for each frontier's neighbours with the method's :meth:`_kernel`, builds the blocks and times it.
    """

    kind = "sample"
    exact_routing: ClassVar[bool] = True
    """Whether a vertex's sample depends only on (key, vertex), so owner-routed sampling equals a local run."""

    @dataclasses.dataclass(kw_only=True)
    class Config(Stage.Config):
        fanouts: Annotated[tuple[int, ...], TupleOf(OneOf(-1, Interval(1, None)))] = (10, 5)
        """Neighbours per layer, input layer first as in DGL's NeighborSampler (the last entry applies to the
        seeds); -1 takes all in-neighbours."""
        replace: bool = False
        """Draw neighbours with replacement (then exactly fanout per vertex with any in-neighbour)."""
        batch_size: Annotated[int, Interval(1, None)] = 1024
        """Seeds per mini-batch and trainer."""
        seed: Annotated[int, Interval(0, None)] = 0
        """Seed of every random draw (neighbours and the per-epoch shuffle of the seeds)."""
        split: Annotated[str, Options(*SPLIT_MODES)] = "own"
        """How training vertices go to trainers: ``own`` (each trainer its part's), ``balanced`` (DistDGL's Fig. 7:
        equal shares, each from its own part first) or ``even`` (DGL's ``node_split(force_even=True)``)."""
        trainers: Annotated[Optional[int], OneOf(None, Interval(1, None))] = None
        """Trainers whose split is simulated: None = one per rank. A 1-rank run with ``trainers=P`` trains on the
        union of the P trainers' batches every step: the single-process reference of a P-rank run."""

        field_requires: ClassVar[dict[str, frozenset[str]]] = {
            name: frozenset({"a global seed split"}) for name in ("split", "trainers")}
        """Fields read only where trainers split the training vertices among them (model averaging trains each
        part's own vertices, one model per part: ``workbench.composition`` refuses them there)."""

    @property
    def num_layers(self) -> int:
        return len(self.config.fanouts)

    def sample(self, seeds: Any, source: NeighborSource, *, epoch: int = 0, step: int = 0) -> MiniBatch:
        """Sample the blocks of one mini-batch.

        Args:
            seeds: unique global ids of the output vertices (may be empty: owner-routed ranks must still
                take part in every step).
            source: where neighbours come from.
            epoch, step: part of every random draw's key (with the config's seed and the block index).

        Returns:
            The :class:`MiniBatch` (``blocks[0]`` = input layer).
        """
        seeds = torch.as_tensor(seeds).to(torch.int64).flatten().contiguous()
        if seeds.numel() and (int(seeds.min()) < 0 or int(seeds.max()) >= source.num_nodes):
            raise ParamError([f"The 'seeds' parameter of {type(self).__name__}.sample must be global ids in "
                              f"[0, {source.num_nodes}). Got ids in [{int(seeds.min())}, {int(seeds.max())}] instead."])
        start = time.perf_counter()
        cfg = self.config
        frontier = seeds
        blocks: list[Block] = []
        for layer in reversed(range(self.num_layers)):
            key = SampleKey(cfg.seed, epoch, step, layer)
            edges = source.sample_neighbors(frontier, cfg.fanouts[layer], cfg.replace, key, kernel=self._kernel)
            block = build_block(frontier, edges, source.num_nodes)
            blocks.insert(0, block)
            frontier = block.src_gid
        return MiniBatch(seeds=seeds, blocks=blocks, epoch=epoch, step=step, elapsed_s=time.perf_counter() - start)

    def _kernel(self, csr: CSRRows, gid: torch.Tensor, fanout: int, replace: bool, key: SampleKey) -> SampledEdges:
        """Sample in-edges of the rows ``gid`` of ``csr``, grouped by destination in the order of ``gid``."""
        raise NotImplementedError(f"{type(self).__name__} must implement _kernel")


def block_samplers() -> list[str]:
    """Names of the registered mini-batch (block) samplers: the :class:`Sampler` subclasses of ``SAMPLERS``
    (the registry also holds full-graph edge samplers, :mod:`workbench.sample.psc`)."""
    return sorted(name for name, cls in SAMPLERS.items() if isinstance(cls, type) and issubclass(cls, Sampler))
