"""Folder formats: GraphSAINT's (Flickr, Reddit, Yelp, Amazon, PPI; also CATGNN's variant) and a folder of
your own arrays; and attaching features, labels and a split to any edge list.

GraphSAINT / Cluster-GCN / CATGNN layout::

    flickr/
      adj_full.npz      # scipy.sparse.save_npz of the N x N adjacency (CSR; GraphSAINT stores it symmetric)
      edge_list.csv     # CATGNN's variant instead of adj_full.npz: one edge "src,dst" per line
      feats.npy         # (N, F) float features
      class_map.json    # {"0": 3, "1": 0, ...}: the class of every vertex id
      role.json         # {"tr": [ids], "va": [ids], "te": [ids]}

Multi-label class maps (``{"0": [0, 1, 1, 0], ...}``, PPI and Yelp) are refused with a message saying
so: the workbench trains single-label classification (softmax cross-entropy, accuracy) only.

Your own arrays::

    mygraph/
      edges.npy         # (E, 2) or (2, E) integer vertex ids  -- or edges.txt / edges.csv (an edge list)
      features.npy      # optional (N, F) float features
      labels.npy        # optional (N,) integer classes, -1 = unlabelled
      train.npy val.npy test.npy   # optional: (N,) bool masks or 1-D integer id lists

Every ``.npy``/``.npz`` is read with ``allow_pickle=False`` after its header was checked against the file
size (:mod:`workbench.data.safe_io`). Without a split, a graph with labels gets a seeded random split of
its labelled vertices (``train_ratio``/``val_ratio``/``test_ratio``, default 0.6/0.2/0.2), and says so.

Example:
    >>> import tempfile, pathlib, numpy as np
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> np.save(d / "edges.npy", np.array([[0, 1], [1, 2], [2, 0]]))
    >>> np.save(d / "labels.npy", np.array([0, 1, 0]))
    >>> g = read_array_folder(d, structural="degree")
    >>> g.num_nodes, g.num_features, int(g.train_mask.sum() + g.val_mask.sum() + g.test_mask.sum())
    (3, 1, 3)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any, Optional

import numpy as np
import torch

from workbench._validation import Config, ErrorCollector
from workbench.constraints import Interval, Options
from workbench.data.safe_io import check_inferred_num_nodes, check_num_nodes, read_json, read_npy, read_npz
from workbench.data.synthetic import check_split_ratios
from workbench.graph import Graph

__all__ = ["read_saint_folder", "read_array_folder", "attach_node_data", "is_saint_folder", "is_array_folder",
           "FilesConfig", "STRUCTURAL_FEATURES", "write_saint_folder"]

STRUCTURAL_FEATURES = ("none", "degree", "random", "constant")


def _error(owner: str, path: Any, constraint: str, value: Any):
    from workbench.data.readers import DataFormatError

    return DataFormatError(owner, path, constraint, value)


def is_saint_folder(folder: Path) -> bool:
    return (folder / "role.json").is_file() and (folder / "class_map.json").is_file()


def is_array_folder(folder: Path) -> bool:
    return any((folder / f).is_file() for f in ("edges.npy", "edges.txt", "edges.csv"))


# --------------------------------------------------------------------------------------------------------
# GraphSAINT
# --------------------------------------------------------------------------------------------------------


def read_saint_folder(folder: Any, *, name: Optional[str] = None, progress: Optional[bool] = None) -> Graph:
    """Read a GraphSAINT folder (``adj_full.npz`` or CATGNN's ``edge_list.csv``, ``feats.npy``,
    ``class_map.json``, ``role.json``); see the module docstring.

    Raises:
        DataFormatError: a missing or malformed file, a multi-label class map, a feature/label count that
            differs from the adjacency, ids out of range, overlapping splits, NaN features.
    """
    owner = "read_saint_folder"
    folder = Path(folder)
    adj_file, edge_file = folder / "adj_full.npz", folder / "edge_list.csv"
    if adj_file.is_file():
        src, dst, n_adj = _read_adjacency(adj_file, owner)
        edges_from = adj_file
    elif edge_file.is_file():
        from workbench.data.readers import read_edge_list

        g = read_edge_list(edge_file, progress=progress)
        src, dst = (t.numpy() for t in g.edges())
        n_adj, edges_from = None, edge_file
    else:
        raise _error(owner, adj_file, "a GraphSAINT folder with adj_full.npz (or edge_list.csv)", "missing file")
    feat_file = folder / "feats.npy"
    features = _features(read_npy(feat_file, owner), feat_file, owner) if feat_file.is_file() else None
    cmap_file = folder / "class_map.json"
    cmap = read_json(cmap_file, owner)
    if not isinstance(cmap, dict) or not cmap:
        raise _error(owner, cmap_file, "a non-empty JSON object {vertex id: class}", type(cmap).__name__)
    n = n_adj if n_adj is not None else (features.shape[0] if features is not None else None)
    if n is None:
        n = max(int(max(src.max(), dst.max())) + 1 if src.size else 0, len(cmap))
        check_inferred_num_nodes(n, src.size, owner, edges_from)
    check_num_nodes(n, owner, edges_from)
    if features is not None and features.shape[0] != n:
        raise _error(owner, feat_file, f"one row per vertex ({n} in {edges_from.name})", f"{features.shape[0]} rows")
    if src.size and max(int(src.max()), int(dst.max())) >= n:
        raise _error(owner, edges_from, f"vertex ids below the number of vertices {n} ({feat_file.name} rows)",
                     max(int(src.max()), int(dst.max())))
    labels = _class_map(cmap, cmap_file, n, owner)
    role_file = folder / "role.json"
    role = read_json(role_file, owner)
    masks = _role_masks(role, role_file, n, owner)
    node_data: dict[str, Any] = {"labels": torch.from_numpy(labels), **masks}
    if features is not None:
        node_data["features"] = torch.from_numpy(features)
    return Graph.from_edges(torch.from_numpy(src), torch.from_numpy(dst), num_nodes=n, directed=True,
                            name=name or folder.name, **node_data)


def _read_adjacency(path: Path, owner: str) -> tuple[np.ndarray, np.ndarray, int]:
    arrays = read_npz(path, owner)
    fmt = arrays.get("format")
    fmt = str(fmt.item() if isinstance(fmt, np.ndarray) and fmt.size == 1 else fmt)
    fmt = fmt[2:-1] if fmt.startswith("b'") else fmt
    need = {"csr": ("indices", "indptr", "shape"), "csc": ("indices", "indptr", "shape"), "coo": ("row", "col", "shape")}
    if fmt not in need or any(k not in arrays for k in need[fmt]):
        raise _error(owner, path, "a scipy.sparse.save_npz file of a CSR, CSC or COO matrix", f"format {fmt!r}, "
                                                                                         f"members {sorted(arrays)}")
    shape = arrays["shape"]
    if shape.shape != (2,) or shape.dtype.kind not in "iu" or shape[0] != shape[1]:
        raise _error(owner, path, "a square shape", shape.tolist())
    n = int(shape[0])
    check_num_nodes(n, owner, path)
    for k in need[fmt][:2]:
        if arrays[k].ndim != 1 or arrays[k].dtype.kind not in "iu":
            raise _error(owner, path, f"a 1-D integer {k!r} array", f"{arrays[k].dtype} {arrays[k].shape}")
    if fmt == "coo":
        row, col = arrays["row"].astype(np.int64), arrays["col"].astype(np.int64)
        if row.shape != col.shape:
            raise _error(owner, path, "'row' and 'col' of one length", f"{row.shape} and {col.shape}")
    else:
        indptr, indices = arrays["indptr"].astype(np.int64), arrays["indices"].astype(np.int64)
        if indptr.shape != (n + 1,) or indptr[0] != 0 or indptr[-1] != indices.size or (np.diff(indptr) < 0).any():
            raise _error(owner, path, f"an 'indptr' of {n + 1} non-decreasing offsets from 0 to len(indices)",
                         f"{indptr.shape[0]} entries")
        major = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
        row, col = (major, indices) if fmt == "csr" else (indices, major)
    for arr in (row, col):
        if arr.size and (arr.min() < 0 or arr.max() >= n):
            raise _error(owner, path, f"vertex ids in [0, {n})", int(arr[(arr < 0) | (arr >= n)][0]))
    # A[i, j] != 0: an edge i -> j (GraphSAINT's matrices are symmetric, so the direction does not matter)
    return row, col, n


def _features(arr: np.ndarray, path: Path, owner: str) -> np.ndarray:
    if arr.ndim != 2 or arr.dtype.kind not in "biuf":
        raise _error(owner, path, "a 2-D numeric (N, F) feature array", f"{arr.dtype} of shape {arr.shape}")
    out = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.isfinite(out).all():
        r = int(np.flatnonzero(~np.isfinite(out).all(axis=1))[0])
        raise _error(owner, path, "finite feature values (no NaN or infinity)", f"row {r}")
    return out


def _class_map(cmap: dict, path: Path, n: int, owner: str) -> np.ndarray:
    labels = np.full(n, -1, dtype=np.int64)
    try:
        ids = np.fromiter((int(k) for k in cmap), dtype=np.int64, count=len(cmap))
    except (ValueError, OverflowError):
        raise _error(owner, path, "integer vertex ids as keys", next(k for k in cmap if not _is_int_text(k))) from None
    values = list(cmap.values())
    if any(isinstance(v, list) for v in values):
        raise _error(owner, path, "one class per vertex: multi-label class maps (a list per vertex, as PPI and "
                                  "Yelp) are not supported, the workbench trains single-label classification only",
                     "a list")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        bad = next(v for v in values if not (isinstance(v, int) and not isinstance(v, bool) and v >= 0))
        raise _error(owner, path, "a non-negative integer class per vertex", bad)
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        raise _error(owner, path, f"vertex ids in [0, {n})", int(ids[(ids < 0) | (ids >= n)][0]))
    labels[ids] = np.asarray(values, dtype=np.int64)
    return labels


def _is_int_text(k: str) -> bool:
    try:
        int(k)
        return True
    except ValueError:
        return False


def _role_masks(role: Any, path: Path, n: int, owner: str) -> dict[str, torch.Tensor]:
    if not isinstance(role, dict) or not {"tr", "va", "te"} <= set(role):
        raise _error(owner, path, "a JSON object with id lists 'tr', 'va' and 'te'",
                     sorted(role) if isinstance(role, dict) else type(role).__name__)
    ids = {}
    for key in ("tr", "va", "te"):
        v = role[key]
        if not isinstance(v, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in v):
            raise _error(owner, path, f"a list of integer vertex ids under {key!r}", type(v).__name__)
        ids[key] = np.asarray(v, dtype=np.int64)
    return _masks_from_ids(ids["tr"], ids["va"], ids["te"], n, path, owner)


def _masks_from_ids(train: np.ndarray, val: np.ndarray, test: np.ndarray, n: int, path: Any,
                    owner: str) -> dict[str, torch.Tensor]:
    masks = {}
    for name, ids in (("train_mask", train), ("val_mask", val), ("test_mask", test)):
        if ids.dtype == bool:
            if ids.shape != (n,):
                raise _error(owner, path, f"a ({n},) boolean {name}", f"shape {ids.shape}")
            m = ids.copy()
        else:
            if ids.ndim != 1 or ids.dtype.kind not in "iu":
                raise _error(owner, path, f"a 1-D integer id list or bool mask for {name}", f"{ids.dtype} {ids.shape}")
            ids = ids.astype(np.int64)
            if ids.size and (ids.min() < 0 or ids.max() >= n):
                raise _error(owner, path, f"{name} vertex ids in [0, {n})", int(ids[(ids < 0) | (ids >= n)][0]))
            m = np.zeros(n, dtype=bool)
            m[ids] = True
        masks[name] = m
    for a, b in (("train_mask", "val_mask"), ("train_mask", "test_mask"), ("val_mask", "test_mask")):
        overlap = masks[a] & masks[b]
        if overlap.any():
            where = path.get(b, path) if isinstance(path, dict) else path
            other = f" in {Path(path[a]).name}" if isinstance(path, dict) and a in path else ""
            raise _error(owner, where, f"disjoint train, val and test sets ({b[:-5]} overlaps {a[:-5]}{other})",
                         f"{int(overlap.sum())} vertices in both, e.g. {int(np.flatnonzero(overlap)[0])}")
    return {k: torch.from_numpy(v) for k, v in masks.items()}


def write_saint_folder(folder: Any, graph: Graph, *, edge_list: bool = False) -> Path:
    """Write ``graph`` (features, labels, masks) as a GraphSAINT folder (``edge_list=True``: CATGNN's variant)."""
    import json

    import scipy.sparse as sp

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    src, dst = graph.edges()
    if edge_list:
        (folder / "edge_list.csv").write_text("".join(f"{s},{d}\n" for s, d in zip(src.tolist(), dst.tolist())))
    else:
        adj = sp.csr_matrix((np.ones(graph.num_edges, np.float32), (src.numpy(), dst.numpy())),
                            shape=(graph.num_nodes,) * 2)
        sp.save_npz(folder / "adj_full.npz", adj)
    np.save(folder / "feats.npy", graph.features.numpy())
    labels = graph.labels.tolist()
    (folder / "class_map.json").write_text(json.dumps({str(i): c for i, c in enumerate(labels) if c >= 0}))
    role = {k: torch.nonzero(getattr(graph, m)).flatten().tolist()
            for k, m in (("tr", "train_mask"), ("va", "val_mask"), ("te", "test_mask"))}
    (folder / "role.json").write_text(json.dumps(role))
    return folder


# --------------------------------------------------------------------------------------------------------
# Your own arrays, and attaching data to an edge list
# --------------------------------------------------------------------------------------------------------


def _read_edges_any(path: Path, owner: str, progress: Optional[bool]) -> tuple[np.ndarray, np.ndarray, Optional[int]]:
    if path.suffix == ".npy":
        e = read_npy(path, owner)
        if e.ndim != 2 or 2 not in e.shape or e.dtype.kind not in "iu":
            raise _error(owner, path, "an (E, 2) or (2, E) integer edge array", f"{e.dtype} of shape {e.shape}")
        e = e.astype(np.int64)
        src, dst = (e[:, 0], e[:, 1]) if e.shape[1] == 2 else (e[0], e[1])
        if src.size and min(int(src.min()), int(dst.min())) < 0:
            raise _error(owner, path, "non-negative vertex ids", min(int(src.min()), int(dst.min())))
        return np.ascontiguousarray(src), np.ascontiguousarray(dst), None
    from workbench.data.edgefiles import is_binary_edge_file

    if is_binary_edge_file(path):   # a .bin of raw pairs with its sidecar (workbench.data.edgefiles)
        from workbench.data.edgefiles import edge_file_info

        info = edge_file_info(path, owner=owner)
        e = np.fromfile(path, dtype=info.dtype, offset=info.offset, count=2 * info.num_lines).reshape(-1, 2)
        src, dst = e[:, 0].astype(np.int64), e[:, 1].astype(np.int64)
        if src.size and min(int(src.min()), int(dst.min())) < 0:
            raise _error(owner, path, "non-negative vertex ids", min(int(src.min()), int(dst.min())))
        return src, dst, info.num_nodes
    from workbench.data.readers import read_edge_list

    g = read_edge_list(path, progress=progress)
    s, d = g.edges()
    return s.numpy(), d.numpy(), g.num_nodes


def read_array_folder(folder: Any, *, name: Optional[str] = None, progress: Optional[bool] = None,
                      **attach: Any) -> Graph:
    """Read a folder of your own arrays (see the module docstring); ``attach`` goes to :func:`attach_node_data`
    (``structural``, split ratios, ``split_seed``)."""
    owner = "read_array_folder"
    folder = Path(folder)
    edge_file = next((folder / f for f in ("edges.npy", "edges.txt", "edges.csv") if (folder / f).is_file()), None)
    if edge_file is None:
        raise _error(owner, folder / "edges.npy", "a folder with edges.npy, edges.txt or edges.csv", "missing file")
    files = {k: folder / f"{k}.npy" for k in ("features", "labels")}
    for k in ("train", "val", "test"):
        files[k] = next((folder / f for f in (f"{k}.npy", f"{k}_mask.npy", f"{k}_ids.npy") if (folder / f).is_file()),
                        folder / f"{k}.npy")
    return attach_node_data(edge_file, **{k: v for k, v in files.items() if v.is_file()}, name=name or folder.name,
                            progress=progress, owner=owner, **attach)


def attach_node_data(edges: Any, *, features: Any = None, labels: Any = None, train: Any = None, val: Any = None,
                     test: Any = None, structural: str = "none", structural_dim: int = 16,
                     train_ratio: float = 0.6, val_ratio: float = 0.2, test_ratio: float = 0.2, split_seed: int = 0,
                     name: Optional[str] = None, progress: Optional[bool] = None,
                     owner: str = "attach_node_data") -> Graph:
    """An edge list (text or ``.npy``) with features, labels and a split from ``.npy`` files attached.

    Args:
        edges: the edge file (``.npy`` (E, 2)/(2, E), or a text edge list).
        features, labels: ``.npy`` files, (N, F) floats and (N,) ints (``-1`` = unlabelled).
        train, val, test: ``.npy`` files, (N,) bool masks or integer id lists. None of them: a seeded random
            split of the labelled vertices with the ratios below (when there are labels).
        structural: features when ``features`` is not given: ``none`` (no features), ``degree`` (one column,
            the degree), ``random`` (``structural_dim`` seeded normal columns), ``constant`` (a column of ones).
        structural_dim: width of ``random`` features.
        train_ratio, val_ratio, test_ratio: the random split's fractions of the labelled vertices.
        split_seed: seed of the random split and of ``random`` features.
        name: graph name.

    Raises:
        DataFormatError: malformed files, counts that disagree, ids out of range, overlapping splits, NaN.
    """
    edges = Path(edges)
    errs = ErrorCollector(owner)
    errs.check(structural in STRUCTURAL_FEATURES, "structural", f"one of {list(STRUCTURAL_FEATURES)}", structural)
    errs.check(isinstance(structural_dim, int) and structural_dim >= 1, "structural_dim", "an int >= 1",
               structural_dim)
    errs.check(features is None or structural == "none", "structural", "'none' when features are given", structural)
    ratios_ok = all(isinstance(r, (int, float)) and 0 <= r <= 1 for r in (train_ratio, val_ratio, test_ratio))
    errs.check(ratios_ok and train_ratio + val_ratio + test_ratio <= 1 + 1e-9, "train_ratio",
               "ratios in [0, 1] summing to at most 1", (train_ratio, val_ratio, test_ratio))
    errs.raise_if_any()
    src, dst, n_text = _read_edges_any(edges, owner, progress)
    arrays: dict[str, tuple[Path, np.ndarray]] = {}
    for key, f in (("features", features), ("labels", labels), ("train", train), ("val", val), ("test", test)):
        if f is not None:
            arrays[key] = (Path(f), read_npy(f, owner))
    n = None
    for key in ("features", "labels"):
        if key in arrays and arrays[key][1].ndim >= 1:
            n = int(arrays[key][1].shape[0])
            break
    max_id = max(int(src.max()), int(dst.max())) if src.size else -1
    if n is None:
        n = n_text if n_text is not None else max_id + 1
        check_inferred_num_nodes(n, src.size, owner, edges)
    elif max_id >= n:
        f = arrays["features" if "features" in arrays else "labels"][0]
        raise _error(owner, edges, f"vertex ids below the number of rows of {f.name} ({n})", max_id)
    check_num_nodes(n, owner, edges)
    node_data: dict[str, Any] = {}
    if "features" in arrays:
        node_data["features"] = torch.from_numpy(_features(arrays["features"][1], arrays["features"][0], owner))
    if "labels" in arrays:
        path, lab = arrays["labels"]
        if lab.ndim != 1 or lab.dtype.kind not in "iu":
            raise _error(owner, path, "a 1-D integer label array (-1 = unlabelled)", f"{lab.dtype} of shape {lab.shape}")
        if lab.shape[0] != n:
            raise _error(owner, path, f"one label per vertex ({n})", f"{lab.shape[0]} labels")
        if lab.size and lab.min() < -1:
            raise _error(owner, path, "classes >= 0 (or -1 for unlabelled)", int(lab.min()))
        node_data["labels"] = torch.from_numpy(lab.astype(np.int64))
    split_given = [k for k in ("train", "val", "test") if k in arrays]
    if split_given:
        empty = np.zeros(0, dtype=np.int64)
        ids = [arrays[k][1] if k in arrays else empty for k in ("train", "val", "test")]
        where = {f"{k}_mask": arrays[k][0] for k in split_given}
        node_data.update(_masks_from_ids(*ids, n, where, owner))
    elif "labels" in node_data:
        pool = np.flatnonzero(node_data["labels"].numpy() >= 0)
        rng = np.random.default_rng(split_seed)
        order = pool[rng.permutation(pool.size)]
        counts = [int(round(r * pool.size)) for r in (train_ratio, val_ratio, test_ratio)]
        start = 0
        for key, c in zip(("train_mask", "val_mask", "test_mask"), counts):
            m = np.zeros(n, dtype=bool)
            m[order[start:start + c]] = True
            start += c
            node_data[key] = torch.from_numpy(m)
    if "features" not in node_data and structural != "none":
        deg = np.bincount(dst, minlength=n) + np.bincount(src, minlength=n)
        if structural == "degree":
            f = deg.astype(np.float32)[:, None]
        elif structural == "constant":
            f = np.ones((n, 1), dtype=np.float32)
        else:
            f = np.random.default_rng(split_seed).standard_normal((n, structural_dim)).astype(np.float32)
        node_data["features"] = torch.from_numpy(f)
    return Graph.from_edges(torch.from_numpy(src), torch.from_numpy(dst), num_nodes=n, directed=True,
                            name=name or edges.stem, **node_data)


@dataclasses.dataclass(kw_only=True)
class FilesConfig(Config):
    """An edge list (or ``.npy`` edges) with node data from files attached: the ``files:`` graph spec,
    e.g. ``files:edges=g.txt,labels=y.npy,structural=degree`` (what ``--features/--labels/--split`` build)."""

    edges: str = ""
    """The edge file: a text edge list, an (E, 2) ``.npy`` or a ``.bin`` of raw pairs with its sidecar."""
    features: str = ""
    """(N, F) float ``.npy`` features (empty: none, or ``structural``)."""
    labels: str = ""
    """(N,) integer ``.npy`` labels, -1 = unlabelled."""
    train: str = ""
    """``.npy`` train mask or id list (empty, with val and test empty: a seeded random split)."""
    val: str = ""
    """``.npy`` validation mask or id list."""
    test: str = ""
    """``.npy`` test mask or id list."""
    structural: Annotated[str, Options(*STRUCTURAL_FEATURES)] = "none"
    """Features when none are given: none, degree, random or constant (never added silently)."""
    structural_dim: Annotated[int, Interval(1, None)] = 16
    """Width of random structural features."""
    train_ratio: Annotated[float, Interval(0, 1)] = 0.6
    """Random split: fraction of labelled vertices for training."""
    val_ratio: Annotated[float, Interval(0, 1)] = 0.2
    """Random split: fraction for validation."""
    test_ratio: Annotated[float, Interval(0, 1)] = 0.2
    """Random split: fraction for testing."""
    seed: Annotated[int, Interval(0, None)] = 0
    """Seed of the random split and random features."""

    def _validate(self, errs: ErrorCollector) -> None:
        check_split_ratios(errs, self)

    def generate(self, *, progress: Optional[bool] = None) -> Graph:
        errs = ErrorCollector("files")
        errs.check(bool(self.edges) and Path(self.edges).is_file(), "edges", "an existing edge file", self.edges)
        for key in ("features", "labels", "train", "val", "test"):
            v = getattr(self, key)
            errs.check(not v or Path(v).is_file(), key, "an existing .npy file or empty", v)
        errs.raise_if_any()
        opt = {k: getattr(self, k) or None for k in ("features", "labels", "train", "val", "test")}
        return attach_node_data(self.edges, **opt, structural=self.structural, structural_dim=self.structural_dim,
                                train_ratio=self.train_ratio, val_ratio=self.val_ratio, test_ratio=self.test_ratio,
                                split_seed=self.seed, progress=progress, name=Path(self.edges).stem)
