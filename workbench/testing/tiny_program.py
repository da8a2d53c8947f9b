"""A tiny SPMD program for runner tests: an all-reduce and an all-to-all per epoch, with failure switches.

It lives in the package (not in a test folder) so Dask worker processes and spawned ranks can unpickle it.
:func:`expected_bytes_per_epoch` is what the communicator must count for one epoch.

Example:
    >>> from workbench.runtime import launch
    >>> launch(TinyConfig(epochs=2), runner="local", workers=2, out=None).wait(30)["epochs"]
    2
    >>> expected_bytes_per_epoch(2)
    {'allreduce': 32, 'halo_fwd': 48, 'control': 8}
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Annotated, Optional

import torch

from workbench._validation import Config, ErrorCollector
from workbench.constraints import Interval, Options
from workbench.events import EpochEnd, Progress
from workbench.runtime.program import Program, RankContext

__all__ = ["TinyConfig", "TinyProgram", "expected_bytes_per_epoch", "WIDTH"]

WIDTH = 4  # floats per piece


@dataclasses.dataclass(kw_only=True)
class TinyConfig(Config):
    """Settings of :class:`TinyProgram`."""

    epochs: Annotated[int, Interval(1, None)] = 3
    """Number of epochs."""
    seed: int = 0
    """Seed of the payload values."""
    sleep_s: float = 0.0
    """Seconds each rank sleeps per epoch (to let a test stop or kill it mid-run)."""
    fail_rank: Optional[int] = None
    """Rank that fails (``None``: none)."""
    fail_epoch: int = 1
    """Epoch at which ``fail_rank`` fails."""
    fail_mode: Annotated[str, Options("raise", "exit")] = "raise"
    """``raise`` (a ValueError) or ``exit`` (the process dies with ``os._exit(1)``)."""
    bad_prepare: bool = False
    """Raise a ParamError in ``prepare`` (before any rank starts)."""

    def build(self) -> "TinyProgram":
        return TinyProgram(self)


class TinyProgram(Program):
    """Each rank all-reduces a seeded vector and sends ``rank + 1`` rows to every other rank, every epoch."""

    name = "tiny"

    def prepare(self, world_size, emit):
        if self.config.bad_prepare:
            errs = ErrorCollector("TinyProgram")
            errs.check(False, "bad_prepare", "False", True)
            errs.raise_if_any()
        emit(Progress(stage="prepare", done=1, total=1, message=f"{world_size} payloads"))
        gen = torch.Generator().manual_seed(self.config.seed)
        return [{"rank": r, "x": torch.randn(WIDTH, generator=gen)} for r in range(world_size)]

    def run_rank(self, ctx: RankContext, payload) -> dict:
        cfg, comm, p = self.config, ctx.comm, ctx.world_size
        x = payload["x"].clone()
        for epoch in range(cfg.epochs):
            comm.set_epoch(epoch)
            ctx.check_stop()
            if cfg.sleep_s:
                time.sleep(cfg.sleep_s)
            if cfg.fail_rank == ctx.rank and epoch == cfg.fail_epoch:
                if cfg.fail_mode == "exit":
                    os._exit(1)
                raise ValueError(f"rank {ctx.rank} was told to fail")
            total = comm.all_reduce(x.clone(), kind="allreduce")
            # rank r sends r + 1 rows to every other rank
            got = comm.all_to_all([torch.full((ctx.rank + 1, WIDTH), float(epoch)) for _ in range(p)],
                                  kind="halo_fwd")
            x = total / p + sum(g.sum() for g in got)
            ctx.log(EpochEnd(rank=ctx.rank, epoch=epoch, loss=float(x.sum()),
                             bytes_by_kind=comm.counter.bytes_by_kind(epoch), messages=comm.counter.total_messages(epoch)))
            for ev in comm.counter.drain(ctx.run_id):
                ctx.log(ev)
        return {"rank": ctx.rank, "x": x.tolist(), "epochs": cfg.epochs}

    def summarize(self, rank_results):
        return {"x": rank_results[0]["x"], "epochs": rank_results[0]["epochs"], "num_ranks": len(rank_results)}


def expected_bytes_per_epoch(p: int) -> dict:
    """Counted bytes of one epoch over all ranks (the base.py formulas)."""
    if p == 1:
        return {}
    allreduce = p * (2 * (p - 1) * 4 * WIDTH // p)
    halo = sum((r + 1) * WIDTH * 4 * (p - 1) for r in range(p))
    control = p * (2 * (p - 1) * 4 // p)  # ctx.check_stop(): one float32 all-reduced per epoch
    return {"allreduce": allreduce, "halo_fwd": halo, "control": control}
