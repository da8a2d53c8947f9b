"""The record a benchmark run saves with ``--save PATH`` (``docs/benchmarks/NAME.json``; the docs' Benchmarks page
renders every file there with ``.. benchmark-records::``).

One JSON object per run::

    {"benchmark": "minibatch",                  # the script's name
     "command": ".venv/bin/python benchmarks/minibatch.py --epochs 5 --save docs/benchmarks/minibatch.json",
     "date": "2026-11-27", "time": "2026-11-27T16:50:12+00:00",
     "machine": "vm, 2 cores, x86_64",          # reproduce.report's, as the reproduction tables show it
     "load_average": {"before": [1, 5, 15 min], "after": [1, 5, 15 min]},
     "wall_s": 41.2, "python": "3.11.2", "commit": "b145933",    # "+ uncommitted changes" if so
     "results": {...},                           # the benchmark's own JSON (what --json prints)
     "headline": [{"label": ..., "value": ..., "unit": ..., "baseline": ..., "baseline_label": ...,
                   "ratio": value / baseline, "target": ..., "relation": "<=" or ">=", "on": "ratio" or "value"}]}

A headline row's ``target`` applies to its ``ratio`` where it has a baseline, to its ``value`` otherwise
(``on`` says which); ``relation`` is how the measured number must compare with it. Only the benchmarks import
this file (the scripts' folder is not a package: each adds it to ``sys.path`` when ``--save`` is given).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
MAX_LIST = 64          # longer lists in the results (per-batch, per-epoch arrays) are summarised
MAX_BYTES = 50_000


def machine() -> str:
    """``host, N cores, arch``: the reproduction's own helper (``reproduce.report``), so the two agree."""
    try:
        sys.path.insert(0, str(ROOT))
        from reproduce.report import _machine

        return _machine()
    except Exception:  # noqa: BLE001  (the same string without the reproduce package)
        return f"{platform.node() or 'host'}, {os.cpu_count()} cores, {platform.machine()}"


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages, rounded to 2 decimals."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _rel(path: str | Path) -> str:
    p = Path(path)
    try:
        return p.absolute().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path) if p.name != Path(sys.executable).name else "python"


def command_line(script: str | Path, argv: Sequence[str]) -> str:
    """The command as typed from the repository root: interpreter, script and arguments, shell-quoted."""
    return shlex.join([_rel(sys.executable), _rel(script), *map(str, argv)])


def _commit() -> Optional[str]:
    """The checkout's commit, ``+ uncommitted changes`` when tracked files differ from it; None outside git."""
    try:
        git = ["git", "-C", str(ROOT)]
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=10)
        commit = head.stdout.strip()
        return (commit + (" + uncommitted changes" if dirty.stdout.strip() else "")) if commit else None
    except Exception:  # noqa: BLE001
        return None


def compact(obj: Any, digits: int = 6) -> Any:
    """JSON-ready ``obj``: floats to ``digits`` significant digits, tuples as lists, numpy scalars as numbers and
    lists longer than :data:`MAX_LIST` as ``{"n", "first", "min", "max"}`` (so a record stays small)."""
    if isinstance(obj, dict):
        return {str(k): compact(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        if len(obj) > MAX_LIST:
            nums = [x for x in obj if isinstance(x, (int, float))]
            short = {"n": len(obj), "first": compact(list(obj[:8]), digits)}
            if nums:
                short.update(min=compact(min(nums), digits), max=compact(max(nums), digits))
            return short
        return [compact(x, digits) for x in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, (str, int)):
        return obj
    if isinstance(obj, float):
        return obj if obj != obj or obj in (float("inf"), float("-inf")) else float(f"{obj:.{digits}g}")
    if hasattr(obj, "item"):                 # numpy / torch scalars
        try:
            return compact(obj.item(), digits)
        except Exception:  # noqa: BLE001
            pass
    if hasattr(obj, "tolist"):
        return compact(obj.tolist(), digits)
    return str(obj)


def row(label: str, value: Optional[float], unit: str = "", baseline: Optional[float] = None,
        baseline_label: str = "", target: Optional[float] = None, relation: str = "<=",
        ratio: Optional[float] = None) -> dict:
    """One headline row; ``ratio`` defaults to ``value / baseline`` where both are given."""
    if ratio is None and value is not None and baseline:
        ratio = value / baseline
    return {"label": label, "value": value, "unit": unit, "baseline": baseline, "baseline_label": baseline_label,
            "ratio": ratio, "target": target, "relation": relation,
            "on": "ratio" if ratio is not None else "value"}


class Record:
    """Started when the benchmark starts (date, load before); :meth:`save` writes the file at the end."""

    def __init__(self, benchmark: str, script: str | Path, argv: Optional[Sequence[str]] = None):
        self.benchmark = benchmark
        self.command = command_line(script, sys.argv[1:] if argv is None else argv)
        self.started = _dt.datetime.now(_dt.timezone.utc).astimezone()
        self.load_before = load_average()
        self.t0 = time.perf_counter()

    def to_dict(self, results: Any, headline: Sequence[dict]) -> dict:
        return {"benchmark": self.benchmark, "command": self.command, "date": self.started.date().isoformat(),
                "time": self.started.isoformat(timespec="seconds"), "machine": machine(),
                "load_average": {"before": self.load_before, "after": load_average()},
                "wall_s": round(time.perf_counter() - self.t0, 1), "python": platform.python_version(),
                "commit": _commit(), "results": compact(results), "headline": compact(list(headline))}

    def save(self, path: str | Path, results: Any, headline: Sequence[dict]) -> Path:
        """Write the record to ``path`` (indented JSON); warns on stderr if it is over :data:`MAX_BYTES`."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.to_dict(results, headline), indent=1) + "\n"
        path.write_text(text, encoding="utf-8")
        if len(text) > MAX_BYTES:
            print(f"warning: {path} is {len(text) // 1000} kB (keep records under {MAX_BYTES // 1000} kB)",
                  file=sys.stderr)
        print(f"record saved to {path}", file=sys.stderr)
        return path
