"""G3 bins: the binned executor equals single-process full-graph training for any bin size, order and variant;
the memory budget is checked before any worker starts; the pipeline account is consistent."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from train_helpers import assert_same_training as _assert_same_training, rel_error as _rel, run_inprocess, tiny_graph

from workbench._validation import ParamError
from workbench.train.bins import binned_forward, build_schedule, priority_order, working_set_bytes
from workbench.train.bins_pipeline import VARIANTS, simulate_all
from workbench.train.full_graph import FullGraphConfig, build_shards
from workbench.train.models import GNNModel, SpMM, sparse_aggregator



@pytest.mark.parametrize("model,num_layers", [("gcn", 2), ("sage", 3)])
@pytest.mark.parametrize("bin_limit", [1, 7, 1000])
def test_binned_logits_equal_whole_graph_logits(model, num_layers, bin_limit):
    g = tiny_graph(directed=(model == "sage"), seed=1)
    m = GNNModel(model, in_dim=g.num_features, hidden=8, out_dim=g.num_classes, num_layers=num_layers, seed=0)
    (shard,), _ = build_shards(g, torch.zeros(g.num_nodes, dtype=torch.int64), 1, model, m.input_widths)
    n = shard.plan.num_inner
    a, a_t = sparse_aggregator(shard.agg_rows, shard.agg_cols, shard.agg_weights, (n, n))
    ref = m(shard.data.features, lambda h, i: SpMM.apply(a, a_t, h))
    rng = np.random.default_rng(bin_limit)
    for order in (priority_order(n, shard.agg_rows, shard.agg_cols, torch.zeros(n, dtype=torch.bool)),
                  rng.permutation(n)):                                          # any order
        s = build_schedule(n, 0, shard.agg_rows, shard.agg_cols, shard.agg_weights, order,
                           widths_in=m.input_widths, widths_out=m.dims[1:], bin_limit=bin_limit)
        assert sorted(torch.cat(s.layers[0].dst).tolist()) == list(range(n))
        out = binned_forward(m, shard.data.features, lambda h, i: h, s)
        assert _rel(out, ref) <= 1e-5


@pytest.mark.parametrize("model,num_layers,bin_limit,world_size,pipeline", [
    ("gcn", 2, 3, 2, "sequential"), ("sage", 3, 11, 3, "multi-level"), ("gcn", 4, 1, 3, "intra")])
def test_binned_training_matches_single_process(model, num_layers, bin_limit, world_size, pipeline):
    g = tiny_graph(seed=3)
    cfg = FullGraphConfig(graph="tiny", partition="random", model=model, num_layers=num_layers, hidden=8, epochs=3,
                          seed=2)
    single = run_inprocess(cfg.build(graph=g), 1)
    # the variant only changes the simulated account, never the numbers
    binned = cfg.with_strings({"train.bin_limit": str(bin_limit), "train.pipeline": pipeline})
    multi = run_inprocess(binned.build(graph=g), world_size)
    _assert_same_training(single, multi)
    summary = multi[0]
    assert summary["bytes_per_epoch"] == summary["predicted_bytes_per_epoch"]   # P2P halo bytes unchanged
    g3 = summary["g3"]
    assert set(g3["simulated_epoch_s"]) == set(VARIANTS) and g3["pipeline"] == pipeline
    assert all(max(b) >= 1 for b in g3["bins_per_layer"]) and "remote_ratio" in summary["partition_metrics"]


def test_memory_budget_rejects_whole_parts_before_workers_start_and_bins_fit():
    g = tiny_graph(num_nodes=90, seed=0)
    # binned runs compute every layer aggregate-first: probe the working set in that order
    cfg = FullGraphConfig(graph="tiny", partition="random", hidden=16, epochs=2, seed=0, order="aggregate-first")
    probe = cfg.build(graph=g)
    shards = probe.prepare(2, lambda e: None)
    widths = probe.widths()
    need = [working_set_bytes(s.plan.num_inner, s.plan.num_halo, widths, widths[1:] + [g.num_classes]) for s in shards]
    budget = min(need) // 2                                          # below every part's working set
    whole = cfg.with_strings({"train.memory_budget": str(budget)})
    with pytest.raises(ParamError, match=rf"The 'memory_budget' parameter of TrainLoopConfig must be at least the "
                                         rf"working set of part \d \(\d+ bytes\).* Got {budget} instead"):
        whole.build(graph=g).prepare(2, lambda e: None)              # prepare runs before any rank starts
    binned = whole.with_strings({"train.bin_limit": "0"})
    summary, results, _ = run_inprocess(binned.build(graph=g), 2)
    assert summary["g3"]["max_bin_bytes"] <= budget / 2 and len(summary["losses"]) == 2
    _assert_same_training(run_inprocess(cfg.build(graph=g), 1), (summary, results, None))


def test_bin_settings_are_validated():
    cfg = FullGraphConfig(graph="tiny")
    with pytest.raises(ParamError, match="'pipeline' parameter"):
        cfg.with_strings({"train.pipeline": "fifo"})
    with pytest.raises(ParamError, match="'bin_limit' parameter"):
        cfg.with_strings({"train.bin_limit": "0"})            # 0 = from the budget, which is missing
    other = FullGraphConfig(graph="tiny").replace(exchange="block_row").with_strings({"train.bin_limit": "4"})
    with pytest.raises(ParamError, match=r"'train.bin_limit' parameter of RunConfig must be None unless exchange=halo"):
        other.build(graph=tiny_graph()).prepare(2, lambda e: None)


def test_pipeline_account_overlap_never_slower_than_sequential():
    from workbench.train.bins_pipeline import BinCosts

    rng = np.random.default_rng(0)
    workers, bins = 3, 5

    def layer(k):
        return [BinCosts(pack_s=rng.uniform(1e-4, 1e-3, bins), h2d_bytes=rng.uniform(1e6, 1e7, bins),
                         compute_s=rng.uniform(1e-3, 5e-3, bins), d2h_bytes=rng.uniform(1e5, 1e6, bins),
                         send_bytes=rng.uniform(1e5, 2e6, bins), back_bytes=rng.uniform(1e5, 2e6, bins),
                         deps=[np.array([[q, rng.integers(bins)] for q in range(workers)]) if k else
                               np.zeros((0, 2), np.int64) for _ in range(bins)]) for _ in range(workers)]

    sim = simulate_all([layer(k) for k in range(3)], backward_ratio=2.0, allreduce_bytes=10_000)
    t = {v: sim[v]["epoch_s"] for v in VARIANTS}
    assert t["multi-level"] <= t["intra"] <= t["sequential"] and t["inter"] <= t["sequential"]
    assert sim["multi-level"]["speedup"] > 1 and all(0 <= sim[v]["idle_fraction"] < 1 for v in VARIANTS)
