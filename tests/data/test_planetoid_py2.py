"""The Planetoid files as PyG and DGL download them: pickles written by Python 2 at protocol 2.

Python 3 cannot write those (its strings are ``BINUNICODE``, its bytes ``BINBYTES``), and a regression that
refused every real file (an array's ``BINSTRING`` payload arrives as a latin-1 ``str``) passed a suite whose
fixtures were all written by Python 3. These fixtures are hand-assembled opcode by opcode
(:mod:`workbench.data.pickle2`), checked to hold the opcodes and globals of the real files, loaded, trained,
and broken in every way the restricted unpickler refuses.
"""

from __future__ import annotations

import json
import pickletools
from collections import defaultdict

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from workbench.cli import main
from workbench.data import load_graph
from workbench.data.pickle2 import _Writer, dumps
from workbench.data.planetoid import write_planetoid
from workbench.data.readers import DataFormatError
from workbench.data.safe_io import read_pickle

SPEC = "sbm:num_nodes=700,num_blocks=3,avg_degree=6,num_features=8,seed=0"
PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph")


@pytest.fixture(scope="module")
def graph():
    return load_graph(SPEC)


@pytest.fixture()
def cora(tmp_path, graph):
    return write_planetoid(tmp_path / "Cora" / "raw", "cora", graph, num_train=40, num_test=150)


def _opcodes_and_globals(data: bytes) -> tuple[set, set]:
    names, globs = set(), set()
    for op, arg, _ in pickletools.genops(data):
        names.add(op.name)
        if op.name == "GLOBAL":
            globs.add(tuple(arg.split(" ")))
    return names, globs


def test_fixtures_are_shaped_as_the_python2_files(cora):
    seen_ops, seen_globals = set(), set()
    for part in PARTS:
        data = (cora / f"ind.cora.{part}").read_bytes()
        assert data[:2] == b"\x80\x02"
        ops, globs = _opcodes_and_globals(data)
        seen_ops |= ops
        seen_globals |= globs
    # Python 2's str and its arrays' raw data; never a Python 3 bytes or unicode opcode
    assert {"BINSTRING", "SHORT_BINSTRING", "NEWOBJ", "REDUCE", "BUILD", "SETITEMS", "APPENDS"} <= seen_ops
    assert not seen_ops & {"BINUNICODE", "SHORT_BINUNICODE", "BINBYTES", "SHORT_BINBYTES", "FRAME"}
    assert {("numpy.core.multiarray", "_reconstruct"), ("numpy", "ndarray"), ("numpy", "dtype"),
            ("scipy.sparse.csr", "csr_matrix"), ("collections", "defaultdict"),
            ("__builtin__", "list")} == seen_globals


@pytest.mark.parametrize("obj", [np.arange(12, dtype=np.int32).reshape(3, 4), np.eye(3, dtype=np.float32),
                                 np.array([True, False]), np.zeros((0, 5)),
                                 sp.csr_matrix(np.diag([1.5, 0, 2.5]).astype(np.float32)),
                                 defaultdict(list, {0: [1, 2], 7: list(range(1500)), 3: [70000, 2 ** 31 + 5]})],
                         ids=["int32", "float32", "bool", "empty", "csr", "defaultdict"])
def test_every_construct_reads_back(tmp_path, obj):
    path = tmp_path / "ind.x.x"
    path.write_bytes(dumps(obj))
    back = read_pickle(path, "test")
    if sp.issparse(obj):
        back.check_format(full_check=True)
        assert back.format == "csr" and back.dtype == obj.dtype and (back != obj).nnz == 0
    elif isinstance(obj, np.ndarray):
        assert back.dtype == obj.dtype and np.array_equal(back, obj)
    else:
        assert isinstance(back, defaultdict) and back == obj and back.default_factory is list


def test_python2_files_load_as_the_graph(tmp_path, graph, cora):
    g = load_graph(str(tmp_path))   # PyG's root, as Planetoid(root, "Cora") leaves it
    assert g.name == "cora" and g.num_nodes == graph.num_nodes
    assert torch.equal(g.indptr, graph.indptr) and torch.equal(g.indices, graph.indices)
    assert torch.equal(g.features, graph.features) and torch.equal(g.labels, graph.labels)
    assert int(g.train_mask.sum()) == 40 and int(g.val_mask.sum()) == 500 and int(g.test_mask.sum()) == 150


def test_python2_and_python3_files_read_the_same(tmp_path, graph):
    a = load_graph(str(write_planetoid(tmp_path / "a", "cora", graph, num_train=40, num_test=150)))
    b = load_graph(str(write_planetoid(tmp_path / "b", "cora", graph, num_train=40, num_test=150, pickler="python3")))
    for k in ("indptr", "indices", "features", "labels", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(a, k), getattr(b, k)), k


