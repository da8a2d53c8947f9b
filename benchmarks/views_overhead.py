"""Benchmark: what the live views cost a training run, and how fast an event reaches the page.

Runs the same training (SANCUS epoch-fixed, ε = 1, on a generated SBM graph) several times, alternating:

* **bare**: no views; a listener on the run handle only records when each event arrives;
* **views**: the dashboard served (``widgets.serve.serve`` on 127.0.0.1, a free port, threaded) and a
  headless Debian chromium page (Playwright, as in ``tests/ui``) open on it, showing the run and
  switching through its tabs while the run goes.

It reports the training time per epoch of each (mean of the run summary's ``epoch_times``, the slowest
rank per epoch, after a few warm-up epochs), the ratio views/bare per pair and of the medians, and
for every ``EpochEnd`` event the latency from ``event.time`` (stamped on the rank where the event is
made) to

* its arrival in the client (the handle's listener, ``time.time()``), and
* the page showing it: a timer in the page reads the epoch counter (``.wb-epochs``, "epochs that
  every rank has finished") every 20 ms and records when each value first appears (``Date.now()``,
  the same clock on one machine); epoch ``e`` is shown once the counter reaches ``e + 1``, and its
  latency is counted from the last rank's ``EpochEnd`` of that epoch.

The page is opened (and the Bokeh scripts loaded) before the run starts, on an empty registry; the
run is added with ``RunRegistry.add(handle)`` right after ``launch`` returns, so the page's first
refresh selects it. A fresh registry and server serve each views run. ``--also-local`` repeats the pair
with the in-process ``local`` runner, whose ranks are threads sharing the GIL with the server.

Usage::

    python benchmarks/views_overhead.py                   # dask runner, 2 workers, 2 repeats
    python benchmarks/views_overhead.py --quick           # a smoke run (few epochs, one repeat)
    python benchmarks/views_overhead.py --epochs 1000 --repeats 3 --json views.json

On a small machine the ranks, the Dask client, the Panel server and chromium share the cores, so the
ratio measures the views' cost where it is highest; repeat (``--repeats``) to see the noise. ``--pin``
(dask runner, Linux) separates the two effects: the rank processes get the first ``--workers`` cores and
everything else (client, server, chromium) the rest, as when the browser runs on the user's laptop and
the ranks on a cluster; the ratio then measures what the views cost a run that does not share its cores.

    python benchmarks/views_overhead.py --workers 2 --pin --tab-every 0   # needs 4 cores or more

Separate runs drift: three one-minute runs on an idle 2-core machine took 29, 32 and 41 ms per epoch, more
than the views cost. ``--alternate SECONDS`` measures within one run instead: the page is closed
(``about:blank``) and open on the dashboard in turn, ``--cycles`` times, and each open window's median epoch
is compared with the closed windows on both sides of it; the first ``--settle`` seconds of each window (the
page loading and building the run's figures) are not counted, and a per-second profile shows what they cost.

    python benchmarks/views_overhead.py --alternate 15 --settle 6 --cycles 8

``--page-cost`` measures the views' side alone, which the ratio above mixes with the machine's noise: the
CPU that chromium and the server use per second while the page follows a replayed run.

    python benchmarks/views_overhead.py --page-cost
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_GRAPH = "sbm:num_nodes=3000,num_blocks=8,avg_degree=10,num_features=32,seed=0"
QUICK_GRAPH = "sbm:num_nodes=1000,num_blocks=4,avg_degree=8,num_features=16,seed=0"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
TABS = ("Training curves", "Partition", "Staleness", "Communication", "Compare runs")
WARMUP_EPOCHS = 5

# Runs in the page: finds the epoch counter (Bokeh renders into shadow roots, so the search walks them)
# and records each new value with the wall clock. The element is replaced when the status pane
# re-renders, so it is searched again once it has left the document: first in the shadow root it was
# in, then, only if not there, in the whole page.
_RECORDER_JS = """
() => {
  window.__wbSeen = [];
  let el = null, last = null, home = null;  // home: the shadow root that held the counter last time
  const find = (root) => {
    const hit = root.querySelector('.wb-epochs');
    if (hit) { home = root; return hit; }
    for (const node of root.querySelectorAll('*')) {
      if (node.shadowRoot) { const h = find(node.shadowRoot); if (h) return h; }
    }
    return null;
  };
  window.__wbTimer = setInterval(() => {
    // the status pane re-renders its HTML in place: look in the same shadow root first (cheap), and
    // walk the whole page only when the counter moved elsewhere (the instrument must not load the page)
    if (!el || !el.isConnected) {
      const near = home && home.querySelector('.wb-epochs');
      el = near && near.isConnected ? near : find(document);  // a shadow root can leave the page too
    }
    if (!el) return;
    const text = el.textContent;
    if (text !== last) {
      last = text;
      window.__wbSeen.push([parseInt(text, 10), (performance.timeOrigin + performance.now()) / 1000]);
    }
  }, 20);
}
"""


def page_cost(epochs: int = 400, delay: float = 0.03) -> int:
    """The views' CPU, without the training: the dashboard shows a replayed run (``SyntheticRun``, 2 ranks,
    one epoch every ``delay`` s) in chromium; after the run's figures are built (4 s), the CPU seconds of
    chromium and of this process (the Panel server) per wall second until the replay ends. On a machine
    whose ranks use every core, these are the cores the views take from training."""
    from widgets.app import RunRegistry
    from widgets.serve import serve
    from widgets.synthetic import SyntheticRun

    browser, server = Browser(), None
    try:
        registry = RunRegistry(runs_dir=None)
        port = free_port()
        server = serve(registry, port=port, threaded=True)
        time.sleep(0.5)
        _, page = browser.new_page(f"http://127.0.0.1:{port}/")
        chrome = browser.processes()
        run = SyntheticRun(epochs=epochs, delay=delay, out=None, num_parts=2, start=False)
        registry.add(run)
        run.start()
        time.sleep(4)
        c0, p0, t0 = _cpu_seconds(chrome), time.process_time(), time.time()
        while not run._done.is_set():
            page.wait_for_timeout(200)
        dt = time.time() - t0
        chrome_core, server_core = (_cpu_seconds(chrome) - c0) / dt, (time.process_time() - p0) / dt
    finally:
        browser.close()
        if server is not None:  # its thread is not a daemon: a server left running keeps the process alive
            server.stop()
    print(f"page cost over {dt:.1f} s of a replayed run ({epochs} epochs, one per {delay:g} s, 2 ranks): "
          f"chromium {chrome_core:.3f} core, server {server_core:.3f} core, "
          f"together {chrome_core + server_core:.3f} of {os.cpu_count()} cores")
    return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EpochClock:
    """A run handle listener: for each ``EpochEnd``, when it was made (on the rank) and when it arrived."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, float, float]] = []  # (epoch, rank, made, arrived)
        self._lock = threading.Lock()

    def __call__(self, event: Any) -> None:
        if type(event).__name__ == "EpochEnd":
            arrived = time.time()
            with self._lock:
                self.rows.append((event.epoch, event.rank, event.time, arrived))

    def arrival_latencies(self) -> list[float]:
        return [arrived - made for _, _, made, arrived in self.rows]

    def epoch_done_at(self) -> dict[int, float]:
        """Epoch -> when its last rank made its ``EpochEnd`` (the page counts epochs all ranks finished)."""
        out: dict[int, float] = {}
        for epoch, _, made, _ in self.rows:
            out[epoch] = max(out.get(epoch, 0.0), made)
        return out


