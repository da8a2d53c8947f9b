"""``workbench generate SPEC --out FILE``: a seeded power-law edge file written chunk by chunk, with node features,
labels and a split as ``.npy`` files beside it, never holding the graph (it may be larger than memory).

SPEC is a generator spec of :data:`STREAMED` with its usual settings (``rmat:scale=20,edge_factor=16``,
``chunglu:num_nodes=1000000,avg_degree=16``, ``papers-like:num_nodes=7000000,num_features=16``): the same
models as :func:`workbench.data.load_graph`'s generators, drawn line by line instead of as a set:

* **rmat**: ``edge_factor * 2**scale`` lines, each placed by ``scale`` quadrant draws, ids shuffled; labels the
  recursive block of the unshuffled id;
* **chunglu**: ``num_nodes * avg_degree / 2`` lines, both endpoints drawn by power-law weight; random labels;
* **sbm** and its presets (**papers-like**, **products-like**, **reddit-like**): ``num_nodes * avg_degree / 2``
  lines, the first endpoint by (power-law) propensity, the second inside its block with probability
  ``homophily`` (else in another block by weight); labels ``block % num_classes``.

Unlike the in-memory generators the lines are not made distinct: self-loops are dropped, repeated pairs stay (as
in a raw edge list; cleaning, e.g. the ``files:`` spec, removes them, so the cleaned mean degree is a little
lower). Lines are drawn in blocks of 2^20, block ``k`` from the seed sequence ``(seed, k)``: the file depends on
the spec alone. Features are Gaussians around one centroid per community (``num_features`` wide, float32);
the split follows the spec's ratios (ids lists ``.npy``).

Output, for ``--out DIR/g.bin`` (``.npy`` edges: an ``(E, 2)`` array; other suffixes: text)::

    DIR/g.bin               # raw pairs, int32 (or --dtype int64)
    DIR/g.bin.json          # sidecar: dtype, num_lines, num_nodes, spec, node-data files, timings
    DIR/g.features.npy      # (N, F) float32
    DIR/g.labels.npy        # (N,) int64, -1 = unlabelled
    DIR/g.train.npy DIR/g.val.npy DIR/g.test.npy   # sorted int64 vertex ids

Memory: about 16 to 20 bytes a vertex kept while the lines are drawn (cumulative weights, a permutation or the
block order, the community), about 45 while the labels and the split are drawn, and one block of lines or
feature rows.

Example:
    >>> import tempfile, pathlib
    >>> info = generate_files("chunglu:num_nodes=1000,avg_degree=6,num_features=4", pathlib.Path(tempfile.mkdtemp()) / "g.bin")
    >>> info["num_nodes"], info["num_lines"] <= 3000, sorted(info["files"])
    (1000, True, ['features', 'labels', 'test', 'train', 'val'])
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import numpy as np

from workbench._validation import ParamError, param_error
from workbench.data.edgefiles import EDGE_DTYPES, EdgeFileWriter, NpyRowWriter, sidecar_path
from workbench.data.synthetic import ChungLuConfig, RMATConfig, SBMConfig, random_split, rmat_pairs

__all__ = ["STREAMED", "generate_files", "node_data_paths"]

STREAMED = ("rmat", "chunglu", "sbm", "papers-like", "products-like", "reddit-like")
"""Generator specs ``workbench generate`` writes line by line."""

BLOCK = 1 << 20
"""Lines (and feature rows) drawn per seeded block."""


def node_data_paths(out: Path) -> dict[str, Path]:
    """Where the node data of edge file ``out`` goes: ``<stem>.features.npy``, ``.labels``, ``.train``, ..."""
    return {k: out.with_name(f"{out.stem}.{k}.npy") for k in ("features", "labels", "train", "val", "test")}


class _Model:
    """One generator's per-vertex state and its line draws."""

    def __init__(self, config: Any, rng: np.random.Generator):
        self.c = config
        n = config.num_nodes if not isinstance(config, RMATConfig) else 2 ** config.scale
        ids = np.int32 if n < 2 ** 31 else np.int64   # per-vertex arrays: 4 bytes an id where they fit
        if isinstance(config, RMATConfig):
            self.kind, self.n = "rmat", n
            self.m = int(round(config.edge_factor * n))
            self.perm = rng.permutation(n).astype(ids)
            original = np.empty(n, np.int64)
            original[self.perm] = np.arange(n)
            self.community = (original * config.num_classes // n).astype(np.int32)
            del original
            self.num_communities, self.num_classes = config.num_classes, config.num_classes
        elif isinstance(config, ChungLuConfig):
            self.kind, self.n = "chunglu", n
            self.m = int(round(n * config.avg_degree / 2))
            w = (np.arange(n, dtype=np.float64) + 1.0) ** (-1.0 / (config.exponent - 1.0))
            w *= config.avg_degree / w.mean()
            np.minimum(w, math.sqrt(n * config.avg_degree), out=w)
            self.cum = np.cumsum(w)
            del w
            self.perm = rng.permutation(n).astype(ids)
            self.community = rng.integers(0, config.num_classes, n).astype(np.int32)
            self.num_communities, self.num_classes = config.num_classes, config.num_classes
        else:
            self.kind, self.n, nb = "sbm", n, config.num_blocks
            self.m = int(round(n * config.avg_degree / 2))
            block = rng.permutation(np.arange(n, dtype=np.int32) % nb)
            theta = config._propensity(rng, n)
            self.order = np.argsort(block, kind="stable").astype(ids)
            sizes = np.bincount(block, minlength=nb)
            self.starts = np.concatenate([[0], np.cumsum(sizes)])
            self.cum = np.cumsum(theta[self.order])
            del theta
            cum0 = np.concatenate([[0.0], self.cum])
            self.block_lo = cum0[self.starts[:-1]]
            self.block_tot = cum0[self.starts[1:]] - self.block_lo
            self.block_cum = np.cumsum(self.block_tot)
            del cum0
            self.community, self.num_communities = block, nb
            self.num_classes = config.num_classes or nb

    @property
    def labels(self) -> np.ndarray:
        """``(N,)`` int64 classes (a new array)."""
        return (self.community % self.num_classes).astype(np.int64)

    def _draw(self, r: np.ndarray, lo: Any, width: Any, first: Any = 0, stop: Any = None) -> np.ndarray:
        keys = lo + r * width
        order = np.argsort(keys)   # searched in ascending order: the searches then share their cached path
        pos = np.empty(keys.size, np.int64)
        pos[order] = np.searchsorted(self.cum, keys[order], side="right")
        np.minimum(pos, self.cum.size - 1 if stop is None else stop - 1, out=pos)
        np.maximum(pos, first, out=pos)
        return pos

    def lines(self, k: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Block ``k`` of ``count`` lines, from the seed sequence ``(seed, 1, k)``."""
        rng = np.random.default_rng([self.c.seed, 1, k])
        if self.kind == "rmat":
            src, dst = rmat_pairs(rng, count, self.c.a, self.c.b, self.c.c, self.c.scale)
            return self.perm[src], self.perm[dst]
        if self.kind == "chunglu":
            total = self.cum[-1]
            return self.perm[self._draw(rng.random(count), 0.0, total)], self.perm[self._draw(rng.random(count), 0.0, total)]
        nb = self.c.num_blocks
        u = self.order[self._draw(rng.random(count), 0.0, self.cum[-1])]
        bu = self.community[u]
        bv = bu.copy()
        out = rng.random(count) >= self.c.homophily
        if nb > 1 and out.any():
            idx = np.flatnonzero(out)
            other = bv[idx]
            redo = np.ones(idx.size, bool)
            while redo.any():   # another block, chosen by weight (about 1/num_blocks redrawn per round)
                pick = np.searchsorted(self.block_cum, rng.random(int(redo.sum())) * self.block_cum[-1], side="right")
                other[redo] = np.minimum(pick, nb - 1)
                redo = other == bu[idx]
            bv[idx] = other
        v = self.order[self._draw(rng.random(count), self.block_lo[bv], self.block_tot[bv], self.starts[bv],
                                  self.starts[bv + 1])]
        return u, v


def _config(spec: str) -> Any:
    from workbench.data.spec import parse_spec

    parsed = parse_spec(spec)
    name = parsed.text.partition(":")[0].strip().lower()
    if parsed.kind != "named" or name not in STREAMED:
        raise ParamError([param_error("spec", "workbench generate", f"a generator spec of {list(STREAMED)} with "
                                                                  "settings, e.g. 'rmat:scale=20,edge_factor=16'", spec)])
    return parsed.config


def generate_files(spec: str, out: Any, *, dtype: str = "int32",
                   log: Optional[Callable[[str], None]] = None) -> dict:
    """Write the edge file ``out`` and its node data for the generator spec ``spec`` (module docstring).

    Args:
        spec: e.g. ``'papers-like:num_nodes=7000000,avg_degree=29,num_features=16,seed=0'``.
        out: the edge file (``.bin``, ``.npy`` or text); its folder must exist.
        dtype: ``'int32'`` or ``'int64'`` ids (binary files).
        log: called with a line per step.

    Returns:
        The sidecar's content (``num_lines``, ``num_nodes``, ``files``, ``phase_s``, ...).

    Raises:
        ParamError: a spec that is not streamed, bad settings, a bad dtype or folder.
    """
    log = log or (lambda line: None)
    out = Path(out)
    errors = []
    if dtype not in EDGE_DTYPES:
        errors.append(param_error("dtype", "workbench generate", f"one of {list(EDGE_DTYPES)}", dtype))
    elif dtype != "int32" and Path(out).suffix not in (".bin", ".npy"):   # text has no id type: not ignored
        errors.append(param_error("dtype", "workbench generate", f"its default int32 for a text file ({out}; the id "
                                  "type is of .bin and .npy files)", dtype))
    if not out.parent.is_dir():
        errors.append(param_error("out", "workbench generate", "a file in an existing folder", str(out)))
    if errors:
        raise ParamError(errors)
    config = _config(spec).validate()
    phase: dict[str, float] = {}
    t0 = time.perf_counter()
    model = _Model(config, np.random.default_rng([config.seed, 0]))
    n = model.n
    if dtype == "int32" and n > np.iinfo(np.int32).max + 1:
        raise ParamError([param_error("dtype", "workbench generate", f"int64 for {n:,} vertices", dtype)])
    files = node_data_paths(out)
    nd_rng = np.random.default_rng([config.seed, 2])
    pool = None
    if getattr(config, "labelled_blocks", None) is not None:
        pool = np.flatnonzero(model.community < config.labelled_blocks)
    masks = random_split(n, config.train_ratio, config.val_ratio, config.test_ratio, rng=nd_rng, pool=pool)
    del pool
    labels = model.labels
    if not config.label_unsplit:
        labels[~(masks[0] | masks[1] | masks[2])] = -1
    np.save(files["labels"], labels)
    del labels
    for key, m in zip(("train", "val", "test"), masks):
        np.save(files[key], np.flatnonzero(m).astype(np.int64))
    del masks
    written = {k: str(v) for k, v in files.items() if k != "features"}
    if config.num_features:
        f = config.num_features
        centroids = nd_rng.standard_normal((model.num_communities, f), dtype=np.float32) * np.float32(math.sqrt(8.0 / f))
        with NpyRowWriter(files["features"], np.float32, (f,)) as w:
            for k, lo in enumerate(range(0, n, BLOCK)):
                hi = min(lo + BLOCK, n)
                x = np.random.default_rng([config.seed, 3, k]).standard_normal((hi - lo, f), dtype=np.float32)
                x *= np.float32(config.feature_noise)
                x += centroids[model.community[lo:hi]]
                w.write(x)
        written["features"] = str(files["features"])
    phase["node_data"] = time.perf_counter() - t0
    log(f"node data: {n:,} vertices ({time.perf_counter() - t0:.1f} s)")
    t0 = time.perf_counter()
    loops = 0
    meta = {"spec": spec, "generator": model.kind, "files": written}
    with EdgeFileWriter(out, dtype, num_nodes=n, meta=meta) as w:
        for k, lo in enumerate(range(0, model.m, BLOCK)):
            u, v = model.lines(k, min(BLOCK, model.m - lo))
            keep = u != v
            loops += int(keep.size - keep.sum())
            w.write(u[keep], v[keep])
        phase["edges"] = time.perf_counter() - t0
        w.meta.update(self_loops_dropped=loops, phase_s={k: round(v, 3) for k, v in phase.items()})
        num_lines = w.num_lines
    log(f"edges: {num_lines:,} lines ({phase['edges']:.1f} s)")
    import json

    side = sidecar_path(out)
    return json.loads(side.read_text()) if side.is_file() else {
        "num_lines": num_lines, "num_nodes": n, "spec": spec, "files": written, "phase_s": phase}


def iter_lines(spec: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The lines ``generate_files`` writes for ``spec``, block by block (self-loops dropped), without a file."""
    config = _config(spec).validate()
    model = _Model(config, np.random.default_rng([config.seed, 0]))
    for k, lo in enumerate(range(0, model.m, BLOCK)):
        u, v = model.lines(k, min(BLOCK, model.m - lo))
        keep = u != v
        yield u[keep], v[keep]
