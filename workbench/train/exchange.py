"""The exchange stage: how a full-graph rank gets the neighbour rows of every layer, and their gradients back.

An exchange method is one :class:`Exchange` subclass registered in :data:`EXCHANGES`
(``registry("exchange")``): ``halo`` (owner-compute point-to-point halo exchange,
:class:`workbench.train.full_graph.OwnerComputeHalo`) and ``block_row`` (CAGNET 1-D broadcasts,
:class:`workbench.train.block_row.BlockRowBroadcast`). It has two verbs:

* :meth:`Exchange.layout` on the client: cut the partitioned graph into one payload per rank, with the
  bytes one exact epoch moves (``predicted``) and what one root's piece costs (``root_rows``);
* :meth:`Exchange.attach` on a rank: a :class:`RankExchange` whose ``aggregate(h, layer)`` returns
  ``Â H`` for the owned rows (autograd sends the gradients back), used as the model's aggregation.

Staleness is a policy of *every* exchange (``staleness``, ``epsilon``, ... in :class:`Exchange.Config`;
:mod:`workbench.train.staleness`): the exchange sends through the policy's communicator wrapper and
calls the policy right before each layer, so a new exchange method gets SANCUS's bounds for free.

Example:
    >>> {"block_row", "halo"} <= set(EXCHANGES)   # and every other registered exchange (``prefetch``, ...)
    True
    >>> EXCHANGES.build("halo", staleness="epoch-fixed", epsilon=1).config.epsilon
    1.0
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Optional

import torch

from workbench._validation import ErrorCollector
from workbench.constraints import Interval, OneOf, Options
from workbench.graph import Graph
from workbench.stages import Stage, registry
from workbench.train.staleness import GAP_NORMS, SKIP_TARGETS, STALENESS_RULES, StalenessPolicy
from workbench.train.timing import PhaseTimer

if TYPE_CHECKING:
    from workbench.train.models import ModelStage

__all__ = ["EXCHANGES", "Exchange", "ExchangeLayout", "RankExchange"]

EXCHANGES = registry("exchange")
"""The ``exchange`` stage registry."""


@dataclasses.dataclass(eq=False)
class ExchangeLayout:
    """What :meth:`Exchange.layout` returns.

    Attributes:
        shards: one picklable payload per rank (with ``data``: its rows' features/labels/masks,
            ``num_train_global``, ``num_classes``).
        predicted: bytes of one exact epoch per traffic kind, and ``total``.
        root_rows: ``(world_size,)`` rows x links of one root's forward piece per unit width.
        backward_rows: the same for its backward piece.
        halo_sizes: rows each rank receives per layer (the partition event's halo sizes).
    """

    shards: list
    predicted: dict
    root_rows: list[int]
    backward_rows: list[int]
    halo_sizes: list[int]


class Exchange(Stage):
    """Base of an exchange method (see the module docstring)."""

    kind = "exchange"
    requires = frozenset({"embedding exchange"})
    forward_kind: ClassVar[str] = ""
    """Traffic kind of the forward pieces (embedding rows)."""
    backward_kind: ClassVar[str] = ""
    """Traffic kind of the backward pieces (their gradients)."""

    @dataclasses.dataclass(kw_only=True)
    class Config(Stage.Config):
        staleness: Annotated[str, Options("none", STALENESS_RULES)] = "none"
        """``none`` (exact), ``epoch-fixed`` (ε_E), ``epoch-adaptive`` (ε_A) or ``variation-gap`` (ε_H)."""
        epsilon: Annotated[float, Interval(0, None)] = 1.0
        """Staleness bound: epochs for epoch-fixed/adaptive (a whole number), the relative gap for variation-gap
        (with ``staleness=none``: 0 or the default; another value would be ignored, so it is refused)."""
        pin_static_input: bool = False
        """Send the first layer's remote input rows once and never again (the features never change):
        a cache of every remote input row, filled in the first epoch; layer 0 then aggregates first. Works
        with any staleness policy, ``none`` included."""
        gap_norm: Annotated[str, Options(*GAP_NORMS)] = "relative"
        """Variation gap: ``relative`` Frobenius norm ‖H−H̃‖/‖H̃‖ or ``mean_abs`` mean |H−H̃| (the paper names
        no norm). Every staleness policy reports the gap; ``variation-gap`` also decides by it."""
        max_skip: Annotated[Optional[int], OneOf(None, Interval(0, None))] = None
        """variation-gap only: send at the latest after this many skipped epochs (None = no cap)."""
        stagger: bool = True
        """epoch-adaptive only: stagger the roots' first bounds (in a lock-step run ε_A otherwise equals ε_E)."""
        skip: Annotated[str, Options(*SKIP_TARGETS)] = "embeddings"
        """What stale copies replace: ``embeddings`` (SANCUS: forward rows) or ``gradients`` (the SkipG
        baseline: backward rows, with the epoch-fixed bound; the paper only names SkipG)."""

        def _validate(self, errs: ErrorCollector) -> None:
            if getattr(STALENESS_RULES.get(self.staleness), "whole_epochs", False):
                errs.check(float(self.epsilon).is_integer(), "epsilon",
                           f"a whole number of epochs >= 0 for staleness={self.staleness!r}", self.epsilon)
            # options one policy reads, refused under another rather than ignored
            if self.staleness == "none":   # exact: no bound, no gap (0 is the bound that means the same)
                errs.check(self.epsilon in (0.0, 1.0), "epsilon",
                           "0 or its default 1 with staleness='none' (the bound of a staleness policy)", self.epsilon)
                errs.check(self.gap_norm == "relative", "gap_norm",
                           "its default 'relative' with staleness='none' (the gap a staleness policy reports)",
                           self.gap_norm)
            errs.check(self.max_skip is None or self.staleness == "variation-gap", "max_skip",
                       f"None with staleness={self.staleness!r} (a cap of staleness='variation-gap')", self.max_skip)
            errs.check(self.stagger or self.staleness == "epoch-adaptive", "stagger",
                       f"True with staleness={self.staleness!r} (an option of staleness='epoch-adaptive')",
                       self.stagger)
            if self.skip == "gradients":  # the paper only names SkipG: defined here with the epoch bound
                errs.check(self.staleness in ("none", "epoch-fixed"), "staleness",
                           "'none' or 'epoch-fixed' with skip='gradients' (SkipG bounds gradient age in epochs)",
                           self.staleness)

    # -- client side ---------------------------------------------------------------------------------------
    def layout(self, graph: Graph, node_part: torch.Tensor, num_parts: int, model: ModelStage,
               input_widths: list[int], backward_widths: Optional[list[int]] = None) -> ExchangeLayout:
        """Cut the partitioned graph into per-rank payloads (vectorised).

        ``model`` is the run's model stage (a :class:`~workbench.train.models.ModelStage`, or its class): the
        shards hold its ``Â`` (:func:`~workbench.train.models.edge_weights`, its self-loops and node scales).
        ``input_widths`` are the widths of the rows exchanged per layer (the model's ``exchange_widths``),
        ``backward_widths`` those of their gradients (None: ``[0, *input_widths[1:]]``)."""
        raise NotImplementedError

    def part_layout(self, part_sizes: list[int], comm_rows: Any, input_widths: list[int],
                    backward_widths: Optional[list[int]] = None) -> Optional[ExchangeLayout]:
        """The layout (no shards) of a partition whose ranks read their own parts, from the parts' owned vertices
        and the ``(P, P)`` rows part ``p`` sends part ``q`` per layer (a partition folder's manifest); the ranks
        then build their shards with :meth:`shard_from_part`. ``None`` (the default): this exchange cuts its
        shards from the whole graph on the client (:meth:`layout`)."""
        return None

    def shard_from_part(self, ref: Any, comm: Any) -> Any:
        """The rank's shard of ``ref``'s part (a :class:`~workbench.train.part_source.PartRef`), built on the
        rank with ``comm`` (where :meth:`part_layout` gives a layout)."""
        raise NotImplementedError

    def pinned_layers(self, num_layers: int) -> frozenset:
        """Layers the model must compute aggregate-first for this exchange: layer 0 with
        ``pin_static_input`` (only the features themselves never change)."""
        return frozenset({0}) if self.config.pin_static_input else frozenset()

    # -- rank side -----------------------------------------------------------------------------------------
    def policy(self) -> StalenessPolicy:
        return StalenessPolicy(self.config, self.forward_kind, self.backward_kind)

    def attach(self, ctx, shard: Any) -> "RankExchange":
        """The rank's exchange for ``shard`` (tensors moved to ``ctx.device``)."""
        raise NotImplementedError


class RankExchange:
    """One rank's exchange: ``aggregate(h, layer)`` (the model's aggregation) plus training-loop hooks.

    Attributes:
        comm: the communicator the exchange (and the loop) uses: the rank's, or the staleness wrapper.
        policy: the :class:`StalenessPolicy` consulted before every layer.
        kinds: the traffic kinds reported as the exchange's bytes.
        timer: the rank's :class:`~workbench.train.timing.PhaseTimer` (``ctx.timer``, the loop's), on which an exchange may
            open finer phases (the prefetch exchange's edge sampling); its communication inside the forward and
            backward passes is counted as ``exchange`` without it.
    """

    fixed_aggregator: ClassVar[bool] = False
    """Whether the rank's ``Â`` is the same every epoch and its aggregation is :meth:`_exchange_rows` then
    :meth:`_multiply` (the halo exchange; not sampled edges): then the rank keeps the first layer's aggregate of the
    features (:meth:`aggregate`)."""

    def __init__(self, ctx, policy: StalenessPolicy, kinds: tuple[str, ...]):
        self.ctx = ctx
        self.policy = policy
        self.comm = policy.wrap(ctx.comm)
        self.kinds = kinds
        self.epoch = 0
        self.timer = ctx.timer if getattr(ctx, "timer", None) is not None else PhaseTimer()
        self.evaluating = False
        self._kept_first: Optional[tuple] = None

    def evaluation_logits(self, model: Any, x: torch.Tensor) -> Optional[torch.Tensor]:
        """Logits of the owned rows for the epoch's accuracies when this exchange evaluates its own way (the
        ``prefetch`` exchange: the whole graph with current boundary rows, ``exchange.full_eval``); None: the
        steps' own evaluation."""
        return None

    def epoch_events(self, epoch: int) -> list:
        """This exchange's events of the epoch just evaluated (the ``prefetch`` exchange's cache, sample and
        pipeline-cost events), logged by the steps after the epoch's ``EpochEnd``. Default: none."""
        return []

    def aggregate(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """``(num_owned, F)`` = ``Â H`` of the owned rows; the policy agrees this layer's flags first (not in
        an :meth:`evaluation` pass)."""
        if not self.evaluating:
            self.before_layer(h, layer)
            self.policy.before_layer(self.comm, self.ctx, layer, self.epoch, h)
        if layer == 0 and self.fixed_aggregator and not h.requires_grad:
            return self._first_aggregate(h)
        return self._aggregate(h, layer)

    def _first_aggregate(self, h: torch.Tensor) -> torch.Tensor:
        """``Â [X; X_halo]``, multiplied once while layer 0 is given the same unchanged features tensor and kept.

        Layer 0 of an aggregate-first model without dropout reads ``X`` itself on every rank, so every row it
        aggregates (owned, received fresh, or a stale or pinned copy: they are all rows of ``X``) is the same every
        epoch, and so is the product: exact. The rows are still exchanged every epoch, as the program sends them
        (their traffic and the staleness policy's bookkeeping are unchanged); only the product is not computed
        again. A transform-first layer (``h = X W`` needs a gradient), dropout (a new tensor every epoch) and an
        in-place change of the features (its version) multiply again; what a training forward multiplied is kept."""
        rows = self._exchange_rows(h, 0)
        kept = self._kept_first
        if kept is not None and kept[0] is h and kept[1] == h._version:
            return kept[2]
        out = self._multiply(rows, 0)
        if torch.is_grad_enabled():   # a training forward (an evaluation's may transform first under no_grad)
            self._kept_first = (h, h._version, out)
        return out

    def _exchange_rows(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """The rows layer ``layer`` aggregates (owned, then received), where :attr:`fixed_aggregator`."""
        raise NotImplementedError

    def _multiply(self, rows: torch.Tensor, layer: int) -> torch.Tensor:
        """``Â rows``, where :attr:`fixed_aggregator`."""
        raise NotImplementedError

    @contextlib.contextmanager
    def evaluation(self):
        """An evaluation forward pass: every block fresh and every round executed (the staleness policy is
        not consulted; its cache, versions, flags and events stay as training left them), the traffic counted
        under ``eval_`` kinds, apart from the training epoch's."""
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.ctx.comm.phase("eval_"))
            if self.comm is not self.ctx.comm:          # the staleness wrapper counts its own verbs
                stack.enter_context(self.comm.phase("eval_"))
                stack.enter_context(self.comm.fresh())
            self.evaluating = True
            try:
                yield self
            finally:
                self.evaluating = False

    def before_layer(self, h: torch.Tensor, layer: int) -> None:
        """Called before the policy, e.g. to keep a layer's input for a weight-gradient form."""

    def _aggregate(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        raise NotImplementedError

    def setup_model(self, model) -> None:
        """Called once after the model is built."""

    def after_backward(self, model) -> None:
        """Called after ``loss.backward()``, before the gradient all-reduce."""

    def rank_fragments(self) -> dict[str, dict]:
        """This exchange's fragments of the rank's result: ``staleness`` (the policy's agreed rounds, ages and
        cache: :meth:`StalenessPolicy.result`) when a staleness policy is on, else none."""
        return {"staleness": self.policy.result(self.comm)} if self.policy.active else {}
