from __future__ import annotations

import gzip
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from workbench._validation import ParamError
from workbench.data import load_graph
from workbench.data.readers import DataFormatError, read_dgl_binary, read_edge_list, read_ogb_node_dataset


def _edges(g):
    s, d = g.edges()
    return sorted(zip(s.tolist(), d.tolist()))


# ------------------------------------------------------------------------------------------------ edge list


def test_separators_comments_and_blank_lines(tmp_path):
    p = tmp_path / "g.txt"
    p.write_text("# header\n% matrix-market style comment\n0 1\n\n1,2\n2\t3\n  3   0  \r\n4 0 # trailing\n")
    g = read_edge_list(p)
    assert g.num_nodes == 5 and g.directed
    assert _edges(g) == [(0, 1), (1, 2), (2, 3), (3, 0), (4, 0)]
    assert g.name == "g.txt"


def test_a_comment_after_leading_blanks_is_a_comment_line_for_both_parsers(tmp_path):
    """pandas reads '   # note' as a row of missing values: the reader failed on such a file ('Integer column has
    NA values'), and the compiled parser of the streaming reader handed the whole block to it."""
    from workbench.partition.streaming.stream import EdgeFileStream

    p = tmp_path / "g.txt"
    p.write_text("0 1\n   # indented\n\t% tabbed\n , # after a comma\n1 2\n2 3 # trailing\n")
    assert _edges(read_edge_list(p)) == [(0, 1), (1, 2), (2, 3)]
    chunks = [(s.tolist(), d.tolist()) for s, d in EdgeFileStream(p, chunk_edges=2)]
    assert sum((s for s, _ in chunks), []) == [0, 1, 2] and sum((d for _, d in chunks), []) == [1, 2, 3]


@pytest.mark.parametrize("seed", range(3))
def test_indented_comment_lines_never_end_the_read_early(tmp_path, seed):
    """Comment lines after leading blanks (spaces, tabs, a comma), in every position, with blocks cut anywhere
    (tiny chunks put block boundaries inside and around them): both parsers read every edge line after them,
    in file order, the streaming reader whether it parses each pass or once (its spill)."""
    from workbench.partition.streaming import stream_partition
    from workbench.partition.streaming.stream import EdgeFileStream, SpilledTextStream

    rng = np.random.default_rng(seed)
    lines, want = [], []
    for _ in range(400):
        r = rng.random()
        if r < 0.25:
            lines.append(str(rng.choice([" ", "   ", "\t", " \t ", ",", ""])) + str(rng.choice(["#", "%"]))
                         + str(rng.choice(["", " note", " 1 2 3"])))
        elif r < 0.3:
            lines.append(str(rng.choice(["", "  ", "\t"])))
        else:
            u, v = (int(x) for x in rng.integers(0, 50, 2))
            want.append((u, v))
            lead, sep, tail = (str(rng.choice(c)) for c in (["", " ", "  "], [" ", "\t", ","], ["", " # tail", "\r"]))
            lines.append(f"{lead}{u}{sep}{v}{tail}")
    p = tmp_path / "g.txt"
    p.write_text("   # indented first line\n" + "\n".join(lines) + "\n   # indented last line")
    assert _edges(read_edge_list(p)) == sorted(want)
    for chunk_edges in (1, 2, 3, 64):
        got = [pair for s, d in EdgeFileStream(p, chunk_edges=chunk_edges) for pair in zip(s.tolist(), d.tolist())]
        assert got == want, chunk_edges
    spill = SpilledTextStream(EdgeFileStream(p, chunk_edges=2), tmp_path / "spill")
    for _ in range(2):
        assert [pair for s, d in spill for pair in zip(s.tolist(), d.tolist())] == want
    spill.close()
    assert stream_partition(p, 2, method="hash").metrics.num_lines == len(want)


def test_num_nodes_and_undirected(tmp_path):
    p = tmp_path / "g.txt"
    p.write_text("0 1\n1 2\n")
    g = read_edge_list(p, num_nodes=10, directed=False)
    assert g.num_nodes == 10 and not g.directed
    assert _edges(g) == [(0, 1), (1, 0), (1, 2), (2, 1)]


def test_gzip_file(tmp_path):
    p = tmp_path / "g.txt.gz"
    with gzip.open(p, "wt") as f:
        f.write("0 1\n1 2\n2 0\n")
    assert _edges(read_edge_list(p)) == [(0, 1), (1, 2), (2, 0)]


@pytest.mark.parametrize("chunk_bytes", [1, 3, 7, 64, 1 << 20])
def test_chunk_boundaries_give_the_same_graph(tmp_path, chunk_bytes):
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 300, 500), rng.integers(0, 300, 500)
    seps = [" ", ",", "\t"]
    lines = ["# comment"] + [f"{s}{seps[i % 3]}{d}" for i, (s, d) in enumerate(zip(src, dst))]
    lines.insert(100, "% another comment")
    lines.insert(200, "")
    p = tmp_path / "big.txt"
    p.write_text("\n".join(lines))  # no trailing newline on purpose
    g = read_edge_list(p, chunk_bytes=chunk_bytes)
    expected = sorted(zip(src.tolist(), dst.tolist()))
    assert _edges(g) == expected


