"""Bad and hostile files: every reader answers with one DataFormatError line naming the file, the CLI exits 2
with nothing on stdout, and nothing is allocated for a claimed 10^12 vertices.

The hypothesis tests mutate the bytes of valid files (truncate, overwrite, insert, delete) and assert that the
only error that comes out is the documented one (:class:`~workbench._validation.ParamError`, of which
``DataFormatError`` is the file kind).
"""

from __future__ import annotations

import atexit
import gzip
import io
import json
import pickle
import shutil
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench._validation import ParamError
from workbench.cli import main
from workbench.data import load_graph
from workbench.data.folders import write_saint_folder
from workbench.data.planetoid import write_planetoid

N = 120
SPEC = f"sbm:num_nodes={N},num_blocks=3,avg_degree=4,num_features=4,seed=0"
_GRAPH = None


def graph():
    global _GRAPH
    if _GRAPH is None:
        _GRAPH = load_graph(SPEC)
    return _GRAPH


def _write_csv_gz(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        for r in rows:
            f.write((",".join(str(x) for x in r) if isinstance(r, (list, tuple)) else str(r)) + "\n")


def make(fmt: str, root: Path) -> Path:
    """A valid graph of format ``fmt`` under ``root``; returns the spec path."""
    g = graph()
    src, dst = (t.numpy() for t in g.edges())
    if fmt == "edge_list":
        p = root / "g.txt"
        p.write_text("".join(f"{s} {d}\n" for s, d in zip(src, dst)))
        return p
    if fmt == "ogb":
        raw = root / "ogb" / "raw"
        _write_csv_gz(raw / "edge.csv.gz", list(zip(src.tolist(), dst.tolist())))
        _write_csv_gz(raw / "node-feat.csv.gz", g.features.numpy().round(3).tolist())
        _write_csv_gz(raw / "node-label.csv.gz", g.labels.tolist())
        _write_csv_gz(raw / "num-node-list.csv.gz", [N])
        for part, m in (("train", g.train_mask), ("valid", g.val_mask), ("test", g.test_mask)):
            _write_csv_gz(root / "ogb" / "split" / "s" / f"{part}.csv.gz", m.nonzero().flatten().tolist())
        return root / "ogb"
    if fmt in ("planetoid", "planetoid_py3"):
        # val = 500 vertices after the training ones, so the graph needs more than 500 + train + test;
        # "planetoid" is written as Python 2 wrote the downloaded files, "planetoid_py3" by pickle.dump
        big = load_graph(f"sbm:num_nodes=560,num_blocks=2,avg_degree=3,num_features=3,seed=0")
        return write_planetoid(root / "Cora" / "raw", "cora", big, num_train=10, num_test=40, missing_test=2,
                               pickler="python2" if fmt == "planetoid" else "python3").parent
    if fmt in ("saint", "catgnn"):
        return write_saint_folder(root / fmt, g, edge_list=fmt == "catgnn")
    if fmt == "arrays":
        d = root / "arrays"
        d.mkdir()
        np.save(d / "edges.npy", np.stack([src, dst], 1))
        np.save(d / "features.npy", g.features.numpy())
        np.save(d / "labels.npy", g.labels.numpy())
        for k in ("train", "val", "test"):
            np.save(d / f"{k}.npy", np.flatnonzero(getattr(g, f"{k}_mask").numpy()))
        return d
    raise AssertionError(fmt)


FORMATS = ("edge_list", "ogb", "planetoid", "planetoid_py3", "saint", "catgnn", "arrays")


def _npy_bytes(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _claim_huge_npy(path: Path) -> None:
    """Rewrite an .npy header to claim 10^12 rows (the data stays small)."""
    data = path.read_bytes()
    head_len = int.from_bytes(data[8:10], "little")
    header = data[10:10 + head_len].decode("latin1")
    import re

    new = re.sub(r"'shape': \((\d+)", "'shape': (1000000000000", header)
    new = new.rstrip("\n").ljust(head_len - 1) + "\n"
    path.write_bytes(data[:10] + new.encode("latin1")[:head_len] + data[10 + head_len:])


def _edit_npz(path: Path, member: str, arr) -> None:
    with zipfile.ZipFile(path) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    members[f"{member}.npy"] = _npy_bytes(arr)
    with zipfile.ZipFile(path, "w") as zf:
        for k, v in members.items():
            zf.writestr(k, v)


def _nan_feats(path: Path) -> None:
    a = np.load(path)
    a[3, 1] = np.nan
    np.save(path, a)


def _pickle_edit(path: Path, fn) -> None:
    from workbench.data.pickle2 import dumps
    from workbench.data.safe_io import read_pickle

    # our own test file, written and rewritten as Python 2 wrote the real ones
    path.write_bytes(dumps(fn(read_pickle(path, "test"))))


# (format, file to break, how, words expected in the message)
CASES = [
    ("edge_list", "g.txt", lambda p: p.write_bytes(np.random.default_rng(0).bytes(3000)), "g.txt"),
    ("edge_list", "g.txt", lambda p: p.write_text("0 1\n1 1000000000000\n"), "relabel sparse ids"),
    ("edge_list", "g.txt", lambda p: p.write_text("0 1\n-3 2\n"), "non-negative"),
    ("edge_list", "g.txt", lambda p: p.write_text("0 1 2 3\n"), "columns"),
    ("ogb", "ogb/raw/edge.csv.gz", lambda p: p.write_bytes(p.read_bytes()[:40]), "edge.csv.gz"),
    ("ogb", "ogb/raw/num-node-list.csv.gz", lambda p: _write_csv_gz(p, [10 ** 12]), "vertex count"),
    ("ogb", "ogb/raw/node-label.csv.gz", lambda p: _write_csv_gz(p, [0] * (N - 3)), "one row per node"),
    ("ogb", "ogb/raw/node-feat.csv.gz", lambda p: _write_csv_gz(p, [[1, "nan", 2, 3]] * N), "NaN"),
    ("ogb", "ogb/split/s/test.csv.gz", lambda p: _write_csv_gz(p, [N + 5]), "node ids in"),
    ("planetoid", "Cora/raw/ind.cora.x", lambda p: p.write_bytes(p.read_bytes()[:-30]), "ind.cora.x"),
    ("planetoid", "Cora/raw/ind.cora.graph", lambda p: p.write_bytes(np.random.default_rng(1).bytes(500)),
     "ind.cora.graph"),
    ("planetoid", "Cora/raw/ind.cora.ally", lambda p: _pickle_edit(p, lambda a: a[:-4]), "one label row"),
    ("planetoid", "Cora/raw/ind.cora.ty", lambda p: _pickle_edit(p, lambda a: a[:, :1]), "columns"),
    ("planetoid", "Cora/raw/ind.cora.graph", lambda p: _pickle_edit(p, lambda d: {**d, 3: [10 ** 12]}),
     "vertex ids in"),
    ("planetoid", "Cora/raw/ind.cora.allx", lambda p: _pickle_edit(p, lambda m: m.multiply(np.nan)), "finite"),
    ("planetoid", "Cora/raw/ind.cora.x", lambda p: p.write_bytes(pickle.dumps(np.ndarray, protocol=2)),
     "no 2-D matrix"),   # a class, whose 'shape' is a descriptor (found by the mutation test below)
    ("planetoid", "Cora/raw/ind.cora.test.index", lambda p: p.write_text("520\n1000000000000\n"), "spanning"),
    ("saint", "saint/adj_full.npz", lambda p: p.write_bytes(p.read_bytes()[:200]), "adj_full.npz"),
    ("saint", "saint/adj_full.npz", lambda p: _edit_npz(p, "shape", np.array([10 ** 12, 10 ** 12])), "vertex count"),
    ("saint", "saint/feats.npy", _claim_huge_npy, "header claims"),
    ("saint", "saint/feats.npy", lambda p: np.save(p, np.zeros((N, 2), dtype="U3")), "numeric"),
    ("saint", "saint/feats.npy", lambda p: np.save(p, np.zeros((N - 1, 4), np.float32)), "one row per vertex"),
    ("saint", "saint/feats.npy", _nan_feats, "finite"),
    ("saint", "saint/class_map.json", lambda p: p.write_text(json.dumps({str(N + 7): 1})), "vertex ids in"),
    ("saint", "saint/role.json", lambda p: p.write_text(json.dumps({"tr": [0, 1], "va": [1], "te": []})),
     "disjoint"),
    ("saint", "saint/role.json", lambda p: p.write_text('{"tr": [0], "va": [1], "te": [NaN]}'), "JSON"),
    ("catgnn", "catgnn/edge_list.csv", lambda p: p.write_text("0,1\n5,99999\n"), "vertex ids below"),
    ("arrays", "arrays/edges.npy", lambda p: np.save(p, np.zeros((10, 3), np.int64)), "(E, 2)"),
    ("arrays", "arrays/edges.npy", lambda p: np.save(p, np.array([[0, 1], [2, 10 ** 12]])), "vertex ids below"),
    ("arrays", "arrays/labels.npy", lambda p: np.save(p, np.zeros(N + 2, np.int64)), "one label per vertex"),
    ("arrays", "arrays/val.npy", lambda p: np.save(p, np.array([0, 1])), "disjoint"),
    ("arrays", "arrays/features.npy", _nan_feats, "finite"),
    ("arrays", "arrays/features.npy", lambda p: p.write_bytes(p.read_bytes()[:-7]), "complete .npy"),
    ("arrays", "arrays/labels.npy", lambda p: np.save(p, np.zeros(N, np.float32)), "integer label"),
]


@pytest.mark.parametrize("fmt,target,breaker,words", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_bad_file_is_one_line_exit_2(tmp_path, capsys, fmt, target, breaker, words):
    spec = make(fmt, tmp_path)
    path = tmp_path / target
    breaker(path)
    with pytest.raises(ParamError) as info:
        load_graph(str(spec))
    assert words in str(info.value) and path.name in str(info.value)
    assert main(["info", str(spec)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err and err.count("\n") == 1 and path.name in err


def _mutate(data: bytes, op: int, pos: float, blob: bytes) -> bytes:
    i = int(pos * len(data))
    if op == 0:
        return data[:i]
    if op == 1:
        return data[:i] + blob + data[i + len(blob):]
    if op == 2:
        return data[:i] + blob + data[i:]
    return data[:i] + data[i + 1 + len(blob):]


# the files a mutation picks from, per reader
MUTABLE = {
    "edge_list": ["g.txt"],
    "ogb": ["raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/node-label.csv.gz", "raw/num-node-list.csv.gz",
            "split/s/train.csv.gz"],
    "planetoid": [f"raw/ind.cora.{p}" for p in ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")],
    "planetoid_py3": [f"raw/ind.cora.{p}" for p in ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")],
    "saint": ["adj_full.npz", "feats.npy", "class_map.json", "role.json"],
    "catgnn": ["edge_list.csv", "feats.npy", "class_map.json", "role.json"],
    "arrays": ["edges.npy", "features.npy", "labels.npy", "train.npy", "val.npy", "test.npy"],
}
_TEMPLATES: dict[str, tuple[Path, Path]] = {}


def _template(fmt: str) -> tuple[Path, Path]:
    if fmt not in _TEMPLATES:
        root = Path(tempfile.mkdtemp(prefix=f"hostile-{fmt}-"))
        atexit.register(shutil.rmtree, root, True)
        _TEMPLATES[fmt] = (root, make(fmt, root))
    return _TEMPLATES[fmt]


@pytest.mark.parametrize("fmt", list(MUTABLE))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 7), op=st.integers(0, 3), pos=st.floats(0, 1), blob=st.binary(min_size=1, max_size=8))
def test_mutated_files_raise_only_the_documented_error(fmt, which, op, pos, blob):
    root, spec = _template(fmt)
    work = Path(tempfile.mkdtemp(prefix="mut-"))
    try:
        copy = work / spec.relative_to(root)
        if spec.is_dir():
            shutil.copytree(spec, copy)
        else:
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(spec, copy)
        files = MUTABLE[fmt]
        base = copy if copy.is_dir() else copy.parent
        target = base / files[which % len(files)]
        target.write_bytes(_mutate(target.read_bytes(), op, pos, blob))
        try:
            load_graph(str(copy))
        except ParamError as exc:
            assert "\n" not in str(exc)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.parametrize("cut", [None, 40])
def test_dgl_binary_random_or_truncated_is_one_line(tmp_path, capsys, cut):
    dgl = pytest.importorskip("dgl")
    p = tmp_path / "g.bin"
    if cut is None:
        p.write_bytes(np.random.default_rng(0).bytes(5000))
    else:
        dgl.save_graphs(str(p), [graph().to_dgl()])
        p.write_bytes(p.read_bytes()[:cut])
    assert main(["info", str(p)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "g.bin" in err and "Stack trace" not in err
