"""Python 2 pickles, written opcode by opcode: the Planetoid ``ind.*`` files as Yang et al. wrote them.

The files that PyG's ``Planetoid`` and DGL's citation datasets download were written by Python 2's
``cPickle`` at protocol 2. Python 3 cannot write them: its ``str`` becomes ``BINUNICODE`` and an array's
raw bytes ``SHORT_BINBYTES`` (or ``_codecs.encode`` at protocol 2), while Python 2 wrote both as
``BINSTRING``, which a Python 3 unpickler with ``encoding="latin1"`` hands back as ``str``. Tests and the
notebooks build their Planetoid fixtures with :func:`dumps` so that they are byte-for-byte the shape of the
real files (:func:`workbench.data.planetoid.write_planetoid` uses it by default).

What is written, as Python 2.7 with numpy 1.x and scipy 0.x wrote it (``pickletools.dis`` shows the same
opcodes as on the real files):

* ``numpy.ndarray``: ``GLOBAL numpy.core.multiarray _reconstruct`` called with ``(numpy ndarray, (0,),
  'b')``, then ``BUILD`` with ``(1, shape, dtype, False, <raw bytes as BINSTRING>)``;
* ``numpy.dtype``: ``GLOBAL numpy dtype`` called with ``('f4', 0, 1)``, then ``BUILD`` with
  ``(3, '<', None, None, None, -1, -1, 0)``;
* ``scipy.sparse.csr_matrix``: ``GLOBAL scipy.sparse.csr csr_matrix``, ``EMPTY_TUPLE``, ``NEWOBJ``, then
  ``BUILD`` with its ``__dict__`` (``_shape``, ``maxprint``, ``indices``, ``indptr``, ``data``, ``format``);
* ``collections.defaultdict(list)``: ``GLOBAL collections defaultdict`` called with ``(__builtin__ list,)``,
  then its items by ``SETITEMS``;
* ``dict``, ``list``, ``tuple``, ``int``, ``bool``, ``None`` and ``str`` (as ``BINSTRING``).

Every object that Python 2 memoised gets a ``BINPUT``; nothing is read back by ``BINGET``.

Example:
    >>> import numpy as np, pickle
    >>> data = dumps(np.arange(3, dtype=np.int32))
    >>> data[:2], b"_reconstruct" in data, b"\\x8c" in data     # PROTO 2, no Python 3 SHORT_BINUNICODE
    (b'\\x80\\x02', True, False)
    >>> pickle.loads(data, encoding="latin1").tolist()
    [0, 1, 2]
"""

from __future__ import annotations

import struct
from collections import defaultdict
from typing import Any

import numpy as np

