"""SANCUS: staleness-aware communication-avoiding full-graph GCN training on CAGNET 1-D block rows.

Paper: J. Peng et al., "SANCUS: Staleness-Aware Communication-Avoiding Full-Graph Decentralized
Training in Large-Scale Graph Neural Networks", VLDB 2022 (Algorithms 3-6); baseline CAGNET (Tripathy,
Yelick, Buluç, SC 2020, 1-D algorithm).

Faithful: 1-D block-row layout (row blocks of ``Â`` and ``H`` per rank, replicated weights), one
ring-pipelined broadcast round per root and layer, skip-broadcast with a historical-embedding cache and
version stamps, the three staleness bounds (epoch-fixed ε_E, epoch-adaptive ε_A, variation-gap ε_H),
gradient broadcasts never skipped, all-reduced weight gradients, optional local gradient clipping.

Decided where the paper is silent (details in :mod:`workbench.train.sancus`): D1 per-layer flags checked
right before each layer's rounds (age <= ε); D2 own block always fresh; D3 flags agreed by a tiny
all-gather per layer (kind ``control``); D4 exact weight gradient ``T_iᵀδ_i`` by default; D5 static
input pinning off by default; D6 relative Frobenius gap; D7 clipping threshold √p·th as printed
(``clip_scaling="inv_sqrt_p"`` for the direction the variance argument implies); D8 staggered phases
make ε_A differ from ε_E in a lock-step run; D9 the SkipG baseline (:func:`skipg`) bounds the age of
*gradient* blocks in epochs, forward blocks always fresh (the paper names SkipG without defining it).

Composition: the ``full_graph`` recipe with the ``block_row`` exchange and a staleness policy, layers
pinned to the printed aggregate-then-transform order (``model.order="aggregate-first"``), so every
broadcast has the width of the layer's input as in the paper.

Accuracy is the model's: after each epoch's update, one more forward pass with every block fresh (every
broadcast round executed, the staleness cache and flags untouched; its traffic counted as ``eval_bcast_fwd``,
outside the training bytes; ``evaluate.fresh="always"``, so the CAGNET baseline is measured the same way),
as the paper's accuracy curves compare models, not stale forwards.

Simplified: CPU ranks instead of 8 GPUs, generated SBM graphs instead of Reddit/products, Adam.

Example:
    >>> from recipes.sancus import recipe, cagnet_baseline
    >>> recipe(staleness="variation-gap", epsilon=0.02).exchange.staleness
    'variation-gap'
    >>> cagnet_baseline().exchange.staleness
    'none'
    >>> skipg(2).exchange.skip, skipg(2).exchange.epsilon
    ('gradients', 2.0)
"""

from __future__ import annotations

from recipes import full_graph
from workbench.compose import RunConfig
from workbench.train import BlockRowBroadcast, WholePartEvaluation

DEFAULT_GRAPH = full_graph.DEFAULT_GRAPH


def recipe(staleness: str = "epoch-fixed", epsilon: float = 1, **overrides) -> RunConfig:
    """SANCUS with the given staleness bound (SCS-E1 by default) on a 2000-vertex SBM graph."""
    exchange = BlockRowBroadcast.Config(staleness=staleness, epsilon=float(epsilon))
    # accuracy of the updated model, every block fresh, for every variant (CAGNET included)
    evaluate = WholePartEvaluation.Config(fresh="always")
    # the printed order (aggregate, then transform): the broadcast volumes stated in the paper are of H
    return full_graph.recipe(exchange=exchange, evaluate=evaluate, model={"order": "aggregate-first"}).replace(
        **overrides)


def cagnet_baseline(**overrides) -> RunConfig:
    """CAGNET 1-D: every block broadcast every layer (staleness ``none``)."""
    return recipe(staleness="none", epsilon=0, **overrides)


def epoch_fixed(epsilon: int = 1, **overrides) -> RunConfig:
    """SCS-E: broadcast every ε + 1 epochs (Algorithm 4)."""
    return recipe(staleness="epoch-fixed", epsilon=epsilon, **overrides)


def epoch_adaptive(epsilon: int = 1, **overrides) -> RunConfig:
    """SCS-A: receivers ask for blocks older than ε (Algorithm 5), staggered roots."""
    return recipe(staleness="epoch-adaptive", epsilon=epsilon, **overrides)


def variation_gap(epsilon: float = 0.02, **overrides) -> RunConfig:
    """SCS-H: owners broadcast when their block drifted more than ε (relative Frobenius; Algorithm 6)."""
    return recipe(staleness="variation-gap", epsilon=epsilon, **overrides)


def skipg(epsilon: int = 1, **overrides) -> RunConfig:
    """SkipG: gradient blocks reused for up to ε epochs, embeddings always fresh (the paper only names SkipG;
    see :mod:`workbench.train.sancus`, D9)."""
    return recipe(staleness="epoch-fixed", epsilon=epsilon, **{"exchange.skip": "gradients"}, **overrides)
