"""Ranks own their data. A halo run on a partition folder hands each rank a reference to its part; the
rank reads its own files, agrees its halo plan with the owners (one exchange of requested ids, and the GLOBAL
out-degrees the GCN weights need, counted as ``part_setup``) and trains exactly as the same partition in memory;
the client reads the manifest only."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from workbench.communicate.inprocess import InProcessGroup
from workbench.data import load_graph
from workbench.data.partfolder import PartFolder, read_part_graph
from workbench.testing import assert_same_run
from workbench.train.block_row import build_block_shard, build_block_shards
from workbench.train.full_graph import build_halo_shard, build_shards
from workbench.train.models import MODELS
from workbench.train.part_source import FolderParts, InMemoryParts, PartRef

UNDIRECTED = "sbm:num_nodes=400,num_blocks=4,seed=0"
DIRECTED = "directed"


def _graph(spec):
    """The SBM graph, or (``directed``) one direction of each of its edges, chosen at random."""
    from workbench.graph import Graph

    g = load_graph(UNDIRECTED if spec == DIRECTED else spec)
    if spec != DIRECTED:
        return g
    s, d = g.edges()
    keep = torch.from_numpy(np.random.default_rng(1).random(s.numel()) < 0.5)
    return Graph.from_edges(s[keep], d[keep], g.num_nodes, directed=True, features=g.features, labels=g.labels,
                            train_mask=g.train_mask, val_mask=g.val_mask, test_mask=g.test_mask)


def _on_ranks(source, model="gcn", build=build_halo_shard):
    """Every rank's shard built by ``build`` on threads, and the ranks' setup bytes."""
    group = InProcessGroup(source.num_parts)
    shards, setup = [None] * source.num_parts, [0] * source.num_parts
    errors = []

    def body(r):
        try:
            comm = group.communicator(r)
            shards[r] = build(PartRef(source=source, part=r, model=MODELS.build(model), num_train_global=0,
                                                 num_classes=0, predicted={}), comm)
            setup[r] = comm.counter.bytes_by_kind().get("part_setup", 0)
        except BaseException as exc:   # pragma: no cover - shown below
            errors.append(exc)
            group.abort()

    threads = [threading.Thread(target=body, args=(r,)) for r in range(source.num_parts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return shards, setup


def _assert_same_shard(got, want):
    gp, wp = got.plan, want.plan
    for name in ("inner_gid", "halo_gid", "halo_owner"):
        assert torch.equal(getattr(gp, name), getattr(wp, name)), name
    assert gp.recv_counts == wp.recv_counts
    assert all(torch.equal(a, b) for a, b in zip(gp.send_local_nid, wp.send_local_nid))
    shape = (gp.num_inner, gp.num_inner + gp.num_halo)
    # the same weights, as exactly as float32 computes them
    assert torch.equal(_dense((got.agg_rows, got.agg_cols, got.agg_weights), *shape),
                       _dense((want.agg_rows, want.agg_cols, want.agg_weights), *shape))
    for a, b in zip(got.agg_scales, want.agg_scales):
        assert torch.equal(a, b)
    _assert_same_data(got.data, want.data)


def _dense(coo, rows, cols):
    m = torch.zeros(rows, cols, dtype=torch.float64)
    m.index_put_((coo[0], coo[1]), coo[2].to(torch.float64), accumulate=True)
    return m


def _assert_same_data(got, want):
    for name in ("features", "labels", "train_mask", "val_mask", "test_mask", "global_nid"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name


@pytest.mark.parametrize("spec,model", [(UNDIRECTED, "gcn"), (DIRECTED, "gcn"), (DIRECTED, "sage")])
def test_shards_built_on_the_ranks_equal_the_shards_cut_from_the_whole_graph(spec, model):
    """Directed graphs included: a halo vertex's out-degree is summed from every part's in-edges at its owner."""
    g = _graph(spec)
    assert g.directed == (spec == DIRECTED)
    node_part = torch.from_numpy(np.random.default_rng(0).integers(0, 3, g.num_nodes))
    shards, setup = _on_ranks(InMemoryParts(g, node_part), model)
    want, plans = build_shards(g, node_part, 3, MODELS.build(model), [g.num_features, 16])
    for got, w in zip(shards, want):
        _assert_same_shard(got, w)
    assert sum(setup) == 24 * sum(p.num_halo for p in plans)    # ids, counts and degrees: 3 int64 per halo row


def _assert_same_blocks(got, want):
    assert got.block_sizes == want.block_sizes and torch.equal(got.global_nid, want.global_nid)
    mine = want.block_sizes[want.rank]
    for j, size in enumerate(want.block_sizes):
        assert torch.equal(_dense(got.fwd[j], mine, size), _dense(want.fwd[j], mine, size)), f"fwd {j}"
        assert torch.equal(_dense(got.bwd[j], mine, size), _dense(want.bwd[j], mine, size)), f"bwd {j}"
        for a, b in zip(got.fwd_scales[j] + got.bwd_scales[j], want.fwd_scales[j] + want.bwd_scales[j]):
            assert torch.equal(a, b)
    _assert_same_data(got.data, want.data)


@pytest.mark.parametrize("spec,model", [(UNDIRECTED, "gcn"), (DIRECTED, "gcn"), (DIRECTED, "sage")])
def test_block_rows_built_on_the_ranks_equal_the_blocks_cut_from_the_whole_graph(spec, model):
    """CAGNET's blocks of Â and of Âᵀ (whose rows a part does not hold: they come from the sources' owners)."""
    g = _graph(spec)
    node_part = torch.from_numpy(np.random.default_rng(0).integers(0, 3, g.num_nodes))
    shards, _ = _on_ranks(InMemoryParts(g, node_part), model, build_block_shard)
    for got, want in zip(shards, build_block_shards(g, node_part, 3, MODELS.build(model), [g.num_features, 16])):
        _assert_same_blocks(got, want)


def _client_reads_no_part(monkeypatch):
    """Make every reader of a graph or a part raise in this process (the client); Dask's worker processes, where
    the ranks run, keep theirs."""
    from workbench.data import partfolder

    def refuse(*args, **kwargs):
        raise AssertionError("the client read the graph or a part")

    for name in ("read_part_graph", "gather_rows"):
        monkeypatch.setattr(partfolder, name, refuse)
    for name in ("owner_part", "open_part", "part_features", "feature_rows"):
        monkeypatch.setattr(partfolder.PartFolder, name, refuse)
    monkeypatch.setattr("workbench.data.load_graph", refuse)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from workbench.cli import main

    d = tmp_path_factory.mktemp("parts") / "pf"
    assert main(["partition", "sbm:num_nodes=1200,num_blocks=4,seed=0", "--parts", "2", "--method", "metis",
                 "--folder", str(d)]) == 0
    return d


def test_a_folder_part_reads_as_its_graph_in_memory(folder):
    pf = PartFolder(folder)
    g, owner = read_part_graph(folder), torch.from_numpy(pf.owner_part())
    shards, _ = _on_ranks(FolderParts(folder))
    want, _ = build_shards(g, owner, 2, MODELS.build("gcn"), [g.num_features, 16])
    for got, w in zip(shards, want):
        _assert_same_shard(got, w)


def test_a_minibatch_rank_holds_its_part_as_stored_and_nothing_graph_sized_in_int64(folder):
    """What makes a papers100M-sized part fit a rank: the partition book in one byte a vertex, the edges as the
    folder stores them (int32 local ids, memory-mapped, translated for the sampled edges only), the rows found by
    binary search in the owned ids, the feature rows memory-mapped; the sampled edges equal the whole graph's."""
    from functools import partial

    from workbench.sample.keyed import CSRRows, sample_rows_keyed, stream_key
    from workbench.train.minibatch_shard import build_minibatch_shard

    pf = PartFolder(folder)
    counts = {k: [int(p[f"num_{k}"]) for p in pf.parts] for k in ("train", "val", "test")}

    def build(ref, comm):
        ref.split_counts = counts
        return build_minibatch_shard(ref, comm, split_mode="own", degrees=False)

    shards, _ = _on_ranks(FolderParts(folder), build=build)
    g = read_part_graph(folder)
    whole = CSRRows(g.indptr, g.indices)
    for r, sh in enumerate(shards):
        assert sh.node_part.dtype == torch.int8 and sh.rows.row_of_gid is None
        assert sh.rows.indices.dtype == torch.int32 and sh.rows.col_gid is not None
        draw = partial(sample_rows_keyed, gid=sh.owned_gid[::7], fanout=3, replace=False, key=stream_key(0, 0, 0, r))
        got, want = draw(sh.rows), draw(whole)
        assert torch.equal(got.dst_gid, want.dst_gid) and torch.equal(got.src_gid, want.src_gid)


