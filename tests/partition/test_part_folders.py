"""Binary edge streams, ``workbench generate``, partition folders (round trip against ``part_subgraph``)
and CATGNN trained from a folder (equal to the same parts in memory)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch

from workbench._validation import ParamError
from workbench.cli import main
from workbench.data import load_graph
from workbench.data.edgefiles import EdgeFileWriter, edge_file_info
from workbench.data.partfolder import PartFolder, read_part_graph
from workbench.graph import Graph
from workbench.partition.streaming import EdgeFileStream, GraphEdgeStream, stream_partition
from workbench.partition.streaming.folders import write_part_folders
from workbench.train.model_averaging import folder_shard, part_subgraph
from workbench.train.models import GCN, GraphSAGE
from workbench.testing import assert_same_run, assert_same_weights

SBM = "sbm:num_nodes=3000,num_blocks=6,avg_degree=8,num_features=8,seed=0"


def _files_spec(d, edges):
    return (f"files:edges={edges},features={d / 'x.npy'},labels={d / 'y.npy'},train={d / 'train.npy'},"
            f"val={d / 'val.npy'},test={d / 'test.npy'}")


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    """A raw .bin stream of an SBM graph: shuffled lines in random orientation, a repeated pair, a reversed
    repeat and a self-loop; features, labels and split masks beside it."""
    d = tmp_path_factory.mktemp("raw")
    g = load_graph(SBM)
    s, t = g.edges()
    keep = s < t
    u, v = s[keep].numpy(), t[keep].numpy()
    rng = np.random.default_rng(0)
    perm = rng.permutation(u.size)
    flip = rng.random(u.size) < 0.5
    u, v = np.where(flip, v[perm], u[perm]), np.where(flip, u[perm], v[perm])
    u, v = np.concatenate([u, [5, u[0], v[0]]]), np.concatenate([v, [5, v[0], u[0]]])
    with EdgeFileWriter(d / "e.bin", "int32", num_nodes=g.num_nodes) as w:
        for lo in range(0, u.size, 1000):
            w.write(u[lo:lo + 1000], v[lo:lo + 1000])
    np.save(d / "x.npy", g.features.numpy())
    np.save(d / "y.npy", g.labels.numpy())
    for k in ("train", "val", "test"):
        np.save(d / f"{k}.npy", getattr(g, f"{k}_mask").numpy())
    return d, u, v, g


@pytest.fixture(scope="module")
def folder(raw):
    """``workbench partition e.bin --stream --method spring --parts 4 --out pf --with-features ...`` with small
    buckets and a small temporary budget (several ranges per part, several passes)."""
    d = raw[0]
    out = d / "pf"
    args = ["partition", str(d / "e.bin"), "--stream", "--method", "spring", "--parts", "4", "--out", str(out),
            "--with-features", str(d / "x.npy"), "--labels", str(d / "y.npy"), "--train", str(d / "train.npy"),
            "--val", str(d / "val.npy"), "--test", str(d / "test.npy"), "--bucket-edges", "1500", "--temp-budget-mb", "1", "--json"]
    assert main(args) == 0
    return out


# ------------------------------------------------------------------------------------------- binary streams

def test_binary_edge_files_stream_like_text(raw, tmp_path):
    d, u, v, _ = raw
    text = tmp_path / "e.txt"
    text.write_text("".join(f"{a} {b}\n" for a, b in zip(u.tolist(), v.tolist())))
    npy = tmp_path / "e.npy"
    with EdgeFileWriter(npy, "int64") as w:
        w.write(u, v)
    raw_bin = tmp_path / "plain.bin"   # no sidecar: the dtype comes from the flag
    np.stack([u, v], 1).astype("<i8").tofile(raw_bin)
    info = edge_file_info(d / "e.bin")
    assert (info.dtype.name, info.num_lines, info.num_nodes) == ("int32", u.size, 3000)
    assert np.load(npy).tolist() == np.stack([u, v], 1).tolist()
    for path, kw in ((d / "e.bin", {}), (npy, {}), (raw_bin, {"dtype": "int64"})):
        chunks = list((c[0].copy(), c[1].copy()) for c in EdgeFileStream(path, chunk_edges=777, **kw))
        assert np.concatenate([c[0] for c in chunks]).tolist() == u.tolist(), path
        assert np.concatenate([c[1] for c in chunks]).tolist() == v.tolist(), path
        assert max(c[0].size for c in chunks) == 777
    from workbench.partition.streaming import SpringPartitioner

    want = stream_partition(text, 4, method="spring", num_nodes=3000).owner
    for path, kw in ((d / "e.bin", {}), (npy, {}), (raw_bin, {"dtype": "int64"})):
        got = SpringPartitioner().stream(EdgeFileStream(path, chunk_edges=500, num_nodes=3000, **kw), 4).owner
        assert np.array_equal(got, want), path
    assert main(["partition", str(raw_bin), "--stream", "--method", "hdrf", "--parts", "3", "--edge-dtype", "int64",
                 "--json"]) == 0
    # In memory too: a .bin with a sidecar is an edge list (a plain .bin stays DGL's format), cleaned as text is.
    assert torch.equal(load_graph(str(d / "e.bin")).indices, load_graph(str(text)).indices)


def test_binary_edge_file_errors(tmp_path, capsys):
    plain = tmp_path / "p.bin"
    np.arange(6, dtype="<i4").tofile(plain)
    with pytest.raises(ParamError, match="'dtype' parameter of EdgeFileStream must be one of"):
        EdgeFileStream(plain, dtype="int16")
    with pytest.raises(ParamError, match="'dtype' parameter of edge_file_info must be one of \\['int32', 'int64'\\] for "
                                         "the raw edge file"):
        edge_file_info(plain)
    (tmp_path / "odd.bin").write_bytes(b"\0" * 12)
    with pytest.raises(ParamError, match="whole number of int64 pairs"):
        edge_file_info(tmp_path / "odd.bin", "int64")
    np.save(tmp_path / "e.npy", np.zeros((3, 2), np.int32))
    with pytest.raises(ParamError, match="'dtype' parameter of EdgeFileStream must be the .npy header's dtype int32"):
        EdgeFileStream(tmp_path / "e.npy", dtype="int64")
    with EdgeFileWriter(tmp_path / "big.bin", "int32", num_nodes=3) as w:
        w.write(np.array([0]), np.array([7]))
    with pytest.raises(ParamError, match="vertex ids below num_nodes=3"):
        list(EdgeFileStream(tmp_path / "big.bin"))
    with pytest.raises(ParamError, match="'dtype' parameter of EdgeFileWriter must be int64 for ids up to"):
        EdgeFileWriter(tmp_path / "w.bin", "int32").write(np.array([2 ** 33]), np.array([0]))
    assert main(["partition", str(plain), "--stream", "--method", "hash", "--parts", "2", "--edge-dtype", "int8"]) == 2
    assert "'--edge-dtype' parameter of workbench partition --stream must be one of" in capsys.readouterr().err
    assert main(["partition", str(plain), "--stream", "--method", "hash", "--parts", "2", "--edge-dtype", "int32",
                 "--temp-budget-mb", "0", "--bucket-edges", "5"]) == 2
    err = capsys.readouterr().err
    assert "'--temp-budget-mb' parameter" in err and "Got 0" in err and "'--bucket-edges' parameter" in err
    assert main(["partition", str(plain), "--method", "metis", "--parts", "2", "--with-features", "x.npy"]) == 2
    assert "'--with-features' parameter of workbench partition must be used with --stream" in capsys.readouterr().err
    np.save(tmp_path / "x.npy", np.zeros((3, 2), np.float32))
    assert main(["partition", str(tmp_path / "e.npy"), "--stream", "--method", "hash", "--parts", "2",
                 "--with-features", str(tmp_path / "x.npy")]) == 2
    err = capsys.readouterr().err
    assert "'--with-features' parameter" in err and "must be used with --out DIR" in err and "'--labels'" in err


# ------------------------------------------------------------------------------------------- generate

def test_generate_is_seeded_and_bounded(tmp_path, capsys):
    spec = "papers-like:num_nodes=5000,avg_degree=10,num_features=4,seed=3"
    assert main(["generate", spec, "--out", str(tmp_path / "a.bin"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert main(["generate", spec, "--out", str(tmp_path / "b.npy"), "--dtype", "int64"]) == 0
    capsys.readouterr()
    a = np.fromfile(tmp_path / "a.bin", dtype="<i4").reshape(-1, 2)
    assert np.array_equal(a, np.load(tmp_path / "b.npy"))   # the spec alone decides the lines
    assert info["num_nodes"] == 5000 and info["num_lines"] == a.shape[0] > 20_000 and (a[:, 0] != a[:, 1]).all()
    x, y = np.load(tmp_path / "a.features.npy"), np.load(tmp_path / "a.labels.npy")
    assert x.shape == (5000, 4) and x.dtype == np.float32 and y.shape == (5000,)
    train = np.load(tmp_path / "a.train.npy")
    assert train.size == round(0.0109 * 5000) and (y[train] >= 0).all() and (y >= 0).sum() == sum(
        np.load(tmp_path / f"a.{k}.npy").size for k in ("train", "val", "test"))
    for k in ("rmat:scale=10,edge_factor=4", "chunglu:num_nodes=800,avg_degree=6"):
        assert main(["generate", k, "--out", str(tmp_path / "c.bin")]) == 0
        assert edge_file_info(tmp_path / "c.bin").num_lines > 0
    capsys.readouterr()
    assert main(["generate", "karate", "--out", str(tmp_path / "k.bin")]) == 2
    assert "'spec' parameter of workbench generate must be a generator spec of ['rmat'" in capsys.readouterr().err
    assert main(["generate", "rmat:scale=5", "--out", str(tmp_path / "r.bin"), "--dtype", "int8"]) == 2
    assert "'dtype' parameter of workbench generate must be one of" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- folders

def _assert_shards_equal(a, b):
    assert a.num_owned == b.num_owned and torch.equal(a.gid, b.gid)
    for name in ("agg_rows", "agg_cols", "agg_weights", "features", "labels", "train_mask", "edge_src", "edge_dst"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert all(torch.equal(x, y) for x, y in zip(a.agg_scales, b.agg_scales))


def test_folder_round_trips_part_subgraph(raw, folder):
    """The streaming writer's folder equals the in-memory part_subgraph of the cleaned graph exactly (vertices,
    edges and their order, Â, node data), and its owned rows are the whole graph."""
    d = raw[0]
    g = load_graph(_files_spec(d, d / "e.bin"))
    owner = torch.from_numpy(np.load(folder / "owner.npy"))
    pf = PartFolder(folder)
    m = pf.manifest
    assert m["num_parts"] == 4 and m["num_nodes"] == 3000 and m["method"] == "spring" and m["num_classes"] == 6
    assert m["num_edges_owned_rows"] == g.num_edges
    assert max(len(list((folder / q["dir"]).iterdir())) for q in m["parts"]) == 8
    for p in range(4):
        for model in (GCN(), GraphSAGE()):
            _assert_shards_equal(folder_shard(pf, p, model), part_subgraph(g, owner, p, 1, model))
        arrays = pf.open_part(p)
        assert isinstance(arrays["indices"], np.memmap) and arrays["indices"].dtype == np.int32
        q = m["parts"][p]
        assert q["num_local"] == q["num_owned"] + q["num_halo"] == arrays["gid"].shape[0]
        assert q["num_train"] == int(part_subgraph(g, owner, p, 1, GraphSAGE()).train_mask.sum())
    whole = read_part_graph(folder)
    for name in ("indptr", "indices", "features", "labels", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(whole, name), getattr(g, name)), name
    assert load_graph(f"parts:{folder}").num_edges == load_graph(str(folder)).num_edges == g.num_edges
    assert not (folder / ".buckets").exists() and not (folder / "edge_assignment.npy").exists()


def test_folder_of_a_directed_stream_and_groups(raw, tmp_path):
    """Directed lines (u -> v kept as given, halo rows only where the halo vertex is an in-neighbour of the part's
    owned set), several groups of parts (one pass each): still part_subgraph of the deduplicated graph."""
    d, u, v, _ = raw
    n = 3000
    owner = np.random.default_rng(1).integers(0, 5, n)
    edges = EdgeFileStream(d / "e.bin", directed=True, chunk_edges=999)
    write_part_folders(edges, owner, tmp_path / "pf", features=d / "x.npy", labels=d / "y.npy",
                       train=d / "train.npy", val=d / "val.npy", test=d / "test.npy", bucket_edges=1024,
                       temp_budget_bytes=1 << 20)
    from workbench.data.cleaning import clean_graph

    g = Graph.from_edges(torch.from_numpy(u), torch.from_numpy(v), n, directed=True,
                         features=torch.from_numpy(np.load(d / "x.npy")), labels=torch.from_numpy(np.load(d / "y.npy")),
                         train_mask=torch.from_numpy(np.load(d / "train.npy")))
    g, _ = clean_graph(g, symmetrize=False)
    pf = PartFolder(tmp_path / "pf")
    assert pf.manifest["directed"] is True and pf.manifest["num_edges_owned_rows"] == g.num_edges
    for p in range(5):
        _assert_shards_equal(folder_shard(pf, p, GCN()), part_subgraph(g, torch.from_numpy(owner), p, 1, GCN()))
    with pytest.raises(ParamError, match="'features' parameter of write_part_folders must be a \\(3000, F\\) float"):
        write_part_folders(edges, owner, tmp_path / "bad", features=d / "y.npy", labels=d / "y.npy")


def test_parts_spec_errors(raw, folder, tmp_path):
    from recipes import catgnn

    with pytest.raises(ParamError, match="'select' parameter of PartsConfig must be part ids in \\[0, 4\\)"):
        load_graph(f"parts:dir={folder},select=0+9")
    with pytest.raises(ParamError, match="'dir' parameter of PartsConfig.* must be a partition folder"):
        load_graph(f"parts:{tmp_path}")
    for change, name in (({"num_parts": 3}, "num_parts"), ({"sync.halo_hops": 0}, "sync.halo_hops"),
                         ({"partition.method": "hdrf"}, "partition.method")):
        cfg = catgnn.recipe(graph=f"parts:dir={folder},select=0+1", epochs=1, model={"hidden": 4}).replace(**change)
        with pytest.raises(ParamError, match=f"'{name}' parameter of RunConfig must be"):
            cfg.build().prepare(2, lambda e: None)


# ------------------------------------------------------------------------------------------- training

def _run(program_or_cfg, workers):
    from workbench.runtime import launch

    return launch(program_or_cfg, runner="local", workers=workers, out=None).wait(timeout=300)


@pytest.mark.parametrize("recipe,workers", [("recipe", 1), ("recipe", 2), ("minibatch", 2)])
def test_training_from_the_folder_equals_the_parts_in_memory(raw, folder, recipe, workers):
    from recipes import catgnn

    d = raw[0]
    spec = _files_spec(d, d / "e.bin")
    g = load_graph(spec)
    owner = torch.from_numpy(np.load(folder / "owner.npy"))
    make = getattr(catgnn, recipe)
    memory = _run(make(graph=spec, epochs=4, num_parts=4, model={"hidden": 8}).build(graph=g, node_part=owner), workers)
    ours = _run(make(graph=f"parts:{folder}", epochs=4, model={"hidden": 8}), workers)
    assert ours["losses"] == pytest.approx(memory["losses"], abs=1e-5)
    assert ours["parts"] == memory["parts"]
    assert_same_weights(ours, memory)
    assert 0 < ours["accuracy_by_epoch"]["val"][-1] <= 1   # per part, owned vertices (rank 0's parts)


def test_halo_features_by_reference_train_the_same_and_hold_owned_rows_only(raw, folder, tmp_path):
    """``--halo-features reference``: each part's features.npy holds its owned rows only (N x F on disk in all,
    not RF x N x F); the halo rows are gathered from the input at load, so the shards and the run are the same."""
    from recipes import catgnn
    from workbench.data.partfolder import PartFolder
    from workbench.train.model_averaging import folder_shard

    d = raw[0]
    ref = tmp_path / "pf-ref"
    args = ["partition", str(d / "e.bin"), "--stream", "--method", "spring", "--parts", "4", "--out", str(ref),
            "--with-features", str(d / "x.npy"), "--labels", str(d / "y.npy"), "--train", str(d / "train.npy"),
            "--val", str(d / "val.npy"), "--test", str(d / "test.npy"), "--halo-features", "reference"]
    assert main(args) == 0
    copy, by_ref = PartFolder(folder), PartFolder(ref)
    assert by_ref.manifest["halo_features"] == "reference" and copy.manifest["halo_features"] == "copy"
    rows = sum(np.load(by_ref.part_dir(p) / "features.npy", mmap_mode="r").shape[0] for p in range(4))
    assert rows == copy.num_nodes                                          # owned rows only: N in all
    for p in range(4):
        a, b = folder_shard(copy, p, GCN()), folder_shard(by_ref, p, GCN())
        assert torch.equal(a.features, b.features) and torch.equal(a.gid, b.gid)
        ids = np.array([a.num_local - 1, 0, a.num_owned, a.num_owned - 1, a.num_local - 1])   # halo and owned rows
        assert np.array_equal(by_ref.feature_rows(p, ids), a.features.numpy()[ids])
        assert np.array_equal(copy.feature_rows(p, ids), a.features.numpy()[ids])
    first = _run(catgnn.recipe(graph=f"parts:{folder}", epochs=2, model={"hidden": 8}), 2)
    second = _run(catgnn.recipe(graph=f"parts:{ref}", epochs=2, model={"hidden": 8}), 2)
    assert_same_run(second, first, rtol=0)
    assert main(["partition", str(d / "e.bin"), "--stream", "--method", "spring", "--parts", "2", "--out",
                 str(tmp_path / "plain"), "--halo-features", "reference"]) != 0   # refused without a folder
    assert not (tmp_path / "plain").exists()


def test_minibatch_from_a_folder_reads_per_batch(raw, folder, monkeypatch):
    """Mini-batch training from a folder never loads a part whole (no folder_shard, no Â): the sampler reads the
    part's CSR as written (int32 ids, unmapped after each batch), feature rows are read per batch, equal to
    the part's rows, and the sampler's rows of a part in memory are the folder's, in the same order."""
    from recipes import catgnn
    from workbench.train import model_averaging
    from workbench.train.sampled_parts import folder_sampled_part, shard_sampled_part

    d = raw[0]
    g = load_graph(_files_spec(d, d / "e.bin"))
    owner = torch.from_numpy(np.load(folder / "owner.npy"))
    pf = PartFolder(folder)
    ids = torch.tensor([7, 0, 3, pf.parts[2]["num_owned"] + 5, 7])
    for p in range(4):
        mapped = folder_sampled_part(folder, p, 1.0, True)
        memory = shard_sampled_part(part_subgraph(g, owner, p, 1, GraphSAGE()))
        rows = mapped.source.rows
        assert rows.indices.dtype == torch.int32 and torch.equal(rows.indptr, memory.source.rows.indptr)
        assert torch.equal(rows.indices.long(), memory.source.rows.indices)
        mapped.source.release()
        assert len(mapped.source._maps) == 2   # mapped once, pages given back after each batch
        assert torch.equal(mapped.train_ids, memory.train_ids) and torch.equal(mapped.labels, memory.labels)
        assert torch.equal(mapped.feature_rows(ids), memory.feature_rows(ids))
        assert torch.equal(mapped.feature_rows(ids), torch.from_numpy(pf.part_features(p)[ids.numpy()]))

    def refuse(*args, **kwargs):
        raise AssertionError("a part loaded whole in mini-batch mode")

    monkeypatch.setattr(model_averaging, "folder_shard", refuse)
    s = _run(catgnn.minibatch(graph=f"parts:{folder}", epochs=2, model={"hidden": 8}, sample={"batch_size": 64}), 1)
    assert len(s["losses"]) == 2 and 0 < s["accuracy_by_epoch"]["val"][-1] <= 1
    # evaluation with the training fan-outs: the same training, other accuracies; refused where it does nothing
    t = _run(catgnn.minibatch(graph=f"parts:{folder}", epochs=2, model={"hidden": 8}, sample={"batch_size": 64},
                              **{"sync.eval_sample": "train"}), 1)
    assert t["losses"] == s["losses"] and 0 < t["accuracy_by_epoch"]["val"][-1] <= 1
    for cfg in (catgnn.recipe(graph=f"parts:{folder}"), catgnn.minibatch()):
        with pytest.raises(ParamError, match=r"'sync.eval_sample' parameter of RunConfig must be 'full' unless"):
            cfg.replace(**{"sync.eval_sample": "train"}).build()


