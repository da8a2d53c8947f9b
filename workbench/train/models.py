"""GNN models written once for every training scheme: GCN and GraphSAGE-mean, 2 to 4 layers.

A model only owns the dense parts (the weights). Where the neighbour rows come from is the caller's
business: full-graph halo exchange, CAGNET block-row broadcasts, or one process holding the whole
graph. The paper-faithful order of a layer is *aggregate first, then transform*::

    T = Â H            # sparse aggregation over in-neighbours (width F_in: what travels)
    Z = T W            # GCN
    Z = H W_self + T W_neigh      # GraphSAGE-mean (Â = row-normalised A, no self-loops)
    H' = relu(Z)       # no activation after the last layer (logits)

``order="auto"`` (the default) computes a layer whose output is narrower than its input *transform
first*, as DGL's ``GraphConv``/``SAGEConv`` do: ``Z = Â (H W) + b`` (GCN) and
``Z = H W_self + Â (H W_neigh) + b`` (GraphSAGE; only the neighbour branch is reordered). Both orders
are the same linear map, so results agree to float rounding, but the sparse product and the exchanged
rows get the *output* width. ``order="aggregate-first"`` keeps the printed order everywhere (recipes
whose byte claims are stated for it pin it). :attr:`GNNModel.exchange_widths` is the width of the rows
exchanged for each layer, which is what the partition's communication volume predicts
(``rows x width x 4`` bytes), and :attr:`GNNModel.backward_widths` the width of their gradients (0 for an
aggregate-first first layer: the features need no gradient).

Edge weights come from :func:`edge_weights` with **global** degrees, so a rank that only holds its part
still normalises like the single-process model:

* ``gcn``: ``Â = D̄_in^{-1/2} (A + I) D̄_out^{-1/2}`` with ``D̄ = D + I`` (Kipf & Welling; equal to
  DGL ``GraphConv(norm="both")`` on a graph with self-loops added). Undirected graphs have
  ``D_in = D_out``, giving the symmetric ``D̄^{-1/2} Ā D̄^{-1/2}`` of the SANCUS paper (§3.1).
* ``sage``: ``Â = D_in^{-1} A`` (mean over in-neighbours; a vertex without in-neighbours gets 0).

Example:
    >>> import torch
    >>> from workbench.train.models import GNNModel
    >>> model = GNNModel("gcn", in_dim=4, hidden=8, out_dim=3, num_layers=2, seed=0)
    >>> model.input_widths, model.exchange_widths
    ([4, 8], [4, 3])
    >>> x = torch.randn(5, 4)
    >>> model(x, lambda h, layer: h).shape   # identity "aggregation"
    torch.Size([5, 3])
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Annotated, Callable, ClassVar, Optional

import torch
from torch import nn

from workbench.constraints import Interval, Options
from workbench.stages import Stage, registry
from workbench.train.kernels import csr_pair, set_kernel, spmm, spmm_kernel

__all__ = ["GNNModel", "MODELS", "ModelStage", "GCN", "GraphSAGE", "edge_weights", "SpMM",
           "sparse_aggregator", "node_scales", "with_self_loops", "model_stage_class", "dropout_mask", "INITS",
           "LAYER_ORDERS", "transform_first", "block_transform_first", "backward_widths"]

INITS = ("uniform", "glorot")

LAYER_ORDERS = ("auto", "aggregate-first")


def transform_first(dims: list[int], order: str = "auto", pinned: frozenset = frozenset()) -> list[bool]:
    """Per layer: whether it multiplies by ``W`` before aggregating (``auto``: when its output is narrower).

    ``pinned`` lists layers an exchange needs in the printed order (e.g. a static, never re-sent input).

    Example:
        >>> transform_first([64, 64, 16]), transform_first([64, 16, 16], pinned=frozenset({0}))
        ([False, True], [False, False])
    """
    return [order == "auto" and dims[i + 1] < dims[i] and i not in pinned for i in range(len(dims) - 1)]


def block_transform_first(dims: list[int], order: str = "auto") -> list[bool]:
    """Per layer of a mini-batch's blocks: whether it transforms first (``auto``: as :func:`transform_first`,
    except the first layer while its input is at most twice as wide as its output).

    The first layer's input is the features, which need no gradient. Aggregating first, its backward pass is
    two dense products over the block's destinations only; transforming first, it aggregates the ``F_out``-wide
    rows twice (forward, and the transposed gradient backward) and multiplies every source row, and a block has
    many more sources than destinations. So the first layer aggregates first unless its ``F_in`` exceeds
    ``2 F_out`` (the edges' traffic, ``F_in`` against ``2 F_out`` per edge, then favours transforming). No
    bytes depend on it in mini-batch training (a batch's input rows are pulled whatever the order); the
    result is the same up to rounding. DGL's ``SAGEConv`` transforms first whenever ``F_in > F_out``.

    Example:
        >>> block_transform_first([100, 64, 64, 47]), block_transform_first([602, 64, 16])
        ([False, False, True], [True, True])
    """
    first = transform_first(dims, order)
    return [t and not (i == 0 and dims[0] <= 2 * dims[1]) for i, t in enumerate(first)]


class GNNModel(nn.Module):
    """GCN or GraphSAGE-mean with ``num_layers`` layers; the aggregation is passed to :meth:`forward`.

    Args:
        kind: the model stage (a :class:`ModelStage` or its class, what :meth:`ModelStage.build` passes), or a
            registered model's name (``"gcn"``, ``"sage"``).
        in_dim: input feature width.
        hidden: hidden width.
        out_dim: number of classes.
        num_layers: 1 to 4 layers (2 to 4 is the tested range).
        seed: weights are initialised from this seed, so every rank builds identical replicas.
        dropout: probability of zeroing an entry of each layer's input (input and hidden layers) while
            training; off in ``eval()``. Masks come from :func:`dropout_mask` keyed by (seed, epoch, layer,
            GLOBAL vertex id, column), so ranks holding different rows draw the single-process masks.
        init: ``"uniform"`` (``nn.Linear``'s U(±1/sqrt(in)) for weights and biases) or ``"glorot"``
            (Glorot/Xavier-uniform weights, zero biases, as Kipf & Welling).
        order: ``"auto"`` (transform first where the output is narrower) or ``"aggregate-first"``.
        pinned: layers kept aggregate-first whatever ``order`` says (an exchange's requirement).
    """

    def __init__(self, kind: "str | ModelStage | type[ModelStage]", *, in_dim: int, hidden: int, out_dim: int,
                 num_layers: int, seed: int = 0, dropout: float = 0.0, init: str = "uniform", order: str = "auto",
                 pinned: frozenset = frozenset()):
        super().__init__()
        if isinstance(kind, str) and kind not in MODELS:
            raise ValueError(f"The 'kind' parameter of GNNModel must be one of {sorted(MODELS)}. Got {kind!r} instead.")
        if order not in LAYER_ORDERS:
            raise ValueError(f"The 'order' parameter of GNNModel must be one of {list(LAYER_ORDERS)}. "
                             f"Got {order!r} instead.")
        stage = MODELS[kind] if isinstance(kind, str) else model_stage_class(kind)
        self.kind = stage.name
        """The model's registry name."""
        self.self_transform = stage.self_transform
        """Whether a layer adds ``H W_self`` (GraphSAGE) to the aggregated rows' transform."""
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        self.neigh = nn.ModuleList(nn.Linear(dims[i], dims[i + 1]) for i in range(num_layers))
        # GraphSAGE's self transform; no bias (the neighbour linear carries it)
        self.self_ = nn.ModuleList(nn.Linear(dims[i], dims[i + 1], bias=False) for i in range(num_layers)) \
            if self.self_transform else nn.ModuleList()
        # a private generator: thread ranks share the global RNG, so seeding it would race
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for lin in [*self.neigh, *self.self_]:
                bound = 1.0 / lin.in_features ** 0.5   # nn.Linear's default U(-1/sqrt(in), 1/sqrt(in))
                if init == "glorot":
                    bound = (6.0 / (lin.in_features + lin.out_features)) ** 0.5
                for name, p in lin.named_parameters():
                    if init == "glorot" and name == "bias":
                        p.zero_()
                    else:
                        p.copy_(torch.rand(p.shape, generator=gen) * (2 * bound) - bound)
        self.dims = dims
        self.transform_first = transform_first(dims, order, frozenset(pinned))
        self.block_transform_first = block_transform_first(dims, order)
        """The layer order on a mini-batch's blocks (:func:`block_transform_first`)."""
        self.dropout = float(dropout)
        self.seed = seed
        self.epoch = 0
        """Current epoch (the training loop sets it): part of the dropout key."""

    def first_layer_parameters(self) -> list[nn.Parameter]:
        """The first layer's weight matrices (Kipf & Welling put L2 regularisation on these only)."""
        return [self.neigh[0].weight] + ([self.self_[0].weight] if self.self_transform else [])

    def drop(self, h: torch.Tensor, layer: int, node_ids: Optional[torch.Tensor]) -> torch.Tensor:
        """``h`` with dropout applied (identity in eval mode or with ``dropout == 0``); ``node_ids`` are the
        rows' GLOBAL vertex ids (default ``0..rows-1``: one process holding the whole graph)."""
        if not self.training or self.dropout <= 0.0:
            return h
        if node_ids is None:
            node_ids = torch.arange(h.shape[0])
        keep = dropout_mask(self.seed, self.epoch, layer, node_ids.to(h.device), h.shape[1], self.dropout)
        return h * keep.to(h.dtype) / (1.0 - self.dropout)

    @property
    def num_layers(self) -> int:
        return len(self.neigh)

    @property
    def input_widths(self) -> list[int]:
        """Width of each layer's input: the width of the rows exchanged for that layer."""
        return self.dims[:-1]

    @property
    def exchange_widths(self) -> list[int]:
        """Width of the rows each layer aggregates (and exchanges): its input width, or its output width
        when the layer transforms first."""
        return [self.dims[i + 1] if t else self.dims[i] for i, t in enumerate(self.transform_first)]

    @property
    def backward_widths(self) -> list[int]:
        """Width of the gradients of the exchanged rows per layer; 0 where no gradient flows (the features
        of an aggregate-first first layer)."""
        return backward_widths(self.exchange_widths, self.transform_first)

    def layer(self, index: int, agg: torch.Tensor, h_self: torch.Tensor) -> torch.Tensor:
        """Pre-activation ``Z`` of layer ``index`` (aggregate-first) from the aggregated rows and the vertex's
        own rows."""
        z = self.neigh[index](agg)
        if self.self_transform:
            z = z + self.self_[index](h_self)
        return z

    def _layer(self, i: int, h: torch.Tensor, h_self: torch.Tensor,
               aggregate: Callable[[torch.Tensor, int], torch.Tensor], first: Optional[bool] = None) -> torch.Tensor:
        if not (self.transform_first[i] if first is None else first):
            return self.layer(i, aggregate(h, i), h_self)
        lin = self.neigh[i]
        z = aggregate(torch.nn.functional.linear(h, lin.weight), i) + lin.bias   # Â (H W) + b
        if self.self_transform:
            z = z + self.self_[i](h_self)
        return z

    def forward(self, x: torch.Tensor, aggregate: Callable[[torch.Tensor, int], torch.Tensor],
                node_ids: Optional[torch.Tensor] = None, num_dst: Optional[list[int]] = None) -> torch.Tensor:
        """Logits of the owned vertices. ``aggregate(h, layer)`` returns ``Â h`` for the owned rows (``h`` is the
        layer's input, or its input times ``W`` for a transform-first layer); ``node_ids`` are their global ids
        (used by dropout only). ``num_dst``: layer ``i`` computes only the first ``num_dst[i]`` rows of its input
        (``aggregate`` returns that many; a standalone part's last layer needs its owned rows only)."""
        h = x
        for i in range(self.num_layers):
            h = self.drop(h, i, node_ids)   # before the exchange: halo rows arrive already dropped, as owned
            z = self._layer(i, h, h if num_dst is None else h[: num_dst[i]], aggregate)
            h = torch.relu(z) if i < self.num_layers - 1 else z
        return h

    def forward_blocks(self, x: torch.Tensor, aggregate: Callable[[torch.Tensor, int], torch.Tensor],
                       num_dst: list[int]) -> torch.Tensor:
        """Logits of a mini-batch's seeds on sampled blocks (DGL message-flow graphs).

        Layer ``i`` reads the rows of its source vertices ``h`` (``(num_src_i, F)``) and writes its
        destination vertices, which are the first ``num_dst[i]`` sources (DGL's layout), so a vertex's own
        row (GraphSAGE's self term) is ``h[:num_dst[i]]``. ``aggregate(h, i)`` returns the
        ``(num_dst[i], F)`` aggregated rows of block ``i``. The layers' order is
        :attr:`block_transform_first` (the first layer aggregates first unless its input is more than twice as
        wide as its output).

        Example:
            >>> m = GNNModel("sage", in_dim=3, hidden=4, out_dim=2, num_layers=2, seed=0)
            >>> m.forward_blocks(torch.randn(7, 3), lambda h, i: h[: [5, 2][i]], [5, 2]).shape
            torch.Size([2, 2])
        """
        if self.training and self.dropout > 0:
            warnings.warn("dropout is applied in full-graph training only; mini-batch blocks run without it",
                          stacklevel=2)
        h = x
        for i in range(self.num_layers):
            z = self._layer(i, h, h[: num_dst[i]], aggregate, self.block_transform_first[i])
            h = torch.relu(z) if i < self.num_layers - 1 else z
        return h


def _signed(c: int) -> int:
    return c - (1 << 64) if c >= 1 << 63 else c


_GOLDEN, _MIX1, _MIX2 = _signed(0x9E3779B97F4A7C15), _signed(0xBF58476D1CE4E5B9), _signed(0x94D049BB133111EB)


def _shr(x: torch.Tensor, s: int) -> torch.Tensor:
    """Logical right shift of int64 (torch's ``>>`` is arithmetic)."""
    return (x >> s) & ((1 << (64 - s)) - 1)


def dropout_mask(seed: int, epoch: int, layer: int, node_ids: torch.Tensor, width: int, p: float) -> torch.Tensor:
    """``(len(node_ids), width)`` bool keep-mask, ``True`` with probability ``1 - p``, a pure function of
    (seed, epoch, layer, global vertex id, column): a counter-based SplitMix64 hash, vectorised, so every
    rank draws for its rows exactly what one process draws for the same rows.

    Example:
        >>> a = dropout_mask(0, 1, 0, torch.arange(6), 4, 0.5)
        >>> b = dropout_mask(0, 1, 0, torch.tensor([4, 5]), 4, 0.5)
        >>> bool((a[4:] == b).all()), a.shape
        (True, torch.Size([6, 4]))
    """
    key = node_ids.to(torch.int64)[:, None] * width + torch.arange(width, device=node_ids.device)[None, :]
    salt = (seed * 1_000_003 + epoch) * 1_000_033 + layer
    x = key * _GOLDEN + _signed((salt * 0xD1B54A32D192ED03) % (1 << 64))
    x = (x ^ _shr(x, 30)) * _MIX1
    x = (x ^ _shr(x, 27)) * _MIX2
    x = x ^ _shr(x, 31)
    u = _shr(x, 11).to(torch.float64) * (1.0 / (1 << 53))   # uniform in [0, 1)
    return u >= p
def backward_widths(exchange_widths: list[int], transform_first: list[bool]) -> list[int]:
    """Gradient width per layer of the exchanged rows: layer 0's rows carry a gradient only when it
    transforms first (``X W`` depends on ``W``; ``X`` alone does not).

    Example:
        >>> backward_widths([64, 16], [False, True]), backward_widths([16, 16], [True, True])
        ([0, 16], [16, 16])
    """
    return [w if (i > 0 or transform_first[i]) else 0 for i, w in enumerate(exchange_widths)]


def model_stage_class(model: "ModelStage | type[ModelStage]") -> "type[ModelStage]":
    """The :class:`ModelStage` subclass of ``model``, a model stage (``MODELS.build(...)``) or its class: what the
    layouts and aggregators ask for ``Â`` (:attr:`ModelStage.self_loops`, :meth:`ModelStage.edge_weights`,
    :meth:`ModelStage.node_scales`). A name is refused: the model travels as an object, so one registered from
    outside the package needs no lookup.

    Example:
        >>> model_stage_class(MODELS.build("gcn")) is model_stage_class(GCN) is GCN
        True
    """
    cls = model if isinstance(model, type) else type(model)
    if not issubclass(cls, ModelStage):
        raise TypeError(f"expected the model stage (a ModelStage such as MODELS.build('gcn'), or its class), "
                        f"got {model!r}")
    return cls


def edge_weights(model: "ModelStage | type[ModelStage]", src: torch.Tensor, dst: torch.Tensor,
                 dst_in_degree: torch.Tensor, src_out_degree: torch.Tensor) -> torch.Tensor:
    """Per-edge weight of ``Â`` for edges ``src -> dst`` given the endpoints' GLOBAL degrees: the model's
    :meth:`ModelStage.edge_weights`.

    Args:
        model: the model stage (a :class:`ModelStage`, e.g. ``MODELS.build("gcn")``, or its class).
        src, dst: edge endpoints (any id space); self-loops for GCN are passed in as ordinary edges
            (:func:`with_self_loops`).
        dst_in_degree: in-degree (without self-loop) of each edge's destination, aligned with ``dst``.
        src_out_degree: out-degree (without self-loop) of each edge's source, aligned with ``src``.

    Returns:
        ``(num_edges,)`` float32 weights.
    """
    return model_stage_class(model).edge_weights(dst_in_degree, src_out_degree)


def node_scales(model: "ModelStage | type[ModelStage]", row_in_degree: torch.Tensor, col_out_degree: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(r, c)`` with :func:`edge_weights` ``== r[dst] * c[src]``: the row (destination) and column (source)
    factors of the model stage's ``Â``, given the GLOBAL degrees of the matrix's rows and columns (in their local
    order).

    Example:
        >>> r, c = node_scales(MODELS.build("gcn"), torch.tensor([3]), torch.tensor([0, 8]))
        >>> r.tolist(), [round(x, 4) for x in c.tolist()]
        ([0.5], [1.0, 0.3333])
    """
    return model_stage_class(model).node_scales(row_in_degree, col_out_degree)


def with_self_loops(model: "ModelStage | type[ModelStage]", src: torch.Tensor, dst: torch.Tensor, ids: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(src, dst)`` with a self-loop on each of ``ids`` appended where the model stage's ``Â`` has them
    (:attr:`ModelStage.self_loops`), else unchanged.

    Example:
        >>> s, d = with_self_loops(MODELS.build("gcn"), torch.tensor([1]), torch.tensor([0]), torch.arange(2))
        >>> s.tolist(), d.tolist(), with_self_loops(MODELS.build("sage"), s, d, torch.arange(2))[0].tolist()
        ([1, 0, 1], [0, 0, 1], [1, 0, 1])
    """
    if not model_stage_class(model).self_loops:
        return src, dst
    return torch.cat([src, ids]), torch.cat([dst, ids])


class SpMM(torch.autograd.Function):
    """``A @ H`` with a precomputed transpose for the backward pass (directed graphs included), through the
    one sparse kernel of every program (:func:`workbench.train.kernels.spmm`)."""

    @staticmethod
    def forward(ctx, a: torch.Tensor, a_t: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        ctx.a_t = a_t
        return spmm(a, h)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return None, None, spmm(ctx.a_t, grad)


def sparse_aggregator(rows: torch.Tensor, cols: torch.Tensor, weights: torch.Tensor,
                      shape: tuple[int, int], device: Optional[torch.device] = None,
                      scales: Optional[tuple[torch.Tensor, torch.Tensor]] = None, kernel: str = "auto"
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(A, A^T)`` as CSR tensors on ``device`` from COO triplets (repeated entries add up in every product).

    On CPU with the compiled kernel this is :func:`workbench.train.kernels.csr_pair` (a counting sort:
    seconds less per rank on a 4M-edge part than coalescing); otherwise (or for a ``device`` other than
    the CPU, where cuSPARSE gets sorted rows) coalesced COO to CSR. ``scales`` (:func:`node_scales`): the
    weights factor, so the CPU may use an unweighted kernel (:mod:`workbench.train.kernels`). ``kernel``: the
    run's ``train.kernel``, recorded on both matrices."""
    target = torch.device(device) if device is not None else rows.device
    if target.type == "cpu" and rows.device.type == "cpu" and spmm_kernel("cpu", choice=kernel) in ("numba", "dgl"):
        return csr_pair(rows, cols, weights.to(torch.float32), shape, scales=scales, kernel=kernel)
    with warnings.catch_warnings():  # "sparse CSR support is in beta": the ops used here are stable
        warnings.simplefilter("ignore", UserWarning)
        a = torch.sparse_coo_tensor(torch.stack([rows, cols]), weights, shape).coalesce().to_sparse_csr()
        a_t = torch.sparse_coo_tensor(torch.stack([cols, rows]), weights,
                                      (shape[1], shape[0])).coalesce().to_sparse_csr()
    return set_kernel(a.to(target), kernel), set_kernel(a_t.to(target), kernel)


# --------------------------------------------------------------------------------------------------------
# The model stage
# --------------------------------------------------------------------------------------------------------

MODELS = registry("model")
"""The ``model`` stage registry: ``gcn`` and ``sage`` (``--set model.method=sage``)."""


class ModelStage(Stage):
    """Base of the model stage: the dense part of a GNN (its weights), built once per rank.

    Example:
        >>> MODELS.build("sage", hidden=8).build(in_dim=4, out_dim=3, seed=0).input_widths
        [4, 8]
    """

    kind = "model"
    self_loops: bool = False
    """Whether ``Â`` has a self-loop on every vertex (GCN's ``A + I``)."""
    self_transform: bool = False
    """Whether a layer adds a transform of the vertex's own row (GraphSAGE's ``H W_self``)."""

    @staticmethod
    def edge_weights(dst_in_degree: torch.Tensor, src_out_degree: torch.Tensor) -> torch.Tensor:
        """The weight of each edge of ``Â`` from its endpoints' GLOBAL degrees (without self-loops)."""
        raise NotImplementedError

    @staticmethod
    def node_scales(row_in_degree: torch.Tensor, col_out_degree: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(r, c)`` with ``edge_weights == r[dst] * c[src]``: the factors of ``Â``'s rows and columns."""
        raise NotImplementedError

    @dataclasses.dataclass(kw_only=True)
    class Config(Stage.Config):
        field_requires: ClassVar[dict[str, frozenset[str]]] = {"dropout": frozenset({"whole-part logits"})}
        """``dropout`` is read by whole-part forwards only (full-graph and edge-sampled training): set under
        mini-batch training or model averaging, whose blocks run without it, it is refused rather than ignored."""

        hidden: Annotated[int, Interval(1, None)] = 16
        """Hidden width."""
        num_layers: Annotated[int, Interval(1, 4)] = 2
        """Number of GNN layers (1 to 4)."""
        dropout: Annotated[float, Interval(0, 1, closed="left")] = 0.0
        """Dropout probability on every layer's input while training (full-graph; masks keyed by global vertex id)."""
        init: Annotated[str, Options(*INITS)] = "uniform"
        """Weight initialisation: uniform (nn.Linear's default) or glorot (Xavier-uniform, zero bias)."""
        order: Annotated[str, Options(*LAYER_ORDERS)] = "auto"
        """Layer order: ``auto`` (transform first where the output is narrower, as DGL; on a mini-batch's blocks
        the first layer aggregates first unless its input is over twice as wide: :func:`block_transform_first`)
        or ``aggregate-first`` (the papers' printed order; changes the exchanged width, not the result)."""

    def input_widths(self, in_dim: int) -> list[int]:
        """Width of each layer's input (the rows an exchange moves for that layer)."""
        return [in_dim] + [self.config.hidden] * (self.config.num_layers - 1)

    def transform_first(self, in_dim: int, out_dim: int, pinned: frozenset = frozenset()) -> list[bool]:
        """Per layer: whether it transforms before aggregating (see :func:`transform_first`)."""
        return transform_first(self.input_widths(in_dim) + [out_dim], self.config.order, pinned)

    def exchange_widths(self, in_dim: int, out_dim: int, pinned: frozenset = frozenset()) -> list[int]:
        """Width of the rows an exchange moves for each layer (forward).

        Example:
            >>> MODELS.build("gcn", hidden=8).exchange_widths(16, 3)
            [8, 3]
            >>> MODELS.build("gcn", hidden=8, order="aggregate-first").exchange_widths(16, 3)
            [16, 8]
        """
        dims = self.input_widths(in_dim) + [out_dim]
        return [dims[i + 1] if t else dims[i] for i, t in enumerate(self.transform_first(in_dim, out_dim, pinned))]

    def backward_widths(self, in_dim: int, out_dim: int, pinned: frozenset = frozenset()) -> list[int]:
        """Width of the gradients an exchange sends back for each layer (0: none)."""
        return backward_widths(self.exchange_widths(in_dim, out_dim, pinned),
                               self.transform_first(in_dim, out_dim, pinned))

    def build(self, *, in_dim: int, out_dim: int, seed: int, pinned: frozenset = frozenset()) -> GNNModel:
        """The model, initialised from ``seed`` (identical replicas on every rank); ``pinned`` layers stay
        aggregate-first."""
        return GNNModel(self, in_dim=in_dim, hidden=self.config.hidden, out_dim=out_dim,
                        num_layers=self.config.num_layers, seed=seed, dropout=self.config.dropout,
                        init=self.config.init, order=self.config.order, pinned=pinned)


@MODELS.register
class GCN(ModelStage):
    """GCN (Kipf & Welling): ``Â = D̄_in^{-1/2}(A + I)D̄_out^{-1/2}`` with ``D̄ = D + I``, one weight per layer."""

    name = "gcn"
    self_loops = True

    @staticmethod
    def edge_weights(dst_in_degree: torch.Tensor, src_out_degree: torch.Tensor) -> torch.Tensor:
        return torch.rsqrt(dst_in_degree.to(torch.float32) + 1.0) * torch.rsqrt(src_out_degree.to(torch.float32) + 1.0)

    @staticmethod
    def node_scales(row_in_degree: torch.Tensor, col_out_degree: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.rsqrt(row_in_degree.to(torch.float32) + 1.0), torch.rsqrt(col_out_degree.to(torch.float32) + 1.0)

    @dataclasses.dataclass(kw_only=True)
    class Config(ModelStage.Config):
        pass


@MODELS.register
class GraphSAGE(ModelStage):
    """GraphSAGE-mean: ``Z = H W_self + mean_N(H) W_neigh`` (``Â = D_in^{-1} A``; no in-neighbour: 0)."""

    name = "sage"
    self_transform = True

    @staticmethod
    def edge_weights(dst_in_degree: torch.Tensor, src_out_degree: torch.Tensor) -> torch.Tensor:
        return 1.0 / dst_in_degree.to(torch.float32).clamp_min(1.0)

    @staticmethod
    def node_scales(row_in_degree: torch.Tensor, col_out_degree: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return 1.0 / row_in_degree.to(torch.float32).clamp_min(1.0), torch.ones(len(col_out_degree))

    @dataclasses.dataclass(kw_only=True)
    class Config(ModelStage.Config):
        pass
