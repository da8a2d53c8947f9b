"""Conformance checks per stage kind: :func:`check_stage`, as scikit-learn's ``check_estimator``.

``check_stage(stage)`` takes a stage class or instance (registered or not: a method written outside this
repository), finds its kind and runs every check of that kind. A failed check raises
:class:`~workbench.testing.config_checks.StageCheckFailed` (an ``AssertionError``) naming the stage, the check
and what failed. What each kind must do:

================ ============================================================================================
every kind       its ``Config`` validates its defaults, refuses a wrong value in every typed field with the
                 one template naming the field, round-trips through ``--set`` strings, documents every field
                 (:mod:`workbench.testing.config_checks`); a registered method is listed by ``workbench
                 stages`` and selectable as ``SECTION.method=NAME``
partition        a valid assignment (int64, one part per vertex or per edge, ids in range) for 2 and 3 parts,
                 the same for the same seed
sample           block samplers: well-formed blocks (:func:`~workbench.testing.sampling.check_minibatch`) for
                 several fan-outs with and without replacement, seeded, empty seeds give empty blocks (edge
                 samplers: the config checks)
cache            the asked rows, only misses moved and counted at the transport, capacity and stats kept, on
                 1-3 thread ranks; ratio 0 holds nothing; ratio 1 moves no feature bytes in training (once warm);
                 deterministic
exchange         3 thread ranks reproduce the single-process run to 1e-5, bytes of every epoch equal the
                 prediction, also under each staleness policy the exchange takes (the method is registered
                 for the duration of the run: a run names its stages by registry name)
model            seeded, the input widths it declares
schedule         its coarse policy builds
sync             2 thread ranks train (finite losses), the summary names it, and both end with equal weights
loss             its ranks' shares add up: the loss of all rows equals the sum of two halves' losses (same
                 divisor); finite gradients; a step with no rows gives a finite loss attached to the graph; 2
                 thread ranks train with it (the composition its ``requires`` asks for) and the summary names it
evaluate         2 thread ranks (the trainer its ``requires`` asks for): global metrics in range, the same on both
                 ranks; the summary names it; the final weights equal the run scored with ``outputs`` (evaluation
                 leaves training alone)
step             3 thread ranks (full-graph training, the ``halo`` exchange): the losses and every rank's weights
                 equal the ``whole_part`` step's run to 1e-5; the summary names it
================ ============================================================================================

Checks that do not apply (a staleness policy the exchange refuses, a library that does not import here) raise
``unittest.SkipTest``: pytest reports a skip, :func:`check_stage` goes on with the next check.

Example:
    >>> import torch
    >>> from workbench.partition import Partitioner
    >>> class Halves(Partitioner):
    ...     name = "halves"
    ...     def _partition(self, graph, num_parts):
    ...         return torch.arange(graph.num_nodes) * num_parts // graph.num_nodes
    >>> check_stage(Halves)
    >>> class OffByOne(Halves):
    ...     name = "off-by-one"
    ...     def _partition(self, graph, num_parts):
    ...         return torch.arange(graph.num_nodes) * num_parts // graph.num_nodes + 1
    >>> check_stage(OffByOne)
    Traceback (most recent call last):
    ...
    workbench.testing.config_checks.StageCheckFailed: partition method 'off-by-one' (OffByOne) failed check_partitioner: it raised ParamError: The 'node_part' parameter of PartitionResult must be part ids in [0, 2). Got 'ids in [1, 2]' instead.
"""

from __future__ import annotations

import contextlib
import functools
import math
import unittest
from typing import Any, Callable, Iterable, Iterator

import torch

from workbench.testing.compare import assert_same_weights
from workbench.testing.cache_harness import WIDTH, cache_policy, exercise_cache
from workbench.testing.config_checks import (CONFIG_CHECKS, StageCheckFailed, _class, stage_check, stage_kind,
                                             stage_label)