def test_folder_payloads_load_in_the_rank_and_pickle_small(folder):
    from recipes import catgnn

    program = catgnn.recipe(graph=f"parts:dir={folder},select=1+3", epochs=1, model={"hidden": 4}).build()
    payloads = program.prepare(2, lambda e: None)
    assert [[s.part for s in p.shards] for p in payloads] == [[1], [3]]
    part = payloads[0].shards[0]
    assert part._shard is None and payloads[0].full._d is None   # nothing read on the client
    assert len(pickle.dumps(payloads[0])) < 4000
    assert part.num_local == part.gid.numel() and part._shard is not None
    clone = pickle.loads(pickle.dumps(payloads[0]))
    assert clone.shards[0]._shard is None and torch.equal(clone.shards[0].gid, part.gid)
    assert sum(s["alpha"] for s in program.trainer.shard_sizes) == pytest.approx(1.0)


def _as_version_1(src, dst):
    """A copy of the folder ``src`` as the writer made it before the compact types: int64 ``gid``, ``indptr`` and
    ``labels``, manifest version 1 without ``dtypes``."""
    import shutil

    shutil.copytree(src, dst)
    m = json.loads((dst / "manifest.json").read_text())
    for q in m["parts"]:
        for name in ("gid", "indptr", "labels"):
            path = dst / q["dir"] / f"{name}.npy"
            np.save(path, np.load(path).astype(np.int64))
    m["version"] = 1
    del m["dtypes"]
    (dst / "manifest.json").write_text(json.dumps(m))
    return dst


