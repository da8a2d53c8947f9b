from __future__ import annotations

import pytest
import torch

from workbench._validation import ParamError
from workbench.data import GENERATORS, load_graph
from workbench.data.cleaning import clean_graph
from workbench.data.synthetic import (ChungLuConfig, PapersLikeConfig, ProductsLikeConfig, RedditLikeConfig,
                                      RMATConfig, SBMConfig, random_split)

SMALL = {
    "sbm": "sbm:num_nodes=300,num_blocks=4,avg_degree=6,num_features=8",
    "rmat": "rmat:scale=8,edge_factor=4,num_features=8",
    "chunglu": "chunglu:num_nodes=300,avg_degree=6,num_features=8",
    "products-like": "products-like:num_nodes=400,avg_degree=8,num_features=8",
    "reddit-like": "reddit-like:num_nodes=400,avg_degree=8,num_features=8",
    "papers-like": "papers-like:num_nodes=3000,avg_degree=6,num_features=8",
}


def _same(a, b) -> bool:
    return all(torch.equal(getattr(a, k), getattr(b, k)) for k in
               ("indptr", "indices", "features", "labels", "train_mask", "val_mask", "test_mask"))


@pytest.mark.parametrize("name", sorted(SMALL))
def test_generated_graphs_are_clean_undirected_and_complete(name):
    g = load_graph(SMALL[name] + ",seed=3")
    assert not g.directed
    _, rep = clean_graph(g)
    assert not rep.changed, rep  # no self-loops, no duplicates, symmetric
    assert g.features.dtype == torch.float32 and g.features.shape == (g.num_nodes, 8)
    assert g.labels.dtype == torch.int64 and g.labels.shape == (g.num_nodes,)
    masks = g.train_mask.int() + g.val_mask.int() + g.test_mask.int()
    assert int(masks.max()) <= 1  # disjoint splits
    assert int(g.train_mask.sum()) > 0


@pytest.mark.parametrize("name", sorted(SMALL))
def test_same_seed_same_graph_other_seed_other_graph(name):
    a, b = load_graph(SMALL[name] + ",seed=1"), load_graph(SMALL[name] + ",seed=1")
    c = load_graph(SMALL[name] + ",seed=2")
    assert _same(a, b)
    assert not _same(a, c)


@pytest.mark.parametrize("homophily", [0.3, 0.8, 0.95])
@pytest.mark.parametrize("degree_exponent", [None, 2.5])
def test_sbm_homophily_and_degree_on_target(homophily, degree_exponent):
    cfg = SBMConfig(num_nodes=3000, num_blocks=5, avg_degree=12, homophily=homophily,
                    degree_exponent=degree_exponent, num_features=0, seed=0)
    g = cfg.generate()
    src, dst = g.edges()
    measured = float((g.labels[src] == g.labels[dst]).float().mean())  # labels = blocks here
    assert abs(measured - homophily) < 0.03
    assert abs(g.num_edges / g.num_nodes - 12) < 0.6
    assert g.features is None


def test_degree_correction_gives_skewed_degrees():
    flat = SBMConfig(num_nodes=3000, avg_degree=10, num_features=0, seed=0).generate().in_degrees().float()
    skew = SBMConfig(num_nodes=3000, avg_degree=10, num_features=0, degree_exponent=2.2, seed=0).generate()
    skew = skew.in_degrees().float()
    assert skew.max() / skew.mean() > 4 * (flat.max() / flat.mean())


def _nearest_centroid_accuracy(g) -> float:
    x, y = g.features, g.labels
    tr, te = g.train_mask & (y >= 0), g.test_mask & (y >= 0)
    c = int(y.max()) + 1
    cent = torch.stack([x[tr & (y == k)].mean(0) for k in range(c)])
    pred = torch.cdist(x[te], cent).argmin(1)
    return float((pred == y[te]).float().mean())