from workbench.testing.graphs import tiny_graph
from workbench.testing.ranks import assert_same_training, run_program, run_ranks
from workbench.testing.sampling import check_minibatch, edge_set, same_minibatch

__all__ = ["check_loss_shares", "check_loss_trains", "check_stage", "stage_checks", "check_name", "parametrize_with_checks", "registered", "check_selectable",
           "check_partitioner", "check_sampler", "check_sampler_seeded", "check_cache", "check_cache_ratio_zero",
           "check_cache_ratio_one", "check_cache_deterministic", "check_exchange", "check_exchange_staleness",
           "check_model", "check_schedule", "check_sync", "StageCheckFailed"]


def _make(stage: Any, **options: Any) -> Any:
    """A fresh instance of ``stage`` (its config for an instance) with the ``options`` its config has."""
    cls = _class(stage)
    options = {k: v for k, v in options.items() if k in cls.Config.field_names()}
    if isinstance(stage, type):
        return cls(**options)
    return cls(stage.config.replace(**options) if options else stage.config)


def _name(stage: Any) -> str:
    return getattr(_class(stage), "name", "")


def _section(kind: str) -> str:
    from workbench.compose import STAGE_SECTIONS

    return next((s for s, k in STAGE_SECTIONS.items() if k == kind), kind)


@contextlib.contextmanager
def registered(stage: Any, kind: str | None = None) -> Iterator[str]:
    """Register ``stage``'s class in its kind's registry for the ``with`` block (a run names its stages by
    registry name); whatever was registered under that name before is put back after. Yields the name."""
    from workbench.compose import load_stage_modules
    from workbench.stages import registry

    load_stage_modules()
    cls = _class(stage)
    reg = registry(kind or stage_kind(cls))
    missing = object()
    before = reg.get(cls.name, missing)
    reg.register(cls)
    try:
        yield cls.name
    finally:
        if before is missing:
            reg.pop(cls.name, None)
        else:
            reg[cls.name] = before


# ------------------------------------------------------------------------------------------------ every kind
@stage_check
def check_selectable(stage: Any) -> None:
    """A registered method is listed by ``workbench stages``, is one of the run config's method choices, and
    ``SECTION.method=NAME`` selects it (an unknown name lists the valid ones)."""
    import re

    from workbench._validation import ParamError
    from workbench.compose import RunConfig
    from workbench.stage_listing import describe_stages
    from workbench.stages import REGISTRIES

    name, section = _name(stage), _section(stage_kind(stage))
    assert re.search(rf"^  {re.escape(name)}: ", describe_stages(), re.M), "not listed by `workbench stages`"
    assert name in RunConfig.method_choices(section), f"not one of RunConfig.method_choices({section!r})"
    settings = {f"{section}.method": name}
    if section in ("cache", "schedule"):   # a cache or a schedule needs a sampler: the first registered one
        settings["sample.method"] = sorted(REGISTRIES["sample"])[0]
    cfg = RunConfig.compose(graph="karate").with_strings(settings)
    assert cfg.method(section) == name, f"{section}.method={name} selected {cfg.method(section)!r}"
    assert cfg.to_strings()[f"{section}.method"] == name, f"to_strings() lost {section}.method={name}"
    try:
        cfg.with_strings({f"{section}.method": "no-such-method"})
    except ParamError as exc:
        assert name in str(exc), f"the error of an unknown {section}.method does not list {name!r}: {exc}"
    else:
        raise AssertionError(f"{section}.method=no-such-method was accepted")


# ------------------------------------------------------------------------------------------------ partition
def _partition_graph():
    from workbench.graph import Graph

    gen = torch.Generator().manual_seed(0)
    n = 40
    src = torch.randint(0, n, (160,), generator=gen)
    dst = torch.randint(0, n, (160,), generator=gen)
    keep = src != dst
    return Graph.from_edges(src[keep], dst[keep], n, directed=False)


