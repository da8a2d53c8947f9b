"""What a runner runs: a :class:`Program` built from a validated config, executed SPMD on every rank.

A recipe returns a config (a :class:`workbench._validation.Config` subclass with a ``build()``
method). The runtime calls ``config.build()`` on the client, then:

1. ``program.prepare(world_size, emit)`` on the client, before any worker starts: load the graph,
   partition it, validate everything, and return one picklable payload per rank (its shard);
2. ``program.run_rank(ctx, payload)`` on every rank (thread, Dask worker process, or the single
   reference process), communicating only through ``ctx.comm``;
3. ``program.summarize(rank_results)`` on the client: the run's JSON-safe summary.

Runners differ only in where step 2 happens and which communicator backs ``ctx.comm``.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, Callable, Optional

import torch

from workbench.communicate.base import Communicator
from workbench.events import Event

__all__ = ["Program", "RankContext", "StopRequested"]


class StopRequested(Exception):
    """Raised inside a rank when the run was asked to stop (all ranks leave at the same epoch)."""


@dataclasses.dataclass(kw_only=True)
class RankContext:
    """Everything a rank needs at run time.

    Attributes:
        rank: this rank.
        world_size: number of ranks.
        comm: the counted communicator of this rank.
        run_id: id of the run (stamped on every event).
        device: torch device of this rank (``cpu`` or ``cuda:0``).
        emit: send an event to the client (live stream + run log). Cheap: batch-friendly.
        stop_requested: poll from the client side; use :meth:`check_stop` to agree across ranks.
        program: name of the program the rank runs (its ``name``; stamped on
            :class:`~workbench.events.StepTimes`).
        kernel: the sparse kernel choice of the run (``train.kernel``; the program sets it before it builds
            its matrices, which record it).
        timer: the rank's :class:`~workbench.train.timing.PhaseTimer` (the training program makes it before it builds
            anything, so every stage opens its phases on the one timer the loop's account reads; None elsewhere).
        host: the address this rank's process is reached at (the Dask worker's host, the interface its process
            group uses; loopback on the in-process runners): where a rank's own servers listen (ByteGNN's graph
            store, :mod:`workbench.schedule.graphstore`).
    """

    rank: int
    world_size: int
    comm: Communicator
    run_id: str = ""
    device: torch.device = dataclasses.field(default_factory=lambda: torch.device("cpu"))
    emit: Callable[[Event], None] = lambda event: None
    stop_requested: Callable[[], bool] = lambda: False
    program: str = ""
    kernel: str = "auto"
    host: str = "127.0.0.1"
    timer: Any = None

    def check_stop(self) -> None:
        """All ranks agree (one tiny all-reduce) whether to stop; raises :class:`StopRequested` on all."""
        flag = torch.tensor([1.0 if self.stop_requested() else 0.0], device=self.device)  # NCCL needs device tensors
        if self.world_size > 1:
            self.comm.all_reduce(flag, kind="control")
        if float(flag) > 0:
            raise StopRequested()

    def log(self, event: Event) -> None:
        """Stamp ``run_id`` (and the rank, when the event has one) and emit."""
        event.run_id = self.run_id
        if hasattr(event, "rank") and getattr(event, "rank", None) in (None, 0) and self.rank:
            setattr(event, "rank", self.rank)
        self.emit(event)


class Program(abc.ABC):
    """A training program: prepared on the client, run SPMD on ranks, summarised on the client."""

    #: name shown in run lists (e.g. the recipe name)
    name: str = "program"
    #: whether a rank starts processes of its own (ByteGNN's sampling workers): an embedded Dask cluster then
    #: starts its workers as non-daemonic processes, which may have children
    rank_processes: bool = False

    def __init__(self, config: Any):
        self.config = config
        self.notes: list[str] = list(config.notes()) if callable(getattr(config, "notes", None)) else []
        """Lines the run summary repeats under ``notes``: settings the run took from others or sized itself
        (``model.num_layers=2 (from sample.fanouts)``, ``memory_budget=auto -> ...``); ``prepare`` may add."""

    @abc.abstractmethod
    def prepare(self, world_size: int, emit: Callable[[Event], None]) -> list[Any]:
        """Load data, partition, validate; return one payload per rank. Raises ``ParamError`` on bad input."""

    @abc.abstractmethod
    def run_rank(self, ctx: RankContext, payload: Any) -> dict:
        """The per-rank body. Returns a picklable dict of this rank's results."""

    def summarize(self, rank_results: list[dict]) -> dict:
        """Combine per-rank results into the run summary (JSON-safe). Default: rank 0's result."""
        return dict(rank_results[0]) if rank_results else {}

    def client_emit(self, emit: Callable[[Event], None]) -> Callable[[Event], None]:
        """The sink the ranks' events go through on the client (called after :meth:`prepare`; default:
        ``emit`` itself). A program may wrap it to derive events across ranks as they arrive (the prefetch
        program simulates each iteration once every rank's cost is in) without moving anything between ranks."""
        return emit

    def world_size_for(self, requested: Optional[int]) -> int:
        """The number of ranks to use given the user's request (a program may fix it)."""
        return int(requested or 1)

    def world_size_reason(self) -> Optional[str]:
        """What fixes the number of ranks when :meth:`world_size_for` does not follow the request (``"num_parts=4"``),
        for the error that refuses a ``workers`` count it would override; ``None``: nothing said (default)."""
        return None
