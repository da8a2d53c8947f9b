"""Overlap of sampling and feature pulls with compute in mini-batch training (``train.batches_ahead``).

* One rank: ``train.batches_ahead=N`` gives the inline run's losses, weights and accuracies bit for bit, and the
  same figures and bytes by kind (plain, the single-process reference of 2 trainers, a dynamic cache).
* Two thread ranks (the thread samples and pulls on the side communicator): the inline 2-rank run's losses,
  weights (norm of the difference), figures, bytes by kind and epoch, cache statistics per epoch; a stopped
  2-rank run ends every rank's thread. Gloo processes with socket meshes: ``tests/runtime/test_dask_training.py``.
* The trainer's wait for a batch prepared ahead is its ``sample`` time, ``fetch`` is 0, the phases still add up;
  the thread's own sampling and pulls are reported as overlapped (off the critical path).
* Refused with a schedule, under full-graph training and on several NCCL ranks; any other loop refuses it when
  built. The setting is in the run summary's stages.
* :class:`BatchesAhead`: plan order, bounded lookahead, errors raised where the item is asked for, close.
"""

from __future__ import annotations

import threading
import time

import pytest
import torch

from recipes import distdgl, full_graph
from workbench._validation import ParamError
from workbench.events import CacheStats, SampleStats, StepTimes, Traffic
from workbench.runtime import launch
from workbench.train.minibatch import BatchesAhead
from workbench.testing import assert_same_run, run_program

GRAPH = "products-like:num_nodes=2000,seed=0"
FIGURES = ("losses", "accuracy_by_epoch", "bytes_by_kind", "steps", "sampled_edges",
           "input_nodes", "remote_feature_rows", "cache_hits", "feature_bytes", "sample_bytes", "cache_fill_bytes")


def _config(ahead: int = 0, **strings):
    cfg = distdgl.recipe(graph=GRAPH, epochs=3, sample={"fanouts": (5, 5, 5), "batch_size": 64})
    return cfg.with_strings({"train.batches_ahead": str(ahead), **strings})


def _run(config, runner="single", workers=1, events=None):
    return launch(config, runner=runner, workers=workers, out=None, blocking=True,
                  listeners=[events.append] if events is not None else ()).wait()


def _ahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.endswith("-batches-ahead")]


@pytest.mark.parametrize("strings", [{}, {"sample.trainers": "2"}, {"cache.method": "lru", "cache.ratio": "0.2"}],
                         ids=["plain", "two-trainer-reference", "lru-cache"])
def test_batches_ahead_trains_exactly_as_the_inline_run(strings):
    inline = _run(_config(0, **strings))
    for depth in (1, 3):
        ahead = _run(_config(depth, **strings))
        for key in FIGURES:
            assert ahead[key] == inline[key], (depth, key)        # bit for bit: same draws, same order of ops
        assert_same_run(ahead, inline, rtol=0)
        assert ahead["stages"]["train"]["batches_ahead"] == depth and inline["stages"]["train"]["batches_ahead"] == 0
    assert not _ahead_threads()                               # the thread ends with the run


def test_the_wait_for_a_prefetched_batch_is_the_sample_phase():
    events = []
    out = _run(_config(2), events=events)
    times = [e for e in events if isinstance(e, StepTimes)]
    assert len(times) == 3
    for e in times:
        assert e.seconds["fetch"] == 0.0 and e.seconds["sample"] >= 0.0
        assert sum(e.seconds.values()) == pytest.approx(e.wall_s, rel=1e-6, abs=1e-9)
    # the sampler's own seconds (on the batches-ahead thread) still reach SampleStats
    assert all(e.sample_s > 0 for e in events if isinstance(e, SampleStats))
    assert out["time_breakdown"]["mean_per_epoch"]["fetch"] == 0.0


def _by_epoch_and_kind(events) -> dict:
    out: dict = {}
    for e in events:
        if isinstance(e, Traffic):
            out[(e.epoch, e.kind)] = out.get((e.epoch, e.kind), 0) + e.bytes
    return out


@pytest.mark.parametrize("strings", [{}, {"cache.method": "lru", "cache.ratio": "0.2"},
                                     {"cache.method": "degree", "cache.ratio": "0.2", "train.max_steps": "3"}],
                         ids=["plain", "lru-cache", "degree-cache-max-steps"])
