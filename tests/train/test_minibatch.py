"""Mini-batch training through all five stages (recipe ``distdgl``): exactness, accounting, the CLI.

* A P-rank run equals the single-process reference that trains on the union of the P trainers' batches
  (``sample.trainers=P``): losses and weights to 1e-5.
* Feature traffic counted at the transport equals the cache's misses x (row bytes + 8-byte id), per epoch;
  a cache of every remote vertex (ratio 1) moves no feature row during training.
* Evaluation traffic is counted apart (``eval_*`` kinds); per-epoch JSON figures and events.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from recipes import distdgl
from workbench._validation import ParamError
from workbench.events import CacheStats, SampleStats
from workbench.runtime import launch
from workbench.testing import assert_same_weights, weight_checksums

GRAPH = "products-like:num_nodes=800,seed=2"


def _run(config, runner="local", workers=2):
    return launch(config, runner=runner, workers=workers, out=None, blocking=True).wait()


def _config(**kw):
    settings = {"graph": GRAPH, "epochs": 3, "sample.fanouts": (5, 5, 5), "sample.batch_size": 32}   # kw wins
    for section, value in kw.items():   # a section dict in kw replaces the dotted defaults it names
        for field in value if isinstance(value, dict) else ():
            settings.pop(f"{section}.{field}", None)
    settings.update(kw)
    return distdgl.recipe(**settings)


def _close(a, b, rtol=1e-5):
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=rtol, atol=1e-7)


@pytest.mark.parametrize("workers,model,split", [(2, "sage", "balanced"), (3, "gcn", "balanced"), (3, "gcn", "own")])
def test_ranks_equal_the_single_process_reference(workers, model, split):
    config = _config().replace(model=model).with_strings({"sample.split": split})
    assert _config().sample.split == "balanced"                # the recipe's default: DistDGL's Fig. 7
    ref = _run(config.with_strings({"sample.trainers": str(workers)}), "single", 1)
    dist = _run(config, "local", workers)
    _close(dist["losses"], ref["losses"])
    assert_same_weights(dist, ref)
    # a vertex two trainers reach at the same step is sampled once in the union, once per trainer here
    assert dist["sampled_edges"] >= ref["sampled_edges"] and dist["steps"] == ref["steps"]
    assert dist["accuracy"] == pytest.approx(ref["accuracy"])
    assert ref["remote_feature_rows"] == [0] * 3 and min(dist["remote_feature_rows"]) > 0
    if split == "balanced":                                   # equal shares: the largest share's batches
        assert dist["steps"] == [math.ceil(math.ceil(ref["split_sizes"]["train"] / workers) / 32)] * 3


@pytest.mark.parametrize("policy,ratio", [("none", 0.0), ("degree", 0.1), ("random", 0.3), ("lru", 0.2)])
def test_feature_bytes_are_the_cache_misses(policy, ratio):
    config = _config() if policy == "none" else _config().with_strings({"cache.method": policy,
                                                                       "cache.ratio": str(ratio)})
    out = _run(config)
    width = 100  # products-like features
    for e in range(out["epochs"]):
        misses = round(out["remote_feature_rows"][e] * (1 - out["cache_hit_rate"][e]))
        assert out["feature_bytes"][e] == misses * (width * 4 + 8)
    total = out["bytes_by_kind"]
    assert total.get("feature", 0) + total.get("feature_req", 0) == sum(out["feature_bytes"])
    assert (policy in ("none", "lru")) == (total.get("cache_fill", 0) == 0)   # dynamic caches start empty
    assert all(k in total for k in ("eval_sample_req", "eval_feature", "sample_req", "sample_resp", "allreduce"))


def test_a_full_cache_moves_no_feature_rows_during_training():
    out = _run(_config().with_strings({"cache.method": "degree", "cache.ratio": "1.0"}))
    assert out["cache_hit_rate"] == [1.0] * 3 and out["feature_bytes"] == [0] * 3
    assert out["bytes_by_kind"]["cache_fill"] == out["cache_fill_bytes"] > 0


def test_degree_cache_beats_random_on_a_power_law_graph():
    """Chung-Lu degrees follow a power law: high-degree vertices are sampled far more often (PaGraph's
    premise). products-like graphs here are much flatter (max/mean degree ~4), where the gap is small."""
    graph = "chunglu:num_nodes=2000,avg_degree=10,seed=0"
    rates = {p: np.mean(_run(_config(graph=graph).with_strings({"cache.method": p, "cache.ratio": "0.1"}))
                        ["cache_hit_rate"]) for p in ("degree", "random")}
    assert rates["degree"] > 1.5 * rates["random"] > 0


def test_events_are_per_epoch_and_rank():
    handle = launch(_config().with_strings({"cache.method": "degree"}), runner="local", workers=2, out=None)
    events = []
    handle.add_listener(events.append)
    handle.wait()
    samples = [e for e in events if isinstance(e, SampleStats)]
    caches = [e for e in events if isinstance(e, CacheStats)]
    assert sorted((e.rank, e.epoch) for e in samples) == [(r, e) for r in range(2) for e in range(3)]
    assert sorted((e.rank, e.epoch) for e in caches) == [(r, e) for r in range(2) for e in range(3)]
    assert all(e.policy == "degree" and e.remote_rows == e.hits + e.misses for e in caches)


def test_bad_settings_are_one_message_before_any_rank_starts():
    with pytest.raises(ParamError, match="'cache.method' parameter"):
        _config().with_strings({"cache.method": "belady"})
    with pytest.raises(ParamError, match=r"'sample.fanouts' .* model.num_layers=3 was also set"):
        _run(_config(sample={"fanouts": (5, 5)}, model={"num_layers": 3}))
    with pytest.raises(ParamError, match="sample.trainers"):
        _run(_config().with_strings({"sample.trainers": "3"}), "local", 2)


def test_cli_json_has_the_per_epoch_figures(capsys):
    from workbench.cli import main

    code = main(["run", "distdgl", "--graph", GRAPH, "--workers", "2", "--runner", "local", "--json",
                 "--set", "sample.fanouts=5,5,5", "--set", "sample.batch_size=32", "--set", "epochs=2",
                 "--set", "cache.method=degree", "--set", "cache.ratio=0.1"])
    assert code == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for key in ("losses", "accuracy", "bytes_by_kind", "cache_hit_rate", "sampled_edges", "remote_feature_rows",
                "feature_bytes"):
        assert key in out
    assert len(out["cache_hit_rate"]) == len(out["feature_bytes"]) == 2


def test_fanouts_alone_set_the_layers_from_the_cli_and_the_python_api(capsys, tmp_path):
    """``--set sample.fanouts=5,5`` on the 3-layer recipe trains 2 layers and says so (as DGL's examples do)."""
    from workbench.cli import main

    common = ["run", "distdgl", "--graph", GRAPH, "--workers", "2", "--runner", "local", "--epochs", "1",
              "--out", str(tmp_path), "--set", "sample.batch_size=64", "--set", "sample.fanouts=5,5"]
    assert main([*common, "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["fanouts"] == [5, 5] and out["notes"] == ["model.num_layers=2 (from sample.fanouts)"]
    assert {k.split(".")[1] for k in weight_checksums(out) if k.startswith("neigh.")} == {"0", "1"}   # 2 layers
    assert main(common) == 0                                                           # said before training
    assert "  model.num_layers=2 (from sample.fanouts)\n" in capsys.readouterr().out
    summary = _run(distdgl.recipe(graph=GRAPH, epochs=1,
                                  sample={"batch_size": 64, "fanouts": (4, 4)}))   # the Python API
    assert summary["notes"] == ["model.num_layers=2 (from sample.fanouts)"]
    assert main([*common, "--set", "model.num_layers=3"]) == 2                      # both set, disagreeing
    err = capsys.readouterr().err
    assert "'sample.fanouts'" in err and "model.num_layers=3 was also set" in err


def test_distdgl_on_a_graph_with_a_one_vertex_split_trains_every_rank():
    """`workbench run distdgl` on products-like:num_nodes=400,seed=0 once trained on parts of 400 and 0
    vertices (METIS with balance_train gave up on the one-vertex 'other' split): one idle rank, no traffic."""
    from workbench.events import PartitionComputed

    events = []
    out = launch(_config(graph="products-like:num_nodes=400,seed=0", epochs=2), runner="local", workers=2,
                 out=None, listeners=[events.append]).wait()
    sizes = [e.part_sizes for e in events if isinstance(e, PartitionComputed)]
    assert sizes and all(min(s) > 0 for s in sizes), sizes
    samples = [e for e in events if isinstance(e, SampleStats)]
    assert sorted({e.rank for e in samples}) == [0, 1] and min(out["remote_feature_rows"]) > 0


def test_a_partition_with_an_empty_part_never_reaches_a_rank(edges_to_part_zero):
    """Every way a partition reaches a run is checked before any rank starts: a given assignment, and a
    vertex-cut result (returned by Partitioner.partition as it is) whose owners leave a part empty."""
    import torch

    graph = "products-like:num_nodes=400,seed=0"
    given = torch.zeros(400, dtype=torch.int64)
    given[:5] = 2   # part 1 owns nothing
    events = []
    with pytest.raises(ParamError, match=r"'num_parts' parameter of MiniBatchTrainer must be a count whose parts "
                                         r"all own vertices \(part sizes \[395, 0, 5\]: 1 empty"):
        launch(_config(graph=graph).build(node_part=given), runner="local", workers=3, out=None,
               listeners=[events.append]).wait()

    with pytest.raises(ParamError, match=r"part sizes \[400, 0\]: 1 empty"):
        launch(_config(graph=graph).replace(partition=edges_to_part_zero), runner="local", workers=2,
               out=None, listeners=[events.append]).wait()
    assert not [e for e in events if isinstance(e, SampleStats)]   # no rank ever sampled
