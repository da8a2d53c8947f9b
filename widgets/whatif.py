"""What-if: a run's epoch time on other networks, its compute measured and its communication modelled.

Per epoch of a run, **compute** is the slowest rank's ``compute_s`` (its wall time less its time blocked in
communication) and **communication** the transport model (:func:`workbench.communicate.netmodel.transport_seconds`:
the epoch's exchanges in order, full-duplex links, the algorithms' latency rounds) of the epoch's counted
traffic: the ranks' :class:`~workbench.events.Traffic` records, exact bytes and messages per link, kind and layer.
The modelled epoch on a network is their sum; a run's figure is the median over its epochs after the first
(the first pays warm-up, and a first-layer cache's pinning).

The presets (1GbE, 10GbE, 25GbE, 100GbE, NVLink) have efficiency 1, full duplex and no per-call costs, where the
transport model is linear in the latency and in 1 / bandwidth: per epoch ``comm = rounds_s * latency +
byte_s / bandwidth``, ``rounds_s`` the epoch's latency-bound rounds and ``byte_s`` its busiest-link bytes
summed over its phases. Two evaluations of the model give both (:class:`CommCoefficients`), and every preset
and every point of a bandwidth sweep follows exactly (tested against ``transport_seconds``); a calibrated
model (``workbench netprobe``: efficiency, call costs) is evaluated by ``transport_seconds`` itself.

:func:`sweep_seconds` runs over link bandwidths from 80 Mbit/s to NVLink's 300 GB/s, the latency interpolated
between the presets' (log-log, so the curves pass through the preset points); :func:`crossovers` finds where
two runs' curves cross: below such a bandwidth one run is faster, above it the other (e.g. where SANCUS's
skipped broadcasts pay for its extra compute).

Example:
    >>> from widgets.store import RunStore
    >>> from widgets.synthetic import fabricate_run
    >>> heavy = WhatIf(RunStore(events=fabricate_run(run_id="heavy", epochs=4, byte_scale=2000.0)))
    >>> light = WhatIf(RunStore(events=fabricate_run(run_id="light", epochs=4, epoch_s=0.6)))
    >>> heavy.epoch_seconds("1GbE") > light.epoch_seconds("1GbE"), heavy.epoch_seconds("nvlink") < \
light.epoch_seconds("nvlink")
    (True, True)
    >>> [f"{x * 8 / 1e9:.2f} Gbit/s" for x in crossovers(heavy, light)]
    ['1.43 Gbit/s']
"""

from __future__ import annotations

import html
import math
from typing import Any, Optional, Union

import numpy as np
import pandas as pd

from widgets.store import _no_gc
from workbench.communicate.netmodel import (NETWORK_PRESETS, NetworkModel, resolve_network, transport_seconds,
                                            transport_seconds_each)

__all__ = ["CommCoefficients", "WhatIf", "GRID_BPS", "latency_for", "sweep_seconds", "crossovers", "is_linear",
           "preset_label", "format_rate", "whatif_table"]

#: the sweep's link bandwidths (bytes/s, one direction): 80 Mbit/s .. NVLink's 300 GB/s, log-spaced
GRID_BPS = np.logspace(7.0, math.log10(NETWORK_PRESETS["nvlink"].bandwidth_Bps), 161)
_UNIT_LATENCY = NetworkModel(latency_s=1.0, bandwidth_Bps=1e300, name="rounds")   # comm = rounds (s per s)
_UNIT_BANDWIDTH = NetworkModel(latency_s=0.0, bandwidth_Bps=1.0, name="bytes")    # comm = busiest bytes
_PRESET_BPS = np.log([m.bandwidth_Bps for m in sorted(NETWORK_PRESETS.values(), key=lambda m: m.bandwidth_Bps)])
_PRESET_LAT = np.log([m.latency_s for m in sorted(NETWORK_PRESETS.values(), key=lambda m: m.bandwidth_Bps)])


def is_linear(net: NetworkModel) -> bool:
    """Whether the transport model on ``net`` is ``rounds * latency + bytes / bandwidth`` (every preset is)."""
    return net.efficiency == 1.0 and net.duplex == 1.0 and net.call_s == 0.0 and net.exchange_s == 0.0


