"""Network cost models: counted traffic -> modelled communication time per epoch.

Two models read the same :class:`~workbench.events.Traffic` records (bytes and messages per epoch, link,
``kind`` and ``layer``; :mod:`workbench.communicate.base` counts them by the algorithm each verb assumes).

**sender** (:func:`modelled_seconds`' default; the what-if bound the views and the paper checks use): a
message costs ``latency_s + bytes / B`` with ``B = bandwidth_Bps * efficiency``; a rank sends its messages
one after another through its own link, so rank ``r``'s time is ``sum over its links of messages * latency_s +
bytes / B``; the epoch takes the slowest rank's. No receive side, no dependency order: a lower bound.

**transport** (:func:`transport_seconds`, ``modelled_seconds(..., model="transport")``; the run summary's
``modelled_comm_s``): what the transport does. The traffic of an epoch falls into *phases*, one per
``(kind, layer)``; the ranks meet at every phase (layer by layer forward, then backward, then the all-reduce),
so phases do not overlap and the epoch is their sum::

    T_epoch = sum over phases  c * (rounds(a, p) * latency_s + call_s + [a = exchange] * exchange_s)  +  T_bytes

* ``c``: the calls of the phase in the epoch (messages on its busiest link; a broadcast: all its link
  messages / (p - 1)); ``a``: its algorithm, from the kind (:data:`ALGORITHMS`); ``p``: world size;
* ``rounds``: the latency-bound steps of one call: ``exchange`` (``all_to_all``: every pair at once, the
  sizes framed with the pieces on the socket mesh, :mod:`workbench.communicate.sockets`) ``1``; ring
  ``allreduce`` ``2 (p - 1)``; ring ``allgather`` ``p - 1``; binomial-tree ``broadcast`` (gloo's)
  ``ceil(log2 p)``;
* ``call_s``: what one synchronising call costs beyond its rounds: the ranks meet there, and a rank that
  computed up to the call reaches it (and is woken from it) a little later than an idle one would. ``netprobe``
  measures it the way runs make the calls, with a compute step on every rank before each call;
* ``exchange_s``: the exchange's own extra work (its size header, the buffers), measured the same way;
* ``T_bytes``: each host has one full-duplex link: rank ``r`` sends ``out_r`` and receives ``in_r`` bytes in
  the phase, at ``B`` each way (``B * duplex`` when both directions are busy), so an exchange or ring
  collective takes ``max_r max(out_r, in_r) / B``; a binomial broadcast of ``n`` bytes sends ``n`` through the
  root's link in each of its ``ceil(log2 p)`` rounds: ``ceil(log2 p) * total / (p - 1) / B`` for the phase's
  counted ``total`` (the ring count puts ``n`` on ``p - 1`` links).

Not modelled: waiting for a slower rank's compute beyond the jitter ``call_s`` holds (the measured ``comm_s``
is the slowest rank's time blocked in communication and counts those waits), overlap of communication with
compute, CPU contention that changes after the probe, switch contention, a shaper's burst allowance.
``benchmarks/network_model.py`` compares the model with the measurement on the emulated cluster.

Presets (bandwidth is one direction of one link at the line rate, efficiency 1; latency a typical one-way
small-message time through the software stack); ``workbench netprobe`` measures a cluster's own:

=========  ======================  ===========
name       bandwidth               latency
=========  ======================  ===========
1GbE       1.25e8 B/s (1 Gbit/s)   50 µs
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
    >>> halo = [Traffic(epoch=0, src_rank=s, dst_rank=1 - s, kind="halo_fwd", layer=0, bytes=10**6, messages=1)
    ...         for s in (0, 1)]
    >>> net = resolve_network("10MB/s,100us,call=0.5ms")
    >>> round(transport_seconds(halo, net)[0], 4)     # 1 round of 100 us + 0.5 ms + 1 MB / 10 MB/s each way
    0.1006
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Union

from workbench._validation import ErrorCollector, ParamError, param_error

__all__ = ["NetworkModel", "critical_calls", "NETWORK_PRESETS", "ALGORITHMS", "modelled_seconds", "transport_seconds",
           "transport_seconds_each", "resolve_network", "parse_network", "parse_rate_Bps", "algorithm_of", "rounds"]


@dataclasses.dataclass(frozen=True)
class NetworkModel:
    """Latency and bandwidth of one link (and what the transport makes of it).

    Args:
        latency_s: seconds per message (one way, one latency-bound round).
        bandwidth_Bps: bytes per second of one link, one direction.
        name: label shown in views.
        efficiency: the fraction of ``bandwidth_Bps`` that carries payload (TCP/IP headers, framing).
        duplex: the fraction of the payload rate each direction keeps while both are busy (1: full duplex).
        call_s: seconds per synchronising call (any verb) beyond its latency rounds.
        exchange_s: further seconds per exchange (``all_to_all``) call: its size header and buffers.
    """

    latency_s: float
    bandwidth_Bps: float
    name: str = "custom"
    efficiency: float = 1.0
    duplex: float = 1.0
    call_s: float = 0.0
    exchange_s: float = 0.0

    def __post_init__(self) -> None:
        errs = ErrorCollector("NetworkModel")
        num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
        errs.check(num(self.latency_s) and self.latency_s >= 0, "latency_s", "a number in [0, inf]", self.latency_s)
        errs.check(num(self.bandwidth_Bps) and self.bandwidth_Bps > 0, "bandwidth_Bps",
                   "a number in (0, inf]", self.bandwidth_Bps)
        for name in ("efficiency", "duplex"):
            v = getattr(self, name)
            errs.check(num(v) and 0 < v <= 1, name, "a number in (0, 1]", v)
        for name in ("call_s", "exchange_s"):
            v = getattr(self, name)
            errs.check(num(v) and v >= 0, name, "a number in [0, inf]", v)
        errs.raise_if_any()

    @property
    def effective_Bps(self) -> float:
        """Payload bytes per second of one link, one direction (``bandwidth_Bps * efficiency``)."""
        return self.bandwidth_Bps * self.efficiency

    @property
    def spec(self) -> str:
        """The model as ``--network`` takes it (``11.94MB/s,72us``, plus ``eff=``, ``duplex=``, ``call=``,
        ``xchg=``).

        Example:
            >>> NetworkModel(72e-6, 11.94e6, call_s=5e-4).spec
            '11.94MB/s,72us,call=500us'
        """
        out = f"{self.bandwidth_Bps / 1e6:.4g}MB/s,{_fmt_time(self.latency_s)}"
        if self.efficiency != 1.0:
            out += f",eff={self.efficiency:.4g}"
        if self.duplex != 1.0:
            out += f",duplex={self.duplex:.4g}"
        if self.call_s:
            out += f",call={_fmt_time(self.call_s)}"
        if self.exchange_s:
            out += f",xchg={_fmt_time(self.exchange_s)}"
        return out

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def link_seconds(self, nbytes: float, messages: int) -> float:
        """Modelled time of ``messages`` messages carrying ``nbytes`` bytes in all on one link."""
        return messages * self.latency_s + nbytes / self.effective_Bps


def _fmt_time(seconds: float) -> str:
    return f"{seconds * 1e3:.4g}ms" if seconds >= 1e-3 else f"{seconds * 1e6:.4g}us"


NETWORK_PRESETS: dict[str, NetworkModel] = {
    "1GbE": NetworkModel(50e-6, 1e9 / 8, "1GbE"),
    "10GbE": NetworkModel(20e-6, 10e9 / 8, "10GbE"),
    "25GbE": NetworkModel(10e-6, 25e9 / 8, "25GbE"),
    "100GbE": NetworkModel(5e-6, 100e9 / 8, "100GbE"),
    "nvlink": NetworkModel(2e-6, 300e9, "nvlink"),
}

ALGORITHMS: dict[str, str] = {"allreduce": "allreduce", "metrics": "allreduce", "model_avg": "allreduce",
                              "control": "allreduce", "allgather": "allgather", "bcast_fwd": "broadcast",
                              "bcast_bwd": "broadcast"}
"""The algorithm of a traffic kind (an ``eval_`` prefix aside); any other kind is an ``exchange``
(``all_to_all``: halo rows, sampling requests, feature pulls)."""

_RATE = re.compile(r"^\s*(\d+(?:\.\d*)?(?:e[+-]?\d+)?)\s*([kKmMgG]?)(B/s|b/s|bit/s|bit|bps|)\s*$")
_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9}
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_FORMATS = ("a spec such as '117MB/s,85us' or '1gbit,0.1ms[,eff=0.95][,duplex=1][,call=0.5ms][,xchg=0.5ms]', "
            "or a JSON file written by workbench netprobe")


def parse_rate_Bps(text: Any) -> float:
    """Bytes per second from a number (bytes/s) or a rate with a unit (``117MB/s``, ``100mbit``, ``1gbit``).

    Example:
        >>> parse_rate_Bps("100mbit"), parse_rate_Bps("117MB/s"), parse_rate_Bps(5e6)
        (12500000.0, 117000000.0, 5000000.0)
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    m = _RATE.match(str(text))
    if m is None or (m.group(3) == "" and m.group(2)):
        raise ParamError([param_error("bandwidth", "resolve_network", "a rate such as 117MB/s, 100mbit or 1gbit "
                                      "(B/s: bytes; bit, b/s, bps: bits)", text)])
    bits = m.group(3) not in ("B/s", "")
    return float(m.group(1)) * _PREFIX[m.group(2).lower()] / (8 if bits else 1)