def test_weight_column_is_ignored_with_a_warning(tmp_path):
    p = tmp_path / "w.txt"
    p.write_text("0 1 0.5\n1 2 2.0\n")
    with pytest.warns(UserWarning, match="third column"):
        g = read_edge_list(p)
    assert _edges(g) == [(0, 1), (1, 2)]


@pytest.mark.parametrize("chunk_bytes", [4, 1 << 20])
@pytest.mark.parametrize(
    "text, num_nodes, line, field, words",
    [
        ("0 1\n1 x\n", None, 2, "field 2", "integer"),
        ("0 1\n1.5 2\n", None, 2, "field 1", "integer"),
        ("# c\n0 1\n-3 2\n", None, 3, "field 1", "non-negative"),
        ("0 1\n1 2\n2 9\n", 5, 3, "field 2", "num_nodes=5"),
        ("0 1\n1 2 3 4\n", None, 2, "4 fields", "columns"),
        ("0 1\n1\n", None, 2, "1 fields", "columns"),
        ("7\n", None, 1, "1 fields", "2 columns"),
        ("0 1 1.0\n1 2\n", None, 2, "2 fields", "3 columns"),
        ("0 99999999999999999999\n", None, 1, "field 2", "int64"),
    ],
)
def test_bad_input_names_file_line_and_field(tmp_path, text, num_nodes, line, field, words, chunk_bytes):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(DataFormatError) as info:
            read_edge_list(p, num_nodes=num_nodes, chunk_bytes=chunk_bytes)
    err = info.value
    assert isinstance(err, ParamError)
    assert err.line == line and err.field is not None and field in err.field
    msg = str(err)
    assert "bad.txt" in msg and f"line {line}" in msg and words in msg


@pytest.mark.parametrize("text", ["", "# only comments\n% and more\n\n"])
def test_empty_file(tmp_path, text):
    p = tmp_path / "empty.txt"
    p.write_text(text)
    with pytest.raises(DataFormatError, match="at least one edge"):
        read_edge_list(p)


def test_missing_file_and_bad_arguments(tmp_path):
    with pytest.raises(ParamError, match="existing file"):
        read_edge_list(tmp_path / "nope.txt")
    p = tmp_path / "g.txt"
    p.write_text("0 1\n")
    with pytest.raises(ParamError, match="num_nodes"):
        read_edge_list(p, num_nodes=-1)
    with pytest.raises(ParamError, match="chunk_bytes"):
        read_edge_list(p, chunk_bytes=0)


def test_load_graph_cleans_files_and_reports(tmp_path):
    p = tmp_path / "g.txt"
    p.write_text("0 1\n0 1\n1 1\n1 2\n")
    g, rep = load_graph(p, return_report=True)
    assert not g.directed and _edges(g) == [(0, 1), (1, 0), (1, 2), (2, 1)]
    assert (rep.self_loops_removed, rep.duplicates_removed, rep.edges_added_by_symmetrization) == (1, 1, 2)
    assert g.cleaning_report is rep
    raw = load_graph(str(p), clean=False)
    assert raw.directed and raw.num_edges == 4


# ------------------------------------------------------------------------------------------------ OGB