def test_python2_files_info_and_kipf_run_from_the_cli(tmp_path, cora, capsys):
    assert main(["info", str(tmp_path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["num_nodes"] == 700 and info["split"] == {"train": 40, "val": 500, "test": 150}
    assert main(["run", "full_graph:kipf", "--graph", str(tmp_path), "--runner", "single", "--epochs", "30",
                 "--json", "--out", str(tmp_path / "runs")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["losses"][-1] < summary["losses"][0]
    assert summary["accuracy"]["test"] > 0.5   # three well-separated SBM blocks; chance is 1/3


def test_writer_refuses_what_the_files_never_held():
    with pytest.raises(TypeError, match="set"):
        dumps({1, 2})


# --- hostile variants of the Python 2 files, hand-assembled -------------------------------------------------


def _array(shape, code: str, raw: bytes, dtype_state=(3, "<", None, None, None, -1, -1, 0)) -> bytes:
    """An ndarray pickled as Python 2 did, with any shape, dtype code, payload and dtype state."""
    w = _Writer()
    w.glob("numpy.core.multiarray", "_reconstruct")
    w.glob("numpy", "ndarray")
    w.tuple((0,))
    w.string(b"b")
    w.out += b"\x87R("
    w.int(1)
    w.tuple(shape)
    w.glob("numpy", "dtype")
    w.tuple((code, 0, 1))
    w.out += b"R"
    w.tuple(dtype_state)
    w.out += b"b\x89"
    w.string(raw)
    w.out += b"tb."
    return bytes(w.out)


def _scalar(code: str, raw: bytes) -> bytes:
    w = _Writer()
    w.glob("numpy.core.multiarray", "scalar")
    w.glob("numpy", "dtype")
    w.tuple((code, 0, 1))
    w.out += b"R"
    w.tuple((3, "<", None, None, None, -1, -1, 0))
    w.out += b"b"
    w.string(raw)
    w.out += b"\x86R."
    return bytes(w.out)


def _csr_with_args() -> bytes:
    w = _Writer()
    w.glob("scipy.sparse.csr", "csr_matrix")
    w.tuple(((10 ** 6, 10 ** 6),))
    w.out += b"\x81."
    return bytes(w.out)


def test_hand_assembled_helpers_are_valid_when_unbroken(tmp_path):
    path = tmp_path / "ind.cora.y"
    path.write_bytes(_array((2, 3), "i4", np.arange(6, dtype="<i4").tobytes()))
    assert read_pickle(path, "t").tolist() == [[0, 1, 2], [3, 4, 5]]
    path.write_bytes(_scalar("f8", np.float64(2.5).tobytes()))
    assert read_pickle(path, "t") == 2.5


HOSTILE = {
    "payload one byte short": _array((2, 3), "i4", b"\x00" * 23),
    "payload for a larger shape": _array((10 ** 6, 10 ** 6), "f8", b"\x00" * 8),
    "negative shape": _array((-1, 3), "i4", b""),
    "object dtype": _array((1,), "O8", b"\x00" * 8),
    "dtype state with fields": _array((1,), "i4", b"\x00" * 4, (3, "<", None, ("a",), {"a": (1, 0)}, -1, -1, 0)),
    "dtype state with another size": _array((1,), "V8", b"\x00" * 8, (3, "|", None, None, None, 10 ** 9, 1, 0)),
    "scalar of the wrong size": _scalar("f8", b"\x00" * 3),
    "csr_matrix asked for a huge shape": _csr_with_args(),
    "os.system": b"\x80\x02cos\nsystem\nq\x00U\x04trueq\x01\x85q\x02Rq\x03.",
    "__builtin__.eval": b"\x80\x02c__builtin__\neval\nq\x00U\x041+1q\x01\x85q\x02Rq\x03.",
    "truncated": _array((2, 3), "i4", np.arange(6, dtype="<i4").tobytes())[:-9],
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_python2_variants_are_refused_with_the_file_named(tmp_path, graph, capsys, name):
    folder = write_planetoid(tmp_path / "Cora" / "raw", "cora", graph, num_train=40, num_test=150)
    target = folder / "ind.cora.ally"
    target.write_bytes(HOSTILE[name])
    with pytest.raises(DataFormatError, match=r"ind\.cora\.ally") as info:
        load_graph(str(tmp_path))
    assert "\n" not in str(info.value)
    assert main(["info", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "ind.cora.ally" in err and "Traceback" not in err
