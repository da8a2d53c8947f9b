"""The discrete-event timing account of pipelined iterations (workbench.sim.pipeline_time)."""

from workbench.sim.pipeline_time import IterationCost, simulate_pipeline, time_to_accuracy


def _cost(fetch=40.0, compute=1.0):
    return IterationCost(fwd_s=[compute, compute], bwd_s=[compute, compute], fetch_bytes=[fetch, fetch],
                         grad_bytes=[0.0, fetch], allreduce_bytes=5.0)


def test_sync_waits_for_every_fetch_and_pipelining_hides_it():
    costs = [[_cost()] * 6, [_cost(fetch=20.0)] * 6]
    rec: dict = {}
    sync = simulate_pipeline(costs, 0, bandwidth_Bps=10.0, record=rec)
    assert sync[0] == 4 * 1.0 + 3 * 4.0 + 0.5 and rec["blocked_s"][0] == 12.0   # slowest worker bounds it
    pipe = simulate_pipeline(costs, 1, bandwidth_Bps=10.0)
    assert pipe[-1] < sync[-1] and pipe[-1] >= 12.5 - 1e-9                          # max(compute, link busy)
    assert simulate_pipeline(costs, 2, bandwidth_Bps=10.0)[-1] <= pipe[-1] + 1e-9


def test_less_traffic_is_faster_once_communication_dominates():
    full = simulate_pipeline([[_cost()] * 5], 2, bandwidth_Bps=10.0)
    sampled = simulate_pipeline([[_cost(fetch=4.0)] * 5], 2, bandwidth_Bps=10.0)
    assert sampled[-1] < full[-1] and sampled[-1] >= 4.0     # compute-bound: 4 layers' compute


def test_time_to_accuracy():
    assert time_to_accuracy([2.0, 2.0, 2.0], [None, 0.5, 0.8], 0.8) == 6.0
    assert time_to_accuracy([1.0], [0.1], 0.9) is None
