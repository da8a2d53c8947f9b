"""The partition stage: one :class:`Partitioner` interface and a typed :class:`PartitionResult`.

A partitioner is a small class with a nested validated ``Config``. Its public :meth:`Partitioner.partition`
validates the graph and part count (all errors at once), times the private ``_partition`` that each
variant implements, and wraps the assignment in a :class:`PartitionResult`. A new partitioner is::

    @register_partitioner
    class MyPartitioner(Partitioner):
        name = "mine"

        @dataclasses.dataclass(kw_only=True)
        class Config(Partitioner.Config):
            alpha: float = 1.0
            \"\"\"What alpha does.\"\"\"

        def _partition(self, graph, num_parts):
            return torch.zeros(graph.num_nodes, dtype=torch.int64)  # (num_nodes,) part ids

Vertex-cut partitioners set ``kind = "vertex-cut"`` and return an ``(num_edges,)`` part id per stored edge.
"""

from __future__ import annotations

import abc
import dataclasses
import html
import json
import os
import time
from pathlib import Path
from typing import Annotated, Any, Callable, ClassVar, Optional

import numpy as np
import torch

from workbench._validation import (Config as BaseConfig, ErrorCollector, ParamError, check_choice, check_int,
                                  param_error)
from workbench.constraints import Interval, OneOf, Options
from workbench.graph import Graph
from workbench.partition.metrics import PartitionMetrics, compute_metrics, halo_pairs, vertex_cut_replicas
from workbench.partition.remote import refinement_metrics
from workbench.stages import Registry, registry, resolve_config

__all__ = [
    "PartitionResult",
    "Relabeling",
    "Partitioner",
    "PARTITIONERS",
    "partitioner_kind",
    "register_partitioner",
    "get_partitioner",
    "partition",
    "check_parts_filled",
    "REFINERS",
    "register_refiner",
]

KINDS = ("edge-cut", "vertex-cut")


# --------------------------------------------------------------------------------------------------------
# Relabeling
# --------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class Relabeling:
    """DistDGL-style ids: the vertices owned by part ``p`` get the contiguous new ids
    ``part_offsets[p]:part_offsets[p + 1]`` (original order kept inside a part).

    Example:
        >>> import torch
        >>> r = Relabeling.from_parts(torch.tensor([1, 0, 1, 0]), num_parts=2)
        >>> r.old_of_new.tolist(), r.new_of_old.tolist(), r.part_offsets.tolist()
        ([1, 3, 0, 2], [2, 0, 3, 1], [0, 2, 4])
        >>> r.part_of_new(torch.tensor([0, 3])).tolist()
        [0, 1]
    """

    new_of_old: torch.Tensor
    """``(N,)`` new id of each original (global) vertex id."""
    old_of_new: torch.Tensor
    """``(N,)`` original id of each new id."""
    part_offsets: torch.Tensor
    """``(P + 1,)`` start of each part's new-id range."""

    @classmethod
    def from_parts(cls, node_part: torch.Tensor, num_parts: int) -> "Relabeling":
        old_of_new = torch.argsort(node_part, stable=True)
        new_of_old = torch.empty_like(old_of_new)
        new_of_old[old_of_new] = torch.arange(old_of_new.numel())
        offsets = torch.zeros(num_parts + 1, dtype=torch.int64)
        torch.cumsum(torch.bincount(node_part, minlength=num_parts), 0, out=offsets[1:])
        return cls(new_of_old=new_of_old, old_of_new=old_of_new, part_offsets=offsets)

    @property
    def num_parts(self) -> int:
        return self.part_offsets.numel() - 1

    def part_of_new(self, new_ids: torch.Tensor) -> torch.Tensor:
        """Part of each new id (a binary search over ``part_offsets``, like DistDGL's range partition book)."""
        return torch.searchsorted(self.part_offsets, torch.as_tensor(new_ids), right=True) - 1

    def __repr__(self) -> str:
        return f"Relabeling(num_nodes={self.new_of_old.numel()}, part_offsets={self.part_offsets.tolist()})"


