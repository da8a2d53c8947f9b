"""G3: locality-aware iterative partitioning, per-layer P2P exchange and bins sized to device memory.

Paper: X. Wan, K. Xu, X. Liao, Y. Jin, K. Chen, X. Jin, "Scalable and Efficient Full-Graph GNN Training for
Large Graphs", SIGMOD 2023 (Proc. ACM Manag. Data 1(2), Art. 143).

Faithful: stage 1 multi-constraint METIS balancing |V_p| and Σd_v with the communication-volume objective;
stage 2 Algorithm 1 (one vertex pair swapped per iteration between the parts with most and fewest remote
vertices, gamma = 0.5 %, fast neighbour tracking); owner-compute full-graph training where each layer's
boundary rows go peer-to-peer to the parts that read them (the ``halo`` exchange) and their gradients come
back; vertices ordered by BFS with boundary vertices first, packed into per-layer bins of at most half the
device-memory budget; backward replays the forward bins in reverse; exact (equal to single-process training).

Simplified: CPU ranks, so the pipeline's overlap (packer, host-to-device, compute, device-to-host, network)
is a discrete-event account from measured per-bin costs (``summary["g3"]["simulated_epoch_s"]`` per variant),
not measured overlap; bins are packed once before training (static, not re-packed from the vertices that are
ready), and eager computation acts at bin granularity in that account (a bin starts once the bins it reads
have arrived); the exchange is one all-to-all per layer rather than per bin; parameters are
all-reduced once per epoch (the paper's §3.1 reading, not the §6.2 layer-wise one); SBM graphs.

Settings (the ``binned`` step, :mod:`workbench.train.step`): ``--set step.bin_limit=K`` (vertices per bin; 0 = from
the budget), ``--set step.memory_budget=BYTES|auto`` (``auto``, the default: an emulated device sized from the graph, half the
largest part's working set and at least 4 x the largest vertex with its neighbours, so any graph trains in bins;
the summary's ``notes`` says what it chose; a given budget too small for one vertex is refused before
partitioning, naming the smallest that works), ``--set step.pipeline=multi-level|sequential|inter|intra`` (the
headline variant), ``--set step.method=whole_part`` to train whole parts, ``--set partition.refine=g3`` after another
partitioner.

Example:
    >>> from recipes.g3 import recipe, gcn, metis_whole
    >>> cfg = recipe(epochs=2)
    >>> cfg.method("partition"), cfg.method("model"), cfg.method("step"), cfg.step.bin_limit, cfg.step.pipeline
    ('g3', 'sage', 'binned', 0, 'multi-level')
    >>> gcn(model={"num_layers": 4}).model.num_layers, metis_whole().method("step")
    (4, 'whole_part')
"""

from __future__ import annotations

from workbench.compose import RunConfig
from workbench.partition import G3Partitioner, MetisPartitioner
from workbench.train import OwnerComputeHalo, TrainLoopConfig
from workbench.train.models import GCN, GraphSAGE
from workbench.train.step import Binned, WholePart

DEFAULT_GRAPH = ("sbm:num_nodes=2000,num_blocks=8,avg_degree=10,num_features=32,feature_noise=3,homophily=0.6,"
                 "train_ratio=0.1,val_ratio=0.2,test_ratio=0.7,seed=0")
MEMORY_BUDGET = "auto"
"""'Device' memory sized from the graph (:func:`workbench.train.bins.auto_memory_budget`): half the largest part's
working set, so whole-part training is rejected and bins (at most half the budget each) are what runs, on the
default graph and on your own (Cora's 1,433 features and a vertex of degree 168 included)."""


def recipe(**overrides) -> RunConfig:
    """G3 with GraphSAGE (2 layers, hidden 32): g3 partition, P2P halo exchange, bins from an ``auto`` budget."""
    return RunConfig(
        graph=DEFAULT_GRAPH,
        partition=G3Partitioner.Config(seed=0),
        exchange=OwnerComputeHalo.Config(),
        model=GraphSAGE.Config(hidden=32, num_layers=2),
        train=TrainLoopConfig(epochs=30, lr=0.01, optimizer="adam", seed=0),
        step=Binned.Config(bin_limit=0, memory_budget=MEMORY_BUDGET, pipeline="multi-level"),
    ).replace(**overrides)


def gcn(**overrides) -> RunConfig:
    """The same with GCN."""
    return recipe(model=GCN.Config(hidden=32, num_layers=2)).replace(**overrides)


def deep(**overrides) -> RunConfig:
    """4-layer GraphSAGE, where the paper reports its largest gain over halo replication."""
    return recipe(model=GraphSAGE.Config(hidden=32, num_layers=4)).replace(**overrides)


def metis_whole(**overrides) -> RunConfig:
    """Baseline: plain METIS parts trained whole (no bins, no budget), as the full-graph recipe."""
    return recipe(partition=MetisPartitioner.Config(seed=0), train=TrainLoopConfig(
        epochs=30, lr=0.01, optimizer="adam", seed=0), step=WholePart.Config()).replace(**overrides)
