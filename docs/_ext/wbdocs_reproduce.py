"""``.. reproduce-table:: SYSTEM``: a system's reproduced claims from ``docs/reproduce/quick.json``.

The JSON is the output of ``workbench reproduce --quick --json`` (``make docs-data`` writes it), with the date
and machine it ran on; the page shows them, the claim counts, and one row per claim: the claim, the paper's
number with its source, ours, how it is checked, the verdict with its numbers, the note, and the number line
of :func:`recipes.reproduce.report.number_line` (inline SVG: the accepted region, the paper's number, ours).
The verdicts are the JSON's, computed by the one rule of :mod:`recipes.reproduce.core`; nothing runs here.

``.. reproduce-summary::`` gives one row per system (counts, link to its page).
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.util import logging

logger = logging.getLogger(__name__)

DATA = "reproduce/quick.json"
_COLOURS = {"holds": "#2e7d32", "does not hold": "#c62828", "not reproducible here": "#616161"}


def _load(env) -> dict:
    path = Path(env.srcdir) / DATA
    env.note_dependency(str(path))
    return json.loads(path.read_text(encoding="utf-8"))


def _fmt(x) -> str:
    from recipes.reproduce.core import fmt

    return fmt(x)


def _number_line(record: dict) -> str:
    """The report's SVG number line, rebuilt from the JSON record (empty when nothing was measured)."""
    from recipes.reproduce.core import Claim
    from recipes.reproduce.report import number_line

    tup = lambda v: tuple(v) if isinstance(v, list) else v  # noqa: E731
    claim = Claim(record["id"], record["claim"], record["source"], paper=tup(record["paper"]),
                  relation=record["relation"], measured=record["measured"], unit=record.get("unit", ""),
                  tolerance=record.get("tolerance", 0.0), bound=tup(record.get("bound")), note=record.get("note", ""))
    return number_line(claim)


def _stamp(data: dict) -> str:
    mode = "quick mode" if data.get("quick") else "full scale"
    return f"{data.get('date', '?')} on {data.get('machine', '?')}, {mode}, {data.get('wall_s', '?')} s for all systems"


def _claims_html(name: str, data: dict) -> str:
    system = data["systems"][name]
    n = system["counts"]
    rows = []
    for c in system["claims"]:
        unit = f" {c['unit']}" if c.get("unit") and c["unit"] != "ratio" else ""
        paper = "no number" if c["paper"] is None else _fmt(c["paper"]) + unit
        ours = "-" if c["measured"] is None else _fmt(c["measured"])
        tol = f" ± {_fmt(c['tolerance'])}" if c.get("tolerance") else ""
        checked = f"{c['relation']} {_fmt(c['bound'])}{tol}" if c["measured"] is not None else "-"
        colour = _COLOURS.get(c["verdict"], "#222")
        note = f"<div class='rp-note'>{escape(c['note'])}</div>" if c.get("note") else ""
        rows.append(
            f"<tr><td><b>{escape(c['id'])}</b><br>{escape(c['claim'])}{note}</td>"
            f"<td>{escape(paper)}<br><span class='rp-source'>{escape(c['source'])}</span></td>"
            f"<td>{escape(ours)}</td><td>{escape(checked)}</td>"
            f"<td class='rp-verdict' style='color:{colour}'>{escape(c['explanation'])}</td>"
            f"<td>{_number_line(c)}</td></tr>")
    return (f"<p class='rp-stamp'><b>{n['holds']} hold, {n['does not hold']} do not hold, "
            f"{n['not reproducible here']} not reproducible here</b>. Measured {escape(_stamp(data))}; "
            f"{escape(system.get('setting', ''))}.</p>"
            "<div class='rp-scroll'><table class='rp-table'><thead><tr><th>claim</th><th>paper (source)</th>"
            "<th>ours</th><th>checked as</th><th>verdict</th><th>accepted region, paper, ours</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>")


class ReproduceTable(Directive):
    required_arguments = 1

    def run(self):
        env = self.state.document.settings.env
        data = _load(env)
        name = self.arguments[0]
        if name not in data["systems"]:
            raise self.error(f"{name!r} is not in {DATA} (systems: {', '.join(data['systems'])}); "
                             "run 'make docs-data'")
        return [nodes.raw("", _claims_html(name, data), format="html")]


class ReproduceSummary(Directive):
    def run(self):
        env = self.state.document.settings.env
        data = _load(env)
        rows = []
        for name, s in data["systems"].items():
            n = s["counts"]
            rows.append(f"<tr><td><a href='{escape(name)}.html'>{escape(name)}</a></td><td>{escape(s['title'])}</td>"
                        f"<td>{n['holds']}</td><td>{n['does not hold']}</td><td>{n['not reproducible here']}</td></tr>")
        html = (f"<p class='rp-stamp'>Measured {escape(_stamp(data))}.</p><table class='rp-table'><thead><tr>"
                "<th>system</th><th>what runs</th><th>holds</th><th>does not hold</th><th>not reproducible here</th>"
                f"</tr></thead><tbody>{''.join(rows)}</tbody></table>")
        return [nodes.raw("", html, format="html")]


def setup(app):
    app.add_directive("reproduce-table", ReproduceTable)
    app.add_directive("reproduce-summary", ReproduceSummary)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
