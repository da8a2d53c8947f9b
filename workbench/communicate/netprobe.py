"""``workbench netprobe``: measure the links between the workers and print a calibrated network model.

The probe is a tiny SPMD :class:`~workbench.runtime.program.Program` run by the same runner as a training
run (``launch(..., runner="dask", scheduler=ADDR)``: one rank per Dask worker, a gloo process group over
the workers' own addresses), and it talks through the same counted communicator verbs the recipes use.
So what it measures is the transport the runs see: TCP through gloo, the Python call, the shaped link.

What it measures, rank 0 against every other rank ``j`` (one pair at a time, the others waiting):

* **latency**: ``pings`` ping-pongs of a 4-byte tensor (``send``/``recv``); the one-way latency is half the
  median round trip;
* **bandwidth**: ``bulk_bytes`` sent one way (``0 -> j`` and ``j -> 0``, ``repeats`` times each), the time to
  the 4-byte acknowledgement less one round trip; the payload rate is the median over pairs and repeats;
* **duplex**: the same transfer both ways at once (``isend`` and ``irecv`` on both ends): the payload rate
  each direction keeps, as a fraction of the one-way rate (1.0: a full-duplex link);
* **calls**: the time of an ``all_to_all`` of one-element pieces and of a one-element ``all_reduce`` (all
  ranks at once), ``rounds`` times each, first idle, then as runs make them: every rank computes for
  ``busy_s`` (small matrix products) before each call. A call's time is its critical time, from the last
  rank's arrival to the last return (:func:`~workbench.communicate.netmodel.critical_calls`), as the runs'
  ``comm_critical_s`` that the model predicts: the waits before it are for a slower rank's compute. What a call takes beyond its latency rounds
  is the model's ``call_s`` (from the all-reduce) and ``exchange_s`` (the all-to-all's extra): on dedicated
  cores it is small; on cores shared with other work a rank that computed up to a call is woken late from it.

The result is a :class:`~workbench.communicate.netmodel.NetworkModel` whose ``bandwidth_Bps`` is the payload
rate (``efficiency`` 1), or, when ``link_rate`` (the link's nominal rate, e.g. ``100mbit``) is given, whose
bandwidth is that rate and whose ``efficiency`` is the measured payload fraction. ``--network`` takes its
``spec`` (``11.9MB/s,85us``) or the JSON file ``--out`` writes.

Example (a cluster with two workers)::

    workbench netprobe --scheduler tcp://10.77.0.253:8786 --workers 2
    workbench netprobe --scheduler tcp://10.77.0.253:8786 --workers 2 --json --out net.json
    workbench run full_graph --runner dask --scheduler tcp://10.77.0.253:8786 --network net.json

The probe's own arithmetic:
    >>> m = {"rtt_s": [1e-3, 1.2e-3, 1e-3], "one_way": [(1_000_000, 0.101)], "both_ways": [(1_000_000, 0.1)],
    ...      "a2a_s": [2e-3], "allreduce_s": [1e-3], "a2a_busy_s": [4e-3], "allreduce_busy_s": [2e-3]}
    >>> summarize_probe(m, world_size=2)["model"].spec    # 1 MB in 0.1 s after a round trip; 2 ms - 2 rounds ...
    '10MB/s,500us,call=1ms,xchg=2.5ms'
    >>> summarize_probe(m, world_size=2, link_rate=12.5e6)["model"].spec
    '12.5MB/s,500us,eff=0.8,call=1ms,xchg=2.5ms'
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Optional

import torch

from workbench.communicate.netmodel import NetworkModel, critical_calls, parse_rate_Bps, rounds
from workbench.runtime.program import Program, RankContext

__all__ = ["NetProbe", "probe", "summarize_probe", "register", "run_cli"]

_KIND = "netprobe"


class NetProbe(Program):
    """The probe as a program (see the module docstring).

    Args:
        pings: ping-pongs per pair (latency).
        bulk_bytes: bytes of one bulk transfer (bandwidth; 8-64 MB keeps the start-up of TCP negligible).
        repeats: bulk transfers per direction and pair.
        rounds: one-element all-to-alls and all-reduces timed, idle and after a compute step.
        busy_s: seconds of compute before each call of the second kind (0: idle calls calibrate the model).
        link_rate: the link's nominal rate (bytes/s or ``100mbit``) to state the efficiency against.
    """

    name = "netprobe"

    def __init__(self, pings: int = 200, bulk_bytes: int = 8 << 20, repeats: int = 3, rounds: int = 50,
                 link_rate: Any = None, busy_s: float = 0.003):
        super().__init__(None)
        if pings < 1 or bulk_bytes < 1024 or repeats < 1 or rounds < 1:
            raise ValueError("NetProbe needs pings >= 1, bulk_bytes >= 1024, repeats >= 1, rounds >= 1; got "
                             f"pings={pings}, bulk_bytes={bulk_bytes}, repeats={repeats}, rounds={rounds}")
        self.pings, self.bulk_bytes, self.repeats, self.rounds = int(pings), int(bulk_bytes), int(repeats), int(rounds)
        self.link_rate = parse_rate_Bps(link_rate) if link_rate is not None else None
        self.busy_s = float(busy_s)

    def prepare(self, world_size: int, emit) -> list[Any]:
        return [None] * world_size

    def run_rank(self, ctx: RankContext, payload: Any) -> dict:
        comm, rank, p = ctx.comm, ctx.rank, ctx.world_size
        out: dict[str, list] = {"rtt_s": [], "one_way": [], "both_ways": [], "a2a_s": [], "allreduce_s": [],
                                "a2a_busy_s": [], "allreduce_busy_s": []}
        if p == 1:
            return out
        tiny = torch.zeros(1)
        bulk = torch.zeros(self.bulk_bytes // 4)
        comm.barrier()
        for j in range(1, p):
            if rank in (0, j):
                peer = j if rank == 0 else 0
                _ping_pong(comm, rank == 0, peer, tiny, 10)          # warm the connection
                rtts = _ping_pong(comm, rank == 0, peer, tiny, self.pings)
                if rank == 0:
                    out["rtt_s"] += rtts
                rtt = statistics.median(rtts) if rank == 0 else 0.0
                for sender in (0, j):
                    for _ in range(self.repeats):
                        seconds = _one_way(comm, rank == sender, peer, bulk, tiny)
                        if rank == sender:
                            out["one_way"].append((self.bulk_bytes, seconds))
                for _ in range(self.repeats):
                    seconds = _both_ways(comm, peer, bulk, tiny)
                    if rank == 0:
                        out["both_ways"].append((self.bulk_bytes, seconds - rtt / 2))
            comm.barrier()
        pieces = [torch.zeros(1) for _ in range(p)]
        work = torch.randn(64, 64)
        for busy, suffix in ((0.0, ""), (self.busy_s, "_busy")):
            if suffix and not busy:
                break
            for name, call in (("a2a", lambda: comm.all_to_all(pieces, kind=_KIND)),
                               ("allreduce", lambda: comm.all_reduce(torch.zeros(1), kind=_KIND))):
                comm.barrier()
                for _ in range(self.rounds):
                    _compute(work, busy)
                    t0 = time.time()
                    call()
                    out[f"{name}{suffix}_s"].append((t0, time.time()))
        return out

    def summarize(self, rank_results: list[dict]) -> dict:
        merged: dict[str, list] = {}
        for r in rank_results:
            for k, v in r.items():
                if k not in _CALLS:
                    merged.setdefault(k, []).extend(v)
        for k in _CALLS:   # per call, from the last rank's arrival to the last return (as a run's comm_critical_s)
            merged[k] = critical_calls([r[k] for r in rank_results])
        return summarize_probe(merged, world_size=len(rank_results), link_rate=self.link_rate)


_CALLS = ("a2a_s", "allreduce_s", "a2a_busy_s", "allreduce_busy_s")



def _compute(work: torch.Tensor, seconds: float) -> None:
    """Keep the core busy for ``seconds`` the way a training step does (torch kernels, the GIL released)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        torch.mm(work, work)