@pytest.mark.parametrize("halo", ["copy", "reference"])
def test_compact_folders_and_version_1_folders_read_the_same(raw, folder, tmp_path, monkeypatch, halo):
    """The writer stores int32 global ids and labels in the smallest type holding them (int8 for 6 classes) and
    lists the types in the manifest; a folder in the former format (int64 ids and labels) reads the same through
    every reader: the whole graph, folder shards, sampled parts, feature rows and a training run."""
    from recipes import catgnn
    from workbench.sample import keyed
    from workbench.sample.keyed import sample_rows_keyed, stream_key
    from workbench.train.sampled_parts import folder_sampled_part

    d = raw[0]
    if halo == "reference":
        compact = tmp_path / "pf-ref"
        assert main(["partition", str(d / "e.bin"), "--stream", "--method", "spring", "--parts", "4", "--out",
                     str(compact), "--with-features", str(d / "x.npy"), "--labels", str(d / "y.npy"), "--train",
                     str(d / "train.npy"), "--val", str(d / "val.npy"), "--test", str(d / "test.npy"),
                     "--halo-features", "reference"]) == 0
    else:
        compact = folder
    old = _as_version_1(compact, tmp_path / "v1")
    new_pf, old_pf = PartFolder(compact), PartFolder(old)
    assert new_pf.manifest["version"] == 2 and old_pf.manifest["version"] == 1
    assert new_pf.manifest["dtypes"] == {"gid": "int32", "indptr": "int32", "indices": "int32", "labels": "int8",
                                         "features": "float32", "masks": "bool"}
    for p in range(4):
        a, b = new_pf.open_part(p), old_pf.open_part(p)
        assert a["gid"].dtype == a["indptr"].dtype == np.int32 and a["labels"].dtype == np.int8
        assert b["gid"].dtype == b["indptr"].dtype == np.int64
        for name in ("gid", "indptr", "labels"):
            assert np.array_equal(a[name], b[name])
        for model in (GCN(), GraphSAGE()):
            _assert_shards_equal(folder_shard(new_pf, p, model), folder_shard(old_pf, p, model))
        x, y = folder_sampled_part(compact, p, 1.0, True), folder_sampled_part(old, p, 1.0, True)
        assert torch.equal(x.labels, y.labels) and x.labels.dtype == torch.int64
        assert x.source.rows.indptr.dtype == torch.int32 and y.source.rows.indptr.dtype == torch.int64
        frontier = torch.arange(min(40, x.num_owned))
        for fanout, replace in ((3, False), (2, True), (-1, False)):   # compiled, and numpy (int32 widened)
            key = stream_key(0, 1, 0, p)
            e, f = (sample_rows_keyed(z.source.rows, frontier, fanout, replace, key) for z in (x, y))
            with monkeypatch.context() as m:
                m.setattr(keyed, "_compiled_sampler", lambda: None)
                g = sample_rows_keyed(x.source.rows, frontier, fanout, replace, key)
            for h in (f, g):
                assert torch.equal(e.src_gid, h.src_gid) and torch.equal(e.dst_gid, h.dst_gid)
        assert torch.equal(x.train_ids, y.train_ids)
        assert all(torch.equal(i, j) for i, j in zip(x.eval_masks, y.eval_masks))
        ids = np.array([a["gid"].shape[0] - 1, 0, new_pf.parts[p]["num_owned"], 3])
        assert np.array_equal(new_pf.feature_rows(p, ids), old_pf.feature_rows(p, ids))
        assert np.array_equal(new_pf.part_features(p), old_pf.part_features(p))
    whole, former = read_part_graph(compact), read_part_graph(old)
    for name in ("indptr", "indices", "features", "labels", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(whole, name), getattr(former, name)), name
    assert whole.labels.dtype == torch.int64
    if halo == "copy":
        first = _run(catgnn.minibatch(graph=f"parts:{compact}", epochs=1, model={"hidden": 8},
                                      sample={"batch_size": 64}), 1)
        second = _run(catgnn.minibatch(graph=f"parts:{old}", epochs=1, model={"hidden": 8}, sample={"batch_size": 64}),
                      1)
        assert first["losses"] == second["losses"]


