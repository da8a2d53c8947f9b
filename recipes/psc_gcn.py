"""PSC-GCN: full-graph GCN on sampled edges, boundary rows prefetched tau iterations ahead, inclusion-aware cache.

Paper: S. Wang, Q. Yu, X. Wang, H. Jin, Y. Li, "On Pipelined GCN with Communication-Efficient Sampling and
Inclusion-Aware Caching" (venue not named in the text).

Composition (every stage swappable with ``--set STAGE.FIELD=VALUE``):

* **partition**: METIS;
* **sample**: ``psc`` (Algorithm 2, the KKT solution of Sec. IV-B: budget epsilon |N_i|, a_inner = 1.1,
  a_boundary = 1, delta floor, refresh every R = 10 iterations, estimates from the last embeddings and
  current weights, at t = 0 from the features and the initial weights, boundary estimates shipped by their
  owners); baselines ``uniform_edge``, ``nodewise``
  (GraphSAGE-style), ``bns`` (BNS-GCN) (:mod:`workbench.sample.psc`);
* **cache**: ``inclusion`` (top ``ratio`` of the rank's boundary vertices by inclusion probability,
  re-ranked at every sampler refresh, entering rows fetched as ``cache_refresh``); ``degree``, ``random``;
* **exchange**: ``prefetch`` with staleness ``tau`` for boundary features, embeddings and gradients
  (:mod:`workbench.train.prefetch`; Algorithm 1's ``t > tau`` would never use iteration 0's fetch, so: consume at
  t >= tau, zeros before, tau = 0 synchronous); **model**: GCN; **train**: Adam, gradients all-reduced every iteration.

Variants: ``sync`` (epsilon = 1, tau = 0: synchronous full-graph training, equal to ``full_graph``),
``pipegcn`` (epsilon = 1, tau = 1), ``psc`` (epsilon = 0.1, tau = 2, inclusion cache of 30 %; the default).

Faithful: the estimator and its rescaling, Eq. 19, the inclusion probability and top-C cache, one draw
shared by all layers, stale boundary embeddings and gradients with inner rows fresh, the warm-up, the
per-iteration all-reduce, global-degree normalisation.

Simplified / decided: self-loops always kept outside the budget (else a vertex with ε·deg < 1 may aggregate
nothing); warm-up boundary rows are zeros (nothing has arrived yet; PipeGCN's convention); the loss is the summed
cross-entropy over the global number of training vertices (so the gradient is the full-graph mean); Adam (the
paper names no optimiser);
no real threads: the overlap is a discrete-event account (``simulated_iteration_s``, one serial link per
worker, bandwidth scaled so that a synchronous iteration communicates ``comm_ratio`` = 3 x its compute;
only ratios mean anything). A 3000-vertex power-law SBM instead of Reddit / products / Yelp.

Example:
    >>> from recipes.psc_gcn import recipe, sync
    >>> cfg = recipe()
    >>> cfg.method("sample"), cfg.sample.epsilon, cfg.exchange.tau, cfg.method("cache")
    ('psc', 0.1, 2, 'inclusion')
    >>> cfg = recipe().with_strings({"sample.epsilon": "0.3", "exchange.tau": "1", "cache.method": "degree"})
    >>> cfg.sample.epsilon, cfg.exchange.tau, cfg.method("cache"), cfg.cache.ratio
    (0.3, 1, 'degree', 0.3)
    >>> sync().sample.epsilon, sync().exchange.tau
    (1.0, 0)
"""

from __future__ import annotations

from workbench.cache.policies import InclusionCache
from workbench.compose import RunConfig
from workbench.partition import MetisPartitioner
from workbench.sample.psc import PSCSampler
from workbench.train import TrainLoopConfig
from workbench.train.models import GCN
from workbench.train.prefetch import PrefetchExchange

# Power-law degrees (so degree and inclusion caches differ), class-dependent noisy features, 10 % training.
DEFAULT_GRAPH = ("sbm:num_nodes=3000,num_blocks=8,avg_degree=32,degree_exponent=2.5,num_features=32,"
                 "feature_noise=3,homophily=0.7,train_ratio=0.1,val_ratio=0.2,test_ratio=0.7,seed=0")


def recipe(**overrides) -> RunConfig:
    """PSC-GCN: epsilon 0.1, tau 2, inclusion cache of 30 % of the boundary, GCN 2 x 32, METIS."""
    return RunConfig(
        graph=DEFAULT_GRAPH,
        partition=MetisPartitioner.Config(seed=0),
        sample=PSCSampler.Config(epsilon=0.1, refresh=10, seed=0),
        cache=InclusionCache.Config(ratio=0.3),
        exchange=PrefetchExchange.Config(tau=2),
        model=GCN.Config(hidden=32, num_layers=2),
        train=TrainLoopConfig(epochs=60, lr=0.01, optimizer="adam", seed=0),
    ).replace(**overrides)


def psc(**overrides) -> RunConfig:
    """The same as :func:`recipe`."""
    return recipe(**overrides)


def sync(**overrides) -> RunConfig:
    """Synchronous full-graph training through the same program: epsilon = 1, tau = 0, no cache."""
    return recipe(sample=PSCSampler.Config(epsilon=1.0, refresh=10, seed=0), cache=None,
                  exchange=PrefetchExchange.Config(tau=0)).replace(**overrides)


def pipegcn(**overrides) -> RunConfig:
    """PipeGCN-like: every edge, boundary embeddings and gradients one iteration stale."""
    return recipe(sample=PSCSampler.Config(epsilon=1.0, refresh=10, seed=0), cache=None,
                  exchange=PrefetchExchange.Config(tau=1)).replace(**overrides)