def _ping_pong(comm, first: bool, peer: int, tiny: torch.Tensor, n: int) -> list[float]:
    rtts = []
    buf = torch.empty_like(tiny)
    for _ in range(n):
        t0 = time.perf_counter()
        if first:
            comm.send(tiny, peer, kind=_KIND)
            comm.recv(buf, peer)
        else:
            comm.recv(buf, peer)
            comm.send(tiny, peer, kind=_KIND)
        rtts.append(time.perf_counter() - t0)
    return rtts


def _one_way(comm, sending: bool, peer: int, bulk: torch.Tensor, tiny: torch.Tensor) -> float:
    """Seconds from the start of a bulk send to the receiver's 4-byte acknowledgement (at the sender)."""
    t0 = time.perf_counter()
    if sending:
        comm.send(bulk, peer, kind=_KIND)
        comm.recv(torch.empty_like(tiny), peer)
    else:
        comm.recv(torch.empty_like(bulk), peer)
        comm.send(tiny, peer, kind=_KIND)
    return time.perf_counter() - t0


def _both_ways(comm, peer: int, bulk: torch.Tensor, tiny: torch.Tensor) -> float:
    t0 = time.perf_counter()
    got = torch.empty_like(bulk)
    works = [comm.irecv(got, peer), comm.isend(bulk, peer, kind=_KIND)]
    for w in works:
        w.wait()
    return time.perf_counter() - t0