@stage_check
def check_partitioner(stage: Any) -> None:
    """A valid assignment for 2 and 3 parts of a 40-vertex random graph; the same for the same seed."""
    g = _partition_graph()
    for num_parts in (2, 3):
        a, b = _make(stage, seed=1).partition(g, num_parts), _make(stage, seed=1).partition(g, num_parts)
        part = a.node_part if a.node_part is not None else a.edge_part
        size = g.num_nodes if a.kind == "edge-cut" else g.num_edges
        assert part.dtype == torch.int64, f"{num_parts} parts: assignment of dtype {part.dtype}, not int64"
        assert part.shape == (size,), f"{num_parts} parts ({a.kind}): assignment of shape {tuple(part.shape)}, " \
                                      f"not ({size},)"
        assert int(part.min()) >= 0 and int(part.max()) < num_parts, \
            f"{num_parts} parts: part ids in [{int(part.min())}, {int(part.max())}]"
        again = b.node_part if b.node_part is not None else b.edge_part
        assert torch.equal(part, again), f"{num_parts} parts: the same seed gave two different assignments"


# ------------------------------------------------------------------------------------------------ sample
def _block_sampler(stage: Any) -> bool:
    from workbench.sample.base import Sampler

    return issubclass(_class(stage), Sampler)


def _sampler(stage: Any, **options: Any) -> Any:
    why = getattr(_class(stage), "unavailable", lambda: None)()   # a library it wraps does not import here
    if why is not None:
        raise unittest.SkipTest(why)
    return _make(stage, **options)


@stage_check
def check_sampler(stage: Any) -> None:
    """Well-formed blocks for several fan-outs, with and without replacement, on a directed and an undirected
    tiny graph; empty seeds give blocks without edges."""
    from workbench.sample import LocalSource, MiniBatch

    for g in (tiny_graph(num_nodes=60, seed=3), tiny_graph(num_nodes=60, directed=True, seed=4)):
        seeds = torch.arange(0, g.num_nodes, 7)
        for fanouts in ((3, 2), (-1, 4), (2, -1, 1)):
            for replace in (False, True):
                sampler = _sampler(stage, fanouts=fanouts, replace=replace, seed=5)
                mb = sampler.sample(seeds, LocalSource(g), epoch=1, step=2)
                where = f"fanouts={fanouts}, replace={replace}, directed={g.directed}"
                assert isinstance(mb, MiniBatch), f"{where}: sample() returned a {type(mb).__name__}"
                try:
                    check_minibatch(mb, g, fanouts, replace)
                except AssertionError as exc:
                    raise AssertionError(f"{where}: {exc}") from exc
        empty = _sampler(stage, fanouts=(2, 2)).sample(torch.zeros(0, dtype=torch.int64), LocalSource(g))
        assert empty.num_sampled_edges == 0 and empty.num_input_nodes == 0, "empty seeds gave a non-empty sample"


@stage_check
def check_sampler_seeded(stage: Any) -> None:
    """The same seed, epoch and step give the same blocks; another seed, epoch or step other edges."""
    from workbench.sample import LocalSource

    g = tiny_graph(num_nodes=120, seed=3)
    seeds = torch.arange(0, g.num_nodes, 3)

    def run(seed, epoch=0, step=0):
        return _sampler(stage, fanouts=(3, 2), seed=seed).sample(seeds, LocalSource(g), epoch=epoch, step=step)

    assert same_minibatch(run(1), run(1)), "the same seed, epoch and step gave two different samples"
    for what, other in (("seed", run(2)), ("epoch", run(1, epoch=1)), ("step", run(1, step=1))):
        assert edge_set(run(1)) != edge_set(other), f"another {what} gave the same edges"


# ------------------------------------------------------------------------------------------------ cache
def _row_bytes() -> int:
    from workbench.cache import ID_BYTES

    return WIDTH * 4 + ID_BYTES


def _cache_run(stage: Any, world_size: int, ratio: float, **kw: Any) -> list:
    return run_ranks(world_size, lambda comm: exercise_cache(comm, stage, ratio, **kw))


