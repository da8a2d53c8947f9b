"""The live timing account: PipelineSimulator stepped one iteration at a time equals the recurrence, its bars
add up, the PipelineTimeline event survives the run log, and a prefetch run logs it while it goes."""

from __future__ import annotations

import random

import pytest

from workbench.events import PipelineCost, PipelineTimeline, RunLog, read_run_log
from workbench.sim.pipeline_time import (
    IterationCost, PipelineSimulator, TimelineRecorder, simulate_pipeline, timeline_event,
)


def _reference(costs, tau, bw, latency):
    """The recurrence of :mod:`workbench.sim.pipeline_time` written out on its own: seconds and blocked
    seconds per iteration."""
    W, T = len(costs), len(costs[0])
    free, done_f, done_b = [0.0] * W, [{} for _ in range(W)], [{} for _ in range(W)]
    start, out, blocked = 0.0, [], []

    def send(n, at, nbytes):
        if nbytes <= 0:
            return at
        free[n] = max(at, free[n]) + latency + nbytes / bw
        return free[n]

    for t in range(T):
        ends, waits = [], []
        for n in range(W):
            c, clock, waited = costs[n][t], start, 0.0
            for layer in range(len(c.fwd_s)):
                done_f[n][(t, layer)] = send(n, clock, c.fetch_bytes[layer])
                need = done_f[n].pop((t - tau, layer)) if t >= tau else clock
                waited += max(need - clock, 0.0)
                clock = max(clock, need) + c.fwd_s[layer]
            for layer in reversed(range(len(c.fwd_s))):
                clock += c.bwd_s[layer]
                if layer > 0:
                    done_b[n][(t, layer)] = send(n, clock, c.grad_bytes[layer])
                    need = done_b[n].pop((t - tau, layer)) if t >= tau else clock
                    waited += max(need - clock, 0.0)
                    clock = max(clock, need)
            ends.append(send(n, clock, c.allreduce_bytes))
            waits.append(waited)
        out.append(max(ends) - start)
        blocked.append(max(waits))
        start = max(ends)
    return out, blocked


def _costs(rng, workers, layers, iterations):
    return [[IterationCost(fwd_s=[rng.uniform(0.1, 1) for _ in range(layers)],
                           bwd_s=[rng.uniform(0.1, 2) for _ in range(layers)],
                           fetch_bytes=[rng.choice([0.0, rng.uniform(1, 40)]) for _ in range(layers)],
                           grad_bytes=[0.0] + [rng.uniform(1, 40) for _ in range(layers - 1)],
                           allreduce_bytes=rng.uniform(0, 10)) for _ in range(iterations)] for _ in range(workers)]


@pytest.mark.parametrize("tau", [0, 1, 2, 4])
@pytest.mark.parametrize("workers,layers", [(1, 1), (2, 2), (4, 3)])
def test_stepping_equals_the_recurrence_and_the_bars_add_up(tau, workers, layers):
    rng = random.Random(tau * 100 + workers * 10 + layers)
    costs = _costs(rng, workers, layers, 9)
    bw, latency = rng.uniform(5, 30), rng.choice([0.0, 0.05])
    ref_s, ref_blocked = _reference(costs, tau, bw, latency)
    rec: dict = {}
    assert simulate_pipeline(costs, tau, bw, latency, record=rec) == ref_s and rec["blocked_s"] == ref_blocked
    sim = PipelineSimulator(workers, tau, bw, latency)
    for t in range(9):
        step = sim.step([costs[n][t] for n in range(workers)])
        assert step.seconds == ref_s[t] and max(step.blocked_s) == ref_blocked[t]
        for n in range(workers):
            bars = [b for b in step.intervals if b.worker == n]
            waits = sum(b.end - b.start for b in bars if b.kind in ("wait_fetch", "wait_grad"))
            assert waits == pytest.approx(step.blocked_s[n], abs=1e-12)
            busy = sum(b.end - b.start for b in bars if b.kind in ("fwd", "bwd"))
            assert busy == pytest.approx(step.compute_s[n])
            compute_lane = sorted((b.start, b.end) for b in bars if b.kind not in ("fetch", "grad", "allreduce"))
            assert all(a[1] <= b[0] + 1e-12 for a, b in zip(compute_lane, compute_lane[1:]))   # one thing at a time
            assert all(step.start - 1e-12 <= b.start <= b.end <= step.start + step.seconds + 1e-12 for b in bars)
            assert compute_lane[-1][1] == pytest.approx(step.start + step.seconds)   # idle until the barrier
            assert all(t - tau <= b.issued <= t for b in bars)
        if tau == 0:   # synchronous: every wait is on the transfer just issued
            assert all(b.issued == t for b in step.intervals)