def page_latencies(seen: list[list[float]], done_at: dict[int, float]) -> list[float]:
    """Latency of each epoch: first time the counter showed ``>= epoch + 1`` minus ``done_at[epoch]``.

    Only epochs made after the counter first appeared count: before that the page was still building
    the run's views (see :func:`first_shown`), and every earlier epoch would inherit that wait.
    """
    out = []
    start = seen[0][1] if seen else float("inf")
    for epoch, made in sorted(done_at.items()):
        if made < start:
            continue
        shown = next((t for value, t in seen if value >= epoch + 1), None)
        if shown is not None:
            out.append(shown - made)
    return out


def first_shown(seen: list[list[float]], started: float) -> Optional[float]:
    """Seconds from ``launch`` to the counter's first appearance: the page picking up and drawing a new run."""
    return seen[0][1] - started if seen else None


class PaneWatcher(threading.Thread):
    """Where the page's latency goes: polls, on the server side, the epoch counter in the status pane of the
    registry's open sessions (``Dashboard.view.progress``) and records when each value first appears."""

    _NUMBER = re.compile(r"class='wb-epochs'>(\d+)<")

    def __init__(self, registry: Any, period: float = 0.02):
        super().__init__(daemon=True, name="views-bench-pane-watcher")
        self.registry, self.period = registry, period
        self.seen: list[list[float]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        last = None
        while not self.halt.wait(self.period):
            for session in list(self.registry.sessions):
                view = getattr(session, "view", None)
                progress = getattr(view, "progress", None)  # private panes: a probe only
                status = getattr(progress, "_counts", None) or getattr(progress, "_status", None)
                m = self._NUMBER.search(str(getattr(status, "object", "") or ""))
                if m and m.group(1) != last:
                    last = m.group(1)
                    self.seen.append([int(last), time.time()])


def _cpu_seconds(procs: list) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except Exception:  # a renderer process may have gone
            pass
    return total


class RankPinner(threading.Thread):
    """Pins the Dask worker processes (multiprocessing ``spawn`` children of this process) to ``cores``,
    checking every 0.2 s. Nothing else is pinned: Playwright's driver and chromium stay off the ranks."""

    def __init__(self, cores: set[int]):
        super().__init__(daemon=True, name="rank-pinner")
        self.cores, self.halt, self.pinned = cores, threading.Event(), set()

    def run(self) -> None:
        import psutil

        me = psutil.Process()
        while not self.halt.wait(0.2):
            for child in me.children(recursive=True):
                try:
                    if child.pid not in self.pinned and "spawn_main" in " ".join(child.cmdline()):
                        child.cpu_affinity(sorted(self.cores))
                        self.pinned.add(child.pid)
                except Exception:  # gone already
                    pass


class Browser:
    """Headless Debian chromium through Playwright (no browser download), external requests refused."""

    def __init__(self) -> None:
        if not os.path.exists(CHROMIUM):
            raise SystemExit(f"{CHROMIUM} is not installed (apt-get install chromium)")
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        self.browser = self._pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)

    def processes(self) -> list:
        """The chromium processes (for their CPU time), when psutil is installed."""
        try:
            import psutil
        except ImportError:
            return []
        me = psutil.Process()
        return [p for p in me.children(recursive=True) if "chrom" in (p.name() or "").lower()]

    def new_context(self):
        context = self.browser.new_context(viewport={"width": 1500, "height": 1100})
        context.set_default_timeout(30_000)
        # no internet here: refuse external requests at once instead of waiting for them (template web fonts)
        context.route("**/*", lambda route: route.continue_() if "127.0.0.1" in route.request.url else route.abort())
        return context

    def new_page(self, url: str):
        context = self.new_context()
        page = context.new_page()
        page.goto(url)
        page.wait_for_selector("text=New run")
        return context, page

    def close(self) -> None:
        self.browser.close()
        self._pw.stop()


