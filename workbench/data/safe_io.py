"""Reading arrays from untrusted files: ``.npy``/``.npz`` checked before any allocation, JSON with a size
check, and Python pickles through an unpickler that can build nothing but plain data.

Every function raises :class:`~workbench.data.errors.DataFormatError` naming the file and what is wrong,
whatever the bytes are (truncated, random, a crafted pickle, a header claiming 10^12 rows): never a
bare ``ValueError``/``EOFError``/``UnpicklingError``, and never code run from the file.

* ``.npy``: the header is parsed first; an object dtype, or a shape whose byte size differs from the bytes
  the file holds, is refused before the array is allocated; then ``np.load(..., allow_pickle=False)``.
* ``.npz``: the same check per member against the member's uncompressed size in the zip directory (and
  against the compressed size times deflate's largest ratio, so a crafted directory cannot claim more).
* pickles (Planetoid's ``ind.*`` files): :class:`RestrictedUnpickler` resolves only the few names those
  files reference (numpy arrays and dtypes, scipy sparse matrices, ``collections.defaultdict``,
  ``dict``, ``list``, ``int``) and builds arrays and matrices empty, filled only from the pickle's own
  bytes; any other name is refused with the file named. ``pickle.load`` is never called.

Example:
    >>> import tempfile, pathlib, numpy as np
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.npy"
    >>> np.save(p, np.arange(3))
    >>> read_npy(p, "example").tolist()
    [0, 1, 2]
    >>> _ = p.write_bytes(p.read_bytes()[:-4])   # truncated
    >>> read_npy(p, "example")
    Traceback (most recent call last):
    ...
    workbench.data.errors.DataFormatError: The 'path' parameter of example must be a complete .npy file ...
"""

from __future__ import annotations

import importlib
import io
import json
import pickle
import threading
import zipfile
from pathlib import Path
from typing import Any, Optional

import numpy as np

from workbench.data.errors import DataFormatError

# numpy 2 renamed numpy.core to numpy._core (numpy.core is a deprecated alias there); numpy 1.26 has a numpy._core
# stub for pickles, without these modules' contents, so the choice goes by version, not by what imports
_NP_CORE = "numpy._core" if int(np.__version__.split(".")[0]) >= 2 else "numpy.core"
_np_multiarray = importlib.import_module(f"{_NP_CORE}.multiarray")
_np_numeric = importlib.import_module(f"{_NP_CORE}.numeric")

__all__ = ["MAX_NODES", "open_npy", "read_npy", "read_npz", "read_json", "read_pickle", "RestrictedUnpickler",
           "check_num_nodes", "check_inferred_num_nodes"]

#: numpy parses every ``.npy`` header with ``ast.literal_eval``, and CPython 3.11 before 3.11.8 can fail two
#: ``ast.parse`` calls in two threads at once ("SystemError: AST constructor recursion depth mismatch", CPython
#: gh-106905): thread ranks opening their parts together hit it. Every header in this package is read under it.
NPY_HEADER_LOCK = threading.RLock()


def open_npy(path: Any, mmap_mode: Optional[str] = "r") -> np.ndarray:
    """``np.load(path, mmap_mode=mmap_mode, allow_pickle=False)`` with its header parsed under
    :data:`NPY_HEADER_LOCK` (a memory map reads nothing else, so the lock is held for microseconds).

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.npy"
        >>> np.save(p, np.arange(3))
        >>> open_npy(p).tolist()
        [0, 1, 2]
    """
    with NPY_HEADER_LOCK:
        return np.load(path, mmap_mode=mmap_mode, allow_pickle=False)

MAX_NODES = 2 ** 32
"""Most vertices a file may claim (ogbn-papers100M has 1.1e8); larger claims are refused before allocation."""
_MAX_JSON_BYTES = 4 << 30
_DEFLATE_MAX_RATIO = 1100   # deflate cannot expand data more than ~1032x


def _err(owner: str, path: Any, constraint: str, value: Any, **kw) -> DataFormatError:
    return DataFormatError(owner, path, constraint, value, **kw)


def check_num_nodes(num_nodes: int, owner: str, path: Any) -> None:
    """Refuse a vertex count over :data:`MAX_NODES` (before anything of that size is allocated)."""
    if not 0 <= int(num_nodes) <= MAX_NODES:
        raise _err(owner, path, f"a vertex count in [0, {MAX_NODES}]", int(num_nodes))


