"""SANCUS skip-broadcast: staleness bounds, flags, gradients never skipped, and the paper's effect."""

from __future__ import annotations

import pytest
import torch

from workbench._validation import ParamError
from workbench.compose import RunConfig
from workbench.events import Staleness
from workbench.testing import assert_same_run, run_program, tiny_graph
from workbench.train.block_row import clip_threshold
from workbench.train.sancus import variation_gap

P = 3


@pytest.fixture(scope="module")
def setup():
    g = tiny_graph(num_nodes=90)
    part = torch.arange(g.num_nodes) % P
    return g, part


def _run(setup, **kw):
    g, part = setup
    exchange = {"method": "block_row", **kw.pop("exchange", {})}
    cfg = RunConfig.compose(exchange=exchange, graph="tiny", epochs=kw.pop("epochs", 6), model={"hidden": 8}, **kw)
    return run_program(cfg.build(graph=g, node_part=part), P)


def test_none_is_the_cagnet_baseline(setup):
    summary, _, events = _run(setup, exchange={"staleness": "none"})
    assert summary["comm_reduction"] == 0.0
    assert "staleness" not in summary.fragments and "broadcasts_skipped" not in summary   # no policy, no SANCUS keys
    assert "control" not in summary["bytes_by_kind"] or summary["bytes_by_kind"]["control"] < 100
    st = [e for e in events if isinstance(e, Staleness)]
    assert len(st) == P * 2 * 6 and all(e.state == "ACTIVE" and max(e.ages) == 0 for e in st)


@pytest.mark.parametrize("eps", [1, 2])
def test_epoch_fixed_period_and_age_bound(setup, eps):
    base, _, _ = _run(setup, exchange={"staleness": "none"})
    summary, _, events = _run(setup, exchange={"staleness": "epoch-fixed", "epsilon": eps})
    skipped = summary["broadcast_skipped"]        # [epoch][layer][rank]
    for e, layers in enumerate(skipped):
        for flags in layers:
            assert flags == [e % (eps + 1) != 0] * P   # broadcast every eps + 1 epochs
    assert summary["max_age"] == eps
    assert all(max(ev.ages) <= eps for ev in events if isinstance(ev, Staleness))
    # gradients are never skipped: backward broadcast bytes equal the baseline's
    assert summary["bytes_by_kind"]["bcast_bwd"] == base["bytes_by_kind"]["bcast_bwd"]
    assert summary["bytes_by_kind"]["bcast_fwd"] < base["bytes_by_kind"]["bcast_fwd"]
    assert summary["comm_reduction"] > 0
    # flags are agreed with a tiny all-gather per layer (kind "control")
    assert summary["bytes_by_kind"]["control"] > 0


def test_epoch_adaptive_staggers_roots(setup):
    summary, _, _ = _run(setup, exchange={"staleness": "epoch-adaptive", "epsilon": 1}, epochs=5)
    first_layer = [layers[0] for layers in summary["broadcast_skipped"]]
    assert first_layer[0] == [False] * P          # everyone broadcasts into the empty caches
    assert first_layer[1] != first_layer[2]        # roots out of phase
    assert summary["max_age"] <= 1
    plain, _, _ = _run(setup, exchange={"staleness": "epoch-adaptive", "epsilon": 1, "stagger": False}, epochs=5)
    fixed, _, _ = _run(setup, exchange={"staleness": "epoch-fixed", "epsilon": 1}, epochs=5)
    assert plain["broadcast_skipped"] == fixed["broadcast_skipped"]   # lock-step BSP: A == E


def test_variation_gap_and_cap(setup):
    loose, _, events = _run(setup, exchange={"staleness": "variation-gap", "epsilon": 0.5}, epochs=6)
    tight, _, _ = _run(setup, exchange={"staleness": "variation-gap", "epsilon": 0.0}, epochs=6)
    assert loose["broadcasts_skipped"] > tight["broadcasts_skipped"]
    gaps = [e.gap for e in events if isinstance(e, Staleness) and e.epoch > 0]
    assert all(g is not None and g >= 0 for g in gaps)
    capped, _, _ = _run(setup, exchange={"staleness": "variation-gap", "epsilon": 10.0, "max_skip": 1}, epochs=6)
    assert capped["max_age"] <= 1


def test_pin_static_input(setup):
    summary, _, events = _run(setup, exchange={"staleness": "epoch-fixed", "epsilon": 1, "pin_static_input": True},
                              epochs=4)
    layer0 = [layers[0] for layers in summary["broadcast_skipped"]]
    assert layer0[0] == [False] * P and all(flags == [True] * P for flags in layer0[1:])
    assert all(max(e.ages) == 0 for e in events if isinstance(e, Staleness) and e.layer == 0)


def test_staleness_zero_equals_baseline(setup):
    base, rb, _ = _run(setup, exchange={"staleness": "none"}, epochs=3)
    zero, rz, _ = _run(setup, exchange={"staleness": "epoch-fixed", "epsilon": 0}, epochs=3)
    assert zero["broadcasts_skipped"] == 0
    assert zero["losses"] == pytest.approx(base["losses"], rel=1e-6)


