"""Binary edge files: raw int32/int64 pairs (``.bin``) and ``(E, 2)`` ``.npy`` arrays, read by memory map in chunks
and written chunk by chunk.

A ``.bin`` edge file is the pairs ``u0 v0 u1 v1 ...`` as little-endian int32 or int64 and nothing else; its dtype
comes from a flag (``dtype=``, ``--edge-dtype``) or from the JSON sidecar beside it, ``FILE.bin.json``::

    {"format": "workbench-edges", "dtype": "int32", "num_lines": 1000000, "num_nodes": 70000, "directed": false, ...}

(:class:`EdgeFileWriter` writes it, also beside a ``.npy``, where it is optional: the header has the dtype and the
line count; ``num_nodes`` counts vertices with no line too). A ``.bin`` with neither a flag nor a sidecar is not
an edge file here: :func:`workbench.data.load_graph` reads a plain ``.bin`` as DGL's ``save_graphs`` format.

Reading (:func:`binary_chunks`) maps one window of ``chunk_edges`` lines at a time and unmaps it before the next,
so the file's pages count in the reader's resident memory for one chunk at most, whatever the file's size.
Writing appends each chunk with plain writes (a dirty mapped page would count as resident until unmapped); a
``.npy`` header is written first with room for any line count and rewritten with the final count on close.

Example:
    >>> import tempfile, pathlib, numpy as np
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "g.bin"
    >>> with EdgeFileWriter(p, "int32", num_nodes=4) as w:
    ...     w.write(np.array([0, 1]), np.array([1, 2]))
    ...     w.write(np.array([2]), np.array([3]))
    >>> info = edge_file_info(p)
    >>> info.dtype.name, info.num_lines, info.num_nodes
    ('int32', 3, 4)
    >>> [c.tolist() for c in binary_chunks(info, 2)]
    [[[0, 1], [1, 2]], [[2, 3]]]
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np

from workbench._validation import ParamError, param_error

__all__ = ["EDGE_DTYPES", "EdgeFileInfo", "EdgeFileWriter", "edge_file_info", "binary_chunks", "sidecar_path",
           "is_binary_edge_file", "read_sidecar", "write_npy_header", "NpyRowWriter"]

EDGE_DTYPES = ("int32", "int64")
"""The id types of a binary edge file."""

SIDECAR_FORMAT = "workbench-edges"


def sidecar_path(path: str | os.PathLike) -> Path:
    """``FILE.json`` beside ``FILE`` (``g.bin`` -> ``g.bin.json``)."""
    path = Path(path)
    return path.with_name(path.name + ".json")


def read_sidecar(path: str | os.PathLike, owner: str = "edge_file_info") -> Optional[dict]:
    """The sidecar of an edge file as a dict, or ``None`` when there is none."""
    side = sidecar_path(path)
    if not side.is_file():
        return None
    try:
        meta = json.loads(side.read_text())
    except (OSError, ValueError) as exc:
        raise ParamError([param_error("path", owner, f"an edge file whose sidecar {side.name} is JSON",
                                      f"{type(exc).__name__}: {exc}")]) from None
    if not isinstance(meta, dict) or meta.get("format") != SIDECAR_FORMAT:
        raise ParamError([param_error("path", owner, f"an edge file whose sidecar {side.name} is a "
                                                     f"{SIDECAR_FORMAT!r} JSON object", str(side))])
    return meta


def is_binary_edge_file(path: str | os.PathLike, dtype: Optional[str] = None) -> bool:
    """Whether ``path`` is read as a binary edge file: a ``.npy``, or a ``.bin`` with a ``dtype`` or a sidecar."""
    path = Path(path)
    if path.suffix == ".npy":
        return True
    return path.suffix == ".bin" and (dtype is not None or sidecar_path(path).is_file())


@dataclasses.dataclass(frozen=True)
class EdgeFileInfo:
    """Where the pairs of a binary edge file are: ``num_lines`` rows of two ``dtype`` ids from byte ``offset``."""

    path: Path
    dtype: np.dtype
    offset: int
    num_lines: int
    num_nodes: Optional[int] = None
    """The vertex count the sidecar records (ids below it; ``None`` without a sidecar)."""
    directed: Optional[bool] = None
    meta: Optional[dict] = None
    """The whole sidecar."""


def _npy_header(path: Path, owner: str) -> tuple[tuple, np.dtype, bool, int]:
    with open(path, "rb") as f:
        try:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read(f)
        except Exception as exc:   # numpy raises ValueError/EOFError/SyntaxError on a bad header
            raise ParamError([param_error("path", owner, "a .npy array (numpy.save)",
                                          f"{path}: unreadable header ({exc})")]) from None
        return shape, dtype, fortran, f.tell()


def edge_file_info(path: str | os.PathLike, dtype: Optional[str] = None, *,
                   owner: str = "edge_file_info") -> EdgeFileInfo:
    """Check a binary edge file and say where its pairs are.

    Args:
        path: a ``.bin`` (dtype from ``dtype`` or the sidecar) or an ``(E, 2)`` integer ``.npy``.
        dtype: ``'int32'`` or ``'int64'``; for a ``.npy`` it must agree with the header when given.
        owner: the name in error messages.

    Raises:
        ParamError: a missing file, an unknown dtype, a ``.bin`` without dtype or sidecar, a size that is no
            whole number of pairs, a ``.npy`` that is not a C-order integer ``(E, 2)`` array or is truncated.
    """
    path = Path(path)
    errors = []
    if not path.is_file():
        errors.append(param_error("path", owner, "an existing edge file", str(path)))
    if dtype is not None and dtype not in EDGE_DTYPES:
        errors.append(param_error("dtype", owner, f"one of {list(EDGE_DTYPES)} or None", dtype))
    if errors:
        raise ParamError(errors)
    meta = read_sidecar(path, owner)
    size = path.stat().st_size
    if path.suffix == ".npy":
        shape, got, fortran, offset = _npy_header(path, owner)
        if len(shape) != 2 or shape[1] != 2 or fortran or got.kind not in "iu":
            raise ParamError([param_error("path", owner, "a C-order integer .npy array of shape (E, 2)",
                                          f"{path.name}: shape {shape}, dtype {got}")])
        if dtype is not None and np.dtype(dtype) != got:
            raise ParamError([param_error("dtype", owner, f"the .npy header's dtype {got.name} (or None)", dtype)])
        need = offset + shape[0] * 2 * got.itemsize
        if size < need:
            raise ParamError([param_error("path", owner, f"a complete .npy file of {shape[0]:,} lines "
                                                         f"({need:,} bytes)", f"{path.name}: {size:,} bytes")])
        dt, num_lines = got, int(shape[0])   # the header's byte order
    else:
        name = dtype if dtype is not None else (meta or {}).get("dtype")
        if name is None:
            raise ParamError([param_error("dtype", owner, f"one of {list(EDGE_DTYPES)} for the raw edge file "
                                                          f"{path.name} (or a sidecar {sidecar_path(path).name} "
                                                          "naming it)", None)])
        if name not in EDGE_DTYPES:
            raise ParamError([param_error("dtype", owner, f"one of {list(EDGE_DTYPES)} (sidecar "
                                                          f"{sidecar_path(path).name})", name)])
        if meta is not None and dtype is not None and meta.get("dtype") not in (None, dtype):
            raise ParamError([param_error("dtype", owner, f"the sidecar's dtype {meta.get('dtype')!r} (or None)",
                                          dtype)])
        dt, offset = np.dtype(name).newbyteorder("<"), 0
        if size % (2 * dt.itemsize):
            raise ParamError([param_error("path", owner, f"a whole number of {name} pairs "
                                                         f"({2 * dt.itemsize} bytes each)",
                                          f"{path.name}: {size:,} bytes")])
        num_lines = size // (2 * dt.itemsize)
    num_nodes = None if meta is None or meta.get("num_nodes") is None else int(meta["num_nodes"])
    directed = None if meta is None or meta.get("directed") is None else bool(meta["directed"])
    return EdgeFileInfo(path=path, dtype=np.dtype(dt), offset=offset, num_lines=num_lines,
                        num_nodes=num_nodes, directed=directed, meta=meta)


def binary_chunks(info: EdgeFileInfo, chunk_edges: int) -> Iterator[np.ndarray]:
    """The pairs of a binary edge file as ``(n, 2)`` arrays of at most ``chunk_edges`` rows, each a view of a
    memory map of that window alone, unmapped once the next is asked for (copy what you keep)."""
    width = 2 * info.dtype.itemsize
    for lo in range(0, info.num_lines, chunk_edges):
        n = min(chunk_edges, info.num_lines - lo)
        window = np.memmap(info.path, dtype=info.dtype, mode="r", offset=info.offset + lo * width, shape=(n, 2))
        yield window
        del window


# ------------------------------------------------------------------------------------------- writing

def write_npy_header(f, dtype: np.dtype, shape: tuple) -> int:
    """Write a version 1.0 ``.npy`` header of 128 bytes (room for any shape of up to two 20-digit sizes, so it
    can be rewritten in place once the row count is known); returns its length."""
    d = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": tuple(shape)}
    text = repr(d).encode("latin1")
    head = np.lib.format.MAGIC_PREFIX + bytes([1, 0])
    total = 128
    pad = total - len(head) - 2 - len(text) - 1
    assert pad >= 0, "shape too long for a 128-byte header"
    f.write(head + (len(text) + pad + 1).to_bytes(2, "little") + text + b" " * pad + b"\n")
    return total


class NpyRowWriter:
    """A ``.npy`` file written row block by row block with plain writes; the row count is set on :meth:`close`.

    Example:
        >>> import tempfile, pathlib, numpy as np
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.npy"
        >>> w = NpyRowWriter(p, np.float32, (2,))
        >>> w.write(np.ones((3, 2)))
        >>> np.load(w.close()).shape
        (3, 2)
    """

    def __init__(self, path: str | os.PathLike, dtype: Any, row_shape: tuple = ()):
        self.path, self.dtype, self.row_shape = Path(path), np.dtype(dtype), tuple(row_shape)
        self.rows = 0
        self._f = open(self.path, "wb")
        write_npy_header(self._f, self.dtype, (0,) + self.row_shape)

    def write(self, block: np.ndarray) -> None:
        block = np.ascontiguousarray(block, dtype=self.dtype)
        if block.shape[1:] != self.row_shape:
            raise ValueError(f"rows of shape {self.row_shape} expected, got {block.shape[1:]}")
        block.tofile(self._f)
        self.rows += block.shape[0]

    def close(self) -> Path:
        if self._f is not None:
            self._f.seek(0)
            write_npy_header(self._f, self.dtype, (self.rows,) + self.row_shape)
            self._f.close()
            self._f = None
        return self.path

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class EdgeFileWriter:
    """Write an edge file chunk by chunk: ``.bin`` (raw pairs plus the sidecar), ``.npy`` (``(E, 2)``, sidecar
    beside) or any other suffix as text (``u v`` lines).

    Args:
        path: the file.
        dtype: ``'int32'`` or ``'int64'`` (binary files).
        num_nodes: the vertex count for the sidecar (``None``: the largest id + 1).
        directed: recorded in the sidecar.
        meta: more sidecar entries (e.g. the generator's spec and the node-data files).

    Raises:
        ParamError: an unknown dtype, ids that do not fit it.
    """

    def __init__(self, path: str | os.PathLike, dtype: str = "int32", *, num_nodes: Optional[int] = None,
                 directed: bool = False, meta: Optional[dict] = None):
        if dtype not in EDGE_DTYPES:
            raise ParamError([param_error("dtype", "EdgeFileWriter", f"one of {list(EDGE_DTYPES)}", dtype)])
        self.path, self.dtype = Path(path), np.dtype(dtype).newbyteorder("<")
        self.num_nodes, self.directed, self.meta = num_nodes, directed, dict(meta or {})
        self.kind = "bin" if self.path.suffix == ".bin" else "npy" if self.path.suffix == ".npy" else "text"
        self.num_lines, self.max_id = 0, -1
        self._f = open(self.path, "wb" if self.kind != "text" else "w")
        self._buf = np.empty((0, 2), self.dtype)
        if self.kind == "npy":
            write_npy_header(self._f, self.dtype, (0, 2))

    def write(self, src: np.ndarray, dst: np.ndarray) -> None:
        n = int(src.shape[0])
        if n == 0:
            return
        hi = int(max(src.max(), dst.max()))
        if hi > np.iinfo(self.dtype).max:
            raise ParamError([param_error("dtype", "EdgeFileWriter", f"int64 for ids up to {hi:,}", self.dtype.name)])
        self.max_id = max(self.max_id, hi)
        if self.kind == "text":
            import pandas as pd

            pd.DataFrame({"u": src, "v": dst}).to_csv(self._f, sep=" ", header=False, index=False)
        else:
            if self._buf.shape[0] < n:
                self._buf = np.empty((n, 2), self.dtype)
            block = self._buf[:n]
            block[:, 0] = src
            block[:, 1] = dst
            block.tofile(self._f)
        self.num_lines += n

    def close(self) -> Path:
        """Finish the file (and its sidecar); returns the path."""
        if self._f is None:
            return self.path
        if self.kind == "npy":
            self._f.seek(0)
            write_npy_header(self._f, self.dtype, (self.num_lines, 2))
        self._f.close()
        self._f = None
        if self.kind != "text":
            num_nodes = self.num_nodes if self.num_nodes is not None else self.max_id + 1
            side = {"format": SIDECAR_FORMAT, "dtype": self.dtype.name, "num_lines": self.num_lines,
                    "num_nodes": int(num_nodes), "directed": bool(self.directed), **self.meta}
            sidecar_path(self.path).write_text(json.dumps(side, indent=2) + "\n")
        return self.path

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
