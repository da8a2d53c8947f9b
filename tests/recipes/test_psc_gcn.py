"""The psc_gcn recipe: exactness against full-graph training, realised staleness, bytes per stream, JSON figures."""

from __future__ import annotations

import pytest

from recipes import full_graph, psc_gcn
from workbench.testing import assert_same_run

SMALL = dict(graph="sbm:num_nodes=300,num_blocks=4,avg_degree=8,degree_exponent=2.5,num_features=8,seed=0",
             epochs=5, model={"hidden": 8})


def _run(config, tmp_path, workers=3):
    from workbench.runtime import launch

    return launch(config, runner="local", workers=workers, out=str(tmp_path)).wait(timeout=300)


def _close(a: dict, b: dict) -> None:
    assert_same_run(a, b)


@pytest.mark.parametrize("method", ["psc", "uniform_edge"])
def test_epsilon_one_tau_zero_is_full_graph_training(method, tmp_path):
    ref = _run(full_graph.recipe(**SMALL), tmp_path)
    got = _run(psc_gcn.sync(**SMALL).with_strings({"sample.method": method}), tmp_path)
    _close(got, ref)
    assert got["staleness_realised"] == [0] * 5
    # accuracy is measured on the whole graph after the update: the next exact step's forward
    assert got["accuracy_by_epoch"]["val"][:-1] == pytest.approx(ref["accuracy_by_epoch"]["val"][1:])


def test_pipegcn_through_the_full_graph_program_without_a_sampler(tmp_path):
    """``prefetch`` is an ordinary exchange: with no sampler and tau = 1 the full-graph program runs PipeGCN."""
    a = _run(full_graph.recipe(**SMALL).with_strings({"exchange.method": "prefetch", "exchange.tau": "1"}), tmp_path)
    b = _run(psc_gcn.pipegcn(**SMALL), tmp_path)
    _close(a, b)
    assert a["max_age"] == 1 and a["bytes_by_epoch"] == a["predicted_bytes_by_epoch"]


@pytest.mark.parametrize("tau", [1, 2])
def test_realised_staleness_is_tau_after_warm_up(tau, tmp_path):
    cfg = psc_gcn.recipe(**SMALL).with_strings({"exchange.tau": str(tau), "sample.epsilon": "0.3"})
    s = _run(cfg, tmp_path)
    assert s["staleness_realised"] == [None] * tau + [tau] * (5 - tau)
    assert s["staleness_realised_backward"] == [None] * tau + [tau] * (5 - tau)


def test_bytes_per_stream_equal_the_digest_formulas(tmp_path):
    """The byte formulas of :mod:`workbench.train.prefetch` given the sampled sets, per iteration and rank,
    against what the transport counted."""
    from workbench.testing import run_program
    from workbench.train.edge_sampled import SampledEdges
    from workbench.train.full_graph import FullGraphTrainer

    cfg = psc_gcn.recipe(**SMALL).with_strings({"sample.epsilon": "0.3", "sample.refresh": "2", "exchange.tau": "1",
                                                "cache.ratio": "0.3", "model.num_layers": "3"})
    program = cfg.build()
    assert type(program.trainer) is FullGraphTrainer and isinstance(program.trainer.component, SampledEdges)
    summary, results, events = run_program(program, 3)
    exchanges = [r["fragments"]["exchange"] for r in results]   # each rank's prefetch exchange: records and sizes
    D, hidden = 8, [8, 8]
    for t in range(5):   # the transport counts at the sender, the records at the receiver: compare sums over ranks
        got = {k: sum(r["exchange_kind_bytes_by_epoch"][t][k] for r in results) for k in results[0]["exchange_kind_bytes_by_epoch"][t]}

        def total(key):
            return sum(x["prefetch_records"][t][key] for x in exchanges)
        assert got["prefetch_req"] == 8 * total("requested_rows")
        assert got["prefetch_fwd"] == total("sg_rows") * sum(hidden) * 4
        assert got["prefetch_bwd"] == total("tg_rows") * sum(hidden) * 4
        assert got["feature"] == total("feature_misses") * D * 4
        assert got["feature_req"] == total("feature_misses") * 8
        assert got["prefetch_stats"] == 4 * total("stats_rows")
        assert (total("stats_rows") > 0) == (t % 2 == 0)          # t = 0 included: features x initial weights
    rows = sum(x["prefetch_records"][0]["sg_rows"] for x in exchanges)
    assert summary["remote_feature_rows"][0] == rows
    misses = sum(x["prefetch_records"][0]["feature_misses"] for x in exchanges)
    assert summary["feature_bytes"][0] == misses * (D * 4 + 8)
    assert summary["cache_hit_rate"][0] == pytest.approx(1 - misses / rows)
    from workbench.events import CacheStats, SampleStats

    stats = [e for e in events if isinstance(e, CacheStats)]
    assert len(stats) == 3 * 5
    for t in range(5):   # the inclusion cache is re-ranked with the sampler's refresh; entering rows are counted
        moved = sum(r["exchange_kind_bytes_by_epoch"][t]["cache_refresh"] for r in results)
        assert moved == sum(e.refresh_bytes for e in stats if e.epoch == t)
        assert (moved > 0) <= (t % 2 == 0)
    assert sum(r["exchange_kind_bytes_by_epoch"][0]["cache_fill"] for r in results) == sum(
        {e.rank: e.fill_bytes for e in stats}.values())
    assert len([e for e in events if isinstance(e, SampleStats)]) == 3 * 5


