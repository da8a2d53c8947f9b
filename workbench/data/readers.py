"""Readers for graphs on disk: edge-list text, OGB node-property datasets, DGL binary graphs.

All text readers stream: the edge-list reader parses byte blocks cut at newlines, the OGB reader reads
``pandas`` chunks, so memory grows with the graph (16 bytes per edge while reading), never with the text.
Parsing runs in pandas' C tokenizer; Python only touches a block again, line by line, after the
vectorised checks found a problem in it, to name the exact line and field.

Bad input raises :class:`DataFormatError` (a :class:`~workbench._validation.ParamError`) naming the
file, the line and the field.

Example:
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "edges.txt"
    >>> _ = p.write_text("# a triangle\\n0 1\\n1,2\\n2\\t0\\n")
    >>> read_edge_list(p).num_edges
    3
"""

from __future__ import annotations

import gzip
import io
import os
import re
import sys
import warnings
import zlib
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import torch

from workbench._validation import ParamError, param_error
from workbench.data.errors import DataFormatError
from workbench.data.safe_io import MAX_NODES, check_inferred_num_nodes, check_num_nodes
from workbench.graph import Graph

__all__ = ["DataFormatError", "read_edge_list", "read_ogb_node_dataset", "read_dgl_binary", "progress_bar"]

PathLike = Union[str, os.PathLike]

# Bigger inputs get a progress bar when ``progress=None``.
_PROGRESS_MIN_BYTES = 64 << 20
# ',' and tab become spaces, '%' becomes '#' (one comment char for pandas), '\r' (CRLF files) a space.
_TRANSLATE = bytes.maketrans(b",\t%\r", b"  # ")


def progress_bar(progress: Optional[bool], *, total: Optional[float], desc: str, large: bool, unit: str = "it",
                 unit_scale: bool = False):
    """A ``tqdm.auto`` bar; ``progress=None`` shows it only for ``large`` inputs (and never when the
    ``TQDM_DISABLE`` environment variable is set, as in CI), ``False`` never."""
    import os

    from tqdm.auto import tqdm

    if progress is None and os.environ.get("TQDM_DISABLE", "").lower() in ("1", "true", "yes"):
        progress = False
    disable = not (large if progress is None else progress)
    from workbench._format import console

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale, disable=disable, leave=False,
                file=console(sys.stderr))


# --------------------------------------------------------------------------------------------------------
# Edge-list text
# --------------------------------------------------------------------------------------------------------


def line_blocks(stream: Any, chunk_bytes: int, owner: str, path: Path):
    """Blocks of whole lines read from ``stream`` about ``chunk_bytes`` at a time (the last block may lack its
    final newline); a truncated or corrupt ``.gz`` is one :class:`DataFormatError` naming ``path``."""
    carry = b""
    while True:
        try:
            block = stream.read(chunk_bytes)
        except (OSError, EOFError, zlib.error) as exc:   # a truncated or corrupt .gz
            raise DataFormatError(owner, path, "a complete gzip file", f"{type(exc).__name__}: {exc}") from None
        data = carry + block
        if block:
            cut = data.rfind(b"\n")
            if cut < 0:  # no complete line yet
                carry = data
                continue
            data, carry = data[:cut + 1], data[cut + 1:]
        if data:
            yield data
        if not block:
            return


