"""Benchmark: what the live views cost a training run, and how fast an event reaches the page (issue 4).

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

    def new_page(self, url: str):
        context = self.browser.new_context(viewport={"width": 1500, "height": 1100})
        context.set_default_timeout(30_000)
        # no internet here: refuse external requests at once instead of waiting for them (template web fonts)
        context.route("**/*", lambda route: route.continue_() if "127.0.0.1" in route.request.url else route.abort())
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
    args = parser.parse_args(argv)
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
