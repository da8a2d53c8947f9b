"""Partition folders: each part's completed subgraph, node data and a manifest, all memory-mappable
(for graphs larger than memory).

:func:`workbench.partition.streaming.folders.write_part_folders` writes them (``workbench partition FILE --stream
--out DIR --with-features X.npy --labels Y.npy``; its docstring has the tree); this module reads them:
:class:`PartFolder` opens the manifest and memory-maps one part's arrays, :func:`read_part_graph` rebuilds the
whole graph from the owned rows (every vertex is owned by one part, which keeps its full in-neighbourhood),
and :class:`PartsConfig` is the ``parts:`` graph spec (``parts:DIR`` or ``parts:dir=DIR,select=0+1``; a folder
path with a manifest works too). Model averaging (``sync.method=model_avg``) trains the selected parts, each
rank memory-mapping only its own, and so does full-graph training with the ``halo`` exchange
(:mod:`workbench.train.part_source`); every other trainer gets the whole graph on the client and trains on the
folder's parts (:meth:`PartFolder.owner_part` is the run's partition, no partitioner runs:
:func:`workbench.train.full_graph.load_and_partition`).

Example:
    >>> parse_select("0+2", 4), parse_select("1-3", 4), parse_select("", 2)
    ([0, 2], [1, 2, 3], [0, 1])
"""

from __future__ import annotations

import dataclasses
import json
import mmap
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from workbench._validation import Config, ErrorCollector, ParamError, param_error
from workbench.data.safe_io import open_npy
from workbench.graph import Graph

__all__ = ["FOLDER_FORMAT", "FOLDER_VERSION", "PART_ARRAYS", "PartFolder", "PartsConfig", "read_part_graph",
           "parse_select", "is_part_folder", "parts_config_of", "parse_parts_spec", "gather_rows", "GATHER_ROWS",
           "MappedArray"]

FOLDER_FORMAT = "workbench-part-folder"
"""The ``format`` entry of a partition folder's ``manifest.json``."""

FOLDER_VERSION = 2
"""The ``version`` the writer records: 2 stores ``gid`` as int32 below 2^31 vertices, ``indptr`` as int32 below
2^31 edges in the part and ``labels`` in the smallest integer type holding them, and lists the types under
``dtypes``; version 1 (int64 ``gid``, ``indptr`` and ``labels``) is read the same way (readers widen ids and
labels to int64 where they compute with them)."""

PART_ARRAYS = ("gid", "indptr", "indices", "features", "labels", "train_mask", "val_mask", "test_mask")
"""The ``.npy`` files of one part's directory."""


GATHER_ROWS = 1024
"""Rows :func:`gather_rows` reads between two releases of the pages it mapped."""


