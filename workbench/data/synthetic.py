"""Seeded graph generators: planted-partition SBM, R-MAT, Chung-Lu, and presets shaped like the papers' data.

Every generator is a validated config whose :meth:`generate` returns an undirected, cleaned
:class:`~workbench.graph.Graph` (no self-loops, no duplicate edges, both directions stored) with float32
features, int64 labels and train/val/test masks. Sampling is vectorised (numpy, ``searchsorted`` over
cumulative weights) and never looks at all ``N^2`` pairs; the same config (seed included) gives the
identical graph.

Example:
    >>> g = SBMConfig(num_nodes=200, num_blocks=4, avg_degree=8, seed=0).generate()
    >>> g.num_nodes, g.directed, g.num_classes
    (200, False, 4)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Any, Callable, Optional

import numpy as np
import torch

from workbench._validation import Config, ErrorCollector
from workbench.constraints import Interval, OneOf
from workbench.data.cleaning import graph_from_sorted_keys
from workbench.graph import Graph

__all__ = [
    "NodeDataConfig",
    "SBMConfig",
    "RMATConfig",
    "rmat_pairs",
    "ChungLuConfig",
    "ProductsLikeConfig",
    "RedditLikeConfig",
    "PapersLikeConfig",
    "random_split",
]

# Graphs with at least this many target edges get a progress bar when ``progress=None``.
_PROGRESS_MIN_EDGES = 2_000_000


# --------------------------------------------------------------------------------------------------------
# Shared node data: features, labels, masks
# --------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(kw_only=True)
class NodeDataConfig(Config):
    """Settings every generator shares: node features, labels, split and seed."""

    num_features: Annotated[int, Interval(0, None)] = 32
    """Feature width: Gaussian features around one centroid per community (0 = no features)."""
    feature_noise: Annotated[float, Interval(0, None)] = 1.5
    """Per-dimension standard deviation around the centroids (centroids are about 4 apart whatever the
    width): ~1 makes features alone nearly enough, ~3 leaves most of the signal in the graph."""
    train_ratio: Annotated[float, Interval(0, 1)] = 0.6
    """Fraction of all vertices in the training split."""
    val_ratio: Annotated[float, Interval(0, 1)] = 0.2
    """Fraction of all vertices in the validation split."""
    test_ratio: Annotated[float, Interval(0, 1)] = 0.2
    """Fraction of all vertices in the test split (the rest, if any, is in no split)."""
    label_unsplit: bool = True
    """Give labels to vertices outside every split (False: label -1, like papers100M's unlabelled ones)."""
    seed: Annotated[int, Interval(0, None)] = 0
    """Random seed: the same config and seed give the identical graph."""

    def _validate(self, errs: ErrorCollector) -> None:
        check_split_ratios(errs, self, slack=1e-3)

    def _node_data(self, rng: np.random.Generator, community: np.ndarray, labels: np.ndarray,
                   num_communities: int, pool: Optional[np.ndarray] = None) -> dict:
        """Features around per-community centroids, labels and a seeded split drawn from ``pool``."""
        n = community.shape[0]
        out: dict = {}
        if self.num_features:
            f = self.num_features
            # Centroid entries ~ N(0, 8/F): pairwise centroid distance ~ 4 for any width.
            centroids = rng.standard_normal((num_communities, f), dtype=np.float32) * np.float32(math.sqrt(8.0 / f))
            x = rng.standard_normal((n, f), dtype=np.float32)
            x *= np.float32(self.feature_noise)
            x += centroids[community]
            out["features"] = torch.from_numpy(x)
        masks = random_split(n, self.train_ratio, self.val_ratio, self.test_ratio, rng=rng, pool=pool)
        labels = labels.astype(np.int64, copy=True)
        if not self.label_unsplit:
            labels[~(masks[0] | masks[1] | masks[2])] = -1
        out["labels"] = torch.from_numpy(labels)
        out["train_mask"], out["val_mask"], out["test_mask"] = (torch.from_numpy(m) for m in masks)
        return out


def check_split_ratios(errs: ErrorCollector, config: Any, slack: float = 1e-9) -> None:
    """Refuse ``config``'s ``train_ratio``, ``val_ratio`` and ``test_ratio`` when they add up to more than 1
    (``slack``: the rounding a config written with three decimals may carry)."""
    ratios = (config.train_ratio, config.val_ratio, config.test_ratio)
    errs.check(sum(ratios) <= 1 + slack, "test_ratio",
               f"at most 1 - train_ratio - val_ratio = {1 - config.train_ratio - config.val_ratio:.4g}",
               config.test_ratio)


def random_split(num_nodes: int, train_ratio: float, val_ratio: float, test_ratio: float, *,
                 rng: Optional[np.random.Generator] = None, seed: int = 0,
                 pool: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Disjoint seeded train/val/test masks with ``round(ratio * num_nodes)`` vertices each.

    Args:
        num_nodes: number of vertices.
        train_ratio, val_ratio, test_ratio: fractions of ``num_nodes``.
        rng: a numpy generator (default: ``np.random.default_rng(seed)``).
        seed: used when ``rng`` is not given.
        pool: optional vertex ids the splits are drawn from (default: all); counts are capped by its size.

    Example:
        >>> tr, va, te = random_split(10, 0.5, 0.2, 0.3, seed=0)
        >>> int(tr.sum()), int(va.sum()), int(te.sum()), bool((tr & va).any())
        (5, 2, 3, False)
    """
    rng = rng if rng is not None else np.random.default_rng(seed)
    pool = np.arange(num_nodes) if pool is None else np.asarray(pool, dtype=np.int64)
    order = pool[rng.permutation(pool.shape[0])]
    counts = [int(round(r * num_nodes)) for r in (train_ratio, val_ratio, test_ratio)]
    masks = []
    start = 0
    for c in counts:
        m = np.zeros(num_nodes, dtype=bool)
        m[order[start:start + c]] = True
        start += c
        masks.append(m)
    return masks[0], masks[1], masks[2]


def _undirected_keys(u: np.ndarray, v: np.ndarray, n: int) -> np.ndarray:
    """Distinct unordered pairs ``lo * n + hi`` (``lo < hi``), sorted; self-loops dropped."""
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    keep = lo != hi
    keys = torch.from_numpy(lo[keep] * n + hi[keep])
    return torch.unique(keys).numpy()


def _graph_from_pairs(pair_keys: np.ndarray, n: int, name: str, node_data: dict) -> Graph:
    """Both directions of every unordered pair, as a destination-major undirected :class:`Graph`."""
    pk = torch.from_numpy(pair_keys)
    lo = torch.div(pk, n, rounding_mode="floor")
    hi = pk - lo * n
    keys = torch.cat([hi * n + lo, lo * n + hi])  # dst * n + src for (lo -> hi) and (hi -> lo)
    keys, _ = torch.sort(keys)
    return graph_from_sorted_keys(keys, n, directed=False, name=name, **node_data)


def _progress(progress: Optional[bool], target_edges: int, desc: str, total: int):
    from workbench.data.readers import progress_bar

    return progress_bar(progress, total=total, desc=desc, large=target_edges >= _PROGRESS_MIN_EDGES)


def _weighted_sampler(weights: np.ndarray):
    """A function ``draw(r, lo, hi)`` mapping uniforms ``r`` to items in cumulative-weight ranges."""
    cum = np.cumsum(weights, dtype=np.float64)
    last = weights.shape[0] - 1

    def draw(r: np.ndarray, lo: np.ndarray | float, width: np.ndarray | float,
             first: np.ndarray | int = 0, stop: np.ndarray | int | None = None) -> np.ndarray:
        pos = np.searchsorted(cum, lo + r * width, side="right")
        # Floating-point ends can land one past a range; clamp into it.
        np.minimum(pos, last if stop is None else stop - 1, out=pos)
        np.maximum(pos, first, out=pos)
        return pos

    return cum, draw


# --------------------------------------------------------------------------------------------------------
# Planted-partition / degree-corrected SBM
# --------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(kw_only=True)
class SBMConfig(NodeDataConfig):
    """A planted-partition stochastic block model with community-correlated features.

    Vertices are split into ``num_blocks`` equal blocks (assigned at random, so vertex ids carry no
    block order). ``homophily`` of the edges join two vertices of the same block. With
    ``degree_exponent`` set the model is degree-corrected: each vertex has a power-law propensity and
    degrees follow ``P(k) ~ k^-degree_exponent`` (capped at ``sqrt(num_nodes * avg_degree)``).
    Labels are ``block % num_classes``; features are Gaussians around one centroid per block, so a
    GNN that averages neighbours denoises them and partition quality matters.

    Example:
        >>> g = SBMConfig(num_nodes=300, num_blocks=3, avg_degree=6, seed=1).generate()
        >>> g.num_classes, g.num_features
        (3, 32)
    """

    num_nodes: Annotated[int, Interval(2, None)] = 2000
    """Number of vertices."""
    num_blocks: Annotated[int, Interval(1, None)] = 8
    """Number of planted communities (blocks)."""
    avg_degree: Annotated[float, Interval(0, None, closed="neither")] = 10.0
    """Target mean number of neighbours per vertex (stored edges / vertices) after cleaning."""
    homophily: Annotated[float, Interval(0, 1)] = 0.8
    """Fraction of edges inside a block (1/num_blocks is no community structure)."""
    degree_exponent: Annotated[Optional[float], OneOf(None, Interval(2, None, closed="neither"))] = None
    """Power-law exponent of the degree distribution (> 2, e.g. 2.5); None = Poisson degrees."""
    num_classes: Annotated[Optional[int], OneOf(None, Interval(1, None))] = None
    """Label classes (labels = block % num_classes); None = one class per block."""
    labelled_blocks: Annotated[Optional[int], OneOf(None, Interval(1, None))] = None
    """Draw the train/val/test vertices only from the first k blocks (skewed labels, as in papers100M)."""

    def _validate(self, errs: ErrorCollector) -> None:
        super()._validate(errs)
        nodes, blocks = self.num_nodes, self.num_blocks
        errs.check(blocks <= nodes, "num_blocks", f"an int in [1, num_nodes={nodes}]", blocks)
        errs.check(self.avg_degree <= nodes - 1, "avg_degree", f"a number in (0, num_nodes - 1 = {nodes - 1}]",
                   self.avg_degree)
        errs.check(self.num_classes is None or self.num_classes <= blocks, "num_classes",
                   f"None or an int in [1, num_blocks={blocks}]", self.num_classes)
        errs.check(self.labelled_blocks is None or self.labelled_blocks <= blocks, "labelled_blocks",
                   f"None or an int in [1, num_blocks={blocks}]", self.labelled_blocks)
        if self.labelled_blocks is not None and self.labelled_blocks <= blocks:
            share = self.labelled_blocks / blocks
            total = self.train_ratio + self.val_ratio + self.test_ratio
            errs.check(total <= share + 1e-9, "labelled_blocks",
                       f"large enough to hold the splits (train+val+test = {total:.4g} of the vertices, "
                       f"labelled_blocks/num_blocks = {share:.4g})", self.labelled_blocks)

    @property
    def name(self) -> str:
        return "sbm"

    def generate(self, *, progress: Optional[bool] = None) -> Graph:
        """Sample the graph (vectorised; about a second per few million edges).

        Args:
            progress: show a progress bar (``None``: only for graphs of 2M edges or more).
        """
        self.validate()
        n, nb = self.num_nodes, self.num_blocks
        rng = np.random.default_rng(self.seed)
        target = int(round(n * self.avg_degree / 2))  # undirected pairs
        with _progress(progress, 2 * target, f"generating {self.name}", total=3) as bar:
            block = rng.permutation(np.arange(n, dtype=np.int64) % nb)
            theta = self._propensity(rng, n)
            order = np.argsort(block, kind="stable")  # vertices grouped by block
            sizes = np.bincount(block, minlength=nb)
            starts = np.concatenate([[0], np.cumsum(sizes)])
            cum, draw = _weighted_sampler(theta[order])
            cum0 = np.concatenate([[0.0], cum])
            block_lo, block_tot = cum0[starts[:-1]], cum0[starts[1:]] - cum0[starts[:-1]]
            block_cum = np.cumsum(block_tot)

            def sample(m_in: int, m_out: int) -> tuple[np.ndarray, np.ndarray]:
                m = m_in + m_out
                u = order[draw(rng.random(m), 0.0, cum[-1])]
                bu = block[u]
                bv = bu.copy()
                if m_out and nb > 1:
                    tail = slice(m_in, m)
                    other = bv[tail]
                    redo = np.ones(m_out, dtype=bool)
                    while redo.any():  # a different block, chosen by weight: ~1/num_blocks redrawn per round
                        k = int(redo.sum())
                        pick = np.searchsorted(block_cum, rng.random(k) * block_cum[-1], side="right")
                        other[redo] = np.minimum(pick, nb - 1)
                        redo = other == bu[tail]
                    bv[tail] = other
                v = order[draw(rng.random(m), block_lo[bv], block_tot[bv], starts[bv], starts[bv + 1])]
                return u, v

            m_in = int(round(target * self.homophily)) if nb > 1 else target
            m_out = target - m_in
            u, v = sample(m_in, m_out)
            keys = _undirected_keys(u, v, n)
            # Top up each kind (inside / across blocks) for pairs lost to self-loops and duplicates, so
            # the mean degree and the homophily both land on target (hubs lose the most, hence rounds).
            for _ in range(4):
                intra = block[keys // n] == block[keys % n]
                short_in = m_in - int(intra.sum())
                short_out = m_out - int((~intra).sum())
                if max(short_in, short_out) <= 0.001 * target:
                    break
                u2, v2 = sample(int(max(short_in, 0) * 1.1), int(max(short_out, 0) * 1.1))
                keys = np.union1d(keys, _undirected_keys(u2, v2, n))
            bar.update(1)
            labels = block % (self.num_classes or nb)
            pool = None
            if self.labelled_blocks is not None:
                pool = np.flatnonzero(block < self.labelled_blocks)
            node_data = self._node_data(rng, block, labels, nb, pool)
            bar.update(1)
            g = _graph_from_pairs(keys, n, self.name, node_data)
            bar.update(1)
        return g

    def _propensity(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.degree_exponent is None:
            return np.ones(n, dtype=np.float64)
        # Pareto(x_min=1) with density ~ x^-gamma, normalised to mean 1 and capped (Chung-Lu's sqrt bound).
        theta = (1.0 - rng.random(n)) ** (-1.0 / (self.degree_exponent - 1.0))
        theta /= theta.mean()
        cap = math.sqrt(n / max(self.avg_degree, 1e-9))
        np.minimum(theta, max(cap, 1.0), out=theta)
        return theta / theta.mean()


# --------------------------------------------------------------------------------------------------------
# Presets shaped like the papers' data sets (DistDGL, ByteGNN, SANCUS)
# --------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(kw_only=True)
class ProductsLikeConfig(SBMConfig):
    """Shaped like ogbn-products at a size you choose: 47 classes, 100 features, mean degree ~50 (as stored,
    both directions), power-law degrees, edge homophily ~0.81, split 8.03 / 1.61 / 90.37 %.

    Example:
        >>> ProductsLikeConfig(num_nodes=1000, avg_degree=10, num_features=8).generate().num_classes
        47
    """

    num_nodes: int = 20000
    """Number of vertices (ogbn-products has 2,449,029)."""
    num_blocks: int = 47
    """Planted communities, one per class (ogbn-products has 47 classes)."""
    avg_degree: float = 50.0
    """Mean neighbours per vertex (ogbn-products: 123,718,280 stored edges / 2,449,029 vertices ~ 50.5)."""
    homophily: float = 0.81
    """Fraction of edges inside a block (ogbn-products' edge homophily is about 0.81)."""
    degree_exponent: Optional[float] = 2.2
    """Power-law exponent of the degree distribution (heavy-tailed, as co-purchase graphs are)."""
    num_features: int = 100
    """Feature width (ogbn-products: 100)."""
    train_ratio: float = 0.0803
    """Training split: 8.03 % (ogbn-products' sales-rank split)."""
    val_ratio: float = 0.0161
    """Validation split: 1.61 %."""
    test_ratio: float = 0.9037
    """Test split: 90.37 %."""

    @property
    def name(self) -> str:
        return "products-like"


@dataclasses.dataclass(kw_only=True)
class RedditLikeConfig(SBMConfig):
    """Shaped like Reddit (GraphSAINT's version) at a size you choose: 41 classes, 602 features, mean degree
    ~50, power-law degrees, edge homophily ~0.78, split 66 / 10 / 24 %.

    Example:
        >>> RedditLikeConfig(num_nodes=500, avg_degree=8, num_features=4).generate().num_classes
        41
    """

    num_nodes: int = 20000
    """Number of vertices (Reddit has 232,965)."""
    num_blocks: int = 41
    """Planted communities, one per class (Reddit has 41 subreddit classes)."""
    avg_degree: float = 50.0
    """Mean neighbours per vertex (Reddit as in SANCUS Table 4: 11,606,919 edges / 232,965 vertices ~ 50)."""
    homophily: float = 0.78
    """Fraction of edges inside a block (Reddit's edge homophily is about 0.78)."""
    degree_exponent: Optional[float] = 2.5
    """Power-law exponent of the degree distribution."""
    num_features: int = 602
    """Feature width (Reddit: 602)."""
    train_ratio: float = 0.66
    """Training split: 66 %."""
    val_ratio: float = 0.10
    """Validation split: 10 %."""
    test_ratio: float = 0.24
    """Test split: 24 %."""

    @property
    def name(self) -> str:
        return "reddit-like"


@dataclasses.dataclass(kw_only=True)
class PapersLikeConfig(SBMConfig):
    """Shaped like ogbn-papers100M at a size you choose: 172 classes, 128 features, mean degree ~29,
    power-law degrees, split 1.09 / 0.11 / 0.19 % with every other vertex unlabelled (label -1).
    Set ``labelled_blocks`` to concentrate the labelled vertices in a few communities (the skew that
    makes plain METIS slower than random partitioning in DistDGL's Fig. 16).

    Example:
        >>> g = PapersLikeConfig(num_nodes=2000, avg_degree=8, num_features=4).generate()
        >>> int((g.labels >= 0).sum()) == int((g.train_mask | g.val_mask | g.test_mask).sum())
        True
    """

    num_nodes: int = 20000
    """Number of vertices (ogbn-papers100M has 111,059,956)."""
    num_blocks: int = 172
    """Planted communities, one per class (papers100M has 172 arXiv subject classes)."""
    avg_degree: float = 29.0
    """Mean neighbours per vertex (papers100M: 3,231,371,744 stored edges / 111,059,956 vertices ~ 29)."""
    homophily: float = 0.65
    """Fraction of edges inside a block (citation graphs are moderately homophilous)."""
    degree_exponent: Optional[float] = 2.3
    """Power-law exponent of the degree distribution."""
    num_features: int = 128
    """Feature width (papers100M: 128)."""
    train_ratio: float = 0.0109
    """Training split: 1.09 %."""
    val_ratio: float = 0.0011
    """Validation split: 0.11 %."""
    test_ratio: float = 0.0019
    """Test split: 0.19 %."""
    label_unsplit: bool = False
    """Vertices outside the splits are unlabelled (-1), as in papers100M."""

    @property
    def name(self) -> str:
        return "papers-like"


# --------------------------------------------------------------------------------------------------------
# Power-law generators
# --------------------------------------------------------------------------------------------------------


def rmat_pairs(rng: np.random.Generator, count: int, a: float, b: float, c: float, scale: int,
               on_level: Optional[Callable[[], None]] = None) -> tuple[np.ndarray, np.ndarray]:
    """``count`` R-MAT edges ``(src, dst)`` over ``2**scale`` vertices: one vectorised draw per recursion level,
    quadrants with probabilities ``a, b, c, 1 - a - b - c`` (``on_level`` is called after each level).

    Example:
        >>> src, dst = rmat_pairs(np.random.default_rng(0), 5, 0.57, 0.19, 0.19, 4)
        >>> src.shape, int(src.max()) < 16
        ((5,), True)
    """
    src, dst = np.zeros(count, dtype=np.int64), np.zeros(count, dtype=np.int64)
    ab, abc = a + b, a + b + c
    for level in range(scale):
        r = rng.random(count, dtype=np.float32)
        bit = np.int64(1) << np.int64(scale - 1 - level)
        src += (r >= ab) * bit
        dst += (((r >= a) & (r < ab)) | (r >= abc)) * bit
        if on_level is not None:
            on_level()
    return src, dst

@dataclasses.dataclass(kw_only=True)
class RMATConfig(NodeDataConfig):
    """R-MAT (Graph500 parameters by default): ``2**scale`` vertices, ``edge_factor * 2**scale`` sampled
    edges, each placed by recursively choosing one of four quadrants with probabilities a, b, c, d.

    Vertex ids are shuffled afterwards (as Graph500 does). Labels are the recursive block of the
    unshuffled id (``floor(id * num_classes / 2**scale)``), which R-MAT's skew makes mildly homophilous;
    features are Gaussians around one centroid per class.

    Example:
        >>> g = RMATConfig(scale=8, edge_factor=4, seed=0).generate()
        >>> g.num_nodes, g.directed
        (256, False)
    """

    scale: Annotated[int, Interval(1, 30)] = 12
    """log2 of the number of vertices."""
    edge_factor: Annotated[float, Interval(0, None, closed="neither")] = 8.0
    """Sampled edges per vertex (before removing self-loops and duplicates; Graph500 uses 16)."""
    a: Annotated[float, Interval(0, 1)] = 0.57
    """Probability of the top-left quadrant (Graph500: 0.57)."""
    b: Annotated[float, Interval(0, 1)] = 0.19
    """Probability of the top-right quadrant (Graph500: 0.19)."""
    c: Annotated[float, Interval(0, 1)] = 0.19
    """Probability of the bottom-left quadrant (Graph500: 0.19)."""
    d: Annotated[float, Interval(0, 1)] = 0.05
    """Probability of the bottom-right quadrant (Graph500: 0.05); a + b + c + d must be 1."""
    num_classes: Annotated[int, Interval(1, None)] = 8
    """Label classes (contiguous ranges of the unshuffled vertex ids)."""

    def _validate(self, errs: ErrorCollector) -> None:
        super()._validate(errs)
        probs = (self.a, self.b, self.c, self.d)
        errs.check(abs(sum(probs) - 1) < 1e-6, "d", f"1 - a - b - c = {1 - self.a - self.b - self.c:.6g}", self.d)
        nodes = 2 ** self.scale
        errs.check(self.num_classes <= nodes, "num_classes", f"an int in [1, 2**scale={nodes}]", self.num_classes)

    @property
    def name(self) -> str:
        return "rmat"

    def generate(self, *, progress: Optional[bool] = None) -> Graph:
        """Sample the graph, one vectorised pass per recursion level."""
        self.validate()
        n = 2 ** self.scale
        m = int(round(self.edge_factor * n))
        rng = np.random.default_rng(self.seed)
        with _progress(progress, 2 * m, f"generating {self.name}", total=self.scale + 2) as bar:
            src, dst = rmat_pairs(rng, m, self.a, self.b, self.c, self.scale, on_level=lambda: bar.update(1))
            perm = rng.permutation(n)
            keys = _undirected_keys(perm[src], perm[dst], n)
            bar.update(1)
            original = np.empty(n, dtype=np.int64)
            original[perm] = np.arange(n)  # unshuffled id of each vertex
            labels = original * self.num_classes // n
            node_data = self._node_data(rng, labels, labels, self.num_classes)
            g = _graph_from_pairs(keys, n, self.name, node_data)
            bar.update(1)
        return g


@dataclasses.dataclass(kw_only=True)
class ChungLuConfig(NodeDataConfig):
    """Chung-Lu graph with a power-law expected degree sequence ``w_i ~ (i + i0)^(-1/(exponent-1))``.

    Endpoints of each edge are drawn independently with probability proportional to ``w``; vertex ids
    are shuffled. Labels are uniform random classes (there are no communities), so only the features
    (Gaussians around a centroid per class) predict them.

    Example:
        >>> g = ChungLuConfig(num_nodes=500, avg_degree=6, seed=0).generate()
        >>> int(g.in_degrees().max()) > 3 * 6
        True
    """

    num_nodes: Annotated[int, Interval(2, None)] = 2000
    """Number of vertices."""
    avg_degree: Annotated[float, Interval(0, None, closed="neither")] = 10.0
    """Target mean number of neighbours per vertex (before removing duplicates)."""
    exponent: Annotated[float, Interval(2, None, closed="neither")] = 2.5
    """Power-law exponent of the degree distribution (> 2)."""
    num_classes: Annotated[int, Interval(1, None)] = 8
    """Label classes (uniform at random)."""

    def _validate(self, errs: ErrorCollector) -> None:
        super()._validate(errs)
        nodes = self.num_nodes
        errs.check(self.avg_degree <= nodes - 1, "avg_degree", f"a number in (0, num_nodes - 1 = {nodes - 1}]",
                   self.avg_degree)
        errs.check(self.num_classes <= nodes, "num_classes", f"an int in [1, num_nodes={nodes}]", self.num_classes)

    @property
    def name(self) -> str:
        return "chunglu"

    def generate(self, *, progress: Optional[bool] = None) -> Graph:
        """Sample the graph (vectorised)."""
        self.validate()
        n = self.num_nodes
        m = int(round(n * self.avg_degree / 2))
        rng = np.random.default_rng(self.seed)
        with _progress(progress, 2 * m, f"generating {self.name}", total=2) as bar:
            i0 = 1.0
            w = (np.arange(n, dtype=np.float64) + i0) ** (-1.0 / (self.exponent - 1.0))
            w *= self.avg_degree / w.mean()
            np.minimum(w, math.sqrt(n * self.avg_degree), out=w)
            cum, draw = _weighted_sampler(w)
            perm = rng.permutation(n)
            u = perm[draw(rng.random(m), 0.0, cum[-1])]
            v = perm[draw(rng.random(m), 0.0, cum[-1])]
            keys = _undirected_keys(u, v, n)
            bar.update(1)
            labels = rng.integers(0, self.num_classes, n)
            node_data = self._node_data(rng, labels, labels, self.num_classes)
            g = _graph_from_pairs(keys, n, self.name, node_data)
            bar.update(1)
        return g
