"""ByteGNN's GNN-tailored partitioner: K-hop neighbourhood blocks, then Algorithm 2 (CE x BS) assignment.

Paper: C. Zheng et al., "ByteGNN: Efficient Graph Neural Network Training at Large Scale", VLDB 2022.
Where the paper is open (BFS order, unreached vertices, the sort key, Algorithm 2's edge cases), the
choices below say so.

Sampling-based training only reads the K-hop neighbourhoods of labelled (train/val/test) vertices, so the
partitioner keeps those neighbourhoods whole and balances every split separately:

1. **Blocks.** Every labelled vertex is the centre of a block. A *synchronous multi-source BFS* over the
   in-neighbours (what a sampler reads) runs K levels from all centres at once; a vertex joins the block of
   the first level that reaches it (every vertex joins its nearest centre: deterministic,
   O(K (|V| + |E|)), vectorised per level). The paper's vertex "keeps the first block ID it receives"; when
   several centres reach it at the same level, ``ties="most"`` (default) takes the centre whose block sends
   it the most messages at that level (the likeliest first arrival; remaining ties by a hash of the vertex and
   the centre), ``ties="smaller"`` the smaller centre id (the plain deterministic rule). On few-label power-law
   graphs the smaller-id rule hands every tie to the lowest centres: ``papers-like:num_nodes=40000,seed=0``
   gets one block of 15,250 vertices (1.5x a quarter of the graph), 1,586 with hashed ties.
   Vertices no block reaches (farther than K hops from every labelled vertex): ``unreached="neighbours"``
   places them after step 2, round by round, in the part holding most of their already placed neighbours
   among the parts with room (the fewest cut edges subject to the vertex capacity), and the rest
   (components without a labelled vertex) in the least-loaded parts; ``unreached="singleton"`` makes each its
   own block.
2. **Assignment** (Algorithm 2). Blocks by size descending (ties: smaller block id; the paper's key
   ``max{|V(train)|, |V(val)|, |V(test)|}`` is 1 for every block). For block ``B``, with ``C(s) = |V(s)| / k``::

       CE[j] = |edges between B and P_j| / |P_j|
       BS[j] = 1 - alpha |P_j(train)| / C(train) - beta |P_j(val)| / C(val) - gamma |P_j(test)| / C(test)
       B joins argmax_j CE[j] * BS[j]    over the parts j with room:  |P_j| + |B| <= capacity (S + |B|) / k

   where ``S`` is the number of vertices placed so far (none has room: the lightest part). BS balances only
   the labelled vertices; with few labels (papers100M: 1.4 %) the blocks' sizes differ by 100x and CE pulls
   each new block to the part its neighbours already fill, so without the capacity (``capacity=None``,
   Algorithm 2 alone) ``papers-like:num_nodes=10000,seed=0`` puts 4,861 of 10,000 vertices on one of 4 parts
   (7,565 with ``ties="smaller"``; 2,741 at most with the capacity).
   The capacity follows the placed vertices, not the final total, so large early blocks spread over the parts
   and the small late blocks fill the gaps by CE x BS (a cap on the final total lets CE fill the parts one
   after another and leaves the small, label-dense blocks to the last part). The cross-edge tallies walk each
   block's edges once (O(|E|) over all blocks, owner labels kept per vertex); the greedy loop over blocks is
   compiled with numba. ``variant="paper"`` is the literal rule (``CE = 0`` for an empty part, the first part
   wins ties, BS may go negative); ``variant="patched"`` patches these: ``(CE + eps) * max(BS, 0)``
   and ties by larger BS, then the smaller part. A split with no vertices drops its term.

Example:
    >>> from workbench.data import load_graph
    >>> from workbench.partition import partition
    >>> r = partition(load_graph("products-like:num_nodes=400,seed=0"), 2, method="bytegnn")
    >>> r.node_part.shape[0], sorted(set(r.node_part.tolist()))
    (400, [0, 1])
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Optional

import numpy as np
import torch

from workbench.constraints import Interval, OneOf, Options
from workbench.graph import Graph
from workbench.partition.base import Partitioner, register_partitioner

__all__ = ["ByteGNNPartitioner", "neighbourhood_blocks", "assign_blocks", "labelled_splits", "place_unreached",
           "VARIANTS", "TIES"]

VARIANTS = ("paper", "patched")
UNREACHED = ("neighbours", "singleton")
TIES = ("most", "smaller")


def labelled_splits(graph: Graph) -> np.ndarray:
    """``(N,)`` int8 split of every vertex: 0 train, 1 val, 2 test, -1 unlabelled (train wins overlaps).

    A graph without any split mask counts every vertex as training.

    Example:
        >>> from workbench.data import load_graph
        >>> np.bincount(labelled_splits(load_graph("karate")) + 1).tolist()   # unlabelled, train, val, test
        [0, 17, 7, 10]
    """
    n = graph.num_nodes
    out = np.full(n, -1, dtype=np.int8)
    masks = [graph.train_mask, graph.val_mask, graph.test_mask]
    if all(m is None for m in masks):
        out[:] = 0
        return out
    for code, m in reversed(list(enumerate(masks))):
        if m is not None:
            out[m.numpy().astype(bool)] = code
    return out


def neighbourhood_blocks(graph: Graph, centres: np.ndarray, num_hops: int, ties: str = "most",
                         seed: int = 0) -> np.ndarray:
    """``(N,)`` int64 block (= centre vertex id) of every vertex, ``-1`` for vertices no centre reaches.

    Synchronous multi-source BFS over in-neighbours, ``num_hops`` levels; a vertex first reached at level
    ``h`` joins one of the centres among its level-``h - 1`` neighbours: ``ties="most"`` the centre with the
    most such neighbours (then the smallest hash of (vertex, centre, ``seed``)), ``ties="smaller"`` the
    smallest centre.

    Example:
        >>> from workbench.graph import Graph
        >>> path = torch.tensor([0, 1, 2, 3, 4])                       # path 0-1-2-3-4, both directions
        >>> g = Graph.from_edges(torch.cat([path[:-1], path[1:]]), torch.cat([path[1:], path[:-1]]), 6)
        >>> neighbourhood_blocks(g, np.array([0, 4]), 1).tolist()    # vertex 5 is isolated
        [0, 0, -1, 4, 4, -1]
        >>> neighbourhood_blocks(g, np.array([0, 4]), 2, ties="smaller").tolist()   # 2 is 2 hops from both
        [0, 0, 0, 4, 4, -1]
    """
    from workbench._validation import check_choice
    from workbench.sample.keyed import mix64, mix64_int, segment_gather

    check_choice(ties, "ties", "neighbourhood_blocks", TIES)
    n = graph.num_nodes
    indptr, indices = graph.indptr.numpy(), graph.indices.numpy()
    block = np.full(n, -1, dtype=np.int64)
    frontier = np.unique(np.asarray(centres, dtype=np.int64))
    block[frontier] = frontier
    salt = np.uint64(mix64_int(seed))
    for _ in range(num_hops):
        if frontier.size == 0:
            break
        start, deg = indptr[frontier], indptr[frontier + 1] - indptr[frontier]
        nbr = indices[segment_gather(start, deg)].astype(np.int64)       # (edges out of the frontier,)
        cand = np.repeat(block[frontier], deg)                             # the centre each edge carries
        fresh = block[nbr] < 0
        nbr, cand = nbr[fresh], cand[fresh]
        if nbr.size == 0:
            break
        if ties == "smaller":
            order = np.lexsort((cand, nbr))
            nbr, cand = nbr[order], cand[order]
        else:
            pair, count = np.unique(nbr * n + cand, return_counts=True)    # messages per (vertex, centre)
            nbr, cand = pair // n, pair % n
            h = mix64((nbr.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ cand.astype(np.uint64) ^ salt)
            order = np.lexsort((cand, h, -count, nbr))
            nbr, cand = nbr[order], cand[order]
        first = np.ones(nbr.size, dtype=bool)
        first[1:] = nbr[1:] != nbr[:-1]
        frontier = nbr[first]
        block[frontier] = cand[first]
    return block


def _undirected_csr(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the graph with every edge in both directions (as stored when the graph is undirected)."""
    if not graph.directed:
        return graph.indptr.numpy(), graph.indices.numpy()
    src, dst = graph.edges()
    a, b = torch.cat([src, dst]), torch.cat([dst, src])
    order = torch.argsort(a * graph.num_nodes + b)
    a, b = a[order], b[order]
    indptr = np.zeros(graph.num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(a.numpy(), minlength=graph.num_nodes), out=indptr[1:])
    return indptr, b.numpy()