# --------------------------------------------------------------------------------------------------------
# Result
# --------------------------------------------------------------------------------------------------------


def _json_safe(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return f"tensor{tuple(value.shape)}"
    if isinstance(value, np.ndarray):
        return f"array{value.shape}"
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


@dataclasses.dataclass(eq=False, repr=False)
class PartitionResult:
    """A partition of ``graph`` into ``num_parts`` parts.

    Exactly one of ``node_part`` (edge-cut: a part per vertex) and ``edge_part`` (vertex-cut: a part per
    stored edge, in CSR order) is set. Edges of an edge-cut partition belong to their destination's part.

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> g = Graph.from_edges(torch.tensor([0, 1, 1, 2]), torch.tensor([1, 0, 2, 1]), 3, directed=False)
        >>> r = PartitionResult(graph=g, num_parts=2, method="manual", node_part=torch.tensor([0, 0, 1]))
        >>> r.inner_nodes(1).tolist(), r.halo_nodes(1).tolist(), r.comm_rows_matrix().tolist()
        ([2], [1], [[0, 1], [1, 0]])
    """

    graph: Graph
    num_parts: int
    method: str
    node_part: Optional[torch.Tensor] = None
    """``(num_nodes,)`` int64 part of each global vertex id (edge-cut); ``None`` for vertex-cut."""
    edge_part: Optional[torch.Tensor] = None
    """``(num_edges,)`` int64 part of each stored edge (vertex-cut); ``None`` for edge-cut."""
    seed: Optional[int] = None
    elapsed_s: float = 0.0
    options: dict = dataclasses.field(default_factory=dict)
    """The partitioner's config (JSON-safe), for the record."""
    stats: dict = dataclasses.field(default_factory=dict)
    """Numbers the partitioner itself reported (e.g. Mt-KaHyPar's ``km1``), JSON-safe scalars."""
    refinement: Optional[dict] = None
    """What a refiner did (``iterations``, ``time_s``, ...) when one ran (``refine=...``), else ``None``."""

    def __post_init__(self) -> None:
        errs = ErrorCollector("PartitionResult")
        errs.check((self.node_part is None) != (self.edge_part is None), "node_part",
                   "set exactly when edge_part is not (edge-cut xor vertex-cut)",
                   "both set" if self.node_part is not None else "neither set")
        errs.raise_if_any()
        expected = self.graph.num_nodes if self.node_part is not None else self.graph.num_edges
        name = "node_part" if self.node_part is not None else "edge_part"
        part = torch.as_tensor(self.node_part if self.node_part is not None else self.edge_part).to(torch.int64)
        errs.check(part.shape == (expected,), name, f"a ({expected},) tensor", tuple(part.shape))
        if part.numel():
            lo, hi = int(part.min()), int(part.max())
            errs.check(lo >= 0 and hi < self.num_parts, name, f"part ids in [0, {self.num_parts})", f"ids in [{lo}, {hi}]")
        errs.raise_if_any()
        setattr(self, name, part.contiguous())
        self._cache: dict[str, Any] = {}

    # ----------------------------------------------------------------------------------- structure
    @property
    def kind(self) -> str:
        """``"edge-cut"`` or ``"vertex-cut"``."""
        return "edge-cut" if self.node_part is not None else "vertex-cut"

    @property
    def owner_part(self) -> torch.Tensor:
        """``(N,)`` part that owns each vertex: ``node_part``, or the master replica for vertex-cut."""
        if self.node_part is not None:
            return self.node_part
        return self._replicas()[0]

    def _edges(self) -> tuple[torch.Tensor, torch.Tensor]:
        if "edges" not in self._cache:
            self._cache["edges"] = self.graph.edges()
        return self._cache["edges"]

    def _replicas(self):
        if "replicas" not in self._cache:
            src, dst = self._edges()
            self._cache["replicas"] = vertex_cut_replicas(src, dst, self.edge_part, self.graph.num_nodes, self.num_parts)
        return self._cache["replicas"]

    def _halo_index(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(halo_nid sorted by part, offsets (P + 1,))``; for vertex-cut the mirrors of each part."""
        if "halo" not in self._cache:
            if self.node_part is not None:
                src, dst = self._edges()
                nid, part = halo_pairs(src, dst, self.node_part, self.graph.num_nodes)
            else:
                master, rep_nid, rep_part = self._replicas()
                mirror = rep_part != master[rep_nid]
                order = torch.argsort(rep_part[mirror] * self.graph.num_nodes + rep_nid[mirror])
                nid, part = rep_nid[mirror][order], rep_part[mirror][order]
            offsets = torch.zeros(self.num_parts + 1, dtype=torch.int64)
            torch.cumsum(torch.bincount(part, minlength=self.num_parts), 0, out=offsets[1:])
            self._cache["halo"] = (nid, part, offsets)
        return self._cache["halo"]

    def _check_part(self, p: int) -> int:
        return check_int(p, "p", "PartitionResult", 0, self.num_parts - 1)

    def inner_nodes(self, p: int) -> torch.Tensor:
        """Sorted global ids of the vertices part ``p`` owns."""
        return torch.nonzero(self.owner_part == self._check_part(p)).flatten()

    def halo_nodes(self, p: int) -> torch.Tensor:
        """Sorted global ids of part ``p``'s 1-hop halo: sources of edges into ``p`` owned elsewhere
        (vertex-cut: the mirrors on ``p``)."""
        p = self._check_part(p)
        nid, _, offsets = self._halo_index()
        return nid[offsets[p]:offsets[p + 1]]

    def part_sizes(self) -> np.ndarray:
        """``(P,)`` vertices owned by each part."""
        return torch.bincount(self.owner_part, minlength=self.num_parts).numpy()

    def relabel(self) -> Relabeling:
        """DistDGL-style new ids: each part's own vertices form one contiguous range."""
        if "relabel" not in self._cache:
            self._cache["relabel"] = Relabeling.from_parts(self.owner_part, self.num_parts)
        return self._cache["relabel"]

    # ----------------------------------------------------------------------------------- metrics
    def metrics(self, feature_width: Optional[int] = None) -> PartitionMetrics:
        """Exact quality metrics (see :mod:`workbench.partition.metrics`).

        Args:
            feature_width: values per feature row for the byte counts; default the graph's feature width
                (no byte counts when the graph has no features).
        """
        if feature_width is None and self.graph.features is not None:
            feature_width = self.graph.num_features
        if feature_width is not None:
            feature_width = check_int(feature_width, "feature_width", "PartitionResult.metrics", 0)
        key = f"metrics:{feature_width}"
        if key not in self._cache:
            src, dst = self._edges()
            extra: dict[str, Any] = {}
            if self.node_part is not None:
                nid, part, _ = self._halo_index()
                extra["halo"] = (nid, part)
            else:
                extra["replicas"] = self._replicas()
            self._cache[key] = compute_metrics(
                src, dst, self.graph.num_nodes, self.num_parts, node_part=self.node_part,
                edge_part=self.edge_part, train_mask=self.graph.train_mask, feature_width=feature_width, **extra)
            if self.refinement is not None and self._cache[key].remote is not None:
                self._cache[key].remote.update(refinement_metrics(self.refinement))
        return self._cache[key]

    def comm_rows_matrix(self) -> np.ndarray:
        """``(P, P)`` int64: feature rows part ``p`` sends part ``q`` in one full-graph layer."""
        return self.metrics().comm_rows.copy()

    def to_event(self):
        """A :class:`workbench.events.PartitionComputed` event for run logs and dashboards."""
        from workbench.events import PartitionComputed

        m = self.metrics()
        return PartitionComputed(method=self.method, num_parts=self.num_parts, metrics=m.summary(),
                                 part_sizes=m.part_vertices.tolist(), halo_sizes=m.part_halo.tolist(),
                                 comm_rows=m.comm_rows.tolist())

    # ----------------------------------------------------------------------------------- output
    def save(self, out_dir: str | os.PathLike) -> Path:
        """Write the assignment and its metrics.

        Layout::

            out_dir/
              assignment.npy       # int64 (num_nodes,): part of each original vertex id (vertex-cut: master)
              edge_assignment.npy  # int64 (num_edges,): part of each stored edge (vertex-cut only)
              metrics.json         # PartitionMetrics.to_dict()
              partition.json       # method, kind, num_parts, seed, elapsed_s, options, graph summary

        Returns:
            The output directory.
        """
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        np.save(out / "assignment.npy", self.owner_part.numpy().astype(np.int64))
        if self.edge_part is not None:
            np.save(out / "edge_assignment.npy", self.edge_part.numpy().astype(np.int64))
        (out / "metrics.json").write_text(json.dumps(self.metrics().to_dict(), indent=2) + "\n")
        info = {"method": self.method, "kind": self.kind, "num_parts": self.num_parts, "seed": self.seed,
                "elapsed_s": self.elapsed_s, "options": _json_safe(self.options), "graph": self.graph.summary()}
        if self.stats:
            info["stats"] = _json_safe(self.stats)
        (out / "partition.json").write_text(json.dumps(info, indent=2, default=str) + "\n")
        return out

    def __repr__(self) -> str:
        sizes = self.part_sizes().tolist()
        shown = sizes if len(sizes) <= 8 else sizes[:8] + ["..."]
        return (f"PartitionResult({self.method!r}, {self.kind}, num_parts={self.num_parts}, "
                f"graph={self.graph.name!r}, part_sizes={shown}, elapsed_s={self.elapsed_s:.3f})")

    def _repr_html_(self) -> str:
        head = (f"<b>PartitionResult</b> <code>{html.escape(self.method)}</code> ({self.kind}, "
                f"{self.num_parts} parts of graph <code>{html.escape(self.graph.name)}</code>, "
                f"{self.elapsed_s:.3f} s)")
        return head + self.metrics()._repr_html_()


# --------------------------------------------------------------------------------------------------------
# Partitioner interface and registry
# --------------------------------------------------------------------------------------------------------


class Partitioner(abc.ABC):
    """Base class of every partitioner: build with a config (or keyword options), call :meth:`partition`.

    A method that measures more than the base class does (phases, its own objective) leaves it in
    ``self._stats`` during ``_partition``; :meth:`partition` adds it to the result's ``stats``.

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> from workbench.partition import PARTITIONERS
        >>> g = Graph.from_edges(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 0]), 4)
        >>> PARTITIONERS["block"]().partition(g, 2).node_part.tolist()
        [0, 0, 1, 1]
    """

    name: ClassVar[str] = ""
    """The registry name (``--method NAME``)."""
    kind: ClassVar[str] = "edge-cut"
    """``"edge-cut"`` (``_partition`` returns a part per vertex) or ``"vertex-cut"`` (a part per edge)."""
    defines_run: ClassVar[bool] = False
    """Whether a run configured with this method is defined by it (HP-GCN by its hypergraph partition): such a run
    refuses a partition folder of another method instead of training on the folder's parts."""

    @dataclasses.dataclass(kw_only=True)
    class Config(BaseConfig):
        seed: Annotated[int, Interval(0, 2**31, closed="left")] = 0
        """Random seed; the same seed gives the same partition."""
        refine: Annotated[Optional[str], OneOf(None, Options(REFINERS))] = None
        """A refiner applied after partitioning (edge-cut only): 'g3' swaps vertex pairs until every part has
        about as many remote vertices; None keeps the partition as it is."""

    def __init__(self, config: Optional["Partitioner.Config"] = None, **options: Any):
        self.config = resolve_config(self, config, options)

    def partition(self, graph: Graph, num_parts: int, *, emit: Optional[Callable[[Any], None]] = None) -> PartitionResult:
        """Partition ``graph`` into ``num_parts`` parts.

        Args:
            graph: the graph.
            num_parts: number of parts, in ``[1, graph.num_nodes]``.
            emit: optional event sink; receives a :class:`workbench.events.PartitionComputed`.

        Raises:
            ParamError: bad part count or options that do not fit the graph (all reported at once), or an
                edge-cut partition that left a part without vertices (:func:`check_parts_filled`).
        """
        self.check(graph, num_parts)
        start = time.perf_counter()
        assignment = torch.as_tensor(self._partition(graph, num_parts)).to(torch.int64)
        refinement = None
        if self.kind == "edge-cut":
            assignment, refinement = self._refine(graph, assignment, num_parts)
        elapsed = time.perf_counter() - start
        parts = {"node_part" if self.kind == "edge-cut" else "edge_part": assignment}
        result = PartitionResult(graph=graph, num_parts=num_parts, method=self.name, seed=self.config.seed,
                                 elapsed_s=elapsed, options=_json_safe(self.config.to_dict()),
                                 refinement=refinement, **parts)
        result.stats.update(getattr(self, "_stats", None) or {})   # what the method measured of this call
        if self.kind == "edge-cut":  # vertex-cut heuristics may leave a part edgeless: see check_parts_filled
            check_parts_filled(assignment, num_parts, type(self).__name__)
        if emit is not None:
            emit(result.to_event())
        return result

    def check(self, graph: Graph, num_parts: int) -> None:
        """Validate ``graph`` and ``num_parts`` (and graph-dependent options) without partitioning."""
        owner = type(self).__name__
        if not isinstance(graph, Graph):
            raise ParamError([f"The 'graph' parameter of {owner} must be a workbench Graph. "
                              f"Got {type(graph).__name__} instead."])
        errs = ErrorCollector(owner)
        n = graph.num_nodes
        errs.check(n >= 1, "graph", "a graph with at least one vertex", graph)
        ok = isinstance(num_parts, int) and not isinstance(num_parts, bool) and 1 <= num_parts <= max(n, 1)
        errs.check(ok, "num_parts", f"an int in [1, num_nodes={n}]", num_parts)
        errs.check(self.kind == "edge-cut" or getattr(self.config, "refine", None) is None, "refine",
                   "None for a vertex-cut partitioner (refiners move vertices)", getattr(self.config, "refine", None))
        self._check(graph, num_parts if ok else None, errs)
        errs.raise_if_any()

    def _check(self, graph: Graph, num_parts: Optional[int], errs: ErrorCollector) -> None:
        """Add graph-dependent option errors (weight shapes and so on) to ``errs``."""

    def _refine(self, graph: Graph, node_part: torch.Tensor, num_parts: int) -> tuple[torch.Tensor, Optional[dict]]:
        """Apply the configured refiner (``config.refine``) to an edge-cut assignment.

        Returns ``(node_part, what the refiner did or None)``."""
        name = getattr(self.config, "refine", None)
        if name is None or num_parts < 2:
            return node_part, None
        return REFINERS[name](graph, node_part, num_parts, self.config)

    @abc.abstractmethod
    def _partition(self, graph: Graph, num_parts: int) -> torch.Tensor:
        """Return ``(num_nodes,)`` (edge-cut) or ``(num_edges,)`` (vertex-cut) int64 part ids."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"


def check_parts_filled(owner_part: torch.Tensor, num_parts: int, owner: str) -> None:
    """Raise :class:`ParamError` when a part owns no vertex.

    A part without vertices is a rank that idles through a run and exchanges nothing, so such a partition
    never reaches training: :meth:`Partitioner.partition` refuses edge-cut results with an empty part (a
    partitioner that cannot fill ``num_parts`` parts, e.g. METIS asked for as many parts as vertices), and
    the runs check every partition, vertex-cut owners and given assignments included, before any rank starts.
    Vertex-cut results themselves may leave a part without edges, hence without owned vertices (HDRF with a
    strong replication term on a tiny graph): that is the heuristic's own outcome, reported as it is.

    Args:
        owner_part: ``(num_nodes,)`` part that owns each vertex.
        num_parts: number of parts.
        owner: the class or function named in the message.

    Example:
        >>> import torch
        >>> check_parts_filled(torch.tensor([0, 1, 1]), 2, "MyPartitioner")
        >>> check_parts_filled(torch.tensor([0, 0, 0]), 2, "MyPartitioner")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        workbench._validation.ParamError: The 'num_parts' parameter of MyPartitioner must be ... (part sizes [3, 0]: 1 empty; ...
    """
    sizes = torch.bincount(torch.as_tensor(owner_part, dtype=torch.int64).flatten(), minlength=num_parts).tolist()
    num_empty = sizes.count(0)
    if not num_empty:
        return
    shown = ", ".join(map(str, sizes[:32])) + (", ..." if len(sizes) > 32 else "")
    raise ParamError([param_error("num_parts", owner, f"a count whose parts all own vertices (part sizes [{shown}]: "
                                  f"{num_empty} empty; use fewer parts)", num_parts)])


REFINERS: dict[str, Callable[..., tuple[torch.Tensor, dict]]] = {}
"""Refiners by name: ``fn(graph, node_part, num_parts, config) -> (node_part, info dict)``, applied after any
edge-cut partitioner whose config sets ``refine=name`` (``--set partition.refine=g3``)."""


def register_refiner(name: str):
    """Decorator adding a refiner function to :data:`REFINERS` under ``name``."""
    def add(fn):
        REFINERS[name] = fn
        return fn
    return add


PARTITIONERS: Registry = registry("partition")
"""Registered partitioners by name: the ``partition`` stage registry (``workbench.stages.registry``)."""


def partitioner_kind(method: str) -> str:
    """``edge-cut`` or ``vertex-cut``: the kind of the registered partitioner ``method`` (``edge-cut`` for a
    name not registered, which is refused where the method is used).

    Example:
        >>> partitioner_kind("metis"), partitioner_kind("hdrf")
        ('edge-cut', 'vertex-cut')
    """
    return getattr(PARTITIONERS.get(method), "kind", "edge-cut")


def register_partitioner(cls: type[Partitioner]) -> type[Partitioner]:
    """Class decorator adding a partitioner to :data:`PARTITIONERS` under ``cls.name``."""
    if not cls.name or cls.kind not in KINDS:
        raise ValueError(f"{cls.__name__} needs a name and a kind in {KINDS}")
    return PARTITIONERS.register(cls)


def get_partitioner(method: str) -> type[Partitioner]:
    """The partitioner class registered as ``method``; the error lists the valid names."""
    check_choice(method, "method", "partition", sorted(PARTITIONERS))
    return PARTITIONERS[method]


def partition(graph: Graph | str | os.PathLike, num_parts: int, method: str = "metis", seed: int = 0,
              **options: Any) -> PartitionResult:
    """Partition a graph with a registered method.

    Args:
        graph: a :class:`Graph` or a graph spec for :func:`workbench.data.load_graph` (e.g. ``"karate"``).
        num_parts: number of parts.
        method: a name in :data:`PARTITIONERS` (``"random"``, ``"block"``, ``"metis"``, ...).
        seed: random seed.
        **options: the method's config fields (e.g. ``balance_train=True`` for METIS).

    Example:
        >>> import torch
        >>> from workbench.graph import Graph
        >>> g = Graph.from_edges(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 3, 0]), 4)
        >>> partition(g, 2, method="block").metrics().edge_cut
        2
    """
    cls = get_partitioner(method)
    partitioner = cls(seed=seed, **options)
    if not isinstance(graph, Graph):
        from workbench.data import load_graph

        graph = load_graph(graph)
    return partitioner.partition(graph, num_parts)
