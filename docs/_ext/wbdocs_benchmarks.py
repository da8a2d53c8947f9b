"""``.. benchmark-records:: [FOLDER]``: one section per benchmark record saved under ``docs/benchmarks/`` (or
``FOLDER``, relative to ``docs/``).

A record is what a benchmark writes with ``--save docs/benchmarks/NAME.json`` (``benchmarks/_record.py``): the
exact command, the date and machine (the reproduction's ``host, N cores, arch``), the 1/5/15-minute load
average before and after the run, the benchmark's own ``--json`` results and a few headline rows (label,
value, unit, baseline, ratio, target). Each section shows the command, date, machine and load, and the
headline table with whether each target is met; nothing runs at build time.

:func:`record_rst` (one record to reST lines) and :func:`met` are plain functions, tested without Sphinx
(``tests/docs/test_benchmark_records.py``).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Optional

REQUIRED = ("benchmark", "command", "date", "machine", "load_average", "results", "headline")
ROW_KEYS = ("label", "value", "unit", "baseline", "ratio", "target")
HEADER = ("measured", "value", "baseline", "ratio", "target", "met")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def load_records(folder: Path) -> list[tuple[Path, dict]]:
    """``(path, record)`` for every ``*.json`` in ``folder``, sorted by file name."""
    return [(p, json.loads(p.read_text(encoding="utf-8"))) for p in sorted(Path(folder).glob("*.json"))]


def problems(record: dict) -> list[str]:
    """What a record lacks (empty if it is complete): the required keys, an ISO date, rows with their keys."""
    out = [f"no {key!r}" for key in REQUIRED if key not in record]
    if "date" in record and not DATE.match(str(record["date"])):
        out.append(f"date {record['date']!r} is not YYYY-MM-DD")
    load = record.get("load_average")
    if load is not None and not (isinstance(load, dict) and {"before", "after"} <= set(load)):
        out.append("load_average is not {'before': [...], 'after': [...]}")
    rows = record.get("headline")
    if rows is not None and (not isinstance(rows, list) or not rows):
        out.append("headline is not a non-empty list")
    for i, row in enumerate(rows if isinstance(rows, list) else []):
        missing = [k for k in ROW_KEYS if k not in row]
        if missing:
            out.append(f"headline row {i} lacks {missing}")
    return out


def met(row: dict) -> Optional[bool]:
    """Whether the row's target is met: on its ratio where it has one (``on``), else on its value; None if the
    row has no target or no number to compare."""
    target = row.get("target")
    if target is None:
        return None
    on = row.get("on") or ("ratio" if row.get("ratio") is not None else "value")
    x = row.get(on)
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return x >= target if row.get("relation", "<=") == ">=" else x <= target


def fmt(x) -> str:
    """A number for the table: thousands separated above 1000, three significant digits below."""
    if x is None:
        return "–"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.1f}"
    return f"{x:.3g}"


def _esc(text) -> str:
    """Plain text for reST: the inline-markup characters escaped."""
    return re.sub(r"([\\*`_|<>\[\]])", r"\\\1", str(text))


def _load(values) -> str:
    return " / ".join(f"{v:.2f}" for v in values) if values else "?"


def _title(record: dict) -> str:
    return f"{record.get('benchmark', '?')}.py, {record.get('date', '?')}"


def record_rst(record: dict, download: Optional[str] = None) -> list[str]:
    """reST lines for one record: a section (``~`` underline) with the command, date, machine, load average and
    the headline table (``.. list-table::``). ``download``: the JSON's path relative to the page, linked."""
    title = _esc(_title(record))
    load = record.get("load_average") or {}
    when = str(record.get("time") or record.get("date", "?")).replace("T", " ")
    wall = f", {fmt(record['wall_s'])} s wall" if record.get("wall_s") is not None else ""
    lines = [title, "~" * len(title), "",
             f":Date: {_esc(when)}{wall}",
             f":Machine: {_esc(record.get('machine', '?'))}",
             f":Load average: {_load(load.get('before'))} before, {_load(load.get('after'))} after "
             "(1, 5 and 15 minutes)"]
    if record.get("commit"):
        lines.append(f":Commit: {_esc(record['commit'])}")
    if download:
        lines.append(f":Record: :download:`{Path(download).name} <{download}>` (with the full results)")
    lines += ["", ".. code-block:: bash", "", f"   {record.get('command', '?')}", "",
              ".. list-table::", "   :header-rows: 1", ""]
    lines += _row_lines(HEADER)
    for row in record.get("headline") or []:
        unit = f" {row['unit']}" if row.get("unit") else ""
        base = "–" if row.get("baseline") is None else f"{fmt(row['baseline'])}{unit}"
        if row.get("baseline_label"):
            base = f"{row['baseline_label']}: {base}" if row.get("baseline") is not None else row["baseline_label"]
        ratio = "–" if row.get("ratio") is None else f"{row['ratio']:.2f}×"
        target = "–"
        if row.get("target") is not None:
            on_ratio = (row.get("on") or ("ratio" if row.get("ratio") is not None else "value")) == "ratio"
            sign = {"<=": "≤", ">=": "≥"}.get(row.get("relation", "<="), row.get("relation"))
            target = f"{sign}\u00a0{fmt(row['target'])}{'×' if on_ratio else unit}"   # no break after the sign
        verdict = {True: "**met**", False: "**not\u00a0met**", None: "–"}[met(row)]
        lines += _row_lines((_esc(row.get("label", "?")), _esc(f"{fmt(row.get('value'))}{unit}"), _esc(base),
                             _esc(ratio), _esc(target), verdict))
    return lines + [""]


def _row_lines(cells) -> list[str]:
    out = []
    for i, cell in enumerate(cells):
        out.append(f"   {'*' if i == 0 else ' '} - {cell}")
    return out


try:  # the directive needs docutils and Sphinx; the functions above do not
    from docutils import nodes
    from docutils.parsers.rst import Directive
    from docutils.statemachine import StringList
    from sphinx.util.nodes import nested_parse_with_titles
except ImportError:  # pragma: no cover
    Directive = object


class BenchmarkRecords(Directive):
    optional_arguments = 1

    def run(self):
        env = self.state.document.settings.env
        rel = self.arguments[0] if self.arguments else "benchmarks"
        folder = Path(env.srcdir) / rel
        records = load_records(folder) if folder.is_dir() else []
        if not records:
            return [nodes.paragraph(text=f"No benchmark record yet: run a benchmark with --save docs/{rel}/NAME.json.")]
        doc_dir = Path(env.doc2path(env.docname)).parent
        lines: list[str] = []
        for path, record in records:
            env.note_dependency(str(path))
            missing = problems(record)
            if missing:
                raise self.error(f"{path.name}: {'; '.join(missing)}")
            lines += record_rst(record, download=Path(path).relative_to(doc_dir).as_posix())
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(lines, source=str(folder)), node)
        return node.children


def setup(app):
    app.add_directive("benchmark-records", BenchmarkRecords)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