@pytest.mark.parametrize("recipe,staleness", [("full_graph", "none"), ("full_graph", "epoch-fixed"),
                                              ("sancus", "epoch-adaptive"), ("psc_gcn", "none")])
def test_a_full_graph_run_from_a_folder_reads_parts_on_the_ranks_and_equals_the_run_in_memory(
        folder, recipe, staleness, monkeypatch):
    """On two Dask worker processes: the client never rebuilds the graph, reads no part file and no owner map
    (each would raise here; the ranks run in other processes, untouched); the run equals the same partition
    trained in memory (losses and weights to 1e-5, the training's bytes by kind exactly), plus ``part_setup``."""
    import importlib

    from workbench.runtime import launch

    make = importlib.import_module(f"recipes.{recipe}").recipe
    pf = PartFolder(folder)
    g, owner = read_part_graph(folder), torch.from_numpy(pf.owner_part())
    settings = {"epochs": 3, "model.hidden": 8}
    if recipe == "sancus":
        settings["staleness"] = staleness
    elif staleness != "none":
        settings["exchange"] = make().exchange.replace(staleness=staleness, epsilon=1.0)
    memory = launch(make(**settings).build(graph=g, node_part=owner), runner="local", workers=2,
                    out=None, blocking=True).wait(timeout=300)

    _client_reads_no_part(monkeypatch)
    run = launch(make(graph=f"parts:{folder}", **settings), runner="dask", workers=2, out=None)
    ours = run.wait(timeout=300)
    assert_same_run(ours, memory, rtol=1e-5)
    setup = ours["bytes_by_kind"].pop("part_setup")
    assert ours["bytes_by_kind"] == memory["bytes_by_kind"]
    assert ours["bytes_by_epoch"] == memory["bytes_by_epoch"]
    if recipe in ("full_graph", "psc_gcn"):
        assert setup == 24 * int(np.sum(pf.manifest["comm_rows"]))
    assert ours["predicted_bytes_per_epoch"] == memory["predicted_bytes_per_epoch"]
    assert ours.get("split_sizes") == memory.get("split_sizes")
    assert ours["partition"] == "metis" and len(ours["peak_rss_mb"]["ranks"]) == 2