def test_sbm_features_are_predictive_and_the_graph_helps():
    g = SBMConfig(num_nodes=2000, num_blocks=4, avg_degree=10, homophily=0.9, num_features=16, feature_noise=2.0,
                  seed=0).generate()
    raw = _nearest_centroid_accuracy(g)
    assert raw > 0.25 + 0.15  # well above chance (4 classes)
    # One round of neighbour averaging (what a GCN layer does) denoises the features.
    a = g.to_scipy()
    deg = torch.from_numpy(a.sum(1).A1).clamp(min=1).unsqueeze(1).float()
    smoothed = torch.from_numpy(a @ g.features.numpy()) / deg
    assert _nearest_centroid_accuracy(g.with_data(features=(smoothed + g.features) / 2)) > raw + 0.1


def test_num_classes_and_labelled_blocks():
    g = SBMConfig(num_nodes=400, num_blocks=6, num_classes=3, avg_degree=6, labelled_blocks=2, train_ratio=0.1,
                  val_ratio=0.1, test_ratio=0.1, seed=0).generate()
    assert g.num_classes == 3
    split = g.train_mask | g.val_mask | g.test_mask
    # Blocks are not stored; blocks 0 and 1 carry labels 0 and 1 (label = block % 3).
    assert set(g.labels[split].tolist()) <= {0, 1}
    with pytest.raises(ParamError, match="labelled_blocks"):
        SBMConfig(num_blocks=6, labelled_blocks=1, train_ratio=0.5)


def test_rmat_is_power_law_and_labels_follow_recursion():
    g = RMATConfig(scale=11, edge_factor=8, num_features=0, seed=0).generate()
    deg = g.in_degrees().float()
    assert deg.max() / deg.mean() > 10
    src, dst = g.edges()
    assert float((g.labels[src] == g.labels[dst]).float().mean()) > 1 / 8 + 0.05
    with pytest.raises(ParamError, match="'d'"):
        RMATConfig(a=0.5, b=0.2, c=0.2, d=0.2)


def test_chunglu_degree_skew():
    g = ChungLuConfig(num_nodes=2000, avg_degree=8, exponent=2.2, num_features=0, seed=0).generate()
    deg = g.in_degrees().float()
    assert deg.max() / deg.mean() > 10
    assert abs(deg.mean() - 8) < 1.5


@pytest.mark.parametrize("cls, ratios", [(ProductsLikeConfig, (0.0803, 0.0161, 0.9037)),
                                         (RedditLikeConfig, (0.66, 0.10, 0.24)),
                                         (PapersLikeConfig, (0.0109, 0.0011, 0.0019))])
def test_presets_split_ratios(cls, ratios):
    g = cls(num_nodes=4000, avg_degree=6, num_features=4, seed=0).generate()
    for mask, r in zip((g.train_mask, g.val_mask, g.test_mask), ratios):
        assert abs(int(mask.sum()) - round(r * 4000)) <= 1
    labelled = g.labels >= 0
    if cls is PapersLikeConfig:
        assert torch.equal(labelled, g.train_mask | g.val_mask | g.test_mask)
    else:
        assert bool(labelled.all())
    deg = g.in_degrees().float()
    assert deg.max() / deg.mean() > 3  # skewed degrees


def test_random_split_caps_and_disjoint():
    tr, va, te = random_split(10, 0.5, 0.5, 0.5, seed=0)
    assert int(tr.sum()) == 5 and int(va.sum()) == 5 and int(te.sum()) == 0


def test_invalid_configs_report_all_errors():
    with pytest.raises(ParamError) as info:
        SBMConfig(num_nodes=1, homophily=1.5, train_ratio=-0.1)
    msg = str(info.value)
    assert "num_nodes" in msg and "homophily" in msg and "train_ratio" in msg
    with pytest.raises(ParamError, match="exponent"):
        ChungLuConfig(exponent=1.5)


def test_registry_covers_every_generator():
    assert {"sbm", "rmat", "chunglu", "products-like", "reddit-like", "papers-like", "karate", "lesmis"} <= set(
        GENERATORS)
    for source in GENERATORS.values():
        docs = source.config_cls.field_docs()
        assert all(docs.get(f) for f in source.config_cls.field_names()), source.name  # every field documented


@pytest.mark.parametrize("name", ["sbm", "rmat", "chunglu"])
def test_progress_bar_can_be_forced(name, capsys):
    g = load_graph(SMALL[name], progress=True)
    assert g.num_nodes > 0
    assert "generating" in capsys.readouterr().err