__all__ = ["dumps"]


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray(b"\x80\x02")   # PROTO 2
        self.memo = 0

    def put(self) -> None:
        self.out += b"q" + bytes([self.memo]) if self.memo < 256 else b"r" + struct.pack("<I", self.memo)
        self.memo += 1

    def glob(self, module: str, name: str) -> None:
        self.out += b"c" + module.encode() + b"\n" + name.encode() + b"\n"
        self.put()

    def string(self, raw: bytes) -> None:
        self.out += (b"U" + bytes([len(raw)]) if len(raw) < 256 else b"T" + struct.pack("<i", len(raw))) + raw
        self.put()

    def int(self, v: int) -> None:
        if 0 <= v < 256:
            self.out += b"K" + bytes([v])
        elif 0 <= v < 65536:
            self.out += b"M" + struct.pack("<H", v)
        elif -2 ** 31 <= v < 2 ** 31:
            self.out += b"J" + struct.pack("<i", v)
        else:
            raw = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
            self.out += b"\x8a" + bytes([len(raw)]) + raw

    def tuple(self, items: tuple) -> None:
        if not items:
            self.out += b")"
            return
        if len(items) <= 3:
            for x in items:
                self.obj(x)
            self.out += b"\x85\x86\x87"[len(items) - 1: len(items)]
        else:
            self.out += b"("
            for x in items:
                self.obj(x)
            self.out += b"t"
        self.put()

    def items(self, pairs: list) -> None:   # Python 2's _batch_setitems, 1000 a batch
        for i in range(0, len(pairs), 1000):
            batch = pairs[i:i + 1000]
            if len(batch) > 1:
                self.out += b"("
            for k, v in batch:
                self.obj(k)
                self.obj(v)
            self.out += b"u" if len(batch) > 1 else b"s"

    def list(self, items: list) -> None:
        self.out += b"]"
        self.put()
        for i in range(0, len(items), 1000):
            batch = items[i:i + 1000]
            if len(batch) > 1:
                self.out += b"("
            for x in batch:
                self.obj(x)
            self.out += b"e" if len(batch) > 1 else b"a"

    def dtype(self, dt: np.dtype) -> None:
        self.glob("numpy", "dtype")
        self.tuple((f"{dt.kind}{dt.itemsize}", 0, 1))
        self.out += b"R"
        self.put()
        order = "|" if dt.itemsize == 1 else "<"
        self.tuple((3, order, None, None, None, -1, -1, 0))
        self.out += b"b"

    def array(self, a: np.ndarray) -> None:
        a = np.ascontiguousarray(a)
        a = a.astype(a.dtype.newbyteorder("<")) if a.dtype.byteorder == ">" else a
        self.glob("numpy.core.multiarray", "_reconstruct")
        self.glob("numpy", "ndarray")
        self.tuple((0,))
        self.string(b"b")
        self.out += b"\x87"   # (ndarray, (0,), 'b'): the tuple of three
        self.put()
        self.out += b"R"
        self.put()
        self.out += b"("
        self.int(1)
        self.tuple(tuple(int(s) for s in a.shape))
        self.dtype(a.dtype)
        self.out += b"\x89"   # NEWFALSE: not Fortran order
        self.string(a.tobytes())
        self.out += b"t"
        self.put()
        self.out += b"b"

    def csr(self, m: Any) -> None:
        self.glob("scipy.sparse.csr", "csr_matrix")
        self.out += b")\x81"   # EMPTY_TUPLE, NEWOBJ
        self.put()
        self.out += b"}"
        self.put()
        state = {"_shape": tuple(int(s) for s in m.shape), "maxprint": 50, "indices": m.indices,
                 "indptr": m.indptr, "format": "csr", "data": m.data}
        self.items(list(state.items()))
        self.out += b"b"

    def obj(self, x: Any) -> None:
        import scipy.sparse as sp

        if x is None:
            self.out += b"N"
        elif isinstance(x, (bool, np.bool_)):
            self.out += b"\x88" if x else b"\x89"
        elif isinstance(x, (int, np.integer)):
            self.int(int(x))
        elif isinstance(x, str):
            self.string(x.encode("latin1"))
        elif isinstance(x, bytes):
            self.string(x)
        elif isinstance(x, tuple):
            self.tuple(x)
        elif isinstance(x, list):
            self.list(x)
        elif isinstance(x, np.ndarray):
            self.array(x)
        elif sp.issparse(x):
            self.csr(x.tocsr())
        elif isinstance(x, defaultdict) and x.default_factory is list:
            self.glob("collections", "defaultdict")
            self.glob("__builtin__", "list")
            self.out += b"\x85"
            self.put()
            self.out += b"R"
            self.put()
            self.items(list(x.items()))
        elif isinstance(x, dict):
            self.out += b"}"
            self.put()
            self.items(list(x.items()))
        else:
            raise TypeError(f"pickle2.dumps writes numpy arrays, scipy sparse matrices, defaultdict(list), dict, "
                            f"list, tuple, int, bool, None and str; got {type(x).__name__}")


def dumps(obj: Any) -> bytes:
    """``obj`` as Python 2.7's ``cPickle.dumps(obj, 2)`` wrote it (see the module docstring for what it takes).

    Raises:
        TypeError: an object of a type the Planetoid files never held.
    """
    w = _Writer()
    w.obj(obj)
    w.out += b"."
    return bytes(w.out)