def test_batches_ahead_on_two_ranks_trains_exactly_as_the_inline_run(strings):
    """On 2 thread ranks the thread samples owner-routed and pulls over the side communicator while the loop
    all-reduces on the main one: the same losses, weights, figures, bytes (by kind, and by epoch and kind in the
    Traffic events) and cache statistics per epoch as the inline 2-rank run."""
    inline, inline_ranks, inline_events = run_program(_config(0, **strings).build(), 2)
    ahead, ahead_ranks, ahead_events = run_program(_config(2, **strings).build(), 2)
    assert ahead["world_size"] == 2 and ahead["stages"]["train"]["batches_ahead"] == 2
    assert max(ahead["sample_bytes"]) > 0 and max(ahead["feature_bytes"]) > 0   # owner-routed, remote rows
    for a, b in zip(ahead["losses"], inline["losses"]):
        assert abs(a - b) <= 1e-6 * abs(b)
    for a, b in zip(ahead_ranks, inline_ranks):
        for name, w in b["params"].items():
            assert torch.linalg.norm(a["params"][name] - w) <= 1e-6 * torch.linalg.norm(w), name
    for key in FIGURES + ("bytes_by_epoch", "cache_hit_rate"):
        assert ahead[key] == inline[key], key
    assert _by_epoch_and_kind(ahead_events) == _by_epoch_and_kind(inline_events)
    cache = [sorted((e.rank, e.epoch, e.hits, e.misses, e.remote_rows) for e in events if isinstance(e, CacheStats))
             for events in (ahead_events, inline_events)]
    assert cache[0] == cache[1] and (not strings or cache[0])
    # the sampling collectives ran on the side communicator: the loop's calls are the all-reduces alone
    assert all(len(a) < len(b) for r_a, r_b in zip(ahead_ranks, inline_ranks) for a, b in zip(r_a["calls"], r_b["calls"]))
    assert not _ahead_threads()


def test_batches_ahead_on_two_ranks_reports_the_sampling_off_the_critical_path():
    out, _, events = run_program(_config(2).build(), 2)
    times = [e for e in events if isinstance(e, StepTimes)]
    assert len(times) == 6
    for e in times:
        assert e.seconds["fetch"] == 0.0
        assert sum(e.seconds.values()) == pytest.approx(e.wall_s, rel=1e-6, abs=1e-9)   # overlapped is apart
        assert e.overlapped["sample"] > 0 and e.overlapped["fetch"] > 0
    over = out["time_breakdown"]["overlapped"]
    assert over["phases"] == ["sample", "fetch"] and len(over["by_rank"]) == 2
    assert over["mean_per_epoch"]["sample"] > 0 and len(over["by_rank"][1]["fetch"]) == 3
    inline, _, inline_events = run_program(_config(0).build(), 2)
    assert inline["time_breakdown"]["overlapped"]["mean_per_epoch"] == {"sample": 0.0, "fetch": 0.0}
    assert all(e.overlapped == {} for e in inline_events if isinstance(e, StepTimes))


def test_a_stopped_two_rank_run_ends_every_batches_ahead_thread():
    """Every rank stops after the same epoch; each thread still prepares the batches its peers' threads may be
    sampling (up to the depth past the last one taken), so none waits in a side collective."""
    from workbench.events import EpochEnd

    epochs = []
    handle = launch(_config(2).with_strings({"train.epochs": "500"}), runner="local", workers=2, out=None,
                    listeners=[lambda e: epochs.append(e) if isinstance(e, EpochEnd) else None])
    deadline = time.monotonic() + 60
    while len(epochs) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert epochs and _ahead_threads()
    t0 = time.monotonic()
    handle.stop()
    summary = handle.wait(60)
    assert handle.status == "stopped" and summary["stopped"] and time.monotonic() - t0 < 30
    deadline = time.monotonic() + 10
    while _ahead_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _ahead_threads()


