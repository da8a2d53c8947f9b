"""G3's bins planned on the ranks: a run on a partition folder, where each rank reads its own part and the client
reads only the manifest (:meth:`FullGraphTrainer.parts_on_ranks
<workbench.train.full_graph.FullGraphTrainer.parts_on_ranks>`).

The client of a graph in memory sizes the budget and packs every rank's bins before the ranks start
(:func:`~workbench.train.bins_program.plan_bins`). Here each rank, once it built its shard from its part, plans
the same with :func:`plan_bins_on_rank`, from what its part holds plus two small exchanges (kind
:data:`~workbench.train.part_source.SETUP_KIND`):

1. one ``all_gather`` of six int64 per rank: its owned and halo rows, and its largest one-vertex bin (a
   vertex's in-edges are all rows of its owner, so the graph's largest bin is the largest of the parts': most
   in-neighbours, ties to the smallest global id, as :func:`~workbench.train.bins.largest_vertex_bin` picks on
   the whole graph). Every rank then sizes the same budget (``auto`` included) and runs the same checks as the
   client would (:func:`~workbench.train.bins_program.check_budget`, same messages); every rank raises alike.
2. the rank packs its own bins (:func:`~workbench.train.bins_program.pack_part_bins`), then one ``all_to_all``
   sends each owner's bin ids of the rows its peers read (its send lists, every layer but the last, for the
   priority and the consecutive-id bins at once); they arrive in halo order, and
   :func:`~workbench.train.bins_program.part_dependencies` gives the bins' dependencies, equal to the client's.

The rank returns its bins (without their aggregation blocks) and dependencies in its result
(:meth:`RankBins.for_client`); the client's summary rebuilds the plan from them
(:func:`~workbench.train.bins_program.plan_from_ranks`), so a folder run reports the ``g3`` block, and the
``memory_budget=auto`` note, of the same partition trained in memory.

Example:
    >>> RankBins(budget=None).for_client().schedule is None
    True
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import numpy as np
import torch

from workbench.train.bins import BinSchedule, MemoryBudget, VertexBin, bin_byte_cap, largest_vertex_bin
from workbench.train.bins_program import bin_limit_of, check_budget, output_bins, pack_part_bins, part_dependencies, sized_budget
from workbench.train.part_source import SETUP_KIND

__all__ = ["RankBins", "plan_bins_on_rank", "part_largest_bin"]


@dataclasses.dataclass(eq=False)
class RankBins:
    """What one rank planned of the G3 bins itself (a run on a partition folder).

    Attributes:
        budget: the run's memory budget (``reason`` says how ``auto`` sized it), ``None`` when unlimited.
        schedule: the rank's executed (priority) bins; ``None`` when it trains its whole part.
        deps: ``deps[k][b]``: the ``(rank, bin)`` pairs of layer ``k - 1`` that bin ``b`` of layer ``k`` reads.
        consecutive: ``(schedule, deps)`` of the consecutive-id bins (the ``inter`` variant's simulation).
    """

    budget: Optional[MemoryBudget]
    schedule: Optional[BinSchedule] = None
    deps: Optional[list] = None
    consecutive: Optional[tuple[BinSchedule, list]] = None

    def for_client(self) -> "RankBins":
        """A copy for the rank's result: the schedules without their aggregation blocks (the summary reads the
        bins' rows, sizes and counts only)."""
        if self.schedule is None:
            return self
        return dataclasses.replace(self, schedule=_without_blocks(self.schedule),
                                   consecutive=(_without_blocks(self.consecutive[0]), self.consecutive[1]))


def _without_blocks(schedule: BinSchedule) -> BinSchedule:
    layers = [dataclasses.replace(lb, triplets=[], aggregators=None) for lb in schedule.layers]
    return dataclasses.replace(schedule, layers=layers)


def part_largest_bin(shard: Any, widths_in: list[int], widths_out: list[int]) -> VertexBin:
    """The largest one-vertex bin among the shard's owned rows (their in-edges, self-loops and duplicates
    counted once as in :func:`~workbench.train.bins.largest_vertex_bin`), named by its global id."""
    plan = shard.plan
    local = largest_vertex_bin(shard.agg_cols, shard.agg_rows, plan.num_inner + plan.num_halo, widths_in, widths_out)
    return dataclasses.replace(local, vertex=int(plan.inner_gid[local.vertex]))


def plan_bins_on_rank(comm: Any, shard: Any, widths_in: list[int], widths_out: list[int], step: Any) -> RankBins:
    """Size the budget, check it and pack this rank's bins with their dependencies (module docstring); every rank
    calls it at once (two collectives, one when the model has a single layer or no bins are packed).

    Args:
        comm: the rank's communicator.
        shard: the rank's :class:`~workbench.train.full_graph.RankShard`, built from its part.
        widths_in, widths_out: per layer input and output widths.
        step: the run's ``step`` config (``bin_limit``, ``memory_budget``; :mod:`workbench.train.step`).

    Raises:
        ParamError: what :func:`~workbench.train.bins_program.check_budget` refuses (whole parts that do not fit
            the budget; a given budget below twice the largest one-vertex bin, naming the smallest that works):
            the client of a folder run never reads the edges, so these are found here, as the ranks read their
            parts, on every rank alike (each rank sees every rank's figures).
    """
    plan = shard.plan
    mine = part_largest_bin(shard, widths_in, widths_out)
    row = torch.tensor([plan.num_inner, plan.num_halo, mine.num_neighbours, mine.vertex, mine.num_bytes, mine.layer],
                       dtype=torch.int64)
    table = torch.stack(comm.all_gather(row, kind=SETUP_KIND)).numpy()
    best = table[np.lexsort((table[:, 3], -table[:, 2]))[0]]             # most in-neighbours, then smallest id
    largest = VertexBin(num_bytes=int(best[4]), vertex=int(best[3]), num_neighbours=int(best[2]), layer=int(best[5]))
    sizes = [(int(i), int(h)) for i, h in table[:, :2]]
    budget = sized_budget(step.memory_budget, sizes, widths_in, widths_out, largest)
    if not check_budget(sizes, widths_in, widths_out, step, budget, largest):
        return RankBins(budget=budget)
    cap = bin_byte_cap(None if budget is None else budget.num_bytes)
    schedule, consecutive = pack_part_bins(shard, widths_in, widths_out, bin_limit_of(step), cap)
    own = [output_bins(schedule), output_bins(consecutive)]
    halo = _halo_bins(comm, plan, own)
    return RankBins(budget=budget, schedule=schedule, deps=part_dependencies(plan, schedule, own[0], halo[0]),
                    consecutive=(consecutive, part_dependencies(plan, consecutive, own[1], halo[1])))


def _halo_bins(comm: Any, plan: Any, own: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """Per schedule and layer but the last, ``(num_halo,)``: the bin of each halo row at its owner. One
    ``all_to_all``: each owner sends, for the rows of its send list to each peer, their bins of every schedule
    and layer; what part ``j`` sends is the slice of the halo owned by ``j`` (halo rows are ordered by owner)."""
    num_layers = len(own[0]) - 1
    if num_layers == 0:
        return [[] for _ in own]
    stacked = np.stack([bins for schedule in own for bins in schedule[:num_layers]])   # (S * (L-1), num_inner)
    empty = torch.zeros(0, dtype=torch.int64)
    send = [empty if j == plan.rank else torch.from_numpy(np.ascontiguousarray(stacked[:, idx.numpy()]).reshape(-1))
            for j, idx in enumerate(plan.send_local_nid)]
    got = comm.all_to_all(send, kind=SETUP_KIND)
    rows = len(stacked)
    parts = [got[j].numpy().reshape(rows, count) for j, count in enumerate(plan.recv_counts) if j != plan.rank]
    halo = np.concatenate(parts, axis=1) if parts else np.zeros((rows, 0), dtype=np.int64)
    return [list(halo[s * num_layers:(s + 1) * num_layers]) for s in range(len(own))]
