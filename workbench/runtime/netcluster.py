"""An emulated cluster on one machine: N hosts in network namespaces on a bridge, every link shaped both ways.

Each *host* is a network namespace with its own address on a private ``/24``, joined to a bridge in the
root namespace by a veth pair. Both ends of every veth get a ``tbf`` qdisc at the link rate, so traffic into
and out of a host is shaped (a full-duplex link of that rate to the bridge). One more namespace runs the
Dask scheduler; every host runs one single-threaded Dask worker bound to its address, and the ranks'
``torch.distributed`` (gloo) traffic crosses the shaped links. The client (this process) stays in the root
namespace and reaches the scheduler through the bridge.

What is emulated and what is not:

* **bandwidth**: emulated, ``tbf`` on both ends of each host's link (rate ``bandwidth``, a queue of 50 ms,
  and a burst of 0.2 ms of the rate, at least 24 KiB). A real link has no burst to speak of: a larger
  bucket (we had 4 ms of the rate) lets a message of a few hundred kB that follows a compute step leave at
  memory speed, and the calls then beat the wire;
* **packets as a NIC hands them over**: each veth's largest GSO packet is capped below the burst
  (``gso_max_size``, :func:`link_settings`), since ``tbf`` splits a packet larger than its bucket in software,
  one MTU-sized segment at a time; with the kernel's 64 KiB packets and a 24 KiB bucket that took 75 % of
  two cores at three hosts' 1 Gbit/s, reordered segments (hundreds of spurious retransmissions per run) and
  halved the exchange rate. Each veth's receive side steers a flow to one core (RPS over every core), as a
  NIC's receive queues do, so a flow's packets are not split across cores' backlogs and reordered;
* **latency**: emulated only where the kernel has ``netem`` (``latency=`` then adds a ``netem delay`` of
  half the round trip on each end); where it has not (this machine's kernel), asking for a latency is an
  error rather than a silently unemulated setting. Without it a round trip costs what veth costs
  (tens of microseconds);
* **names**: each namespace has its own ``/etc/hosts`` with every host of the cluster, and a resolver that
  answers at once (``/etc/netns/NAMESPACE``, removed on exit), as a cluster's hosts file or DNS would; the
  machine's name server is out of a namespace's reach, and a lookup it had to answer (torch's ``TCPStore`` looks
  up each peer since 2.4) waited 10 s for the resolver's timeout;
* **loss, reordering, jitter, switch contention**: not emulated (the bridge forwards at memory speed; a run's
  retransmissions, ``nstat TcpRetransSegs`` in a host's namespace, stay near zero);
* **cores**: with ``cpus="auto"`` (the default) every host's processes run on cores of their own when the
  machine has at least one per host (``os.sched_setaffinity``; host ``i`` gets the ``i``-th share of the
  cores), as on separate machines: a rank woken by its network then does not take the core of another
  host's rank. With fewer cores than hosts (or ``cpus="shared"``) the hosts share every core, and a call's
  time holds that contention (the scheduler host and the client always float).

Faults: :meth:`NetCluster.link_down` / :meth:`~NetCluster.link_up` take a host's link down and up (the
cable pulled), :meth:`~NetCluster.kill_worker` kills a host's worker processes.

Needs root (``CAP_NET_ADMIN``) and iproute2: :func:`unavailable_reason` says why not otherwise (tests skip
with it). Everything is removed on exit, also after an exception, and at interpreter exit as a last resort.
``workbench cluster up|down`` keeps one running for people (:func:`main`).

Example (needs root)::

    from workbench.runtime import launch
    from workbench.runtime.netcluster import NetCluster

    with NetCluster(hosts=2, bandwidth="100mbit") as cluster:
        summary = launch(config, runner="dask", scheduler=cluster.scheduler_address, workers=2).wait()
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Optional

__all__ = ["NetCluster", "Host", "unavailable_reason", "parse_rate", "link_settings", "main", "register"]

_LIVE: list["NetCluster"] = []
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(bit|kbit|mbit|gbit|tbit)\s*$", re.IGNORECASE)
_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s)\s*$", re.IGNORECASE)
STATE_FILE = Path("/run/workbench-cluster.json")
"""Where ``workbench cluster up`` records what it created (``down`` reads it)."""
NETNS_ETC = Path("/etc/netns")
"""Where ``ip netns exec`` finds the files it mounts over ``/etc`` in a namespace (``/etc/netns/NAMESPACE/FILE``)."""


def parse_rate(text: str) -> int:
    """Bits per second of a ``tc`` rate (``1gbit``, ``100mbit``, ``2.5gbit``).

    Example:
        >>> parse_rate("1gbit"), parse_rate("100mbit")
        (1000000000, 100000000)
    """
    m = _RATE.match(str(text))
    if not m:
        raise ValueError(f"The 'bandwidth' parameter of NetCluster must be a rate such as 1gbit or 100mbit. "
                         f"Got {text!r} instead.")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _parse_time_us(text: str) -> float:
    m = _TIME.match(str(text))
    if not m:
        raise ValueError(f"The 'latency' parameter of NetCluster must be a time such as 0.2ms. Got {text!r} instead.")
    return float(m.group(1)) * {"us": 1.0, "ms": 1e3, "s": 1e6}[m.group(2).lower()]


def _run(*cmd: str, check: bool = True, ns: Optional[str] = None) -> subprocess.CompletedProcess:
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    out = subprocess.run(full, capture_output=True, text=True)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(full)} failed ({out.returncode}): {out.stderr.strip() or out.stdout.strip()}")
    return out


def unavailable_reason() -> Optional[str]:
    """Why an emulated cluster cannot be built here (None when it can): not root, no iproute2/tc, or a kernel
    that refuses network namespaces, veth pairs or ``tbf``."""
    if os.geteuid() != 0:
        return "the emulated cluster needs root (CAP_NET_ADMIN) for network namespaces and tc"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"the emulated cluster needs iproute2's '{tool}' on PATH"
    ns, a, b = f"wbprobe{uuid.uuid4().hex[:6]}", f"wbp{uuid.uuid4().hex[:6]}", f"wbq{uuid.uuid4().hex[:6]}"
    try:
        _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        _run("tc", "qdisc", "add", "dev", a, "root", "tbf", "rate", "1gbit", "burst", "64kb", "latency", "50ms")
        return None
    except RuntimeError as exc:
        return f"the kernel refused part of the emulated cluster: {exc}"
    finally:
        _run("ip", "link", "del", a, check=False)
        _run("ip", "netns", "del", ns, check=False)


def _netem_available() -> bool:
    a, b = f"wbp{uuid.uuid4().hex[:6]}", f"wbq{uuid.uuid4().hex[:6]}"
    try:
        _run("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        return _run("tc", "qdisc", "add", "dev", a, "root", "netem", "delay", "1ms", check=False).returncode == 0
    except RuntimeError:
        return False
    finally:
        _run("ip", "link", "del", a, check=False)


@dataclasses.dataclass
class Host:
    """One emulated host: its namespace, address and the two ends of its link."""

    name: str
    namespace: str
    address: str
    veth_root: str
    """The link's end on the bridge (root namespace)."""
    veth_host: str
    """The link's end inside the host's namespace."""
    pids: list = dataclasses.field(default_factory=list)
    """Processes started in the namespace (the scheduler, or a worker and its nanny)."""