def test_weight_grad_forms_agree_without_staleness(setup):
    exact, _, _ = _run(setup, exchange={"staleness": "none"}, epochs=3)
    cagnet, _, _ = _run(setup, exchange={"staleness": "none", "weight_grad": "cagnet"}, epochs=3)
    assert cagnet["losses"] == pytest.approx(exact["losses"], rel=1e-5)
    assert cagnet["bytes_by_kind"]["bcast_bwd"] > exact["bytes_by_kind"]["bcast_bwd"]


def test_gradient_clipping_scaling():
    assert clip_threshold(1.0, 4, "sqrt_p") == 2.0
    assert clip_threshold(1.0, 4, "inv_sqrt_p") == 0.5


def test_clipping_runs_and_changes_training(setup):
    base, _, _ = _run(setup, exchange={"staleness": "none"}, epochs=3)
    clipped, _, _ = _run(setup, exchange={"staleness": "none", "clip_threshold": 1e-4}, epochs=3,
                         train={"optimizer": "sgd"})
    assert clipped["losses"][0] == pytest.approx(base["losses"][0])
    assert clipped["losses"][-1] != pytest.approx(base["losses"][-1])


def test_variation_gap_norms():
    sent = torch.ones(4, 2)
    assert variation_gap(sent * 1.1, sent) == pytest.approx(0.1, rel=1e-5)
    assert variation_gap(sent * 1.1, sent, "mean_abs") == pytest.approx(0.1, rel=1e-5)
    assert variation_gap(sent, None) is None


def test_bad_epsilon():
    with pytest.raises(ParamError, match="epsilon"):
        RunConfig.compose(exchange={"method": "block_row", "staleness": "epoch-fixed", "epsilon": 1.5})
    with pytest.raises(ParamError, match="staleness"):
        RunConfig.compose(exchange={"method": "block_row", "staleness": "sometimes"})


def test_paper_effect_on_sbm():
    """Skipping cuts broadcast traffic, more for larger eps, at the baseline's accuracy (fresh forward passes;
    the paper's Figs. 23-24b: within 0.005)."""
    from workbench.data import load_graph

    g = load_graph("sbm:num_nodes=400,num_blocks=4,avg_degree=8,num_features=16,seed=0")
    kw = dict(graph="sbm", epochs=20, model={"hidden": 16}, train={"lr": 0.02}, partition="metis", seed=0,
              evaluate={"method": "whole_part", "fresh": "always"})
    results = {}
    for staleness, eps in [("none", 0), ("epoch-fixed", 1), ("epoch-fixed", 2), ("epoch-fixed", 3),
                           ("variation-gap", 0.05)]:
        cfg = RunConfig.compose(exchange={"method": "block_row", "staleness": staleness, "epsilon": eps}, **kw)
        summary, _, _ = run_program(cfg.build(graph=g), 4)
        results[(staleness, eps)] = summary
    red = [results[("epoch-fixed", e)]["comm_reduction"] for e in (1, 2, 3)]
    assert 0 < red[0] < red[1] < red[2] < 1
    assert results[("variation-gap", 0.05)]["comm_reduction"] > 0
    base_acc = results[("none", 0)]["accuracy"]["test"]
    for summary in results.values():
        assert summary["accuracy"]["test"] >= base_acc - 0.005


def test_accuracy_is_a_fresh_forward_that_leaves_training_alone():
    """A stale run's accuracy is the model's after the update, from a forward pass with every block
    fresh (every round executed, counted as ``eval_bcast_fwd``), not the stale training forward; the training
    losses, weights, bytes and skipped rounds are those of the run without that pass."""
    from workbench.data import load_graph
    from workbench.train.models import MODELS, edge_weights, with_self_loops

    g = load_graph("sbm:num_nodes=400,num_blocks=4,avg_degree=8,num_features=16,seed=0")
    cfg = RunConfig.compose(exchange={"method": "block_row", "staleness": "epoch-fixed", "epsilon": 2}, graph="sbm",
                            epochs=6, model={"hidden": 16}, train={"lr": 0.02}, partition="metis", seed=0)
    fresh, results, _ = run_program(cfg.build(graph=g), 4)
    # the reference: the final weights on the whole graph, one dense aggregation
    stage = MODELS.build(cfg.method("model"), cfg.model)
    model = stage.build(in_dim=g.num_features, out_dim=g.num_classes, seed=0)
    model.load_state_dict(results[0]["params"])
    n = g.num_nodes
    src, dst = with_self_loops(stage, *g.edges(), torch.arange(n))
    adj = torch.sparse_coo_tensor(torch.stack([dst, src]), edge_weights(stage, src, dst,
                                  g.in_degrees()[dst], g.out_degrees()[src]), (n, n)).coalesce()
    model.eval()
    with torch.no_grad():
        hit = model(g.features, lambda h, layer: torch.sparse.mm(adj, h), None).argmax(1) == g.labels
    for k in ("train", "val", "test"):
        m = getattr(g, f"{k}_mask")
        assert fresh["accuracy"][k] == pytest.approx(int(hit[m].sum()) / int(m.sum()), abs=1e-12)
    per_epoch = fresh["predicted_bytes_per_epoch_by_kind"]["bcast_fwd"]
    assert fresh["bytes_by_kind"]["eval_bcast_fwd"] == 6 * per_epoch             # every round, every epoch
    assert not {k for k in fresh["bytes_by_kind"] if k.startswith("eval_")} - {"eval_bcast_fwd"}

    stale, _, _ = run_program(cfg.replace(evaluate="outputs").build(graph=g), 4)   # the stale training forward
    assert_same_run(stale, fresh, rtol=0)
    for key in ("bytes_by_epoch", "broadcast_skipped", "max_age", "cache_bytes"):
        assert stale[key] == fresh[key], key
    assert not any(k.startswith("eval_") for k in stale["bytes_by_kind"])
    assert stale["accuracy_by_epoch"] != fresh["accuracy_by_epoch"]