def run_once(cfg: Any, *, runner: str, workers: int, out: str, browser: Optional[Browser] = None,
             tab_every: float = 1.5, rank_cores: Optional[set[int]] = None) -> dict:
    """One training run, bare (``browser=None``) or watched by the served dashboard in a page."""
    from workbench.runtime import launch

    clock = EpochClock()
    page = context = server = watcher = None
    if browser is not None:
        from widgets.app import RunRegistry
        from widgets.serve import serve

        registry = RunRegistry(runs_dir=None)
        port = free_port()
        server = serve(registry, port=port, threaded=True)
        time.sleep(0.5)
        context, page = browser.new_page(f"http://127.0.0.1:{port}/")
        page.evaluate(_RECORDER_JS)
        watcher = PaneWatcher(registry)
        watcher.start()
    chrome = browser.processes() if browser is not None else []
    cpu0, chrome0 = time.process_time(), _cpu_seconds(chrome)
    t0 = time.time()
    pinner = RankPinner(rank_cores) if rank_cores else None
    if pinner is not None:
        pinner.start()
    handle = launch(cfg, runner=runner, workers=workers, out=out, listeners=[clock])
    clicks = failed_clicks = 0
    try:
        if page is not None:
            registry.add(handle)
            next_tab = time.time() + tab_every if tab_every > 0 else float("inf")  # 0: watch one tab
            while not handle.done():
                if time.time() >= next_tab:
                    try:
                        page.get_by_text(TABS[clicks % len(TABS)], exact=True).first.click(timeout=5_000)
                    except Exception:
                        failed_clicks += 1
                    clicks += 1
                    next_tab = time.time() + tab_every
                page.wait_for_timeout(100)  # not time.sleep: Playwright serves the page's routes meanwhile
        summary = handle.wait()
        total_s = time.time() - t0
        cpu = time.process_time() - cpu0
        chrome_cpu = _cpu_seconds(chrome) - chrome0
        seen: list = []
        if page is not None:
            epochs = int(summary.get("epochs", 0))
            deadline = time.time() + 15
            while time.time() < deadline:  # the last epochs reach the page after the run ended
                seen = page.evaluate("window.__wbSeen")
                if seen and seen[-1][0] >= epochs:
                    break
                page.wait_for_timeout(100)
    finally:
        if pinner is not None:
            pinner.halt.set()
        if watcher is not None:
            watcher.halt.set()
        if context is not None:
            try:
                page.goto("about:blank")  # close the websocket from the page's side first
            except Exception:
                pass
            context.close()
            time.sleep(0.5)  # let the server see the session end before it stops
        if server is not None:
            try:
                server.stop()
            except RuntimeError:
                pass
    times = list(summary["epoch_times"])
    warm = min(WARMUP_EPOCHS, max(len(times) - 1, 0))
    return {
        "views": browser is not None, "runner": runner, "epochs": len(times),
        "epoch_s": statistics.mean(times[warm:]) if times else float("nan"),
        "train_s": sum(times), "wall_s": float(summary.get("wall_s", total_s)), "total_s": total_s,
        "client_cpu_s": cpu, "chromium_cpu_s": chrome_cpu if chrome else None,
        "arrival_s": clock.arrival_latencies(),
        "page_s": page_latencies(seen, clock.epoch_done_at()) if page is not None else [],
        "first_shown_s": first_shown(seen, t0) if page is not None else None,
        "pane_s": page_latencies(watcher.seen, clock.epoch_done_at()) if watcher is not None else [],
        "page_values_seen": len(seen), "tab_clicks": clicks, "tab_clicks_failed": failed_clicks,
    }


