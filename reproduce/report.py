"""Tables, JSON and offline HTML pages of the reproduced claims, and the ``workbench reproduce`` command body.

* :func:`format_table`: one plain-text table per system (claim, the paper's number with its table or figure,
  ours, how it is checked with the tolerance, the verdict with its numbers), then each claim's note;
* :func:`to_json`: ``{"systems": {NAME: {"claims": [{"id", "claim", "source", "paper", "measured", "unit",
  "tolerance", "verdict", "note", ...}]}}}``;
* :func:`write_html`: one self-contained page per system (a table, and an HTML number line per claim
  showing the accepted region, the paper's number and ours; no script, no CDN) and an ``index.html``;
* :func:`claims_table`: one system's claims as a saved run holds them (by default the full run the docs show,
  ``docs/reproduce/full.json``, which ``make docs-data`` writes); it renders as the docs' table in a notebook
  (HTML) and as :func:`format_table`'s in a terminal. Nothing runs: the numbers are the saved ones, and each
  verdict follows from them by the one rule.

Example:
    >>> from reproduce.core import Claim
    >>> c = Claim("s.x", "A below B", "Table 1", paper=0.5, bound=1.0, relation="<", measured=0.8, unit="ratio")
    >>> print(format_table("s", {"claims": [c], "seconds": 0.1}).splitlines()[0])
    s: 1 claims (1 hold, 0 direction only, 0 inconclusive, 0 do not hold, 0 not reproducible here) in 0.1 s
    >>> to_json({"systems": {"s": {"claims": [c], "seconds": 0.1}}})["systems"]["s"]["claims"][0]["verdict"]
    'holds'
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from reproduce.core import (DIRECTION, FACTOR, FAILS, HOLDS, INCONCLUSIVE, NOT_HERE, SYSTEMS, VERDICTS, Check,
                                    Claim, code_digest, explain, fmt, run_systems)

__all__ = ["format_table", "to_json", "write_html", "command", "counts", "claims_table", "ClaimsTable",
           "claim_from_record", "check_from_record", "tally", "FULL_RUN", "QUICK_RUN"]

_WIDTHS = (44, 24, 10, 14, 34)
_HEAD = ("claim", "paper (source)", "ours", "checked as", "verdict")


def counts(claims: list[Claim]) -> dict[str, int]:
    """Claims per verdict (every one of :data:`~reproduce.core.VERDICTS`)."""
    return {v: sum(c.verdict == v for c in claims) for v in VERDICTS}


def tally(n: dict[str, int]) -> str:
    """``3 hold, 1 direction only, 0 inconclusive, 2 do not hold, 1 not reproducible here``."""
    return (f"{n.get(HOLDS, 0)} hold, {n.get(DIRECTION, 0)} direction only, {n.get(INCONCLUSIVE, 0)} inconclusive, "
            f"{n.get(FAILS, 0)} do not hold, {n.get(NOT_HERE, 0)} not reproducible here")


def _checks_line(checks: list[Check]) -> str:
    failed = [c.id for c in checks if not c.passed]
    return (f"{len(checks)} mechanism checks, {len(checks) - len(failed)} passed"
            + (f" (failed: {', '.join(failed)})" if failed else ""))


def _unit(c: Claim) -> str:
    return f" {c.unit}" if c.unit and c.unit not in ("ratio",) else ""


def _paper(c: Claim) -> str:
    """The paper's number as the tables print it: ``0.283-0.325 fraction``, ``no number``, ``7.08 x (derived)``."""
    return ("no number" if c.paper is None else fmt(c.paper) + _unit(c)) + (" (derived)" if c.derived else "")


def _cells(c: Claim, other: str | None = None) -> list[str]:
    """The table's cells of ``c``; ``other``: ``"quick run: holds"`` when the other saved run's verdict differs
    (the verdict depends on the scale), added to the verdict cell."""
    tol = f" ± {fmt(c.tolerance)}" if c.tolerance else ""
    checked = f"{c.relation} {fmt(c.target)}{tol}" if c.target is not None and c.measured is not None else "-"
    if c.effect and c.measured is not None:
        checked = f"effect {c.relation} {fmt(c.null)}" + ("" if c.paper is None else ", size vs paper")
    verdict = explain(c) + (f" [scale-dependent: {other}]" if other else "")
    ours = "-" if c.measured is None else fmt(c.measured) + (f" ± {fmt(c.spread)}" if c.spread else "")
    return [f"{c.id}: {c.claim}", f"{_paper(c)} ({c.source})", ours, checked, verdict]