def read_edge_list(path: PathLike, *, num_nodes: Optional[int] = None, directed: bool = True,
                   chunk_bytes: int = 4 << 20, progress: Optional[bool] = None, name: Optional[str] = None) -> Graph:
    """Read an edge-list text file (``.gz`` allowed) into a :class:`Graph`.

    One edge ``src dst`` per line, separated by spaces, tabs or a comma; lines starting with ``#`` or
    ``%`` are comments (``#``/``%`` later on a line start a comment too), blank lines are skipped.
    A third column (an edge weight) is ignored with a warning. Ids are non-negative integers.

    Args:
        path: the file.
        num_nodes: number of vertices; default max id + 1. Ids must be smaller.
        directed: ``False`` reads each line as an undirected edge and stores both directions.
        chunk_bytes: bytes parsed at a time (memory for the text stays below about twice this).
        progress: show a progress bar (``None``: only for files over 64 MiB).
        name: graph name (default: the file name).

    Returns:
        The graph, edges in file order within each destination; not cleaned (see
        :func:`workbench.data.cleaning.clean_graph`).

    Raises:
        DataFormatError: empty file, wrong column count, non-integer, negative or too large id
            (the message names file, line and field).

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "g.csv"
        >>> _ = p.write_text("% comment\\n0,1\\n1,2\\n")
        >>> read_edge_list(p, num_nodes=5).num_nodes
        5
    """
    import pandas as pd

    path = Path(path)
    owner = "read_edge_list"
    if num_nodes is not None and (not isinstance(num_nodes, (int, np.integer)) or isinstance(num_nodes, bool)
                                  or not 0 <= num_nodes <= MAX_NODES):
        raise ParamError([param_error("num_nodes", owner, f"an int in [0, {MAX_NODES}] or None", num_nodes)])
    if not isinstance(chunk_bytes, int) or chunk_bytes < 1:
        raise ParamError([param_error("chunk_bytes", owner, "a positive int", chunk_bytes)])
    if not path.is_file():
        raise ParamError([param_error("path", owner, "an existing file", str(path))])
    state = _EdgeListState(path=path, num_nodes=num_nodes)
    size = path.stat().st_size
    with open(path, "rb") as raw, progress_bar(progress, total=size, desc=f"reading {path.name}",
                                               large=size >= _PROGRESS_MIN_BYTES, unit="B", unit_scale=True) as bar:
        stream = gzip.GzipFile(fileobj=raw) if path.suffix == ".gz" else raw
        for data in line_blocks(stream, chunk_bytes, owner, path):
            _parse_block(pd, data, state)
            bar.update(raw.tell() - bar.n)
        bar.update(raw.tell() - bar.n)
    if not state.src:
        raise DataFormatError(owner, path, "a file with at least one edge", "no edges")
    if state.num_cols == 3:
        warnings.warn(f"{path.name}: the third column (edge weights) is ignored.", stacklevel=2)
    src = torch.from_numpy(np.concatenate(state.src))
    dst = torch.from_numpy(np.concatenate(state.dst))
    if num_nodes is None:
        num_nodes = int(max(src.max(), dst.max())) + 1
        try:   # refused before the (num_nodes + 1) row pointers are allocated
            check_inferred_num_nodes(num_nodes, src.numel(), owner, path)
        except DataFormatError:
            line = _line_of_id(path, num_nodes - 1)
            raise DataFormatError(owner, path, f"vertex ids below {min(MAX_NODES, 64 * src.numel() + (1 << 20)):,} "
                                               f"(64 x edges + 2^20; relabel sparse ids or pass num_nodes)",
                                  num_nodes - 1, line=line) from None
    if not directed:
        from workbench.data.cleaning import symmetrize

        src, dst = symmetrize(src, dst, num_nodes, dedupe=False)
    return Graph.from_edges(src, dst, num_nodes=num_nodes, directed=directed, name=name or path.name)


def _line_of_id(path: Path, vertex: int) -> Optional[int]:
    """The first line holding ``vertex`` (error path only; plain text files)."""
    if path.suffix == ".gz":
        return None
    token = str(vertex).encode()
    with open(path, "rb") as f:
        for i, raw_line in enumerate(f, 1):
            if token in raw_line.translate(_TRANSLATE).split():
                return i
    return None


_INDENTED_COMMENT = re.compile(rb"(?m)^ +#")