def run_alternating(cfg: Any, *, runner: str, workers: int, out: str, browser: Browser, window_s: float = 8.0,
                    settle_s: float = 5.0, cycles: int = 8) -> dict:
    """One long training run watched and not watched in turn: ``cycles`` times the page closed
    (``about:blank``: no session, nothing drawn) for ``window_s`` seconds, then open on the dashboard for
    ``window_s`` seconds, watching the training curves; the run is stopped after the last window.

    Every epoch is counted in the window in which its last rank ended it, except in the first
    ``settle_s`` seconds of each window (a page opening loads BokehJS and builds the figures of the run so
    far; a page closing hands its CPU back). The slow drift of a shared machine (epochs 29-41 ms between
    three runs of one minute on an idle 2-core machine) cancels in the ratio of adjacent windows, which
    separate runs cannot show; the ratio per cycle is the open window's median epoch over the mean of the
    closed windows' medians around it.
    """
    from widgets.app import RunRegistry
    from widgets.serve import serve
    from workbench.runtime import launch

    clock = EpochClock()
    registry = RunRegistry(runs_dir=None)
    port = free_port()
    server = serve(registry, port=port, threaded=True)
    time.sleep(0.5)
    url = f"http://127.0.0.1:{port}/"
    context = browser.new_context()
    page = context.new_page()
    chrome = browser.processes()
    windows: list[tuple[bool, float, float]] = []   # (page open, start, end)
    seen_per_window: list[list] = []
    chrome_cpu = {True: 0.0, False: 0.0}
    handle = launch(cfg, runner=runner, workers=workers, out=out, listeners=[clock])
    try:
        registry.add(handle)
        while not clock.rows and not handle.done():   # the ranks are up and training
            time.sleep(0.1)
        for cycle in range(cycles + 1):
            for open_ in ((False, True) if cycle < cycles else (False,)):
                if handle.done():
                    break
                start, c0 = time.time(), None   # c0: chromium's CPU seconds once the settling is over
                if open_:
                    page.goto(url)
                    page.wait_for_selector(".wb-epochs")
                    page.evaluate(_RECORDER_JS)
                    chrome = browser.processes()
                else:
                    page.goto("about:blank")
                while time.time() < start + window_s and not handle.done():
                    if c0 is None and time.time() >= start + settle_s:
                        c0 = _cpu_seconds(chrome)
                    page.wait_for_timeout(100)
                if open_:
                    seen_per_window.append(page.evaluate("window.__wbSeen"))
                if c0 is not None:
                    chrome_cpu[open_] += _cpu_seconds(chrome) - c0
                windows.append((open_, start, time.time()))
        handle.stop()
        try:
            handle.wait()
        except Exception:   # a stopped run may say so
            pass
    finally:
        try:
            page.goto("about:blank")
        except Exception:
            pass
        context.close()
        time.sleep(0.5)
        try:
            server.stop()
        except RuntimeError:
            pass
    done_at = clock.epoch_done_at()
    ends = sorted(done_at.items())
    # an epoch's duration: its last rank's end minus the previous epoch's (the slowest rank, as the summary)
    durations = {e: t - ends[i - 1][1] for i, (e, t) in enumerate(ends) if i > 0 and ends[i - 1][0] == e - 1}
    per_window = []
    for open_, start, end in windows:
        vals = [d for e, d in durations.items() if start + settle_s <= done_at[e] < end]
        per_window.append({"open": open_, "start": start, "end": end, "epochs": len(vals),
                           "median_ms": 1e3 * statistics.median(vals) if vals else float("nan")})
    # median epoch by whole seconds since its window opened, over the open (closed) windows: how long a
    # page opening weighs on the run, which is what --settle leaves out
    profile: dict[bool, list[float]] = {}
    for flag in (True, False):
        bins: dict[int, list[float]] = {}
        for open_, start, end in windows:
            if open_ == flag:
                for e, d in durations.items():
                    if start <= done_at[e] < end:
                        bins.setdefault(int(done_at[e] - start), []).append(d)
        profile[flag] = [1e3 * statistics.median(bins[k]) if k in bins else float("nan")
                         for k in range(int(window_s) + 1)]
    ratios = []
    for i, w in enumerate(per_window):
        if w["open"] and 0 < i < len(per_window) - 1:
            around = [per_window[i - 1]["median_ms"], per_window[i + 1]["median_ms"]]
            ratios.append(w["median_ms"] / statistics.mean(around))
    page_s = [x for seen in seen_per_window for x in page_latencies(seen, done_at)]
    steady_done = {e: t for e, t in done_at.items()
                   if any(o and s + settle_s <= t < e_ for o, s, e_ in windows)}
    page_steady_s = [x for seen in seen_per_window for x in page_latencies(seen, steady_done)]
    closed_s = sum(max(end - start - settle_s, 0) for open_, start, end in windows if not open_)
    opened_s = sum(max(end - start - settle_s, 0) for open_, start, end in windows if open_)
    return {"windows": per_window, "cycle_ratios": ratios,
            "median_ratio": statistics.median(ratios) if ratios else float("nan"),
            "closed_epoch_ms": [w["median_ms"] for w in per_window if not w["open"]],
            "open_epoch_ms": [w["median_ms"] for w in per_window if w["open"]],
            "chromium_core": {"closed": chrome_cpu[False] / max(closed_s, 1e-9),
                              "open": chrome_cpu[True] / max(opened_s, 1e-9)},
            "page_s": _stats(page_s), "page_steady_s": _stats(page_steady_s),
            "profile_open_ms": profile[True], "profile_closed_ms": profile[False],
            "window_s": window_s, "settle_s": settle_s}