def check_inferred_num_nodes(num_nodes: int, num_edges: int, owner: str, path: Any) -> None:
    """Refuse a vertex count taken from the largest id when the ids are far sparser than any real graph's
    (more than ``64 * edges + 2^20`` vertices, almost all isolated): one stray digit must not allocate
    gigabytes. Relabel the ids, or give the vertex count (features, labels, ``num_nodes``)."""
    check_num_nodes(num_nodes, owner, path)
    if num_nodes > 64 * num_edges + (1 << 20):
        raise _err(owner, path, f"vertex ids below 64 x edges + 2^20 = {64 * num_edges + (1 << 20):,} when the "
                                f"vertex count comes from the largest id (relabel sparse ids)", num_nodes - 1)


def _header(fp, owner: str, path: Any) -> tuple[tuple, np.dtype, bool]:
    try:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp)
        else:
            raise ValueError(f"unknown .npy version {version}")
    except Exception as exc:   # numpy raises ValueError/EOFError/SyntaxError on a bad header
        raise _err(owner, path, "a .npy array (numpy.save)", f"unreadable header: {exc}") from None
    if dtype.hasobject:
        raise _err(owner, path, "an array of numbers or booleans (objects are never unpickled)", str(dtype))
    return shape, dtype, fortran


def _check_size(shape: tuple, dtype: np.dtype, available: int, owner: str, path: Any) -> None:
    count = 1
    for s in shape:
        count *= int(s)
    if count * dtype.itemsize != available:
        raise _err(owner, path, f"a complete .npy file (its header claims shape {shape} of {dtype}, "
                                f"{count * dtype.itemsize:,} bytes)", f"{available:,} bytes of data")


def read_npy(path: Any, owner: str) -> np.ndarray:
    """A ``.npy`` array, its header checked against the file size first (``allow_pickle=False``)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with NPY_HEADER_LOCK:
            with open(path, "rb") as fp:
                shape, dtype, _ = _header(fp, owner, path)
                _check_size(shape, dtype, size - fp.tell(), owner, path)
            return np.load(path, allow_pickle=False)
    except OSError as exc:
        raise _err(owner, path, "a readable file", str(exc)) from None
    except ValueError as exc:
        if type(exc).__name__ == "DataFormatError":
            raise
        raise _err(owner, path, "a .npy array (numpy.save)", str(exc)) from None


def read_npz(path: Any, owner: str) -> dict[str, np.ndarray]:
    """Every member of an ``.npz`` file, each header checked against the zip directory first."""
    path = Path(path)
    out: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                with zf.open(info) as fp:
                    shape, dtype, fortran = _header(fp, owner, f"{path}:{info.filename}")
                    header_len = fp.tell()
                    _check_size(shape, dtype, info.file_size - header_len, owner, f"{path}:{info.filename}")
                    if info.compress_type != zipfile.ZIP_STORED and \
                            info.file_size > _DEFLATE_MAX_RATIO * max(info.compress_size, 1):
                        raise _err(owner, f"{path}:{info.filename}", "a plausible compressed size",
                                   f"{info.compress_size:,} bytes claiming {info.file_size:,}")
                    data = fp.read(info.file_size - header_len)
                    if len(data) != info.file_size - header_len:
                        raise _err(owner, f"{path}:{info.filename}", "a complete member", f"{len(data):,} bytes")
                    arr = np.frombuffer(data, dtype=dtype)
                    arr = arr.reshape(shape[::-1]).T if fortran else arr.reshape(shape)
                    name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                    out[name] = arr.copy()
    except (OSError, zipfile.BadZipFile, EOFError, RuntimeError, NotImplementedError) as exc:
        raise _err(owner, path, "a complete .npz file (numpy.savez)", f"{type(exc).__name__}: {exc}") from None
    except ValueError as exc:
        if type(exc).__name__ == "DataFormatError":
            raise
        raise _err(owner, path, "a complete .npz file (numpy.savez)", str(exc)) from None
    return out


def read_json(path: Any, owner: str) -> Any:
    """A JSON document (strict: no NaN or Infinity), refused when larger than 4 GiB."""
    path = Path(path)
    try:
        if path.stat().st_size > _MAX_JSON_BYTES:
            raise _err(owner, path, "a JSON file under 4 GiB", f"{path.stat().st_size:,} bytes")
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"), parse_constant=_no_constant)
    except OSError as exc:
        raise _err(owner, path, "a readable file", str(exc)) from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise _err(owner, path, "a well-formed UTF-8 JSON file", str(exc)[:200]) from None


def _no_constant(name: str):
    raise json.JSONDecodeError(f"{name} is not a JSON value", name, 0)


# --------------------------------------------------------------------------------------------------------
# Restricted unpickling
# --------------------------------------------------------------------------------------------------------


class _Refused(Exception):
    pass


def _safe_reconstruct(subtype, shape, dtype):
    """numpy's ``_reconstruct`` for empty arrays only (the state that fills them comes from the pickle)."""
    if subtype is not np.ndarray or tuple(shape) != (0,):
        raise _Refused(f"numpy _reconstruct({getattr(subtype, '__name__', subtype)!r}, {shape!r})")
    return np.ndarray.__new__(np.ndarray, (0,), dtype)


