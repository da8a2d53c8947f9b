"""KaMinPar partitioner: cut against METIS, balance, seeded determinism, the ParHIP file, refusal when missing."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
import torch

from workbench._validation import ParamError
from workbench.data import load_graph
from workbench.partition import KaMinParPartitioner, partition
from workbench.partition.kaminpar import read_parhip, write_parhip
from workbench.partition.metis import symmetric_csr

pytest.importorskip("kaminpar")


@pytest.fixture(scope="module")
def planted():
    # heavy-tailed degrees and 81 % of edges inside 47 planted blocks: a graph where the cut is not trivial
    return load_graph("products-like:num_nodes=4000,avg_degree=16,num_features=4,seed=0")


def test_cut_is_comparable_to_metis_and_balanced(planted):
    num_parts, eps = 8, 0.03
    metis = partition(planted, num_parts, method="metis", seed=0).metrics().edge_cut
    result = partition(planted, num_parts, method="kaminpar", seed=0, imbalance=eps)
    assert result.metrics().edge_cut <= 1.3 * metis
    # KaMinPar's bound: (1 + epsilon) x the rounded-up mean part size
    assert result.part_sizes().max() <= (1 + eps) * math.ceil(planted.num_nodes / num_parts)
    assert result.part_sizes().min() > 0


def test_wider_imbalance_is_honoured(planted):
    sizes = partition(planted, 4, method="kaminpar", seed=0, imbalance=0.2).part_sizes()
    assert sizes.max() <= 1.2 * math.ceil(planted.num_nodes / 4)


@pytest.mark.parametrize("preset", ["fast", "default"])
def test_same_seed_same_parts(planted, preset):
    a = KaMinParPartitioner(seed=5, preset=preset).partition(planted, 6)
    b = KaMinParPartitioner(seed=5, preset=preset).partition(planted, 6)
    assert torch.equal(a.node_part, b.node_part)
    assert a.method == "kaminpar" and a.stats["file_bytes"] > 0 and a.stats["write_s"] >= 0


def test_one_part_is_all_zeros(planted):
    assert partition(planted, 1, method="kaminpar").node_part.unique().tolist() == [0]


def test_parhip_file_round_trips(planted, tmp_path):
    xadj, adjncy, _ = symmetric_csr(planted)
    size = write_parhip(tmp_path / "g.parhip", xadj, adjncy)
    (version, n, m), xadj2, adjncy2, vw, ew = read_parhip(tmp_path / "g.parhip")
    assert (version, n, m) == (15, planted.num_nodes, len(adjncy))   # unweighted, 32-bit offsets and ids
    assert size == (tmp_path / "g.parhip").stat().st_size == 24 + (n + 1) * 4 + m * 4
    np.testing.assert_array_equal(xadj2, xadj)
    np.testing.assert_array_equal(adjncy2, adjncy)
    assert vw is None and ew is None
    # and KaMinPar reads the same graph
    import kaminpar

    kg = kaminpar.load_graph(str(tmp_path / "g.parhip"), kaminpar.GraphFileFormat.PARHIP)
    assert (kg.n(), kg.m()) == (n, m)
    for u in (0, n // 2, n - 1):
        assert [v for v, _ in kg.neighbors(u)] == adjncy[xadj[u]:xadj[u + 1]].tolist()


def test_parhip_weights_round_trip(tmp_path):
    xadj, adjncy = np.array([0, 1, 3, 5, 6]), np.array([1, 0, 2, 1, 3, 2])
    vw, ew = np.array([1, 2, 3, 4]), np.array([5, 5, 7, 7, 9, 9])
    write_parhip(tmp_path / "w.parhip", xadj, adjncy, node_weights=vw, edge_weights=ew)
    (version, _, _), xadj2, adjncy2, vw2, ew2 = read_parhip(tmp_path / "w.parhip")
    assert version == 12
    np.testing.assert_array_equal(adjncy2, adjncy)
    np.testing.assert_array_equal(vw2, vw)
    np.testing.assert_array_equal(ew2, ew)
    import kaminpar

    kg = kaminpar.load_graph(str(tmp_path / "w.parhip"), kaminpar.GraphFileFormat.PARHIP)
    assert [kg.node_weight(u) for u in range(4)] == vw.tolist()
    assert kg.neighbors(1) == [(0, 5), (2, 7)]


def test_temporary_folder_is_removed(planted, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    partition(planted, 2, method="kaminpar")
    assert list(tmp_path.iterdir()) == []


def test_bad_values_use_the_template():
    with pytest.raises(ParamError, match=r"The 'preset' parameter of .* must be one of .*Got 'quick' instead"):
        KaMinParPartitioner(preset="quick")
    with pytest.raises(ParamError, match=r"The 'threads' parameter"):
        KaMinParPartitioner(threads=0)


def test_missing_package_is_refused_before_start(monkeypatch):
    from workbench.compose import RunConfig
    from workbench.composition import check_composition

    monkeypatch.setitem(sys.modules, "kaminpar", None)   # `import kaminpar` now raises ImportError
    assert "pip install kaminpar" in KaMinParPartitioner.unavailable()
    cfg = RunConfig.compose(graph="karate").with_strings({"partition.method": "kaminpar"})
    with pytest.raises(ParamError, match=r"partition\.method.*kaminpar"):
        check_composition(cfg)
    with pytest.raises(ParamError, match="a method whose library imports here"):
        KaMinParPartitioner()