def test_probabilities_at_t0_come_from_the_features_and_the_initial_weights(monkeypatch):
    """Before the first forward the sampler is not uniform: h_j = ||X_j W^(1)||^2 (the features and the
    initial weights, the first term of sum_l ||H_j^(l) W^(l+1)||^2), boundary h shipped by the owners, then Eq. 19."""
    import torch

    from workbench.data import load_graph
    from workbench.sample import SAMPLERS
    from workbench.testing import run_program
    from workbench.train.models import MODELS
    from workbench.train.prefetch import PrefetchRank

    cfg = psc_gcn.recipe(**{**SMALL, "epochs": 1}).with_strings({"sample.epsilon": "0.3", "exchange.tau": "1"})
    seen = []
    refresh = PrefetchRank._refresh

    def spy(self, t):
        refresh(self, t)
        seen.append((t, torch.cat([self.plan.inner_gid, self.plan.halo_gid]), self.p.clone(), self.edges))

    monkeypatch.setattr(PrefetchRank, "_refresh", spy)
    _, results, _ = run_program(cfg.build(), 2)
    g = load_graph(SMALL["graph"])
    w0 = MODELS.build(cfg.method("model"), cfg.model).build(in_dim=g.num_features, out_dim=g.num_classes,
                                                            seed=cfg.train.seed).neigh[0].weight.detach()
    h = (g.features @ w0.t()).double().pow(2).sum(1)                   # ||X_j W^(1)||^2 of every vertex
    sampler = SAMPLERS.build("psc", cfg.sample)
    assert sorted(t for t, *_ in seen) == [0, 0]
    for _, gids, p, edges in seen:
        torch.testing.assert_close(p, sampler.probabilities(edges, h[gids]), rtol=1e-5, atol=1e-9)
        other = ~edges.self_loop
        assert not torch.allclose(p[other], torch.full_like(p[other], 0.3))              # not Algorithm 2's line 2
        assert p[other].sum().item() == pytest.approx(0.3 * int(other.sum()), rel=1e-6)  # the same budget
    assert all(x["prefetch_records"][0]["stats_rows"] > 0 and x["prefetch_refreshes"][0]["estimates"]
               for x in (r["fragments"]["exchange"] for r in results))


def test_recipe_json_has_the_psc_figures(tmp_path):
    cfg = psc_gcn.recipe(**SMALL).with_strings({"sample.epsilon": "0.1", "exchange.tau": "2", "cache.method": "inclusion",
                                                "cache.ratio": "0.2", "sample.refresh": "2"})
    s = _run(cfg, tmp_path)
    for key in ("cache_hit_rate", "remote_feature_rows", "feature_bytes", "staleness_realised",
                "simulated_iteration_s", "variance", "expected_boundary_rows", "sampled_boundary_rows"):
        assert len(s[key]) == (3 if key == "variance" else 5), key
    refreshed = [v for v in s["variance"] if "variance_vr" in v]
    assert refreshed and all(v["variance_vr"] < v["variance_uniform"] for v in refreshed)
    sync = _run(psc_gcn.sync(**SMALL), tmp_path)
    assert s["bytes_per_epoch"] < sync["bytes_per_epoch"]
    assert max(s["simulated_iteration_s"][2:]) < min(sync["simulated_iteration_s"])


def test_non_prefetch_exchange_with_an_edge_sampler_is_refused():
    from workbench._validation import ParamError

    with pytest.raises(ParamError, match="'exchange.method' parameter of RunConfig must be a method that full-graph "
                                         "training on sampled edges can use: 'halo' needs .*whole parts"):
        psc_gcn.recipe(**SMALL).with_strings({"exchange.method": "halo"}).build()   # before anything is loaded


@pytest.mark.parametrize("settings", [
    {"sample.method": "nodewise"}, {"sample.method": "bns", "cache.method": "degree"},
    {"sample.estimator": "features", "cache.method": "random"}, {"sample.estimator": "none", "exchange.full_eval": "false"},
    {"model.method": "sage", "cache.method": "none"}])
def test_every_edge_sampler_and_option_trains(settings, tmp_path):
    import math

    cfg = psc_gcn.recipe(**SMALL).with_strings({"sample.epsilon": "0.3", "exchange.tau": "1", "sample.refresh": "2",
                                                **settings})
    s = _run(cfg, tmp_path, workers=2)
    assert all(math.isfinite(x) for x in s["losses"]) and s["staleness_realised"][1:] == [1] * 4
    assert s["sample"] == cfg.method("sample") and s["accuracy"]["test"] is not None