def _safe_frombuffer(buf, dtype, shape, order):
    """numpy's protocol-5 ``_frombuffer``: an array over bytes that the pickle itself holds."""
    if not isinstance(buf, (bytes, bytearray, pickle.PickleBuffer)) or not isinstance(dtype, np.dtype) \
            or dtype.hasobject:
        raise _Refused("numpy _frombuffer of something other than numeric bytes")
    return _np_numeric._frombuffer(buf, dtype, shape, order)


def _safe_scalar(dtype, data=None):
    data = _raw_bytes(data)
    if not isinstance(dtype, np.dtype) or dtype.hasobject or not isinstance(data, (bytes, type(None))) \
            or (data is not None and len(data) != dtype.itemsize):
        raise _Refused("numpy scalar of a non-numeric dtype")
    return _np_multiarray.scalar(dtype, data) if data is not None else _np_multiarray.scalar(dtype)


def _dtype_from_state(dtype: np.dtype, state: Any) -> np.dtype:
    """The dtype a pickle's BUILD state asks for, when that state only sets the byte order of a plain
    numeric dtype (what numpy writes for one); anything else is refused."""
    if (not isinstance(state, tuple) or len(state) < 8 or dtype.hasobject or dtype.fields is not None
            or dtype.subdtype is not None or any(x is not None for x in state[2:5])
            or state[5] not in (-1, dtype.itemsize) or state[1] not in ("<", ">", "|", "=")):
        raise _Refused("a numpy dtype state other than a plain numeric type's")
    return dtype.newbyteorder(state[1]) if state[1] in ("<", ">") else dtype


def _raw_bytes(raw: Any) -> Any:
    """An array's or scalar's raw data as bytes: Python 2 wrote it as ``BINSTRING``, which the unpickler
    (``encoding="latin1"``) hands over as ``str``; latin-1 maps each of its characters back to one byte.
    Anything else is returned as it is, for the caller to refuse."""
    return raw.encode("latin1") if isinstance(raw, str) else raw


def _check_array_state(state: Any) -> tuple:
    """An ndarray BUILD state: ``(version, shape, dtype, is_fortran, raw bytes)`` of a numeric dtype with
    exactly ``prod(shape) * itemsize`` bytes; returned with a Python 2 ``str`` payload turned into bytes."""
    if not isinstance(state, tuple) or len(state) != 5:
        raise _Refused("a numpy array state of another form")
    version, shape, dtype, fortran, raw = state
    raw = _raw_bytes(raw)
    if (not isinstance(dtype, np.dtype) or dtype.hasobject or not isinstance(shape, tuple)
            or not all(isinstance(n, int) and n >= 0 for n in shape) or not isinstance(raw, (bytes, bytearray))):
        raise _Refused("a numpy array state that is not numeric bytes of a non-negative shape")
    if int(np.prod(shape, dtype=np.int64)) * dtype.itemsize != len(raw):
        raise _Refused(f"a numpy array of shape {shape} with {len(raw)} bytes")
    return version, shape, dtype, fortran, raw