def test_label_dtype_is_the_smallest_holding_the_labels():
    from workbench.partition.streaming.folders import label_dtype

    assert [label_dtype(-1, hi) for hi in (5, 127, 128, 171, 40000, 2 ** 31)] == \
        [np.int8, np.int8, np.int16, np.int16, np.int32, np.int64]
    assert label_dtype(-200, 3) == np.int16 and label_dtype(0, 3) == np.int8


def test_range_limits_cut_by_the_degree_budget():
    from workbench.partition.streaming.kernels_folders import range_limits

    rng = np.random.default_rng(0)
    deg = rng.integers(0, 50, 1000).astype(np.int32)
    for ids in (np.sort(rng.choice(1000, 300, replace=False)).astype(np.int32), np.zeros(0, np.int32)):
        for budget in (1, 64, 700, 10 ** 9):
            w = deg[ids].astype(np.int64)
            group = (np.cumsum(w) - w) // budget
            want = np.concatenate([ids[np.flatnonzero(np.diff(group)) + 1], [1000]])
            assert range_limits(ids, deg, budget, 1000).tolist() == want.tolist()


# ------------------------------------------------------------------------------------------- any recipe on a folder
# a run from a partition folder trains on the folder's parts (its owner map), whatever the recipe


@pytest.fixture(scope="module")
def folder2(raw):
    """A 2-part SPRING folder of the same stream."""
    d = raw[0]
    out = d / "pf2"
    args = ["partition", str(d / "e.bin"), "--stream", "--method", "spring", "--parts", "2", "--out", str(out),
            "--with-features", str(d / "x.npy"), "--labels", str(d / "y.npy"), "--train", str(d / "train.npy"),
            "--val", str(d / "val.npy"), "--test", str(d / "test.npy")]
    assert main(args) == 0
    return out


