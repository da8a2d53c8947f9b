"""CATGNN: stream-partitioned parts, local training, weighted model averaging.

Paper: Huang et al., "CATGNN: Cost-Efficient and Scalable Distributed Training for Graph Neural Networks"
(§3.3, §4, §5.5).

Faithful: SPRING owner partition (Algorithm 1) with 1-hop neighbour completion, owned vertices the only
targets, local epochs with no gradient synchronisation, weighted averaging ``sum_k alpha_k W_k`` with
``alpha_k`` = share of training vertices in ONE all-reduce every ``sync.interval`` epochs (counted as kind
``model_avg``), optimiser state kept per part, evaluation on the full graph with the best-validation epoch
reported, round-robin of parts over ranks when there are more parts than ranks.

It is a :class:`~workbench.compose.RunConfig` like every recipe, with the sync section
``sync.method=model_avg`` (:class:`~workbench.train.sync.ModelAveraging`: ``interval``, ``halo_hops``,
``weighting``, ``replica_init``). Composes: ``--set partition.method=NAME`` trains on any registered partitioner's parts (edge-cut, or
vertex-cut with owners), ``--set model.method=sage`` swaps the model; fields both methods share are kept.
``--set sample.method=neighbor`` (or any block sampler) trains each part in local mini-batches whose blocks are
sampled inside the part (the paper's "samplers run inside each partition"; :func:`minibatch` is its GraphSAGE
setting); the default trains each part full-batch, the paper's full-batch mode.

Simplified: the models also average after the last epoch; 'same' initialisation by default
(``sync.replica_init=independent`` is the reference code's); evaluation is full-graph full-neighbour inference in one
pass (the paper runs ``MultiLayerFullNeighborSampler`` in batches of 64: the same logits) and reports accuracy,
not micro-F1 (equal for single-label classification).

Example:
    >>> from recipes.catgnn import recipe, sync_sweep
    >>> recipe(epochs=5).train.epochs
    5
    >>> [c.sync.interval for c in sync_sweep((1, 5))]
    [1, 5]
    >>> recipe().method("sync"), type(recipe().build().trainer).__name__
    ('model_avg', 'ModelAveragingTrainer')
"""

from __future__ import annotations

from workbench.compose import RunConfig
from workbench.partition.streaming import SpringPartitioner
from workbench.sample import NeighborSampler
from workbench.train.loop import TrainLoopConfig
from workbench.train.models import GCN, GraphSAGE
from workbench.train.sync import ModelAveraging

DEFAULT_GRAPH = ("sbm:num_nodes=2000,num_blocks=8,avg_degree=10,num_features=32,feature_noise=3,homophily=0.6,"
                 "train_ratio=0.1,val_ratio=0.2,test_ratio=0.7,seed=0")


def recipe(**overrides) -> RunConfig:
    """CATGNN with SPRING parts, a 2-layer GCN (hidden 32), 30 epochs, averaging every epoch: a
    :class:`~workbench.compose.RunConfig` with ``sync.method=model_avg`` and no exchange. Overrides are
    :meth:`RunConfig.replace` settings: sections (``model={"hidden": 16}``, ``sync={"interval": 5,
    "halo_hops": 0}``), dotted names (``**{"sync.interval": 5}``) or the shorthands ``epochs`` and ``seed``."""
    return RunConfig(
        graph=DEFAULT_GRAPH,
        partition=SpringPartitioner.Config(),
        model=GCN.Config(hidden=32, num_layers=2),
        exchange=None,
        train=TrainLoopConfig(epochs=30, lr=0.01, optimizer="adam", seed=0),
        sync=ModelAveraging.Config(interval=1, halo_hops=1),
    ).replace(**overrides)


def sage(**overrides) -> RunConfig:
    """The same with GraphSAGE-mean (the Figure 12 model)."""
    return recipe(model=GraphSAGE.Config(hidden=32, num_layers=2)).replace(**overrides)


def minibatch(**overrides) -> RunConfig:
    """The paper's GraphSAGE setting: local mini-batches of 512 targets per part with ``NeighborSampler([25, 10])``
    sampled inside the part, Adam, lr 0.01 (§5.1; 100 epochs there, 30 here)."""
    sample = NeighborSampler.Config(fanouts=(25, 10), batch_size=512)
    return recipe(model=GraphSAGE.Config(hidden=32, num_layers=2), sample=sample).replace(**overrides)


#: public helpers that are not variants of ``workbench run catgnn:...``
__helpers__ = ("sync_sweep",)


def sync_sweep(intervals=(1, 5, 10, 20), **overrides) -> list[RunConfig]:
    """Figure 11: the same run averaging every ``k`` epochs, one config per interval."""
    return [recipe(**{"sync.interval": k}, **overrides) for k in intervals]


def no_full_neighbours(**overrides) -> RunConfig:
    """Figure 12's ablation: K = 0 (a cross edge only in the part owning its smaller endpoint id)."""
    return recipe(**{"sync.halo_hops": 0}, **overrides)


def hdrf_parts(**overrides) -> RunConfig:
    """A vertex-cut baseline (HDRF, owners = a random replica) with the same completion."""
    from workbench.partition.streaming import HDRFPartitioner

    return recipe(partition=HDRFPartitioner.Config(), **overrides)
