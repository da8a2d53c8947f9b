"""A network cost model: counted traffic -> modelled communication time per epoch.

The model (a per-link latency-bandwidth, or alpha-beta, model with one NIC per rank):

* a message on any link costs ``latency_s`` plus ``bytes / bandwidth_Bps``;
* a rank sends its messages one after another through its own link, so the time of rank ``r`` in an
  epoch is the sum over its outgoing links ``(r, d)`` of ``messages * latency_s + bytes / bandwidth_Bps``;
* ranks send in parallel, so the epoch's modelled time is the **maximum over ranks** (the slowest
  sender bounds the epoch; receive-side contention and overlap with compute are not modelled).

Collectives enter through what :class:`~workbench.communicate.base.Communicator` counted (ring
all-reduce, pipelined ring broadcast, ...), so the modelled time is that of the assumed algorithm.
The figure is a lower bound for a real network and is shown beside the measured time.

Presets (bandwidth is one direction of one link; latency is a typical one-way small-message time
through the software stack):

=========  ======================  ===========
name       bandwidth               latency
=========  ======================  ===========
10GbE      1.25e9 B/s (10 Gbit/s)  20 µs
25GbE      3.125e9 B/s             10 µs
100GbE     12.5e9 B/s              5 µs
nvlink     300e9 B/s (NVLink 3)    2 µs
=========  ======================  ===========

Example:
    >>> from workbench.events import Traffic
    >>> events = [Traffic(epoch=0, src_rank=0, dst_rank=1, bytes=1_250_000_000, messages=1)]
    >>> round(modelled_seconds(events, "10GbE")[0], 6)
    1.00002
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any, Iterable, Mapping, Optional, Union

from workbench._validation import ErrorCollector, ParamError, param_error

__all__ = ["NetworkModel", "NETWORK_PRESETS", "modelled_seconds", "resolve_network"]


@dataclasses.dataclass(frozen=True)
class NetworkModel:
    """Latency and bandwidth of one link.

    Args:
        latency_s: seconds per message.
        bandwidth_Bps: bytes per second of one link, one direction.
        name: label shown in views.
    """

    latency_s: float
    bandwidth_Bps: float
    name: str = "custom"

    def __post_init__(self) -> None:
        errs = ErrorCollector("NetworkModel")
        errs.check(isinstance(self.latency_s, (int, float)) and self.latency_s >= 0, "latency_s",
                   "a number in [0, inf]", self.latency_s)
        errs.check(isinstance(self.bandwidth_Bps, (int, float)) and self.bandwidth_Bps > 0, "bandwidth_Bps",
                   "a number in (0, inf]", self.bandwidth_Bps)
        errs.raise_if_any()

    def link_seconds(self, nbytes: float, messages: int) -> float:
        """Modelled time of ``messages`` messages carrying ``nbytes`` bytes in all on one link."""
        return messages * self.latency_s + nbytes / self.bandwidth_Bps


NETWORK_PRESETS: dict[str, NetworkModel] = {
    "10GbE": NetworkModel(20e-6, 10e9 / 8, "10GbE"),
    "25GbE": NetworkModel(10e-6, 25e9 / 8, "25GbE"),
    "100GbE": NetworkModel(5e-6, 100e9 / 8, "100GbE"),
    "nvlink": NetworkModel(2e-6, 300e9, "nvlink"),
}


def resolve_network(preset: Union[str, NetworkModel]) -> NetworkModel:
    """A :class:`NetworkModel` from a preset name (the error lists the presets) or a model."""
    if isinstance(preset, NetworkModel):
        return preset
    if preset not in NETWORK_PRESETS:
        raise ParamError([param_error("preset", "modelled_seconds", f"one of {list(NETWORK_PRESETS)}", preset)])
    return NETWORK_PRESETS[preset]


def _fields(ev: Any) -> Optional[tuple[int, int, str, int, int, int]]:
    """(epoch, src, kind, bytes, messages, num_epochs) of a Traffic event or its dict; ``None`` for other events."""
    if isinstance(ev, Mapping):
        if ev.get("type", "traffic") != "traffic":
            return None
        get = ev.get
    else:
        if getattr(ev, "type", None) != "traffic":
            return None
        get = lambda k, d=None: getattr(ev, k, d)  # noqa: E731
    return int(get("epoch", 0)), int(get("src_rank", 0)), str(get("kind", "")), int(get("bytes", 0)), \
        int(get("messages", 0)), max(int(get("num_epochs", 1) or 1), 1)


def modelled_seconds(traffic_events: Iterable[Any], preset: Union[str, NetworkModel] = "10GbE", *,
                     kinds: Optional[Iterable[str]] = None, per_rank: bool = False) -> dict:
    """Modelled communication time per epoch (see the module docstring for the model).

    Args:
        traffic_events: :class:`~workbench.events.Traffic` events (or their dicts, e.g. from a run log);
            other events are ignored. A record covering a window of epochs (``num_epochs > 1``) adds its
            modelled time spread evenly over the window's epochs (the model is linear in bytes and
            messages, so the window's sum is exact; a single epoch gets the window's mean).
        preset: a name from :data:`NETWORK_PRESETS` or a :class:`NetworkModel`.
        kinds: only count these traffic kinds (default: all, including ``control``).
        per_rank: return ``{epoch: {rank: seconds}}`` instead of the maximum over ranks.

    Returns:
        ``{epoch: seconds}`` (the slowest rank of each epoch), or per rank with ``per_rank=True``.

    Raises:
        ParamError: unknown preset.
    """
    net = resolve_network(preset)
    wanted = None if kinds is None else set(kinds)
    per: dict[int, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for ev in traffic_events:
        f = _fields(ev)
        if f is None:
            continue
        epoch, src, kind, nbytes, messages, num_epochs = f
        if wanted is not None and kind not in wanted:
            continue
        seconds = net.link_seconds(nbytes, messages)
        if num_epochs == 1:
            per[epoch][src] += seconds
        else:
            for e in range(epoch, epoch + num_epochs):
                per[e][src] += seconds / num_epochs
    if per_rank:
        return {e: dict(sorted(r.items())) for e, r in sorted(per.items())}
    return {e: max(r.values()) for e, r in sorted(per.items())}