@pytest.mark.parametrize("recipe", ["full_graph", "distdgl", "sancus", "g3", "psc_gcn", "bytegnn", "catgnn"])
def test_any_recipe_trains_on_the_folders_parts(raw, folder2, recipe):
    """``--graph parts:DIR`` on two Dask workers trains on the folder's parts (not a fresh METIS run): the same
    run as the graph in memory with the folder's owner map as ``node_part``, and the summary names the folder's
    method. (CATGNN also: ``test_training_from_the_folder_equals_the_parts_in_memory``; HP-GCN:
    ``test_hp_gcn_trains_a_hypergraph_folder_and_refuses_another``.)"""
    import importlib

    from workbench.events import PartitionComputed
    from workbench.runtime import launch

    d = raw[0]
    make = importlib.import_module(f"recipes.{recipe}").recipe
    g = load_graph(_files_spec(d, d / "e.bin"))
    owner = torch.from_numpy(np.load(folder2 / "owner.npy"))
    assert torch.equal(torch.from_numpy(PartFolder(folder2).owner_part()), owner)
    settings = {"epochs": 2, "model": {"hidden": 8}}
    memory = _run(make(graph="karate", **settings).build(graph=g, node_part=owner), 2)
    run = launch(make(graph=f"parts:{folder2}", **settings), runner="dask", workers=2, out=None)
    ours = run.wait(timeout=300)
    assert_same_run(ours, memory, rtol=1e-5)
    setup = ours["bytes_by_kind"].pop("part_setup", 0)    # halo runs agree their plans on the ranks
    assert ours["bytes_by_kind"] == memory["bytes_by_kind"]
    halo = 24 * int(np.sum(PartFolder(folder2).manifest["comm_rows"]))
    # G3 too: its ranks read their parts and plan their bins (the bins' agreement beside the halo's)
    assert setup == halo if recipe == "full_graph" else setup > halo if recipe in ("sancus", "g3") else setup >= 0
    assert ours["partition"] == "spring" and ours["stages"]["partition"]["method"] == "spring"
    assert ours["stages"]["partition"]["folder"] == str(folder2)
    assert [e.method for e in run.events if isinstance(e, PartitionComputed)] == ["spring"]


