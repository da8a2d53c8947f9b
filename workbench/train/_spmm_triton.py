"""The compiled CSR kernel for CUDA behind :func:`workbench.train.kernels.spmm` (imported only when Triton is,
i.e. on GPU machines; the CPU build of torch has no Triton).

One program per block of ``ROWS`` rows (default 1, with 16 non-zeros at a time and 2 warps: the fastest
shape on an H100 in ``benchmarks/spmm_gpu.py``); each row walks its non-zeros ``BLOCK_E`` at a time, gathers those
input rows (``BLOCK_E x width``, 16-byte loads along the width), scales them by the values and sums them into
a register accumulator, then writes (or adds) the output row once. The sum order of a row is fixed: the
result is deterministic, run to run.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["csr_spmm", "CONFIGS"]

CONFIGS = {"default": (16, 1, 2)}
"""``(BLOCK_E, ROWS, num_warps)`` by name; :func:`csr_spmm` takes one (chosen by measurement, see
:mod:`workbench.train.kernels`)."""


@triton.jit
def _csr_spmm_kernel(crow_ptr, col_ptr, val_ptr, h_ptr, out_ptr, num_rows, width, h_stride, out_stride,
                     ACCUMULATE: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr,
                     ROWS: tl.constexpr):  # pragma: no cover - compiled for the GPU
    pid = tl.program_id(0)
    offs_f = tl.arange(0, BLOCK_F)
    fmask = offs_f < width
    for r in range(ROWS):
        row = pid * ROWS + r
        if row < num_rows:
            start = tl.load(crow_ptr + row)
            end = tl.load(crow_ptr + row + 1)
            acc = tl.zeros([BLOCK_F], dtype=tl.float32)
            for e in range(start, end, BLOCK_E):
                offs_e = e + tl.arange(0, BLOCK_E)
                emask = offs_e < end
                c = tl.load(col_ptr + offs_e, mask=emask, other=0).to(tl.int64)
                v = tl.load(val_ptr + offs_e, mask=emask, other=0.0)
                x = tl.load(h_ptr + c[:, None] * h_stride + offs_f[None, :],
                            mask=emask[:, None] & fmask[None, :], other=0.0)
                acc += tl.sum(x * v[:, None], axis=0)
            dst = out_ptr + row.to(tl.int64) * out_stride + offs_f
            if ACCUMULATE:
                acc += tl.load(dst, mask=fmask, other=0.0)
            tl.store(dst, acc, mask=fmask)


def csr_spmm(crow: torch.Tensor, col: torch.Tensor, val: torch.Tensor, h: torch.Tensor,
             out: torch.Tensor | None = None, config: str = "default") -> torch.Tensor:
    """``A @ h`` (added into ``out`` when given) for a float32 CSR ``A`` on a CUDA device."""
    m, width = crow.numel() - 1, h.shape[1]
    h = h.contiguous()
    accumulate = out is not None
    if out is None:
        out = torch.empty(m, width, dtype=h.dtype, device=h.device)
    if m == 0 or width == 0:
        return out
    block_e, rows, warps = CONFIGS[config]
    block_f = max(16, triton.next_power_of_2(width))
    grid = (triton.cdiv(m, rows),)
    _csr_spmm_kernel[grid](crow, col, val, h, out, m, width, h.stride(0), out.stride(0),
                           ACCUMULATE=accumulate, BLOCK_E=block_e, BLOCK_F=block_f, ROWS=rows, num_warps=warps)
    return out