def format_table(name: str, result: dict[str, Any]) -> str:
    """The system's table (wrapped cells), then one line per claim with its note. ``result["other"]``: claim id ->
    the other saved run's verdict, for the claims whose verdict differs there."""
    claims, other = result["claims"], result.get("other") or {}
    head = f"{name}: {len(claims)} claims ({tally(counts(claims))}) in {result.get('seconds', 0.0):.1f} s"
    lines = [head]
    if result.get("setting"):
        lines.append(f"  setting: {result['setting']}")
    rule = "+".join("-" * (w + 2) for w in _WIDTHS)
    lines.append(rule)
    for row in [list(_HEAD), *(_cells(c, other.get(c.id)) for c in claims)]:
        wrapped = [textwrap.wrap(text, w) or [""] for text, w in zip(row, _WIDTHS)]
        for i in range(max(map(len, wrapped))):
            lines.append("|".join(f" {(cell[i] if i < len(cell) else ''):<{w}} " for cell, w in
                                  zip(wrapped, _WIDTHS)).rstrip())
        lines.append(rule)
    for c in claims:
        text = c.note + (f" Paper's number derived: {c.derived}." if c.derived else "")
        if text:
            lines.extend(textwrap.wrap(f"{c.id}: {text}", 118, initial_indent="  ", subsequent_indent="      "))
    checks = result.get("checks") or []
    if checks:
        lines.append(f"  {_checks_line(checks)}:")
        for k in checks:
            lines.extend(textwrap.wrap(f"[{'pass' if k.passed else 'FAIL'}] {k.id}: {k.check}: {fmt(k.measured)} "
                                       f"(expected {fmt(k.expected)}{f' ± {fmt(k.tolerance)}' if k.tolerance else ''})",
                                       118, initial_indent="    ", subsequent_indent="        "))
    return "\n".join(lines)


def to_json(results: dict[str, Any]) -> dict[str, Any]:
    """The JSON form of :func:`~reproduce.core.run_systems`'s result."""
    out: dict[str, Any] = {"systems": {}}
    for name, r in results["systems"].items():
        out["systems"][name] = {"title": r.get("title", name), "setting": r.get("setting", ""),
                                "seconds": r.get("seconds"), "counts": counts(r["claims"]),
                                "claims": [c.to_dict() for c in r["claims"]],
                                "checks": [c.to_dict() for c in r.get("checks") or []]}
    for key in ("quick", "wall_s", "date", "machine", "code"):
        if key in results:
            out[key] = results[key]
    return out


# ------------------------------------------------------------------------------------------------------ HTML

_COLOURS = {HOLDS: "#2e7d32", DIRECTION: "#ef6c00", INCONCLUSIVE: "#1565c0", FAILS: "#c62828", NOT_HERE: "#757575"}
_CSS = ("body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;width:100%}"
        "td,th{border:1px solid #ccc;padding:4px 6px;vertical-align:top;font-size:13px}th{background:#f3f3f3}"
        ".v{font-weight:600}.note{color:#555;font-size:12px}a{color:#1565c0}")


def _region(c: Claim, lo: float, hi: float) -> tuple[float, float]:
    """Where ``measured`` holds: an effect's size band (the paper's range, or within a factor of 2 of its effect;
    the direction's side without a number), a bound's accepted region."""
    b, t = c.target, c.tolerance
    if c.effect:
        n = float(c.null)  # type: ignore[arg-type]
        if isinstance(c.paper, (tuple, list)):
            return c.paper[0] - t, c.paper[1] + t
        if c.paper is not None and float(c.paper) != n:
            ends = sorted((n + (float(c.paper) - n) / FACTOR, n + (float(c.paper) - n) * FACTOR))
            return ends[0], ends[1]
        return (n, hi) if c.relation[0] == ">" else (lo, n)
    if c.relation == "in":
        return b[0] - t, b[1] + t  # type: ignore[index]
    b = float(b)  # type: ignore[arg-type]
    return {"==": (b - t, b + t), "<=": (lo, b + t), "<": (lo, b + t), ">=": (b - t, hi), ">": (b - t, hi)}[c.relation]


