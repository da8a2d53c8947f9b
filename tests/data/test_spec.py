from __future__ import annotations

from pathlib import Path

import pytest
import torch

import workbench
from workbench._validation import ParamError
from workbench.data import describe_spec, load_graph, parse_spec
from workbench.data.synthetic import SBMConfig


def test_named_spec_coerces_settings():
    p = parse_spec("sbm:num_nodes=500, num_blocks=5,homophily=0.7,degree_exponent=2.5,num_classes=none,seed=4")
    assert p.kind == "named" and isinstance(p.config, SBMConfig)
    c = p.config
    assert (c.num_nodes, c.num_blocks, c.homophily, c.degree_exponent, c.num_classes, c.seed) == (
        500, 5, 0.7, 2.5, None, 4)


def test_load_graph_names_the_graph_after_its_spec():
    g = load_graph("rmat:scale=6,edge_factor=2,seed=0")
    assert g.name == "rmat:scale=6,edge_factor=2,seed=0" and g.num_nodes == 64


def test_graph_is_returned_as_is(karate):
    assert load_graph(karate) is karate
    g, rep = load_graph(karate, return_report=True)
    assert g is karate and rep is None


def test_top_level_alias():
    assert workbench.load_graph("karate").num_nodes == 34


def test_builtins():
    k = load_graph("karate")
    assert (k.num_nodes, k.num_undirected_edges, k.num_classes, k.num_features) == (34, 78, 2, 34)
    assert not k.directed
    assert int(k.labels.sum()) == 17  # 17 members followed the officer
    les = load_graph("lesmis")
    assert (les.num_nodes, les.num_undirected_edges) == (77, 254)
    assert les.num_classes >= 3
    assert torch.equal(les.labels, load_graph("lesmis").labels)  # deterministic communities
    d = load_graph("karate:features=degree,seed=2")
    assert d.num_features == int(d.in_degrees().max()) + 1
    assert not torch.equal(d.train_mask, k.train_mask)


@pytest.mark.parametrize(
    "spec, words",
    [
        ("sbn:num_nodes=10", ["did you mean 'sbm'", "karate"]),
        ("sbm:num_node=10", ["no option 'num_node'", "did you mean 'num_nodes'", "Valid options"]),
        ("sbm:num_nodes=ten", ["'num_nodes'", "'ten'", "int"]),
        ("sbm:num_nodes=10,homophily=2", ["homophily", "[0, 1]"]),
        ("sbm:seed", ["NAME=VALUE"]),
        ("rmat:a=0.9", ["'d'"]),
        ("karate:features=pixels", ["onehot"]),
        ("", ["spec"]),
        ("/no/such/file.txt", ["existing path"]),
    ],
)
def test_bad_specs_raise_one_param_error(spec, words):
    with pytest.raises(ParamError) as info:
        load_graph(spec)
    msg = str(info.value)
    for w in words:
        assert w in msg, (w, msg)


def test_several_bad_settings_are_reported_together():
    with pytest.raises(ParamError) as info:
        load_graph("sbm:num_nodes=100,num_blocks=0,homophily=3,avg_degree=-1")
    assert len(info.value.errors) == 3


def test_directory_without_ogb_layout(tmp_path):
    with pytest.raises(ParamError, match="raw/edge.csv.gz"):
        load_graph(tmp_path)


def test_path_dispatch(tmp_path):
    p = tmp_path / "edges.tsv"
    p.write_text("0\t1\n")
    assert parse_spec(p).kind == "edge_list"
    assert parse_spec(str(p)).kind == "edge_list"
    b = tmp_path / "g.bin"
    b.write_bytes(b"")
    assert parse_spec(b).kind == "dgl"


def test_describe_spec(tmp_path):
    text = describe_spec("sbm:num_nodes=123")
    assert text.startswith("sbm:") and "num_nodes=123" in text and "Number of vertices" in text
    assert "homophily=0.8" in text
    p = tmp_path / "e.txt"
    p.write_text("0 1\n")
    assert "edge-list" in describe_spec(Path(p))
    assert "products-like" in describe_spec("products-like") and "8.03" in describe_spec("products-like")


def test_generated_npy_round_trips_as_a_bare_path(tmp_path, capsys):
    from workbench.cli import main

    out = tmp_path / "gen.npy"
    assert main(["generate", "sbm:num_nodes=50,seed=0", "--out", str(out)]) == 0
    capsys.readouterr()
    parsed = parse_spec(str(out))
    assert parsed.kind == "named" and parsed.config.edges == str(out)
    bare, files = load_graph(str(out)), load_graph(f"files:edges={out}")
    assert bare.num_nodes == files.num_nodes == 50 and bare.num_edges == files.num_edges > 0
    assert torch.equal(bare.indptr, files.indptr) and torch.equal(bare.indices, files.indices)
    assert main(["info", str(out)]) == 0 and "50" in capsys.readouterr().out
