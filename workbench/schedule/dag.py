"""Sampling as a DAG (ByteGNN, Fig. 9): five operators, a logical DAG, one physical DAG per batch.

Operators (plain module-level functions of ``(state, payload)``, so a user plugs in their own by passing
another function to :class:`LogicalDAG`; they run in the sampling worker processes)::

    seed      the batch's seeds (the sample stage's keyed split; computed when the DAG is launched)
    positive  seeds -> one in-neighbour of each seed (unsupervised / link-style), keyed draws
    negative  seeds -> vertices drawn uniformly from the graph (unsupervised), keyed draws
    nsc       Neighbourhood Subgraph Construction, split into one-hop tasks over chunks of the frontier,
              plus a per-hop ``merge`` task that deduplicates the hop into a block (DGL's layout)
    ff        Feature Fetching of a chunk of vertices; the FF tasks of hop h start as soon as hop h is
              merged, while hop h + 1 is still being sampled (pipelining)

The **logical** DAG (operators, fan-outs, shapes) is built once; :meth:`LogicalDAG.physical` expands it
into a :class:`PhysicalDAG` of :class:`Task` for one mini-batch: per branch (supervised: the seeds; the
unsupervised shape adds the positive and the negative branch) ``nsc`` chunks -> ``merge`` -> next hop, and
``ff`` chunks over the seeds and each hop's new vertices. ``End`` (the trainer's hand-off) joins them.

Semantics never depend on the schedule: each NSC chunk samples with the sample stage's keyed kernel, whose
draws depend only on (seed, epoch, step, layer, vertex), and ``merge`` builds the block with
:func:`workbench.sample.base.build_block` over the chunks in frontier order, so a physical DAG yields exactly
``Sampler.sample(seeds, LocalSource(graph), epoch=e, step=s)`` and the features of its input vertices in
order, whatever order its tasks ran in (tested).

Example:
    >>> import torch
    >>> from workbench.data import load_graph
    >>> from workbench.sample import NeighborSampler
    >>> g = load_graph("karate")
    >>> dag = LogicalDAG(NeighborSampler(fanouts=(3, 2)), chunk_size=4)
    >>> p = dag.physical(dag_id=0, seeds=torch.tensor([0, 5, 9, 33, 12]), epoch=0, step=0,
    ...                  degrees=g.in_degrees().numpy(), feature_width=g.num_features)
    >>> [t.op for t in p.ready()]                  # the seeds' NSC chunks and FF chunks are ready at once
    ['nsc', 'nsc', 'ff', 'ff']
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import numpy as np
import torch

from workbench.sample.base import Block, MiniBatch, SampleKey, build_block
from workbench.sample.keyed import CSRRows, mix64, stream_key

__all__ = ["Task", "PhysicalDAG", "LogicalDAG", "WorkerState", "LocalStore", "nsc_op", "merge_op", "ff_op",
           "positive_op", "negative_op", "OPERATORS", "SampledBatch"]


# --------------------------------------------------------------------------------------------------------
# Operators (run in the sampling worker processes)
# --------------------------------------------------------------------------------------------------------


class LocalStore:
    """The whole graph in the worker (``schedule.graph_store = "local"``): every read is local, nothing is
    counted. The verbs of :class:`~workbench.schedule.graphstore.GraphStoreClient`, which reads other parts
    from their owners."""

    def __init__(self, rows: CSRRows, features: np.ndarray):
        self.rows, self.features = rows, features

    def sample(self, gid: np.ndarray, fanout: int, replace: bool, key: tuple, kernel: Callable) -> tuple:
        e = kernel(self.rows, torch.from_numpy(gid), fanout, replace, SampleKey(*key))
        return e.src_gid.numpy(), e.dst_gid.numpy()

    def fetch(self, gid: np.ndarray) -> np.ndarray:
        return self.features[gid]

    def drain(self) -> dict:
        return {}

    def close(self) -> None:
        pass


@dataclasses.dataclass(eq=False)
class WorkerState:
    """What a sampling worker holds: its Graph Store (CSR rows and features) and the sampler.

    The operators read through :attr:`store`: with the whole graph in the worker (``schedule.graph_store =
    "local"``) a :class:`LocalStore` over :attr:`rows` and :attr:`features`;
    with ``"owners"`` a :class:`~workbench.schedule.graphstore.GraphStoreClient`, :attr:`rows` and
    :attr:`features` then being the worker's part only and the rest read from its owners (counted)."""

    rows: CSRRows
    features: np.ndarray
    """``(N, F)`` float32 feature rows (the part's ``(num_owned, F)`` with a graph-store client)."""
    sampler: Any
    num_nodes: int
    store: Any = None
    """Where NSC, FF and Positive read (None: a ``LocalStore`` over ``rows`` and ``features``)."""

    def __post_init__(self) -> None:
        if self.store is None:
            self.store = LocalStore(self.rows, self.features)