def print_alternating(r: dict, args: argparse.Namespace) -> None:
    print(f"\ngraph {args.graph} · SANCUS epoch-fixed ε=1 · {args.workers} workers ({args.runner}) · one run, page "
          f"closed and open in turn for {r['window_s']:g} s each ({r['settle_s']:g} s settling not counted) · "
          f"{os.cpu_count()} CPU cores")
    print(f"  median epoch, page closed (ms)   {_fmt_list(r['closed_epoch_ms'], '.2f')}")
    print(f"  median epoch, page open (ms)     {_fmt_list(r['open_epoch_ms'], '.2f')}")
    print(f"  open / closed around it          {_fmt_list(r['cycle_ratios'], '.3f')}")
    print(f"  median ratio                     {r['median_ratio']:.3f} ({100 * (r['median_ratio'] - 1):+.1f} %)")
    print(f"  chromium, closed / open (core)   {r['chromium_core']['closed']:.3f} / {r['chromium_core']['open']:.3f}"
          f"  (after the settling)")
    print(f"  EpochEnd -> page (.wb-epochs)    {_fmt_lat(r['page_steady_s'])} (after the settling)")
    print(f"                                   {_fmt_lat(r['page_s'])} (whole open windows)")
    print(f"  median epoch (ms) by second of the window, open:   {_fmt_list(r['profile_open_ms'], '.0f')}")
    print(f"                                             closed: {_fmt_list(r['profile_closed_ms'], '.0f')}")