def _assign_loop(order, block_ptr, block_vertices, indptr, indices, split, owner, num_parts, weights, capacity,
                 patched, eps, room):
    """Algorithm 2's greedy loop over the parts with room (``room`` = the vertex capacity, ``inf`` = none;
    plain Python, compiled with numba by :func:`_compiled`)."""
    k = num_parts
    size = np.zeros(k, dtype=np.int64)
    count = np.zeros((k, 3), dtype=np.int64)
    tally = np.zeros(k, dtype=np.int64)
    block_part = np.empty(order.size, dtype=np.int64)
    for oi in range(order.size):
        b = order[oi]
        nb = block_ptr[b + 1] - block_ptr[b]
        limit = room * (size.sum() + nb) / k
        lightest, fits = 0, False
        for j in range(k):
            if size[j] < size[lightest]:
                lightest = j
            if size[j] + nb <= limit:
                fits = True
        tally[:] = 0
        for vi in range(block_ptr[b], block_ptr[b + 1]):
            v = block_vertices[vi]
            for e in range(indptr[v], indptr[v + 1]):
                o = owner[indices[e]]
                if o >= 0:
                    tally[o] += 1
        best, best_score, best_bs, best_size = lightest, -np.inf, -np.inf, 0
        for j in range(k):
            if fits and size[j] + nb > limit:
                continue
            if not fits and j != lightest:
                continue
            ce = tally[j] / size[j] if size[j] > 0 else 0.0
            bs = 1.0
            for s in range(3):
                if capacity[s] > 0:
                    bs -= weights[s] * count[j, s] / capacity[s]
            if patched:
                score = (ce + eps) * max(bs, 0.0)
                better = (score > best_score or (score == best_score and (bs > best_bs or
                          (bs == best_bs and size[j] < best_size))))
            else:
                score = ce * bs
                better = score > best_score
            if better:
                best, best_score, best_bs, best_size = j, score, bs, size[j]
        block_part[b] = best
        for vi in range(block_ptr[b], block_ptr[b + 1]):
            v = block_vertices[vi]
            owner[v] = best
            size[best] += 1
            if split[v] >= 0:
                count[best, split[v]] += 1
    return block_part