def test_a_failing_rank_ends_every_batches_ahead_thread_quickly(monkeypatch):
    """A rank that fails aborts its side communicator as it closes, so the other rank's thread, waiting in a
    sampling collective for it, wakes at once (not after the transport's timeout)."""
    from workbench.runtime.errors import RunError
    from workbench.train.minibatch import MiniBatchSteps

    forward = MiniBatchSteps.forward

    def failing(self, batch):
        if self.ctx.rank == 1 and self.epoch == 1 and batch[0] == 1:
            raise ValueError("rank 1 fails")
        return forward(self, batch)

    monkeypatch.setattr(MiniBatchSteps, "forward", failing)
    t0 = time.monotonic()
    with pytest.raises(RunError, match="rank 1 fails"):
        run_program(_config(2).build(), 2, timeout_s=120)
    assert time.monotonic() - t0 < 30
    deadline = time.monotonic() + 10
    while _ahead_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _ahead_threads()


def test_batches_ahead_is_refused_on_several_nccl_ranks():
    from workbench._validation import ErrorCollector
    from workbench.train.batches_ahead import check_batches_ahead

    cfg = _config(2)
    for world_size, backend, ok in ((2, "nccl", False), (1, "nccl", True), (2, "gloo", True), (2, None, True)):
        errs = ErrorCollector("RunConfig")
        check_batches_ahead(errs, cfg, world_size, backend)
        if ok:
            errs.raise_if_any()
        else:
            with pytest.raises(ParamError, match=r"'train.batches_ahead' parameter of RunConfig must be 0 on 2 NCCL "
                                                 r"ranks: .*Got 2 instead"):
                errs.raise_if_any()


def test_batches_ahead_is_refused_where_nothing_reads_it():
    """Declared once (``TrainLoopConfig.field_requires``): batches the trainer samples itself. Full-graph training,
    a schedule (whose workers sample ahead already) and model averaging are refused at build, before anything
    loads; more than one rank when the ranks are known."""
    with pytest.raises(ParamError, match=r"'train.batches_ahead' parameter .* must be 0 with full-graph training"):
        full_graph.recipe(graph=GRAPH).with_strings({"train.batches_ahead": "1"}).build()
    scheduled = _config(1, **{"schedule.method": "fixed-depth", "schedule.workers": "1"})
    with pytest.raises(ParamError, match=r"'train.batches_ahead' .* must be 0 with mini-batch training with a schedule,"
                                         r".*needs batches that the trainer's own process samples"):
        scheduled.build()
    with pytest.raises(ParamError, match=r"'train.batches_ahead' .* must be 0 with local training per part"):
        _config(1, **{"sync.method": "model_avg", "sample.split": "own"}).build()
    with pytest.raises(ParamError, match=r"'batches_ahead' parameter of TrainLoopConfig must be an int >= 0"):
        _config(-1)


def test_batches_ahead_from_the_cli(capsys):
    import json

    from workbench.cli import main

    common = ["run", "distdgl", "--graph", GRAPH, "--runner", "single", "--workers", "1", "--json", "--epochs",
              "1", "--set", "sample.fanouts=5,5,5", "--set", "sample.batch_size=64"]
    assert main([*common, "--set", "train.batches_ahead=2"]) == 0
    ahead = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(common) == 0
    inline = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert ahead["losses"] == inline["losses"] and ahead["stages"]["train"]["batches_ahead"] == 2


# ------------------------------------------------------------------------------------------------ the thread
def test_batches_ahead_keeps_order_and_stays_at_most_depth_ahead():
    made = []

    def produce(i):
        made.append(i)
        return i * 10

    p = BatchesAhead(((("k", i), (i,)) for i in range(20)), produce, depth=3)
    got = []
    for i in range(20):
        deadline = time.monotonic() + 0.05
        while time.monotonic() < deadline and len(made) < min(i + 3, 20):
            time.sleep(0.001)
        assert len(made) <= i + 3                 # items i .. i + 2 at most before item i is taken
        got.append(p.get(("k", i)))
    assert got == [i * 10 for i in range(20)] and made == list(range(20))
    p.close()
    assert not p._thread.is_alive()


