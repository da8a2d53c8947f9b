"""ByteGNN's block partitioner and the sampling-aware partition metrics."""

from __future__ import annotations

import json
from collections import deque

import numpy as np
import pytest
import torch

from workbench._validation import ParamError
from workbench.graph import Graph
from workbench.partition import partition, sampling_metrics
from workbench.partition.bytegnn import (ByteGNNPartitioner, assign_blocks, labelled_splits, neighbourhood_blocks,
                                         place_unreached)


def make_random_graph(n: int, m: int, seed: int) -> Graph:
    """An undirected random graph (both directions stored), a tenth of its vertices labelled."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = src != dst
    src, dst = torch.from_numpy(src[keep]), torch.from_numpy(dst[keep])
    split = rng.integers(0, 10, n)
    masks = {f"{s}_mask": torch.from_numpy(split == i) for i, s in enumerate(("train", "val", "test"))}
    return Graph.from_edges(torch.cat([src, dst]), torch.cat([dst, src]), n, **masks)


def _reference_blocks(g: Graph, centres: np.ndarray, hops: int) -> np.ndarray:
    """Nearest centre within ``hops`` (over in-neighbours), ties to the smaller centre: one BFS per centre."""
    n = g.num_nodes
    best = np.full(n, -1)
    dist = np.full(n, np.iinfo(np.int64).max)
    indptr, indices = g.indptr.numpy(), g.indices.numpy()
    for c in sorted(centres):
        seen = {c: 0}
        q = deque([c])
        while q:
            v = q.popleft()
            if seen[v] == hops:
                continue
            for u in indices[indptr[v]:indptr[v + 1]]:
                if u not in seen:
                    seen[u] = seen[v] + 1
                    q.append(u)
        for v, d in seen.items():
            if d < dist[v]:      # centres in ascending order: a tie keeps the smaller centre
                dist[v], best[v] = d, c
    return best


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_blocks_are_the_nearest_centre_ties_to_the_smaller(hops):
    g = make_random_graph(120, 200, seed=3)
    centres = np.random.default_rng(0).choice(120, 9, replace=False)
    assert np.array_equal(neighbourhood_blocks(g, centres, hops), _reference_blocks(g, centres, hops))


def test_assignment_keeps_every_block_whole_and_balances_the_splits():
    from workbench.data import load_graph

    g = load_graph("papers-like:num_nodes=2000,seed=0")
    result = partition(g, 4, method="bytegnn", num_hops=2)
    part = result.node_part.numpy()
    split = labelled_splits(g)
    block = neighbourhood_blocks(g, np.nonzero(split >= 0)[0], 2)
    has = block >= 0
    assert np.array_equal(part[has], part[block[has]])                  # K-hop blocks never cut
    m = sampling_metrics(result, fanouts=(5, 5))
    assert m.block_vertices_local == 1.0 and m.num_blocks == int((split >= 0).sum())
    products = load_graph("products-like:num_nodes=2000,seed=0")    # every vertex labelled: singleton blocks
    balance = sampling_metrics(partition(products, 4, method="bytegnn"), fanouts=(2,)).split_balance
    assert balance["train"] < 1.2 and balance["test"] < 1.2


def test_paper_variant_is_literal_and_patched_handles_the_edge_cases():
    # two components, each one block: every CE is 0, so the paper's argmax always picks part 0
    g = Graph.from_edges(torch.tensor([0, 1, 3, 4]), torch.tensor([1, 0, 4, 3]), 6)
    block = np.array([0, 0, -1, 3, 3, -1])
    split = np.array([0, -1, -1, 0, -1, -1])
    assert assign_blocks(g, block, split, 2, variant="paper").tolist() == [0, 0, -1, 0, 0, -1]
    assert assign_blocks(g, block, split, 2, variant="patched").tolist() == [0, 0, -1, 1, 1, -1]
    placed = place_unreached(g, np.array([0, 0, -1, 1, 1, -1]), 2)
    assert (placed >= 0).all() and placed[:2].tolist() == [0, 0]


def test_unreached_vertices_and_determinism():
    g = make_random_graph(80, 60, seed=1)            # sparse: many vertices far from every labelled one
    for unreached in ("neighbours", "singleton"):
        a = ByteGNNPartitioner(num_hops=1, unreached=unreached).partition(g, 3).node_part
        b = ByteGNNPartitioner(num_hops=1, unreached=unreached).partition(g, 3).node_part
        assert torch.equal(a, b) and int(a.min()) >= 0 and int(a.max()) <= 2
    with pytest.raises(ParamError, match="'variant' parameter of ByteGNNPartitioner.Config must be one of"):
        ByteGNNPartitioner(variant="fancy")


def test_remote_khop_accesses(karate):
    one = sampling_metrics(partition(karate, 1, method="random"), fanouts=(3, 3))
    assert all(v == 0 for v in one.remote_accesses.values()) and one.sampled_accesses["train"] > 0
    two = sampling_metrics(partition(karate, 2, method="random"), fanouts=(3, 3))
    assert 0 < two.remote_accesses["train"] < two.sampled_accesses["train"]
    d = two.to_dict()
    assert {"train_balance", "val_balance", "test_balance", "remote_khop_fraction_test", "num_blocks"} <= set(d)


def test_cli_partition_and_sample_with_bytegnn(capsys):
    from workbench.cli import main

    assert main(["partition", "karate", "--parts", "2", "--method", "bytegnn", "--khop", "3,3", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["method"] == "bytegnn" and 0.0 <= d["remote_khop_fraction_train"] <= 1.0
    assert main(["sample", "karate", "--parts", "2", "--method", "bytegnn", "--fanouts", "3,3", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["partition"] == "bytegnn" and d["khop_fanouts"] == [3, 3] and "test_balance" in d
