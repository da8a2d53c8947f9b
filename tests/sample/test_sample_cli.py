"""``workbench sample``: JSON keys, and with all fan-outs -1 the figures against a brute-force neighbourhood."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from workbench.cli import main

KEYS = {"num_parts", "fanouts", "batch_size", "num_batches", "sampled_edges", "input_nodes", "remote_input_nodes",
        "feature_bytes", "cache_hit_rate", "seeds_per_s"}


def _run(capsys, *argv) -> dict:
    assert main(["sample", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_keys(capsys):
    out = _run(capsys, "karate", "--parts", "2", "--fanouts", "10,5", "--batch-size", "8")
    assert KEYS <= set(out)
    assert out["fanouts"] == [10, 5] and out["num_parts"] == 2 and out["cache_hit_rate"] == 0.0
    assert out["num_batches"] == 2 * out["num_steps"] and out["seeds_per_s"] > 0
    assert out["feature_bytes"] == out["remote_input_nodes"] * (34 * 4 + 8)


def _brute_force(graph, node_part: np.ndarray, num_parts: int, num_layers: int, width: int) -> dict:
    """Every trainer's one batch (all its training vertices), all in-neighbours per layer, in plain Python."""
    indptr, indices = graph.indptr.tolist(), graph.indices.tolist()
    train = graph.train_mask.tolist()
    edges = inputs = remote = 0
    for r in range(num_parts):
        frontier = {v for v in range(graph.num_nodes) if train[v] and node_part[v] == r}
        for _ in range(num_layers):
            nxt = set(frontier)
            for v in frontier:
                nbrs = indices[indptr[v]:indptr[v + 1]]
                edges += len(nbrs)
                nxt.update(nbrs)
            frontier = nxt
        inputs += len(frontier)
        remote += sum(1 for v in frontier if node_part[v] != r)
    return {"sampled_edges": edges, "input_nodes": inputs, "remote_input_nodes": remote,
            "feature_bytes": remote * width * 4 + remote * 8}


@pytest.mark.parametrize("parts,method,layers", [(2, "metis", 2), (3, "random", 3), (1, "metis", 1)])
def test_all_neighbours_matches_brute_force(capsys, tmp_path, small_sbm, parts, method, layers):
    spec = "sbm:num_nodes=200,num_blocks=4,avg_degree=8,num_features=16,seed=0"
    fanouts = ",".join(["-1"] * layers)
    out = _run(capsys, spec, "--parts", str(parts), "--method", method, "--fanouts", fanouts,
               "--batch-size", "1000", "--out", str(tmp_path))
    node_part = np.load(tmp_path / "assignment.npy")
    expected = _brute_force(small_sbm, node_part, parts, layers, 16)
    assert {k: out[k] for k in expected} == expected
    assert out["num_batches"] == parts and out["num_steps"] == 1


def test_all_neighbours_is_the_same_on_a_second_run_and_with_another_seed_schedule(capsys):
    argv = ["karate", "--parts", "2", "--fanouts", "-1,-1", "--batch-size", "4"]
    a = _run(capsys, *argv)
    b = _run(capsys, *argv)
    figures = ("sampled_edges", "input_nodes", "remote_input_nodes", "feature_bytes", "sample_bytes")
    assert {k: a[k] for k in figures} == {k: b[k] for k in figures}


@pytest.mark.parametrize("argv,needle", [
    (["--fanouts", "10,0"], "'fanouts' parameter"),
    (["--fanouts", "5", "--cache", "belady"], "'--cache' parameter of workbench sample must be one of"),
    (["--fanouts", "5", "--sampler", "nope"], "'--sampler' parameter of workbench sample must be one of"),
    (["--fanouts", "5", "--cache-ratio", "2"], "'--cache-ratio' parameter"),
    (["--fanouts", "5", "--parts", "0"], "'--parts' parameter"),
    (["--fanouts", "5", "--cache-ratio", "0.5"], "'--cache-ratio' parameter of workbench sample must be 0 without "
                                                 "--cache"),
    (["--fanouts", "5", "--cache", "lru"], "must be a number in (0, 1] with --cache lru"),
    (["--fanouts", "5", "--method", "hdrf"], "'--method' parameter of workbench sample must be an edge-cut method"),
])
def test_bad_input_is_one_message(capsys, argv, needle):
    args = ["sample", "karate", *(["--parts", "2"] if "--parts" not in argv else []), *argv]
    assert main(args) == 2
    assert needle in capsys.readouterr().err