def _fetched(results: list, epoch: int) -> int:
    return sum(r["bytes"][epoch].get("feature", 0) + r["bytes"][epoch].get("feature_req", 0) for r in results)


@stage_check
def check_cache(stage: Any) -> None:
    """On 1, 2 and 3 thread ranks at ratio 0.3: the asked rows come back; the capacity is the policy's and is
    never exceeded (a static cache's content never moves); stats add up; only misses move, counted at the
    transport as ``rows x width x 4 + ids x 8``; the fill is counted as ``cache_fill``."""
    ratio, row = 0.3, _row_bytes()
    dynamic = getattr(_class(stage), "dynamic", False)
    for world_size in (1, 2, 3):
        results = _cache_run(stage, world_size, ratio)
        where = f"{world_size} ranks, ratio {ratio}"
        for rank, r in enumerate(results):
            assert r["rows_ok"], f"{where}: rank {rank} got rows other than the asked ones"
            cap = cache_policy(stage, ratio).capacity(r["num_candidates"])
            assert r["capacity"] == cap, f"{where}: capacity {r['capacity']}, the policy says {cap}"
            assert max(r["sizes"]) <= cap, f"{where}: rank {rank} held {max(r['sizes'])} rows, capacity {cap}"
            if not dynamic:
                assert len(r["cached0"]) == cap, f"{where}: a static cache filled {len(r['cached0'])} of {cap} rows"
                assert r["cached"] == r["cached0"], f"{where}: a static cache's content moved"
            for st in r["stats"]:
                assert st["hits"] + st["misses"] == st["remote_rows"], f"{where}: hits + misses != remote rows"
                assert st["bytes_saved"] == st["hits"] * row, f"{where}: bytes_saved != hits x {row}"
                assert st["policy"] == _name(stage) and st["ratio"] == ratio, f"{where}: stats name {st['policy']!r}"
                assert st["fill_bytes"] == r["fill_bytes"], f"{where}: stats fill_bytes != the fill"
        for epoch in (0, 1):
            misses = sum(r["stats"][epoch]["misses"] for r in results)
            assert _fetched(results, epoch) == misses * row, \
                f"{where}, epoch {epoch}: {_fetched(results, epoch)} feature bytes counted for {misses} misses"
        fill = sum(r["bytes"][e].get("cache_fill", 0) for r in results for e in (0, 1))
        assert fill == sum(r["fill_bytes"] for r in results), f"{where}: counted cache_fill != reported fill_bytes"
        if world_size == 1:
            assert all(st["remote_rows"] == 0 for st in results[0]["stats"]), "1 rank: remote rows asked"


@stage_check
def check_cache_ratio_zero(stage: Any) -> None:
    """At ratio 0 the cache holds nothing: the same bytes and misses as no cache, no hits."""
    from workbench.cache import CACHES

    got, base = _cache_run(stage, 3, 0.0), _cache_run(CACHES["none"], 3, 0.5)
    for rank, (a, b) in enumerate(zip(got, base)):
        assert a["capacity"] == 0 and a["fill_bytes"] == 0, f"ratio 0: rank {rank} holds {a['capacity']} rows"
        assert a["bytes"] == b["bytes"], f"ratio 0: rank {rank} moved {a['bytes']}, without a cache {b['bytes']}"
        assert [(s["hits"], s["misses"]) for s in a["stats"]] == [(0, s["misses"]) for s in b["stats"]], \
            f"ratio 0: rank {rank}'s hits and misses differ from no cache"


