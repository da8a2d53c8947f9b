"""G3 bins inside the full-graph program: planning before the ranks start, the binned training loop, and the
simulated pipeline epochs in the run summary.

``FullGraphTrainer`` uses this module in ``prepare`` when the run's ``step`` is ``binned`` (:mod:`workbench.train.step`),
or a ``whole_part`` step has a ``memory_budget``:
:func:`check_bins_before_partition` (once the graph is loaded, before the partitioner runs) refuses a given budget
too small for the largest vertex with its neighbours, naming the smallest that works (bins on an exchange other
than plain ``halo`` are refused before anything loads: ``step.method=binned`` and ``step.memory_budget`` need
``p2p halo layers``, :mod:`workbench.composition`); :func:`size_budget` (once the parts are known) sizes ``memory_budget=auto``
from the graph; :func:`plan_bins` rejects whole-part training that would not fit the budget (before any worker
starts) and packs every rank's bins (:func:`pack_part_bins` per rank, :func:`part_dependencies` for what each
bin reads). A run on a partition folder, whose client never reads the edges, plans the same on the ranks
(:mod:`workbench.train.bins_ranks`, :func:`plan_from_ranks` for the summary). A rank with bins trains the full-graph steps
with a :class:`BinnedStep` (per-layer P2P halo exchange of the ``halo`` exchange, then the layer bin by bin). The summary gains
``g3``: bins per layer, the measured per-bin costs' totals and, per pipeline variant, the simulated epoch
time and idle fraction (:mod:`workbench.sim.bins_pipeline`). The simulated epoch charges what every epoch does,
measured after the first epoch: the packer gathering each bin's input block, the bin's computation, the backward.
Packing the bins and building their CSR blocks happen once before training (the first packing in a process may
also compile or load the numba kernels): ``g3.one_off_s`` reports them apart, never in an epoch.

The ``inter`` variant is simulated on **consecutive-id bins**, as the paper's ablation defines it (§7.7, Fig. 17:
"bins are nodes with consecutive IDs, no BFS or priority"): the same packing under the same caps, walking the
part's vertices in id order. Those bins are never executed, so their compute times are not measured: each is the
measured time per unit of work (edges + destination rows) of the same rank and layer's executed bins, times its
own work. The other variants use the executed priority bins. ``g3.inter_bins`` in the summary says so.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Optional

import numpy as np
import torch

from workbench.train.bins import (BinSchedule, MemoryBudget, VertexBin, auto_memory_budget, bin_byte_cap,
                                  binned_forward, build_schedule, check_bin_budget, check_memory, largest_vertex_bin,
                                  priority_order)
from workbench.sim.bins_pipeline import BinCosts, simulate, simulate_all

__all__ = ["bin_limit_of", "plan_bins", "check_bins_before_partition", "size_budget", "sized_budget", "check_budget",
           "pack_part_bins", "output_bins", "part_dependencies", "plan_from_ranks", "BinnedStep", "BinPlan",
           "bins_summary"]


@dataclasses.dataclass(eq=False)
class BinPlan:
    """Every rank's bin schedule plus what the simulation needs across ranks.

    Attributes:
        schedules: per rank, its :class:`~workbench.train.bins.BinSchedule` (sent to the rank).
        deps: ``deps[k][r][b]``: ``(m, 2)`` ``(rank, bin)`` pairs of layer ``k - 1`` that bin ``b`` of rank
            ``r`` at layer ``k`` reads (empty for layer 0).
        widths_in, widths_out: per layer widths.
        num_params: weights of the model (the all-reduce volume).
        consecutive: the same ranks' bins packed in vertex-id order and their ``deps`` (``(schedules,
            deps)``): what the ``inter`` variant of the simulation runs on (never executed).
    """

    schedules: list[BinSchedule]
    deps: list
    widths_in: list[int]
    widths_out: list[int]
    num_params: int = 0
    consecutive: Optional[tuple[list[BinSchedule], list]] = None


def bin_limit_of(step: Any) -> Optional[int]:
    """The bin limit of a ``step`` config (:mod:`workbench.train.step`): ``binned``'s ``bin_limit`` (0: bins sized
    by the budget alone), ``None`` for a step without bins (``whole_part``: its parts must fit ``memory_budget``)."""
    return getattr(step, "bin_limit", None)


def _largest_bin(graph: Any, widths_in: list[int], widths_out: list[int]) -> VertexBin:
    src, dst = graph.edges()
    return largest_vertex_bin(src, dst, graph.num_nodes, widths_in, widths_out)


def check_bins_before_partition(graph: Any, step: Any, widths_in: list[int], widths_out: list[int]) -> VertexBin:
    """What can be refused before the partitioner runs; returns the graph's largest one-vertex bin.

    Raises:
        ParamError: with bins, a given ``memory_budget`` whose half cannot hold the largest vertex with its
            in-neighbours (the message names the smallest budget that works).
    """
    largest = _largest_bin(graph, widths_in, widths_out)
    if bin_limit_of(step) is not None:
        check_bin_budget(step.memory_budget, largest)
    return largest


def sized_budget(memory_budget: Any, sizes: list[tuple[int, int]], widths_in: list[int], widths_out: list[int],
                 largest: VertexBin) -> Optional[MemoryBudget]:
    """The budget of the run from the parts' ``(num_inner, num_halo)`` and the graph's largest one-vertex bin:
    ``memory_budget`` as given, sized when it is ``auto`` (:func:`~workbench.train.bins.auto_memory_budget`),
    ``None`` when unlimited. The client's figure for a graph in memory, each rank's for a partition folder
    (:func:`workbench.train.bins_ranks.plan_bins_on_rank`): the same inputs, the same budget."""
    if memory_budget is None:
        return None
    if memory_budget != "auto":
        return MemoryBudget(int(memory_budget))
    return auto_memory_budget(sizes, widths_in, widths_out, largest)


def size_budget(graph: Any, shards: list, widths_in: list[int], widths_out: list[int], step: Any,
                largest: Optional[VertexBin] = None) -> Optional[MemoryBudget]:
    """The budget of the run: ``step.memory_budget`` as given, sized from the graph and the parts when it is
    ``auto`` (:func:`~workbench.train.bins.auto_memory_budget`), ``None`` when unlimited."""
    if step.memory_budget == "auto" and largest is None:
        largest = _largest_bin(graph, widths_in, widths_out)
    sizes = [(s.plan.num_inner, s.plan.num_halo) for s in shards]
    return sized_budget(step.memory_budget, sizes, widths_in, widths_out, largest)


def check_budget(sizes: list[tuple[int, int]], widths_in: list[int], widths_out: list[int], step: Any,
                 budget: Optional[MemoryBudget], largest: VertexBin) -> bool:
    """Whether the run packs bins (a ``binned`` step) once the parts' sizes are known; refuses what does
    not fit ``budget``.

    Raises:
        ParamError: whole-part training does not fit the budget (:func:`~workbench.train.bins.check_memory`); a
            vertex with its in-neighbours does not fit half of it (:func:`~workbench.train.bins.check_bin_budget`,
            naming the smallest budget that works).
    """
    memory_budget = None if budget is None else budget.num_bytes
    check_memory(sizes, widths_in, widths_out, memory_budget=memory_budget, bin_limit=bin_limit_of(step),
                 auto=budget.reason if budget is not None else None)
    if bin_limit_of(step) is None:
        return False
    check_bin_budget(memory_budget, largest)
    return True


def plan_bins(graph: Any, node_part: torch.Tensor, shards: list, widths_in: list[int], widths_out: list[int],
              step: Any, *, largest: Optional[VertexBin] = None,
              budget: Optional[MemoryBudget] = None) -> Optional[BinPlan]:
    """Check the memory budget and pack every rank's bins (``None`` when training whole parts).

    ``step.memory_budget`` may be ``auto``: sized by :func:`size_budget`, unless ``budget`` is that size
    already (the program sizes it first to report it). ``largest``: the graph's largest one-vertex bin, when
    :func:`check_bins_before_partition` found it.

    Raises:
        ParamError: whole-part training does not fit ``memory_budget``; a vertex does not fit half of it (the
            message names the smallest budget that works).
    """
    largest = largest or _largest_bin(graph, widths_in, widths_out)
    if budget is None:
        budget = size_budget(graph, shards, widths_in, widths_out, step, largest)
    sizes = [(s.plan.num_inner, s.plan.num_halo) for s in shards]
    if not check_budget(sizes, widths_in, widths_out, step, budget, largest):
        return None
    cap = bin_byte_cap(None if budget is None else budget.num_bytes)
    packed = [pack_part_bins(shard, widths_in, widths_out, bin_limit_of(step), cap) for shard in shards]
    schedules, consecutive = [p[0] for p in packed], [p[1] for p in packed]
    return BinPlan(schedules=schedules, deps=_dependencies(graph.num_nodes, shards, schedules),
                   widths_in=list(widths_in), widths_out=list(widths_out),
                   consecutive=(consecutive, _dependencies(graph.num_nodes, shards, consecutive)))


def pack_part_bins(shard: Any, widths_in: list[int], widths_out: list[int], bin_limit: Optional[int],
                   byte_cap: Optional[float]) -> tuple[BinSchedule, BinSchedule]:
    """One rank's bins, from its shard alone (on the client for every rank of a graph in memory, on the rank for
    a partition folder): ``(priority bins, consecutive-id bins)``, both under ``bin_limit`` and ``byte_cap``.
    The priority order walks the part's own edges sorted by (row, column), so it does not depend on the order
    the shard's edges were cut in (from the whole graph, or from the part's files)."""
    plan = shard.plan
    n = plan.num_inner
    send_count = torch.zeros(n, dtype=torch.int64)
    for j, idx in enumerate(plan.send_local_nid):
        if j != plan.rank and idx.numel():
            send_count.index_add_(0, idx, torch.ones_like(idx))
    remote_in = torch.zeros(n, dtype=torch.bool)
    remote_in[shard.agg_rows[shard.agg_cols >= n]] = True
    boundary = remote_in | (send_count > 0)
    by_row = torch.argsort(shard.agg_rows * (n + plan.num_halo) + shard.agg_cols, stable=True)
    order = priority_order(n, shard.agg_rows[by_row], shard.agg_cols[by_row], boundary)
    args = (n, plan.num_halo, shard.agg_rows, shard.agg_cols, shard.agg_weights)
    caps = dict(widths_in=widths_in, widths_out=widths_out, bin_limit=bin_limit or None, byte_cap=byte_cap,
                send_count=send_count.numpy())
    try:
        s = build_schedule(*args, order, **caps)
    except ValueError as exc:   # check_bin_budget before makes this unreachable
        raise AssertionError(f"part {plan.rank}: {exc} after check_bin_budget passed") from exc
    s.num_boundary = int(boundary.sum())
    return s, build_schedule(*args, np.arange(n, dtype=np.int64), **caps)


def output_bins(schedule: BinSchedule) -> list[np.ndarray]:
    """Per layer, ``(num_inner,)``: the bin of the rank's schedule that computes each owned row."""
    out = []
    for lb in schedule.layers:
        per_local = np.repeat(np.arange(lb.num_bins), [len(d) for d in lb.dst])
        out.append(per_local[lb.inverse.numpy()])
    return out