def summarize_probe(m: dict, *, world_size: int, link_rate: Optional[float] = None) -> dict:
    """The probe's summary from its merged measurements: the calibrated ``model`` and the figures behind it.

    Returns:
        ``{"model": NetworkModel, "spec", "world_size", "latency_s", "rtt_s" (median), "rtt_min_s",
        "payload_Bps", "payload_rates_Bps", "duplex", "a2a_call_s", "allreduce_call_s", "a2a_busy_call_s",
        "allreduce_busy_call_s"}`` (the call times are medians; ``None`` where not measured).
    """
    rtt = statistics.median(m["rtt_s"])
    latency = rtt / 2
    rates = [n / max(s - rtt, 1e-9) for n, s in m["one_way"]]
    payload = statistics.median(rates)
    both = [n / max(s, 1e-9) for n, s in m["both_ways"]]
    duplex = min(1.0, statistics.median(both) / payload) if both else 1.0
    med = {k: statistics.median(m[k]) if m.get(k) else None for k in ("a2a_s", "allreduce_s", "a2a_busy_s",
                                                                        "allreduce_busy_s")}
    busy = med["allreduce_busy_s"] is not None
    ar, a2a = (med["allreduce_busy_s"], med["a2a_busy_s"]) if busy else (med["allreduce_s"], med["a2a_s"])
    call = max(0.0, ar - rounds("allreduce", world_size) * latency) if ar is not None else 0.0
    exchange = max(0.0, a2a - rounds("exchange", world_size) * latency - call) if a2a is not None else 0.0
    rate, eff = (float(link_rate), min(1.0, payload / link_rate)) if link_rate else (payload, 1.0)
    model = NetworkModel(latency, rate, "netprobe", efficiency=eff, duplex=duplex, call_s=call, exchange_s=exchange)
    return {"model": model, "spec": model.spec, "world_size": world_size, "latency_s": latency, "rtt_s": rtt,
            "rtt_min_s": min(m["rtt_s"]), "payload_Bps": payload, "payload_rates_Bps": sorted(rates),
            "duplex": duplex, "a2a_call_s": med["a2a_s"], "allreduce_call_s": med["allreduce_s"],
            "a2a_busy_call_s": med["a2a_busy_s"], "allreduce_busy_call_s": med["allreduce_busy_s"]}


def probe(*, scheduler: Any = None, workers: int = 2, runner: str = "dask", timeout: float = 60.0,
          scheduler_file: Any = None, **options: Any) -> dict:
    """Run the probe on ``workers`` ranks and return its summary (see :func:`summarize_probe`).

    Args:
        scheduler: the Dask scheduler's address (or a ``Client``; ``None``: an embedded local cluster).
        workers: ranks (one per worker).
        runner: ``dask`` (default) or ``local`` (thread ranks: the in-process channels, for tests).
        timeout: seconds a rank may wait for its peers.
        scheduler_file: instead of ``scheduler``, the scheduler's file (``launch(scheduler_file=...)``).
        options: :class:`NetProbe`'s arguments.
    """
    from workbench.runtime.launch import launch

    handle = launch(NetProbe(**options), runner=runner, workers=workers, scheduler=scheduler, out=None,
                    timeout=timeout, device="cpu", scheduler_file=scheduler_file)
    return handle.wait()


def _json_summary(summary: dict) -> dict:
    out = {k: v for k, v in summary.items() if k != "model"}
    out["model"] = summary["model"].to_dict()
    return out


