"""A lone rank keeps its first layer's aggregate of the features (``RankExchange.aggregate``): ``Â`` and ``X``
never change and an aggregate-first layer 0 without dropout reads ``X`` itself, so ``Â X`` is computed once and the
run is bit for bit the run that recomputes it every epoch. Dropout, a transform-first first layer, several ranks
and exchanges whose ``Â`` changes (sampled edges) recompute it."""

from __future__ import annotations

import threading

import pytest
import torch

from workbench.compose import RunConfig
from workbench.events import ListSink
from workbench.runtime.runners import RunEnv, run_inprocess
from workbench.testing import tiny_graph
from workbench.train.full_graph import _HaloRank

EPOCHS = 4


def _run(world_size: int, monkeypatch, keep: bool = True, **model) -> tuple[dict, list, int]:
    """Summary, rank results and the number of layer-0 aggregations rank 0 computed."""
    calls = []
    original = _HaloRank._aggregate

    def counted(self, h, layer):
        if layer == 0 and self.ctx.rank == 0:
            calls.append(self.epoch)
        return original(self, h, layer)

    monkeypatch.setattr(_HaloRank, "_aggregate", counted)
    monkeypatch.setattr(_HaloRank, "fixed_aggregator", keep)
    cfg = RunConfig.compose(graph="tiny_graph", num_parts=world_size, epochs=EPOCHS, seed=0,
                            model={"method": "gcn", "hidden": 8, **model}, train={"optimizer": "sgd", "lr": 0.5})
    program = cfg.build(graph=tiny_graph())
    sink = ListSink()
    payloads = program.prepare(world_size, sink.emit)
    env = RunEnv(run_id="t", world_size=world_size, emit=sink.emit, stop_flag=threading.Event(), timeout_s=60.0,
                 device="cpu")
    results = [o.result for o in sorted(run_inprocess(program, payloads, env), key=lambda o: o.rank)]
    return program.summarize(results), results, len(calls)


def _same(a: tuple, b: tuple) -> None:
    assert list(a[0]["losses"]) == list(b[0]["losses"])
    assert a[0]["accuracy_by_epoch"] == b[0]["accuracy_by_epoch"]
    for k, v in a[1][0]["params"].items():
        assert torch.equal(v, b[1][0]["params"][k]), k


def test_a_lone_rank_aggregates_the_features_once(monkeypatch):
    kept = _run(1, monkeypatch, order="aggregate-first")
    assert kept[2] == 1
    recomputed = _run(1, monkeypatch, keep=False, order="aggregate-first")
    assert recomputed[2] >= EPOCHS
    _same(kept, recomputed)


@pytest.mark.parametrize("model", [{"dropout": 0.5, "order": "aggregate-first"}, {"hidden": 2}],
                         ids=["dropout", "transform-first"])
def test_what_changes_every_epoch_is_aggregated_every_epoch(monkeypatch, model):
    kept = _run(1, monkeypatch, **model)
    assert kept[2] >= EPOCHS
    _same(kept, _run(1, monkeypatch, keep=False, **model))


def test_several_ranks_aggregate_the_exchanged_rows_every_epoch(monkeypatch):
    assert _run(2, monkeypatch, order="aggregate-first")[2] >= EPOCHS
