"""Write a partition folder: per part its completed subgraph as CSR, its feature rows, labels and split, and a
manifest, in memory bounded by the vertices and a few chunks (read by :mod:`workbench.data.partfolder`).

``workbench partition FILE --stream --method M --parts P --out DIR --with-features X.npy --labels Y.npy`` runs
:func:`write_part_folders` after the streaming partitioner.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numba
import numpy as np

from workbench._validation import ErrorCollector, ParamError, param_error
from workbench.data.edgefiles import NpyRowWriter
from workbench.data.partfolder import FOLDER_FORMAT, FOLDER_VERSION
from workbench.data.safe_io import open_npy
from workbench.partition.streaming.kernels import owner_comm_rows, part_counts
from workbench.partition.streaming.kernels_folders import (csr_bucket, group_pairs, inside_chunk,
                                                           own_bits, range_limits, select_chunk)
from workbench.partition.streaming.state import _reset_peak_rss, _trim_heap, peak_rss_mb

__all__ = ["write_part_folders", "NpyRows", "HALO_FEATURES"]

HALO_FEATURES = ("copy", "reference")
"""Where a part's halo feature rows live (``write_part_folders(halo_features=...)``)."""

_GATHER_ROWS = 8192      # rows gathered through one mapped window (its touched pages are all that count)
_MAX_OPEN_BUCKETS = 256  # bucket files open at once in one pass


class NpyRows:
    """A ``.npy`` array (1-D or 2-D, C order) read through memory-mapped windows, one at a time: ``rows(lo, hi)``
    and ``gather(ids)`` (ascending ids) touch only the pages they read, unmapped before returning."""

    def __init__(self, path: Any, name: str, owner: str):
        self.path = Path(path)
        try:
            arr = open_npy(self.path)
        except (OSError, ValueError) as exc:
            raise ParamError([param_error(name, owner, "a readable .npy array", f"{path}: {exc}")]) from None
        if not isinstance(arr, np.memmap) or arr.ndim not in (1, 2) or not arr.flags.c_contiguous:
            raise ParamError([param_error(name, owner, "a C-order 1-D or 2-D .npy array", str(path))])
        self.shape, self.dtype, self.offset = arr.shape, arr.dtype, int(arr.offset)
        del arr
        self.row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize

    def _window(self, lo: int, hi: int) -> np.ndarray:
        if hi <= lo:
            return np.zeros((0,) + self.shape[1:], self.dtype)
        return np.memmap(self.path, dtype=self.dtype, mode="r", offset=self.offset + lo * self.row_bytes,
                         shape=(hi - lo,) + tuple(self.shape[1:]))

    def rows(self, lo: int, hi: int) -> np.ndarray:
        w = self._window(lo, hi)
        out = np.array(w)
        del w
        return out

    def gather(self, ids: np.ndarray) -> np.ndarray:
        """Rows ``ids`` (ascending), in blocks of at most :data:`_GATHER_ROWS` through windows."""
        out = np.empty((ids.size,) + tuple(self.shape[1:]), self.dtype)
        for a in range(0, ids.size, _GATHER_ROWS):
            block = ids[a:a + _GATHER_ROWS]
            lo = int(block[0])
            w = self._window(lo, int(block[-1]) + 1)
            out[a:a + block.size] = w[block - lo]
            del w
        return out


@numba.njit(cache=True)
def _members(ins, owner, p, owned, halo):
    """Part ``p``'s owned vertices and halo (in its subgraph, owned elsewhere), ascending, into the given arrays."""
    a = 0
    b = 0
    word, bit = p >> 6, np.uint64(p & 63)
    for v in range(owner.shape[0]):
        if owner[v] == p:
            owned[a] = v
            a += 1
        elif (ins[v, word] >> bit) & np.uint64(1):
            halo[b] = v
            b += 1


def label_dtype(lo: int, hi: int):
    """The smallest signed integer type holding the labels ``lo..hi`` (and -1, unlabelled)."""
    for dtype in (np.int8, np.int16, np.int32):
        if np.iinfo(dtype).min <= min(lo, -1) and hi <= np.iinfo(dtype).max:
            return dtype
    return np.int64


