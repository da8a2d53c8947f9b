"""The ``bytegnn`` recipe: 2 ranks on the local runner, each with its sampling worker processes, train exactly
like the same config sampled inline (scheduling changes timing, never semantics)."""

from __future__ import annotations

SMALL = dict(graph="sbm:num_nodes=300,num_blocks=4,avg_degree=6,num_features=8,seed=0", epochs=2, model={"hidden": 8},
             sample={"batch_size": 32})


def test_bytegnn_recipe_two_ranks_equals_inline_sampling(tmp_path):
    from recipes.bytegnn import gcn, recipe
    from workbench.runtime import launch

    for make in (recipe, gcn):
        cfg = make(**SMALL, num_parts=2).with_strings({"schedule.workers": "1"})
        scheduled = launch(cfg, runner="local", workers=2, out=str(tmp_path)).wait(timeout=300)
        inline = launch(cfg.replace(schedule=None), runner="local", workers=2, out=str(tmp_path)).wait(timeout=300)
        assert scheduled["losses"] == inline["losses"]
        assert scheduled["partition"] == "bytegnn" and scheduled["schedule"] == "launch-score"
        for key in ("seeds_per_s", "cpu_util_mean", "trainer_idle_fraction", "dag_latency_ms"):
            assert scheduled[key] >= 0.0