def number_line(c: Claim, width: int = 260, height: int = 36) -> str:
    """A number line drawn in HTML: the accepted region (green band), the paper's number (black tick) and ours
    (a dot in the verdict's colour), each with its label.

    Plain ``div`` elements with inline positions, no SVG and no script: JupyterLab's sanitiser removes inline SVG
    from the outputs of a notebook that is not trusted (every notebook a user has just opened), but keeps
    these styles, so the line shows in JupyterLab, in the docs and in the offline pages alike.

    >>> c = Claim("s.x", "A below B", "Table 1", paper=0.5, bound=1.0, relation="<", measured=0.8)
    >>> line = number_line(c)
    >>> "<svg" in line, line.count("position:absolute"), "paper 0.5" in line and "ours 0.8" in line
    (False, 6, True)
    """
    if c.measured is None or c.target is None or not math.isfinite(float(c.measured)):
        return ""
    flat = lambda v: list(v) if isinstance(v, (tuple, list)) else ([] if v is None else [v])  # noqa: E731
    values = [float(c.measured), *map(float, flat(c.target)), *map(float, flat(c.paper))]
    if c.effect and c.paper is not None and not isinstance(c.paper, (tuple, list)):
        values.append(float(_region(c, 0.0, 0.0)[1]))
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.15 or max(abs(hi) * 0.15, c.tolerance * 2, 1e-9)
    lo, hi = lo - pad, hi + pad
    x = lambda v: 8 + (min(max(v, lo), hi) - lo) / (hi - lo) * (width - 16)  # noqa: E731
    a, b = _region(c, lo, hi)

    def box(left: float, top: float, w: float, h: float, style: str, text: str = "") -> str:
        return (f'<div style="position:absolute;left:{left:.1f}px;top:{top:.0f}px;width:{w:.1f}px;height:{h:.0f}px;'
                f'{style}">{text}</div>')

    def label(at: float, top: float, text: str) -> str:
        return box(at - 45, top, 90, 9, "font-size:9px;line-height:9px;text-align:center;white-space:nowrap",
                   html.escape(text))

    papers = list(map(float, flat(c.paper)))
    title = (f"accepted region {fmt(a)} to {fmt(b)}; " + "".join(f"paper {fmt(p)}; " for p in papers) +
             f"ours {fmt(c.measured)}")
    parts = [f'<div class="rp-line" role="img" aria-label="{html.escape(title)}" title="{html.escape(title)}" '
             f'style="position:relative;width:{width}px;height:{height}px;text-align:left">',
             box(8, 20, width - 16, 0, "border-top:1px solid #999"),
             box(x(a), 13, max(x(b) - x(a), 2), 14, "background-color:#2e7d32;opacity:0.18")]
    for p in papers:
        parts.append(box(x(p) - 1, 10, 2, 20, "background-color:#000") + label(x(p), 0, f"paper {fmt(p)}"))
    m = x(float(c.measured))
    parts.append(box(m - 5, 15, 10, 10, f"border-radius:5px;background-color:{_COLOURS[c.verdict]}") +
                 label(m, height - 9, f"ours {fmt(c.measured)}") + "</div>")
    return "".join(parts)


def _page(name: str, r: dict[str, Any], stamp: str) -> str:
    esc = html.escape
    n = counts(r["claims"])
    rows = []
    for c in r["claims"]:
        cells = _cells(c)
        rows.append(f"<tr><td><b>{esc(c.id)}</b><br>{esc(c.claim)}<div class='note'>{esc(c.note)}</div></td>"
                    f"<td>{esc(cells[1])}</td><td>{esc(cells[2])}</td><td>{esc(cells[3])}</td>"
                    f"<td class='v' style='color:{_COLOURS[c.verdict]}'>{esc(explain(c))}</td>"
                    f"<td>{number_line(c)}</td></tr>")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(name)}: reproduced claims</title>"
            f"<style>{_CSS}</style></head><body><p><a href='index.html'>all systems</a></p>"
            f"<h1>{esc(r.get('title', name))}</h1><p>{esc(r.get('setting', ''))}</p>"
            f"<p>{tally(n)}; {esc(stamp)}. "
            "The verdict is computed from the numbers by one rule (reproduce/core.py).</p>"
            "<table><tr><th>claim</th><th>paper (source)</th><th>ours</th><th>checked as</th><th>verdict</th>"
            f"<th>paper, accepted region, ours</th></tr>{''.join(rows)}</table>{_checks_html(r.get('checks') or [])}"
            "</body></html>")