def _split_roles(n: int, labels: NpyRows, files: dict, split: tuple, seed: int, owner: str) -> np.ndarray:
    """``(N,)`` int8 roles (1 train, 2 val, 4 test) from split files (masks or id lists, as the ``files:`` spec
    reads them), else a seeded random split of the labelled vertices with ``files:``'s rule."""
    from workbench.data.folders import _masks_from_ids
    from workbench.data.safe_io import read_npy

    role = np.zeros(n, np.int8)
    if any(files.values()):
        empty = np.zeros(0, np.int64)
        ids = [read_npy(files[k], owner) if files.get(k) else empty for k in ("train", "val", "test")]
        where = {f"{k}_mask": files[k] for k in ("train", "val", "test") if files.get(k)}
        masks = _masks_from_ids(*ids, n, where, owner)
        for bit, key in ((1, "train_mask"), (2, "val_mask"), (4, "test_mask")):
            role[masks[key].numpy()] |= bit
        return role
    pool = np.concatenate([np.flatnonzero(labels.rows(lo, min(lo + (1 << 22), n)) >= 0) + lo
                           for lo in range(0, n, 1 << 22)])
    order = pool[np.random.default_rng(seed).permutation(pool.size)]
    start = 0
    for bit, r in zip((1, 2, 4), split):
        c = int(round(r * pool.size))
        role[order[start:start + c]] |= bit
        start += c
    return role


