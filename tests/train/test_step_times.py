"""Per-step time breakdown: one StepTimes per rank and epoch for every trainer, in the summary and the run log.

Nothing here depends on speed: phases are checked for presence, sign, sums and which are > 0.
"""

from __future__ import annotations

import json

import pytest

from workbench.communicate.base import TrafficCounter
from workbench.events import STEP_PHASES, EpochEnd, StepTimes, iter_run_log
from workbench.runtime import launch
from workbench.train.timing import PhaseTimer

TINY = "sbm:num_nodes=300,num_blocks=4,avg_degree=6,num_features=8,seed=0"
EPOCHS = 2
COMPUTE = ("forward", "backward", "grad_sync", "optimizer", "evaluate")
MINIBATCH = ("sample", "fetch", *COMPUTE)


def _config(case: str):
    from recipes import bytegnn, catgnn, distdgl, full_graph, g3, psc_gcn, sancus

    small = dict(graph=TINY, epochs=EPOCHS)
    return {
        "full_graph": lambda: full_graph.recipe(**small, model={"hidden": 8}),
        "sancus": lambda: sancus.recipe(**small, model={"hidden": 8}),
        "distdgl": lambda: distdgl.recipe(**small).with_strings({"sample.batch_size": "16"}),
        "bytegnn": lambda: bytegnn.recipe(**small).with_strings({"schedule.workers": "1", "sample.batch_size": "16"}),
        "psc_gcn": lambda: psc_gcn.recipe(**small),
        "g3": lambda: g3.recipe(**small, model={"hidden": 8}, step={"memory_budget": 16384}),
        "catgnn": lambda: catgnn.recipe(**small),
    }[case]()


#: phases that must take time for each trainer (2 ranks); ``exchange`` is 0 where no communication happens
#: inside the forward or backward pass (sampling and feature traffic are their own phases)
POSITIVE = {
    "full_graph": (*COMPUTE, "exchange"),
    "sancus": (*COMPUTE, "exchange"),
    "g3": (*COMPUTE, "exchange"),
    "psc_gcn": (*COMPUTE, "exchange", "sample", "fetch"),
    "distdgl": MINIBATCH,
    "bytegnn": MINIBATCH,
    "catgnn": COMPUTE,
}
ZERO = {"full_graph": ("sample", "fetch"), "sancus": ("sample", "fetch"), "g3": ("sample", "fetch"),
        "distdgl": ("exchange",), "bytegnn": ("exchange",), "catgnn": ("sample", "fetch", "exchange"), "psc_gcn": ()}


@pytest.mark.parametrize("case", sorted(POSITIVE))
def test_every_trainer_logs_its_step_times(case, tmp_path):
    handle = launch(_config(case), runner="local", workers=2, out=tmp_path, run_id=f"times-{case}")
    summary = handle.wait(timeout=300)
    events = sorted((e for e in handle.events if isinstance(e, StepTimes)), key=lambda e: (e.rank, e.epoch))
    assert [(e.rank, e.epoch) for e in events] == [(r, e) for r in range(2) for e in range(EPOCHS)]
    walls = {(e.rank, e.epoch): e.wall_s for e in handle.events if isinstance(e, EpochEnd)}
    for ev in events:
        assert list(ev.seconds) == list(STEP_PHASES)
        assert all(v >= 0.0 for v in ev.seconds.values()), ev.seconds
        assert sum(ev.seconds.values()) == pytest.approx(ev.wall_s, rel=1e-9, abs=1e-12)
        assert ev.wall_s == walls[(ev.rank, ev.epoch)]           # the same clock as EpochEnd
        assert ev.program == summary["program"] and ev.steps >= 1
        for phase in POSITIVE[case]:
            assert ev.seconds[phase] > 0.0, (phase, ev.seconds)
        for phase in ZERO[case]:
            assert ev.seconds[phase] == 0.0, (phase, ev.seconds)
        assert ev.train_cpu_s >= 0.0
    assert sum(e.train_cpu_s for e in events) > 0.0              # the training steps' CPU seconds (clock ticks)
    if case in ("distdgl", "bytegnn"):
        assert {e.steps for e in events} == set(summary["steps"]) and summary["steps"][0] > 1

    tb = summary["time_breakdown"]
    assert tb["phases"] == list(STEP_PHASES)
    assert json.loads(json.dumps(tb)) == tb                    # JSON-safe
    for ev in events:
        assert {p: tb["by_rank"][ev.rank][p][ev.epoch] for p in STEP_PHASES} == ev.seconds
    for p in STEP_PHASES:
        assert tb["mean_per_epoch"][p] == pytest.approx(sum(e.seconds[p] for e in events) / len(events))

    logged = [e for e in iter_run_log(handle.log_dir) if isinstance(e, StepTimes)]
    assert sorted(logged, key=lambda e: (e.rank, e.epoch)) == events


def test_the_cpu_seconds_of_an_epoch_count_the_live_child_processes():
    """``StepTimes.train_cpu_s`` reads the live children's CPU seconds (a scheduled trainer's sampling workers)
    besides the process's own; without ``children`` only the process's and the reaped children's."""
    import subprocess
    import sys
    import time

    from workbench.train.timing import process_cpu_s

    busy = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                             "while time.process_time() - t < 0.5: pass\ntime.sleep(30)"])
    try:
        own0, all0 = process_cpu_s(children=False), process_cpu_s()
        deadline = time.monotonic() + 20
        while process_cpu_s() - all0 < 0.3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process_cpu_s() - all0 >= 0.3                   # the child's busy half second (it started at 0)
        assert process_cpu_s(children=False) - own0 < 0.3      # this process slept
    finally:
        busy.kill()
        busy.wait()


def test_the_single_runner_times_its_steps():
    summary = launch(_config("distdgl"), runner="single", out=None).wait(timeout=300)
    tb = summary["time_breakdown"]
    assert len(tb["by_rank"]) == 1 and all(len(v) == EPOCHS for v in tb["by_rank"][0].values())
    assert tb["mean_per_epoch"]["sample"] > 0 and tb["mean_per_epoch"]["grad_sync"] >= 0


def test_comm_inside_compute_is_exchange_and_nesting_is_exclusive():
    counter = TrafficCounter()
    timer = PhaseTimer(counter)
    timer.start()
    with timer.phase("forward"):
        counter.comm_seconds += 10.0          # more than the phase lasted: capped at its length
    assert timer.seconds["forward"] == 0.0 and timer.seconds["exchange"] > 0.0
    exchange = timer.seconds["exchange"]
    with timer.phase("backward"):
        with timer.phase("sample"):
            counter.comm_seconds += 10.0      # sampling traffic stays sampling, also inside a pass
    assert timer.seconds["exchange"] == exchange and timer.seconds["sample"] > 0.0
    assert timer.seconds["backward"] > 0.0
    with timer.phase("evaluate", absorb=True):
        with timer.phase("fetch"):            # an evaluation's pulls count as evaluate
            pass
    seconds, wall = timer.stop()
    assert seconds["fetch"] == 0.0 and seconds["evaluate"] > 0.0
    assert sum(seconds.values()) == pytest.approx(wall, rel=1e-9, abs=1e-12)
    assert timer.start() > 0 and timer.steps == 0 and not any(timer.seconds.values())   # a new epoch resets