class _EdgeListState:
    def __init__(self, path: Path, num_nodes: Optional[int]):
        self.path, self.num_nodes = path, num_nodes
        self.num_cols: Optional[int] = None
        self.line = 1  # file line number of the first line of the next block
        self.src: list[np.ndarray] = []
        self.dst: list[np.ndarray] = []


def _parse_block(pd, data: bytes, st: _EdgeListState) -> None:
    text = data.translate(_TRANSLATE)
    if b" #" in text:   # a comment after leading blanks is a comment line (pandas would read a row of NaN)
        text = _INDENTED_COMMENT.sub(b"#", text)
    first_line = st.line
    st.line += data.count(b"\n")
    try:
        df = pd.read_csv(io.BytesIO(text), sep=r"\s+", header=None, comment="#", engine="c",
                         dtype={0: np.int64, 1: np.int64})
    except pd.errors.EmptyDataError:
        return  # only comments and blank lines
    except (ValueError, OverflowError, pd.errors.ParserError) as exc:
        _diagnose_block(text, first_line, st, cause=exc)
    ncols = df.shape[1]
    if st.num_cols is None and ncols in (2, 3):
        st.num_cols = ncols
    if ncols != st.num_cols or (ncols == 3 and bool(df[2].isna().any())):
        _diagnose_block(text, first_line, st)
    s, d = df[0].to_numpy(np.int64), df[1].to_numpy(np.int64)
    lo = min(int(s.min()), int(d.min()))
    hi = max(int(s.max()), int(d.max()))
    if lo < 0 or (st.num_nodes is not None and hi >= st.num_nodes):
        _diagnose_block(text, first_line, st)
    st.src.append(s)
    st.dst.append(d)


def _diagnose_block(text: bytes, first_line: int, st: _EdgeListState, cause: Optional[Exception] = None) -> None:
    """Find and raise the first problem in a block that failed the vectorised checks (error path only)."""
    owner = "read_edge_list"
    for offset, raw_line in enumerate(text.split(b"\n")):
        fields = raw_line.split(b"#", 1)[0].split()
        if not fields:
            continue
        line = first_line + offset
        if st.num_cols is None:
            if len(fields) not in (2, 3):
                raise DataFormatError(owner, st.path, "2 columns 'src dst' (or 3 with a weight)",
                                      raw_line.decode(errors="replace").strip(), line=line,
                                      field=f"{len(fields)} fields")
            st.num_cols = len(fields)
        if len(fields) != st.num_cols:
            raise DataFormatError(owner, st.path, f"{st.num_cols} columns on every line, as on the first edge line",
                                  raw_line.decode(errors="replace").strip(), line=line, field=f"{len(fields)} fields")
        for col, label in ((0, "field 1 (src)"), (1, "field 2 (dst)")):
            tok = fields[col].decode(errors="replace")
            try:
                v = int(tok)
            except ValueError:
                raise DataFormatError(owner, st.path, "an integer vertex id", tok, line=line, field=label) from None
            if v < 0:
                raise DataFormatError(owner, st.path, "a non-negative vertex id", v, line=line, field=label)
            if st.num_nodes is not None and v >= st.num_nodes:
                raise DataFormatError(owner, st.path, f"a vertex id below num_nodes={st.num_nodes}", v,
                                      line=line, field=label)
            if v >= 2 ** 63:
                raise DataFormatError(owner, st.path, "a vertex id that fits in int64", v, line=line, field=label)
    raise DataFormatError(owner, st.path, "a well-formed edge list", str(cause or "a block that failed parsing"),
                          line=first_line) from cause


# --------------------------------------------------------------------------------------------------------
# OGB node-property-prediction directory
# --------------------------------------------------------------------------------------------------------