def test_the_timeline_event_survives_the_run_log(tmp_path):
    rng = random.Random(0)
    costs = _costs(rng, 3, 2, 4)
    sim = PipelineSimulator(3, 1, 10.0)
    ev = timeline_event([sim.step([c[t] for c in costs]) for t in range(4)], tau=1, bandwidth_Bps=10.0,
                        sync_iteration_s=12.5)
    ev.run_id = "r"
    with RunLog(tmp_path, "r") as log:
        log.emit(ev)
    _, events = read_run_log(tmp_path / "r")
    assert events == [ev] and isinstance(events[0], PipelineTimeline)
    assert events[0].num_iterations == 4 and len(ev.kind) == len(ev.start) == len(ev.issued) > 4 * 3 * 2


def test_recorder_waits_for_every_rank_and_passes_other_events_through():
    got = []
    rec = TimelineRecorder(got.append, num_workers=2, tau=0, comm_ratio=2.0, batch=2, flush_s=1e9)
    cost = dict(fwd_s=[1.0, 1.0], bwd_s=[1.0, 1.0], fetch_bytes=[10.0, 10.0], grad_bytes=[0.0, 10.0])
    rec(PipelineCost(rank=1, epoch=0, **cost, exact=cost))
    rec(PipelineCost(rank=1, epoch=1, **cost))        # rank 1 ahead: nothing to simulate yet
    rec(PipelineTimeline(first_iteration=99))         # not a cost: passes through
    assert [e.first_iteration for e in got] == [99]
    rec(PipelineCost(rank=0, epoch=0, **cost, exact=cost))
    rec(PipelineCost(rank=0, epoch=1, **cost))
    (ev,) = got[1:]
    assert ev.first_iteration == 0 and ev.iteration_s == simulate_pipeline([[IterationCost(**cost)] * 2] * 2, 0,
                                                                           rec.sim.bandwidth_Bps)
    assert not any(isinstance(e, PipelineCost) for e in got)


def test_a_prefetch_run_logs_its_timeline_as_it_goes(tmp_path):
    from recipes import psc_gcn
    from workbench.runtime import launch

    cfg = psc_gcn.recipe(graph="sbm:num_nodes=300,num_blocks=4,avg_degree=8,degree_exponent=2.5,num_features=8,seed=0",
                         epochs=5, model={"hidden": 8}).with_strings({"exchange.tau": "0", "sample.epsilon": "0.3"})
    handle = launch(cfg, runner="local", workers=3, out=str(tmp_path))
    summary = handle.wait(timeout=300)
    _, events = read_run_log(handle.log_dir)
    assert not any(isinstance(e, PipelineCost) for e in events)   # costs stay on the client
    timeline = [e for e in events if isinstance(e, PipelineTimeline)]
    assert timeline and timeline[0].first_iteration == 0 and {e.num_workers for e in timeline} == {3}
    assert [x for e in timeline for x in e.iteration_s] == summary["simulated_iteration_s"]
    blocked = [x for e in timeline for x in e.blocked_s]
    assert blocked == summary["simulated_blocked_s"] and min(blocked) > 0   # synchronous: every fetch blocks
    assert timeline[0].sync_iteration_s == summary["simulated_sync_iteration_s"]
    assert timeline[0].bandwidth_Bps == summary["simulated_bandwidth_Bps"]
    # the waits are the ones the blocked seconds count: per iteration, the slowest worker's sum
    for e in timeline:
        for i, it in enumerate(range(e.first_iteration, e.first_iteration + e.num_iterations)):
            per_worker = [sum(b - a for k, w, a, b, j in zip(e.kind, e.worker, e.start, e.end, e.iteration)
                              if j == it and w == n and k in ("wait_fetch", "wait_grad")) for n in range(3)]
            assert max(per_worker) == pytest.approx(e.blocked_s[i], rel=1e-5)
    # each worker's fetch bars carry the bytes the iteration fetched for its layers
    fetch_layer1 = [nb for e in timeline for k, layer, nb in zip(e.kind, e.layer, e.nbytes)
                    if k == "fetch" and layer == 1]
    assert fetch_layer1 and all(nb % (8 * 4) == 0 for nb in fetch_layer1)    # rows x hidden 8 x 4 bytes
