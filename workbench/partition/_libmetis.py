"""A small ctypes wrapper around the system METIS library (Debian ``libmetis5``).

pymetis hard-codes one balance constraint and silently ignores extra vertex weights, so
multi-constraint partitioning (DistDGL's train/val/test and degree balancing) calls
``METIS_PartGraphKway``/``METIS_PartGraphRecursive`` from ``libmetis.so`` directly.

The width of METIS's ``idx_t`` is a build option (Debian: 32 bit, ``real_t`` float); it is
detected at load time by letting ``METIS_SetDefaultOptions`` fill a buffer of 64-bit slots.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Optional

import numpy as np

__all__ = ["LibMetis", "load_libmetis", "LibMetisError"]

METIS_OK = 1
METIS_NOPTIONS = 40
# Indices into the options array (metis.h 5.1, enum moptions_et).
OPTION_OBJTYPE = 1
OPTION_SEED = 8
OPTION_CONTIG = 11
OPTION_UFACTOR = 16
OPTION_NUMBERING = 17
_ERRORS = {-2: "METIS_ERROR_INPUT (erroneous inputs or options)", -3: "METIS_ERROR_MEMORY", -4: "METIS_ERROR"}


class LibMetisError(RuntimeError):
    """METIS returned an error status."""


class LibMetis:
    """The loaded library with its detected integer width."""

    def __init__(self, lib: ctypes.CDLL, path: str):
        self.lib = lib
        self.path = path
        self.idx_dtype = self._detect_idx_dtype()
        self.real_dtype = np.float32  # Debian and upstream default REALTYPEWIDTH=32

    def _detect_idx_dtype(self) -> type:
        buf = np.full(METIS_NOPTIONS, 0x5A5A5A5A5A5A5A5A, dtype=np.int64)
        status = self.lib.METIS_SetDefaultOptions(buf.ctypes.data_as(ctypes.c_void_p))
        if status != METIS_OK:
            raise LibMetisError(f"METIS_SetDefaultOptions in {self.path} returned {status}")
        # 64-bit idx_t fills every slot with -1; 32-bit idx_t fills only the first half of the bytes.
        return np.int64 if buf[-1] == -1 else np.int32

    def part_graph(self, xadj: np.ndarray, adjncy: np.ndarray, num_parts: int, *,
                   vwgt: Optional[np.ndarray] = None, adjwgt: Optional[np.ndarray] = None,
                   ubvec: Optional[np.ndarray] = None, seed: int = 0, ufactor: Optional[int] = None,
                   recursive: bool = False, objtype: int = 0) -> np.ndarray:
        """Partition a symmetric CSR graph (no self-loops). ``vwgt`` is ``(n, ncon)``.

        Returns:
            ``(n,)`` int64 part of each vertex.
        """
        idx = self.idx_dtype
        n = len(xadj) - 1
        ncon = 1 if vwgt is None else int(vwgt.shape[1])
        if idx is np.int32 and (len(adjncy) >= 2**31 or (vwgt is not None and vwgt.sum(0).max() >= 2**31)):
            raise LibMetisError(f"{self.path} uses 32-bit ids; the graph or its weights are too large")
        arrays = {
            "xadj": np.ascontiguousarray(xadj, dtype=idx),
            "adjncy": np.ascontiguousarray(adjncy, dtype=idx),
            "vwgt": None if vwgt is None else np.ascontiguousarray(vwgt, dtype=idx).reshape(-1),
            "adjwgt": None if adjwgt is None else np.ascontiguousarray(adjwgt, dtype=idx),
            "ubvec": None if ubvec is None else np.ascontiguousarray(ubvec, dtype=self.real_dtype),
        }
        options = np.zeros(METIS_NOPTIONS, dtype=idx)
        self.lib.METIS_SetDefaultOptions(options.ctypes.data_as(ctypes.c_void_p))
        options[OPTION_SEED] = seed
        options[OPTION_NUMBERING] = 0
        if not recursive:  # METIS_PartGraphRecursive rejects OBJTYPE
            options[OPTION_OBJTYPE] = objtype
        if ufactor is not None:
            options[OPTION_UFACTOR] = ufactor
        part = np.zeros(n, dtype=idx)
        scalars = [np.array([v], dtype=idx) for v in (n, ncon, num_parts, 0)]  # nvtxs, ncon, nparts, objval

        def ptr(a: Optional[np.ndarray]):
            return None if a is None else a.ctypes.data_as(ctypes.c_void_p)

        fn = self.lib.METIS_PartGraphRecursive if recursive else self.lib.METIS_PartGraphKway
        status = fn(ptr(scalars[0]), ptr(scalars[1]), ptr(arrays["xadj"]), ptr(arrays["adjncy"]),
                    ptr(arrays["vwgt"]), None, ptr(arrays["adjwgt"]), ptr(scalars[2]), None,
                    ptr(arrays["ubvec"]), ptr(options), ptr(scalars[3]), ptr(part))
        if status != METIS_OK:
            raise LibMetisError(f"{fn.__name__} returned {_ERRORS.get(status, status)}")
        return part.astype(np.int64)


@functools.lru_cache(maxsize=1)
def load_libmetis() -> Optional[LibMetis]:
    """The system METIS library, or ``None`` when it is not installed (``apt-get install libmetis5``)."""
    for name in (ctypes.util.find_library("metis"), "libmetis.so.5", "libmetis.so"):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        for fn_name in ("METIS_PartGraphKway", "METIS_PartGraphRecursive", "METIS_SetDefaultOptions"):
            getattr(lib, fn_name).restype = ctypes.c_int
        return LibMetis(lib, name)
    return None
