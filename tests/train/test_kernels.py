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
def test_numba_and_torch_kernels_agree(width):
    a = _random_csr(50, 40, 300)
    h = torch.randn(40, width)
    dense = a.to_dense() @ h
    forced = kernels.set_kernel(a.clone(), "torch")
    assert spmm_kernel("cpu", choice=kernels.kernel_of(forced)) == "torch"
    torch.testing.assert_close(spmm(forced, h), dense, rtol=1e-5, atol=1e-5)
    if kernels._load_numba():
        assert spmm_kernel("cpu") == "numba"
    torch.testing.assert_close(spmm(a, h), dense, rtol=1e-5, atol=1e-5)
    out = torch.ones(50, width)
    assert spmm(a, h, out=out) is out
    torch.testing.assert_close(out, dense + 1, rtol=1e-5, atol=1e-5)
    empty = _random_csr(5, 40, 0)
    assert spmm(empty, h).abs().sum() == 0 and spmm(empty, h).shape == (5, width)


@pytest.mark.parametrize("kernel", ["torch", "numba"])
def test_csr_pair_of_unsorted_repeated_entries(kernel):
    gen = torch.Generator().manual_seed(1)
    rows, cols = torch.randint(0, 30, (400,), generator=gen), torch.randint(0, 20, (400,), generator=gen)
    w = torch.rand(400, generator=gen)
    dense = torch.zeros(30, 20).index_put_((rows, cols), w, accumulate=True)
    a, a_t = csr_pair(rows, cols, w, (30, 20), kernel=kernel)
    assert kernels.kernel_of(a) == kernels.kernel_of(a_t) == kernel
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
def test_factored_matrices_agree_on_every_kernel(width):
    (a, a_t), dense = _factored(70, 45, 500)
    h, g = torch.randn(45, width), torch.randn(70, width)
    for kernel in ("numba", "dgl", "torch"):
        kernels.set_kernel(a, kernel)
        kernels.set_kernel(a_t, kernel)
        torch.testing.assert_close(spmm(a, h), dense @ h, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(spmm(a_t, g), dense.T @ g, rtol=1e-5, atol=1e-5)
        out = torch.ones(70, width)
        assert spmm(a, h, out=out) is out
        torch.testing.assert_close(out, dense @ h + 1, rtol=1e-5, atol=1e-5)


def test_dgl_kernel_only_for_large_factored_matrices():
    (a, _), _ = _factored(20, 20, 50)
    h = torch.randn(20, 4)
    assert not kernels._uses_dgl(a, h)                       # below DGL_MIN_NNZ: numba, no DGL import
    assert not kernels._uses_dgl(_random_csr(20, 20, 50), h)  # weights that do not factor: never DGL
    kernels.set_kernel(a, "dgl")
    assert kernels._uses_dgl(a, h) == bool(kernels._load_dgl())
    with pytest.raises(ValueError, match="'scales' parameter of csr_pair"):
        csr_pair(torch.tensor([0]), torch.tensor([0]), torch.ones(1), (2, 2), scales=(torch.ones(3), torch.ones(2)))


@pytest.mark.parametrize("kind", ["sage", "gcn"])
@pytest.mark.parametrize("grouped", [True, False])
def test_block_mean_matches_the_dense_mean_forward_and_backward(kind, grouped):
    """The compiled block aggregation (one scale per destination, transpose built in the backward pass only)
    equals the dense ``D^-1 (A (+ I))`` product and its gradient, also for edges not grouped by destination
    (a DGL block) and a destination without sampled in-neighbours."""
    from workbench.sample import Block
    from workbench.train.minibatch import block_aggregators
    from workbench.train.models import MODELS

    gen = torch.Generator().manual_seed(0)
    nd, ns, ne = 7, 19, 40
    dst = torch.sort(torch.randint(0, nd - 1, (ne,), generator=gen)).values   # destination nd-1: no edge
    src = torch.randint(0, ns, (ne,), generator=gen)
    if not grouped:
        perm = torch.randperm(ne, generator=gen)
        src, dst = src[perm], dst[perm]
    block = Block(src_gid=torch.arange(ns), num_dst=nd, edge_src=src, edge_dst=dst)
    dense = torch.zeros(nd, ns)
    dense.index_put_((dst, src), torch.ones(ne), accumulate=True)
    if kind == "gcn":
        dense[:, :nd] += torch.eye(nd)
    dense = dense / dense.sum(1, keepdim=True).clamp_min(1.0)
    h = torch.randn(ns, 5, generator=gen, requires_grad=True)
    h_ref = h.detach().clone().requires_grad_(True)
    agg = block_aggregators(MODELS[kind], [block], torch.device("cpu"))[0]
    out, ref = agg(h), dense @ h_ref
    torch.testing.assert_close(out, ref, rtol=1e-6, atol=1e-6)
    g = torch.randn(nd, 5, generator=gen)
    out.backward(g)
    ref.backward(g)
    torch.testing.assert_close(h.grad, h_ref.grad, rtol=1e-6, atol=1e-6)
    with torch.no_grad():   # evaluation builds no transpose
        fresh = block_aggregators(MODELS[kind], [block], torch.device("cpu"))[0]
        fresh(h)
    assert "_t" not in fresh.__dict__ and "_t" in agg.__dict__


@pytest.mark.parametrize("recipe,kernel", [("full_graph", "torch"), ("full_graph", "numba"), ("distdgl", "torch")])
def test_the_kernel_setting_reaches_every_product_of_a_run(recipe, kernel):
    """``train.kernel`` is a setting of the run (it replaced an environment variable): every sparse product of
    the ranks runs the kernel it names, and an unknown one is refused before any rank starts."""
    import importlib

    from workbench._validation import ParamError
    from workbench.runtime import launch
    from workbench.train.kernels import trace_spmm

    make = importlib.import_module(f"recipes.{recipe}").recipe
    cfg = make(graph="sbm:num_nodes=300,num_blocks=4,avg_degree=6,num_features=8,seed=0", epochs=2)
    cfg = cfg.with_strings({"train.kernel": kernel})
    if recipe == "distdgl":
        cfg = cfg.with_strings({"sample.fanouts": "5,5", "sample.batch_size": "64"})
    with trace_spmm() as calls:
        launch(cfg, runner="local", workers=2, out=None).wait(timeout=120)
    assert calls and {c.kernel for c in calls} == {kernel}
    with pytest.raises(ParamError, match="'kernel' parameter of TrainLoopConfig must be one of"):
        cfg.with_strings({"train.kernel": "cusparse"})


_FIRST_KERNEL_IN_A_THREAD = """
import threading, torch
from workbench.train import kernels
torch.set_num_threads(1)                  # what a runtime gives a rank that shares the host's cores
seen = {}
def rank():
    seen["before"] = torch.get_num_threads()
    seen["numba"] = bool(kernels._load_numba())   # the rank's first compiled kernel starts numba's pool
    seen["after"] = torch.get_num_threads()
thread = threading.Thread(target=rank)
thread.start()
thread.join()
print(seen["before"], seen["numba"], seen["after"])
"""


def test_starting_numbas_pool_leaves_the_ranks_torch_threads_alone():
    """numba's OpenMP pool runs on torch's libgomp: starting it from a rank's thread set that thread's OpenMP
    count to every core, so a rank given 1 of 2 cores ran torch on 2 spinning threads (three ranks on two
    cores spent most of the machine in libgomp's spin-wait). The count a runtime set survives the start."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", _FIRST_KERNEL_IN_A_THREAD], capture_output=True, text=True,
                         env=env, check=True).stdout.split()
    assert out[0] == "1" and out[2] == "1", out