def nsc_op(state: WorkerState, payload: dict) -> tuple[np.ndarray, np.ndarray]:
    """One-hop NSC of a chunk: the sampled in-edges ``(src_gid, dst_gid)`` of ``payload["gid"]``."""
    return state.store.sample(payload["gid"], payload["fanout"], payload["replace"], tuple(payload["key"]),
                              state.sampler._kernel)


def merge_op(state: WorkerState, payload: dict) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
    """Join a hop's NSC chunks into one block: ``(src_gid, num_dst, edge_src, edge_dst)``."""
    from workbench.sample.keyed import SampledEdges

    parts = payload["edges"]
    src = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
    dst = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
    b = build_block(torch.from_numpy(payload["frontier"]), SampledEdges(torch.from_numpy(src), torch.from_numpy(dst)),
                    state.num_nodes)
    return b.src_gid.numpy(), b.num_dst, b.edge_src.numpy(), b.edge_dst.numpy()


def ff_op(state: WorkerState, payload: dict) -> np.ndarray:
    """Feature Fetching: ``(len(gid), F)`` rows of ``payload["gid"]``."""
    return state.store.fetch(payload["gid"])


def positive_op(state: WorkerState, payload: dict) -> np.ndarray:
    """One in-neighbour of each seed (the seed itself when it has none), keyed by (key, seed)."""
    src, dst = state.store.sample(payload["gid"], 1, True, tuple(payload["key"]), state.sampler._kernel)
    out = payload["gid"].copy()
    has = np.isin(out, dst)      # with replacement every seed with an in-neighbour has exactly one edge, in order
    out[has] = src
    return out


def negative_op(state: WorkerState, payload: dict) -> np.ndarray:
    """``payload["num"]`` vertices per seed drawn uniformly from the graph, keyed by (key, seed)."""
    key = stream_key(*payload["key"])
    g = payload["gid"].astype(np.uint64)
    draws = mix64(mix64(g ^ np.uint64(key))[:, None] + np.arange(1, payload["num"] + 1, dtype=np.uint64)[None, :])
    return (draws % np.uint64(state.num_nodes)).astype(np.int64).reshape(-1)


OPERATORS: dict[str, Callable[[WorkerState, dict], Any]] = {
    "nsc": nsc_op, "merge": merge_op, "ff": ff_op, "positive": positive_op, "negative": negative_op}
"""The default operator functions by name (a :class:`LogicalDAG` may replace any of them)."""


# --------------------------------------------------------------------------------------------------------
# Tasks and DAGs
# --------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class Task:
    """One schedulable piece of a physical DAG."""

    dag_id: int
    index: int
    """Position in its DAG's task list."""
    op: str
    payload: dict
    cost: float
    """ByteGNN's cost model: NSC = sum of the chunk's degrees; FF = vertices x feature width; merge = edges."""
    branch: int = 0
    hop: int = -1
    chunk: int = 0
    parents: int = 0
    """Unfinished parents (the task is ready at 0)."""


@dataclasses.dataclass(eq=False)
class SampledBatch:
    """What ``End`` hands the trainer: the mini-batch of each branch and its input features."""

    batches: list[MiniBatch]
    """Branch 0: the seeds (supervised); unsupervised adds the positive and the negative branch."""
    features: list[np.ndarray]
    """Per branch, ``(num_input_nodes, F)`` rows of ``batches[b].input_gid`` in order."""
    dag_id: int = 0
    links: Optional[list] = None
    """Unsupervised: ``[None, (B,) row of each seed's positive in branch 1, (B, num_negative) rows of its
    negatives in branch 2]`` (the branches' roots are deduplicated)."""

    @property
    def minibatch(self) -> MiniBatch:
        return self.batches[0]