def read_ogb_node_dataset(root: PathLike, *, split: str = "auto", symmetrize: bool = True,
                          chunk_rows: int = 1_000_000, progress: Optional[bool] = None,
                          name: Optional[str] = None) -> Graph:
    """Read an OGB node-property-prediction dataset directory as downloaded (``ogbn-arxiv``, ``ogbn-products``).

    Layout (all CSV files gzip-compressed, no header)::

        root/
          raw/edge.csv.gz            one edge "src,dst" per line (required)
          raw/num-node-list.csv.gz   one line: the number of nodes (optional; else feature/label rows)
          raw/node-feat.csv.gz       one row of F floats per node (optional)
          raw/node-label.csv.gz      one label per node; empty or NaN = unlabelled (optional)
          split/<scheme>/train.csv.gz, valid.csv.gz, test.csv.gz   one node id per line (optional)

    Args:
        root: the dataset directory.
        split: the split scheme folder under ``split/``; ``"auto"`` takes the only one there (none: no masks).
        symmetrize: add reverse edges (OGB stores ``products`` edges once and ``arxiv`` as directed citations);
            the graph is then undirected.
        chunk_rows: CSV rows parsed at a time.
        progress: show progress bars (``None``: only for large files).
        name: graph name (default: the directory name).

    Raises:
        DataFormatError: a missing required file, non-integer or out-of-range ids, a feature or label file
            whose row count differs from the number of nodes, NaN features (naming file, line and column).

    Example:
        >>> g = read_ogb_node_dataset("dataset/ogbn_arxiv")  # doctest: +SKIP
    """
    import pandas as pd

    root = Path(root)
    owner = "read_ogb_node_dataset"
    raw = root / "raw"
    edge_file = raw / "edge.csv.gz"
    if not edge_file.is_file():
        raise DataFormatError(owner, edge_file, "an OGB dataset directory with raw/edge.csv.gz", "missing file",
                              param="root")
    split_dir = _pick_split(root, split, owner)

    edges = _read_csv_ints(pd, edge_file, owner, chunk_rows, progress, num_cols=2)
    num_nodes = None
    num_file = raw / "num-node-list.csv.gz"
    if num_file.is_file():
        nums = _read_csv_ints(pd, num_file, owner, chunk_rows, False, num_cols=1)
        num_nodes = int(nums[:, 0].sum())
        check_num_nodes(num_nodes, owner, num_file)
    feat_file, label_file = raw / "node-feat.csv.gz", raw / "node-label.csv.gz"
    features = _read_features(pd, feat_file, owner, chunk_rows, progress) if feat_file.is_file() else None
    labels = _read_labels(pd, label_file, owner, chunk_rows) if label_file.is_file() else None
    if num_nodes is None:
        for arr in (features, labels):
            if arr is not None:
                num_nodes = arr.shape[0]
                break
    if num_nodes is None:
        num_nodes = int(edges.max()) + 1 if edges.size else 0
        check_inferred_num_nodes(num_nodes, edges.shape[0], owner, edge_file)
    for arr, f in ((features, feat_file), (labels, label_file)):
        if arr is not None and arr.shape[0] != num_nodes:
            raise DataFormatError(owner, f, f"one row per node (num_nodes={num_nodes})", f"{arr.shape[0]} rows",
                                  param="root")
    if edges.size:
        bad = np.flatnonzero((edges >= num_nodes).any(axis=1) | (edges < 0).any(axis=1))
        if bad.size:
            row = int(bad[0])
            raise DataFormatError(owner, edge_file, f"vertex ids in [0, num_nodes={num_nodes})",
                                  edges[row].tolist(), line=row + 1, param="root")
    node_data: dict[str, Any] = {}
    if features is not None:
        node_data["features"] = torch.from_numpy(features)
    if labels is not None:
        node_data["labels"] = torch.from_numpy(labels)
    if split_dir is not None:
        for part, mask_name in (("train", "train_mask"), ("valid", "val_mask"), ("test", "test_mask")):
            f = split_dir / f"{part}.csv.gz"
            if not f.is_file():
                raise DataFormatError(owner, f, f"split {split_dir.name!r} with train, valid and test files",
                                      "missing file", param="root")
            ids = _read_csv_ints(pd, f, owner, chunk_rows, False, num_cols=1)[:, 0]
            bad = np.flatnonzero((ids < 0) | (ids >= num_nodes))
            if bad.size:
                raise DataFormatError(owner, f, f"node ids in [0, num_nodes={num_nodes})", int(ids[bad[0]]),
                                      line=int(bad[0]) + 1, param="root")
            mask = torch.zeros(num_nodes, dtype=torch.bool)
            mask[torch.from_numpy(ids)] = True
            node_data[mask_name] = mask
    src, dst = torch.from_numpy(edges[:, 0].copy()), torch.from_numpy(edges[:, 1].copy())
    if symmetrize:
        from workbench.data.cleaning import symmetrize as _sym

        src, dst = _sym(src, dst, num_nodes, dedupe=False)
    return Graph.from_edges(src, dst, num_nodes=num_nodes, directed=not symmetrize,
                            name=name or root.name, **node_data)


