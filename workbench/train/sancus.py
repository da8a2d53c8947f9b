"""SANCUS: staleness-aware communication-avoiding full-graph training (Peng et al., VLDB 2022).

SANCUS runs CAGNET-style 1-D block-row training (:mod:`workbench.train.block_row`) and *skips*
broadcast rounds whose root's block has not gone too stale: the other ranks reuse their historical
copy (a cache of other ranks' blocks with version stamps). Here SANCUS is a composition: the
``block_row`` exchange with a staleness policy (:mod:`workbench.train.staleness`), whose skipping is a
communicator wrapping the rank's communicator
(:class:`~workbench.communicate.skip_broadcast.SkipBroadcastCommunicator`), so the training code is the
baseline's, unchanged, and the same policy applies to the ``halo`` exchange. Algorithm 3, with what it
leaves open decided below.

Staleness bounds (``staleness``; the paper's §4.3.5):

* ``none``: the CAGNET baseline, every round executed (no wrapper at all).
* ``epoch-fixed`` (ε_E, Alg. 4): root ``j``'s block of layer ``l`` is broadcast when
  ``epoch - version(l, j) > ε``: a period of ``ε + 1`` epochs, age used ``<= ε``.
* ``epoch-adaptive`` (ε_A, Alg. 5): every receiver asks for ``j`` when its copy is older than ``ε``;
  the flags are OR-ed. In a lock-step BSP run this equals epoch-fixed, so (decision D8) roots start
  *staggered*: root ``j``'s first bound is ``ε - (j mod (ε + 1))``, spreading the broadcasts of the
  ranks over the epochs (the irregular pattern of the paper's Fig. 24(a)); ``stagger=False`` disables it.
* ``variation-gap`` (ε_H, Alg. 6): the owner broadcasts when the relative Frobenius gap
  ``||H_i - H̃_i||_F / ||H̃_i||_F`` between its block and the copy the others hold exceeds ε (decision
  D6: relative norm by default, ``gap_norm="mean_abs"`` for the mean absolute difference; ``max_skip``
  is an optional cap on consecutive skipped epochs).

Decisions (the paper leaves these open; D6 and D8 are above):

* **D1** flags are per (layer, root) and checked *right before* that layer's broadcast rounds in the
  same epoch, so the age of a block used never exceeds ε for epoch-fixed/adaptive (Def. 1 literally;
  the printed "check after compute" would allow ε + 1).
* **D2** a rank always uses its own block fresh; only other ranks' blocks can be stale.
* **D3** flags are agreed by one all-gather of ``p`` booleans per layer and epoch (kind ``control``,
  ``p (p - 1)`` bytes per rank), ACTIVE where any rank asks; every never-broadcast block is ACTIVE.
  All ranks thus execute the same rounds (no deadlock), for every policy, including the local ε_H.
* **D4** ``weight_grad="exact"`` (default): ``∇W = Σ_i T_iᵀ δ_i``, the exact gradient of the (stale)
  forward computed, needing no layer-1 backward broadcast. ``"cagnet"``: ``Σ_i H_iᵀ (Âᵀ δ)_i``, which
  broadcasts every ``δ_j`` at every layer (kind ``bcast_bwd``) and differs once staleness is present.
* **D5** ``pin_static_input``: the first layer's input X never changes, so after its first broadcast
  it is never sent again (age reported as 0). Off by default (faithful to Def. 1).
* **D7** gradients are never skipped. ``clip_threshold`` clips the local gradient block before its
  broadcast at ``th_i = √p · th`` (``clip_scaling="sqrt_p"``, the printed rule and the default) or
  ``th / √p`` (``"inv_sqrt_p"``, what the variance argument of §4.3.2 actually implies: local
  norms ≈ σ against a global ≈ √p σ).

* **D9** SkipG, the paper's bounded-*gradient*-staleness baseline, is only named ("bounded gradient
  staleness", citing [59]). Here ``skip="gradients"`` applies the epoch-fixed bound to the backward
  broadcasts instead: root ``j``'s ``δ_j = dL/dT_j`` of a layer is broadcast every ``ε + 1`` epochs and
  the other ranks reuse their cached copy in between (age ``<= ε``); forward blocks are always fresh.
  Flags are agreed as in D3, right before the layer's forward rounds, and hold for its backward rounds in
  the same epoch. The first layer's backward is never broadcast (its input X needs no gradient), so
  SkipG saves on layers 2 and up only; its ``Staleness`` events describe the gradient blocks.

Every (rank, layer, epoch) emits a ``Staleness`` event: the rank's own flag, the age of each block it
used and its variation gap.

Example:
    >>> from workbench.compose import RunConfig
    >>> cfg = RunConfig.compose(graph="karate", num_parts=2, epochs=4,
    ...                         exchange={"method": "block_row", "staleness": "epoch-fixed", "epsilon": 1})
    >>> cfg.method("exchange"), cfg.exchange.staleness
    ('block_row', 'epoch-fixed')
"""

from __future__ import annotations

from workbench.events import Staleness
from workbench.train.staleness import GAP_NORMS, STALENESS_POLICIES, variation_gap

__all__ = ["STALENESS_POLICIES", "GAP_NORMS", "variation_gap", "staleness_table", "compare_runs"]


def staleness_table(events, *, value: str = "state"):
    """A (rank, layer) x epoch table of ``Staleness`` events: ``state`` (A/S), ``max_age`` or ``gap``.

    Example:
        >>> from workbench.events import Staleness
        >>> staleness_table([Staleness(rank=0, layer=0, epoch=0, state="STALE", ages=[0, 1])]).iloc[0, 0]
        'S'
    """
    import pandas as pd

    rows = []
    for e in events:
        if isinstance(e, Staleness):
            v = {"state": e.state[0], "max_age": max(e.ages, default=0), "gap": e.gap}[value]
            rows.append({"rank": e.rank, "layer": e.layer, "epoch": e.epoch, value: v})
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows).drop_duplicates(["rank", "layer", "epoch"], keep="last")
    return frame.pivot(index=["rank", "layer"], columns="epoch", values=value)


def compare_runs(summaries: dict, baseline: str):
    """One row per run: broadcast bytes, communication saved against ``baseline`` and accuracy gap.

    Args:
        summaries: run name -> summary of a SANCUS / block-row run.
        baseline: the name of the CAGNET run (staleness ``none``).
    """
    import pandas as pd

    base = summaries[baseline]
    base_bytes = sum(base["bytes_by_epoch"])
    rows = []
    for name, s in summaries.items():
        moved = sum(s["bytes_by_epoch"])
        rows.append({"run": name, "broadcast_MB": moved / 1e6,
                     "comm_saved": 1.0 - moved / base_bytes if base_bytes else 0.0,
                     "skipped_rounds": s.get("broadcasts_skipped", 0), "max_age": s.get("max_age", 0),
                     "test_acc": s["accuracy"]["test"],
                     "acc_gap": s["accuracy"]["test"] - base["accuracy"]["test"],
                     "final_loss": s["losses"][-1]})
    return pd.DataFrame(rows).set_index("run")