@pytest.mark.parametrize("variant", ["recipe", "degree_cache", "even", "bytegnn"])
def test_distdgl_from_a_folder_reads_parts_on_the_ranks_and_equals_the_run_in_memory(folder, variant, monkeypatch):
    """DistDGL's trainers on their own parts: rows, features and labels from the rank's part, the balanced (or
    even) split made from the parts' counts with the seeds and labels sent by their parts, a degree cache's
    global degrees summed on the ranks; the partition book is the folder's owner map. Equal to the same
    partition in memory (losses, weights, every byte but ``part_setup``); the client reads no part. ByteGNN
    likewise: each rank's graph store serves the part it read, and the cost model's in-degrees are summed on the
    ranks."""
    from recipes import bytegnn, distdgl
    from workbench.runtime import launch

    pf = PartFolder(folder)
    g, owner = read_part_graph(folder), torch.from_numpy(pf.owner_part())
    make = {"degree_cache": distdgl.degree_cache, "bytegnn": bytegnn.recipe}.get(variant, distdgl.recipe)
    settings = {"epochs": 2, "model.hidden": 8, "sample.fanouts": (4, 4), "sample.batch_size": 64}

    def config(**more):
        cfg = make(**settings, **more)
        return cfg.with_strings({"sample.split": "even"}) if variant == "even" else cfg

    memory = launch(config().build(graph=g, node_part=owner), runner="local", workers=2, out=None,
                    blocking=True).wait(timeout=300)

    _client_reads_no_part(monkeypatch)
    ours = launch(config(graph=f"parts:{folder}"), runner="dask", workers=2, out=None).wait(timeout=300)
    assert_same_run(ours, memory, rtol=1e-5)
    setup = ours["bytes_by_kind"].pop("part_setup")
    assert setup > 0 and ours["bytes_by_kind"] == memory["bytes_by_kind"]
    assert ours["bytes_by_epoch"] == memory["bytes_by_epoch"] and ours["split_sizes"] == memory["split_sizes"]
    assert ours["partition"] == "metis"