def register(subparsers) -> None:
    """``workbench netprobe``."""
    p = subparsers.add_parser("netprobe", help="measure latency and bandwidth between the Dask workers and "
                                               "print a calibrated network model (for --network)",
                              description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", help="Dask scheduler address (default: an embedded local cluster)")
    where.add_argument("--scheduler-file", metavar="FILE", help="the Dask scheduler's file (instead of --scheduler)")
    p.add_argument("--workers", type=int, default=2, help="ranks, one per worker (default 2)")
    p.add_argument("--bulk-mb", type=float, default=8.0, help="MB of one bulk transfer (default 8)")
    p.add_argument("--pings", type=int, default=200, help="ping-pongs per pair (default 200)")
    p.add_argument("--repeats", type=int, default=3, help="bulk transfers per direction and pair (default 3)")
    p.add_argument("--busy-ms", type=float, default=3.0,
                   help="ms of compute before each timed call, as in a run (0: idle calls; default 3)")
    p.add_argument("--link-rate", help="the links' nominal rate (100mbit, 1gbit) to state the efficiency against")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a rank may wait for its peers")
    p.add_argument("--out", type=Path, help="also write the model as JSON here (--network takes the file)")
    p.add_argument("--json", action="store_true", help="print the whole summary as one JSON object")
    p.set_defaults(func=run_cli)


def run_cli(args: argparse.Namespace) -> int:
    from workbench._validation import ErrorCollector

    errs = ErrorCollector("workbench netprobe")   # the flags, named, before a cluster starts
    errs.check(args.workers >= 1, "--workers", "an int >= 1", args.workers)
    errs.check(args.bulk_mb * 2**20 >= 1024, "--bulk-mb", "a size >= 0.0009765625 (1 KiB)", args.bulk_mb)
    for flag, value in (("--pings", args.pings), ("--repeats", args.repeats)):
        errs.check(value >= 1, flag, "an int >= 1", value)
    errs.check(args.busy_ms >= 0, "--busy-ms", "a number >= 0", args.busy_ms)
    errs.check(args.timeout > 0, "--timeout", "a number > 0", args.timeout)
    errs.raise_if_any()
    if args.scheduler_file is not None:   # refused before anything starts, naming the option
        from workbench.runtime.dask_runner import scheduler_file_address

        scheduler_file_address(args.scheduler_file, "--scheduler-file", "workbench netprobe")
    summary = probe(scheduler=args.scheduler, scheduler_file=args.scheduler_file, workers=args.workers,
                    timeout=args.timeout, pings=args.pings,
                    bulk_bytes=int(args.bulk_mb * 2**20), repeats=args.repeats, link_rate=args.link_rate,
                    busy_s=args.busy_ms / 1e3)
    model: NetworkModel = summary["model"]
    if args.out is not None:
        args.out.write_text(json.dumps(model.to_dict(), indent=1) + "\n")
    if args.json:
        print(json.dumps(_json_summary(summary)))
        return 0
    print(f"latency   {summary['latency_s'] * 1e6:.0f} us one way (median round trip "
          f"{summary['rtt_s'] * 1e6:.0f} us, min {summary['rtt_min_s'] * 1e6:.0f} us)")
    print(f"bandwidth {summary['payload_Bps'] / 1e6:.2f} MB/s payload one way "
          f"({summary['payload_Bps'] * 8 / 1e6:.1f} Mbit/s); both ways at once {summary['duplex']:.0%} each")
    if summary["a2a_call_s"] is not None:
        busy = "" if summary["a2a_busy_call_s"] is None else (
            f"; after a compute step {summary['a2a_busy_call_s'] * 1e6:.0f} us and "
            f"{summary['allreduce_busy_call_s'] * 1e6:.0f} us")
        print(f"calls     1-element all_to_all {summary['a2a_call_s'] * 1e6:.0f} us, all_reduce "
              f"{summary['allreduce_call_s'] * 1e6:.0f} us idle{busy} ({summary['world_size']} ranks)")
    print(f"model     {model}")
    print(f"use       --network {model.spec}" + (f"  (or --network {args.out})" if args.out else ""))
    return 0


if __name__ == "__main__":   # pragma: no cover
    parser = argparse.ArgumentParser(prog="workbench netprobe")
    sub = parser.add_subparsers()
    register(sub)
    sys.exit(run_cli(parser.parse_args(["netprobe", *sys.argv[1:]])))
