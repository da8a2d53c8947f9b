"""Time claims measured on emulated hosts: DistDGL's partition ablation and PSC-GCN's per-iteration speed-ups.

The modelled time claims of :mod:`reproduce.distdgl` (a network model at 100 Gbit/s that never charges
the owner's sampling work) and :mod:`reproduce.psc_gcn` (a discrete-event account at a chosen
``comm_ratio``) are measured here as real seconds instead: the recipes run as Dask ranks on the hosts of
:class:`~workbench.runtime.netcluster.NetCluster` (network namespaces on a bridge, each host's link shaped both
ways with ``tbf``, one rank per host, each host on a core of its own where the machine has one per host), so
every sample request, feature pull, halo row and all-reduce crosses a real, rate-limited TCP link and every
owner computes what it is asked.

**Hosts and links** (:data:`HOSTS`, :data:`LINK`): 2 hosts, 100 Mbit/s links, for both systems. Two hosts are the
fewest where a partition has a remote side, and the most this 2-core machine gives a core each (a third host
would share a core, and a rank waiting for its core would read as communication). 100 Mbit/s because at it the
links carry a visible share of the time on this machine's compute: a DistDGL epoch on the quick graph sends about
3.5 MB a link in training traffic (0.3 s at 100 Mbit/s, 0.03 s at 1 Gbit/s, against 0.1-0.3 s of compute per
epoch on one core), and a synchronous PSC-GCN iteration about 0.57 MB a link (45 ms, or 4.5 ms at 1 Gbit/s,
against 5-10 ms of compute); at 1 Gbit/s DistDGL's communication would sit inside the noise of a shared machine.
The papers' own networks (100 Gbit/s for DistDGL, 15 Gbit/s for PSC-GCN) serve machines that compute orders
of magnitude faster than one core here. The rate follows from that rule (the runs' bytes against their compute),
not from the ratios it gives, and each result reports its measured communication share (``comm_share``) so the
rule can be checked.

**Graphs**: the graphs of the modelled claims, so the two stand side by side: DistDGL on products-like with
3,000 vertices (quick) and 10,000 (full), and for the papers100M inversion on papers-like (labels in 8 of 172
communities) with 10,000 and 40,000, the recipe's model and fan-outs (15, 10, 5), batches of
``n_train / (hosts x 4)`` seeds (4 steps a trainer, as the modelled claims give their trainers), the
validation and test splits cut to their first 32 vertices (evaluation is not measured; it only costs wall
time); PSC-GCN on the recipe's 3,000-vertex power-law SBM with its GCN 2 x 32.

**What is measured**: per run, each epoch's (DistDGL) or iteration's (PSC-GCN) training seconds: the slowest
rank's wall time of the epoch less its ``evaluate`` phase (the rank's exclusive phases sum to its wall time);
the claim's time is the median after the first epoch (DistDGL) or the first 2 iterations (PSC-GCN: the
warm-up of τ = 2). DistDGL compares METIS, random and multi-constraint METIS partitions (``partition``:
:class:`~workbench.partition.MetisPartitioner` with and without ``balance_train``,
:class:`~workbench.partition.RandomPartitioner`); PSC-GCN its ``sync`` (ε = 1, τ = 0), ``pipegcn`` (ε = 1,
τ = 1), ``psc`` (ε = 0.1, τ = 2, inclusion cache of 30 %), ``psc`` with τ = 1 and ``psc`` with ε = 0.01. Each seed (``seed``: weights,
partitioner and sampler; the graph stays) runs every variant once, the variants' order rotated by one from
seed to seed so that no variant always runs first after a quiet or busy spell.

What the measurement cannot show: at these sizes a 3-hop sample with fan-outs 15, 10, 5 spans most of the
graph, so METIS's locality saves DistDGL only 14-23 % of the training bytes against random (about 16 MB
against 21 MB an epoch at 10,000 vertices, 6.7 against 7.7 MB at 3,000); and the
recipe's balanced split already gives every trainer an equal share of seeds, so multi-constraint balance can
only act through locality. The ``prefetch`` exchange sends and receives in the rank's one thread
(blocking ``all_to_all`` calls), so pipelining (PipeGCN's τ = 1, PSC-GCN's τ = 2) hides no communication behind
compute here; a measured speed-up of ``pipegcn`` or of τ = 2 over τ = 1 can only come from noise or from bytes,
and ``psc``'s from the bytes its sampling and cache save. The model of :mod:`reproduce.psc_gcn` is
where the overlap is accounted.

Needs root (network namespaces, ``tc``): elsewhere both functions return the reason as a string. One cluster per
call, started once for all its runs. Quick mode (DistDGL 4 epochs, PSC-GCN 30 iterations) takes about a minute
for both functions with one seed, and the papers-like DistDGL runs 40 s more; full mode (10,000 vertices and 5
epochs, 40 iterations) about 3.5 minutes with three seeds, and the papers-like runs a few minutes more. The machine may be shared: each result records the load average at its start and end.

Example:
    >>> setting("distdgl", quick=True)
    'products-like 3000 vertices, 2 hosts at 100mbit (one rank each), 4 epochs, median after the first'
    >>> setting("psc_gcn", quick=False)
    'psc_gcn sbm 3000 vertices, 2 hosts at 100mbit (one rank each), 40 iterations, median after the first 2'
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any, Optional, Sequence, Union

__all__ = ["HOSTS", "LINK", "DISTDGL_VARIANTS", "PAPERS_VARIANTS", "PSC_VARIANTS", "distdgl_epochs", "psc_epochs", "setting",
           "figures"]

HOSTS = 2
"""Emulated hosts (one rank each)."""
LINK = "100mbit"
"""Each host's link rate, both ways (``tc`` units)."""
DISTDGL_VARIANTS = ("metis", "random", "metis+mc")
"""DistDGL's partitions: METIS, random, METIS with multi-constraint balance (``balance_train``)."""
PAPERS_VARIANTS = ("metis", "random", "metis+mc", "metis own", "random own")
"""DistDGL's partitions on papers-like: the three of :data:`DISTDGL_VARIANTS` under the balanced split, then
METIS and random with ``sample.split=own``."""
PSC_VARIANTS = ("sync", "pipegcn", "psc", "psc tau=1", "psc eps=0.01")
"""PSC-GCN's runs: synchronous, PipeGCN (ε = 1, τ = 1), PSC (ε = 0.1, τ = 2), PSC with τ = 1, PSC with ε = 0.01
(the paper's per-update speed-up row)."""
SWITCH = "WORKBENCH_REPRODUCE_EMULATED"
"""Environment variable: ``0`` runs no emulated cluster (the time claims are then not reproducible, saying so).
The test suite sets it for the quick reproduction it runs beside the browser tests: adding a network namespace
and veth pair changes the host's interfaces, and chromium aborts its page loads when they change; the emulated
runs have their own test in the browser's group."""
EVAL_VERTICES = 32
SKIP = {"distdgl": 1, "psc_gcn": 2}
"""Epochs (iterations) left out of the median: the first (JIT compilation, first touches), and for PSC-GCN the
warm-up of τ = 2."""


