"""Staleness as a policy of the halo exchange: bytes of every epoch predicted exactly, ages bounded, events."""

from __future__ import annotations

import pytest
import torch

from workbench.compose import RunConfig
from workbench.events import Staleness
from workbench.testing import run_program, tiny_graph
from workbench.layout.halo import comm_rows_from_parts
from workbench.train.models import MODELS
from workbench.train.staleness import epoch_fixed_flags, predicted_bytes_by_epoch


@pytest.fixture(scope="module")
def graph():
    return tiny_graph(num_nodes=90)


def _run(graph, world_size, epochs=6, exchange=None, model=None):
    part = torch.arange(graph.num_nodes) % world_size
    cfg = RunConfig.compose(graph="tiny", epochs=epochs, model={"hidden": 8, "num_layers": 3, **(model or {})},
                            exchange=exchange or {})
    return run_program(cfg.build(graph=graph, node_part=part), world_size), part


def _counted_by_epoch(results, kinds=("halo_fwd", "halo_bwd")):
    epochs = len(results[0]["exchange_kind_bytes_by_epoch"])
    return [sum(r["exchange_kind_bytes_by_epoch"][e][k] for r in results for k in kinds) for e in range(epochs)]


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("eps", [1, 2])
def test_epoch_fixed_bytes_of_every_epoch_are_predicted(graph, world_size, eps):
    (summary, results, events), part = _run(graph, world_size, exchange={"staleness": "epoch-fixed", "epsilon": eps})
    flags = epoch_fixed_flags(6, 3, world_size, eps)
    assert [[[not s for s in layer] for layer in ep] for ep in summary["broadcast_skipped"]] == flags
    comm = comm_rows_from_parts(graph, part, world_size)          # (P, P) rows p sends q per layer
    stage = MODELS.build("gcn", hidden=8, num_layers=3)
    widths = stage.exchange_widths(graph.num_features, graph.num_classes)
    predicted = predicted_bytes_by_epoch(flags, comm.sum(axis=1).tolist(), widths,
                                         backward_rows=comm.sum(axis=0).tolist(),
                                         backward_widths=stage.backward_widths(graph.num_features, graph.num_classes))
    counted = _counted_by_epoch(results)
    assert counted == predicted == summary["predicted_bytes_by_epoch"] == summary["bytes_by_epoch"]
    # exact epochs move the whole halo, stale epochs only the gradients (never skipped, as in SANCUS; H4)
    exact = summary["predicted_bytes_per_epoch"]
    assert counted[0] == exact and all(c < exact for e, c in enumerate(counted) if e % (eps + 1))
    assert summary["bytes_by_kind"]["halo_bwd"] == 6 * summary["predicted_bytes_per_epoch_by_kind"]["halo_bwd"]
    assert summary["max_age"] == eps and summary["bytes_by_kind"]["control"] > 0
    st = [e for e in events if isinstance(e, Staleness)]
    assert len(st) == world_size * 3 * 6 and all(max(e.ages) <= eps for e in st)
    assert {e.state for e in st if e.epoch % (eps + 1)} == {"STALE"}


def test_epsilon_zero_is_the_exact_run(graph):
    (exact, r0, _), _ = _run(graph, 3, epochs=3)
    (zero, rz, _), _ = _run(graph, 3, epochs=3, exchange={"staleness": "epoch-fixed", "epsilon": 0})
    assert zero["losses"] == pytest.approx(exact["losses"], rel=1e-6)
    assert zero["bytes_by_epoch"] == exact["bytes_by_epoch"] == [exact["predicted_bytes_per_epoch"]] * 3


def test_stale_halo_changes_training_but_still_learns(graph):
    (exact, _, _), _ = _run(graph, 3, epochs=8)
    (stale, _, _), _ = _run(graph, 3, epochs=8, exchange={"staleness": "epoch-fixed", "epsilon": 1})
    assert stale["losses"][0] == pytest.approx(exact["losses"][0])     # epoch 0 sends everything
    assert stale["losses"] != pytest.approx(exact["losses"])
    assert stale["losses"][-1] < stale["losses"][0]
    assert 0 < stale["comm_reduction"] < 1


