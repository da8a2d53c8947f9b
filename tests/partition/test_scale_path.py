"""``benchmarks/scale.py``'s path at 1M lines: generate -> stream-partition (SPRING, HDRF) into a folder
-> CATGNN on 2 parts from the folder, with the metrics checked exactly against the in-memory partitioner."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from workbench.cli import main
from workbench.data import load_graph
from workbench.data.edgefiles import EdgeFileWriter
from workbench.data.generate_files import generate_files
from workbench.partition import partition
from workbench.partition.base import PartitionResult
from workbench.partition.streaming import GraphEdgeStream, stream_partition

SPEC = "papers-like:num_nodes=70000,avg_degree=29,num_features=8,train_ratio=0.05,seed=0"
P = 4


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    d = tmp_path_factory.mktemp("scale")
    info = generate_files(SPEC, d / "g.bin")
    files = info["files"]
    spec = (f"files:edges={d / 'g.bin'},features={files['features']},labels={files['labels']},"
            f"train={files['train']},val={files['val']},test={files['test']}")
    return d, info, load_graph(spec)


def test_scale_path_metrics_are_exact_at_1m_lines(generated, capsys):
    d, info, g = generated
    files = info["files"]
    assert 950_000 < info["num_lines"] < 1_100_000 and info["num_nodes"] == 70_000
    for method in ("spring", "hdrf"):
        out = d / f"parts-{method}"
        assert main(["partition", str(d / "g.bin"), "--stream", "--method", method, "--parts", str(P),
                     "--out", str(out), "--with-features", files["features"], "--labels", files["labels"],
                     "--train", files["train"], "--val", files["val"], "--test", files["test"], "--json"]) == 0
        stream = json.loads(capsys.readouterr().out)
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["num_edges_owned_rows"] == g.num_edges and manifest["method"] == method
        assert stream["folder"]["replication_factor"] == manifest["replication_factor"]
        if method == "spring":   # the folder's metrics against the in-memory ones of the same owners
            owner = torch.from_numpy(np.load(out / "owner.npy"))
            exact = PartitionResult(graph=g, num_parts=P, method=method, node_part=owner).metrics()
            assert manifest["replication_factor"] == pytest.approx(exact.replication_factor, abs=1e-12)
            assert manifest["comm_rows"] == exact.comm_rows.tolist()
            assert [q["num_halo"] for q in manifest["parts"]] == exact.part_halo.tolist()
            # an owner result: its completion is the folder's subgraphs
            assert stream["replication_factor_completed"] == pytest.approx(manifest["replication_factor"])
    # The same graph streamed in the in-memory partitioner's order (its stored pairs, as a .bin): the file path
    # gives the in-memory partitioner's owners (SPRING) and replication factor (HDRF) exactly.
    with EdgeFileWriter(d / "canonical.bin", "int32", num_nodes=g.num_nodes) as w:
        for s, t in GraphEdgeStream(g):
            w.write(s, t)
    assert torch.equal(torch.from_numpy(stream_partition(d / "canonical.bin", P, method="spring").owner),
                       partition(g, P, method="spring").node_part)
    assert stream_partition(d / "canonical.bin", P, method="hdrf").metrics.replication_factor == pytest.approx(
        partition(g, P, method="hdrf").metrics().replication_factor, abs=1e-12)


def test_scale_path_trains_two_parts_from_the_folder(generated):
    from recipes import catgnn
    from workbench.partition.streaming import HDRFPartitioner
    from workbench.runtime import launch

    d = generated[0]
    if not (d / "parts-hdrf" / "manifest.json").is_file():
        pytest.skip("needs the folders of test_scale_path_metrics_are_exact_at_1m_lines")
    cfg = catgnn.recipe(graph=f"parts:dir={d / 'parts-hdrf'},select=0-1", epochs=2, model={"hidden": 8},
                        partition=HDRFPartitioner.Config())
    s = launch(cfg, runner="local", workers=1, out=None).wait(timeout=300)
    assert [q["part"] for q in s["parts"]] == [0, 1] and s["num_syncs"] == 2
    assert s["losses"][1] < s["losses"][0]


def test_scale_reuses_only_the_input_it_generated_for_the_same_graph(tmp_path):
    import importlib.util
    from pathlib import Path

    bench = importlib.util.spec_from_file_location("scale_benchmark",
                                                   Path(__file__).resolve().parents[2] / "benchmarks" / "scale.py")
    scale = importlib.util.module_from_spec(bench)
    bench.loader.exec_module(scale)
    spec = "papers-like:num_nodes=1000,avg_degree=29.0,num_features=16,num_classes=172,seed=0"
    assert scale.reusable_input(tmp_path, spec) is None                      # nothing generated yet
    features = tmp_path / "g.features.npy"
    (tmp_path / "g.bin").write_bytes(b"")
    features.write_bytes(b"")
    info = {"spec": spec, "num_nodes": 1000, "num_lines": 0, "files": {"features": str(features)}}
    (tmp_path / "g.bin.json").write_text(json.dumps(info))
    assert scale.reusable_input(tmp_path, spec) == info
    assert scale.reusable_input(tmp_path, spec.replace("seed=0", "seed=1")) is None   # another graph
    features.unlink()
    assert scale.reusable_input(tmp_path, spec) is None                      # a listed file is gone