G3_KEYS = ("bins_per_layer", "max_bin_bytes", "memory_budget", "memory_budget_auto", "bin_limit")


@pytest.mark.parametrize("memory_budget", ["auto", 20_000])
def test_g3_from_a_folder_plans_its_bins_on_the_ranks_and_equals_the_run_in_memory(folder, memory_budget, monkeypatch):
    """G3's bins on a folder: each rank reads its own part, agrees the largest one-vertex bin and the parts' sizes
    with the others (``auto`` sizes the same budget), packs its own bins and learns their dependencies from the
    owners of its halo; the run equals the partition trained in memory, whose client packs every rank's bins:
    losses and weights, the training's bytes by kind, the ``g3`` block's bins and budget, the ``notes``."""
    from recipes import g3
    from workbench.runtime import launch

    assert g3.recipe().step.memory_budget == "auto"                      # the recipe's default
    pf = PartFolder(folder)
    g, owner = read_part_graph(folder), torch.from_numpy(pf.owner_part())
    settings = {"epochs": 3, "model.hidden": 8, "step.memory_budget": memory_budget}
    memory = launch(g3.recipe(**settings).build(graph=g, node_part=owner), runner="local", workers=2, out=None,
                    blocking=True).wait(timeout=300)

    _client_reads_no_part(monkeypatch)
    program = g3.recipe(graph=f"parts:{folder}", **settings).build()
    assert program.trainer.parts_on_ranks()
    ours = launch(program, runner="dask", workers=2, out=None).wait(timeout=300)
    assert_same_run(ours, memory, rtol=1e-5)
    setup = ours["bytes_by_kind"].pop("part_setup")
    assert setup > 24 * int(np.sum(pf.manifest["comm_rows"]))             # the halo's, and the bins' agreement
    assert ours["bytes_by_kind"] == memory["bytes_by_kind"] and ours["bytes_by_epoch"] == memory["bytes_by_epoch"]
    assert {k: ours["g3"][k] for k in G3_KEYS} == {k: memory["g3"][k] for k in G3_KEYS}
    assert max(max(b) for b in ours["g3"]["bins_per_layer"]) > 1           # bins, not whole parts
    assert (ours["g3"]["memory_budget_auto"] is None) == (memory_budget != "auto")
    g3 = ours["g3"]
    note = f"memory_budget=auto -> {g3['memory_budget'] / 1024:.1f} KiB ({g3['memory_budget_auto']})"
    assert ours.get("notes") == memory.get("notes") == ([note] if memory_budget == "auto" else None)
    assert ours["g3"]["simulated_epoch_s"].keys() == memory["g3"]["simulated_epoch_s"].keys()


def test_g3_from_a_folder_refuses_a_budget_below_the_largest_vertex_bin_on_the_ranks(folder, monkeypatch):
    """The client of a folder run never reads the edges: a given budget whose half cannot hold the largest vertex
    with its in-neighbours fails the run as the ranks read their parts, with the message the client gives for the
    graph in memory (before partitioning), naming ``memory_budget`` and the smallest budget that works."""
    from recipes import g3
    from workbench._validation import ParamError
    from workbench.runtime import launch
    from workbench.runtime.errors import RankFailed

    pf = PartFolder(folder)
    g, owner = read_part_graph(folder), torch.from_numpy(pf.owner_part())
    settings = {"epochs": 1, "model.hidden": 8, "step.memory_budget": 4096}
    with pytest.raises(ParamError, match=r"The 'step.memory_budget' parameter of RunConfig must be 'auto' or at "
                                         r"least \d+ bytes") as info:
        g3.recipe(**settings).build(graph=g, node_part=owner).prepare(2, lambda e: None)
    message = str(info.value)

    _client_reads_no_part(monkeypatch)
    program = g3.recipe(graph=f"parts:{folder}", **settings).build()
    assert len(program.prepare(2, lambda e: None)) == 2                     # the manifest allows it
    with pytest.raises(RankFailed) as failed:                              # a rank's error, its message kept
        launch(g3.recipe(graph=f"parts:{folder}", **settings), runner="dask", workers=2, out=None).wait(timeout=300)
    assert f"ParamError: {message}" in str(failed.value) and "Got 4096 instead" in message
