"""ByteGNN: GNN-tailored block partitioning, sampling as a DAG of one-hop tasks, two-level scheduling.

Paper: C. Zheng et al., "ByteGNN: Efficient Graph Neural Network Training at Large Scale", VLDB 2022.

Composition (every stage swappable with ``--set STAGE.FIELD=VALUE``):

* **partition**: ``bytegnn``: 2-hop neighbourhood blocks of the labelled vertices (synchronous multi-source
  BFS), assigned by Algorithm 2 (CE x BS, the patched variant) so every split is balanced per part;
* **sample**: the keyed ``neighbor`` sampler, fan-outs 10,5 (DGL's order), 128 seeds per trainer;
* **schedule**: ``launch-score``: each trainer's batches are sampled by 2 worker processes running
  per-batch DAGs of one-hop NSC, merge and FF tasks over chunks of 256 vertices; a DAG is launched when
  ``T_gap * f(C_util) * balance >= sigma`` and ready tasks run by (DAG id, cost). ``--set
  schedule.method=fixed-depth`` (DistDGL-style depth 2), ``asap`` or ``fifo`` (FIFO ready queue) swap it. The
  workers hold their rank's part and read other parts from the owners' graph stores (``schedule.graph_store=
  owners``; ``local`` gives every worker the whole graph, remote reads uncounted, for comparison);
* **model**: GraphSAGE-mean (or GCN: ``recipe:gcn``), 2 layers of 32 (the paper's hidden size); **train**:
  Adam, gradients all-reduced every step (BSP).

Faithful: the five operators with a logical DAG built once and a physical DAG per batch, multi-hop NSC split
into one-hop tasks with FF pipelined behind each hop, sampling in separate processes (no GIL) competing with
the trainer for the same cores, the launch score of Algorithm 1 with choices where the paper is open (Q_size + 1,
bootstrap, EMAs, T_gap in ms), the (DAG id, cost, seq) ready heap, the block partitioner with alpha/beta/gamma;
each rank's graph store holds its part (CSR rows of its vertices, their features) and serves other ranks' sampling
workers over TCP: NSC and FF tasks read remote neighbourhoods and features from the owners, and the bytes are
counted at the socket (``sample_req`` / ``sample_resp`` / ``feature_req`` / ``feature``, equal to DistDGL's
owner-routed figures for the same batches).

Simplified: the graph store's server is a thread of the trainer's process answering one request at a time
(the paper's store is a separate service), on loopback with the local runner (one machine); chunked
tasks instead of one per vertex; the Seed, Positive and Negative operators run when a DAG is launched; no
parameter server (gradients are all-reduced); sigma = 1000 is chosen here (the paper gives none); C_util is
this run's processes' share of the cores (``schedule.cpu_scope=machine`` for the whole machine). The
unsupervised variant (``recipe:unsupervised``, ``loss.method=link``) runs Fig. 9's three-branch DAG (seeds, one
positive in-neighbour, one uniform negative per seed) with GraphSAGE's link loss; its evaluation still reports the
classification accuracy of the outputs, which is not a target there.

Example:
    >>> from recipes.bytegnn import recipe
    >>> cfg = recipe(epochs=2)
    >>> cfg.method("partition"), cfg.method("schedule"), cfg.sample.fanouts
    ('bytegnn', 'launch-score', (10, 5))
    >>> recipe().with_strings({"schedule.method": "fixed-depth"}).method("schedule")
    'fixed-depth'
"""

from __future__ import annotations

from workbench.compose import RunConfig
from workbench.partition import ByteGNNPartitioner
from workbench.sample import NeighborSampler
from workbench.schedule import LaunchScoreScheduler
from workbench.train import TrainLoopConfig
from workbench.train.models import GCN, GraphSAGE

DEFAULT_GRAPH = "products-like:num_nodes=5000,seed=0"


def recipe(**overrides) -> RunConfig:
    """GraphSAGE-mean, 2 layers of 32, fan-outs 10,5, 128 seeds per trainer, launch-score scheduling."""
    return RunConfig(
        graph=DEFAULT_GRAPH,
        partition=ByteGNNPartitioner.Config(num_hops=2),
        sample=NeighborSampler.Config(fanouts=(10, 5), batch_size=128, seed=0),
        cache=None,
        exchange=None,
        schedule=LaunchScoreScheduler.Config(),
        model=GraphSAGE.Config(hidden=32, num_layers=2),
        train=TrainLoopConfig(epochs=5, lr=0.01, optimizer="adam", seed=0),
    ).replace(**overrides)


def gcn(**overrides) -> RunConfig:
    """The same with GCN on the blocks."""
    return recipe(model=GCN.Config(hidden=32, num_layers=2)).replace(**overrides)


def fixed_depth(**overrides) -> RunConfig:
    """DistDGL-style fixed-depth prefetch (depth 2) instead of the launch score: the coarse baseline."""
    return recipe().with_strings({"schedule.method": "fixed-depth"}).replace(**overrides)


def fifo(**overrides) -> RunConfig:
    """The launch score with a FIFO ready queue: the fine scheduler's baseline."""
    return recipe().with_strings({"schedule.method": "fifo"}).replace(**overrides)


def unsupervised(**overrides) -> RunConfig:
    """The unsupervised DAG (seed, positive and negative branches) with a link-prediction loss."""
    return recipe().with_strings({"loss.method": "link"}).replace(**overrides)
