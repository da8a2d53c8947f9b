"""The one sparse kernel: numba and torch CSR agree, accumulate into ``out``, handle empty matrices."""

from __future__ import annotations

import pytest
import torch

from workbench.train import kernels
from workbench.train.kernels import csr_pair, spmm, spmm_kernel
from workbench.train.models import sparse_aggregator


def _random_csr(m, n, nnz, seed=0):
    gen = torch.Generator().manual_seed(seed)
    rows, cols = torch.randint(0, m, (nnz,), generator=gen), torch.randint(0, n, (nnz,), generator=gen)
    return sparse_aggregator(rows, cols, torch.rand(nnz, generator=gen), (m, n))[0]


@pytest.mark.parametrize("width", [1, 16, 64])
def test_numba_and_torch_kernels_agree(width, monkeypatch):
    a = _random_csr(50, 40, 300)
    h = torch.randn(40, width)
    dense = a.to_dense() @ h
    monkeypatch.setenv("WORKBENCH_SPMM", "torch")
    assert spmm_kernel("cpu") == "torch"
    torch.testing.assert_close(spmm(a, h), dense, rtol=1e-5, atol=1e-5)
    monkeypatch.delenv("WORKBENCH_SPMM")
    if kernels._load_numba():
        assert spmm_kernel("cpu") == "numba"
    torch.testing.assert_close(spmm(a, h), dense, rtol=1e-5, atol=1e-5)
    out = torch.ones(50, width)
    assert spmm(a, h, out=out) is out
    torch.testing.assert_close(out, dense + 1, rtol=1e-5, atol=1e-5)
    empty = _random_csr(5, 40, 0)
    assert spmm(empty, h).abs().sum() == 0 and spmm(empty, h).shape == (5, width)


@pytest.mark.parametrize("kernel", ["torch", "numba"])
def test_csr_pair_of_unsorted_repeated_entries(kernel, monkeypatch):
    gen = torch.Generator().manual_seed(1)
    rows, cols = torch.randint(0, 30, (400,), generator=gen), torch.randint(0, 20, (400,), generator=gen)
    w = torch.rand(400, generator=gen)
    dense = torch.zeros(30, 20).index_put_((rows, cols), w, accumulate=True)
    monkeypatch.setenv("WORKBENCH_SPMM", kernel)
    a, a_t = csr_pair(rows, cols, w, (30, 20))
    h, g = torch.randn(20, 8), torch.randn(30, 8)
    torch.testing.assert_close(spmm(a, h), dense @ h, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(spmm(a_t, g), dense.T @ g, rtol=1e-5, atol=1e-5)


def _factored(m, n, nnz, seed=2):
    """A CSR pair whose weights factor as ``r[row] * c[col]`` (repeated entries and empty rows included)."""
    gen = torch.Generator().manual_seed(seed)
    rows, cols = torch.randint(0, m, (nnz,), generator=gen), torch.randint(0, n, (nnz,), generator=gen)
    r, c = torch.rand(m, generator=gen) + 0.1, torch.rand(n, generator=gen) + 0.1
    w = r[rows] * c[cols]
    dense = torch.zeros(m, n).index_put_((rows, cols), w, accumulate=True)
    return csr_pair(rows, cols, w, (m, n), scales=(r, c)), dense


@pytest.mark.parametrize("width", [1, 16, 20])
def test_factored_matrices_agree_on_every_kernel(width, monkeypatch):
    (a, a_t), dense = _factored(70, 45, 500)
    h, g = torch.randn(45, width), torch.randn(70, width)
    for kernel in ("numba", "dgl"):
        monkeypatch.setenv("WORKBENCH_SPMM", kernel)
        torch.testing.assert_close(spmm(a, h), dense @ h, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(spmm(a_t, g), dense.T @ g, rtol=1e-5, atol=1e-5)
        out = torch.ones(70, width)
        assert spmm(a, h, out=out) is out
        torch.testing.assert_close(out, dense @ h + 1, rtol=1e-5, atol=1e-5)


def test_dgl_kernel_only_for_large_factored_matrices(monkeypatch):
    monkeypatch.delenv("WORKBENCH_SPMM", raising=False)
    (a, _), _ = _factored(20, 20, 50)
    h = torch.randn(20, 4)
    assert not kernels._uses_dgl(a, h)                       # below DGL_MIN_NNZ: numba, no DGL import
    assert not kernels._uses_dgl(_random_csr(20, 20, 50), h)  # weights that do not factor: never DGL
    monkeypatch.setenv("WORKBENCH_SPMM", "dgl")
    assert kernels._uses_dgl(a, h) == bool(kernels._load_dgl())
    with pytest.raises(ValueError, match="'scales' parameter of csr_pair"):
        csr_pair(torch.tensor([0]), torch.tensor([0]), torch.ones(1), (2, 2), scales=(torch.ones(3), torch.ones(2)))