_COMPILED = None


def _compiled():
    """The numba-compiled :func:`_assign_loop` (the Python function when numba is missing)."""
    global _COMPILED
    if _COMPILED is None:
        try:
            import numba

            _COMPILED = numba.njit(cache=True)(_assign_loop)
        except ImportError:  # pragma: no cover - numba is in the default environment
            _COMPILED = _assign_loop
    return _COMPILED


def assign_blocks(graph: Graph, block: np.ndarray, split: np.ndarray, num_parts: int, *,
                  weights: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3), variant: str = "patched",
                  eps: float = 1e-6, capacity: Optional[float] = None) -> np.ndarray:
    """Algorithm 2: ``(N,)`` part of every vertex (``-1`` where ``block`` is ``-1``).

    Args:
        block: ``(N,)`` block id of every vertex (any int64 label; ``-1`` = no block).
        split: ``(N,)`` 0/1/2 = train/val/test, -1 unlabelled (:func:`labelled_splits`).
        weights: alpha, beta, gamma.
        variant: ``paper`` or ``patched`` (module docstring).
        capacity: a block joins only a part ``j`` with ``|P_j| + |B| <= capacity (S + |B|) / k`` (``S`` vertices
            placed so far; none has room: the lightest part); None: Algorithm 2 alone.

    Example:
        >>> from workbench.graph import Graph
        >>> g = Graph.from_edges(torch.tensor([0, 1, 3]), torch.tensor([1, 2, 4]), 5, directed=False)
        >>> blocks = np.array([0, 0, 0, 3, 3]); split = np.array([0, -1, -1, 0, -1])
        >>> assign_blocks(g, blocks, split, 2).tolist()
        [0, 0, 0, 1, 1]
        >>> g = Graph.from_edges(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 3]), 4, directed=False)
        >>> blocks = np.array([0, 0, 2, 2]); split = np.array([0, -1, -1, -1])   # an unlabelled block, linked
        >>> assign_blocks(g, blocks, split, 2, variant="paper").tolist(), assign_blocks(g, blocks, split, 2,
        ...                                                                    variant="paper", capacity=1.1).tolist()
        ([0, 0, 0, 0], [0, 0, 1, 1])
    """
    n = graph.num_nodes
    has = np.nonzero(block >= 0)[0]
    ids, inverse, sizes = np.unique(block[has], return_inverse=True, return_counts=True)
    by_block = np.argsort(inverse, kind="stable")
    block_vertices = has[by_block].astype(np.int64)
    block_ptr = np.zeros(ids.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=block_ptr[1:])
    order = np.lexsort((ids, -sizes)).astype(np.int64)                     # size descending, then block id
    indptr, indices = _undirected_csr(graph)
    totals = np.bincount(split[split >= 0].astype(np.int64), minlength=3)[:3]
    expected = totals.astype(np.float64) / num_parts                       # C(train), C(val), C(test)
    owner = np.full(n, -1, dtype=np.int64)
    _compiled()(order, block_ptr, block_vertices, indptr.astype(np.int64), indices.astype(np.int64),
                split.astype(np.int64), owner, int(num_parts), np.asarray(weights, dtype=np.float64), expected,
                variant == "patched", float(eps), np.inf if capacity is None else float(capacity))
    return owner