def _pick_split(root: Path, split: str, owner: str) -> Optional[Path]:
    split_root = root / "split"
    schemes = sorted(p.name for p in split_root.iterdir() if p.is_dir()) if split_root.is_dir() else []
    if split == "auto":
        if not schemes:
            return None
        if len(schemes) > 1:
            raise ParamError([param_error("split", owner, f"one of {schemes} (the dataset has several)", split)])
        return split_root / schemes[0]
    if split not in schemes:
        raise ParamError([param_error("split", owner, f"'auto' or one of {schemes}", split)])
    return split_root / split


def _csv_chunks(pd, path: Path, chunk_rows: int, progress: Optional[bool], **kw):
    """Yield ``(first_line, DataFrame)`` chunks of a header-less CSV, with an optional byte progress bar."""
    size = path.stat().st_size
    with open(path, "rb") as raw, progress_bar(progress, total=size, desc=f"reading {path.name}",
                                               large=size >= _PROGRESS_MIN_BYTES // 4, unit="B",
                                               unit_scale=True) as bar:
        line = 1
        try:
            reader = pd.read_csv(raw, header=None, chunksize=chunk_rows, compression="gzip"
                                 if path.suffix == ".gz" else None, skip_blank_lines=False, **kw)
            for chunk in reader:
                yield line, chunk
                line += len(chunk)
                bar.update(raw.tell() - bar.n)
        except pd.errors.EmptyDataError:
            return
        except (pd.errors.ParserError, OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
            raise DataFormatError("read_ogb_node_dataset", path, "a well-formed gzip CSV file",
                                  f"{type(exc).__name__}: {str(exc)[:160]}", param="root") from None


def _read_csv_ints(pd, path: Path, owner: str, chunk_rows: int, progress: Optional[bool], num_cols: int) -> np.ndarray:
    parts = []
    for line, df in _csv_chunks(pd, path, chunk_rows, progress):
        if df.shape[1] != num_cols:
            raise DataFormatError(owner, path, f"{num_cols} comma-separated columns", f"{df.shape[1]} columns",
                                  line=line, param="root")
        if not all(pd.api.types.is_integer_dtype(t) for t in df.dtypes):
            _raise_bad_cell(pd, df, path, owner, line, "an integer id")
        parts.append(df.to_numpy(np.int64))
    if not parts:
        raise DataFormatError(owner, path, "a non-empty file", "empty file", param="root")
    return np.concatenate(parts)


def _raise_bad_cell(pd, df, path: Path, owner: str, first_line: int, constraint: str, floats: bool = False) -> None:
    for col in df.columns:
        num = pd.to_numeric(df[col], errors="coerce")
        bad = num.isna().to_numpy().copy()
        if not floats:
            vals = num.to_numpy(np.float64, na_value=np.nan)
            bad |= np.isfinite(vals) & (vals != np.round(vals))
        idx = np.flatnonzero(bad)
        if idx.size:
            r = int(idx[0])
            raise DataFormatError(owner, path, constraint, df.iloc[r, col] if not pd.isna(df.iloc[r, col]) else "",
                                  line=first_line + r, field=f"column {int(col) + 1}", param="root")
    raise DataFormatError(owner, path, constraint, "an unparsable value", line=first_line, param="root")


def _read_features(pd, path: Path, owner: str, chunk_rows: int, progress: Optional[bool]) -> np.ndarray:
    parts = []
    width = None
    for line, df in _csv_chunks(pd, path, chunk_rows, progress):
        if width is None:
            width = df.shape[1]
        if df.shape[1] != width:
            raise DataFormatError(owner, path, f"{width} feature columns on every row", f"{df.shape[1]} columns",
                                  line=line, param="root")
        if not all(pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t) for t in df.dtypes):
            _raise_bad_cell(pd, df, path, owner, line, "a number", floats=True)
        arr = df.to_numpy(np.float32)
        nan = np.isnan(arr)
        if nan.any():
            r, c = np.argwhere(nan)[0]
            raise DataFormatError(owner, path, "a finite feature value (no NaN)", "NaN", line=line + int(r),
                                  field=f"column {int(c) + 1}", param="root")
        parts.append(arr)
    if not parts:
        raise DataFormatError(owner, path, "a non-empty file", "empty file", param="root")
    return np.ascontiguousarray(np.concatenate(parts))


