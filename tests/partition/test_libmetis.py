"""The ctypes wrapper around the system METIS library."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.partition._libmetis import LibMetisError, load_libmetis

lib = load_libmetis()
pytestmark = pytest.mark.skipif(lib is None, reason="libmetis5 not installed")


def _ring(n: int):
    xadj = np.arange(0, 2 * n + 1, 2)
    adjncy = np.array([[(i - 1) % n, (i + 1) % n] for i in range(n)]).ravel()
    return xadj, adjncy


def test_idx_width_detected():
    assert lib.idx_dtype in (np.int32, np.int64)


@pytest.mark.parametrize("recursive", [False, True])
def test_two_constraints_balanced(recursive):
    xadj, adjncy = _ring(16)
    flag = (np.arange(16) < 8).astype(np.int64)  # half the ring is "train"
    vwgt = np.stack([np.ones(16, dtype=np.int64), flag], 1)
    part = lib.part_graph(xadj, adjncy, 2, vwgt=vwgt, ubvec=np.array([1.05, 1.05]), seed=0, recursive=recursive)
    assert part.dtype == np.int64 and part.shape == (16,)
    assert np.bincount(part, minlength=2).tolist() == [8, 8]
    assert np.bincount(part[:8], minlength=2).tolist() == [4, 4]


def test_deterministic_under_seed():
    xadj, adjncy = _ring(40)
    a = lib.part_graph(xadj, adjncy, 4, seed=3)
    assert np.array_equal(a, lib.part_graph(xadj, adjncy, 4, seed=3))


def test_error_status_raises():
    xadj, adjncy = _ring(8)
    with pytest.raises(LibMetisError, match="METIS_ERROR_INPUT"):
        lib.part_graph(xadj, adjncy, 2, vwgt=np.ones((8, 2), dtype=np.int64), ubvec=np.array([0.5, 0.5]))