def test_hp_gcn_trains_a_hypergraph_folder_and_refuses_another(tmp_path, folder2):
    """HP-GCN is defined by its hypergraph partition: a folder of another method is refused before any rank
    starts, naming the method and how to write the right folder; a hypergraph folder trains as that partition in
    memory (each rank reading its part)."""
    from recipes import hp_gcn
    from workbench.runtime import launch

    with pytest.raises(ParamError, match=r"'graph' parameter of RunConfig must be a partition folder of the run's "
                                         r"own method 'hypergraph'.*--method hypergraph --folder DIR.*its parts are "
                                         r"'spring'"):
        hp_gcn.recipe(graph=f"parts:{folder2}", epochs=1).build().prepare(2, lambda e: None)
    d = tmp_path / "hp"
    assert main(["partition", SMALL, "--parts", "2", "--method", "hypergraph", "--folder", str(d)]) == 0
    owner = torch.from_numpy(PartFolder(d).owner_part())
    memory = _run(hp_gcn.recipe(epochs=2).build(graph=read_part_graph(d), node_part=owner), 2)
    ours = launch(hp_gcn.recipe(graph=f"parts:{d}", epochs=2), runner="dask", workers=2, out=None).wait(timeout=300)
    assert_same_run(ours, memory, rtol=1e-5)
    ours["bytes_by_kind"].pop("part_setup")
    assert ours["bytes_by_kind"] == memory["bytes_by_kind"] and ours["partition"] == "hypergraph"