class NetCluster:
    """N emulated hosts, a scheduler host, shaped links, a Dask scheduler and one worker per host.

    Args:
        hosts: number of worker hosts (>= 1).
        bandwidth: each link's rate, both ways (``tc`` units: ``1gbit``, ``100mbit``).
        latency: one-way delay added on each link (``0.2ms``); needs ``netem`` (see the module docstring).
        workers: start the Dask scheduler and workers (False: only the network).
        python: the interpreter of the scheduler and workers (default: this one).
        start_timeout: seconds to wait for the workers to register.
        scheduler_file: the scheduler writes its address to a scheduler file (:attr:`scheduler_file`) and
            the workers find it there (``dask scheduler --scheduler-file F``, ``dask worker --scheduler-file
            F``), as on a cluster started by MPI or a batch system; clients may connect either way.
    """

    def __init__(self, hosts: int = 2, bandwidth: str = "1gbit", latency: Optional[str] = None, *,
                 workers: bool = True, python: Optional[str] = None, start_timeout: float = 60.0,
                 scheduler_file: bool = False, cpus: str = "auto"):
        if cpus not in ("auto", "shared"):
            raise ValueError(f"The 'cpus' parameter of NetCluster must be 'auto' or 'shared'. Got {cpus!r} instead.")
        if not isinstance(hosts, int) or isinstance(hosts, bool) or not 1 <= hosts <= 200:
            raise ValueError(f"The 'hosts' parameter of NetCluster must be an int in [1, 200]. Got {hosts!r} instead.")
        self.rate_bps = parse_rate(bandwidth)
        self.bandwidth = bandwidth
        self.latency_us = _parse_time_us(latency) if latency is not None else None
        self.latency = latency
        self.num_hosts = hosts
        self.start_workers = workers
        self.python = python or sys.executable
        self.start_timeout = float(start_timeout)
        self.tag = uuid.uuid4().hex[:5]
        self.subnet = f"10.{77 + int(self.tag[:2], 16) % 100}.{int(self.tag[2:4], 16)}"
        self.bridge = f"wb{self.tag}br"
        self.hosts: list[Host] = []
        self.scheduler_host: Optional[Host] = None
        self.scheduler_port = 8786
        #: the scheduler file (inside :attr:`log_dir`, removed with it) when ``scheduler_file=True``, else None
        self.scheduler_file: Optional[Path] = (Path(f"/tmp/workbench-netcluster-{self.tag}") / "scheduler.json"
                                               if scheduler_file else None)
        self._up = False
        self.cpus = cpus
        self.host_cpus: list[Optional[list[int]]] = _host_cpus(hosts, cpus)
        """The cores of each host's processes (``None``: every core)."""

    # -- addresses -----------------------------------------------------------------------------------------
    @property
    def scheduler_address(self) -> str:
        """``tcp://ADDRESS:PORT`` of the scheduler (reachable from the root namespace)."""
        return f"tcp://{self.scheduler_host.address}:{self.scheduler_port}"

    @property
    def gateway(self) -> str:
        """The bridge's address: the client's (this process's) address on the cluster network."""
        return f"{self.subnet}.254"

    def __repr__(self) -> str:
        state = "up" if self._up else "down"
        cores = "cores per host" if self.host_cpus and self.host_cpus[0] is not None else "cores shared"
        return (f"NetCluster(hosts={self.num_hosts}, bandwidth={self.bandwidth!r}, latency={self.latency!r}, "
                f"subnet={self.subnet}.0/24, {cores}, {state})")

    # -- life cycle ----------------------------------------------------------------------------------------
    def __enter__(self) -> "NetCluster":
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self) -> "NetCluster":
        """Create the network (and start Dask); on any failure everything created so far is removed."""
        reason = unavailable_reason()
        if reason is not None:
            raise RuntimeError(reason)
        if self.latency_us is not None and not _netem_available():
            raise ValueError(f"The 'latency' parameter of NetCluster must be None on a kernel without netem "
                             f"(tbf shapes bandwidth only; a latency would not be emulated). Got "
                             f"{self.latency!r} instead.")
        _LIVE.append(self)
        self._up = True
        try:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            _run("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
            self.scheduler_host = self._add_host("s", 253)
            self.hosts = [self._add_host(f"h{i}", i + 1) for i in range(self.num_hosts)]
            self._write_names()
            if self.start_workers:
                self._start_dask()
        except BaseException:
            self.down()
            raise
        return self

    def _add_host(self, name: str, octet: int) -> Host:
        ns = f"wb{self.tag}{name}"
        host = Host(name=name, namespace=ns, address=f"{self.subnet}.{octet}", veth_root=f"wb{self.tag}{name}r",
                    veth_host=f"wb{self.tag}{name}n")
        _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", host.veth_root, "type", "veth", "peer", "name", host.veth_host)
        _run("ip", "link", "set", host.veth_host, "netns", ns)
        _run("ip", "link", "set", host.veth_root, "master", self.bridge)
        _run("ip", "link", "set", host.veth_root, "up")
        _run("ip", "addr", "add", f"{host.address}/24", "dev", host.veth_host, ns=ns)
        _run("ip", "link", "set", host.veth_host, "up", ns=ns)
        _run("ip", "link", "set", "lo", "up", ns=ns)
        _run("ip", "route", "add", "default", "via", self.gateway, ns=ns)
        self._shape(host.veth_root, None)
        self._shape(host.veth_host, ns)
        return host

    def _write_names(self) -> None:
        """Each namespace's own ``/etc/hosts`` and ``/etc/resolv.conf`` (``ip netns exec`` mounts the files of
        ``/etc/netns/NAMESPACE`` over ``/etc``): the cluster's hosts by name, as a real cluster's hosts file or DNS
        has them, and a name server on the namespace's own loopback, which refuses at once. The machine's name
        server is not reachable from a namespace, so every lookup it misses would wait for the resolver's timeout:
        torch's ``TCPStore`` (2.4 and later) looks up each peer's name, which cost 10 s a rendezvous on torch 2.13."""
        try:
            base = Path("/etc/hosts").read_text()
        except OSError:
            base = "127.0.0.1\tlocalhost\n"
        hosts = [h for h in [self.scheduler_host, *self.hosts] if h is not None]
        names = "".join(f"{h.address}\t{h.namespace} {h.name}\n" for h in hosts)
        for h in hosts:
            folder = NETNS_ETC / h.namespace
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "hosts").write_text(f"{base.rstrip()}\n# workbench emulated cluster {self.tag}\n"
                                          f"{self.gateway}\twb{self.tag}client\n{names}")
            (folder / "resolv.conf").write_text(f"# workbench emulated cluster {self.tag}: no name server is "
                                                "reachable from this namespace\nnameserver 127.0.0.1\n"
                                                "options timeout:1 attempts:1\n")

    def _shape(self, dev: str, ns: Optional[str]) -> None:
        burst, gso = link_settings(self.rate_bps)
        # tbf splits a GSO packet larger than its bucket into MTU-sized segments in software: cap them below it
        _run("ip", "link", "set", "dev", dev, "gso_max_size", str(gso), ns=ns)
        # a flow's packets to one core's backlog (RPS over every core), as a NIC's receive queue: not reordered
        _run("sh", "-c", f"for q in /sys/class/net/{dev}/queues/rx-*; do echo {_cpu_mask()} > $q/rps_cpus; done",
             ns=ns)
        tbf = ["tbf", "rate", f"{self.rate_bps}bit", "burst", str(burst), "latency", "50ms"]
        if self.latency_us is None:
            _run("tc", "qdisc", "add", "dev", dev, "root", *tbf, ns=ns)
            return
        half = self.latency_us / 2.0
        _run("tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", "delay", f"{half:.1f}us", ns=ns)
        _run("tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", *tbf, ns=ns)

    def _spawn(self, host: Host, *args: str, log: str, cpus: Optional[list[int]] = None) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
        env.pop("GLOO_SOCKET_IFNAME", None)
        logf = open(self.log_dir / log, "ab")
        proc = subprocess.Popen(["ip", "netns", "exec", host.namespace, self.python, *args], stdout=logf,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
        logf.close()
        host.pids.append(proc.pid)
        if cpus is not None:   # inherited by the exec'd interpreter and the nanny's worker process
            try:
                os.sched_setaffinity(proc.pid, cpus)
            except OSError:
                pass

    @property
    def log_dir(self) -> Path:
        """Where the scheduler's and workers' output goes (removed by :meth:`down`)."""
        path = Path(f"/tmp/workbench-netcluster-{self.tag}")
        path.mkdir(exist_ok=True)
        return path

    def _start_dask(self) -> None:
        s = self.scheduler_host
        to_file = ("--scheduler-file", str(self.scheduler_file)) if self.scheduler_file else ()
        self._spawn(s, "-m", "distributed.cli.dask_scheduler", "--host", s.address, "--port",
                    str(self.scheduler_port), "--no-dashboard", "--no-show", *to_file, log="scheduler.log")
        for host in self.hosts:
            self._start_worker(host)
        self.wait_for_workers(self.num_hosts)

    def _start_worker(self, host: Host) -> None:
        where = ("--scheduler-file", str(self.scheduler_file)) if self.scheduler_file else (self.scheduler_address,)
        self._spawn(host, "-m", "distributed.cli.dask_worker", *where, "--host", host.address,
                    "--nthreads", "1", "--nworkers", "1", "--no-dashboard", "--name", host.name,
                    "--death-timeout", "60", log=f"worker-{host.name}.log",
                    cpus=self.host_cpus[self.hosts.index(host)])

    def wait_for_workers(self, n: int, timeout: Optional[float] = None) -> None:
        """Block until ``n`` workers are registered with the scheduler."""
        from distributed import Client

        deadline = time.monotonic() + (timeout or self.start_timeout)
        while True:
            try:
                with Client(self.scheduler_address, timeout=5) as client:
                    client.wait_for_workers(n, timeout=max(1.0, deadline - time.monotonic()))
                    return
            except (OSError, TimeoutError) as exc:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{n} workers did not register with {self.scheduler_address} within "
                                       f"{timeout or self.start_timeout:g} s ({exc}); logs in {self.log_dir}") from None
                time.sleep(0.5)

    # -- faults --------------------------------------------------------------------------------------------
    def _host(self, index) -> Host:
        return self.scheduler_host if index == "scheduler" else self.hosts[index]

    def link_down(self, index) -> None:
        """Take host ``index``'s link down (both ends; ``"scheduler"``: the scheduler's host): its processes
        keep running, cut off."""
        h = self._host(index)
        _run("ip", "link", "set", h.veth_root, "down")
        _run("ip", "link", "set", h.veth_host, "down", ns=h.namespace)

    def link_up(self, index) -> None:
        """Bring host ``index``'s link back (its default route is restored)."""
        h = self._host(index)
        _run("ip", "link", "set", h.veth_root, "up")
        _run("ip", "link", "set", h.veth_host, "up", ns=h.namespace)
        _run("ip", "route", "replace", "default", "via", self.gateway, ns=h.namespace)

    def kill_worker(self, index: int, restart: bool = False) -> None:
        """Kill host ``index``'s worker (and its nanny); ``restart`` starts a fresh one."""
        h = self.hosts[index]
        _kill(h.pids)
        h.pids.clear()
        if restart:
            self._start_worker(h)

    def namespace_pids(self) -> list[int]:
        """Every process still running in one of the cluster's namespaces."""
        pids: list[int] = []
        for h in [self.scheduler_host, *self.hosts]:
            if h is None:
                continue
            out = _run("ip", "netns", "pids", h.namespace, check=False)
            pids += [int(p) for p in out.stdout.split()]
        return pids

    def prioritise(self, nice: int = -10) -> int:
        """Raise the CPU priority of the cluster's processes (the hosts share this machine's cores with whatever
        else runs on it): ``nice`` for each process's scheduling autogroup where the kernel has them (a nice
        value of the threads alone does not count across sessions), else for the process. Returns how many
        processes took it. For measurements on a shared machine (``benchmarks/network_model.py``)."""
        done = 0
        for pid in self.namespace_pids():
            try:
                Path(f"/proc/{pid}/autogroup").write_text(str(int(nice)))
                done += 1
            except OSError:
                try:
                    os.setpriority(os.PRIO_PROCESS, pid, int(nice))
                    done += 1
                except OSError:
                    pass
        return done

    def down(self) -> None:
        """Stop every process and remove the namespaces, links and bridge (idempotent)."""
        if not self._up:
            return
        self._up = False
        hosts = [h for h in [self.scheduler_host, *self.hosts] if h is not None]
        for h in hosts:
            _kill(h.pids)
            out = _run("ip", "netns", "pids", h.namespace, check=False)   # anything else started in there
            _kill([int(p) for p in out.stdout.split()])
        for h in hosts:
            _run("ip", "link", "del", h.veth_root, check=False)
            _run("ip", "netns", "del", h.namespace, check=False)
            shutil.rmtree(NETNS_ETC / h.namespace, ignore_errors=True)
        try:
            NETNS_ETC.rmdir()   # where the last cluster made it (another user's files keep it)
        except OSError:
            pass
        _run("ip", "link", "del", self.bridge, check=False)
        shutil.rmtree(f"/tmp/workbench-netcluster-{self.tag}", ignore_errors=True)
        if self in _LIVE:
            _LIVE.remove(self)

    # -- a cluster that outlives this process (``workbench cluster up|down``) -------------------------------
    def to_state(self) -> dict:
        return {"tag": self.tag, "subnet": self.subnet, "bridge": self.bridge, "bandwidth": self.bandwidth,
                "latency": self.latency, "scheduler": self.scheduler_address,
                "scheduler_file": str(self.scheduler_file) if self.scheduler_file else None,
                "cpus": self.cpus, "host_cpus": self.host_cpus,
                "hosts": [dataclasses.asdict(h) for h in [self.scheduler_host, *self.hosts]]}

    @classmethod
    def from_state(cls, state: dict) -> "NetCluster":
        c = cls.__new__(cls)
        c.tag, c.subnet, c.bridge = state["tag"], state["subnet"], state["bridge"]
        c.bandwidth, c.latency = state["bandwidth"], state.get("latency")
        hosts = [Host(**h) for h in state["hosts"]]
        c.scheduler_host, c.hosts = hosts[0], hosts[1:]
        c.num_hosts, c._up, c.scheduler_port = len(c.hosts), True, int(state["scheduler"].rsplit(":", 1)[1])
        c.scheduler_file = Path(state["scheduler_file"]) if state.get("scheduler_file") else None
        c.cpus, c.host_cpus = state.get("cpus", "shared"), state.get("host_cpus", [None] * len(c.hosts))
        return c