class MappedArray:
    """A ``.npy`` array memory-mapped copy-on-write (nothing is ever written back) whose resident pages
    :meth:`release` gives back to the page cache: reads through it cost this process's resident memory only
    until the next release.

    Why releases: a page fault maps the pages around it too (fault-around, and whole large folios of the page
    cache), so 8192 random 64-byte rows of a 1.3 GB memory-mapped file left 1.08 GB resident (measured).

    Attributes:
        array: the array (a view of the map).
    """

    def __init__(self, path: Any):
        head = open_npy(path)
        shape, dtype, offset = head.shape, head.dtype, int(head.offset)
        del head
        with open(path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        self.array = np.frombuffer(self._map, dtype=dtype, count=int(np.prod(shape)), offset=offset).reshape(shape)

    def release(self) -> None:
        """Drop the pages read so far from this process (``MADV_DONTNEED``; they stay in the page cache)."""
        if hasattr(self._map, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
            self._map.madvise(mmap.MADV_DONTNEED)


def gather_rows(path: Any, ids: np.ndarray) -> np.ndarray:
    """Rows ``ids`` (any order, repeats allowed) of the ``.npy`` array at ``path``, read in ascending order through
    a :class:`MappedArray` released after every :data:`GATHER_ROWS` rows: this process's resident memory grows by
    the result, not by the file.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "x.npy")
        >>> np.save(path, np.arange(10) * 10)
        >>> gather_rows(path, np.array([7, 0, 7, 3])).tolist()
        [70, 0, 70, 30]
    """
    ids = np.asarray(ids, dtype=np.int64)
    mapped = MappedArray(path)
    out = np.empty((ids.size,) + mapped.array.shape[1:], mapped.array.dtype)
    order = np.argsort(ids, kind="stable")
    for a in range(0, ids.size, GATHER_ROWS):
        at = order[a:a + GATHER_ROWS]
        out[at] = mapped.array[ids[at]]
        mapped.release()
    return out


def is_part_folder(path: Any) -> bool:
    """Whether ``path`` is a folder whose ``manifest.json`` is a partition folder's."""
    manifest = Path(path) / "manifest.json"
    if not manifest.is_file():
        return False
    try:
        return json.loads(manifest.read_text()).get("format") == FOLDER_FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def parse_select(text: str, num_parts: int, owner: str = "parts") -> list[int]:
    """Parts named by ``text``: ``''`` (all), ``'0+2+5'`` or a range ``'1-3'`` (ranges and ``+`` combine)."""
    text = str(text).strip()
    if not text:
        return list(range(num_parts))
    out: list[int] = []
    try:
        for item in text.split("+"):
            lo, sep, hi = item.partition("-")
            ids = range(int(lo), int(hi) + 1) if sep else [int(lo)]
            out += [i for i in ids if i not in out]
    except ValueError:
        out = []
    if not out or any(not 0 <= i < num_parts for i in out):
        raise ParamError([param_error("select", owner, f"part ids in [0, {num_parts}) as 'A+B+C' or 'A-B' "
                                                       "(empty: every part)", text)])
    return out


class PartFolder:
    """A partition folder: its manifest and memory maps of one part's arrays at a time.

    Attributes:
        path: the folder.
        manifest: ``manifest.json`` as a dict (see the writer's docstring).

    Raises:
        ParamError: not a folder with a partition folder's ``manifest.json``.
    """

    def __init__(self, path: Any, owner: str = "PartFolder"):
        self.path = Path(path)
        if not is_part_folder(self.path):
            raise ParamError([param_error("dir", owner, f"a partition folder (manifest.json of format "
                                                        f"{FOLDER_FORMAT!r}, written by workbench partition "
                                                        "--stream --out DIR --with-features ...)", str(path))])
        self.manifest = json.loads((self.path / "manifest.json").read_text())

    @property
    def num_parts(self) -> int:
        return int(self.manifest["num_parts"])

    @property
    def num_nodes(self) -> int:
        return int(self.manifest["num_nodes"])

    @property
    def parts(self) -> list[dict]:
        return self.manifest["parts"]

    @property
    def method(self) -> str:
        """The partitioner that made the parts, as the manifest names it (``spring``; ``folder`` if unnamed)."""
        return str(self.manifest.get("method") or "folder")

    def part_dir(self, part: int) -> Path:
        return self.path / self.parts[part]["dir"]

    def owner_part(self) -> np.ndarray:
        """``(N,)`` int64 part that owns each vertex, from every part's owned ids (``gid[:num_owned]``): the
        folder's edge-cut view, also of a vertex-cut folder (each vertex's owner keeps its in-edges).

        Raises:
            ParamError: a vertex no part owns, or one that two parts own (a damaged folder).
        """
        owner = np.full(self.num_nodes, -1, np.int64)
        seen = 0
        for p in range(self.num_parts):
            gid = np.asarray(open_npy(self.part_dir(p) / "gid.npy")[:int(self.parts[p]["num_owned"])], np.int64)
            owner[gid] = p
            seen += gid.size
        if seen != self.num_nodes or bool((owner < 0).any()):
            raise ParamError([param_error("dir", "PartFolder", "a folder whose parts own every vertex once",
                                          f"{self.path}: {seen} owned ids for {self.num_nodes} vertices")])
        return owner

    def part_features(self, part: int, arrays: Optional[dict] = None) -> np.ndarray:
        """``(L, F)`` feature rows of part ``part``'s local vertices, read into memory: the part's own file, or
        (a folder written with ``halo_features="reference"``) its owned rows and the halo rows gathered from the
        input features the manifest names."""
        a = arrays if arrays is not None else self.open_part(part)
        if self.manifest.get("halo_features", "copy") == "copy":
            return np.array(a["features"])
        whole = self._input_features()
        owned = int(self.parts[part]["num_owned"])
        halo = np.asarray(a["gid"][owned:])
        return np.concatenate([np.asarray(a["features"][:owned]), whole[halo]])

    def feature_rows(self, part: int, local_ids: Any) -> np.ndarray:
        """``(n, F)`` feature rows of part ``part``'s local vertices ``local_ids`` (any order), equal to
        ``part_features(part)[local_ids]``, read in ascending order with their pages released every
        :data:`GATHER_ROWS` rows (:func:`gather_rows`): what one mini-batch reads, so a rank's resident memory
        follows its batches, not its parts. With ``halo_features="reference"`` the halo rows come from the input
        features by global id."""
        ids = np.asarray(local_ids, dtype=np.int64)
        pdir = self.part_dir(part)
        if self.manifest.get("halo_features", "copy") == "copy":
            return gather_rows(pdir / "features.npy", ids)
        mine = ids < int(self.parts[part]["num_owned"])
        out = gather_rows(pdir / "features.npy", ids[mine])
        if bool(mine.all()):
            return out
        self._input_features()   # a ParamError where the input features are not where the manifest says
        rows = np.empty((ids.size,) + out.shape[1:], out.dtype)
        rows[mine] = out
        halo_gid = gather_rows(pdir / "gid.npy", ids[~mine])
        rows[~mine] = gather_rows(Path(self.manifest["inputs"]["features"]), halo_gid)
        return rows

    def _input_features(self) -> np.ndarray:
        """The input features a folder written with ``halo_features="reference"`` names, memory-mapped."""
        source = Path(self.manifest["inputs"]["features"])
        try:
            return open_npy(source)
        except (OSError, ValueError) as exc:
            raise ParamError([param_error("dir", "PartFolder", "a folder whose input features are where its manifest "
                                          "says (halo_features='reference')", f"{self.path}: {exc}")]) from None

    def open_part(self, part: int) -> dict[str, np.ndarray]:
        """Part ``part``'s arrays (:data:`PART_ARRAYS`), memory-mapped read-only (nothing is read yet)."""
        folder = self.part_dir(part)
        return {name: open_npy(folder / f"{name}.npy") for name in PART_ARRAYS}

    def __repr__(self) -> str:
        m = self.manifest
        return (f"PartFolder({str(self.path)!r}, method={m.get('method')!r}, parts={self.num_parts}, "
                f"nodes={self.num_nodes:,}, rf={m.get('replication_factor', float('nan')):.3f})")


def read_part_graph(folder: Any, *, name: Optional[str] = None) -> Graph:
    """The whole graph of a partition folder, from every part's owned rows (their in-edges are complete), with
    the features, labels and split of the owned vertices. Holds the whole graph: for small graphs and checks;
    model averaging reads one part at a time instead."""
    from workbench.data.cleaning import graph_from_sorted_keys

    pf = folder if isinstance(folder, PartFolder) else PartFolder(folder, owner="read_part_graph")
    n, m = pf.num_nodes, pf.manifest
    keys, feats, labels = [], None, np.full(n, -1, np.int64)
    masks = {k: np.zeros(n, bool) for k in ("train_mask", "val_mask", "test_mask")}
    for p in range(pf.num_parts):
        a = pf.open_part(p)
        owned = int(pf.parts[p]["num_owned"])
        gid = np.asarray(a["gid"][:owned], dtype=np.int64)   # int32 in a version-2 folder: keys need int64
        indptr = np.asarray(a["indptr"][:owned + 1])
        src = np.asarray(a["gid"], dtype=np.int64)[np.asarray(a["indices"][:indptr[-1]])]
        dst = np.repeat(gid, np.diff(indptr))
        keys.append(dst * max(n, 1) + src)
        if feats is None:
            feats = np.zeros((n, a["features"].shape[1]), a["features"].dtype)
        feats[gid] = a["features"][:owned]
        labels[gid] = a["labels"][:owned]
        for k in masks:
            masks[k][gid] = a[k][:owned]
    all_keys = torch.from_numpy(np.sort(np.concatenate(keys)) if keys else np.zeros(0, np.int64))
    return graph_from_sorted_keys(all_keys, n, directed=bool(m.get("directed", False)),
                                  features=torch.from_numpy(feats), labels=torch.from_numpy(labels),
                                  name=name or pf.path.name, **{k: torch.from_numpy(v) for k, v in masks.items()})


@dataclasses.dataclass(kw_only=True)
class PartsConfig(Config):
    """A partition folder as a graph spec: ``parts:DIR`` or ``parts:dir=DIR,select=0+1``. Model averaging trains
    the selected parts from their files (each rank memory-maps its own); anything else loading the spec gets the
    whole graph rebuilt from the owned rows (:func:`read_part_graph`), and the other trainers train on the
    folder's parts (its owner map)."""

    dir: str = ""
    """The partition folder (holding manifest.json and part-NNN/)."""
    select: str = ""
    """Parts to train under model averaging: '' (all), 'A+B+C' or 'A-B' (the whole graph is loaded otherwise)."""

    def _validate(self, errs: ErrorCollector) -> None:
        if not self.dir:   # the default config: a spec names its folder (checked where it is used)
            return
        if not is_part_folder(self.dir):
            errs.check(False, "dir", f"a partition folder (manifest.json of format {FOLDER_FORMAT!r})", self.dir)
            return
        try:
            parse_select(self.select, PartFolder(self.dir).num_parts, "PartsConfig")
        except ParamError as exc:
            errs.add(str(exc))

    @property
    def name(self) -> str:
        return "parts"

    def folder(self) -> PartFolder:
        return PartFolder(self.dir or "(empty)", owner="PartsConfig")

    def selected(self) -> list[int]:
        return parse_select(self.select, self.folder().num_parts, "PartsConfig")

    def generate(self, *, progress: Optional[bool] = None) -> Graph:
        """The whole graph (every part, whatever ``select``)."""
        self.validate()
        return read_part_graph(self.folder())


def parse_parts_spec(tail: str) -> PartsConfig:
    """The settings after ``parts:``: ``DIR``, ``DIR,select=...`` or ``dir=DIR,select=...``."""
    from workbench._validation import parse_settings

    items = [p for p in tail.split(",") if p.strip()]
    if items and "=" not in items[0]:
        items[0] = "dir=" + items[0]
    return PartsConfig().with_strings(parse_settings(items, owner="parts"))


def parts_config_of(spec: Any) -> Optional[PartsConfig]:
    """The :class:`PartsConfig` a graph spec names (``parts:...`` or a partition folder's path), else ``None``
    (any other spec, a :class:`Graph`, or nothing)."""
    if spec is None or isinstance(spec, Graph):
        return None
    text = str(spec).strip()
    head, sep, tail = text.partition(":")
    if head.strip().lower() == "parts" and sep:
        return parse_parts_spec(tail)
    if is_part_folder(text):
        return PartsConfig(dir=text)
    return None
