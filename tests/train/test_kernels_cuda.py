"""CUDA kernels and one-rank CUDA training (skipped without a GPU; run on a lent GPU machine with
``python -m pytest tests/train/test_kernels_cuda.py``)."""

from __future__ import annotations

import pytest
import torch

from workbench.train import kernels
from workbench.train.kernels import spmm, spmm_kernel, trace_spmm
from workbench.train.models import sparse_aggregator

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("kernel", ["torch", "triton"])
@pytest.mark.parametrize("width", [1, 7, 16, 64, 130])
def test_cuda_kernels_match_float64(kernel, width):
    if kernel == "triton" and not kernels._load_triton():
        pytest.skip("Triton does not import")
    assert spmm_kernel("cuda", choice=kernel) == kernel
    gen = torch.Generator().manual_seed(width)
    m, n, nnz = 3000, 2000, 40000
    rows = torch.cat([torch.zeros(5000, dtype=torch.int64), torch.randint(0, m, (nnz,), generator=gen)])  # a long row
    cols = torch.randint(0, n, (rows.numel(),), generator=gen)
    a, a_t = sparse_aggregator(rows, cols, torch.rand(rows.numel(), generator=gen), (m, n), device="cuda",
                               kernel=kernel)
    h = torch.randn(n, width, device="cuda")
    ref = a.to_dense().double() @ h.double()
    torch.cuda.synchronize()
    got = spmm(a, h)
    assert ((got.double() - ref).norm() / ref.norm()) < 1e-5
    base = torch.randn(m, width, device="cuda")
    out = spmm(a, h, out=base.clone())
    assert ((out.double() - base.double() - ref).norm() / ref.norm()) < 1e-5
    with trace_spmm() as calls:
        spmm(a_t, torch.randn(m, width, device="cuda"))
    assert [(c.kernel, c.rows, c.width) for c in calls] == [(kernel, n, width)]


@pytest.mark.parametrize("kernel", ["torch", "triton"])
def test_one_rank_on_cuda_trains_as_on_cpu(kernel):
    if kernel == "triton" and not kernels._load_triton():
        pytest.skip("Triton does not import")
    from recipes.full_graph import recipe
    from workbench.runtime import launch

    cfg = dict(graph="sbm:num_nodes=2000,num_blocks=4,avg_degree=10,num_features=16,seed=0", epochs=5)
    cpu = launch(recipe(**cfg), runner="single", device="cpu", out=None, blocking=True).wait()
    gpu = launch(recipe(**cfg, train={"kernel": kernel}), runner="single", device="cuda", out=None,
                 blocking=True).wait()
    assert gpu["losses"] == pytest.approx(cpu["losses"], rel=1e-4)
