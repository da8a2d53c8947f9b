"""Benchmark: loading a saved run log of 10^5 events into ``widgets.RunView``.

Writes a run log of ``--events`` events (default 10^5) of the real event types (a fabricated SANCUS-like
run from ``widgets.synthetic.fabricate_run``: epoch, traffic per link, staleness per rank and layer,
progress, partition, run start and end; written by ``workbench.events.RunLog``), then times, best of
``--repeats``:

* **json baseline**: reading the file and ``json.loads`` of every line (the least any reader does);
* **per-event push**: the former reader: ``json.loads`` per line, an event object per line, pushed one by one;
* **RunStore.from_log**: the bulk reader (one ``json.loads``, rows straight from the dicts);
* **RunView(path)**: construction (loads the log and draws the progress and the first tab, the training
  curves; the other tabs draw their views when first opened);
* **first render**: the Bokeh models of what a notebook cell or a served page shows at once
  (``pn.panel(view).get_root()``);
* **open the other tabs**: each other tab opened once, in turn (its view drawn, its Bokeh models built);
  not part of the target, shown so that the cost moved there is visible.

A tiny RunView is drawn first so that the one-off import and HoloViews warm-up are not counted. It
prints wall seconds, CPU seconds of this process (steadier on a shared machine) and the ratio to the
json baseline measured in the same run. Target: RunView construction + first render under 2 s.

Usage::

    python benchmarks/views_load.py                 # 10^5 events, best of 3
    python benchmarks/views_load.py --events 20000 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import panel as pn  # noqa: E402
from bokeh.document import Document  # noqa: E402
from pyviz_comms import Comm  # noqa: E402

import widgets  # noqa: E402
from widgets.store import RunStore  # noqa: E402
from widgets.synthetic import fabricate_run  # noqa: E402
from workbench.events import RunLog, event_from_dict  # noqa: E402


def write_log(root: Path, num_events: int, num_parts: int) -> Path:
    """A run log of exactly ``num_events`` events (the fabricated run cut there; its end kept)."""
    per_epoch = len(fabricate_run(num_parts=num_parts, epochs=20)) / 20
    events = fabricate_run(num_parts=num_parts, epochs=int(1.1 * num_events / per_epoch) + 2, run_id="load")
    assert len(events) >= num_events, len(events)
    events = events[:num_events - 1] + events[-1:]
    with RunLog(root, "load", recipe="sancus", config=events[0].config) as log:
        for ev in events:
            log.emit(ev)
    return root / "load"


def timed(fn, repeats: int) -> tuple[float, float, object]:
    """(best wall seconds, CPU seconds of that repeat, last result)."""
    best = (float("inf"), 0.0)
    out = None
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        best = min(best, (time.perf_counter() - w, time.process_time() - c))
    return best[0], best[1], out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000, help="events in the log (default 10^5)")
    ap.add_argument("--parts", type=int, default=4, help="ranks of the fabricated run (default 4)")
    ap.add_argument("--repeats", type=int, default=3, help="best of this many (default 3)")
    args = ap.parse_args(argv)

    def render(view):
        return pn.panel(view).get_root(Document(), comm=Comm())

    render(widgets.RunView(fabricate_run(num_parts=2, epochs=3), runs_dir=None))   # warm-up
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_log(Path(tmp), args.events, args.parts)
        log = folder / "events.jsonl"
        size = log.stat().st_size

        def baseline():
            with open(log, encoding="utf-8") as f:
                return [json.loads(line) for line in f]

        def per_event():
            store = RunStore("load")
            with open(log, encoding="utf-8") as f:
                for line in f:
                    store.push(event_from_dict(json.loads(line)))
            return store

        rows = [("json baseline", *timed(baseline, args.repeats)[:2]),
                ("per-event push (former reader)", *timed(per_event, args.repeats)[:2])]
        w, c, store = timed(lambda: RunStore.from_log(folder), args.repeats)
        rows.append(("RunStore.from_log", w, c))
        assert store.num_events == args.events, store.num_events
        views = []
        w, c, _ = timed(lambda: views.append(widgets.RunView(folder, runs_dir=None)), args.repeats)
        rows.append(("RunView(path)", w, c))
        w2, c2, _ = timed(lambda: render(views[-1]), 1)
        rows.append(("first render (get_root)", w2, c2))
        rows.append(("RunView(path) + first render", w + w2, c + c2))

        def open_tabs():
            for i in range(1, len(views[-1]._tabs)):
                views[-1]._tabs.active = i

        rows.append(("open other tabs (not in target)", *timed(open_tabs, 1)[:2]))

    base_w, base_c = rows[0][1], rows[0][2]
    print(f"run log: {args.events} events, {size / 1e6:.1f} MB ({args.parts} ranks); best of {args.repeats}")
    print(f"{'step':<32} {'wall s':>8} {'cpu s':>8} {'x json (wall)':>14} {'x json (cpu)':>13}")
    for name, w, c in rows:
        print(f"{name:<32} {w:8.3f} {c:8.3f} {w / base_w:14.2f} {c / base_c:13.2f}")
    total = rows[-2][1]
    print(f"target: RunView(path) + first render under 2 s: {'met' if total < 2.0 else 'NOT met'} ({total:.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