def write_part_folders(edges, owner: np.ndarray, out_dir: Any, *, features: Any, labels: Any,
                       train: Any = None, val: Any = None, test: Any = None, split: tuple = (0.6, 0.2, 0.2),
                       split_seed: int = 0, method: str = "", options: Optional[dict] = None,
                       metrics: Optional[dict] = None, source: str = "", bucket_edges: int = 1 << 23,
                       temp_budget_bytes: int = 4 << 30, halo_features: str = "copy",
                       log: Optional[Callable[[str], None]] = None) -> dict:
    """Write each part's completed subgraph (``part_subgraph(graph, owner, p, halo_hops=1)`` of the cleaned graph:
    self-loops and repeated lines dropped, undirected lines in both directions) with its node data.

    Folder tree (every array a ``.npy`` for ``np.load(..., mmap_mode="r")``; ``L`` = local vertices of the part,
    owned ones first)::

        DIR/
          manifest.json        # format, version (2), num_parts, num_nodes, num_lines, directed, method, options,
                               # feature_dim, num_classes, replication_factor (sum of L / N), comm_rows, splits,
                               # dtypes (of gid, indptr, indices, labels, features, masks), stream metrics,
                               # write_phase_s, and per part: dir, num_owned, num_halo, num_local, num_edges,
                               # num_train/val/test (owned, labelled), owned_id_range, halo_id_range, bytes
          owner.npy            # (N,) owner part of every vertex     } written by StreamPartition.save
          metrics.json         # the streaming partitioner's metrics }
          part-000/
            gid.npy            # (L,) int32 (int64 from 2^31 vertices) global id of each local vertex: owned
                               # ascending, then halo ascending
            indptr.npy         # (L + 1,) int32 (int64 from 2^31 edges in the part) CSR over destinations
                               # (local ids): row v = in-edges of v
            indices.npy        # (E_p,) int32 (int64 from 2^31 vertices) local source ids, ascending by global id
            features.npy       # (L, F) feature rows of gid (owned rows, then halo rows), the input's dtype;
                               # halo_features="reference": (num_owned, F), the halo rows read from the input
            labels.npy         # (L,) labels (-1 = unlabelled), the smallest of int8/16/32/64 holding them
                               # (int16 for 172 classes)
            train_mask.npy     # (L,) bool split of each local vertex (training and evaluation read owned rows)
            val_mask.npy
            test_mask.npy
          part-001/ ...

    Version 1 folders (written before the compact types) hold int64 ``gid``, ``indptr`` and ``labels`` and no
    ``dtypes``;
    :mod:`workbench.data.partfolder` and the trainers read both.

    An owned row holds every in-edge of the vertex; a halo row only the edges from the part's owned vertices
    (rows in global id order, each row's sources in global id order: the order of ``part_subgraph``'s edges).

    Memory: ``owner`` and per vertex ``8 ceil(P / 64)`` bytes of subgraph bits, an int32 degree (while the
    buckets are planned), the split role, and an int32 local id map; one part's global ids (twice) and its
    int64 row counts; one chunk of lines (and its selected edges, at most 4 per line); one
    bucket of at most ``bucket_edges`` edges plus one vertex's degree while its CSR rows are sorted; one window
    of :data:`_GATHER_ROWS` feature rows. Never the edges: two passes per group of parts over the stream (the
    first for every part together), the selected edges bucketed by destination range into temporary files under
    ``DIR/.buckets`` (at most ``temp_budget_bytes`` per group), removed as each part is written.

    Args:
        edges: an edge stream (:class:`~workbench.partition.streaming.EdgeFileStream` or ``GraphEdgeStream``).
        owner: ``(N,)`` owner part of every vertex (e.g. ``StreamPartition.owner``).
        out_dir: the folder (created; existing parts are overwritten).
        features, labels: ``.npy`` files, ``(N, F)`` and ``(N,)`` integers (-1 = unlabelled).
        train, val, test: ``.npy`` masks or id lists; none: a seeded random ``split`` of the labelled vertices
            (the ``files:`` spec's rule, so ``files:edges=...,features=...,labels=...`` is the same graph).
        method, options, metrics, source: recorded in the manifest.
        bucket_edges: edges per bucket (the CSR sort's working set), >= 1024.
        temp_budget_bytes: temporary bytes per pass; parts are grouped to stay below it, >= 1 MiB.
        halo_features: ``copy`` (every part holds its halo's feature rows: self-contained, RF x N x F floats in
            all) or ``reference`` (owned rows only, N x F in all; a reader gathers the halo rows from ``features``,
            recorded by its absolute path in the manifest, which must then stay where it is).
        log: called with a line per step.

    Returns:
        The manifest (also written to ``DIR/manifest.json``).

    Raises:
        ParamError: files that do not match the vertex count, bad options.
    """
    owner_name = "write_part_folders"
    log = log or (lambda line: None)
    out = Path(out_dir)
    owner = np.asarray(owner)
    n = int(owner.shape[0])
    errs = ErrorCollector(owner_name)
    errs.check(owner.ndim == 1 and owner.dtype.kind in "iu" and n > 0, "owner", "a non-empty 1-D int array",
               f"{owner.dtype} {owner.shape}")
    errs.check(isinstance(bucket_edges, int) and bucket_edges >= 1024, "bucket_edges", "an int >= 1024", bucket_edges)
    errs.check(isinstance(temp_budget_bytes, int) and temp_budget_bytes >= 1 << 20, "temp_budget_bytes",
               "an int >= 1 MiB", temp_budget_bytes)
    errs.check(len(split) == 3 and all(0 <= r <= 1 for r in split) and sum(split) <= 1 + 1e-9, "split",
               "three ratios in [0, 1] summing to at most 1", split)
    errs.check(halo_features in HALO_FEATURES, "halo_features", f"one of {list(HALO_FEATURES)}", halo_features)
    errs.raise_if_any()
    P = int(owner.max()) + 1
    if min(int(owner.min()), 0) < 0:
        raise ParamError([param_error("owner", owner_name, "part ids >= 0 (every vertex owned)", int(owner.min()))])
    feats = NpyRows(features, "features", owner_name)
    labs = NpyRows(labels, "labels", owner_name)
    errs.check(len(feats.shape) == 2 and feats.shape[0] == n and feats.dtype.kind == "f", "features",
               f"a ({n}, F) float .npy (one row per vertex)", f"{feats.dtype} {feats.shape}")
    errs.check(len(labs.shape) == 1 and labs.shape[0] == n and labs.dtype.kind in "iu", "labels",
               f"a ({n},) integer .npy (-1 = unlabelled)", f"{labs.dtype} {labs.shape}")
    errs.raise_if_any()
    owner = np.ascontiguousarray(owner, dtype=np.int16 if P < 2 ** 15 else np.int32)
    _reset_peak_rss()   # write_peak_rss_mb: this writer's peak (the partitioner reports its own)
    phase: dict[str, float] = {}
    t0 = time.perf_counter()
    role = _split_roles(n, labs, {"train": train, "val": val, "test": test}, split, split_seed, owner_name)
    num_classes, lab_min = 0, -1
    for lo in range(0, n, 1 << 22):
        block = labs.rows(lo, min(lo + (1 << 22), n))
        num_classes = max(num_classes, int(block.max()) + 1)
        lab_min = min(lab_min, int(block.min()))
    lab_dtype = label_dtype(lab_min, num_classes - 1)
    phase["split"] = time.perf_counter() - t0

    # ---- pass 1: every part's subgraph bits and the degrees
    t0 = time.perf_counter()
    words = (P + 63) // 64
    ins = np.zeros((n, words), np.uint64)
    own_bits(owner, ins)
    deg = np.zeros(n, np.int32)   # saturating: it only sizes the buckets
    part_rows = np.zeros(P, np.int64)
    both = not edges.directed
    num_lines = 0
    for src, dst in edges:
        if src.size and max(int(src.max()), int(dst.max())) >= n:
            raise ParamError([param_error("owner", owner_name, "one entry per vertex of the stream",
                                          f"{n} entries, vertex id {max(int(src.max()), int(dst.max()))}")])
        inside_chunk(src, dst, owner, both, ins, deg, np.iinfo(deg.dtype).max, part_rows)
        num_lines += src.size
    comm = owner_comm_rows(ins, owner, P)   # the rows each owner sends each part that holds a replica
    local_counts = part_counts(ins, P)
    owned_counts = np.bincount(owner, minlength=P)
    phase["subgraph_bits"] = time.perf_counter() - t0
    log(f"subgraph bits: {num_lines:,} lines, RF {local_counts.sum() / n:.3f}")

    id_dtype = np.int32 if n < 2 ** 31 else np.int64
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("part-*"):   # parts of an earlier folder with more parts
        if stale.is_dir() and stale.name[5:].isdigit() and int(stale.name[5:]) >= P:
            shutil.rmtree(stale)
    tmp = out / ".buckets"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    plans = []
    for p in range(P):   # ranges (from the degrees: upper bounds of the rows) and the bytes of its buckets
        owned = np.empty(int(owned_counts[p]), id_dtype)
        halo = np.empty(int(local_counts[p] - owned_counts[p]), id_dtype)
        _members(ins, owner, p, owned, halo)
        bounds = [range_limits(ids, deg, bucket_edges, n) for ids in (owned, halo)]
        est = int(part_rows[p]) * 2 * np.dtype(id_dtype).itemsize
        plans.append({"part": p, "bounds": bounds, "est": est, "nb": sum(b.size for b in bounds)})
        del owned, halo
    groups, cur = [], []
    for plan in plans:
        if cur and (sum(q["est"] for q in cur) + plan["est"] > temp_budget_bytes
                    or sum(q["nb"] for q in cur) + plan["nb"] > _MAX_OPEN_BUCKETS):
            groups.append(cur)
            cur = []
        cur.append(plan)
    groups.append(cur)

    del deg
    parts_info: list[Optional[dict]] = [None] * P
    g2l = np.full(n, -1, id_dtype)
    phase.update(buckets=0.0, csr=0.0, node_data=0.0)
    try:
        for gi, group in enumerate(groups):
            t0 = time.perf_counter()
            files = _bucket_pass(edges, owner, ins, both, group, P, tmp, id_dtype)
            phase["buckets"] += time.perf_counter() - t0
            log(f"group {gi + 1}/{len(groups)}: parts {[q['part'] for q in group]} bucketed")
            for plan in group:
                p = plan["part"]
                owned = np.empty(int(owned_counts[p]), id_dtype)
                halo = np.empty(int(local_counts[p] - owned_counts[p]), id_dtype)
                _members(ins, owner, p, owned, halo)
                pdir = out / f"part-{p:03d}"
                pdir.mkdir(exist_ok=True)
                t0 = time.perf_counter()
                num_edges = _write_csr(pdir, owned, halo, files[p], g2l, n, id_dtype)
                phase["csr"] += time.perf_counter() - t0
                t0 = time.perf_counter()
                parts_info[p] = _write_node_data(pdir, p, owned, halo, num_edges, feats, labs, lab_dtype, role,
                                                 halo_features == "copy")
                phase["node_data"] += time.perf_counter() - t0
                log(f"part {p}: {owned.size:,} owned, {halo.size:,} halo, {num_edges:,} edges")
                del owned, halo
                _trim_heap()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    labelled = [int(((role & bit) != 0).sum()) for bit in (1, 2, 4)]
    manifest = {
        "format": FOLDER_FORMAT, "version": FOLDER_VERSION, "num_parts": P, "num_nodes": n, "num_lines": num_lines,
        "directed": not both, "halo_hops": 1, "method": method, "options": options or {}, "source": source,
        "feature_dim": int(feats.shape[1]), "feature_dtype": feats.dtype.name, "index_dtype": np.dtype(id_dtype).name,
        "num_classes": num_classes, "replication_factor": float(local_counts.sum() / n),
        "num_edges": int(sum(q["num_edges"] for q in parts_info)),
        "num_edges_owned_rows": int(sum(q["num_edges_owned_rows"] for q in parts_info)),
        "comm_rows": comm.tolist(), "splits": dict(zip(("train", "val", "test"), labelled)),
        "split_files": {k: (str(v) if v else None) for k, v in (("train", train), ("val", val), ("test", test))},
        "inputs": {"features": str(Path(features).resolve()), "labels": str(labels)},
        "halo_features": halo_features,
        "dtypes": {"gid": np.dtype(id_dtype).name,
                   "indptr": "int64" if max(q["num_edges"] for q in parts_info) >= 2 ** 31 else "int32",
                   "indices": "int64" if max(q["num_local"] for q in parts_info) >= 2 ** 31 else "int32",
                   "labels": np.dtype(lab_dtype).name, "features": feats.dtype.name, "masks": "bool"},
        "write_phase_s": {k: round(v, 3) for k, v in phase.items()}, "write_peak_rss_mb": peak_rss_mb(),
        "stream_metrics": metrics or {}, "parts": parts_info,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def _bucket_pass(edges, owner, ins, both, group, P, tmp: Path, id_dtype) -> dict:
    """One pass: each kept edge of the group's parts appended to its bucket file. Returns, per part, the bucket
    file paths of kind 0 (owned rows) and kind 1 (halo rows), each in range order."""
    slot = np.full(P, -1, np.int64)
    base, lo, hi, bounds, paths = [], [], [], [], {}
    nb = 0
    for j, plan in enumerate(group):
        slot[plan["part"]] = j
        kinds = []
        for k, b in enumerate(plan["bounds"]):
            base.append(nb)
            lo.append(sum(x.size for x in bounds))
            bounds.append(b)
            hi.append(lo[-1] + b.size)
            kinds.append([tmp / f"p{plan['part']}-k{k}-r{r}.bin" for r in range(b.size)])
            nb += b.size
        paths[plan["part"]] = kinds
    flat_paths = [f for plan in group for kind in paths[plan["part"]] for f in kind]
    base_a, lo_a, hi_a = (np.array(x, np.int64) for x in (base, lo, hi))
    bounds_a = np.concatenate(bounds)
    handles = [open(f, "wb") for f in flat_paths]
    cap = 0
    try:
        for src, dst in edges:
            need = src.size * (4 if both else 2)
            if need > cap:
                cap = need + need // 16
                out_b = np.empty(cap, np.int32)   # bucket of each selected edge (a few hundred at most)
                out_s, out_d = np.empty(cap, id_dtype), np.empty(cap, id_dtype)
                pairs = np.empty((cap, 2), id_dtype)
                counts, starts = np.zeros(nb, np.int64), np.zeros(nb, np.int64)
            k = select_chunk(src, dst, owner, ins, both, slot, base_a, bounds_a, lo_a, hi_a, out_b, out_s, out_d)
            group_pairs(out_b, out_s, out_d, k, counts, starts, pairs)
            for b in np.flatnonzero(counts):
                pairs[starts[b]:starts[b] + counts[b]].tofile(handles[b])
    finally:
        for h in handles:
            h.close()
    return paths


def _write_csr(pdir: Path, owned: np.ndarray, halo: np.ndarray, files: list, g2l: np.ndarray, n: int,
               id_dtype) -> int:
    """Each bucket's rows (:func:`~.kernels_folders.csr_bucket`: sources by global id, repeats dropped) appended
    to ``indices.npy`` as local ids; then ``indptr.npy`` and ``gid.npy``. Returns the edge count."""
    gid = np.concatenate([owned, halo])
    num_local = gid.size
    g2l[gid] = np.arange(num_local, dtype=g2l.dtype)
    counts = np.zeros(num_local + 1, np.int64)
    idx_dtype = np.int32 if num_local < 2 ** 31 else np.int64
    with NpyRowWriter(pdir / "indices.npy", idx_dtype) as w:
        for kind in files:
            for f in kind:
                pairs = np.fromfile(f, dtype=id_dtype).reshape(-1, 2)
                os.unlink(f)
                if not pairs.size:
                    continue
                out = np.empty(pairs.shape[0], idx_dtype)
                k = csr_bucket(pairs, g2l, np.empty(pairs.shape[0], pairs.dtype), out, counts)
                del pairs
                w.write(out[:k])
                del out
    g2l[gid] = -1
    np.cumsum(counts, out=counts)
    np.save(pdir / "indptr.npy", counts.astype(np.int32) if counts[-1] < 2 ** 31 else counts)
    np.save(pdir / "gid.npy", gid)
    return int(counts[-1])


def _write_node_data(pdir: Path, p: int, owned: np.ndarray, halo: np.ndarray, num_edges: int, feats: NpyRows,
                     labs: NpyRows, lab_dtype, role: np.ndarray, halo_rows: bool = True) -> dict:
    with NpyRowWriter(pdir / "features.npy", feats.dtype, feats.shape[1:]) as w:
        for ids in (owned, halo) if halo_rows else (owned,):
            for a in range(0, ids.size, 1 << 16):
                w.write(feats.gather(ids[a:a + (1 << 16)]))
    k = owned.size
    num_split = np.zeros(3, np.int64)   # owned, labelled train/val/test vertices
    with NpyRowWriter(pdir / "labels.npy", lab_dtype) as w:
        for ids in (owned, halo):
            for a in range(0, ids.size, 1 << 16):
                lab = labs.gather(ids[a:a + (1 << 16)])
                w.write(lab.astype(lab_dtype))
                if ids is owned:
                    r = role[ids[a:a + (1 << 16)]][lab >= 0]
                    num_split += [int(((r & bit) != 0).sum()) for bit in (1, 2, 4)]
    r = np.concatenate([role[owned], role[halo]])
    for bit, name in ((1, "train_mask"), (2, "val_mask"), (4, "test_mask")):
        np.save(pdir / f"{name}.npy", (r & bit) != 0)
    del r
    indptr = open_npy(pdir / "indptr.npy")
    info = {"part": p, "dir": pdir.name, "num_owned": int(k), "num_halo": int(halo.size),
            "num_local": int(k + halo.size), "num_edges": int(num_edges),
            "num_edges_owned_rows": int(indptr[k]),
            "num_train": int(num_split[0]), "num_val": int(num_split[1]), "num_test": int(num_split[2]),
            "owned_id_range": [int(owned[0]), int(owned[-1])] if k else None,
            "halo_id_range": [int(halo[0]), int(halo[-1])] if halo.size else None}
    del indptr
    info["bytes"] = int(sum(f.stat().st_size for f in pdir.iterdir()))
    return info