class PhysicalDAG:
    """The tasks of one mini-batch; expands hop by hop as merges finish (see the module docstring)."""

    def __init__(self, logical: "LogicalDAG", dag_id: int, roots: list[np.ndarray], epoch: int, step: int,
                 degrees: np.ndarray, feature_width: int, links: Optional[list] = None):
        self.links = links
        self.logical, self.dag_id, self.epoch, self.step = logical, dag_id, epoch, step
        self.degrees, self.width = degrees, max(int(feature_width), 1)
        self.tasks: list[Task] = []
        self.pending: list[Task] = []
        k = logical.num_layers
        nb = len(roots)
        self.roots = roots
        self.blocks: list[list[Optional[Block]]] = [[None] * k for _ in range(nb)]
        self.edges: dict[tuple[int, int], list] = {}
        self.left: dict[tuple[int, int], int] = {}
        self.ff: list[list[tuple[int, np.ndarray]]] = [[] for _ in range(nb)]
        self.ff_left = 0
        self.open = 0
        self._frontier: dict[tuple[int, int], np.ndarray] = {}
        for b, root in enumerate(roots):
            self._expand_hop(b, k - 1, root)
            self._add_ff(b, root)

    # -- building ------------------------------------------------------------------------------------------
    def _new(self, op: str, payload: dict, cost: float, **where) -> Task:
        t = Task(self.dag_id, len(self.tasks), op, payload, float(cost), **where)
        self.tasks.append(t)
        self.pending.append(t)
        self.open += 1
        return t

    def _chunks(self, ids: np.ndarray) -> list[np.ndarray]:
        c = self.logical.chunk_size
        return [ids[i:i + c] for i in range(0, ids.size, c)] or [ids]

    def _expand_hop(self, branch: int, layer: int, frontier: np.ndarray) -> None:
        """NSC chunks of ``blocks[layer]`` (sampling goes from the seeds outwards: layer K-1 first)."""
        lg = self.logical
        step = lg.eval_step if self.step is None else self.step
        key = (lg.sampler.config.seed, self.epoch, step, layer)
        chunks = self._chunks(frontier)
        self.edges[(branch, layer)] = [None] * len(chunks)
        self.left[(branch, layer)] = len(chunks)
        self._frontier[(branch, layer)] = frontier
        for i, ids in enumerate(chunks):
            self._new("nsc", {"gid": ids, "fanout": lg.sampler.config.fanouts[layer],
                              "replace": lg.sampler.config.replace, "key": key},
                      self.degrees[ids].sum(), branch=branch, hop=layer, chunk=i)

    def _add_ff(self, branch: int, ids: np.ndarray) -> None:
        for ids_c in self._chunks(ids):
            if ids_c.size == 0:
                continue
            pos = len(self.ff[branch])
            self.ff[branch].append((pos, None))
            self.ff_left += 1
            self._new("ff", {"gid": ids_c}, ids_c.size * self.width, branch=branch, chunk=pos)

    def ready(self) -> list[Task]:
        """Tasks that became ready since the last call (each returned once)."""
        out, self.pending = self.pending, []
        return out

    # -- results -------------------------------------------------------------------------------------------
    def finish(self, task: Task, result: Any) -> None:
        """Record a finished task's result; expands the next hop or the FF tasks it unlocks."""
        self.open -= 1
        b, layer = task.branch, task.hop
        if task.op == "nsc":
            self.edges[(b, layer)][task.chunk] = result
            self.left[(b, layer)] -= 1
            if self.left[(b, layer)] == 0:
                frontier = self._frontier[(b, layer)]
                edges = self.edges.pop((b, layer))
                self._new("merge", {"frontier": frontier, "edges": edges}, sum(e[0].size for e in edges),
                          branch=b, hop=layer)
        elif task.op == "merge":
            src_gid, num_dst, edge_src, edge_dst = result
            self.blocks[b][layer] = Block(torch.from_numpy(src_gid), int(num_dst), torch.from_numpy(edge_src),
                                          torch.from_numpy(edge_dst))
            self._add_ff(b, src_gid[num_dst:])
            if layer > 0:
                self._expand_hop(b, layer - 1, src_gid)
        elif task.op == "ff":
            self.ff[b][task.chunk] = (task.chunk, result)
            self.ff_left -= 1

    @property
    def done(self) -> bool:
        return self.open == 0

    def result(self) -> SampledBatch:
        """``End``: the branches' mini-batches and features (call once :attr:`done`)."""
        assert self.done, "End before every task finished"
        batches, feats = [], []
        step = self.logical.eval_step if self.step is None else self.step
        for b, root in enumerate(self.roots):
            batches.append(MiniBatch(seeds=torch.from_numpy(root), blocks=list(self.blocks[b]), epoch=self.epoch,
                                     step=step))
            rows = [r for _, r in self.ff[b]]
            feats.append(np.concatenate(rows) if rows else np.zeros((0, self.width), dtype=np.float32))
        return SampledBatch(batches, feats, self.dag_id, self.links)