def _scale(system: str, quick: bool) -> tuple[int, int]:
    """(graph vertices, epochs or iterations)."""
    if system == "distdgl":
        return (3000, 4) if quick else (10000, 5)
    if system == "distdgl papers":
        return (10000, 4) if quick else (40000, 5)
    return 3000, (30 if quick else 40)


def setting(system: str, quick: bool) -> str:
    """One line on what a run of ``system`` (``distdgl`` or ``psc_gcn``) measures."""
    n, epochs = _scale(system, quick)
    skip = SKIP[system.split()[0]]
    unit = "iteration" if system == "psc_gcn" else "epoch"
    graph = {"distdgl": "products-like", "distdgl papers": "papers-like (labelled_blocks=8)"}.get(system,
                                                                                                 "psc_gcn sbm")
    after = "the first" if skip == 1 else f"the first {skip}"
    return (f"{graph} {n} vertices, {HOSTS} hosts at {LINK} (one rank each), {epochs} {unit}s, "
            f"median after {after}")


def figures(summary: dict, skip: int) -> dict:
    """The measured figures of one run's summary: per epoch the slowest rank's training seconds (its wall time
    less its ``evaluate`` phase), their median after the first ``skip`` epochs, the summary's epoch times
    (evaluation included), the share of them in communication, and the training bytes per epoch (every kind
    but evaluation's, the metrics and control messages; all ranks).

    Example:
        >>> tb = {"by_rank": [{"forward": [0.5, 0.2, 0.3], "evaluate": [0.1, 0.1, 0.1]},
        ...                   {"forward": [0.4, 0.25, 0.2], "evaluate": [0.2, 0.1, 0.1]}]}
        >>> s = {"epochs": 3, "time_breakdown": tb, "epoch_times": [0.6, 0.35, 0.4], "comm_s": [0.3, 0.1, 0.2],
        ...      "bytes_by_kind": {"halo_fwd": 300, "eval_halo": 90, "metrics": 3}, "accuracy_by_epoch": {}}
        >>> f = figures(s, 1)
        >>> f["times_s"], f["median_s"], f["train_bytes"], round(f["comm_share"], 3)
        ([0.5, 0.25, 0.3], 0.275, 100.0, 0.393)
    """
    n = int(summary["epochs"])
    by_rank = summary["time_breakdown"]["by_rank"]
    times = [max(sum(v[e] for phase, v in rank.items() if phase != "evaluate") for rank in by_rank)
             for e in range(n)]
    keep = slice(skip, None) if n > skip else slice(None)
    walls, comm = summary["epoch_times"], summary["comm_s"]
    train_bytes = sum(b for k, b in summary["bytes_by_kind"].items()
                      if not k.startswith("eval") and k not in ("metrics", "control")) / max(n, 1)
    return {"median_s": statistics.median(times[keep]), "times_s": [round(t, 6) for t in times],
            "wall_median_s": statistics.median(walls[keep]),
            "comm_share": statistics.median([c / w for c, w in zip(comm[keep], walls[keep]) if w > 0] or [0.0]),
            "train_bytes": train_bytes,
            "steps": (summary.get("steps") or [None])[0],
            "val_acc": list((summary.get("accuracy_by_epoch") or {}).get("val") or [])}