def link_settings(rate_bps: int) -> tuple[int, int]:
    """``(burst, gso_max_size)`` in bytes of an emulated link of ``rate_bps``: a ``tbf`` bucket of 0.2 ms of the
    rate, at least 24 KiB, and the largest GSO packet the link's veth may carry, 8 KiB below the bucket (room
    for the segments' headers, which tbf counts) and at most the kernel's usual 64 KiB.

    Example:
        >>> link_settings(parse_rate("1gbit")), link_settings(parse_rate("10gbit"))
        ((25000, 16808), (250000, 65536))
    """
    burst = max(int(rate_bps) // 8 // 5000, 24 * 1024)
    return burst, min(65536, burst - 8 * 1024)


def _cpu_mask() -> str:
    """The hex mask of every core this machine has (``rps_cpus``'s format, 32 bits per comma-separated word)."""
    mask = (1 << (os.cpu_count() or 1)) - 1
    words = []
    while True:
        words.append(f"{mask & 0xFFFFFFFF:08x}")
        mask >>= 32
        if not mask:
            break
    return ",".join(reversed(words))


def _host_cpus(hosts: int, cpus: str) -> list[Optional[list[int]]]:
    """Each host's cores: an equal share of this process's cores when there is one per host, else ``None``."""
    try:
        mine = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        mine = list(range(os.cpu_count() or 1))
    if cpus == "shared" or len(mine) < hosts:
        return [None] * hosts
    share = len(mine) // hosts
    return [mine[i * share:(i + 1) * share] for i in range(hosts)]


def _kill(pids: list) -> None:
    """SIGTERM each process group, then SIGKILL what is left after 5 s."""
    alive = []
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGTERM)
            alive.append(pid)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(pid, signal.SIGTERM)
                alive.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
    deadline = time.monotonic() + 5.0
    for pid in alive:
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
            except ChildProcessError:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
            time.sleep(0.05)
        for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                kill()
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