def test_a_folder_run_refuses_other_parts_and_a_partition_method_set_by_name(folder2):
    from recipes import distdgl, full_graph

    spec = f"parts:{folder2}"
    with pytest.raises(ParamError, match=r"The 'num_parts' parameter of RunConfig must be 2, the parts of the "
                                         r"partition folder .* Got 3 instead"):
        full_graph.recipe(graph=spec, epochs=1).build().prepare(3, lambda e: None)
    with pytest.raises(ParamError, match=r"'num_parts' parameter .* Got 4 instead"):
        distdgl.recipe(graph=spec, epochs=1, num_parts=4).build().prepare(4, lambda e: None)
    cfg = distdgl.recipe(epochs=1).with_strings({"graph": spec, "partition.method": "random"})   # as --set does
    with pytest.raises(ParamError) as info:
        cfg.build().prepare(3, lambda e: None)
    text = str(info.value)   # both errors at once, before the graph is read
    assert "The 'partition.method' parameter of RunConfig must be unset or the folder's method 'spring'" in text
    assert "Got 'random' instead" in text and "'num_parts' parameter" in text
    # the recipe's own partition config (distdgl's METIS) and the folder's method by name are accepted
    for ok in (distdgl.recipe(graph=spec, epochs=1),
               distdgl.recipe(epochs=1).with_strings({"graph": spec, "partition.method": "spring"})):
        ok.build().prepare(2, lambda e: None)


# ------------------------------------------------------------------------------------------- folders of any method
# workbench partition GRAPH --parts P --method M --folder DIR, from any registered partitioner

SMALL = "sbm:num_nodes=600,num_blocks=3,seed=0"