def place_unreached(graph: Graph, owner: np.ndarray, num_parts: int, capacity: Optional[float] = None) -> np.ndarray:
    """Give every ``-1`` vertex a part: rounds of "the part most of its placed neighbours have, among the parts
    with room" (ties: lower part; a part holds at most ``ceil(capacity N / k)`` vertices, None = no limit; a
    part short of room takes the vertices with the most neighbours in it first, then the lower ids), then the
    least-loaded parts for what no round reaches. Vectorised per round.

    Example:
        >>> from workbench.graph import Graph
        >>> g = Graph.from_edges(torch.tensor([0, 1]), torch.tensor([1, 2]), 4, directed=False)
        >>> place_unreached(g, np.array([1, -1, -1, -1]), 2).tolist()
        [1, 1, 1, 0]
        >>> place_unreached(g, np.array([1, -1, -1, -1]), 2, capacity=1.0).tolist()   # part 1 holds 2 at most
        [1, 1, 0, 0]
    """
    owner = owner.copy()
    n, k = graph.num_nodes, num_parts
    limit = np.iinfo(np.int64).max if capacity is None else int(np.ceil(capacity * n / k))
    indptr, indices = _undirected_csr(graph)
    dst = np.repeat(np.arange(n), np.diff(indptr))
    while True:
        load = np.bincount(owner[owner >= 0], minlength=k)
        m = (owner[dst] < 0) & (owner[indices] >= 0)
        if not m.any():
            break
        votes = np.bincount(dst[m] * k + owner[indices[m]], minlength=n * k).reshape(n, k)
        votes[:, load >= limit] = 0                                       # full parts take no more
        todo = np.nonzero((votes.sum(1) > 0) & (owner < 0))[0]
        if todo.size == 0:
            break
        want = votes[todo].argmax(1)
        strength = votes[todo, want]
        order = np.lexsort((todo, -strength, want))                        # per part: strongest first
        todo, want = todo[order], want[order]
        rank = np.arange(todo.size) - np.searchsorted(want, want)         # position within its part
        take = rank < (limit - load)[want]
        owner[todo[take]] = want[take]
    rest = np.nonzero(owner < 0)[0]
    if rest.size:
        load = np.bincount(owner[owner >= 0], minlength=k)
        # water-filling: deal the rest to the parts in order of load, lightest first, one at a time
        target = (load.sum() + rest.size) // k + 1
        room = np.maximum(target - load, 0)
        slots = np.repeat(np.argsort(load, kind="stable"), room[np.argsort(load, kind="stable")])
        if slots.size < rest.size:
            slots = np.concatenate([slots, np.arange(rest.size - slots.size) % k])
        owner[rest] = slots[: rest.size]
    return owner