@stage_check
def check_cache_ratio_one(stage: Any) -> None:
    """At ratio 1 training moves no feature bytes (a dynamic cache from the second epoch, once warm) and a
    static fill is every candidate row (a method whose capacity is always 0, ``none``, is skipped)."""
    if cache_policy(stage, 1.0).capacity(10) == 0:
        raise unittest.SkipTest(f"{stage_label(stage)} holds nothing at ratio 1")
    dynamic = getattr(_class(stage), "dynamic", False)
    results = _cache_run(stage, 3, 1.0)
    for epoch in range(1 if dynamic else 0, 2):
        assert _fetched(results, epoch) == 0, f"ratio 1, epoch {epoch}: {_fetched(results, epoch)} feature bytes"
        assert all(r["stats"][epoch]["misses"] == 0 for r in results), f"ratio 1, epoch {epoch}: misses"
    assert any(r["stats"][1]["hits"] for r in results), "ratio 1: no hits"
    if not dynamic:
        assert all(r["fill_bytes"] == r["num_candidates"] * _row_bytes() for r in results), \
            "ratio 1: the fill is not every candidate row"


@stage_check
def check_cache_deterministic(stage: Any) -> None:
    """Two runs with the same seed hold the same rows, move the same bytes and report the same stats."""
    def strip(rs):
        return [(r["cached"], r["bytes"], [{k: v for k, v in s.items() if k != "time"} for s in r["stats"]])
                for r in rs]

    a, b = _cache_run(stage, 2, 0.4, seed=3), _cache_run(stage, 2, 0.4, seed=3)
    assert strip(a) == strip(b), "two runs with the same seed differ"


# ------------------------------------------------------------------------------------------------ exchange
def _exchange_run(stage: Any, world_size: int, **options: Any) -> tuple:
    from workbench.compose import RunConfig

    g = tiny_graph(num_nodes=60, directed=True, seed=5)
    part = torch.arange(g.num_nodes) % world_size
    own = stage.config.to_dict() if not isinstance(stage, type) else {}
    with registered(stage, "exchange") as name:
        settings = {f"exchange.{k}": v for k, v in {**own, **options}.items()}
        cfg = RunConfig.compose(graph="tiny", exchange=name, model={"method": "sage", "num_layers": 3, "hidden": 8},
                                epochs=4, seed=2,
                                **settings)
        return run_program(cfg.build(graph=g, node_part=None if world_size == 1 else part), world_size)


@stage_check
def check_exchange(stage: Any) -> None:
    """Full-graph training of a 3-layer SAGE model on 3 thread ranks reproduces the single-process run (losses
    and weights to 1e-5); the bytes of every epoch, by kind, are the predicted ones."""
    import math

    single, _, _ = _exchange_run(stage, 1)
    multi, _, _ = _exchange_run(stage, 3)
    for epoch, (a, b) in enumerate(zip(multi["losses"], single["losses"])):
        assert math.isclose(a, b, rel_tol=1e-5), f"3 ranks: loss {a} in epoch {epoch}, single process {b}"
    try:
        assert_same_weights(multi, single)
    except AssertionError as exc:
        raise AssertionError(f"3 ranks: {exc} (one process)") from None
    assert multi["bytes_by_epoch"] == multi["predicted_bytes_by_epoch"] == [multi["predicted_bytes_per_epoch"]] * 4, \
        f"bytes by epoch {multi['bytes_by_epoch']}, predicted {multi['predicted_bytes_by_epoch']}"
    assert multi["bytes_per_epoch_by_kind"] == multi["predicted_bytes_per_epoch_by_kind"], \
        f"bytes by kind {multi['bytes_per_epoch_by_kind']}, predicted {multi['predicted_bytes_per_epoch_by_kind']}"


