"""DistDGL mini-batch training: owner-routed neighbour sampling, a KVStore feature pull, synchronous SGD.

Paper: D. Zheng et al., "DistDGL: Distributed Graph Neural Network Training for Billion-Scale Graphs",
IA3 2020 (arXiv:2010.05337).

Composition (every stage swappable with ``--set STAGE.FIELD=VALUE``):

* **partition**: METIS with DistDGL's multi-constraint balance (train/val/test and degree per part,
  ``balance_train``);
* **sample**: ``neighbor``, per-layer fan-outs in DGL's order (``fanouts[i]`` for block ``i`` counted from
  the input, so ``15,10,5`` takes 5 neighbours per seed), owner-routed (each frontier vertex sampled by
  its owner: kinds ``sample_req``/``sample_resp``); the training vertices are split by DistDGL's balanced
  split (Fig. 7, ``sample.split=balanced``): every trainer gets an equal share (within one vertex), taken
  from its own part's training vertices first, then from the other parts' surplus, so every trainer runs the
  same number of steps over distinct seeds (``--set sample.split=own``: each trainer exactly its part's
  training vertices, short trainers repeating batches up to ``max_r ceil(n_r / batch_size)`` steps);
* **cache**: ``none`` by default: every remote input row is pulled from its owner like DistDGL's KVStore
  (kinds ``feature_req``/``feature``); ``--set cache.method=degree --set cache.ratio=0.1`` adds PaGraph's
  static degree cache;
* **model**: GraphSAGE-mean on the sampled blocks; **train**: Adam, gradients all-reduced every step.

Faithful: owner-compute with 1-hop structure per part, sampling at the owner, the balanced split (equal shares,
the most local seeds any equal split keeps; DistDGL assigns contiguous ranges of the relabeled ids to the
machine overlapping them most, which keeps at most as many, and splits a machine's share over its trainers
at random: here one trainer per part), one synchronous all-reduce per step, the global batch = the sum of the
trainers' batches.

Simplified: 3 layers of width 64 on a products-shaped generated graph (5,000 vertices) instead of width
256 on ogbn-products; thread or Dask-process trainers on one machine instead of 4-16 machines; no sparse
embeddings, no prefetching or sampler processes; evaluation samples with the training fan-outs (decisions
in :mod:`workbench.train.minibatch`). Batch size per trainer, learning rate and epochs are not given by the
paper: chosen here, not tuned.

Example:
    >>> from recipes.distdgl import recipe
    >>> cfg = recipe(epochs=2)
    >>> cfg.method("sample"), cfg.sample.fanouts, cfg.sample.split, cfg.method("cache")
    ('neighbor', (15, 10, 5), 'balanced', 'none')
    >>> recipe().with_strings({"cache.method": "degree", "cache.ratio": "0.1"}).method("cache")
    'degree'
"""

from __future__ import annotations

from workbench.compose import RunConfig
from workbench.partition import MetisPartitioner
from workbench.sample import NeighborSampler
from workbench.train import TrainLoopConfig
from workbench.train.models import GCN, GraphSAGE

DEFAULT_GRAPH = "products-like:num_nodes=5000,seed=0"


def recipe(**overrides) -> RunConfig:
    """GraphSAGE-mean, 3 layers of 64, fan-outs 15,10,5, 128 seeds per trainer, METIS with train balance, the
    balanced split."""
    return RunConfig(
        graph=DEFAULT_GRAPH,
        partition=MetisPartitioner.Config(seed=0, balance_train=True),
        sample=NeighborSampler.Config(fanouts=(15, 10, 5), batch_size=128, seed=0, split="balanced"),
        cache=None,
        exchange=None,
        model=GraphSAGE.Config(hidden=64, num_layers=3),
        train=TrainLoopConfig(epochs=10, lr=0.01, optimizer="adam", seed=0),
    ).replace(**overrides)


def gcn(**overrides) -> RunConfig:
    """The same with GCN on the blocks (mean over the sampled neighbours and the vertex itself)."""
    return recipe(model=GCN.Config(hidden=64, num_layers=3)).replace(**overrides)


def degree_cache(ratio: float = 0.1, **overrides) -> RunConfig:
    """With PaGraph's static cache of the highest-degree remote vertices (``ratio`` of them)."""
    return recipe().with_strings({"cache.method": "degree", "cache.ratio": str(ratio)}).replace(**overrides)