def _parse_seconds(text: str, name: str) -> float:
    m = re.match(r"^\s*(\d+(?:\.\d*)?(?:e[+-]?\d+)?)\s*(s|ms|us|µs|ns)\s*$", text, re.IGNORECASE)
    if m is None:
        raise ParamError([param_error(name, "resolve_network", "a time such as 85us or 0.1ms", text)])
    return float(m.group(1)) * _TIME_UNITS[m.group(2).lower()]


def parse_network(spec: str) -> NetworkModel:
    """A :class:`NetworkModel` from ``RATE[,LATENCY][,eff=X][,duplex=X][,call=TIME][,xchg=TIME]``.

    Example:
        >>> net = parse_network("117MB/s,85us")
        >>> net.bandwidth_Bps, round(net.latency_s * 1e6, 3), net.spec
        (117000000.0, 85.0, '117MB/s,85us')
        >>> parse_network("1gbit,0.1ms,eff=0.95").effective_Bps
        118750000.0
    """
    parts = [p.strip() for p in str(spec).split(",") if p.strip()]
    if not parts:
        raise ParamError([param_error("network", "resolve_network", _FORMATS, spec)])
    kwargs: dict[str, Any] = {"bandwidth_Bps": parse_rate_Bps(parts[0]), "latency_s": 0.0, "name": str(spec)}
    for part in parts[1:]:
        key, eq, value = part.partition("=")
        key = key.strip().lower()
        if not eq:
            kwargs["latency_s"] = _parse_seconds(part, "latency")
        elif key in ("eff", "efficiency", "duplex"):
            try:
                kwargs["efficiency" if key.startswith("eff") else "duplex"] = float(value)
            except ValueError:
                raise ParamError([param_error(key, "resolve_network", "a number in (0, 1]", value)]) from None
        elif key in ("call", "xchg", "latency"):
            kwargs[{"call": "call_s", "xchg": "exchange_s", "latency": "latency_s"}[key]] = _parse_seconds(value, key)
        else:
            raise ParamError([param_error("network", "resolve_network", _FORMATS, spec)])
    return NetworkModel(**kwargs)