@register_partitioner
class ByteGNNPartitioner(Partitioner):
    """ByteGNN's block partitioner (module docstring): K-hop blocks of the labelled vertices, balanced per split.

    Example:
        >>> from workbench.data import load_graph
        >>> g = load_graph("products-like:num_nodes=600,seed=0")
        >>> a = ByteGNNPartitioner(num_hops=2).partition(g, 3).node_part
        >>> b = ByteGNNPartitioner(num_hops=2).partition(g, 3).node_part
        >>> bool(torch.equal(a, b))
        True
    """

    name = "bytegnn"

    @dataclasses.dataclass(kw_only=True)
    class Config(Partitioner.Config):
        num_hops: Annotated[int, Interval(0, None)] = 2
        """K: hops of each labelled vertex's neighbourhood block (the number of GNN layers)."""
        alpha: Annotated[float, Interval(0, None)] = 1 / 3
        """Weight of the training split's balance in BS (Algorithm 2)."""
        beta: Annotated[float, Interval(0, None)] = 1 / 3
        """Weight of the validation split's balance in BS."""
        gamma: Annotated[float, Interval(0, None)] = 1 / 3
        """Weight of the test split's balance in BS."""
        variant: Annotated[str, Options(*VARIANTS)] = "patched"
        """``paper``: Algorithm 2 literally; ``patched``: (CE + eps) * max(BS, 0), ties by BS then part size."""
        unreached: Annotated[str, Options(*UNREACHED)] = "neighbours"
        """Vertices no block reaches: ``neighbours`` (the part of most placed neighbours among the parts with
        room, else the lightest part) or ``singleton`` (each its own block)."""
        ties: Annotated[str, Options(*TIES)] = "most"
        """A vertex two centres reach at the same hop joins: ``most`` (the centre reaching it through most edges,
        then a hash) or ``smaller`` (the smaller centre id)."""
        capacity: Annotated[Optional[float], OneOf(None, Interval(1, None))] = 1.1
        """Vertex capacity: a block joins only a part that then holds at most ``capacity`` x the mean of the
        vertices placed so far (vertices no block reaches: at most ``ceil(capacity N / k)``); None: Algorithm 2
        alone, which balances only the labelled vertices."""

    def blocks(self, graph: Graph) -> np.ndarray:
        """``(N,)`` block id (centre vertex) of every vertex; ``-1`` = no block reaches it."""
        split = labelled_splits(graph)
        return neighbourhood_blocks(graph, np.nonzero(split >= 0)[0], self.config.num_hops, ties=self.config.ties,
                                    seed=self.config.seed)

    def _partition(self, graph: Graph, num_parts: int) -> torch.Tensor:
        cfg = self.config
        split = labelled_splits(graph)
        block = self.blocks(graph)
        if cfg.unreached == "singleton":
            block = np.where(block >= 0, block, np.arange(graph.num_nodes))
        owner = assign_blocks(graph, block, split, num_parts, weights=(cfg.alpha, cfg.beta, cfg.gamma),
                              variant=cfg.variant, capacity=cfg.capacity)
        if (owner < 0).any():
            owner = place_unreached(graph, owner, num_parts, capacity=cfg.capacity)
        return torch.from_numpy(owner)


def block_sizes(block: np.ndarray) -> np.ndarray:
    """Vertices per block (blocks with at least one vertex), in block-id order."""
    b = block[block >= 0]
    return np.unique(b, return_counts=True)[1] if b.size else np.zeros(0, dtype=np.int64)