def _checks_html(checks: list) -> str:
    """The mechanism checks under a system's claims (a test's result each, not a paper's)."""
    if not checks:
        return ""
    # inline left alignment, as the claims table (JupyterLab right-aligns table cells; no <style> reaches them)
    esc, left = html.escape, "text-align:left;vertical-align:top"
    td = f"<td style='{left}'>"
    rows = "".join(f"<tr>{td}{esc(k.id)}</td>{td}{esc(k.check)}</td>{td}{esc(fmt(k.measured))}</td>"
                   f"{td}{esc(fmt(k.expected))}{esc(f' ± {fmt(k.tolerance)}' if k.tolerance else '')}</td>"
                   f"<td style='{left};color:{_COLOURS[HOLDS] if k.passed else _COLOURS[FAILS]}'>"
                   f"{'passed' if k.passed else 'FAILED'}</td></tr>" for k in checks)
    head = "".join(f"<th style='{left}'>{h}</th>" for h in ("check", "what", "measured", "expected", ""))
    return (f"<h3 class='rp-checks'>Mechanism checks ({esc(_checks_line(checks))})</h3><p>What the reproduction "
            f"relies on in this workbench's own code: tests, not the papers' results.</p><table class='rp-checks'>"
            f"<tr>{head}</tr>{rows}</table>")