@atexit.register
def _down_all() -> None:   # a last resort: a test that died without its ``finally``
    for cluster in list(_LIVE):
        cluster.down()


def _add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="create the emulated cluster (root) and leave it running")
    up.add_argument("--hosts", type=int, default=2, help="worker hosts (default 2)")
    up.add_argument("--bandwidth", default="1gbit", help="each link's rate, both ways (tc units; default 1gbit)")
    up.add_argument("--latency", default=None, help="one-way delay per link (needs netem; e.g. 0.2ms)")
    up.add_argument("--cpus", choices=("auto", "shared"), default="auto",
                    help="auto: each host's processes on cores of their own where there is one per host (default); "
                         "shared: every host on every core")
    up.add_argument("--state", type=Path, default=STATE_FILE, help=f"where to record it (default {STATE_FILE})")
    down = sub.add_parser("down", help="stop the emulated cluster that 'up' created")
    down.add_argument("--state", type=Path, default=STATE_FILE)


def register(subparsers) -> None:
    """``workbench cluster up|down`` (see :func:`main`)."""
    p = subparsers.add_parser("cluster", help="an emulated multi-host cluster on this machine (root)",
                              description=__doc__.split("\n\n")[0])
    _add_arguments(p)
    p.set_defaults(func=run_cli)