def _stats(values: list[float]) -> dict:
    if not values:
        return {"n": 0, "median": None, "p90": None, "max": None}
    v = sorted(values)
    return {"n": len(v), "median": statistics.median(v), "p90": v[min(len(v) - 1, int(0.9 * len(v)))], "max": v[-1]}


def summarize(runs: list[dict]) -> dict:
    """Medians over repeats, per runner: epoch time bare and with views, their ratio, latencies."""
    out = {}
    for runner in dict.fromkeys(r["runner"] for r in runs):
        bare = [r for r in runs if r["runner"] == runner and not r["views"]]
        views = [r for r in runs if r["runner"] == runner and r["views"]]
        bare_ms = [1e3 * r["epoch_s"] for r in bare]
        views_ms = [1e3 * r["epoch_s"] for r in views]
        out[runner] = {
            "bare_epoch_ms": bare_ms, "views_epoch_ms": views_ms,
            "pair_ratios": [v["epoch_s"] / b["epoch_s"] for b in bare for v in views if v["repeat"] == b["repeat"]],
            "ratio_of_medians": (statistics.median(views_ms) / statistics.median(bare_ms)
                                 if bare_ms and views_ms else float("nan")),
            "client_cpu_s": {"bare": [r["client_cpu_s"] for r in bare], "views": [r["client_cpu_s"] for r in views]},
            "chromium_cpu_s": [r["chromium_cpu_s"] for r in views],
            "arrival_bare_s": _stats([x for r in bare for x in r["arrival_s"]]),
            "arrival_views_s": _stats([x for r in views for x in r["arrival_s"]]),
            "pane_s": _stats([x for r in views for x in r["pane_s"]]),
            "page_s": _stats([x for r in views for x in r["page_s"]]),
            "first_shown_s": [r["first_shown_s"] for r in views],
            "tab_clicks": sum(r["tab_clicks"] for r in views),
            "tab_clicks_failed": sum(r["tab_clicks_failed"] for r in views),
        }
    return out


def _fmt_list(xs: list[float], spec: str = ".1f") -> str:
    return " ".join(format(x, spec) for x in xs)