def test_batches_ahead_raises_the_producers_error_and_refuses_a_key_out_of_order():
    def produce(i):
        if i == 2:
            raise ValueError("bad batch 2")
        return i

    p = BatchesAhead(((i, (i,)) for i in range(5)), produce, depth=2)
    assert p.get(0) == 0 and p.get(1) == 1
    with pytest.raises(ValueError, match="bad batch 2"):
        p.get(2)
    with pytest.raises(ValueError, match="bad batch 2"):   # and again: the plan cannot go on
        p.get(3)
    p.close()

    q = BatchesAhead(((i, (i,)) for i in range(3)), lambda i: i, depth=1)
    with pytest.raises(RuntimeError, match=r"asked for 1, the plan's next item is 0"):
        q.get(1)
    q.close()
    r = BatchesAhead(iter([(0, (0,))]), lambda i: i, depth=1)
    assert r.get(0) == 0
    with pytest.raises(RuntimeError, match="the plan's next item is its end"):
        r.get(1)
    r.close()


def test_closing_batches_ahead_stops_a_blocked_thread():
    p = BatchesAhead(((i, (i,)) for i in range(10**6)), lambda i: i, depth=2)
    assert p.get(0) == 0
    time.sleep(0.02)                               # the thread now waits for a free slot
    p.close()
    assert not p._thread.is_alive()
    with pytest.raises(ValueError):
        BatchesAhead(iter(()), lambda: None, depth=0)


def test_a_stopped_run_ends_its_batches_ahead_thread():
    from workbench.events import EpochEnd

    epochs = []
    handle = launch(_config(2).with_strings({"train.epochs": "500"}), runner="local", workers=1, out=None,
                    listeners=[lambda e: epochs.append(e) if isinstance(e, EpochEnd) else None])
    deadline = time.monotonic() + 60
    while not epochs and time.monotonic() < deadline:
        time.sleep(0.01)
    assert epochs and _ahead_threads()                # running, one epoch done, the thread ahead
    handle.stop()
    summary = handle.wait(60)
    assert handle.status == "stopped" and summary["stopped"] and len(epochs) < 500
    deadline = time.monotonic() + 10
    while _ahead_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _ahead_threads()


@pytest.mark.slow
def test_the_benchmark_runs_the_batches_ahead_variant_against_the_same_dgl_median(capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "minibatch.py"
    spec = importlib.util.spec_from_file_location("minibatch_benchmark", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--graph", GRAPH, "--epochs", "2", "--batch-size", "256", "--batches-ahead", "1"]) == 0
    out = capsys.readouterr().out
    assert "batches ahead 1" in out and "losses identical to the inline run's" in out and "all epochs:" in out


def test_max_steps_trains_the_first_batches_of_every_epoch_and_eval_batches_samples_the_splits():
    """``train.max_steps=k`` trains each epoch's first k shuffled batches: the same steps, losses and weights
    as a run whose training split holds only those batches' seeds would see; ``train.eval_batches`` evaluates
    the first batches of the validation split's per-epoch shuffle (a uniform sample); both on 2 ranks too, and
    refused where nothing reads them."""
    full = _run(_config(0))
    capped = _run(_config(0, **{"train.max_steps": "2", "train.eval_batches": "1"}))
    assert full["steps"][0] > 2 and capped["steps"] == [2, 2, 2]
    assert capped["stages"]["train"]["max_steps"] == 2 and capped["stages"]["train"]["eval_batches"] == 1
    # the first step of the first epoch is the same draw either way
    assert capped["sampled_edges"][0] < full["sampled_edges"][0]
    two = _run(_config(0, **{"train.max_steps": "2", "train.eval_batches": "1"}), runner="local", workers=2)
    assert two["steps"] == [2, 2, 2] and two["world_size"] == 2
    with pytest.raises(ParamError, match=r"'train.max_steps' parameter .* must be None with full-graph training"):
        full_graph.recipe(graph=GRAPH).with_strings({"train.max_steps": "3"}).build()
    with pytest.raises(ParamError, match=r"'max_steps' parameter of TrainLoopConfig must be None or an int >= 1"):
        _config(0, **{"train.max_steps": "0"})

    with pytest.raises(ParamError, match=r"'train.eval_batches' parameter .* must be None with local training per "
                                         r"part with model averaging"):   # its parts evaluate their own way
        _config(0, **{"sync.method": "model_avg", "sample.split": "own", "train.eval_batches": "2"}).build()