@pytest.mark.parametrize("eps", [1, 2])
def test_skipg_skips_gradient_blocks_only(setup, eps):
    """SkipG (only named in the paper; here stale gradient blocks): backward blocks every eps + 1 epochs,
    forward blocks always, ages <= eps."""
    base, _, _ = _run(setup, exchange={"staleness": "none"}, epochs=6)
    summary, _, events = _run(setup, exchange={"staleness": "epoch-fixed", "epsilon": eps, "skip": "gradients"},
                              epochs=6)
    kinds, base_kinds = summary["bytes_by_kind"], base["bytes_by_kind"]
    assert kinds["bcast_fwd"] == base_kinds["bcast_fwd"]  # embeddings never skipped
    # only layer 2's gradients are broadcast at all (layer 1's input X needs none): skipped in the epochs
    # e % (eps + 1) != 0, so the backward bytes shrink to the fraction of epochs that broadcast
    sent_epochs = sum(1 for e in range(6) if e % (eps + 1) == 0)
    assert kinds["bcast_bwd"] * 6 == base_kinds["bcast_bwd"] * sent_epochs
    for e, (first, second) in enumerate(summary["broadcast_skipped"]):
        assert first == [False] * P and second == [e % (eps + 1) != 0] * P
    assert all(max(ev.ages) <= eps and ev.gap is None for ev in events if isinstance(ev, Staleness))
    assert summary["losses"] != base["losses"]  # stale gradients change training


def test_skipg_needs_the_epoch_bound_and_exact_gradients():
    with pytest.raises(ParamError, match="'staleness'.*skip='gradients'"):
        RunConfig.compose(exchange={"method": "block_row", "skip": "gradients", "staleness": "variation-gap",
                                    "epsilon": 0.1}, graph="karate").validate()
    with pytest.raises(ParamError, match="'weight_grad'"):
        RunConfig.compose(exchange={"method": "block_row", "staleness": "epoch-fixed", "skip": "gradients",
                                    "weight_grad": "cagnet"}, graph="karate").validate()
    with pytest.raises(ParamError, match="'skip'.*Got 'weights'"):
        RunConfig.compose(exchange={"method": "block_row", "staleness": "epoch-fixed", "skip": "weights"},
                          graph="karate").validate()


@pytest.mark.parametrize("method", ["block_row", "halo"])
def test_a_policys_options_are_refused_under_another_policy(method):
    """``epsilon`` (with no policy), ``max_skip`` (variation-gap's cap) and ``stagger=False`` (epoch-adaptive's) would
    be ignored under another staleness: refused, naming the option, the value and the policy that reads it."""
    def compose(**exchange):
        return RunConfig.compose(exchange={"method": method, **exchange}, graph="karate").validate()

    with pytest.raises(ParamError, match=r"'epsilon' parameter .* must be 0 or its default 1 with staleness='none'"
                                         r".* Got 3.0"):
        compose(epsilon=3)
    with pytest.raises(ParamError, match=r"'max_skip' .* must be None with staleness='epoch-fixed' \(a cap of "
                                         r"staleness='variation-gap'\). Got 2"):
        compose(staleness="epoch-fixed", max_skip=2)
    with pytest.raises(ParamError, match=r"'stagger' .* must be True with staleness='variation-gap' .* Got False"):
        compose(staleness="variation-gap", epsilon=0.1, stagger=False)
    with pytest.raises(ParamError, match=r"'gap_norm' .* with staleness='none'"):
        compose(gap_norm="mean_abs")
    compose(epsilon=0)                                                    # CAGNET's exact run (sancus.exact)
    compose(staleness="epoch-fixed", gap_norm="mean_abs")                 # every policy reports the gap
    compose(staleness="variation-gap", epsilon=0.1, max_skip=2)
    compose(staleness="epoch-adaptive", stagger=False)