@stage_check
def check_exchange_staleness(stage: Any, staleness: str = "epoch-fixed", epsilon: float = 1) -> None:
    """Under a staleness policy the bytes stay the predicted ones, broadcasts are skipped, ages are bounded
    (skipped where the exchange refuses the policy: one with its own staleness)."""
    from workbench._validation import ParamError
    from workbench.events import Staleness

    try:
        _class(stage).Config(staleness=staleness, epsilon=epsilon)
    except ParamError:
        raise unittest.SkipTest(f"{stage_label(stage)} takes no staleness={staleness!r}") from None
    summary, _, events = _exchange_run(stage, 3, staleness=staleness, epsilon=epsilon)
    where = f"staleness={staleness}, epsilon={epsilon}"
    assert summary["bytes_by_epoch"] == summary["predicted_bytes_by_epoch"], \
        f"{where}: bytes by epoch {summary['bytes_by_epoch']}, predicted {summary['predicted_bytes_by_epoch']}"
    assert summary["broadcasts_skipped"] > 0 and summary["comm_reduction"] > 0, f"{where}: nothing was skipped"
    if staleness == "epoch-fixed":
        assert summary["max_age"] == epsilon, f"{where}: max age {summary['max_age']}"
    assert len([e for e in events if isinstance(e, Staleness)]) == 3 * 3 * 4, \
        f"{where}: not one Staleness event per rank, layer and epoch"


# ------------------------------------------------------------------------------------------------ model, schedule
@stage_check
def check_model(stage: Any) -> None:
    """The same seed builds the same model; its input widths are the ones the stage declares."""
    stage = _make(stage, hidden=5, num_layers=3)
    a, b = stage.build(in_dim=4, out_dim=2, seed=7), stage.build(in_dim=4, out_dim=2, seed=7)
    assert a.input_widths == stage.input_widths(4), f"built widths {a.input_widths}, declared {stage.input_widths(4)}"
    x = torch.randn(6, 4)
    assert torch.equal(a(x, lambda h, layer: h), b(x, lambda h, layer: h)), "the same seed gave two models"


@stage_check
def check_schedule(stage: Any) -> None:
    """Its coarse policy builds (a :class:`~workbench.schedule.executor.CoarsePolicy`)."""
    from workbench.schedule.executor import CoarsePolicy

    policy = _make(stage).policy()
    assert isinstance(policy, CoarsePolicy), f"policy() returned a {type(policy).__name__}, not a CoarsePolicy"


# ------------------------------------------------------------------------------------------------ sync
@stage_check
def check_sync(stage: Any) -> None:
    """On 2 thread ranks (karate, 3 epochs, the program it composes with from the defaults), the run trains
    (finite losses), names the method in its summary, and every rank ends with the same weights: what keeping
    the replicas together means."""
    from workbench.compose import RunConfig

    with registered(stage, "sync") as name:
        cfg = RunConfig.compose(graph="karate", num_parts=2, epochs=3,
                                model={"hidden": 8}).replace(sync=_make(stage).config)
        summary, results, _ = run_program(cfg.build(), 2)
    assert summary["stages"]["sync"]["method"] == name, f"the summary names sync {summary['stages']['sync']}"
    assert all(math.isfinite(v) for v in summary["losses"]), f"losses {summary['losses']}"
    for key, value in results[0]["params"].items():
        assert torch.equal(value, results[1]["params"][key]), f"ranks 0 and 1 end with different {key}"