def _latin1_bytes(text, encoding="latin1"):
    """``_codecs.encode`` as Python 3 writes bytes into protocol-2 pickles (str to latin-1 bytes only)."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise _Refused("_codecs.encode of something other than a latin-1 string")
    return text.encode("latin1")


def _safe_copyreg_reconstructor(cls, base, state):
    """``copyreg._reconstructor`` (protocol 0/1 pickles of objects) for the allowed classes only."""
    if base is not object or state is not None or getattr(cls, "_stand_in", False) is not True:
        raise _Refused("copyreg._reconstructor of a class that is not allowed")
    return cls.__new__(cls)


def _empty_only(cls):
    """A stand-in class whose ``__new__`` makes an empty ``cls`` and refuses constructor arguments (a
    crafted REDUCE could otherwise ask scipy for a 10^12 x 10^12 matrix)."""

    def __new__(stand_in, *args, **kwargs):
        if args or kwargs:
            raise _Refused(f"{cls.__name__} called with arguments")
        return cls.__new__(cls)

    return type(cls.__name__, (), {"__new__": __new__, "_stand_in": True})


def _allowed() -> dict[tuple[str, str], Any]:
    import collections
    import scipy.sparse as sp

    table: dict[tuple[str, str], Any] = {
        ("collections", "defaultdict"): collections.defaultdict,
        ("builtins", "dict"): dict, ("builtins", "list"): list, ("builtins", "int"): int,
        ("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): _latin1_bytes, ("builtins", "object"): object,
        ("copyreg", "_reconstructor"): _safe_copyreg_reconstructor,
    }
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
        table[(mod, "_reconstruct")] = _safe_reconstruct
        table[(mod, "scalar")] = _safe_scalar
    for mod in ("numpy.core.numeric", "numpy._core.numeric"):
        table[(mod, "_frombuffer")] = _safe_frombuffer
    for name in ("csr_matrix", "csc_matrix", "coo_matrix"):
        cls = _empty_only(getattr(sp, name))
        short = name.split("_")[0]
        for mod in ("scipy.sparse", f"scipy.sparse.{short}", f"scipy.sparse._{short}"):
            table[(mod, name)] = cls
    return table


class RestrictedUnpickler(pickle._Unpickler):
    """An unpickler that resolves only numpy arrays/dtypes, scipy sparse matrices, ``defaultdict``,
    ``dict``, ``list`` and ``int`` (plus ``_codecs.encode`` of latin-1 text, how Python 3 stores bytes in
    protocol 2); every other global raises ``UnpicklingError`` (no code runs). Arrays and matrices are
    created empty and filled only from the pickle's own bytes.

    The BUILD step of numpy objects is checked before numpy sees it: a dtype's state may only set its
    byte order (numpy's ``dtype.__setstate__`` trusts sizes, fields and sub-arrays, and a damaged state
    crashed the interpreter), and an array's state must be a numeric dtype, a non-negative shape and
    exactly the bytes that shape needs.

    Python 2 pickles (protocol 0-2, as the Planetoid files were written) read as Python 2 wrote them:
    ``__builtin__`` and ``copy_reg`` names are mapped to ``builtins`` and ``copyreg``, the old module paths
    (``scipy.sparse.csr``, ``numpy.core.multiarray``) resolve to the same allowed classes, an old
    ``csr_matrix.__dict__`` (``_shape``, ``maxprint``, ``format``, ...) is its state, and the raw bytes of
    an array or scalar, a ``BINSTRING`` that arrives as a latin-1 ``str``, are turned back into bytes
    before the size check. It is the pure-Python unpickler (the C one cannot be hooked there);
    the files it reads hold a few large byte strings, so it is not slower in practice."""

    _table: Optional[dict] = None
    dispatch = dict(pickle._Unpickler.dispatch)

    def load_build(self) -> None:
        state, inst = self.stack[-1], self.stack[-2]
        if isinstance(inst, np.dtype):
            self.stack.pop()
            self.stack[-1] = _dtype_from_state(inst, state)
            return
        if isinstance(inst, np.ndarray):
            self.stack[-1] = _check_array_state(state)
        pickle._Unpickler.load_build(self)

    dispatch[pickle.BUILD[0]] = load_build

    def find_class(self, module: str, name: str) -> Any:
        import _compat_pickle

        # Python 2 pickles name '__builtin__', 'copy_reg', ... (the mapping leaves Python 3 names alone)
        module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        if RestrictedUnpickler._table is None:
            RestrictedUnpickler._table = _allowed()
        found = RestrictedUnpickler._table.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(f"global '{module}.{name}' is not allowed")
        return found

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("persistent ids are not allowed")


def read_pickle(path: Any, owner: str) -> Any:
    """A pickle of plain data (see :class:`RestrictedUnpickler`), read as Python 2 pickles are (latin-1)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _err(owner, path, "a readable file", str(exc)) from None
    try:
        return RestrictedUnpickler(io.BytesIO(data), encoding="latin1").load()
    except _Refused as exc:
        raise _err(owner, path, "a pickle of numpy arrays, scipy sparse matrices, dicts, lists and ints",
                   f"refused: {exc}") from None
    except pickle.UnpicklingError as exc:
        raise _err(owner, path, "a pickle of numpy arrays, scipy sparse matrices, dicts, lists and ints",
                   f"refused: {exc}") from None
    except (Exception, RecursionError) as exc:   # truncated or random bytes: EOFError, ValueError, KeyError, ...
        raise _err(owner, path, "a complete, well-formed pickle", f"{type(exc).__name__}: {str(exc)[:120]}") from None
