"""Every rank of the halo exchange keeps its first layer's aggregate of the features (``RankExchange.aggregate``):
``Â`` and ``X`` never change and an aggregate-first layer 0 without dropout reads ``X`` itself, so every row it
aggregates (owned, received, or a stale or pinned copy) is a row of ``X`` and ``Â [X; X_halo]`` is multiplied once.
The rows are still exchanged as the program sends them. The run is bit for bit the run that multiplies every epoch:
losses, accuracies, weights and bytes by kind. Dropout and a transform-first first layer multiply every epoch."""

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


def _run(world_size: int, monkeypatch, keep: bool = True, exchange: dict | None = None, **model) -> tuple:
    """Summary, rank results and the number of layer-0 products rank 0 computed."""
    calls = []
    original = _HaloRank._multiply

    def counted(self, rows, layer):
        if layer == 0 and self.ctx.rank == 0:
            calls.append(self.epoch)
        return original(self, rows, layer)

    monkeypatch.setattr(_HaloRank, "_multiply", counted)
    monkeypatch.setattr(_HaloRank, "fixed_aggregator", keep)
    sections = {"exchange": {"method": "halo", **exchange}} if exchange else {}
    cfg = RunConfig.compose(graph="tiny_graph", num_parts=world_size, epochs=EPOCHS, seed=0,
                            model={"method": "gcn", "hidden": 8, **model}, train={"optimizer": "sgd", "lr": 0.5},
                            **sections)
    program = cfg.build(graph=tiny_graph())
    sink = ListSink()
    payloads = program.prepare(world_size, sink.emit)
    env = RunEnv(run_id="t", world_size=world_size, emit=sink.emit, stop_flag=threading.Event(), timeout_s=60.0,
                 device="cpu")
    results = [o.result for o in sorted(run_inprocess(program, payloads, env), key=lambda o: o.rank)]
    return program.summarize(results).to_dict(), results, len(calls)


def _same(a: tuple, b: tuple) -> None:
    for key in ("losses", "accuracy_by_epoch", "bytes_by_kind", "broadcasts_skipped"):
        assert a[0].get(key) == b[0].get(key), key
    for r, (ra, rb) in enumerate(zip(a[1], b[1], strict=True)):
        for k, v in ra["params"].items():
            assert torch.equal(v, rb["params"][k]), (r, k)


@pytest.mark.parametrize("world_size,exchange", [
    (1, None), (2, None), (3, None),
    (2, {"staleness": "epoch-fixed", "epsilon": 2}),
    (2, {"staleness": "variation-gap", "epsilon": 0.1}),
    (2, {"pin_static_input": True}),
], ids=["1-rank", "2-ranks", "3-ranks", "epoch-fixed", "variation-gap", "pinned"])
def test_the_features_aggregate_is_multiplied_once(monkeypatch, world_size, exchange):
    kept = _run(world_size, monkeypatch, exchange=exchange)
    assert kept[2] == 1
    multiplied = _run(world_size, monkeypatch, keep=False, exchange=exchange)
    assert multiplied[2] >= EPOCHS
    _same(kept, multiplied)


@pytest.mark.parametrize("model", [{"dropout": 0.5}, {"hidden": 2}], ids=["dropout", "transform-first"])
def test_what_changes_every_epoch_is_multiplied_every_epoch(monkeypatch, model):
    kept = _run(2, monkeypatch, **model)
    assert kept[2] >= EPOCHS
    _same(kept, _run(2, monkeypatch, keep=False, **model))