def resolve_network(preset: Union[str, Path, Mapping, NetworkModel], *, name: str = "preset",
                    owner: str = "modelled_seconds") -> NetworkModel:
    """A :class:`NetworkModel` from a model, a preset name (the error lists them), a spec for
    :func:`parse_network`, a dict of the model's fields, or a JSON file holding one (``workbench netprobe
    --out``; a whole probe summary works too: its ``model`` is taken; a run summary's ``network`` too: its ``spec``
    is only a label). ``name`` and ``owner`` word the error; a field it does not know is refused, never dropped.

    Example:
        >>> resolve_network("10GbE").bandwidth_Bps, resolve_network("1gbit,0.1ms").latency_s
        (1250000000.0, 0.0001)
    """
    if isinstance(preset, NetworkModel):
        return preset
    if isinstance(preset, Mapping):
        data = preset.get("model", preset)
        if not isinstance(data, Mapping):
            raise ParamError([param_error(name, owner, "a network model's fields (a JSON object)", data)])
        data = {k: v for k, v in data.items() if k != "spec"}   # a run summary's network: the model and its spec
        unknown, missing = sorted(set(data) - _FIELDS), sorted(_REQUIRED - set(data))
        if unknown or missing:
            what = "; ".join([f"no field {', '.join(map(repr, unknown))}"] * bool(unknown) +
                             [f"no {', '.join(map(repr, missing))}"] * bool(missing))
            raise ParamError([param_error(name, owner, f"a network model's fields ({', '.join(sorted(_FIELDS))}; "
                                          f"{', '.join(sorted(_REQUIRED))} required): {what}", dict(data))])
        return NetworkModel(**data)
    text = str(preset)
    if text in NETWORK_PRESETS:
        return NETWORK_PRESETS[text]
    path = Path(text)
    if text.endswith(".json") or (not text[:1].isdigit() and path.is_file()):
        if not path.is_file():
            raise ParamError([param_error(name, owner, f"an existing file ({path} is not)", text)])
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ParamError([param_error(name, owner, f"a JSON file of a network model ({exc})", text)]) from None
        return resolve_network(data, name=name, owner=owner)
    if text[:1].isdigit() and ("," in text or _RATE.match(text)):
        return parse_network(text)
    raise ParamError([param_error(name, owner, f"one of {list(NETWORK_PRESETS)}, {_FORMATS}", preset)])