def test_out_that_is_a_file_is_refused_before_loading(capsys, tmp_path, monkeypatch):
    afile = tmp_path / "afile"
    afile.write_text("")

    def no_loading(*args, **kwargs):
        raise AssertionError("the graph was loaded before the arguments were checked")

    monkeypatch.setattr("workbench.data.load_graph", no_loading)
    assert main(["sample", "karate", "--parts", "2", "--fanouts", "5", "--out", str(afile)]) == 2
    err = capsys.readouterr().err
    assert "The '--out' parameter of workbench sample must be a folder" in err and str(afile) in err
    assert "Traceback" not in err


def test_even_split_and_replacement(capsys, small_sbm):
    spec = "sbm:num_nodes=200,num_blocks=4,avg_degree=8,num_features=16,seed=0"
    out = _run(capsys, spec, "--parts", "3", "--fanouts", "4,3", "--batch-size", "10", "--split", "even", "--replace")
    n_train = int(small_sbm.train_mask.sum())
    assert out["split"] == "even" and out["num_steps"] == math.ceil(math.ceil(n_train / 3) / 10)
    assert out["num_batches"] == 3 * out["num_steps"]


def test_graph_without_training_mask_samples_every_vertex(capsys, tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("0 1\n1 2\n2 3\n3 0\n")
    out = _run(capsys, str(path), "--parts", "2", "--method", "block", "--fanouts", "-1", "--batch-size", "100")
    assert out["num_seeds"] == 4 and out["feature_width"] == 0
    assert out["feature_bytes"] == 8 * out["remote_input_nodes"]          # ids only: no feature rows


@pytest.mark.parametrize("policy", ["degree", "random", "lru"])
def test_cache_figures_match_the_transport(capsys, policy):
    """With a cache, feature bytes are the misses' (rows x width x 4 + 8 per id), and equal what the
    in-process transport counted for the epoch's pulls (kinds ``feature_req`` and ``feature``)."""
    import torch

    from workbench.cache import CACHES
    from workbench.data import load_graph
    from workbench.partition import partition
    from workbench.sample import SAMPLERS, sample_epoch, split_seeds

    spec = "chunglu:num_nodes=2000,avg_degree=8,seed=0"
    out = _run(capsys, spec, "--parts", "3", "--fanouts", "5,5", "--batch-size", "64", "--cache", policy,
               "--cache-ratio", "0.2")
    none = _run(capsys, spec, "--parts", "3", "--fanouts", "5,5", "--batch-size", "64")
    assert out["remote_input_nodes"] == none["remote_input_nodes"] and 0.0 < out["cache_hit_rate"] < 1.0
    width = out["feature_width"]
    misses = round(out["remote_input_nodes"] * (1 - out["cache_hit_rate"]))
    assert out["feature_bytes"] == misses * (width * 4 + 8) < none["feature_bytes"]

    graph = load_graph(spec)
    node_part = partition(graph, 3, method="metis").node_part
    sampler = SAMPLERS.build("neighbor", fanouts=(5, 5), batch_size=64)
    split = split_seeds(torch.nonzero(graph.train_mask).flatten(), node_part, 3)
    stats = sample_epoch(graph, node_part, sampler, split, cache=CACHES.build(policy, ratio=0.2))
    counted = sum(s.bytes_by_kind.get("feature", 0) + s.bytes_by_kind.get("feature_req", 0) for s in stats)
    assert counted == sum(s.cache_misses for s in stats) * (width * 4 + 8) == out["feature_bytes"]