def main(argv: Optional[list[str]] = None) -> int:
    """``workbench cluster up --hosts N --bandwidth R [--latency T]`` / ``workbench cluster down``."""
    import argparse

    parser = argparse.ArgumentParser(prog="workbench cluster", description=__doc__.split("\n\n")[0])
    _add_arguments(parser)
    return run_cli(parser.parse_args(argv))


def run_cli(args) -> int:
    """The body of ``workbench cluster`` (``args.action`` is ``up`` or ``down``)."""
    if args.action == "up":
        reason = unavailable_reason()
        if reason is not None:
            print(f"workbench cluster: {reason}", file=sys.stderr)
            return 2
        if args.state.exists():
            print(f"workbench cluster: a cluster is up already ({args.state}); 'workbench cluster down' first",
                  file=sys.stderr)
            return 2
        cluster = NetCluster(args.hosts, args.bandwidth, args.latency, scheduler_file=True,
                             cpus=args.cpus).up()
        _LIVE.remove(cluster)   # it outlives this process
        args.state.write_text(json.dumps(cluster.to_state(), indent=1))
        print(f"{cluster!r}\nscheduler {cluster.scheduler_address} (its file: {cluster.scheduler_file})\n"
              f"run: workbench run RECIPE --scheduler {cluster.scheduler_address} --workers {cluster.num_hosts}\n"
              f" or: workbench run RECIPE --scheduler-file {cluster.scheduler_file} --workers {cluster.num_hosts}")
        return 0
    if not args.state.exists():
        print(f"workbench cluster: no cluster is up ({args.state} does not exist)", file=sys.stderr)
        return 2
    NetCluster.from_state(json.loads(args.state.read_text())).down()
    args.state.unlink()
    print("workbench cluster: down")
    return 0


if __name__ == "__main__":   # pragma: no cover
    sys.exit(main())