def latency_for(bandwidth_Bps: Union[float, np.ndarray]) -> Union[float, np.ndarray]:
    """The sweep's latency at a bandwidth: the presets' latencies interpolated log-log (constant beyond them).

    Example:
        >>> round(latency_for(1.25e9) * 1e6, 6), round(latency_for(1e7) * 1e6, 6)     # 10GbE's; below 1GbE: 1GbE's
        (20.0, 50.0)
    """
    out = np.exp(np.interp(np.log(bandwidth_Bps), _PRESET_BPS, _PRESET_LAT))
    return float(out) if np.ndim(out) == 0 else out   # a Python float for one bandwidth (numpy 2 prints its own)


def format_rate(bandwidth_Bps: float) -> str:
    """A link rate in bits, as Ethernet is sold (``1 Gbit/s``, ``100 Mbit/s``, ``2.4 Tbit/s``).

    Example:
        >>> format_rate(1.25e8), format_rate(1.25e7), format_rate(3e11)
        ('1 Gbit/s', '100 Mbit/s', '2.4 Tbit/s')
    """
    bits = bandwidth_Bps * 8
    for unit, scale in (("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits >= scale:
            return f"{bits / scale:.3g} {unit}"
    return f"{bits:.3g} bit/s"


def preset_label(name: str) -> str:
    return "NVLink" if name == "nvlink" else name


class CommCoefficients:
    """Per epoch, ``rounds_s`` and ``byte_s`` of the transport model on a run's traffic (module docstring),
    kept up to date incrementally: traffic arrives in epoch order, so only the epochs from the first one a new
    record touches are modelled again.

    Example:
        >>> from workbench.events import Traffic
        >>> halo = [Traffic(epoch=0, src_rank=s, dst_rank=1 - s, kind="halo_fwd", layer=0, bytes=10**6,
        ...                 messages=1) for s in (0, 1)]
        >>> c = CommCoefficients()
        >>> c.update(pd.DataFrame([vars(e) for e in halo]), world_size=2)
        >>> c.rounds_s, c.byte_s            # 1 latency round, 1 MB through the busiest link
        ({0: 1.0}, {0: 1000000.0})
        >>> round(c.seconds(0, resolve_network("10GbE")), 9) == round(transport_seconds(halo, "10GbE")[0], 9)
        True
    """

    def __init__(self) -> None:
        self.rows = 0
        self.world_size: Optional[int] = None
        self.rounds_s: dict[int, float] = {}
        self.byte_s: dict[int, float] = {}

    def update(self, traffic: pd.DataFrame, world_size: Optional[int] = None) -> None:
        """Take in the rows of ``traffic`` (a store's ``traffic`` frame, arrival order) not seen yet."""
        ws = int(world_size) if world_size else None
        if len(traffic) < self.rows or ws != self.world_size:   # another run, or the world size came late
            self.__init__()
            self.world_size = ws
        if len(traffic) == self.rows:
            return
        new = traffic.iloc[self.rows:]
        first = int(new["epoch"].min())
        span = traffic["num_epochs"].fillna(1).clip(lower=1) if "num_epochs" in traffic else 1
        part = traffic[traffic["epoch"] + span - 1 >= first]
        with _no_gc():   # thousands of small objects over a store of many: the collector would cost a third
            rounds, nbytes = transport_seconds_each(part.to_dict("records"), [_UNIT_LATENCY, _UNIT_BANDWIDTH],
                                                    world_size=ws)
        for table, fresh in ((self.rounds_s, rounds), (self.byte_s, nbytes)):
            for e in [e for e in table if e >= first]:
                del table[e]
            table.update({int(e): float(v) for e, v in fresh.items() if e >= first})
        self.rows = len(traffic)

    def seconds(self, epoch: int, net: NetworkModel) -> float:
        """Modelled communication of ``epoch`` on a linear ``net`` (:func:`is_linear`)."""
        return self.rounds_s.get(epoch, 0.0) * net.latency_s + self.byte_s.get(epoch, 0.0) / net.bandwidth_Bps


class WhatIf:
    """A run's measured compute and modelled communication per epoch, on any network.

    Args:
        store: the run (a :class:`~widgets.store.RunStore`).
        complete: only epochs below this (default: every epoch all ranks finished).
    """

    def __init__(self, store: Any, complete: Optional[int] = None, coefficients: Optional[CommCoefficients] = None):
        self.store = store
        self.run_id = store.run_id
        self.coefficients = coefficients or CommCoefficients()
        self.coefficients.update(store.frame("traffic"), store.world_size or None)
        e = store.frame("epoch")
        world = max(int(store.world_size or 0), int(e["rank"].nunique()) if len(e) else 0)
        if len(e):
            g = e.groupby("epoch")
            per = pd.DataFrame({"ranks": g["rank"].nunique(), "compute_s": g["compute_s"].max(),
                                "comm_s": g["comm_s"].max(), "wall_s": g["wall_s"].max()})
            per = per[per["ranks"] >= world]
            if complete is not None:
                per = per[per.index < complete]
        else:
            per = pd.DataFrame(columns=["ranks", "compute_s", "comm_s", "wall_s"])
        epochs = per.index.to_numpy(dtype=np.int64)
        if len(epochs) > 1:
            keep = epochs != epochs.min()   # the first epoch: warm-up
            per, epochs = per[keep], epochs[keep]
        #: the epochs the figures are medians over
        self.epochs = epochs
        self.compute_s = per["compute_s"].to_numpy(dtype=float)
        self.measured_comm_s = per["comm_s"].to_numpy(dtype=float)
        self.measured_wall_s = per["wall_s"].to_numpy(dtype=float)
        c = self.coefficients
        self.rounds_s = np.array([c.rounds_s.get(int(k), 0.0) for k in epochs], dtype=float)
        self.byte_s = np.array([c.byte_s.get(int(k), 0.0) for k in epochs], dtype=float)

    def __len__(self) -> int:
        return len(self.epochs)

    @property
    def label(self) -> str:
        recipe = getattr(self.store, "recipe", "") or ""
        return f"{recipe} ({self.run_id})" if recipe and recipe not in self.run_id else self.run_id

    def comm_seconds(self, network: Any) -> np.ndarray:
        """Modelled communication per epoch (of :attr:`epochs`) on ``network`` (anything ``resolve_network``
        takes)."""
        net = resolve_network(network)
        if is_linear(net):
            return self.rounds_s * net.latency_s + self.byte_s / net.bandwidth_Bps
        per = transport_seconds(self.store.frame("traffic").to_dict("records"), net,
                                world_size=self.store.world_size or None)
        return np.array([per.get(int(k), 0.0) for k in self.epochs], dtype=float)

    def epoch_seconds(self, network: Any) -> float:
        """Median modelled epoch (compute measured + communication modelled) on ``network``; nan without epochs."""
        if not len(self):
            return float("nan")
        return float(np.median(self.compute_s + self.comm_seconds(network)))

    def breakdown(self, network: Any) -> dict[str, float]:
        """``{"compute_s", "comm_s", "epoch_s"}``: medians (the epoch's is the median of the sums)."""
        if not len(self):
            return {"compute_s": float("nan"), "comm_s": float("nan"), "epoch_s": float("nan")}
        comm = self.comm_seconds(network)
        return {"compute_s": float(np.median(self.compute_s)), "comm_s": float(np.median(comm)),
                "epoch_s": float(np.median(self.compute_s + comm))}

    def measured(self) -> Optional[dict]:
        """The run's own link, where it ran with ``--network``: ``{"network": NetworkModel, "measured_s":
        median measured epoch, "modelled_s": median modelled epoch on it}``; None otherwise."""
        spec = (self.store.summary or {}).get("network")
        if not spec or not len(self):
            return None
        try:
            net = resolve_network(spec)
        except Exception:  # noqa: BLE001 - a log from another version: no point rather than no view
            return None
        return {"network": net, "spec": spec.get("spec", net.spec) if isinstance(spec, dict) else str(spec),
                "measured_s": float(np.median(self.measured_wall_s)), "modelled_s": self.epoch_seconds(net)}


def sweep_seconds(run: WhatIf, grid: np.ndarray = GRID_BPS) -> np.ndarray:
    """Median modelled epoch at each bandwidth of ``grid`` (latency :func:`latency_for`); nan without epochs."""
    if not len(run):
        return np.full(len(grid), np.nan)
    lat = latency_for(grid)
    per = run.compute_s[:, None] + run.rounds_s[:, None] * lat[None, :] + run.byte_s[:, None] / grid[None, :]
    return np.median(per, axis=0)


def _at(run: WhatIf, bandwidth: float) -> float:
    return float(sweep_seconds(run, np.array([bandwidth]))[0])


def crossovers(a: WhatIf, b: WhatIf, grid: np.ndarray = GRID_BPS) -> list[float]:
    """Bandwidths (bytes/s) in the sweep's range where ``a``'s and ``b``'s modelled epochs cross (bisection to
    0.1 % on the exact model)."""
    ya, yb = sweep_seconds(a, grid), sweep_seconds(b, grid)
    diff = ya - yb
    out = []
    for i in range(len(grid) - 1):
        if not (np.isfinite(diff[i]) and np.isfinite(diff[i + 1])) or diff[i] == 0 or np.sign(diff[i]) == np.sign(
                diff[i + 1]):
            continue
        lo, hi = grid[i], grid[i + 1]
        s_lo = np.sign(diff[i])
        while hi / lo > 1.001:
            mid = math.sqrt(lo * hi)
            if np.sign(_at(a, mid) - _at(b, mid)) == s_lo:
                lo = mid
            else:
                hi = mid
        out.append(math.sqrt(lo * hi))
    return out


def _ms(seconds: float) -> str:
    return "–" if not np.isfinite(seconds) else f"{seconds * 1e3:.3g} ms"


def whatif_table(runs: list[WhatIf]) -> str:
    """An HTML table: per preset, each run's modelled epoch (compute + communication), and which is faster;
    then the crossovers (or that there is none in the sweep's range)."""
    head = "".join(f"<th>{html.escape(r.label)}<br><small>compute + comm = epoch</small></th>" for r in runs)
    rows = []
    for name, net in NETWORK_PRESETS.items():
        cells = []
        parts = [r.breakdown(net) for r in runs]
        best = min(range(len(runs)), key=lambda i: parts[i]["epoch_s"] if np.isfinite(parts[i]["epoch_s"])
                   else math.inf)
        for i, p in enumerate(parts):
            mark = " style='font-weight:bold'" if len(runs) > 1 and i == best else ""
            cells.append(f"<td{mark}>{_ms(p['compute_s'])} + {_ms(p['comm_s'])} = {_ms(p['epoch_s'])}</td>")
        rows.append(f"<tr data-network='{name}'><td>{preset_label(name)} <small>({format_rate(net.bandwidth_Bps)}, "
                    f"{net.latency_s * 1e6:.3g} µs)</small></td>{''.join(cells)}</tr>")
    note = ""
    if len(runs) == 2 and len(runs[0]) and len(runs[1]):
        a, b = runs
        found = crossovers(a, b)
        lo, hi = format_rate(GRID_BPS[0]), format_rate(GRID_BPS[-1])
        if found:
            items = []
            for x in found:
                below = a if _at(a, x / 1.01) < _at(b, x / 1.01) else b
                items.append(f"at <b>{format_rate(x)}</b> (below it {html.escape(below.label)} is faster)")
            note = "Crossover " + "; ".join(items) + "."
        else:
            ya, yb = sweep_seconds(a), sweep_seconds(b)
            faster, slower = (a, b) if np.nanmedian(ya - yb) < 0 else (b, a)
            ratio = np.nanmax(sweep_seconds(slower) / sweep_seconds(faster))
            note = (f"No crossover between {lo} and {hi}: {html.escape(faster.label)} is faster throughout "
                    f"(up to {ratio:.2f}×).")
        note = f"<p class='wb-whatif-crossover'>{note}</p>"
    epochs = ", ".join(f"{r.label}: {len(r)} epoch(s)" for r in runs)
    return (f"<table class='wb-whatif'><tr><th>network</th>{head}</tr>{''.join(rows)}</table>{note}"
            f"<p style='color:#666;font-size:90%'>Medians over epochs after the first ({html.escape(epochs)}); "
            f"compute measured (slowest rank), communication modelled: transport model on the counted traffic.</p>")