def _launch(cluster, cfg) -> dict:
    from workbench.runtime import launch

    return launch(cfg, runner="dask", scheduler=cluster.scheduler_address, workers=HOSTS, out=None, timeout=60,
                  device="cpu").wait(timeout=900)


def _rotated(names: Sequence[str], i: int) -> list[str]:
    k = i % len(names)
    return list(names[k:]) + list(names[:k])


def _measure(system: str, configs, seeds: Sequence[int], variants: Sequence[str]) -> dict:
    """Start one cluster, run ``configs(seed)[variant]`` for every seed and variant; the per-seed figures."""
    from workbench.runtime.netcluster import NetCluster

    skip = SKIP[system]
    load = [os.getloadavg()[0]]
    start = time.perf_counter()
    per_seed = []
    with NetCluster(hosts=HOSTS, bandwidth=LINK) as cluster:
        described = repr(cluster)
        for i, seed in enumerate(seeds):
            cfgs = configs(seed)
            runs = {name: figures(_launch(cluster, cfgs[name]), skip) for name in _rotated(variants, i)}
            per_seed.append({"seed": int(seed), "variants": {name: runs[name] for name in variants}})
    load.append(os.getloadavg()[0])
    return {"per_seed": per_seed, "cluster": described, "load_average": load,
            "wall_s": round(time.perf_counter() - start, 2)}


def _unavailable() -> Optional[str]:
    from workbench.runtime.netcluster import unavailable_reason

    if os.environ.get(SWITCH) == "0":
        return f"the emulated cluster is switched off here ({SWITCH}=0)"
    return unavailable_reason()


def _distdgl_graph(spec: str):
    import torch

    from workbench.data import load_graph

    g = load_graph(spec)

    def first(mask):
        keep = torch.zeros_like(mask)
        keep[torch.nonzero(mask).flatten()[:EVAL_VERTICES]] = True
        return keep

    return g.with_data(val_mask=first(g.val_mask), test_mask=first(g.test_mask))