@pytest.mark.parametrize("settings", [{"staleness": "epoch-adaptive", "epsilon": 1},
                                      {"staleness": "variation-gap", "epsilon": 0.05},
                                      {"staleness": "epoch-fixed", "epsilon": 1, "skip": "gradients"},
                                      {"staleness": "epoch-fixed", "epsilon": 2, "pin_static_input": True}])
def test_every_policy_predicts_its_bytes_from_the_agreed_flags(graph, settings):
    (summary, results, _), _ = _run(graph, 3, exchange=settings)
    assert _counted_by_epoch(results) == summary["predicted_bytes_by_epoch"] == summary["bytes_by_epoch"]
    if settings.get("skip") == "gradients":
        assert summary["bytes_by_kind"]["halo_fwd"] == 6 * summary["predicted_bytes_per_epoch_by_kind"]["halo_fwd"]
        assert summary["bytes_by_kind"]["halo_bwd"] < 6 * summary["predicted_bytes_per_epoch_by_kind"]["halo_bwd"]
    else:
        assert summary["broadcasts_skipped"] > 0


def test_cli_mix_runs(tmp_path, capsys):
    import json

    from workbench.cli import main

    code = main(["run", "full_graph", "--graph", "karate", "--workers", "2", "--runner", "local", "--epochs", "4",
                 "--out", str(tmp_path), "--json", "--set", "exchange.staleness=epoch-fixed",
                 "--set", "exchange.epsilon=1"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["exchange"] == "halo" and summary["staleness"] == "epoch-fixed"
    assert summary["bytes_by_epoch"] == summary["predicted_bytes_by_epoch"]
    assert summary["bytes_by_epoch"][1] < summary["bytes_by_epoch"][0] == summary["bytes_by_epoch"][2]


@pytest.mark.parametrize("world_size", [2, 3])
def test_pinned_input_rows_are_a_first_layer_cache_without_any_staleness(graph, world_size):
    """``exchange.pin_static_input`` with staleness ``none`` (it was silently ignored there): the first layer's
    remote input rows move in the first epoch only (a cache of every one of them), every other layer every
    epoch, the counted bytes equal the prediction from the agreed flags, and training is the exact run's."""
    (exact, _, _), part = _run(graph, world_size, epochs=4, model={"order": "aggregate-first"})
    (pinned, results, _), _ = _run(graph, world_size, epochs=4, model={"order": "aggregate-first"},
                                   exchange={"pin_static_input": True})
    assert pinned["losses"] == pytest.approx(exact["losses"], rel=1e-6)
    comm = comm_rows_from_parts(graph, part, world_size)
    first_layer = int(comm.sum()) * graph.num_features * 4              # layer 0's forward rows, float32
    full = exact["predicted_bytes_per_epoch"]
    assert pinned["bytes_by_epoch"] == [full] + [full - first_layer] * 3 == pinned["predicted_bytes_by_epoch"]
    assert _counted_by_epoch(results) == pinned["bytes_by_epoch"]


def test_a_cache_under_full_graph_training_points_to_the_pinned_input():
    from workbench._validation import ParamError
    from workbench.compose import RunConfig

    with pytest.raises(ParamError, match=r"'cache.method' parameter of RunConfig .* exchange.pin_static_input=true "
                                         r"caches all of them"):
        RunConfig.compose(graph="karate", cache="degree").build()
    with pytest.raises(ParamError, match="'pin_static_input' parameter of PrefetchExchange.Config must be False"):
        RunConfig.compose(graph="karate", sample="psc", exchange="prefetch").with_strings(
            {"exchange.pin_static_input": "true"})
