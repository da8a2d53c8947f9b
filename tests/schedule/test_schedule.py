"""The schedule stage: sampling DAGs reproduce the sample stage, and scheduling never changes the losses."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from workbench.sample import LocalSource, NeighborSampler
from workbench.schedule import (SCHEDULERS, LaunchScorePolicy, LogicalDAG, Pipeline, FixedDepthPolicy, Signals,
                                cpu_pressure)
from workbench.schedule.dag import OPERATORS, WorkerState
from workbench.sample.keyed import CSRRows
from workbench.testing import assert_same_run


def _run_inline(dag, state, order_seed):
    """Execute a physical DAG's tasks in this process, ready tasks in a shuffled order."""
    rng = random.Random(order_seed)
    ready = dag.ready()
    while ready:
        rng.shuffle(ready)
        t = ready.pop()
        dag.finish(t, OPERATORS[t.op](state, t.payload))
        ready += dag.ready()
    return dag.result()


@pytest.mark.parametrize("chunk_size", [1, 5, 1000])
def test_a_physical_dag_is_the_sample_stage_batch_in_any_task_order(small_sbm, chunk_size):
    g = small_sbm
    sampler = NeighborSampler(fanouts=(4, 3, 2), seed=3)
    state = WorkerState(CSRRows(g.indptr, g.indices), g.features.numpy(), sampler, g.num_nodes)
    logical = LogicalDAG(sampler, chunk_size=chunk_size)
    seeds = torch.tensor([5, 17, 42, 99, 150, 151])
    ref = sampler.sample(seeds, LocalSource(g), epoch=2, step=7)
    for order in range(3):
        dag = logical.physical(dag_id=0, seeds=seeds, epoch=2, step=7, degrees=g.in_degrees().numpy(),
                               feature_width=g.num_features)
        got = _run_inline(dag, state, order)
        mb = got.minibatch
        for a, b in zip(mb.blocks, ref.blocks):
            assert torch.equal(a.src_gid, b.src_gid) and torch.equal(a.edge_src, b.edge_src)
            assert torch.equal(a.edge_dst, b.edge_dst) and a.num_dst == b.num_dst
        assert np.array_equal(got.features[0], g.features[ref.input_gid].numpy())


def test_unsupervised_shape_has_three_branches(karate):
    sampler = NeighborSampler(fanouts=(2, 2), seed=0)
    state = WorkerState(CSRRows(karate.indptr, karate.indices), karate.features.numpy(), sampler, karate.num_nodes)
    logical = LogicalDAG(sampler, chunk_size=4, unsupervised=True, num_negative=2)
    seeds = np.array([0, 1, 2])
    roots, links = logical.branch_roots(seeds, 0, 0, state)
    assert len(roots) == 3 and roots[2].size <= 6 and links[2].shape == (3, 2)
    indptr, indices = karate.indptr.numpy(), karate.indices.numpy()
    for s, p in zip(seeds, roots[1][links[1]]):          # each positive is an in-neighbour of its seed
        assert p in indices[indptr[s]:indptr[s + 1]]
    dag = logical.physical(dag_id=0, seeds=seeds, epoch=0, step=0, degrees=karate.in_degrees().numpy(),
                           feature_width=karate.num_features, roots=roots, links=links)
    got = _run_inline(dag, state, 0)
    assert len(got.batches) == 3 and all(f.shape[0] == b.num_input_nodes for f, b in zip(got.features, got.batches))
    assert got.links is links


def test_coarse_policies():
    assert cpu_pressure(0) == 100.0 and cpu_pressure(100) == 0.0 and cpu_pressure(50) > cpu_pressure(90)
    base = dict(now=0.0, workers=2)
    p = LaunchScorePolicy(sigma=1000.0, max_in_flight=3)
    assert p.should_launch(Signals(t_gap_ms=0, c_util=0, q_size=0, in_flight=0, t_avg_sample=None,
                                   t_avg_train=None, **base))                      # bootstrap
    busy = Signals(t_gap_ms=5, c_util=95, q_size=2, in_flight=1, t_avg_sample=0.1, t_avg_train=0.1, **base)
    assert not p.should_launch(busy)                                                 # 5 * 20.8 * 1/3 < 1000
    idle = Signals(t_gap_ms=50, c_util=10, q_size=0, in_flight=1, t_avg_sample=0.4, t_avg_train=0.1, **base)
    assert p.should_launch(idle)                                                     # 50 * 99.9 * 4
    assert not p.should_launch(Signals(**{**idle.__dict__, "in_flight": 3}))         # the cap
    assert FixedDepthPolicy(2).should_launch(Signals(**{**idle.__dict__, "in_flight": 1, "q_size": 0}))
    assert not FixedDepthPolicy(2).should_launch(Signals(**{**idle.__dict__, "in_flight": 1, "q_size": 1}))


def test_fine_scheduler_orders_by_dag_then_cost():
    from workbench.schedule.dag import Task

    pipe = Pipeline.__new__(Pipeline)         # only the ready queue: no worker processes
    import itertools
    from collections import deque

    pipe._seq, pipe._ready, pipe._fifo = itertools.count(), [], deque()
    tasks = [Task(2, 0, "nsc", {}, 1.0), Task(1, 0, "ff", {}, 50.0), Task(1, 1, "nsc", {}, 5.0)]
    pipe.ready_queue = "priority"
    pipe._push(tasks)
    assert [(t.dag_id, t.cost) for t in iter(pipe._pop, None)] == [(1, 5.0), (1, 50.0), (2, 1.0)]
    pipe.ready_queue = "fifo"
    pipe._push(tasks)
    assert [(t.dag_id, t.cost) for t in iter(pipe._pop, None)] == [(2, 1.0), (1, 50.0), (1, 5.0)]