def distdgl_epochs(quick: bool = True, seeds: Sequence[int] = (0,), graph: str = "products") -> Union[dict, str]:
    """DistDGL's epoch time per partition, measured on :data:`HOSTS` emulated hosts with :data:`LINK` links (see
    the module docstring); the reason as a string where the emulated cluster cannot run.

    ``graph="products"``: products-like, :data:`DISTDGL_VARIANTS` (METIS, random, multi-constraint METIS) under
    the recipe's balanced split. ``graph="papers"``: papers-like with its labels in 8 of 172 communities
    (``labelled_blocks=8``, the skew behind the paper's papers100M inversion), :data:`PAPERS_VARIANTS`: the three
    partitions under the balanced split and METIS and random with ``sample.split=own`` (each trainer its part's
    training vertices: the imbalance the paper blames).

    Returns:
        ``{"system": "distdgl", "setting": {...}, "variants": [...], "seeds": [...],
        "per_seed": [{"seed": s, "variants": {name: figures}}], "ratios": {"random/metis": [per seed],
        "metis/metis+mc": [per seed], ...}, "cluster": repr, "load_average": [start, end], "wall_s": s}``, with
        ``figures`` as :func:`figures` gives them (``median_s``: the epoch time of the claims); papers adds
        ``metis/random``, ``metis+mc/random`` and ``metis own/random own``.
    """
    reason = _unavailable()
    if reason is not None:
        return reason
    from recipes import distdgl
    from workbench.partition import MetisPartitioner, RandomPartitioner

    n, epochs = _scale("distdgl" if graph == "products" else "distdgl papers", quick)
    spec = (f"products-like:num_nodes={n},seed=0" if graph == "products"
            else f"papers-like:num_nodes={n},labelled_blocks=8,seed=0")
    g = _distdgl_graph(spec)
    n_train = int(g.train_mask.sum())
    batch = max(1, n_train // (HOSTS * 4))
    parts = {"metis": lambda s: MetisPartitioner.Config(seed=s), "random": lambda s: RandomPartitioner.Config(seed=s),
             "metis+mc": lambda s: MetisPartitioner.Config(seed=s, balance_train=True)}
    variants = DISTDGL_VARIANTS if graph == "products" else PAPERS_VARIANTS

    def configs(seed):
        out = {}
        for name in variants:
            base, _, own = name.partition(" ")
            cfg = distdgl.recipe(graph=g, epochs=epochs, num_parts=HOSTS, sample={"batch_size": batch},
                                 partition=parts[base](seed)).replace(seed=seed)
            out[name] = cfg.with_strings({"sample.split": "own"}) if own else cfg
        return out

    out = _measure("distdgl", configs, seeds, variants)
    t = [{k: v["median_s"] for k, v in r["variants"].items()} for r in out["per_seed"]]
    ratios = {"random/metis": [x["random"] / x["metis"] for x in t],
              "metis/metis+mc": [x["metis"] / x["metis+mc"] for x in t]}
    if graph != "products":
        ratios = {"metis/random": [x["metis"] / x["random"] for x in t],
                  "metis+mc/random": [x["metis+mc"] / x["random"] for x in t],
                  "metis own/random own": [x["metis own"] / x["random own"] for x in t]}
    return {"system": "distdgl",
            "setting": {"text": setting("distdgl" if graph == "products" else "distdgl papers", quick),
                        "hosts": HOSTS, "link": LINK, "ranks": HOSTS,
                        "graph": spec, "vertices": g.num_nodes,
                        "edges": g.num_edges, "features": g.num_features, "train_vertices": n_train,
                        "eval_vertices": EVAL_VERTICES, "batch": batch, "fanouts": [15, 10, 5], "epochs": epochs,
                        "skip": SKIP["distdgl"], "cores": os.cpu_count(),
                        "measure": "slowest rank's training seconds per epoch (evaluation left out), median"},
            "variants": variants, "seeds": [int(s) for s in seeds], "per_seed": out["per_seed"],
            "ratios": ratios, "cluster": out["cluster"], "load_average": out["load_average"], "wall_s": out["wall_s"]}


def _to_target(r: dict, target: float) -> Optional[float]:
    """Seconds to ``target`` validation accuracy: iterations until it is first reached x the measured median
    seconds per iteration (None when never)."""
    reached = next((i for i, a in enumerate(r["val_acc"]) if a is not None and a >= target), None)
    return None if reached is None else (reached + 1) * r["median_s"]


def psc_epochs(quick: bool = True, seeds: Sequence[int] = (0,)) -> Union[dict, str]:
    """PSC-GCN's seconds per iteration for ``sync``, ``pipegcn``, ``psc`` (τ = 2), ``psc tau=1`` and
    ``psc eps=0.01``, measured on
    :data:`HOSTS` emulated hosts with :data:`LINK` links (see the module docstring); the reason as a string
    where the emulated cluster cannot run.

    Returns:
        ``{"system": "psc_gcn", "setting": {...}, "variants": PSC_VARIANTS, "seeds": [...],
        "per_seed": [{"seed": s, "variants": {name: figures}}], "ratios": {"sync/psc": [per seed],
        "sync/psc eps=0.01": [...], "sync/pipegcn": [...], "tau2_vs_tau1": [1 - t(τ=2) ÷ t(τ=1)], "convergence sync/psc": [...]},
        "cluster": repr, "load_average": [start, end], "wall_s": s}`` with ``figures`` as :func:`figures` gives
        them (``median_s``: seconds per iteration). The convergence ratio is sync's time to 95 % of its best
        validation accuracy over PSC's, each the iterations to it x its measured median seconds per iteration
        (None where PSC never reaches it in the run).
    """
    reason = _unavailable()
    if reason is not None:
        return reason
    from recipes import psc_gcn

    n, iterations = _scale("psc_gcn", quick)

    def configs(seed):
        kw = dict(epochs=iterations, num_parts=HOSTS, seed=seed)
        return {"sync": psc_gcn.sync(**kw), "pipegcn": psc_gcn.pipegcn(**kw), "psc": psc_gcn.recipe(**kw),
                "psc tau=1": psc_gcn.recipe(**kw).with_strings({"exchange.tau": "1"}),
                "psc eps=0.01": psc_gcn.recipe(**kw).with_strings({"sample.epsilon": "0.01"})}

    out = _measure("psc_gcn", configs, seeds, PSC_VARIANTS)
    ratios: dict[str, list] = {"sync/psc": [], "sync/psc eps=0.01": [], "sync/pipegcn": [], "tau2_vs_tau1": [],
                               "convergence sync/psc": []}
    for r in out["per_seed"]:
        v = r["variants"]
        ratios["sync/psc"].append(v["sync"]["median_s"] / v["psc"]["median_s"])
        ratios["sync/psc eps=0.01"].append(v["sync"]["median_s"] / v["psc eps=0.01"]["median_s"])
        ratios["sync/pipegcn"].append(v["sync"]["median_s"] / v["pipegcn"]["median_s"])
        ratios["tau2_vs_tau1"].append(1 - v["psc"]["median_s"] / v["psc tau=1"]["median_s"])
        accs = [a for a in v["sync"]["val_acc"] if a is not None]
        target = 0.95 * max(accs) if accs else float("nan")
        t_sync, t_psc = _to_target(v["sync"], target), _to_target(v["psc"], target)
        ratios["convergence sync/psc"].append(t_sync / t_psc if t_sync and t_psc else None)
    return {"system": "psc_gcn",
            "setting": {"text": setting("psc_gcn", quick), "hosts": HOSTS, "link": LINK, "ranks": HOSTS,
                        "graph": psc_gcn.DEFAULT_GRAPH, "vertices": n, "iterations": iterations,
                        "skip": SKIP["psc_gcn"], "cores": os.cpu_count(),
                        "measure": "slowest rank's training seconds per iteration (evaluation left out), median"},
            "variants": PSC_VARIANTS, "seeds": [int(s) for s in seeds], "per_seed": out["per_seed"],
            "ratios": ratios, "cluster": out["cluster"], "load_average": out["load_average"], "wall_s": out["wall_s"]}


def _print(result: Any) -> None:   # pragma: no cover - a person's view of one result
    if isinstance(result, str):
        print(result)
        return
    print(result["setting"]["text"], f"({result['wall_s']} s, load {result['load_average']})")
    for r in result["per_seed"]:
        print(f"  seed {r['seed']}: " + ", ".join(
            f"{k} {v['median_s'] * 1e3:.1f} ms (comm {v['comm_share']:.0%}, {v['train_bytes'] / 1e6:.2f} MB)"
            for k, v in r["variants"].items()))
    for k, v in result["ratios"].items():
        print(f"  {k}: " + ", ".join("-" if x is None else f"{x:.3f}" for x in v))


if __name__ == "__main__":   # pragma: no cover
    import sys

    full = "--full" in sys.argv
    chosen = tuple(int(s) for s in os.environ.get("SEEDS", "0,1,2" if full else "0").split(","))
    for fn in (distdgl_epochs, psc_epochs):
        _print(fn(quick=not full, seeds=chosen))