def _read_labels(pd, path: Path, owner: str, chunk_rows: int) -> np.ndarray:
    parts = []
    for line, df in _csv_chunks(pd, path, chunk_rows, False):
        if df.shape[1] != 1:
            raise DataFormatError(owner, path, "one label column", f"{df.shape[1]} columns", line=line, param="root")
        vals = pd.to_numeric(df[0], errors="coerce").to_numpy(np.float64, na_value=np.nan)
        raw_missing = df[0].isna().to_numpy()
        bad = (np.isnan(vals) & ~raw_missing) | (np.isfinite(vals) & ((vals != np.round(vals)) | (vals < -1)))
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise DataFormatError(owner, path, "an integer class label >= 0 (empty or NaN = unlabelled)",
                                  df.iloc[r, 0], line=line + r, param="root")
        parts.append(np.where(np.isnan(vals), -1, vals).astype(np.int64))
    if not parts:
        raise DataFormatError(owner, path, "a non-empty file", "empty file", param="root")
    return np.concatenate(parts)


# --------------------------------------------------------------------------------------------------------
# DGL binary
# --------------------------------------------------------------------------------------------------------


def read_dgl_binary(path: PathLike, *, index: int = 0, name: Optional[str] = None) -> Graph:
    """Read graph ``index`` of a file written by ``dgl.save_graphs`` (needs DGL).

    Node data ``feat``/``label``/``train_mask``/``val_mask``/``test_mask`` are carried (see
    :func:`workbench.interop.from_dgl`).

    Example:
        >>> g = read_dgl_binary("graph.bin")  # doctest: +SKIP
    """
    path = Path(path)
    owner = "read_dgl_binary"
    if not path.is_file():
        raise ParamError([param_error("path", owner, "an existing file", str(path))])
    import dgl

    from workbench.interop import from_dgl

    try:
        graphs, _ = dgl.load_graphs(str(path))
    except Exception as exc:  # DGL raises bare DGLError/RuntimeError on a malformed file
        first = str(exc).split("Stack trace")[0].strip().splitlines()
        raise DataFormatError(owner, path, "a file written by dgl.save_graphs",
                              f"{type(exc).__name__}: {(first[0] if first else '')[:200]}") from None
    if not 0 <= index < len(graphs):
        raise ParamError([param_error("index", owner, f"an int in [0, {len(graphs) - 1}] (graphs in {path.name})",
                                      index)])
    return from_dgl(graphs[index], name=name or path.stem)
