"""CATGNN's model-averaging program: 1 part equals centralised training, counted averaging traffic, halo hops."""

from __future__ import annotations

import pytest
import torch

from workbench._validation import ParamError
from workbench.runtime import launch
from workbench.testing import assert_same_weights
from workbench.train.models import MODELS

SMALL = "sbm:num_nodes=300,num_blocks=4,avg_degree=6,num_features=8,seed=0"


def _run(cfg, workers):
    return launch(cfg, runner="local", workers=workers, out=None).wait(timeout=300)


def test_one_part_equals_centralised_training():
    from recipes import catgnn, full_graph

    ours = _run(catgnn.recipe(graph=SMALL, epochs=6, num_parts=1, model={"hidden": 8}, **{"sync.interval": 1}), 1)
    central = _run(full_graph.recipe(graph=SMALL, epochs=6, num_parts=1, model={"hidden": 8}), 1)
    assert ours["losses"] == pytest.approx(central["losses"], rel=1e-5)
    # Same weights after training. (Accuracies differ by one update: the centralised loop scores the logits of
    # the epoch's step, before the update; CATGNN scores the (averaged) model after the epoch, on the full graph.)
    assert_same_weights(ours, central)
    assert ours["bytes_by_kind"].get("model_avg", 0) == 0


@pytest.mark.parametrize("num_parts,workers", [(2, 2), (3, 2)])
def test_averaging_traffic_is_params_times_4_times_ring_factor(num_parts, workers):
    from recipes import catgnn

    s = _run(catgnn.recipe(graph=SMALL, epochs=4, num_parts=num_parts, model={"hidden": 8}, **{"sync.interval": 2}),
             workers)
    p = workers
    per_sync = p * (2 * (p - 1) * 4 * s["num_params"] // p)
    assert s["num_syncs"] == 2 and s["bytes_by_kind"]["model_avg"] == 2 * per_sync == s["predicted_model_avg_bytes"]
    assert sum(part["alpha"] for part in s["parts"]) == pytest.approx(1.0)
    assert 0 <= s["best_epoch"] < 4 and s["best_val_acc"] >= s["accuracy_by_epoch"]["val"][-1] - 1e-12


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_part_scales_factor_the_weights_and_dgl_trains_as_numba(model, monkeypatch):
    """Each part's local ``Â`` carries ``(r, c)`` with ``w == r[rows] * c[cols]`` (large parts on CPU take
    DGL's unweighted kernel, the faster one); forced on this small graph, it trains exactly as the compiled loop."""
    from recipes import catgnn
    from workbench.data import load_graph
    from workbench.train.model_averaging import part_subgraph

    g = load_graph(SMALL)
    part = torch.arange(g.num_nodes) % 3
    for p in range(3):
        s = part_subgraph(g, part, p, 1, MODELS.build(model))
        r, c = s.agg_scales
        assert r.shape == c.shape == (s.num_local,)
        torch.testing.assert_close(r[s.agg_rows] * c[s.agg_cols], s.agg_weights.to(torch.float32))
    pytest.importorskip("dgl")
    make = catgnn.recipe if model == "gcn" else catgnn.sage
    cfg = make(graph=SMALL, epochs=4, num_parts=3, model={"hidden": 8}, **{"sync.interval": 2})
    reference = _run(cfg.with_strings({"train.kernel": "numba"}), 2)
    forced = _run(cfg.with_strings({"train.kernel": "dgl"}), 2)
    assert forced["losses"] == pytest.approx(reference["losses"], rel=1e-5)
    assert_same_weights(forced, reference)


def test_part_subgraph_halo_hops(karate):
    from workbench.partition import partition
    from workbench.train.model_averaging import part_subgraph

    node_part = partition(karate, 3, method="spring").node_part
    src, dst = karate.edges()
    shards = {k: part_subgraph(karate, node_part, 0, k, MODELS.build("sage")) for k in (0, 1, 2)}
    s1 = shards[1]
    owned = s1.gid[:s1.num_owned]
    assert torch.equal(owned, torch.nonzero(node_part == 0).flatten())
    # K = 1: every owned vertex keeps its full in-neighbourhood.
    local_in_deg = torch.bincount(s1.agg_rows, minlength=s1.num_local)[:s1.num_owned]
    assert torch.equal(local_in_deg, karate.in_degrees()[owned])
    assert set(shards[0].gid.tolist()) <= set(s1.gid.tolist()) <= set(shards[2].gid.tolist())
    assert shards[0].agg_rows.numel() < s1.agg_rows.numel() < shards[2].agg_rows.numel()
    assert not bool(s1.train_mask[s1.num_owned:].any())


def test_config_errors_use_the_template():
    from recipes import catgnn
    from workbench.train.sync import ModelAveraging

    with pytest.raises(ParamError, match="'interval' parameter of ModelAveraging.Config must be an int >= 1"):
        ModelAveraging.Config(interval=0)
    with pytest.raises(ParamError, match="'halo_hops' parameter"):
        catgnn.recipe().with_strings({"sync.halo_hops": "5"})


def test_catgnn_is_a_run_config_with_a_sync_section():
    """CATGNN is a RunConfig (sync.method=model_avg), so every section's setting goes through the one
    composition check: a cache, an exchange or a schedule is refused with the template, before any worker."""
    from recipes import catgnn, distdgl, full_graph
    from workbench.compose import RunConfig

    cfg = catgnn.recipe()
    assert isinstance(cfg, RunConfig) and cfg.method("sync") == "model_avg" and cfg.exchange is None
    for settings, section in (({"cache.method": "degree", "sample.method": "neighbor"}, "cache.method"),
                              ({"exchange.method": "halo"}, "exchange.method"),
                              ({"sample.method": "neighbor", "schedule.method": "fifo"}, "schedule.method")):
        with pytest.raises(ParamError, match=rf"'{section}' parameter of RunConfig must be none or a method that "
                                             r"local training per part with model averaging \(CATGNN\) can use"):
            cfg.with_strings(settings).build()
    # switching the sync switches the program; the exchange follows (noted), as it does for a sample switch
    back = cfg.with_strings({"sync.method": "allreduce"})
    assert type(back.build().trainer).__name__ == "FullGraphTrainer" and back.method("exchange") == "halo"
    assert "exchange.method=halo (from sync.method)" in back.notes()
    averaged = full_graph.recipe().with_strings({"sync.method": "model_avg"})
    assert averaged.exchange is None and type(averaged.build().trainer).__name__ == "ModelAveragingTrainer"
    with pytest.raises(ParamError, match=r"'sample.split' parameter of RunConfig must be 'own' with local training "
                                         r"per part with model averaging \(CATGNN\), which ignores it: .*Got "
                                         r"'balanced'"):
        distdgl.recipe().with_strings({"sync.method": "model_avg"}).build()   # DistDGL's split has no effect there
    with pytest.raises(ParamError, match=r"'sample.method' parameter of RunConfig must be none or a method that local "
                                         r"training .* 'psc' needs a trainer that moves layer embeddings"):
        cfg.with_strings({"sample.method": "psc"}).build()   # an edge sampler's kept edges feed an exchange
    local = distdgl.recipe().with_strings({"sync.method": "model_avg", "sample.split": "own"})
    assert type(local.build().trainer).__name__ == "ModelAveragingTrainer" and local.method("sample") == "neighbor"


@pytest.mark.parametrize("method", ["metis", "random", "hdrf"])
def test_catgnn_averages_models_trained_on_any_partitioner(method, tmp_path, capsys):
    """`--set partition.method=NAME` switches CATGNN's partitioner (it was refused: 'SpringPartitioner.Config
    has no option method'), edge-cut or vertex-cut with owners; model_avg bytes are exactly the prediction."""
    import json

    from workbench.cli import main

    assert main(["run", "catgnn", "--set", f"partition.method={method}", "--epochs", "2", "--runner", "local",
                 "--workers", "2", "--json", "--out", str(tmp_path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["partition"] == summary["stages"]["partition"]["method"] == method
    assert summary["stages"]["sync"] == {"method": "model_avg", "interval": 1, "halo_hops": 1, "weighting": "train",
                                         "replica_init": "same", "eval_sample": "full"}
    assert summary["bytes_by_kind"]["model_avg"] == summary["predicted_model_avg_bytes"] > 0


def test_catgnn_method_switch_keeps_shared_fields_and_lists_choices():
    from recipes import catgnn

    cfg = catgnn.recipe().with_strings({"partition.method": "metis", "partition.balance_train": "true",
                                        "model.method": "sage", "model.hidden": "16"})
    assert (cfg.method("partition"), cfg.partition.balance_train, cfg.method("model"), cfg.model.hidden) == \
        ("metis", True, "sage", 16)
    with pytest.raises(ParamError, match=r"'partition.method' parameter of RunConfig must be one of .*"
                                         r"did you mean 'metis'"):
        catgnn.recipe().with_strings({"partition.method": "metiss"})


# -- local mini-batch training per part (CATGNN's local training, §3.3) --------------------------------------


def test_local_minibatch_on_one_part_equals_minibatch_training():
    """One part, all neighbours, one batch per epoch: CATGNN's local mini-batch training is DistDGL-style
    mini-batch training on the whole graph (same weights after 4 epochs)."""
    from recipes import catgnn, distdgl

    common = {"epochs": "4", "train.lr": "0.01", "train.optimizer": "adam", "model.method": "gcn", "model.hidden": "8",
              "sample.fanouts": "-1,-1", "sample.batch_size": "4096"}
    ours = _run(catgnn.recipe(graph=SMALL, num_parts=1).with_strings({"sample.method": "neighbor", **common}), 1)
    ref = _run(distdgl.recipe(graph=SMALL, num_parts=1).with_strings(common), 1)
    assert ours["sample"] == "neighbor" and ours["fanouts"] == [-1, -1]
    assert_same_weights(ours, ref, rtol=1e-4)


def test_local_minibatch_per_part_trains_and_averages_with_the_same_bytes():
    from recipes import catgnn

    base = catgnn.recipe(graph=SMALL, epochs=4, num_parts=3, model={"hidden": 8}, **{"sync.interval": 2})
    sampled = base.with_strings({"sample.method": "neighbor", "sample.fanouts": "5,5", "sample.batch_size": "16"})
    s = _run(sampled, 2)
    full = _run(base, 2)
    assert s["sample"] == "neighbor" and s["batch_size"] == 16 and full["sample"] == "none"
    # model averaging moves the same bytes whatever the parts train with
    assert s["bytes_by_kind"]["model_avg"] == full["bytes_by_kind"]["model_avg"] == s["predicted_model_avg_bytes"]
    assert s["losses"][-1] < s["losses"][0] and s["best_val_acc"] > 0.4
    # one optimiser step per batch of each part (full batch: one per part)
    steps = sum(-(-p["train"] // 16) for p in s["parts"])
    assert s["steps"] == [steps] * 4 and full["steps"] == [3] * 4


def test_local_minibatch_settings_without_effect_are_refused():
    from recipes import catgnn

    cfg = catgnn.recipe().with_strings({"sample.method": "neighbor"})
    assert cfg.model.num_layers == len(cfg.sample.fanouts)
    assert catgnn.recipe().with_strings({"sample.method": "neighbor", "sample.fanouts": "5,5,5"}).model.num_layers == 3
    with pytest.raises(ParamError, match=r"'sample.split' parameter of RunConfig must be 'own' with local training "
                                         r"per part with model averaging \(CATGNN\), which ignores it"):
        cfg.with_strings({"sample.split": "even"}).build()
    with pytest.raises(ParamError, match=r"'sample.method' parameter of RunConfig must be none or a method that local "
                                         r"training per part .* 'uniform_edge' needs a trainer that moves layer"):
        catgnn.recipe().with_strings({"sample.method": "uniform_edge"}).build()
    assert catgnn.recipe().with_strings({"sample.method": "neighbor"}).with_strings(
        {"sample.method": "none"}).sample is None


def test_averaged_weights_are_the_alpha_weighted_sum_of_every_part_model():
    """CATGNN's averaging (§3.3): after a sync every replica of every rank holds
    ``sum_k alpha_k W_k`` over all parts k (two ranks with two and one parts here), checked against the sum
    computed directly from the models before the sync."""
    import threading

    from workbench.communicate import InProcessGroup
    from workbench.train.sync import ModelAveraging

    torch.manual_seed(0)
    models = [torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3)) for _ in range(3)]
    alphas = [0.5, 0.2, 0.3]
    expected = [sum(a * dict(m.named_parameters())[name].detach() for m, a in zip(models, alphas))
                for name, _ in models[0].named_parameters()]
    replicas_of = {0: [(models[0], alphas[0]), (models[1], alphas[1])], 1: [(models[2], alphas[2])]}
    group, sync = InProcessGroup(2), ModelAveraging()

    def body(rank: int) -> None:
        sync.average(replicas_of[rank], group.communicator(rank), 2)

    threads = [threading.Thread(target=body, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for m in models:
        for got, want in zip(m.parameters(), expected):
            assert torch.allclose(got, want, atol=1e-6)