_FIELDS = {f.name for f in dataclasses.fields(NetworkModel)}
_REQUIRED = {f.name for f in dataclasses.fields(NetworkModel) if f.default is dataclasses.MISSING}


def algorithm_of(kind: str) -> str:
    """``exchange``, ``allreduce``, ``allgather`` or ``broadcast`` for a traffic kind.

    Example:
        >>> algorithm_of("halo_fwd"), algorithm_of("eval_metrics"), algorithm_of("bcast_bwd")
        ('exchange', 'allreduce', 'broadcast')
    """
    while kind.startswith("eval_"):
        kind = kind[5:]
    return ALGORITHMS.get(kind, "exchange")


def rounds(algorithm: str, p: int) -> int:
    """Latency-bound steps of one call of ``algorithm`` on ``p`` ranks (see the module docstring).

    Example:
        >>> [rounds(a, 3) for a in ("exchange", "allreduce", "allgather", "broadcast")]
        [1, 4, 2, 2]
    """
    if p <= 1:
        return 0
    return {"exchange": 1, "allreduce": 2 * (p - 1), "allgather": p - 1,
            "broadcast": max(1, math.ceil(math.log2(p)))}[algorithm]


def _fields(ev: Any) -> Optional[tuple[int, int, int, str, int, int, int, int]]:
    """(epoch, src, dst, kind, layer, bytes, messages, num_epochs) of a Traffic event or its dict; ``None``
    for other events."""
    if isinstance(ev, Mapping):
        if ev.get("type", "traffic") != "traffic":
            return None
        get = ev.get
    else:
        if getattr(ev, "type", None) != "traffic":
            return None
        get = lambda k, d=None: getattr(ev, k, d)  # noqa: E731
    return int(get("epoch", 0)), int(get("src_rank", 0)), int(get("dst_rank", 0)), str(get("kind", "")), \
        int(get("layer", -1)), int(get("bytes", 0)), int(get("messages", 0)), max(int(get("num_epochs", 1) or 1), 1)