def write_html(results: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """One page per system (``NAME.html``), ``index.html`` and ``reproduce.json`` in ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stamp = f"{results.get('date', time.strftime('%Y-%m-%d'))}, {results.get('machine', '')}".rstrip(", ")
    written, links = [], []
    for name, r in results["systems"].items():
        path = out / f"{name}.html"
        path.write_text(_page(name, r, stamp), encoding="utf-8")
        written.append(path)
        n = counts(r["claims"])
        links.append(f"<tr><td><a href='{name}.html'>{html.escape(name)}</a></td>"
                     + "".join(f"<td>{n[v]}</td>" for v in VERDICTS) + "</tr>")
    index = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>reproduced claims</title><style>{_CSS}</style>"
             f"</head><body><h1>Reproduced claims</h1><p>{html.escape(stamp)}</p><table><tr><th>system</th>"
             + "".join(f"<th>{v}</th>" for v in VERDICTS) + f"</tr>{''.join(links)}</table>"
             "</body></html>")
    (out / "index.html").write_text(index, encoding="utf-8")
    (out / "reproduce.json").write_text(json.dumps(to_json(results), indent=1, default=str), encoding="utf-8")
    return [*written, out / "index.html", out / "reproduce.json"]


# ----------------------------------------------------------------------------------------- saved runs

FULL_RUN = Path(__file__).resolve().parents[1] / "docs" / "reproduce" / "full.json"
"""The saved full run (``workbench reproduce --json``, with its date and machine; ``make docs-data``)."""
QUICK_RUN = FULL_RUN.with_name("quick.json")
"""The saved quick run (``workbench reproduce --quick --json``), at the scale ``make test`` runs."""


def claim_from_record(record: dict[str, Any]) -> Claim:
    """A :class:`~reproduce.core.Claim` back from its JSON record (:meth:`Claim.to_dict`).

    Example:
        >>> c = Claim("s.x", "A below B", "Table 1", paper=(0.2, 0.4), relation="in", measured=0.3)
        >>> claim_from_record(json.loads(json.dumps(c.to_dict()))) == c
        True
    """
    tup = lambda v: tuple(v) if isinstance(v, list) else v  # noqa: E731
    paper = tup(record["paper"])
    bound = tup(record.get("bound"))
    null = record.get("null")
    return Claim(record["id"], record["claim"], record["source"], paper=paper, relation=record["relation"],
                 measured=record["measured"], unit=record.get("unit", ""), tolerance=record.get("tolerance", 0.0),
                 bound=None if bound == paper or null is not None else bound, note=record.get("note", ""),
                 null=null, spread=record.get("spread", 0.0) or 0.0, derived=record.get("derived", ""))


def check_from_record(record: dict[str, Any]) -> Check:
    """A :class:`~reproduce.core.Check` back from its JSON record."""
    return Check(record["id"], record["check"], record["measured"], record["expected"],
                 tolerance=record.get("tolerance", 0.0), note=record.get("note", ""))


@dataclasses.dataclass(frozen=True)
class ClaimsTable:
    """One system's reproduced claims from a saved run: the docs' table in a notebook, the CLI's in a terminal.

    Args:
        system: the system's name (one of :data:`~reproduce.core.SYSTEMS`).
        title: what runs (the system module's ``TITLE``).
        setting: the scale it ran at.
        claims: the claims, with the saved numbers (each verdict follows from them).
        checks: the system's mechanism checks (tests of this workbench's code the reproduction relies on).
        quick: whether this system ran in quick mode.
        seconds: how long this system's claims took.
        date: the day of the run.
        machine: ``host, N cores, arch`` of the run.
        other: claim id -> ``"quick run: VERDICT"`` (or ``"full run: ..."``) for each claim whose verdict differs
            in the other saved run: a verdict that depends on the scale, marked in the table.
    """

    system: str
    title: str
    setting: str
    claims: tuple[Claim, ...]
    quick: bool
    seconds: float
    date: str
    machine: str
    checks: tuple[Check, ...] = ()
    other: dict = dataclasses.field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        return counts(list(self.claims))

    @property
    def stamp(self) -> str:
        """``full run, 2026-11-27 on vm, 2 cores, x86_64``."""
        return f"{'quick mode' if self.quick else 'full run'}, {self.date} on {self.machine}"

    def __repr__(self) -> str:
        result = {"claims": list(self.claims), "seconds": self.seconds, "setting": self.setting,
                  "checks": list(self.checks), "other": self.other}
        return f"{self.title}\n{self.stamp}\n" + format_table(self.system, result)

    def _repr_html_(self) -> str:
        # every cell left-aligned and top-aligned inline: JupyterLab's table style right-aligns them, and a
        # notebook's <style> or class rules do not reach an untrusted output
        esc, left = html.escape, "text-align:left;vertical-align:top"
        td = f"<td style='{left}'>"
        rows = []
        for c in self.claims:
            cells = _cells(c)
            note = f"<div class='rp-note' style='color:#555'>{esc(c.note)}</div>" if c.note else ""
            scale = (f"<div class='rp-scale' style='color:#555;font-weight:400'>scale-dependent: "
                     f"{esc(self.other[c.id])}</div>" if c.id in self.other else "")
            rows.append(f"<tr>{td}<b>{esc(c.id)}</b><br>{esc(c.claim)}{note}</td>"
                        f"{td}{esc(_paper(c))}<br><span class='rp-source' style='color:#555'>{esc(c.source)}</span></td>"
                        f"{td}{esc(cells[2])}</td>{td}{esc(cells[3])}</td>"
                        f"<td class='rp-verdict' style='{left};font-weight:600;color:{_COLOURS[c.verdict]}'>"
                        f"{esc(explain(c))}{scale}</td>{td}{number_line(c)}</td></tr>")
        n = self.counts
        flips = (f" {len(self.other)} verdict{'s' if len(self.other) > 1 else ''} differ in the "
                 f"{'full' if self.quick else 'quick'} run (marked scale-dependent)." if self.other else "")
        head = "".join(f"<th style='{left}'>{h}</th>" for h in
                       ("claim", "paper (source)", "ours", "checked as", "verdict", "accepted region, paper, ours"))
        return (f"<p class='rp-stamp'><b>{tally(n)}</b>. Measured: {esc(self.stamp)}, {self.seconds:.0f} s; "
                f"{esc(self.setting)}.{esc(flips)}</p>"
                f"<div class='rp-scroll'><table class='rp-table'><thead><tr>{head}</tr></thead>"
                f"<tbody>{''.join(rows)}</tbody></table></div>{_checks_html(list(self.checks))}")


def claims_table(system: str, path: str | Path | None = None) -> ClaimsTable:
    """``system``'s claims as the saved run at ``path`` holds them (default :data:`FULL_RUN`); nothing runs.

    Args:
        system: one of :data:`~reproduce.core.SYSTEMS`.
        path: a ``workbench reproduce --json`` output; :data:`QUICK_RUN` for the quick one.

    Raises:
        FileNotFoundError: no saved run at ``path`` (``make docs-data`` writes both).
        ValueError: ``system`` is not in that run.

    Example:
        >>> table = claims_table("sancus", QUICK_RUN)
        >>> table.quick, sum(table.counts.values()) == len(table.claims) > 0
        (True, True)
    """
    path = FULL_RUN if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no saved reproduction at {path}: 'make docs-data' writes it")
    data = json.loads(path.read_text(encoding="utf-8"))
    if system not in data["systems"]:
        from workbench._validation import param_error

        raise ValueError(param_error("system", "claims_table", f"one of {list(data['systems'])} (in {path.name})",
                                     system))
    s = data["systems"][system]
    quick = bool(s.get("quick", data.get("quick")))
    return ClaimsTable(system, s.get("title", system), s.get("setting", ""),
                       tuple(claim_from_record(r) for r in s["claims"]), quick,
                       float(s.get("seconds") or 0.0), data.get("date", "?"), data.get("machine", "?"),
                       tuple(check_from_record(r) for r in s.get("checks", [])),
                       _other_verdicts(system, path, s["claims"], quick))


def _other_verdicts(system: str, path: Path, records: list, quick: bool) -> dict:
    """Claim id -> ``"quick run: VERDICT"`` for the claims whose verdict differs in the other saved run beside
    ``path`` (the quick one beside the full one, and back; ``{}`` when there is none or it is from other code)."""
    other_path = path.with_name(QUICK_RUN.name if not quick else FULL_RUN.name)
    if other_path == path or not other_path.is_file():
        return {}
    data = json.loads(other_path.read_text(encoding="utf-8"))
    mine = json.loads(path.read_text(encoding="utf-8")).get("code")
    if data.get("code") != mine or system not in data["systems"]:
        return {}
    there = {r["id"]: r["verdict"] for r in data["systems"][system]["claims"]}
    label = "full run" if quick else "quick run"
    return {r["id"]: f"{label}: {there[r['id']]}" for r in records
            if r["id"] in there and there[r["id"]] != r["verdict"]}


def _machine() -> str:
    import os
    import platform

    return f"{platform.node() or 'host'}, {os.cpu_count()} cores, {platform.machine()}"


def command(args: Any) -> int:
    """``workbench reproduce [SYSTEM ...] [--quick] [--json] [--out DIR]`` (see the workbench CLI)."""
    from workbench._validation import ParamError, param_error

    names = list(getattr(args, "systems", None) or SYSTEMS)
    unknown = [s for s in names if s not in SYSTEMS]
    if unknown:
        raise ParamError([param_error("system", "workbench reproduce", f"one of {list(SYSTEMS)}", unknown[0])])
    as_json = bool(getattr(args, "json", False))

    def show(name: str, result: dict) -> None:
        if not as_json:
            print(format_table(name, result) + "\n", flush=True)

    t0 = time.perf_counter()
    results = run_systems(names, quick=bool(getattr(args, "quick", False)), progress=show)
    results.update(wall_s=round(time.perf_counter() - t0, 1), date=time.strftime("%Y-%m-%d"), machine=_machine(),
                   code=code_digest())
    if getattr(args, "out", None):
        written = write_html(results, args.out)
        print(f"wrote {len(written)} files to {args.out}", file=sys.stderr if as_json else sys.stdout)
    if as_json:
        print(json.dumps(to_json(results), default=str))
    else:
        allc = [c for r in results["systems"].values() for c in r["claims"]]
        n = counts(allc)
        checks = [k for r in results["systems"].values() for k in r.get("checks") or []]
        print(f"{len(allc)} claims over {len(results['systems'])} systems: {tally(n)}; {_checks_line(checks)}; "
              f"{results['wall_s']} s")
    return 0
