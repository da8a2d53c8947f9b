"""PartitionResult: validation, halo sets, relabelling, save, reprs, events."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from workbench._validation import ParamError
from workbench.partition import PartitionResult, Relabeling, partition


def test_result_needs_exactly_one_assignment(karate):
    with pytest.raises(ParamError, match="node_part"):
        PartitionResult(graph=karate, num_parts=2, method="x")
    with pytest.raises(ParamError, match="node_part"):
        PartitionResult(graph=karate, num_parts=2, method="x", node_part=torch.zeros(34, dtype=torch.long),
                        edge_part=torch.zeros(156, dtype=torch.long))


def test_result_rejects_bad_shapes_and_ids(karate):
    with pytest.raises(ParamError, match=r"a \(34,\) tensor"):
        PartitionResult(graph=karate, num_parts=2, method="x", node_part=torch.zeros(33, dtype=torch.long))
    with pytest.raises(ParamError, match=r"part ids in \[0, 2\)"):
        PartitionResult(graph=karate, num_parts=2, method="x", node_part=torch.full((34,), 2))
    r = partition(karate, 2, method="block")
    with pytest.raises(ParamError, match="'p' parameter"):
        r.halo_nodes(2)


@pytest.mark.parametrize("directed", [True, False])
def test_halo_is_sources_of_edges_into_the_part(directed, multigraph):
    g = multigraph(30, 90, directed=directed, seed=3)
    r = partition(g, 4, method="random", seed=1)
    src, dst = g.edges()
    for p in range(4):
        into_p = r.node_part[dst] == p
        expected = sorted(set(src[into_p].tolist()) - set(r.inner_nodes(p).tolist()))
        assert r.halo_nodes(p).tolist() == expected


def test_relabel_is_contiguous_per_part_and_invertible(karate):
    r = partition(karate, 3, method="random", seed=5)
    rl = r.relabel()
    assert isinstance(rl, Relabeling)
    assert torch.equal(rl.old_of_new[rl.new_of_old], torch.arange(34))
    assert rl.part_offsets.tolist() == [0] + np.cumsum(r.part_sizes()).tolist()
    for p in range(3):
        lo, hi = rl.part_offsets[p], rl.part_offsets[p + 1]
        assert sorted(rl.old_of_new[lo:hi].tolist()) == r.inner_nodes(p).tolist()
        # order inside a part is the original order (stable)
        assert rl.old_of_new[lo:hi].tolist() == r.inner_nodes(p).tolist()
    assert torch.equal(rl.part_of_new(rl.new_of_old), r.node_part)


def test_save_writes_assignment_and_metrics(tmp_path, karate):
    r = partition(karate, 2, method="metis")
    r.save(tmp_path / "out")
    a = np.load(tmp_path / "out" / "assignment.npy")
    assert a.dtype == np.int64 and a.tolist() == r.node_part.tolist()
    m = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert m["edge_cut"] == r.metrics().edge_cut and m["num_parts"] == 2
    info = json.loads((tmp_path / "out" / "partition.json").read_text())
    assert info["method"] == "metis" and info["kind"] == "edge-cut"


def test_vertex_cut_save(tmp_path, karate):
    edge_part = torch.arange(karate.num_edges) % 3
    r = PartitionResult(graph=karate, num_parts=3, method="hand-made", edge_part=edge_part)
    r.save(tmp_path)
    assert np.load(tmp_path / "edge_assignment.npy").tolist() == edge_part.tolist()
    assert np.load(tmp_path / "assignment.npy").tolist() == r.owner_part.tolist()
    assert json.loads((tmp_path / "metrics.json").read_text())["kind"] == "vertex-cut"


def test_reprs_and_event(karate):
    r = partition(karate, 2, method="random")
    assert "PartitionResult('random'" in repr(r)
    assert "<table" in r._repr_html_()
    event = r.to_event()
    assert event.num_parts == 2 and event.comm_rows == r.comm_rows_matrix().tolist()
    assert sum(event.part_sizes) == 34
    from workbench.events import event_from_dict

    assert event_from_dict(event.to_dict()).metrics == event.metrics


def test_partitioner_emits_event(karate):
    from workbench.partition import PARTITIONERS

    seen = []
    PARTITIONERS["block"]().partition(karate, 2, emit=seen.append)
    assert len(seen) == 1 and seen[0].method == "block"