def part_dependencies(plan: Any, schedule: BinSchedule, own: list[np.ndarray], halo: list[np.ndarray]) -> list:
    """``deps[k][b]`` of one rank (see :class:`BinPlan`): the ``(rank, bin)`` pairs of layer ``k - 1`` whose
    outputs bin ``b`` of layer ``k`` reads, sorted, each once.

    Args:
        plan: the rank's :class:`~workbench.layout.halo.HaloExchangePlan`.
        schedule: its bins.
        own: :func:`output_bins` of ``schedule``.
        halo: per layer, ``(num_halo,)`` the bin of each halo row at its owner (halo order).
    """
    owner = np.concatenate([np.full(plan.num_inner, plan.rank, dtype=np.int64), plan.halo_owner.numpy()])
    deps = [[np.zeros((0, 2), dtype=np.int64)] * schedule.layers[0].num_bins]
    for k in range(1, len(schedule.layers)):
        bin_of = np.concatenate([own[k - 1], np.asarray(halo[k - 1], dtype=np.int64)])
        base = int(bin_of.max()) + 1 if bin_of.size else 1
        rows = []
        for src in schedule.layers[k].src:
            s = src.numpy()
            pairs = np.unique(owner[s] * base + bin_of[s])
            rows.append(np.stack([pairs // base, pairs % base], 1))
        deps.append(rows)
    return deps


def _dependencies(num_nodes: int, shards: list, schedules: list[BinSchedule]) -> list:
    """Per layer, rank and bin: the ``(rank, bin)`` pairs of the previous layer whose outputs it reads (every
    rank's :func:`part_dependencies`, the halo rows' bins looked up at their owners in memory)."""
    own = [output_bins(s) for s in schedules]
    num_layers = len(schedules[0].layers)
    bin_of = np.empty((num_layers, num_nodes), dtype=np.int64)   # each vertex's bin at its owner, per layer
    for shard, bins in zip(shards, own):
        bin_of[:, shard.plan.inner_gid.numpy()] = np.stack(bins)
    per_rank = [part_dependencies(shard.plan, s, bins, bin_of[:, shard.plan.halo_gid.numpy()])
                for shard, s, bins in zip(shards, schedules, own)]
    return [[deps[k] for deps in per_rank] for k in range(num_layers)]


def plan_from_ranks(planned: list, widths_in: list[int], widths_out: list[int]) -> Optional[BinPlan]:
    """The :class:`BinPlan` of a run whose ranks planned their own bins
    (:class:`~workbench.train.bins_ranks.RankBins`, in rank order), for :func:`bins_summary`; ``None`` when
    they train whole parts."""
    if planned[0].schedule is None:
        return None
    num_layers = len(planned[0].schedule.layers)

    def by_layer(deps: list) -> list:
        return [[d[k] for d in deps] for k in range(num_layers)]

    return BinPlan(schedules=[p.schedule for p in planned], deps=by_layer([p.deps for p in planned]),
                   widths_in=list(widths_in), widths_out=list(widths_out),
                   consecutive=([p.consecutive[0] for p in planned], by_layer([p.consecutive[1] for p in planned])))


class BinnedStep:
    """How one full-graph forward runs under G3's bins: each layer's halo rows through the ``halo`` exchange's
    per-layer plan, then the layer bin by bin (exact), with each bin's compute and packing timed for the
    simulated pipelines (the step of :class:`~workbench.train.full_graph_loop.FullGraphSteps`)."""

    def __init__(self, schedule: BinSchedule, kernel: str):
        self.schedule = schedule
        self.build_s = schedule.build(kernel)                        # the bins' CSR blocks, built on the rank
        self.bin_times: list[list[list[float]]] = []     # per epoch, per layer, per bin: forward compute seconds
        self.bin_pack_times: list[list[list[float]]] = []  # ... and seconds gathering the bin's input block
        self.forward_s: list[float] = []
        self.backward_s: list[float] = []
        self._t_forward_end = 0.0

    def logits(self, model: Any, x: torch.Tensor, exchange: Any, node_ids: Any) -> torch.Tensor:
        timings: list[list[float]] = []
        packs: list[list[float]] = []
        t0 = time.perf_counter()
        logits = binned_forward(model, x, lambda h, layer: exchange.plan.exchange(h, exchange.comm, layer),
                                self.schedule, timings, packs)
        self._t_forward_end = time.perf_counter()
        self.forward_s.append(self._t_forward_end - t0)
        self.bin_times.append(timings)
        self.bin_pack_times.append(packs)
        return logits

    def after_backward(self) -> None:
        self.backward_s.append(time.perf_counter() - self._t_forward_end)

    def rank_fragments(self) -> dict[str, dict]:
        """The ``step`` fragment of the rank's result: the bins' timings (``g3_bins``)."""
        def per_epoch(epochs: list) -> list:                        # mean per layer and bin; the first epoch warms up
            times = epochs[1:] or epochs
            return [np.mean([e[k] for e in times], axis=0).tolist() for k in range(len(times[0]))] if times else []

        mean, packs = per_epoch(self.bin_times), per_epoch(self.bin_pack_times)
        fwd, pack = sum(sum(layer) for layer in mean), sum(sum(layer) for layer in packs)
        bwd = float(np.mean(self.backward_s[1:] or self.backward_s)) if self.backward_s else 0.0
        # the simulated backward replays each bin's pack, then its compute x ratio: together the measured backward
        return {"step": {"g3_bins": {"bin_compute_s": mean, "bin_pack_s": packs,
                                     "backward_ratio": max(bwd - pack, 0.0) / fwd if fwd > 0 else 1.0,
                                     "one_off_s": {"pack_s": self.schedule.pack_s, "build_s": self.build_s},
                                     "bins_per_layer": [lb.num_bins for lb in self.schedule.layers]}}}


def bin_costs(plan: BinPlan, rank_results: list[dict], *, consecutive: bool = False
              ) -> tuple[list[list[BinCosts]], float]:
    """Per layer and worker, the bins' :class:`BinCosts` from the plan and the ranks' measured times;
    ``consecutive``: of the plan's consecutive-id bins, each timed at its rank and layer's measured time per
    unit of work (edges + destination rows)."""
    results = sorted(rank_results, key=lambda r: r.get("rank", 0))
    schedules, deps = plan.consecutive if consecutive else (plan.schedules, plan.deps)
    layers = []
    for k, (f_in, f_out) in enumerate(zip(plan.widths_in, plan.widths_out)):
        row = []
        for r, s in enumerate(schedules):
            lb = s.layers[k]
            measured = _bins(results[r])["bin_compute_s"]
            packed = _bins(results[r])["bin_pack_s"]              # per epoch; packing the bins was one-off
            work = lb.num_edges + np.array([len(d) for d in lb.dst])
            if consecutive:
                done = plan.schedules[r].layers[k]
                done_work = float((done.num_edges + np.array([len(d) for d in done.dst])).sum())
                rate = float(np.sum(measured[k])) / done_work if measured and done_work > 0 else 0.0
                comp = rate * work.astype(float)
                done_rows = float(sum(len(x) for x in done.src))     # a block gathers the bin's source rows
                rate = float(np.sum(packed[k])) / done_rows if packed and done_rows > 0 else 0.0
                pack = rate * np.array([len(x) for x in lb.src], dtype=float)
            else:
                comp = np.asarray(measured[k], dtype=float) if measured else np.zeros(lb.num_bins)
                pack = np.asarray(packed[k], dtype=float) if packed else np.zeros(lb.num_bins)
            halo_rows = np.array([int((src >= len(lb.inverse)).sum()) for src in lb.src])
            row.append(BinCosts(pack_s=pack, h2d_bytes=(lb.footprint - 4 * np.array([len(d) for d in lb.dst]) * f_out)
                                + 12 * lb.num_edges, compute_s=comp,
                                d2h_bytes=4 * f_out * np.array([len(d) for d in lb.dst], dtype=float),
                                send_bytes=4 * f_out * lb.send_rows.astype(float),
                                back_bytes=4 * f_in * halo_rows.astype(float), deps=deps[k][r]))
        layers.append(row)
    ratio = float(np.mean([_bins(r)["backward_ratio"] for r in results]))
    return layers, ratio


def _bins(result: dict) -> dict:
    """A rank's bin timings (its ``step`` fragment's ``g3_bins``)."""
    return result["fragments"]["step"]["g3_bins"]


def bins_summary(plan: BinPlan, rank_results: list[dict], step: Any, num_params: int,
                 budget_auto: Optional[str] = None) -> dict:
    """The ``g3`` block of the run summary: bins and the simulated epoch of every pipeline variant.
    ``step`` is the run's ``binned`` step config, its ``memory_budget`` in bytes; ``memory_budget_auto`` says how ``auto`` sized it (None: given); ``one_off_s``:
    the slowest rank's packing and block building before training (not part of any simulated epoch)."""
    layers, ratio = bin_costs(plan, rank_results)
    # the paper's inter-layer ablation packs consecutive ids; the priority bins' figure is kept beside it
    own = {"inter": bin_costs(plan, rank_results, consecutive=True)[0]} if plan.consecutive is not None else {}
    sim = simulate_all(layers, ratio, 4 * num_params, variant_layers=own)
    inter_priority = simulate(layers, ratio, 4 * num_params, "inter")["epoch_s"] if own else sim["inter"]["epoch_s"]
    return {
        "bin_limit": bin_limit_of(step), "memory_budget": step.memory_budget, "memory_budget_auto": budget_auto,
        "pipeline": step.pipeline,
        "bins_per_layer": [[lb.num_bins for lb in s.layers] for s in plan.schedules],
        "max_bin_bytes": max(int(lb.footprint.max()) for s in plan.schedules for lb in s.layers),
        "backward_ratio": ratio,
        "one_off_s": max(_bins(r)["one_off_s"]["pack_s"] + _bins(r)["one_off_s"]["build_s"] for r in rank_results),
        "simulated_epoch_s": {v: sim[v]["epoch_s"] for v in sim},
        "idle_fraction": {v: sim[v]["idle_fraction"] for v in sim},
        "speedup_over_sequential": {v: sim[v]["speedup"] for v in sim},
        "simulated_epoch_s_chosen": sim[step.pipeline]["epoch_s"],
        "inter_bins": "consecutive ids (the paper's ablation; compute per unit of work measured on the executed "
                      "bins)" if plan.consecutive is not None else "priority (BFS, boundary first)",
        "simulated_epoch_s_inter_priority_bins": inter_priority,
    }
