"""Bounded staleness as an exchange policy: SANCUS's ε_E / ε_A / ε_H and SkipG for ANY exchange that sends
embeddings (CAGNET block-row broadcasts, owner-compute halo exchange).

An exchange moves, per layer, one *block* from every sending rank (its *root* role): the rank's rows of
``H`` (broadcast to all, or the rows each peer needs as halo) forward, the gradients of what it received
backward. A policy decides, right before each layer's exchange, which roots are ACTIVE this epoch; a
STALE root sends nothing of the skipped kind and every receiver reuses its cached copy of what that root
last sent it (:class:`~workbench.communicate.skip_broadcast.SkipBroadcastCommunicator`, which skips
``broadcast`` rounds and ``all_to_all`` pieces alike). The SANCUS decisions (written out in
:mod:`workbench.train.sancus`) hold for every exchange:

* **D1** flags per (layer, root), checked right before that layer's exchange (age <= ε);
* **D2** a rank's own block is always fresh;
* **D3** flags are agreed with one all-gather of ``world_size`` booleans per layer (kind ``control``),
  ACTIVE where any rank asks, and ACTIVE wherever no copy was ever sent: every rank takes the same
  decision, so no exchange can deadlock;
* **D7** gradients are never skipped (``skip="embeddings"``); **D9** ``skip="gradients"`` (SkipG) skips
  the backward pieces instead, with the epoch-fixed bound;
* ε_A's roots start staggered (**D8**), ε_H compares the owner's block with the copy last sent (**D6**).

Halo exchange, decided here (the papers only define broadcasts):

* **H1** the root of a halo piece is its *sender*: the owner of the rows forward, the rank that holds
  them as halo backward. One flag per (layer, sender) covers the pieces it sends to every peer, so a
  halo run has exactly the flags of a block-row run with the same ranks.
* **H2** a receiver's cached copy is the rows that sender last sent *it* (its halo slice); a STALE
  sender's rows of every peer are reused together, so every halo row used at layer ``l`` has age <= ε.
* **H3** the variation gap of a sender is measured on its whole owned block (as SANCUS), not only on
  the rows some peer holds.
* **H4** gradients of stale halo rows still travel back to their owners (gradients are never skipped):
  backward bytes are those of the exact run, and the halo rows' gradients are applied as if the rows were
  fresh (SANCUS does the same with its stale blocks).

Bytes stay exactly predictable: a root's piece of layer ``l`` costs ``root_rows[j] x width(l) x 4``
bytes (``root_rows`` from the exchange's layout), so an epoch's bytes are the sum over its ACTIVE roots
(:func:`predicted_bytes_by_epoch`); epoch-fixed's flags are known in advance (:func:`epoch_fixed_flags`).

Example:
    >>> epoch_fixed_flags(epochs=3, num_layers=1, world_size=2, epsilon=1)
    [[[True, True]], [[False, False]], [[True, True]]]
    >>> predicted_bytes_by_epoch([[[True, False]]], root_rows=[10, 20], widths=[4])
    [160]
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, Sequence

import torch

from workbench.events import Staleness

__all__ = ["STALENESS_POLICIES", "STALENESS_RULES", "staleness_rule", "SKIP_TARGETS", "GAP_NORMS",
           "StalenessPolicy", "variation_gap", "epoch_fixed_flags", "predicted_bytes_by_epoch"]

SKIP_TARGETS = ("embeddings", "gradients")
GAP_NORMS = ("relative", "mean_abs")

STALENESS_RULES: dict[str, Callable[..., bool]] = {}
"""Staleness bound -> its proposal rule ``rule(policy, comm, layer, root, age, gap) -> bool`` (ask for
``root``'s block of ``layer`` to be sent this epoch). ``none`` (always exact) has no rule."""


def staleness_rule(name: str, *, whole_epochs: bool = False):
    """Decorator registering a staleness bound: a new bound is one proposal function (flags are then agreed,
    cached, aged, counted and predicted by the machinery here). ``whole_epochs``: ε counts epochs."""
    def register(fn: Callable[..., bool]) -> Callable[..., bool]:
        fn.whole_epochs = whole_epochs
        STALENESS_RULES[name] = fn
        return fn
    return register


@staleness_rule("epoch-fixed", whole_epochs=True)
def _epoch_fixed(policy, comm, layer, root, age, gap) -> bool:
    """ε_E (Alg. 4): a block older than ε epochs is sent."""
    return age is None or age > policy.config.epsilon


@staleness_rule("epoch-adaptive", whole_epochs=True)
def _epoch_adaptive(policy, comm, layer, root, age, gap) -> bool:
    """ε_A (Alg. 5): receivers ask for blocks older than their bound; roots start staggered (in lock-step
    BSP all receivers agree, so without a stagger ε_A would equal ε_E)."""
    c, bound = policy.config, policy.config.epsilon
    if c.stagger and age is not None and comm.versions[(layer, root)] == policy.log.first_version.get((layer, root)):
        bound = c.epsilon - (root % (int(c.epsilon) + 1))
    return age is None or age > bound


@staleness_rule("variation-gap")
def _variation_gap(policy, comm, layer, root, age, gap) -> bool:
    """ε_H (Alg. 6): only the owner knows its gap; it sends when the gap exceeds ε (or the skip cap is hit)."""
    if root != comm.rank:
        return False
    c = policy.config
    over_cap = c.max_skip is not None and age is not None and age > c.max_skip
    return gap is None or gap > c.epsilon or over_cap


STALENESS_POLICIES = ("none", *STALENESS_RULES)


def variation_gap(h: torch.Tensor, sent: Optional[torch.Tensor], norm: str = "relative") -> Optional[float]:
    """Gap between a rank's current block and the copy the others hold (None if never sent)."""
    if sent is None or sent.shape != h.shape:
        return None
    diff = h.detach() - sent
    if norm == "mean_abs":
        return float(diff.abs().mean()) if diff.numel() else 0.0
    ref = float(sent.norm())
    return float(diff.norm()) / ref if ref > 0 else float(diff.norm() > 0)


@dataclasses.dataclass
class _RankLog:
    """Per-rank policy state that is not the cache: first versions (stagger), flag history, sent blocks."""

    first_version: dict = dataclasses.field(default_factory=dict)
    flags: dict = dataclasses.field(default_factory=dict)       # (epoch, layer) -> list[bool] (ACTIVE)
    max_age: int = 0
    sent: dict = dataclasses.field(default_factory=dict)        # layer -> own block as last sent (gap reference)


class StalenessPolicy:
    """The staleness decisions of one rank for an exchange (see the module docstring).

    Args:
        config: the exchange's config (fields ``staleness``, ``epsilon``, ``pin_static_input``, ``gap_norm``,
            ``max_skip``, ``stagger``, ``skip``).
        forward_kind, backward_kind: the exchange's traffic kinds (``bcast_fwd``/``bcast_bwd``,
            ``halo_fwd``/``halo_bwd``); ``skip`` picks which one may be skipped.
    """

    def __init__(self, config: Any, forward_kind: str, backward_kind: str):
        self.config = config
        self.skip_kind = forward_kind if config.skip == "embeddings" else backward_kind
        self.log = _RankLog()

    @property
    def active(self) -> bool:
        """Whether the exchange skips anything: a staleness rule, or ``pin_static_input`` alone (the first
        layer's input rows sent once, every other layer every epoch)."""
        return self.config.staleness != "none" or bool(self.config.pin_static_input)

    def wrap(self, comm):
        """The communicator the exchange sends through: a skipping wrapper, or ``comm`` itself for ``none``."""
        if not self.active:
            return comm
        from workbench.communicate.skip_broadcast import SkipBroadcastCommunicator

        return SkipBroadcastCommunicator(comm, skip_kinds=(self.skip_kind,))

    def _proposals(self, comm, layer: int, gap: Optional[float]) -> torch.Tensor:
        if self.config.staleness == "none":   # pin_static_input alone: every root sends every other layer
            return torch.ones(comm.world_size, dtype=torch.bool)
        rule = STALENESS_RULES[self.config.staleness]
        return torch.tensor([bool(rule(self, comm, layer, j, comm.age(layer, j), gap))
                             for j in range(comm.world_size)], dtype=torch.bool)

    def before_layer(self, comm, ctx, layer: int, epoch: int, h: torch.Tensor) -> list[bool]:
        """Agree this layer's ACTIVE roots (D1, D3) and emit the rank's ``Staleness`` event; returns the flags."""
        c, p, me, log = self.config, ctx.world_size, ctx.rank, self.log
        pinned = c.pin_static_input and layer == 0
        if not self.active:
            flags, gap = [True] * p, None
        else:
            gap = (0.0 if pinned else variation_gap(h, log.sent.get(layer), c.gap_norm)
                   if c.skip == "embeddings" else None)  # SkipG: the cache holds gradients, no embedding gap
            prop = torch.zeros(p, dtype=torch.bool) if pinned else self._proposals(comm, layer, gap)
            flags = comm.agree(layer, prop)
            for j in range(p):
                if flags[j] and (layer, j) not in log.first_version:
                    log.first_version[(layer, j)] = epoch
            if flags[me] and c.skip == "embeddings":
                log.sent[layer] = h.detach().clone()   # what the others hold of this rank's block from now on
        ages = [0 if (j == me or flags[j] or pinned or not self.active) else int(comm.age(layer, j))
                for j in range(p)]
        log.max_age = max(log.max_age, max(ages))
        log.flags[(epoch, layer)] = list(flags)
        ctx.log(Staleness(rank=me, layer=layer, epoch=epoch, state="ACTIVE" if flags[me] else "STALE",
                          ages=ages, gap=gap))
        return flags

    def flags_by_epoch(self) -> list[list[list[bool]]]:
        """``[epoch][layer][root]`` agreed flags (True = ACTIVE), identical on every rank."""
        epochs = sorted({e for e, _ in self.log.flags})
        layers = sorted({l for _, l in self.log.flags})
        return [[self.log.flags[(e, l)] for l in layers] for e in epochs]

    def result(self, comm) -> dict:
        """The rank's staleness figures: ``broadcast_skipped`` ``[epoch][layer][root]``, ``max_age``, ``cache_bytes``."""
        skipped = [[[not f for f in flags] for flags in layers] for layers in self.flags_by_epoch()]
        cache = comm.cache.nbytes() if hasattr(comm, "cache") else 0
        return {"broadcast_skipped": skipped, "max_age": self.log.max_age, "cache_bytes": cache}


def epoch_fixed_flags(epochs: int, num_layers: int, world_size: int, epsilon: float,
                      pin_static_input: bool = False) -> list[list[list[bool]]]:
    """The agreed flags of an epoch-fixed run, known in advance: every root ACTIVE when ``epoch % (ε+1) == 0``."""
    period = int(epsilon) + 1
    out = []
    for e in range(epochs):
        layers = []
        for l in range(num_layers):
            on = e == 0 if (pin_static_input and l == 0) else e % period == 0
            layers.append([on] * world_size)
        out.append(layers)
    return out


def predicted_bytes_by_epoch(flags: Sequence[Sequence[Sequence[bool]]], root_rows: Sequence[int],
                             widths: Sequence[int], *, skip: str = "embeddings",
                             backward_rows: Optional[Sequence[int]] = None, itemsize: int = 4,
                             backward_widths: Optional[Sequence[int]] = None) -> list[int]:
    """Exchange bytes of every epoch from the agreed flags.

    Args:
        flags: ``[epoch][layer][root]`` (True = ACTIVE).
        root_rows: rows x links one root's forward piece costs per unit width (halo: rows it sends to all
            peers; ring broadcast: ``(p - 1) x`` its block rows).
        widths: the width of the rows exchanged per layer (the model's ``exchange_widths``).
        skip: ``embeddings`` (flags gate the forward pieces) or ``gradients`` (the backward pieces).
        backward_rows: the same for the backward pieces (default ``root_rows``).
        backward_widths: the gradients' width per layer (default ``[0, *widths[1:]]``: an aggregate-first
            layer 0 sends none back).

    Returns:
        Bytes of each epoch (forward + backward).
    """
    bwd_rows = list(root_rows if backward_rows is None else backward_rows)
    bwd_widths = [0, *widths[1:]] if backward_widths is None else list(backward_widths)
    out = []
    for layers in flags:
        total = 0
        for l, roots in enumerate(layers):
            w, bw = widths[l] * itemsize, bwd_widths[l] * itemsize
            for j, on in enumerate(roots):
                total += (on or skip != "embeddings") * root_rows[j] * w
                total += (on or skip != "gradients") * bwd_rows[j] * bw
        out.append(int(total))
    return out