def _write_csv_gz(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        for row in rows:
            f.write(",".join(str(x) for x in (row if isinstance(row, (list, tuple)) else [row])) + "\n")


def make_ogb_dir(root: Path, *, n=6, f=3, scheme="sales_ranking", feat_rows=None, nan_at=None, edges=None,
                 num_node_list=True, labels=None):
    rng = np.random.default_rng(0)
    edges = edges if edges is not None else [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (0, 3)]
    _write_csv_gz(root / "raw" / "edge.csv.gz", edges)
    feats = rng.standard_normal((n if feat_rows is None else feat_rows, f)).round(3).tolist()
    if nan_at is not None:
        feats[nan_at[0]][nan_at[1]] = "nan"
    _write_csv_gz(root / "raw" / "node-feat.csv.gz", feats)
    _write_csv_gz(root / "raw" / "node-label.csv.gz", labels if labels is not None else [i % 2 for i in range(n)])
    if num_node_list:
        _write_csv_gz(root / "raw" / "num-node-list.csv.gz", [n])
    if scheme:
        _write_csv_gz(root / "split" / scheme / "train.csv.gz", [0, 1, 2])
        _write_csv_gz(root / "split" / scheme / "valid.csv.gz", [3])
        _write_csv_gz(root / "split" / scheme / "test.csv.gz", [4, 5])
    return root


@pytest.mark.parametrize("chunk_rows", [1, 2, 1000])
def test_ogb_reader(tmp_path, chunk_rows):
    root = make_ogb_dir(tmp_path / "ogbn_tiny")
    g = read_ogb_node_dataset(root, chunk_rows=chunk_rows)
    assert g.num_nodes == 6 and not g.directed and g.num_edges == 14
    assert g.features.shape == (6, 3) and g.features.dtype == torch.float32
    assert g.labels.tolist() == [0, 1, 0, 1, 0, 1]
    assert g.train_mask.tolist() == [True, True, True, False, False, False]
    assert g.val_mask.nonzero().flatten().tolist() == [3]
    assert g.test_mask.nonzero().flatten().tolist() == [4, 5]
    assert g.name == "ogbn_tiny"
    directed = read_ogb_node_dataset(root, symmetrize=False, chunk_rows=chunk_rows)
    assert directed.directed and directed.num_edges == 7
    assert load_graph(str(root)).num_edges == 14  # spec dispatch to the OGB reader


def test_ogb_without_num_node_list_or_split(tmp_path):
    root = make_ogb_dir(tmp_path / "d", num_node_list=False, scheme=None)
    g = read_ogb_node_dataset(root)
    assert g.num_nodes == 6 and g.train_mask is None


def test_ogb_unlabelled_nodes(tmp_path):
    root = make_ogb_dir(tmp_path / "d", labels=[0, "", 1, "nan", 2, 0])
    assert read_ogb_node_dataset(root).labels.tolist() == [0, -1, 1, -1, 2, 0]


def test_ogb_split_scheme_choice(tmp_path):
    root = make_ogb_dir(tmp_path / "d", scheme="a")
    make_ogb_dir(root, scheme="b")
    with pytest.raises(ParamError, match="'a', 'b'"):
        read_ogb_node_dataset(root)
    assert read_ogb_node_dataset(root, split="b").train_mask.sum() == 3
    with pytest.raises(ParamError, match="split"):
        read_ogb_node_dataset(root, split="c")


@pytest.mark.parametrize("chunk_rows", [2, 1000])
def test_ogb_errors(tmp_path, chunk_rows):
    def err(root, **kw):
        with pytest.raises(DataFormatError) as info:
            read_ogb_node_dataset(root, chunk_rows=chunk_rows, **kw)
        return info.value

    e = err(tmp_path / "empty_dir")
    assert "edge.csv.gz" in str(e) and "missing" in str(e)

    e = err(make_ogb_dir(tmp_path / "rows", feat_rows=5))
    assert "node-feat.csv.gz" in str(e) and "5 rows" in str(e) and "num_nodes=6" in str(e)

    e = err(make_ogb_dir(tmp_path / "labelrows", num_node_list=False, labels=[0] * 7))
    assert "node-label.csv.gz" in str(e) and "7 rows" in str(e)

    e = err(make_ogb_dir(tmp_path / "nan", nan_at=(4, 2)))
    assert e.line == 5 and e.field == "column 3" and "NaN" in str(e)

    e = err(make_ogb_dir(tmp_path / "bigid", edges=[(0, 1), (1, 2), (2, 6)]))
    assert "edge.csv.gz" in str(e) and e.line == 3

    e = err(make_ogb_dir(tmp_path / "negid", edges=[(0, 1), (-1, 2)]))
    assert e.line == 2

    e = err(make_ogb_dir(tmp_path / "textid", edges=[(0, 1), (1, 2), (2, "x")]))
    assert e.line == 3 and e.field == "column 2"

    e = err(make_ogb_dir(tmp_path / "cols", edges=[(0, 1, 2), (1, 2, 3)]))
    assert "2 comma-separated columns" in str(e)

    root = make_ogb_dir(tmp_path / "nosplit")
    (root / "split" / "sales_ranking" / "valid.csv.gz").unlink()
    e = err(root)
    assert "valid.csv.gz" in str(e) and "missing" in str(e)

    root = make_ogb_dir(tmp_path / "badsplit")
    _write_csv_gz(root / "split" / "sales_ranking" / "test.csv.gz", [4, 5, 60])
    e = err(root)
    assert "test.csv.gz" in str(e) and e.line == 3

    root = make_ogb_dir(tmp_path / "badlabel", labels=[0, 1, 0.5, 1, 0, 1])
    e = err(root)
    assert "node-label.csv.gz" in str(e) and e.line == 3


# ------------------------------------------------------------------------------------------------ DGL binary


def test_dgl_binary_round_trip(tmp_path, karate):
    dgl = pytest.importorskip("dgl")
    path = tmp_path / "karate.bin"
    dgl.save_graphs(str(path), [karate.to_dgl()])
    g = read_dgl_binary(path)
    assert g.name == "karate" and not g.directed
    assert _edges(g) == _edges(karate)
    for attr in ("features", "labels", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(g, attr), getattr(karate, attr)), attr
    g2, rep = load_graph(path, return_report=True)  # spec dispatch on *.bin
    assert g2.num_edges == karate.num_edges and not rep.changed
    with pytest.raises(ParamError, match="index"):
        read_dgl_binary(path, index=3)


def test_dgl_binary_errors(tmp_path):
    pytest.importorskip("dgl")
    with pytest.raises(ParamError, match="existing file"):
        read_dgl_binary(tmp_path / "missing.bin")
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"not a dgl file at all")
    with pytest.raises(DataFormatError, match="bad.bin"):
        read_dgl_binary(bad)