def _spread(traffic_events: Iterable[Any], kinds: Optional[Iterable[str]]):
    """Yield (epoch, src, dst, kind, layer, bytes, messages) per epoch, a window record spread evenly."""
    wanted = None if kinds is None else set(kinds)
    for ev in traffic_events:
        f = _fields(ev)
        if f is None or (wanted is not None and f[3] not in wanted):
            continue
        epoch, src, dst, kind, layer, nbytes, messages, n = f
        for e in range(epoch, epoch + n):
            yield e, src, dst, kind, layer, nbytes / n, messages / n


def modelled_seconds(traffic_events: Iterable[Any], preset: Union[str, NetworkModel] = "10GbE", *,
                     kinds: Optional[Iterable[str]] = None, per_rank: bool = False, model: str = "sender",
                     world_size: Optional[int] = None) -> dict:
    """Modelled communication time per epoch (see the module docstring for the models).

    Args:
        traffic_events: :class:`~workbench.events.Traffic` events (or their dicts, e.g. from a run log);
            other events are ignored. A record covering a window of epochs (``num_epochs > 1``) adds its
            modelled time spread evenly over the window's epochs (a single epoch gets the window's mean).
        preset: anything :func:`resolve_network` takes (a preset name, a spec, a model).
        kinds: only count these traffic kinds (default: all, including ``control``).
        per_rank: ``sender`` only: return ``{epoch: {rank: seconds}}`` instead of the maximum over ranks.
        model: ``sender`` (the lower bound) or ``transport`` (:func:`transport_seconds`).
        world_size: ``transport`` only: the ranks (default: the highest rank seen + 1).

    Returns:
        ``{epoch: seconds}``, or per rank with ``per_rank=True``.

    Raises:
        ParamError: unknown preset or model.
    """
    net = resolve_network(preset)
    if model == "transport":
        return transport_seconds(traffic_events, net, kinds=kinds, world_size=world_size)
    if model != "sender":
        raise ParamError([param_error("model", "modelled_seconds", "one of ['sender', 'transport']", model)])
    per: dict[int, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for epoch, src, _dst, _kind, _layer, nbytes, messages in _spread(traffic_events, kinds):
        per[epoch][src] += net.link_seconds(nbytes, messages)
    if per_rank:
        return {e: dict(sorted(r.items())) for e, r in sorted(per.items())}
    return {e: max(r.values()) for e, r in sorted(per.items())}


def transport_seconds(traffic_events: Iterable[Any], network: Union[str, NetworkModel], *,
                      kinds: Optional[Iterable[str]] = None, world_size: Optional[int] = None,
                      per_phase: bool = False) -> dict:
    """The transport model (module docstring): per epoch, the sum over its ``(kind, layer)`` phases.

    Args:
        traffic_events: Traffic events or their dicts (windows spread evenly over their epochs).
        network: anything :func:`resolve_network` takes.
        kinds: only these kinds.
        world_size: the ranks (default: the highest rank in the records + 1).
        per_phase: return ``{epoch: {(kind, layer): seconds}}``.

    Example:
        >>> from workbench.events import Traffic
        >>> ring = [Traffic(epoch=0, src_rank=r, dst_rank=(r + 1) % 3, kind="allreduce", bytes=4000, messages=1)
        ...         for r in range(3)]
        >>> net = NetworkModel(latency_s=1e-4, bandwidth_Bps=1e6)
        >>> round(transport_seconds(ring, net)[0], 6)     # 2 (p - 1) = 4 rounds of 100 us + 4 kB at 1 MB/s
        0.0044
    """
    return transport_seconds_each(traffic_events, [network], kinds=kinds, world_size=world_size,
                                  per_phase=per_phase)[0]


def transport_seconds_each(traffic_events: Iterable[Any], networks: Iterable[Union[str, NetworkModel]], *,
                           kinds: Optional[Iterable[str]] = None, world_size: Optional[int] = None,
                           per_phase: bool = False) -> list[dict]:
    """:func:`transport_seconds` on each of ``networks`` (a list of its results, in order), the traffic read once
    (a what-if over several networks of a long run).

    Example:
        >>> from workbench.events import Traffic
        >>> ring = [Traffic(epoch=0, src_rank=r, dst_rank=(r + 1) % 3, kind="allreduce", bytes=4000, messages=1)
        ...         for r in range(3)]
        >>> [round(t[0], 6) for t in transport_seconds_each(ring, ["1GbE", "10GbE"])]
        [0.000232, 8.3e-05]
    """
    nets = [resolve_network(n) for n in networks]
    # (epoch, kind, layer) -> link (src, dst) -> [bytes, messages]
    phases: dict[tuple, dict[tuple[int, int], list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    top = -1
    for epoch, src, dst, kind, layer, nbytes, messages in _spread(traffic_events, kinds):
        link = phases[(epoch, kind, layer)][(src, dst)]
        link[0] += nbytes
        link[1] += messages
        top = max(top, src, dst)
    p = int(world_size) if world_size else top + 1
    outs: list[dict[int, Any]] = [{} for _ in nets]
    for (epoch, kind, layer), links in sorted(phases.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        algorithm = algorithm_of(kind)
        for net, out in zip(nets, outs):
            seconds = _phase_seconds(links, algorithm, p, net)
            if per_phase:
                out.setdefault(epoch, {})[(kind, layer)] = seconds
            else:
                out[epoch] = out.get(epoch, 0.0) + seconds
    return outs


def _phase_seconds(links: Mapping[tuple[int, int], list[float]], algorithm: str, p: int, net: NetworkModel) -> float:
    """Modelled seconds of one phase from its per-link ``[bytes, messages]`` (module docstring)."""
    if p <= 1:
        return 0.0
    B = net.effective_Bps
    if algorithm == "broadcast":
        total = sum(b for b, _m in links.values())
        calls = sum(m for _b, m in links.values()) / (p - 1)
        return calls * (rounds(algorithm, p) * net.latency_s + net.call_s) + rounds(algorithm, p) * total / (p - 1) / B
    calls = max(m for _b, m in links.values())
    out: dict[int, float] = defaultdict(float)
    into: dict[int, float] = defaultdict(float)
    for (src, dst), (nbytes, _m) in links.items():
        out[src] += nbytes
        into[dst] += nbytes
    slowest = 0.0
    for r in set(out) | set(into):
        both = out[r] > 0 and into[r] > 0
        slowest = max(slowest, max(out[r], into[r]) / (B * (net.duplex if both else 1.0)))
    overhead = net.call_s + (net.exchange_s if algorithm == "exchange" else 0.0)
    return calls * (rounds(algorithm, p) * net.latency_s + overhead) + slowest


def critical_calls(calls_by_rank: list[list[tuple[float, float]]]) -> list[float]:
    """Each collective call's critical time, ``max end - max start`` over the ranks' ``(start, end)`` wall-clock
    times: what the call took once the last rank had arrived, which is what the model predicts. The waits before
    that are for a slower rank's compute (on cores shared by more ranks than cores, most of a busy call's time).
    A run's ``comm_critical_s`` is their sum per epoch; ``workbench netprobe`` times its calls this way.

    Example:
        >>> critical_calls([[(0.0, 0.004), (1.0, 1.001)], [(0.003, 0.0045), (1.0, 1.002)]])
        [0.0015, 0.002]
    """
    return [round(max(0.0, max(e for _, e in call) - max(s for s, _ in call)), 9) for call in zip(*calls_by_rank)]