def _fmt_lat(s: dict) -> str:
    if not s["n"]:
        return "n/a"
    return f"median {s['median']:.3f} s · p90 {s['p90']:.3f} s · max {s['max']:.3f} s (n={s['n']})"


def print_report(result: dict, args: argparse.Namespace) -> None:
    print(f"\ngraph {args.graph} · SANCUS epoch-fixed ε=1 · {args.epochs} epochs · {args.workers} workers · "
          f"{args.repeats} repeat(s), bare/views alternating · {os.cpu_count()} CPU cores"
          + (f" · ranks pinned to cores {sorted(args.rank_cores)}, client, server and chromium to the others"
             if getattr(args, "rank_cores", None) else ""))
    for runner, s in result.items():
        print(f"\nrunner {runner}")
        print(f"  epoch time, bare  (ms, per repeat)   {_fmt_list(s['bare_epoch_ms'], '.2f')}")
        print(f"  epoch time, views (ms, per repeat)   {_fmt_list(s['views_epoch_ms'], '.2f')}")
        print(f"  views/bare per pair                  {_fmt_list(s['pair_ratios'], '.3f')}")
        print(f"  views/bare of medians                {s['ratio_of_medians']:.3f} "
              f"({100 * (s['ratio_of_medians'] - 1):+.1f} %)")
        print(f"  client CPU s, bare / views           {_fmt_list(s['client_cpu_s']['bare'])} / "
              f"{_fmt_list(s['client_cpu_s']['views'])}")
        if all(c is not None for c in s["chromium_cpu_s"]):
            print(f"  chromium CPU s (views)               {_fmt_list(s['chromium_cpu_s'])}")
        print(f"  EpochEnd -> client, bare             {_fmt_lat(s['arrival_bare_s'])}")
        print(f"  EpochEnd -> client, views            {_fmt_lat(s['arrival_views_s'])}")
        print(f"  EpochEnd -> server pane              {_fmt_lat(s['pane_s'])}")
        print(f"  EpochEnd -> page (.wb-epochs)        {_fmt_lat(s['page_s'])}")
        shown = [x for x in s.get("first_shown_s", []) if x is not None]
        if shown:
            print(f"  launch -> run shown on the page (s)  {_fmt_list(shown)}  (epochs before it are not counted above)")
        print(f"  tab switches during the views runs   {s['tab_clicks']} ({s['tab_clicks_failed']} failed)")


