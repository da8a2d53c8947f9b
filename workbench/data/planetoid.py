"""The Planetoid citation graphs (Cora, CiteSeer, PubMed) as PyG and DGL keep them on disk.

Layout (Yang et al.'s files; PyG's ``Planetoid(root, "Cora")`` leaves them in ``<root>/Cora/raw/``, DGL's
citation datasets in one folder)::

    raw/                      # or any folder holding the files
      ind.cora.x              # scipy sparse (len(y), F): features of the training vertices
      ind.cora.y              # numpy (len(y), C) one-hot labels of the training vertices
      ind.cora.allx           # scipy sparse (N_labelled, F): features of every non-test vertex
      ind.cora.ally           # numpy (N_labelled, C) one-hot labels
      ind.cora.tx, .ty        # features and one-hot labels of the test vertices, in test.index order
      ind.cora.graph          # dict (defaultdict) vertex id -> list of neighbour ids
      ind.cora.test.index     # text, one test vertex id per line

The graph, features, labels and public split are built as PyG's ``read_planetoid_data`` and DGL's
``CitationGraphDataset`` build them: ``x = [allx; tx]`` with the test rows moved to the ids listed in
``test.index``; train = the first ``len(y)`` vertices, val = the next 500, test = the ids in
``test.index``. CiteSeer lists test ids that have no row in ``tx``: those vertices get zero features and
no label (``-1``; PyG gives them class 0), and are in no split. Self-loops are removed as PyG does;
:func:`workbench.data.load_graph` then cleans the graph (duplicates, symmetrisation) and reports it.

The ``ind.*`` files are pickles. They are read with :class:`~workbench.data.safe_io.RestrictedUnpickler`,
never ``pickle.load``: a crafted file is refused with its name, it cannot run code.

Example:
    >>> g = read_planetoid("data/Cora/raw")  # doctest: +SKIP
    >>> g.num_nodes, int(g.train_mask.sum()), int(g.val_mask.sum()), int(g.test_mask.sum())  # doctest: +SKIP
    (2708, 140, 500, 1000)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from workbench.data.safe_io import check_num_nodes, read_pickle
from workbench.graph import Graph

__all__ = ["read_planetoid", "find_planetoid", "write_planetoid", "PLANETOID_PARTS"]

PLANETOID_PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")
_OWNER = "read_planetoid"
_MAX_DENSE = 1 << 25   # entries of a dense block (CiteSeer 3,327 x 3,703 = 1.2e7; PubMed 19,717 x 500 = 9.9e6)


def find_planetoid(folder: Path) -> Optional[tuple[Path, str]]:
    """``(raw folder, dataset name)`` when ``folder`` holds Planetoid files directly, in ``raw/``, or in
    ``<Name>/raw/`` (PyG's root); ``None`` otherwise."""
    candidates = [folder, folder / "raw"]
    if folder.is_dir():
        candidates += sorted(p / "raw" for p in folder.iterdir() if p.is_dir())
    for cand in candidates:
        if cand.is_dir():
            names = sorted(p.name[len("ind."):-len(".graph")] for p in cand.glob("ind.*.graph"))
            if len(names) == 1:
                return cand, names[0]
    return None


def _dense(obj: Any, path: Path, what: str) -> np.ndarray:
    import scipy.sparse as sp

    from workbench.data.readers import DataFormatError

    if sp.issparse(obj):
        try:
            obj = obj.tocsr()
            obj.check_format(full_check=True)
            if obj.shape[0] * obj.shape[1] > _MAX_DENSE:
                raise ValueError(f"shape {obj.shape} is over {_MAX_DENSE:,} entries when dense")
            obj = obj.toarray()
        except Exception as exc:   # a matrix whose arrays disagree (crafted state)
            raise DataFormatError(_OWNER, path, f"a consistent scipy sparse {what} matrix", str(exc)[:160]) from None
    if not isinstance(obj, np.ndarray) or obj.ndim != 2 or obj.dtype.kind not in "biuf":
        raise DataFormatError(_OWNER, path, f"a 2-D numeric {what} matrix",
                              f"{type(obj).__name__} {getattr(obj, 'shape', '')}")
    return obj


def _shape(obj) -> tuple:
    """The shape of an unpickled object, ``(0, None)`` when it has none (a class's ``shape`` is a descriptor)."""
    shape = getattr(obj, "shape", None)
    return tuple(shape) if isinstance(shape, tuple) else (0, None)


def read_planetoid(folder: Any, name: Optional[str] = None) -> Graph:
    """Read a Planetoid dataset (see the module docstring) into an undirected-as-stored :class:`Graph`.

    Args:
        folder: a folder holding the ``ind.<name>.*`` files, or PyG's ``<root>`` / ``<root>/<Name>``.
        name: the dataset prefix (``cora``, ``citeseer``, ``pubmed``); default: the one found.

    Raises:
        DataFormatError: a missing or malformed file (refused pickle classes included), shapes that
            disagree, ids out of range, NaN features.
    """
    from workbench.data.readers import DataFormatError

    folder = Path(folder)
    found = find_planetoid(folder)
    if found is None:
        raise DataFormatError(_OWNER, folder, "a folder with Planetoid files ind.<name>.{x,y,tx,ty,allx,ally,graph,"
                                              "test.index}", "none found")
    raw, prefix = found
    prefix = name or prefix
    files = {part: raw / f"ind.{prefix}.{part}" for part in PLANETOID_PARTS}
    for part, f in files.items():
        if not f.is_file():
            raise DataFormatError(_OWNER, f, "a Planetoid file next to the others", "missing file")
    objs = {part: read_pickle(files[part], _OWNER) for part in PLANETOID_PARTS if part != "test.index"}
    for group in (("allx", "x", "tx"), ("ally", "y", "ty")):   # widths agree before anything is made dense
        widths = [_shape(objs[k])[1:2] for k in group]
        for k, w in zip(group[1:], widths[1:]):
            if w != widths[0]:
                raise DataFormatError(_OWNER, files[k], f"{widths[0][0] if widths[0] else '?'} columns (as in "
                                                        f"{group[0]})", w[0] if w and w[0] is not None else "no 2-D matrix")
    test_index = _read_index(files["test.index"])
    x, tx, allx = (_dense(objs[k], files[k], "feature") for k in ("x", "tx", "allx"))
    y, ty, ally = (_dense(objs[k], files[k], "one-hot label") for k in ("y", "ty", "ally"))
    width, num_classes = allx.shape[1], ally.shape[1]
    for k, arr, cols in (("x", x, width), ("tx", tx, width), ("y", y, num_classes), ("ty", ty, num_classes)):
        if arr.shape[1] != cols:
            raise DataFormatError(_OWNER, files[k], f"{cols} columns (as in allx/ally)", f"{arr.shape[1]} columns")
    for fk, lk, f_arr, l_arr in (("allx", "ally", allx, ally), ("tx", "ty", tx, ty), ("x", "y", x, y)):
        if f_arr.shape[0] != l_arr.shape[0]:
            raise DataFormatError(_OWNER, files[lk], f"one label row per feature row of {files[fk].name} "
                                                     f"({f_arr.shape[0]})", f"{l_arr.shape[0]} rows")
    if y.shape[0] + 500 > allx.shape[0]:
        raise DataFormatError(_OWNER, files["y"], f"at most len(allx) - 500 = {allx.shape[0] - 500} training rows",
                              f"{y.shape[0]} rows")
    if test_index.size == 0 or test_index.min() < allx.shape[0]:
        raise DataFormatError(_OWNER, files["test.index"], f"test ids >= len(allx) = {allx.shape[0]}",
                              int(test_index.min()) if test_index.size else "no ids")
    sorted_test = np.sort(test_index)
    if np.unique(test_index).size != test_index.size:
        raise DataFormatError(_OWNER, files["test.index"], "distinct test ids", "repeated ids")
    lo, hi = int(sorted_test[0]), int(sorted_test[-1])
    span = hi - lo + 1
    if span > 2 * tx.shape[0] + 1000:   # CiteSeer's gaps are 15 ids in 1015; refuse before allocating the span
        raise DataFormatError(_OWNER, files["test.index"], f"test ids spanning at most 2 x {tx.shape[0]} + 1000 "
                                                           f"(the rows of tx)", f"ids from {lo} to {hi}")
    check_num_nodes(allx.shape[0] + span, _OWNER, files["test.index"])
    if lo != allx.shape[0]:
        raise DataFormatError(_OWNER, files["test.index"], f"test ids starting at len(allx) = {allx.shape[0]}", lo)
    if test_index.size != tx.shape[0]:
        raise DataFormatError(_OWNER, files["test.index"], f"one id per row of {files['tx'].name} "
                                                           f"({tx.shape[0]} rows)", f"{test_index.size} ids")
    # tx row i belongs to vertex test_index[i]; ids in the test range without a row (CiteSeer) stay
    # zero-feature and unlabelled
    tx_full = np.zeros((span, width), dtype=np.float32)
    ty_full = np.zeros((span, num_classes), dtype=ty.dtype)
    tx_full[test_index - lo] = tx
    ty_full[test_index - lo] = ty
    features = np.concatenate([allx.astype(np.float32), tx_full])
    onehot = np.concatenate([ally, ty_full])
    labels = np.where(onehot.any(axis=1), onehot.argmax(axis=1), -1).astype(np.int64)
    n = features.shape[0]
    if not np.isfinite(features).all():
        raise DataFormatError(_OWNER, files["allx"] if not np.isfinite(allx).all() else files["tx"],
                              "finite feature values", "NaN or infinity")
    src, dst = _edges(objs["graph"], files["graph"], n)
    train = np.zeros(n, dtype=bool)
    train[: y.shape[0]] = True
    val = np.zeros(n, dtype=bool)
    val[y.shape[0]: y.shape[0] + 500] = True
    test = np.zeros(n, dtype=bool)
    test[test_index] = True
    return Graph.from_edges(torch.from_numpy(src), torch.from_numpy(dst), num_nodes=n, directed=True,
                            name=prefix, features=torch.from_numpy(features), labels=torch.from_numpy(labels),
                            train_mask=torch.from_numpy(train), val_mask=torch.from_numpy(val),
                            test_mask=torch.from_numpy(test))


def _read_index(path: Path) -> np.ndarray:
    from workbench.data.readers import DataFormatError

    try:
        text = path.read_bytes()
        if len(text) > 1 << 28:
            raise DataFormatError(_OWNER, path, "a test index under 256 MiB", f"{len(text):,} bytes")
        tokens = text.split()
        ids = np.array([int(t) for t in tokens], dtype=np.int64) if tokens else np.zeros(0, np.int64)
    except (OSError, ValueError, OverflowError) as exc:
        if isinstance(exc, DataFormatError):
            raise
        raise DataFormatError(_OWNER, path, "one integer vertex id per line", str(exc)[:120]) from None
    return ids


def _edges(graph: Any, path: Path, n: int) -> tuple[np.ndarray, np.ndarray]:
    from workbench.data.readers import DataFormatError

    if not isinstance(graph, dict):
        raise DataFormatError(_OWNER, path, "a dict of vertex id -> list of neighbour ids", type(graph).__name__)
    keys, counts, neigh = [], [], []
    for k, v in graph.items():
        if not isinstance(k, (int, np.integer)) or not isinstance(v, (list, tuple, np.ndarray)):
            raise DataFormatError(_OWNER, path, "int keys and list values", f"{type(k).__name__}: {type(v).__name__}")
        keys.append(int(k))
        counts.append(len(v))
        neigh.append(v)
    try:
        dst = np.concatenate([np.asarray(v, dtype=np.int64).reshape(-1) for v in neigh]) if neigh else \
            np.zeros(0, np.int64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise DataFormatError(_OWNER, path, "lists of integer vertex ids", str(exc)[:120]) from None
    src = np.repeat(np.asarray(keys, dtype=np.int64), counts)
    for arr in (src, dst):
        if arr.size and (arr.min() < 0 or arr.max() >= n):
            bad = int(arr[(arr < 0) | (arr >= n)][0])
            raise DataFormatError(_OWNER, path, f"vertex ids in [0, {n}) (the number of feature rows)", bad)
    keep = src != dst   # PyG and DGL drop the self-loops of these files
    return src[keep], dst[keep]


def write_planetoid(folder: Any, name: str, graph: Graph, *, num_train: Optional[int] = None,
                    num_test: Optional[int] = None, missing_test: int = 0, pickler: str = "python2") -> Path:
    """Write ``graph`` (features, labels) as Planetoid files ``folder/ind.<name>.*`` (tests and examples).

    Vertices ``[0, num_train)`` become ``x``/``y``; ``[0, N - num_test)`` ``allx``/``ally``; the last
    ``num_test`` (stored in shuffled order) ``tx``/``ty``. ``missing_test`` of those are left out of
    ``tx`` (as in CiteSeer).

    Args:
        pickler: ``"python2"`` (default) writes the pickles opcode by opcode as Python 2's ``cPickle``
            wrote the downloaded files (:mod:`workbench.data.pickle2`: ``BINSTRING`` array payloads,
            ``scipy.sparse.csr csr_matrix``, ``__builtin__ list``); ``"python3"`` uses ``pickle.dump`` at
            protocol 2, as a file re-saved by Python 3 would be.
    """
    import pickle
    from collections import defaultdict

    from workbench._validation import ParamError, param_error
    from workbench.data.pickle2 import dumps

    if pickler not in ("python2", "python3"):
        raise ParamError([param_error("pickler", "write_planetoid", "one of 'python2', 'python3'", pickler)])

    import scipy.sparse as sp

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    n = graph.num_nodes
    feats = graph.features.numpy()
    c = max(graph.num_classes, 1)
    onehot = np.zeros((n, c), dtype=np.int64)
    lab = graph.labels.numpy()
    onehot[np.flatnonzero(lab >= 0), lab[lab >= 0]] = 1
    num_test = num_test if num_test is not None else max(1, n // 4)
    num_train = num_train if num_train is not None else max(1, (n - num_test - 500) // 2)
    base = n - num_test
    rng = np.random.default_rng(0)
    test_ids = base + rng.permutation(num_test)
    if missing_test:
        inner = test_ids[(test_ids != base) & (test_ids != n - 1)]
        test_ids = test_ids[~np.isin(test_ids, inner[:missing_test])]
    dump = {"x": sp.csr_matrix(feats[:num_train]), "y": onehot[:num_train],
            "allx": sp.csr_matrix(feats[:base]), "ally": onehot[:base],
            "tx": sp.csr_matrix(feats[test_ids]), "ty": onehot[test_ids]}
    adj = defaultdict(list)
    src, dst = graph.edges()
    for s, d in zip(src.tolist(), dst.tolist()):
        adj[d].append(s)
    dump["graph"] = adj
    for part, obj in dump.items():
        data = dumps(obj) if pickler == "python2" else pickle.dumps(obj, protocol=2)
        (folder / f"ind.{name}.{part}").write_bytes(data)
    (folder / f"ind.{name}.test.index").write_text("".join(f"{i}\n" for i in test_ids.tolist()))
    return folder
