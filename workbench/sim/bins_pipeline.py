"""A discrete-event account of G3's pipeline variants from measured per-bin costs (Wan et al., §5.2).

Every worker has five resources: the **packer** (CPU, builds a bin's block), **H2D** and **D2H** copy
engines, the **compute** unit and the **network** link (one send at a time). A bin of layer ``k`` moves
through pack -> H2D -> compute -> D2H -> send. The variants differ in what may overlap:

==============  ===========================================  =============================================
variant         within a worker (intra-layer)                across workers (inter-layer)
==============  ===========================================  =============================================
sequential      one bin at a time through all five stages    sends start after the layer; global barrier
intra           packer, copies and compute overlap, at most  sends start after the layer; global barrier
                2 bins on the device (double buffering)
inter           one bin at a time                            a bin's rows go out as soon as it is done; a
                                                             next-layer bin starts once its inputs arrived
                                                             (eager: the first bin in priority order whose
                                                             inputs are there runs next)
multi-level     both                                         both
==============  ===========================================  =============================================

The backward pass replays the bins in reverse (layers L..1), sending the gradients of halo rows back to
their owners, then one ring all-reduce of the weight gradients ends the epoch.

Inputs are per-bin figures measured or counted by the binned executor (compute seconds, bytes); copy and
network times are ``bytes / bandwidth`` (defaults: 16 GB/s PCIe, 10 Gbit/s Ethernet as in the paper's
testbed). This is a model, not a measurement of overlap: on a GPU machine real double-buffered copies
would replace it.

Example:
    >>> import numpy as np
    >>> layer = [BinCosts(pack_s=np.full(2, 1e-3), h2d_bytes=np.full(2, 16e6), compute_s=np.full(2, 2e-3),
    ...                   d2h_bytes=np.full(2, 8e6), send_bytes=np.full(2, 1e6), back_bytes=np.full(2, 1e6),
    ...                   deps=[np.zeros((0, 2), np.int64)] * 2)]
    >>> out = simulate([layer], backward_ratio=1.0, allreduce_bytes=0, variant="sequential")
    >>> round(out["epoch_s"] * 1e3, 2), round(simulate([layer], 1.0, 0, "multi-level")["epoch_s"] * 1e3, 2)
    (21.2, 14.6)
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

__all__ = ["BinCosts", "simulate", "simulate_all", "VARIANTS", "PCIE_BYTES_PER_S", "NET_BYTES_PER_S"]

VARIANTS = ("sequential", "inter", "intra", "multi-level")
PCIE_BYTES_PER_S = 16e9
NET_BYTES_PER_S = 10e9 / 8


@dataclasses.dataclass
class BinCosts:
    """One worker's bins of one layer: per-bin costs and the previous layer's bins each depends on.

    ``deps[b]`` is an ``(m, 2)`` array of ``(rank, bin)`` of layer ``k - 1`` whose outputs bin ``b`` reads
    (its own rank's bins included). ``send_bytes``: forward rows other workers read; ``back_bytes``: the
    gradients of the bin's halo inputs returned to their owners in the backward pass.
    """

    pack_s: np.ndarray
    h2d_bytes: np.ndarray
    compute_s: np.ndarray
    d2h_bytes: np.ndarray
    send_bytes: np.ndarray
    back_bytes: np.ndarray
    deps: list

    @property
    def num_bins(self) -> int:
        return len(self.compute_s)


class _Worker:
    def __init__(self, start: float = 0.0):
        self.pack = self.h2d = self.comp = self.d2h = self.net = self.serial = start
        self.busy = 0.0


def _next_bin(pending: list, ready: np.ndarray, w: "_Worker", comp_end_hist: list, intra: bool, inter: bool) -> int:
    """The next bin a worker starts: in priority (index) order; with eager computation (inter) the first bin
    whose inputs have arrived by the time the device could take it, else the one whose inputs arrive first."""
    if not inter:
        return pending[0]
    now = max(w.h2d, comp_end_hist[-2] if len(comp_end_hist) >= 2 else 0.0) if intra else w.serial
    for b in pending:
        if ready[b] <= now:
            return b
    return min(pending, key=lambda b: ready[b])


def _pass(layers: list[list[BinCosts]], variant: str, pcie: float, net: float, start: list[float],
          compute_scale: float, backward: bool) -> tuple[list[float], list[float]]:
    """One pass over ``layers`` (forward order given); returns per-worker end times and compute busy time."""
    intra = variant in ("intra", "multi-level")
    inter = variant in ("inter", "multi-level")
    num_workers = len(layers[0])
    workers = [_Worker(s) for s in start]
    prev_local: Optional[list[np.ndarray]] = None      # per rank: time each previous-layer bin's output is on host
    prev_remote: Optional[list[np.ndarray]] = None     # per rank: time it reached the workers that read it
    barrier = max(start)
    for layer in layers:
        local_out, remote_out = [], []
        for r, costs in enumerate(layer):
            w = workers[r]
            nb = costs.num_bins
            ready = np.full(nb, barrier if not inter else start[r])
            if prev_local is not None:
                for b in range(nb):
                    d = costs.deps[b]
                    if len(d):
                        mine = d[:, 0] == r
                        t_local = prev_local[r][d[mine, 1]].max(initial=0.0)
                        t_remote = max((prev_remote[q][bb] for q, bb in d[~mine]), default=0.0)
                        ready[b] = max(ready[b], t_local, t_remote)
            if not inter:
                ready[:] = np.maximum(ready, barrier)
            done = np.zeros(nb)
            comp_end_hist: list[float] = []
            pack = costs.pack_s
            h2d = costs.h2d_bytes / pcie
            comp = costs.compute_s * compute_scale
            d2h = costs.d2h_bytes / pcie
            send = (costs.back_bytes if backward else costs.send_bytes) / net
            sends = np.zeros(nb)
            pending = list(range(nb))
            while pending:
                b = _next_bin(pending, ready, w, comp_end_hist, intra, inter)
                pending.remove(b)
                if intra:
                    pack_end = w.pack + pack[b]
                    w.pack = pack_end
                    buffer_free = comp_end_hist[-2] if len(comp_end_hist) >= 2 else 0.0
                    h2d_end = max(pack_end, ready[b], w.h2d, buffer_free) + h2d[b]
                    w.h2d = h2d_end
                    comp_end = max(h2d_end, w.comp) + comp[b]
                    w.comp = comp_end
                    d2h_end = max(comp_end, w.d2h) + d2h[b]
                    w.d2h = d2h_end
                else:
                    t = max(w.serial, ready[b]) + pack[b] + h2d[b]
                    comp_end = t + comp[b]
                    d2h_end = comp_end + d2h[b]
                    w.serial = d2h_end
                comp_end_hist.append(comp_end)
                w.busy += comp[b]
                done[b] = d2h_end
                if inter and send[b] > 0:
                    w.net = max(w.net, d2h_end) + send[b]
                    sends[b] = w.net
                else:
                    sends[b] = d2h_end
            layer_end = float(done.max(initial=max(w.serial, w.d2h)))
            if not inter:                                   # whole-layer sends after the layer
                w.net = max(w.net, layer_end) + float(send.sum())
                sends[:] = w.net
            w.serial = max(w.serial, layer_end)
            local_out.append(done)
            remote_out.append(sends)
        prev_local, prev_remote = local_out, remote_out
        barrier = max(max(float(s.max(initial=0.0)) for s in remote_out), max(float(d.max(initial=0.0)) for d in local_out))
    ends = [max(w.serial, w.d2h, w.net, w.comp) for w in workers]
    return ends, [w.busy for w in workers]


def _transpose(layers: list[list[BinCosts]]) -> list[list[BinCosts]]:
    """The backward pass: layers reversed; bin ``b`` of layer ``k`` waits for the layer-``k+1`` bins that read it."""
    out = []
    num_layers = len(layers)
    for k in range(num_layers - 1, -1, -1):
        row = []
        for r, costs in enumerate(layers[k]):
            deps: list[list[tuple[int, int]]] = [[] for _ in range(costs.num_bins)]
            if k + 1 < num_layers:
                for q, consumer in enumerate(layers[k + 1]):
                    for b, d in enumerate(consumer.deps):
                        for rr, bb in d[d[:, 0] == r] if len(d) else []:
                            deps[bb].append((q, b))
            row.append(dataclasses.replace(costs, deps=[np.array(d, dtype=np.int64).reshape(-1, 2) for d in deps]))
        out.append(row)
    return out


def simulate(layers: list[list[BinCosts]], backward_ratio: float, allreduce_bytes: int, variant: str, *,
             pcie_bytes_per_s: float = PCIE_BYTES_PER_S, net_bytes_per_s: float = NET_BYTES_PER_S) -> dict:
    """Simulated epoch of one pipeline variant.

    Args:
        layers: per layer, per worker, the bins' :class:`BinCosts`.
        backward_ratio: backward compute seconds per forward compute second (measured).
        allreduce_bytes: bytes of the weight gradients (one ring all-reduce per epoch).
        variant: one of :data:`VARIANTS`.

    Returns:
        ``{"epoch_s", "idle_fraction", "worker_idle"}``: the slowest worker's epoch and the share of the epoch
        each worker's compute unit is idle (mean over workers).
    """
    if variant not in VARIANTS:
        raise ValueError(f"The 'variant' parameter of simulate must be one of {list(VARIANTS)}. Got {variant!r} instead.")
    num_workers = len(layers[0])
    fwd_end, fwd_busy = _pass(layers, variant, pcie_bytes_per_s, net_bytes_per_s, [0.0] * num_workers, 1.0, False)
    bwd_end, bwd_busy = _pass(_transpose(layers), variant, pcie_bytes_per_s, net_bytes_per_s, fwd_end,
                              backward_ratio, True)
    ring = 2 * (num_workers - 1) / num_workers * allreduce_bytes / net_bytes_per_s if num_workers > 1 else 0.0
    epoch = max(bwd_end) + ring
    busy = np.array(fwd_busy) + np.array(bwd_busy)
    idle = 1.0 - busy / epoch if epoch > 0 else np.zeros(num_workers)
    return {"epoch_s": float(epoch), "idle_fraction": float(idle.mean()), "worker_idle": [float(x) for x in idle]}


def simulate_all(layers: list[list[BinCosts]], backward_ratio: float, allreduce_bytes: int, *,
                 variant_layers: Optional[dict] = None, **kw) -> dict:
    """:func:`simulate` for every variant, plus each variant's speed-up over ``sequential``; ``variant_layers``
    gives a variant its own bins (G3's ``inter`` ablation packs consecutive ids)."""
    variant_layers = variant_layers or {}
    out = {v: simulate(variant_layers.get(v, layers), backward_ratio, allreduce_bytes, v, **kw) for v in VARIANTS}
    base = out["sequential"]["epoch_s"]
    for v in VARIANTS:
        out[v]["speedup"] = float(base / out[v]["epoch_s"]) if out[v]["epoch_s"] > 0 else 1.0
    return out