def main(argv: Optional[list[str]] = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", default=DEFAULT_GRAPH, help="graph spec (default: 3000-vertex SBM)")
    parser.add_argument("--epochs", type=int, default=400, help="epochs per run (default 400)")
    parser.add_argument("--runner", default="dask", help="runner of the main pair (default dask)")
    parser.add_argument("--workers", type=int, default=2, help="ranks (default 2)")
    parser.add_argument("--repeats", type=int, default=2, help="bare/views pairs per runner (default 2)")
    parser.add_argument("--also-local", action=argparse.BooleanOptionalAction, default=True,
                        help="also run the pairs with the in-process 'local' runner (default on)")
    parser.add_argument("--tab-every", type=float, default=1.5, help="seconds between tab switches (default 1.5; 0: stay on the training curves, as a "
                             "person watching a run would)")
    parser.add_argument("--pin", action="store_true",
                        help="dask runner only: rank processes on the first --workers cores, the client, server "
                             "and chromium on the others (needs --workers + 2 cores or more)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: small graph, 30 epochs, one repeat")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the results to this file")
    parser.add_argument("--alternate", type=float, default=None, metavar="SECONDS",
                        help="one long run, the page closed and open in turn for SECONDS each (--cycles times): "
                             "the machine's drift cancels between adjacent windows")
    parser.add_argument("--cycles", type=int, default=8, help="closed/open cycles of --alternate (default 8)")
    parser.add_argument("--settle", type=float, default=5.0,
                        help="seconds at the start of each --alternate window not counted (default 5)")
    parser.add_argument("--page-cost", action="store_true",
                        help="only measure what watching costs: CPU of chromium and of the server while the page "
                             "shows a replayed run (no training ranks, so the figures are stable)")
    args = parser.parse_args(argv)
    if args.page_cost:
        return page_cost(epochs=args.epochs)
    if args.quick:
        args.graph, args.epochs, args.repeats = QUICK_GRAPH, 30, 1
    if args.epochs < 1 or args.repeats < 1 or args.workers < 1:
        parser.error("--epochs, --repeats and --workers must be at least 1")

    rank_cores = None
    if args.pin:
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if args.runner != "dask" or len(cores) < args.workers + 2:
            parser.error(f"--pin needs the dask runner and at least --workers + 2 cores ({len(cores)} cores, "
                         f"{args.workers} workers, runner {args.runner!r}): with one core left, client, "
                         f"server and chromium starve each other and the page stops updating")
        rank_cores = set(cores[:args.workers])
        args.rank_cores = sorted(rank_cores)
        os.sched_setaffinity(0, cores[args.workers:])  # this process, and chromium started below, off the ranks
        args.also_local = False  # in-process ranks cannot be pinned apart from the server

    from recipes.sancus import epoch_fixed

    if args.alternate is not None:
        if args.alternate < args.settle + 2 or args.cycles < 1:
            parser.error("--alternate needs windows at least 2 s longer than --settle, and --cycles >= 1")
        cfg = epoch_fixed(epsilon=1, graph=args.graph, epochs=1_000_000)   # stopped after the last window
        browser = Browser()
        try:
            with tempfile.TemporaryDirectory(prefix="wb-views-bench-") as out:
                r = run_alternating(cfg, runner=args.runner, workers=args.workers, out=out, browser=browser,
                                    window_s=args.alternate, settle_s=args.settle, cycles=args.cycles)
        finally:
            browser.close()
        print_alternating(r, args)
        if args.json:
            Path(args.json).write_text(json.dumps({"args": vars(args), "alternating": r}, indent=2))
        return r

    cfg = epoch_fixed(epsilon=1, graph=args.graph, epochs=args.epochs)
    runners = [args.runner] + (["local"] if args.also_local and args.runner != "local" else [])
    browser = Browser()
    runs: list[dict] = []
    failures: list[dict] = []
    t_start = time.time()
    try:
        with tempfile.TemporaryDirectory(prefix="wb-views-bench-") as out:
            for runner in runners:
                for i in range(args.repeats):
                    for views in (False, True):
                        try:
                            r = run_once(cfg, runner=runner, workers=args.workers, out=out,
                                         browser=browser if views else None, tab_every=args.tab_every,
                                         rank_cores=rank_cores)
                        except Exception as exc:  # e.g. a Dask worker lost on a saturated machine: say so, go on
                            print(f"{runner:>5} repeat {i + 1} {'views' if views else 'bare'}: FAILED "
                                  f"({type(exc).__name__}: {exc})", flush=True)
                            failures.append({"runner": runner, "repeat": i + 1, "views": views,
                                             "error": f"{type(exc).__name__}: {exc}"})
                            continue
                        r["repeat"] = i + 1
                        print(f"{runner:>5} repeat {i + 1} {'views' if views else 'bare ':5}: "
                              f"{1e3 * r['epoch_s']:.2f} ms/epoch, {r['total_s']:.1f} s in all", flush=True)
                        runs.append(r)
    finally:
        browser.close()
    result = summarize(runs)
    print_report(result, args)
    if failures:
        print(f"\n{len(failures)} run(s) failed and are left out: " + "; ".join(
            f"{f['runner']} repeat {f['repeat']} {'views' if f['views'] else 'bare'}: {f['error']}" for f in failures))
    print(f"\n(benchmark took {time.time() - t_start:.0f} s)")
    if args.json:
        payload = {"args": vars(args), "summary": result, "failures": failures,
                   "runs": [{k: v for k, v in r.items() if k not in ("arrival_s", "pane_s", "page_s")} for r in runs]}
        Path(args.json).write_text(json.dumps(payload, indent=2))
    return result


if __name__ == "__main__":  # the guard matters: Dask's worker processes re-import this file
    main()
