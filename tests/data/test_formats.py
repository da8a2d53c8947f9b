"""Every on-disk format, built from generated data (nothing is downloaded), read back through ``load_graph``."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch

from workbench._validation import ParamError
from workbench.cli import main
from workbench.data import load_graph
from workbench.data.folders import read_array_folder, write_saint_folder
from workbench.data.planetoid import read_planetoid, write_planetoid
from workbench.data.readers import DataFormatError
from workbench.data.safe_io import read_npy, read_pickle

SPEC = "sbm:num_nodes=700,num_blocks=3,avg_degree=6,num_features=8,seed=0"


@pytest.fixture(scope="module")
def graph():
    return load_graph(SPEC)


def _same_structure(a, b):
    return a.num_nodes == b.num_nodes and torch.equal(a.indptr, b.indptr) and torch.equal(a.indices, b.indices)


@pytest.mark.parametrize("layout", ["pyg", "dgl", "raw"])
def test_planetoid_layouts(tmp_path, graph, layout):
    folder = {"pyg": tmp_path / "Cora" / "raw", "dgl": tmp_path / "cora_v2", "raw": tmp_path / "raw"}[layout]
    write_planetoid(folder, "cora", graph, num_train=40, num_test=150)
    spec = {"pyg": tmp_path, "dgl": folder, "raw": tmp_path}[layout]
    g = load_graph(str(spec))
    assert g.name == "cora" and _same_structure(g, graph)
    assert torch.equal(g.features, graph.features) and torch.equal(g.labels, graph.labels)
    assert g.train_mask.nonzero().flatten().tolist() == list(range(40))
    assert g.val_mask.nonzero().flatten().tolist() == list(range(40, 540))
    assert g.test_mask.nonzero().flatten().tolist() == list(range(550, 700))


def test_planetoid_test_rows_follow_test_index(tmp_path, graph):
    folder = write_planetoid(tmp_path, "pubmed", graph, num_train=10, num_test=150)
    order = [int(t) for t in (folder / "ind.pubmed.test.index").read_text().split()]
    assert order != sorted(order)   # the writer shuffles them, as the real files are
    g = read_planetoid(folder)
    assert torch.equal(g.features[550:], graph.features[550:])


def test_citeseer_missing_test_ids_are_unlabelled_zero_rows(tmp_path, graph):
    folder = write_planetoid(tmp_path, "citeseer", graph, num_train=40, num_test=150, missing_test=6)
    listed = {int(t) for t in (folder / "ind.citeseer.test.index").read_text().split()}
    missing = sorted(set(range(550, 700)) - listed)
    assert len(missing) == 6
    g = read_planetoid(folder)
    assert g.num_nodes == 700 and int(g.test_mask.sum()) == 144
    assert (g.labels[missing] == -1).all() and (g.features[missing] == 0).all()
    assert not g.test_mask[missing].any()
    kept = sorted(listed)
    assert torch.equal(g.features[kept], graph.features[kept])


def test_a_crafted_pickle_is_refused_and_runs_nothing(tmp_path, graph):
    folder = write_planetoid(tmp_path, "cora", graph, num_train=40, num_test=150)
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (folder / "ind.cora.graph").write_bytes(pickle.dumps(Evil()))
    with pytest.raises(DataFormatError, match=r"ind\.cora\.graph.*not allowed"):
        load_graph(str(folder))
    assert not marker.exists()
    # a REDUCE asking an allowed class for a huge object is refused too
    import scipy.sparse as sp

    class Huge:
        def __reduce__(self):
            return (sp.csr_matrix, ((10 ** 12, 10 ** 12),))

    (folder / "x.pkl").write_bytes(pickle.dumps(Huge(), protocol=2))
    with pytest.raises(DataFormatError, match="called with arguments"):
        read_pickle(folder / "x.pkl", "test")


@pytest.mark.parametrize("variant", ["adj_full", "edge_list"])
def test_graphsaint_folder(tmp_path, graph, variant):
    folder = write_saint_folder(tmp_path / "flickr", graph, edge_list=variant == "edge_list")
    g = load_graph(str(folder))
    assert g.name == "flickr" and _same_structure(g, graph) and torch.equal(g.features, graph.features)
    assert torch.equal(g.labels, graph.labels)
    for m in ("train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(g, m), getattr(graph, m))


def test_multilabel_class_map_is_refused(tmp_path, graph):
    folder = write_saint_folder(tmp_path / "ppi", graph)
    cmap = {str(i): [1, 0, 1] for i in range(graph.num_nodes)}
    (folder / "class_map.json").write_text(json.dumps(cmap))
    with pytest.raises(DataFormatError, match="multi-label class maps .* not supported"):
        load_graph(str(folder))


@pytest.mark.parametrize("split", ["masks", "ids", "none"])
def test_array_folder(tmp_path, graph, split):
    d = tmp_path / "mine"
    d.mkdir()
    src, dst = graph.edges()
    np.save(d / "edges.npy", np.stack([src.numpy(), dst.numpy()]))   # (2, E)
    np.save(d / "features.npy", graph.features.numpy())
    np.save(d / "labels.npy", graph.labels.numpy())
    for k in ("train", "val", "test"):
        m = getattr(graph, f"{k}_mask").numpy()
        if split == "masks":
            np.save(d / f"{k}_mask.npy", m)
        elif split == "ids":
            np.save(d / f"{k}.npy", np.flatnonzero(m))
    g = load_graph(str(d))
    assert _same_structure(g, graph) and torch.equal(g.features, graph.features)
    if split == "none":   # a seeded random split 0.6/0.2/0.2 of the labelled vertices
        assert [int(getattr(g, f"{k}_mask").sum()) for k in ("train", "val", "test")] == [420, 140, 140]
        again = load_graph(str(d))
        assert torch.equal(again.train_mask, g.train_mask)
    else:
        assert torch.equal(g.train_mask, graph.train_mask) and torch.equal(g.test_mask, graph.test_mask)


def test_structure_only_needs_structural_features_on_request(tmp_path, graph):
    d = tmp_path / "bare"
    d.mkdir()
    src, dst = graph.edges()
    np.savetxt(d / "edges.txt", np.stack([src.numpy(), dst.numpy()], 1), fmt="%d")
    np.save(d / "labels.npy", graph.labels.numpy())
    assert read_array_folder(d).features is None   # never silently
    g = read_array_folder(d, structural="degree")
    assert g.features.shape == (700, 1) and torch.equal(g.features[:, 0].long(), graph.in_degrees() * 2)
    assert read_array_folder(d, structural="random", structural_dim=5).features.shape == (700, 5)


def test_cli_attach_flags_info_and_run(tmp_path, graph, capsys):
    src, dst = graph.edges()
    np.savetxt(tmp_path / "e.txt", np.stack([src.numpy(), dst.numpy()], 1), fmt="%d")
    np.save(tmp_path / "y.npy", graph.labels.numpy())
    np.save(tmp_path / "x.npy", graph.features.numpy())
    assert main(["info", str(tmp_path / "e.txt"), "--labels", str(tmp_path / "y.npy"), "--structural-features",
                 "degree", "--split", "0.5,0.25,0.25", "--split-seed", "3", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["num_nodes"] == 700 and info["num_features"] == 1 and info["num_classes"] == 3
    assert info["split"] == {"train": 350, "val": 175, "test": 175} and info["directed"] is False
    assert info["self_loops_removed"] == 0 and info["degree"]["max"] >= info["degree"]["mean"]
    assert main(["run", "full_graph", "--graph", str(tmp_path / "e.txt"), "--labels", str(tmp_path / "y.npy"),
                 "--features", str(tmp_path / "x.npy"), "--runner", "single", "--epochs", "2", "--json",
                 "--out", str(tmp_path / "runs")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["split_sizes"] == {"train": 420, "val": 140, "test": 140}


def test_cli_attach_flags_refuse_what_they_would_ignore(tmp_path, graph, capsys):
    """``--split`` beside ``--train`` (the split was ignored), an attach flag on a generated graph (the error named
    the files spec's ``edges``, not the flag) and ``generate --dtype`` for a text file: one message each."""
    src, dst = graph.edges()
    np.savetxt(tmp_path / "e.txt", np.stack([src.numpy(), dst.numpy()], 1), fmt="%d")
    np.save(tmp_path / "y.npy", graph.labels.numpy())
    np.save(tmp_path / "tr.npy", np.arange(10))
    for argv, message in [
            (["info", str(tmp_path / "e.txt"), "--labels", str(tmp_path / "y.npy"), "--train", str(tmp_path / "tr.npy"),
              "--split", "0.1,0.1,0.1"], "'--split' parameter of workbench must be left out with --train"),
            (["run", "full_graph", "--graph", "karate", "--split", "0.8,0.1,0.1"],
             "'--split' parameter of workbench must be used with an edge-list file (GRAPH 'karate' is none"),
            (["generate", "sbm:num_nodes=50", "--out", str(tmp_path / "g.txt"), "--dtype", "int64"],
             "'dtype' parameter of workbench generate must be its default int32 for a text file")]:
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert message in err and "Traceback" not in err, err
    assert not (tmp_path / "g.txt").exists()


def test_cli_without_labels_explains(tmp_path, graph, capsys):
    src, dst = graph.edges()
    np.savetxt(tmp_path / "e.txt", np.stack([src.numpy(), dst.numpy()], 1), fmt="%d")
    assert main(["run", "full_graph", "--graph", str(tmp_path / "e.txt"), "--runner", "single", "--epochs", "1",
                 "--out", str(tmp_path / "runs")]) == 2
    assert "node features" in capsys.readouterr().err


def test_info_text_and_html(graph, capsys):
    assert main(["info", "karate"]) == 0
    out = capsys.readouterr().out
    assert "num_undirected_edges" in out and "split" in out
    assert "num_isolated_nodes" in graph._repr_html_() and "degree" in graph._repr_html_()


def test_npy_pickled_objects_are_never_loaded(tmp_path):
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DataFormatError, match="objects are never unpickled"):
        read_npy(tmp_path / "o.npy", "test")


def test_files_spec_settings_are_validated():
    with pytest.raises(ParamError, match="structural"):
        load_graph("files:edges=nowhere.txt,structural=pagerank")
