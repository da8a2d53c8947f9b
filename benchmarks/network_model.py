"""Benchmark: does the network model predict the communication it measures?

On the emulated cluster (:mod:`workbench.runtime.netcluster`: hosts in network namespaces on a bridge,
every link shaped both ways with ``tbf``) at each link rate and host count, the benchmark

1. probes the links (``workbench netprobe``: ping-pong latency, bulk payload rate, duplex, the cost of one
   exchange call) and takes the calibrated :class:`~workbench.communicate.netmodel.NetworkModel`, before each
   recipe's run (``--probe each``, the default) or once per cluster (``--probe once``): the hosts share the
   machine's cores, and the cost of a call after a compute step (``call``, ``xchg``) follows the CPU load of the
   moment (1.2 ms and 5.3 ms for the same 1 Gbit/s exchange, probed minutes apart while another job ran), so a
   probe taken right before a run holds the load the run meets;
2. runs ``full_graph``, ``sancus`` and ``distdgl`` on the Dask workers of the hosts with that model as
   ``network=``, so the summary holds the measured ``comm_s`` and the modelled ``modelled_comm_s`` (the
   transport model: phases in sequence, full-duplex links, ring and tree rounds) per epoch;
3. prints, per case, the median measured and modelled seconds per epoch after the first epoch and their
   ratio (modelled / measured; target 0.75-1.25), the same calibration for every recipe. "Measured" is the
   run's ``comm_critical_s``: per collective call the time from the last rank's arrival to the last rank's
   return (before the last arrival the others only wait for it), summed over the epoch. That is what the model predicts; the summary's
   ``comm_s`` (the most any rank spent, the waits for a slower rank's compute included) is printed beside it
   as ``comm_s`` with its own ratio.

Beside them, as diagnostics: ``min-rank`` is the median over epochs of the *least* communication of any
rank (the summary's ``comm_s`` is the most: it holds the waits for a slower rank's compute, which no network
model sees), ``skew`` the median spread of the ranks' compute time (max - min over ranks), ``+skew`` the ratio
with that measured spread added to the model epoch by epoch (``comm_s`` is the epoch less the fastest rank's
compute, so ``model + skew`` is what it would read if the slowest rank's compute were the only wait), and the
1-minute load average while the case ran (the hosts are namespaces of one machine and share its cores, with
whatever else runs there).

Needs root (network namespaces, ``tc``); it says why and exits 0 elsewhere. With ``--priority`` (default
on) the cluster's processes get a higher CPU priority (their scheduling group's nice value, ``-10``) so other
work on a shared machine disturbs the emulated hosts less; it is theirs to lose on exit.

Usage::

    sudo python benchmarks/network_model.py                       # 3 recipes x hosts 2,3 x 100mbit,1gbit
    sudo python benchmarks/network_model.py --quick --json        # small graphs, fewer epochs
    sudo python benchmarks/network_model.py --links 1gbit --hosts 2 --recipes full_graph
    sudo python benchmarks/network_model.py --hosts 3 --busy-ms 0  # calls calibrated idle

``--busy-ms`` is what each rank computes before the probe's timed calls (``NetProbe(busy_s=...)``). On hosts
with cores of their own it hardly matters (2 hosts on this machine: 0.1 ms a call either way); on hosts that
share cores (3 on 2 here) a call after compute costs what the waking rank waits for a core, which depends on
the compute between a run's calls, so the table is given at both (docs/benchmarks.rst).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.runtime.netcluster import NetCluster, unavailable_reason  # noqa: E402

SBM = "sbm:num_nodes={n},num_blocks=8,avg_degree=10,num_features=64,seed=0"
# recipe -> (graph vertices, epochs); --quick halves both
CASES = {"full_graph": (10000, 9), "sancus": (10000, 9), "distdgl": (5000, 4)}
TARGET = (0.75, 1.25)


def recipe_config(name: str, quick: bool):
    from recipes import distdgl, full_graph, sancus

    n, epochs = CASES[name]
    if quick:
        n, epochs = n // 2, max(3, epochs // 2)
    make = {"full_graph": full_graph.recipe, "sancus": sancus.recipe, "distdgl": distdgl.recipe}[name]
    return make(graph=SBM.format(n=n), epochs=epochs)


def run_case(cluster: NetCluster, name: str, hosts: int, net, quick: bool) -> dict:
    from workbench.runtime import launch

    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    handle = launch(recipe_config(name, quick), runner="dask", scheduler=cluster.scheduler_address, workers=hosts,
                    out=None, timeout=60, network=net)
    s = handle.wait(timeout=900)
    epochs = len(s["comm_s"])
    ends = [e for e in handle.events if e.type == "epoch"]
    skip = 1 if epochs > 1 else 0
    per_epoch = {k: [e for e in ends if e.epoch == k] for k in range(skip, epochs)}
    sent: dict = {}
    for e in handle.events:
        if e.type == "traffic":
            sent[e.epoch] = sent.get(e.epoch, 0) + e.bytes
    measured = statistics.median(s["comm_critical_s"][skip:])
    most = statistics.median(s["comm_s"][skip:])
    modelled = statistics.median(s["modelled_comm_s"][skip:])
    skews = {k: max(e.compute_s for e in v) - min(e.compute_s for e in v) for k, v in per_epoch.items() if v}
    with_skew = statistics.median(s["modelled_comm_s"][k] + skews.get(k, 0.0) for k in range(skip, epochs))
    return {"recipe": name, "hosts": hosts, "link": cluster.bandwidth, "measured_s": measured, "modelled_s": modelled,
            "ratio": modelled / measured if measured else float("nan"),
            "comm_s": most, "ratio_comm_s": modelled / most if most else float("nan"),
            "min_rank_s": statistics.median(min(e.comm_s for e in v) for v in per_epoch.values() if v),
            "skew_s": statistics.median(skews.values()) if skews else 0.0,
            "ratio_with_skew": with_skew / most if most else float("nan"),
            "comm_s_by_epoch": s["comm_s"], "comm_critical_s_by_epoch": s["comm_critical_s"],
            "modelled_comm_s_by_epoch": s["modelled_comm_s"],
            "bytes_per_epoch": statistics.median(sent.get(k, 0) for k in range(skip, epochs)),
            "epochs": epochs, "wall_s": time.perf_counter() - t0, "load": max(load0, os.getloadavg()[0])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--links", default="100mbit,1gbit", help="link rates, comma-separated (tc units)")
    ap.add_argument("--hosts", default="2,3", help="host counts, comma-separated")
    ap.add_argument("--recipes", default=",".join(CASES), help="recipes, comma-separated")
    ap.add_argument("--quick", action="store_true", help="smaller graphs and fewer epochs")
    ap.add_argument("--bulk-mb", type=float, default=8.0, help="MB of the probe's bulk transfers (default 8)")
    ap.add_argument("--busy-ms", type=float, default=3.0,
                    help="ms each rank computes before the probe's timed calls (default 3; 0: idle calls)")
    ap.add_argument("--probe", choices=("each", "once"), default="each",
                    help="probe the links before each recipe's run (default: the calibration then holds the CPU "
                         "load the run meets) or once per cluster")
    ap.add_argument("--priority", action=argparse.BooleanOptionalAction, default=True,
                    help="raise the emulated hosts' CPU priority (default on)")
    ap.add_argument("--json", action="store_true", help="print the results as one JSON object")
    ap.add_argument("--save", type=Path, help="also write the results as JSON to this file")
    args = ap.parse_args(argv)
    reason = unavailable_reason()
    if reason is not None:
        print(f"network_model benchmark skipped: {reason}")
        return 0
    from workbench.communicate.netprobe import probe

    rows, probes = [], []
    out = sys.stderr if args.json else sys.stdout
    for link in args.links.split(","):
        for hosts in (int(h) for h in args.hosts.split(",")):
            with NetCluster(hosts=hosts, bandwidth=link) as cluster:
                if args.priority:
                    cluster.prioritise(-10)
                net = None
                for name in args.recipes.split(","):
                    if net is None or args.probe == "each":
                        pr = probe(scheduler=cluster.scheduler_address, workers=hosts,
                                   bulk_bytes=int(args.bulk_mb * 2**20), link_rate=link,
                                   busy_s=args.busy_ms / 1e3)
                        net = pr["model"]
                        probes.append({"link": link, "hosts": hosts, "before": name, "spec": net.spec,
                                       "model": net.to_dict(),
                                       **{k: v for k, v in pr.items() if k not in ("model", "spec")}})
                        print(f"probe {link} x {hosts}: --network {net.spec}  (payload "
                              f"{pr['payload_Bps'] / 1e6:.2f} MB/s)", file=out, flush=True)
                    rows.append(run_case(cluster, name, hosts, net, args.quick))
                    rows[-1]["spec"] = net.spec
                    r = rows[-1]
                    print(f"  {name}: measured {r['measured_s'] * 1e3:.1f} ms, modelled {r['modelled_s'] * 1e3:.1f} ms",
                          file=out, flush=True)
    ok = sum(TARGET[0] <= r["ratio"] <= TARGET[1] for r in rows)
    result = {"rows": rows, "probes": probes, "target": TARGET, "within_target": ok, "load_average": os.getloadavg(),
              "cores": os.cpu_count()}
    if args.save:
        args.save.write_text(json.dumps(result, indent=1))
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"\n{'recipe':<11}{'hosts':>5} {'link':>8} {'measured ms':>12} {'modelled ms':>12} {'ratio':>6}   "
          f"{'comm_s ms':>9} {'ratio':>6} {'min-rank ms':>11} {'skew ms':>8} {'+skew':>6} {'MB/epoch':>9} {'load':>5}")
    for r in rows:
        mark = "" if TARGET[0] <= r["ratio"] <= TARGET[1] else "  *"
        print(f"{r['recipe']:<11}{r['hosts']:>5} {r['link']:>8} {r['measured_s'] * 1e3:>12.1f} "
              f"{r['modelled_s'] * 1e3:>12.1f} {r['ratio']:>6.2f}   {r['comm_s'] * 1e3:>9.1f} "
              f"{r['ratio_comm_s']:>6.2f} {r['min_rank_s'] * 1e3:>11.1f} "
              f"{r['skew_s'] * 1e3:>8.1f} {r['ratio_with_skew']:>6.2f} {r['bytes_per_epoch'] / 1e6:>9.2f} "
              f"{r['load']:>5.1f}{mark}")
    print(f"\n{ok}/{len(rows)} within {TARGET[0]:.2f}-{TARGET[1]:.2f} (* outside); ratio = modelled / measured (the critical "
          f"path: per collective call, from the last rank's arrival to the last return), medians after the first epoch; {os.cpu_count()} cores, load average now "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