# ------------------------------------------------------------------------------------------------ loss
def _loss_targets(stage: Any, rows: Any) -> Any:
    """Seeded targets of the kind ``stage`` takes, 8 rows (``rows``: which carry the loss; the divisor is 8)."""
    from workbench.train.objective import LinkTargets, NodeTargets

    gen = torch.Generator().manual_seed(0)
    if _class(stage).targets is LinkTargets:
        h, pos, neg = (torch.randn(*shape, generator=gen, dtype=torch.float64)
                       for shape in ((8, 4), (8, 4), (8, 3, 4)))
        h.requires_grad_(True)
        return LinkTargets(h[rows], pos[rows], neg[rows], 8), h
    logits = torch.randn(8, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    return NodeTargets(logits, torch.arange(8) % 3, rows, 8), logits


@stage_check
def check_loss_shares(stage: Any) -> None:
    """The ranks' shares add up: over 8 rows divided by 8, the loss of every row equals the sum of the losses of
    two halves (what makes the ranks' losses add up to the single-process loss); its gradient is finite; a step
    with no row gives a finite loss that backward() accepts."""
    obj = _make(stage)
    every, x = _loss_targets(stage, torch.arange(8))
    whole = obj.loss(every)
    assert whole.dim() == 0 and math.isfinite(float(whole.detach())), \
        f"the loss of 8 rows is {whole!r}, not a finite scalar"
    whole.backward()
    assert x.grad is not None and bool(torch.isfinite(x.grad).all()), "its gradient is missing or not finite"
    halves = sum(float(obj.loss(_loss_targets(stage, idx)[0])) for idx in (torch.arange(4), torch.arange(4, 8)))
    assert abs(halves - float(whole.detach())) <= 1e-9 * (1 + abs(float(whole.detach()))), \
        f"two halves' losses add up to {halves!r}, all rows give {float(whole.detach())!r}: ranks' shares would not add up"
    empty, _ = _loss_targets(stage, torch.arange(0))
    none = obj.loss(empty)
    assert math.isfinite(float(none)) and none.requires_grad, f"no row gives {none!r}, not a finite attached loss"


@stage_check
def check_loss_trains(stage: Any) -> None:
    """On 2 thread ranks (karate, 3 epochs; mini-batch training with a schedule for a link loss), the run trains
    with it: finite losses, and the summary names it."""
    from workbench.compose import RunConfig
    from workbench.train.objective import LinkTargets

    with registered(stage, "loss") as name:
        cfg = RunConfig.compose(graph="karate", num_parts=2, epochs=3,
                                model={"hidden": 8}).replace(loss=_make(stage).config)
        if _class(stage).targets is LinkTargets:
            cfg = cfg.with_strings({"sample.method": "neighbor", "sample.fanouts": "3,3", "schedule.method": "fifo",
                                    "schedule.workers": "1", "schedule.graph_store": "local"})
        summary, _, _ = run_program(cfg.build(), 2)
    assert summary["stages"]["loss"]["method"] == name, f"the summary names loss {summary['stages']['loss']}"
    assert all(math.isfinite(v) for v in summary["losses"]), f"losses {summary['losses']}"


# ------------------------------------------------------------------------------------------------ evaluate
_EVALUATION_RUNS = {   # what an evaluator needs -> settings of a run whose steps provide it
    "sampled evaluation": {"sample.method": "neighbor", "sample.fanouts": "3,3", "sample.batch_size": "8"},
    "one model per part": {"sample.method": "none", "sync.method": "model_avg"},
}


@stage_check
def check_evaluator(stage: Any) -> None:
    """On 2 thread ranks (karate, 3 epochs; the trainer whose steps provide what it requires), the run's metrics
    are global and in range (finite losses, accuracies in [0, 1] or None, the same on both ranks), the summary
    names it, and evaluation leaves training alone: the final weights equal those of the same run scored with
    ``outputs`` (no evaluation forward)."""
    from workbench.compose import RunConfig

    needs = set(getattr(_class(stage), "requires", ()))
    settings = next((v for k, v in _EVALUATION_RUNS.items() if k in needs), {})
    base = RunConfig.compose(graph="karate", num_parts=2, epochs=3, model={"hidden": 8}).with_strings(settings)
    with registered(stage, "evaluate") as name:
        summary, results, _ = run_program(base.replace(evaluate=_make(stage).config).build(), 2)
    plain, _, _ = run_program(base.replace(evaluate="outputs").build(), 2)
    assert summary["stages"]["evaluate"]["method"] == name, f"the summary names evaluate {summary['stages']['evaluate']}"
    assert all(math.isfinite(v) for v in summary["losses"]), f"losses {summary['losses']}"
    for key in ("train_acc", "val_acc", "test_acc"):
        per_rank = [r[key][-1] for r in results]
        assert per_rank[0] == per_rank[1], f"{key} differs between the ranks: {per_rank} (metrics must be global)"
        assert per_rank[0] is None or 0.0 <= per_rank[0] <= 1.0 or per_rank[0] != per_rank[0], f"{key} {per_rank[0]}"
    assert_same_weights(summary, plain)


# ------------------------------------------------------------------------------------------------ step
@stage_check
def check_step(stage: Any) -> None:
    """On 3 thread ranks (a 90-vertex graph, 2 epochs, the ``halo`` exchange), a run whose forward runs through this
    step reproduces the ``whole_part`` step's: the same losses and every rank's weights to 1e-5 (G3's bins change
    the order of summation only), and the summary names it."""
    from workbench.compose import RunConfig

    g = tiny_graph(num_nodes=90, seed=1)
    base = RunConfig.compose(graph="tiny", num_parts=3, partition="random", model={"hidden": 8}, epochs=2, seed=0)
    with registered(stage, "step") as name:
        ours = run_program(base.replace(step=_make(stage).config).build(graph=g), 3)
    whole = run_program(base.replace(step="whole_part").build(graph=g), 3)
    assert ours[0]["stages"]["step"]["method"] == name, f"the summary names step {ours[0]['stages']['step']}"
    assert_same_training(whole, ours)


# ------------------------------------------------------------------------------------------------ dispatch
def stage_checks(stage: Any, *, kind: str | None = None) -> Iterator[Callable[[Any], None]]:
    """The checks of ``stage``'s kind, in order: each a callable ``check(stage)``."""
    from workbench.stages import REGISTRIES

    kind = kind or stage_kind(stage)
    yield from CONFIG_CHECKS
    name = _name(stage)
    if name and name != "none" and REGISTRIES.get(kind, {}).get(name) is _class(stage):
        yield check_selectable
    if kind == "partition":
        yield check_partitioner
    elif kind == "sample" and _block_sampler(stage):
        yield from (check_sampler, check_sampler_seeded)
    elif kind == "cache":
        yield from (check_cache, check_cache_ratio_zero, check_cache_ratio_one, check_cache_deterministic)
    elif kind == "exchange":
        yield check_exchange
        for staleness, epsilon in (("epoch-fixed", 1), ("variation-gap", 0.05)):
            yield functools.partial(check_exchange_staleness, staleness=staleness, epsilon=epsilon)
    elif kind == "model":
        yield check_model
    elif kind == "schedule":
        yield check_schedule
    elif kind == "sync":
        yield check_sync
    elif kind == "loss":
        yield from (check_loss_shares, check_loss_trains)
    elif kind == "evaluate":
        yield check_evaluator
    elif kind == "step":
        yield check_step


def check_name(check: Callable[..., Any]) -> str:
    """A check's name for test ids: ``check_cache``, ``check_exchange_staleness(epoch-fixed,1)``."""
    if isinstance(check, functools.partial):
        return f"{check.func.__name__}({','.join(str(v) for v in check.keywords.values())})"
    return check.__name__


def check_stage(stage: Any, *, kind: str | None = None) -> None:
    """Run every check of ``stage``'s kind (``kind`` overrides the one found); checks that do not apply are
    skipped. Raises :class:`StageCheckFailed` (an ``AssertionError``) at the first failure."""
    for check in stage_checks(stage, kind=kind):
        try:
            check(stage)
        except unittest.SkipTest:
            continue


def parametrize_with_checks(stages: Iterable[Any]) -> Any:
    """A ``pytest.mark.parametrize("stage, check", ...)`` over every check of every stage, as scikit-learn's
    ``parametrize_with_checks``; the ids read ``KIND:NAME-CHECK``. Imports pytest (only this helper does).

    Example (in a test module)::

        @parametrize_with_checks([MyPartitioner, MyCache])
        def test_my_stages(stage, check):
            check(stage)
    """
    import pytest

    params = []
    for stage in stages:
        label = f"{stage_kind(stage)}:{_name(stage) or _class(stage).__qualname__}"
        params += [pytest.param(stage, check, id=f"{label}-{check_name(check)}") for check in stage_checks(stage)]
    return pytest.mark.parametrize("stage, check", params)