@pytest.mark.parametrize("method", ["metis", "random", "kaminpar"])
def test_any_method_writes_a_folder_that_trains_as_that_method(tmp_path, method, capsys):
    """The folder holds the method's in-memory partition, rebuilds the input graph exactly, and a run from it
    trains on those parts with the summary naming the method."""
    from recipes import full_graph
    from workbench.partition import partition
    from workbench.runtime import launch

    d = tmp_path / "pf"
    assert main(["partition", SMALL, "--parts", "2", "--method", method, "--folder", str(d)]) == 0
    assert f"wrote the partition folder {d} (2 parts of {method}" in capsys.readouterr().out
    g = load_graph(SMALL)
    pf = PartFolder(d)
    assert pf.method == method and pf.num_parts == 2 and pf.manifest["source"] == SMALL
    assert pf.manifest["inputs"] == {"features": None, "labels": None}   # the temporary inputs are gone
    in_memory = partition(g, 2, method=method, seed=0).node_part.numpy()
    assert np.array_equal(pf.owner_part(), in_memory) and np.array_equal(np.load(d / "owner.npy"), in_memory)
    whole = read_part_graph(d)
    for name in ("indptr", "indices", "features", "labels", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(whole, name), getattr(g, name)), name
    for p in range(2):   # each part is the in-memory completed subgraph of the method's owners
        _assert_shards_equal(folder_shard(pf, p, GCN()), part_subgraph(g, torch.from_numpy(in_memory), p, 1, GCN()))
    summary = launch(full_graph.recipe(graph=f"parts:{d}", epochs=2, model={"hidden": 8}), runner="local", workers=2,
                     out=None, blocking=True).wait(timeout=300)
    assert summary["partition"] == method and summary["stages"]["partition"]["method"] == method


def test_folder_flag_refusals(tmp_path, capsys):
    """--folder with --stream or --out, or halo rows by reference, is refused at once before the graph is read;
    a graph without features or labels before it is partitioned; nothing is written."""
    d = tmp_path / "pf"
    assert main(["partition", "no-such-graph", "--parts", "2", "--folder", str(d), "--stream", "--out",
                 str(tmp_path / "o"), "--halo-features", "reference"]) == 2
    text = capsys.readouterr().err
    assert "3 invalid parameters" in text
    assert (f"The '--folder' parameter of workbench partition must be used without --stream (a streamed partition "
            f"folder is --stream --out DIR --with-features X.npy --labels Y.npy). Got {str(d)!r} instead.") in text
    assert "The '--folder' parameter of workbench partition must be used without --out" in text
    assert ("The '--halo-features' parameter of workbench partition must be copy with --folder (the graph's "
            "features are not a file a folder could reference). Got 'reference' instead.") in text
    edges = tmp_path / "e.txt"   # an edge list: no features, no labels
    edges.write_text("0 1\n1 2\n2 3\n3 0\n")
    assert main(["partition", str(edges), "--parts", "2", "--method", "random", "--folder", str(d)]) == 2
    text = capsys.readouterr().err
    assert "2 invalid parameters" in text
    assert ("The 'GRAPH' parameter of workbench partition --folder must be a graph with (N, F) float features (a "
            "partition folder holds each part's feature rows). Got 'e.txt: no features' instead.") in text
    assert ("must be a graph with (N,) labels (a partition folder holds each part's labels). Got 'e.txt: no "
            "labels'") in text
    assert not d.exists() and not (tmp_path / "o").exists()


def test_a_text_edge_file_is_parsed_once_for_the_partition_and_its_folder(raw, folder, tmp_path, monkeypatch):
    """The partitioner's first pass spills the text's pairs; every later pass, the folder writer's included, reads
    the spill: the same folder as from the binary file, file for file, and the text read once."""
    d, u, v, _ = raw
    text = tmp_path / "e.txt"
    text.write_text("".join(f"{a} {b}\n" for a, b in zip(u.tolist(), v.tolist())))
    parses = []
    original = EdgeFileStream._text_chunks

    def counted(self):
        parses.append(1)
        return original(self)

    monkeypatch.setattr(EdgeFileStream, "_text_chunks", counted)
    out = tmp_path / "pf"
    args = ["partition", str(text), "--stream", "--method", "spring", "--parts", "4", "--out", str(out),
            "--num-nodes", "3000", "--with-features", str(d / "x.npy"), "--labels", str(d / "y.npy"),
            "--train", str(d / "train.npy"), "--val", str(d / "val.npy"), "--test", str(d / "test.npy"),
            "--bucket-edges", "1500", "--temp-budget-mb", "1", "--json"]
    assert main(args) == 0
    assert len(parses) == 1
    assert not list(out.glob("edges-*.bin"))   # the spill is gone
    for want in sorted(p for p in folder.rglob("*.npy")):
        got = out / want.relative_to(folder)
        assert np.array_equal(np.load(got), np.load(want)), want.relative_to(folder)