class LogicalDAG:
    """The sampling DAG's shape and operators, built once (module docstring).

    Args:
        sampler: the sample stage's method (its fan-outs, replacement, seed and keyed ``_kernel``).
        chunk_size: vertices per NSC / FF task.
        unsupervised: add the positive and negative branches (Fig. 9's unsupervised shape).
        num_negative: negatives per seed (unsupervised).
        operators: replacements for :data:`OPERATORS` by name (module-level functions: they run in the
            worker processes).
    """

    eval_step = -2

    def __init__(self, sampler: Any, *, chunk_size: int = 256, unsupervised: bool = False, num_negative: int = 1,
                 operators: Optional[dict[str, Callable]] = None):
        self.sampler = sampler
        self.chunk_size = int(chunk_size)
        self.unsupervised = unsupervised
        self.num_negative = int(num_negative)
        self.operators = {**OPERATORS, **(operators or {})}

    @property
    def num_layers(self) -> int:
        return len(self.sampler.config.fanouts)

    def branch_roots(self, seeds: np.ndarray, epoch: int, step: int,
                     state: Optional[WorkerState] = None) -> tuple[list, Optional[list]]:
        """``(roots, links)``: the root vertex sets (the seeds, and unsupervised their positives and negatives,
        deduplicated) and where each seed's positive and negatives sit among them (:attr:`SampledBatch.links`).
        The positive and negative operators run where ``state`` is (a worker, or inline)."""
        if not self.unsupervised:
            return [seeds], None
        cfg = self.sampler.config
        pos = self.operators["positive"](state, {"gid": seeds, "key": (cfg.seed, epoch, step, -3)})
        neg = self.operators["negative"](state, {"gid": seeds, "key": (cfg.seed, epoch, step, -4),
                                                 "num": self.num_negative})
        pos_u, pos_at = np.unique(pos, return_inverse=True)
        neg_u, neg_at = np.unique(neg, return_inverse=True)
        return [seeds, pos_u, neg_u], [None, pos_at, neg_at.reshape(seeds.size, self.num_negative)]

    def physical(self, *, dag_id: int, seeds: Any, epoch: int, step: Optional[int], degrees: np.ndarray,
                 feature_width: int, roots: Optional[list] = None, links: Optional[list] = None) -> PhysicalDAG:
        """The physical DAG of one mini-batch (``step=None``: an evaluation batch)."""
        seeds = np.asarray(torch.as_tensor(seeds).numpy(), dtype=np.int64)
        return PhysicalDAG(self, dag_id, roots if roots is not None else [seeds], epoch, step, degrees,
                           feature_width, links)

    def __repr__(self) -> str:
        shape = "unsupervised" if self.unsupervised else "supervised"
        return (f"LogicalDAG({shape}: Seed -> NSC x{self.num_layers} hops -> FF -> End, "
                f"chunk_size={self.chunk_size}, fanouts={self.sampler.config.fanouts})")