@pytest.mark.parametrize("name", ["launch-score", "fixed-depth", "asap", "fifo"])
def test_pipeline_batches_do_not_depend_on_the_scheduler(small_sbm, name):
    g = small_sbm
    sampler = NeighborSampler(fanouts=(3, 3), seed=1)
    batches = [(s, torch.arange(s * 20, s * 20 + 20)) for s in range(4)]
    with SCHEDULERS.build(name, workers=2, chunk_size=8).pipeline(sampler, g) as pipe:
        pipe.start_epoch(1, batches)
        got = [pipe.get(s) for s, _ in batches]
        stats = pipe.end_epoch()
    assert stats.num_dags == 4 and stats.seeds == 80 and len(stats.dag_latency_s) == 4 and stats.trace_t
    for (s, seeds), b in zip(batches, got):
        ref = sampler.sample(seeds, LocalSource(g), epoch=1, step=s)
        assert torch.equal(b.minibatch.input_gid, ref.input_gid)
        assert np.array_equal(b.features[0], g.features[ref.input_gid].numpy())


def test_same_seed_same_losses_whatever_the_scheduler():
    from workbench.compose import RunConfig
    from workbench.events import ScheduleStats, ScheduleTrace
    from workbench.runtime.launch import launch

    base = RunConfig.compose(graph="sbm:num_nodes=300,num_blocks=4,avg_degree=8,num_features=16,seed=0",
                             num_parts=1, sample="neighbor", fanouts=(4, 4), batch_size=32, epochs=2, model="sage")
    runs = {}
    for name in ("none", "launch-score", "fixed-depth", "fifo"):
        cfg = base.with_strings({"schedule.method": name, **({} if name == "none" else {"schedule.workers": "1"})})
        handle = launch(cfg, runner="single")
        runs[name] = handle.wait()
        if name != "none":
            assert handle.events and any(isinstance(e, ScheduleStats) for e in handle.events)
            traces = [e for e in handle.events if isinstance(e, ScheduleTrace)]
            # a short epoch (a few ms) still draws a timeline: a sample at every change of the counts
            assert len(traces) == 2 and all(len(tr.t) > 3 and tr.t == sorted(tr.t) for tr in traces)
            assert all(tr.in_flight[-1] == 0 and max(tr.in_flight) >= 1 for tr in traces)
            assert runs[name]["seeds_per_s"] > 0 and 0.0 <= runs[name]["trainer_idle_fraction"] <= 1.0
    ref = runs.pop("none")
    for name, s in runs.items():
        assert_same_run(s, ref, rtol=0)
        assert s["accuracy"] == ref["accuracy"], name


def test_unsupervised_losses_do_not_depend_on_the_scheduler():
    from recipes.bytegnn import unsupervised
    from workbench.runtime.launch import launch

    cfg = unsupervised(graph="sbm:num_nodes=200,num_blocks=4,avg_degree=8,num_features=16,seed=0", num_parts=1,
                       epochs=2, batch_size=32, hidden=8).with_strings({"schedule.workers": "1"})
    a = launch(cfg, runner="single").wait()
    b = launch(cfg.with_strings({"schedule.method": "asap"}), runner="single").wait()
    assert a["losses"] == b["losses"] and all(x > 0 for x in a["losses"])


def test_trace_samples_every_change_and_is_thinned_for_the_log(small_sbm):
    from workbench.schedule.executor import TRACE_DETAIL_SAMPLES, EpochSchedule, trace_samples

    sampler = NeighborSampler(fanouts=(3, 3), seed=1)
    batches = [(s, torch.arange(s * 20, s * 20 + 20)) for s in range(4)]
    with SCHEDULERS.build("fixed-depth", workers=2, chunk_size=8, trace_ms=10_000).pipeline(sampler, small_sbm) as pipe:
        pipe.start_epoch(0, batches)
        for s, _ in batches:
            pipe.get(s)
        st = pipe.end_epoch()
    counts = list(zip(st.trace_q, st.trace_in_flight, st.trace_busy))
    # one tick at the start and one at the end (trace_ms is far longer than the epoch); every other sample is a change
    assert len(counts) > 4 and all(a != b for a, b in zip(counts[1:-2], counts[2:-1]))
    assert max(st.trace_busy) >= 1 and st.trace_in_flight[-1] == 0 and st.trace_busy[-1] == 0
    assert len(st.cpu_readings) == 2 and 0.0 <= st.cpu_util_mean <= 100.0
    # the log keeps at most max(TRACE_DETAIL_SAMPLES, one per trace_ms) in detailed epochs, one per trace_ms later
    n = 10_000
    long = EpochSchedule(trace_t=list(np.linspace(0, 10.0, n)), trace_cpu=[50.0] * n, trace_q=[0] * n,
                         trace_in_flight=list(np.arange(n) % 3), trace_busy=[1] * n)
    assert len(long.trace(trace_samples(0, 1000, 10.0, 50.0))["t"]) <= 201
    assert len(long.trace(trace_samples(500, 1000, 0.02, 50.0))["t"]) == 2
    thinned = long.trace(trace_samples(999, 1000, 0.02, 50.0))
    assert len(thinned["t"]) <= TRACE_DETAIL_SAMPLES and thinned["t"][0] == 0.0 and thinned["t"][-1] == 10.0
    assert set(thinned) == {"t", "cpu_util", "q_size", "in_flight", "busy_workers"}
