"""``.. reproduce-table:: SYSTEM``: a system's reproduced claims from ``docs/reproduce/full.json`` (the full run),
with the quick run of ``docs/reproduce/quick.json`` below it, folded.

Both files are outputs of ``workbench reproduce --json`` (``make docs-data`` writes them: ``--quick`` and the
full run), with the date and machine they ran on. The table is :func:`reproduce.report.claims_table`'s,
the one the notebooks show: the counts, the date, machine and mode, and one row per claim: the claim, the
paper's number with its source, ours, how it is checked, the verdict with its numbers, the note, and the number
line of :func:`reproduce.report.number_line` (HTML, no SVG: the accepted region, the paper's number,
ours). The verdicts follow from the saved numbers by the one rule of :mod:`reproduce.core`; nothing
runs here. Without ``full.json`` the page shows the quick run alone.

``.. reproduce-summary::`` gives one row per system (counts of the full run and of the quick run, link to its page).
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive

FULL, QUICK = "reproduce/full.json", "reproduce/quick.json"


def _runs(env) -> dict[str, tuple[Path, dict]]:
    """``{"full": (path, data), "quick": (path, data)}`` for the saved runs that exist (quick.json must)."""
    out = {}
    for key, rel in (("full", FULL), ("quick", QUICK)):
        path = Path(env.srcdir) / rel
        env.note_dependency(str(path))
        if path.is_file() or key == "quick":
            out[key] = (path, json.loads(path.read_text(encoding="utf-8")))
    return out


def _counts(system: dict) -> str:
    from reproduce.report import tally

    return tally(system["counts"])


def _stamp(data: dict) -> str:
    quick = [name for name, s in data["systems"].items() if s.get("quick", data.get("quick"))]
    mode = ("quick mode" if data.get("quick") else
            f"full run ({', '.join(quick)} in quick mode)" if quick else "full run")
    return f"{mode}, {data.get('date', '?')} on {data.get('machine', '?')}, {data.get('wall_s', '?')} s for all systems"


class ReproduceTable(Directive):
    required_arguments = 1

    def run(self):
        from reproduce.report import claims_table

        runs = _runs(self.state.document.settings.env)
        name = self.arguments[0]
        for path, data in runs.values():
            if name not in data["systems"]:
                raise self.error(f"{name!r} is not in {path.name} (systems: {', '.join(data['systems'])}); "
                                 "run 'make docs-data'")
        quick_path, quick = runs["quick"]
        if "full" not in runs:
            return [nodes.raw("", claims_table(name, quick_path)._repr_html_(), format="html")]
        html = (claims_table(name, runs["full"][0])._repr_html_() +
                f"<details class='rp-quick'><summary>The quick run (what <code>make test</code> runs): "
                f"{escape(_counts(quick['systems'][name]))}</summary>"
                f"{claims_table(name, quick_path)._repr_html_()}</details>")
        return [nodes.raw("", html, format="html")]


class ReproduceSummary(Directive):
    def run(self):
        runs = _runs(self.state.document.settings.env)
        main = runs.get("full", runs["quick"])[1]
        quick = runs["quick"][1]
        rows = []
        from reproduce.core import VERDICTS

        for name, s in main["systems"].items():
            n = s["counts"]
            q = quick["systems"].get(name, {}).get("counts")
            q = " / ".join(str(q.get(v, 0)) for v in VERDICTS) if q else "-"
            checks = s.get("checks") or []
            passed = sum(k["passed"] for k in checks)
            theirs = {r["id"]: r["verdict"] for r in quick["systems"].get(name, {}).get("claims", [])}
            flips = sum(1 for r in s["claims"] if r["id"] in theirs and theirs[r["id"]] != r["verdict"])
            rows.append(f"<tr><td><a href='{escape(name)}.html'>{escape(name)}</a></td><td>{escape(s['title'])}</td>"
                        + "".join(f"<td>{n.get(v, 0)}</td>" for v in VERDICTS)
                        + f"<td>{escape(q)}</td><td>{flips if main is not quick else '-'}</td>"
                        f"<td>{passed} of {len(checks)}</td></tr>")
        stamps = [f"Measured: {escape(_stamp(main))}"]
        if main is not quick:
            stamps.append(f"the quick run: {escape(_stamp(quick))}")
        html = (f"<p class='rp-stamp'>{'; '.join(stamps)}.</p><div class='rp-scroll'><table class='rp-table'>"
                "<thead><tr><th>system</th><th>what runs</th>" + "".join(f"<th>{v}</th>" for v in VERDICTS)
                + f"<th>quick run: {' / '.join(VERDICTS)}</th><th>verdicts that differ in the quick run</th>"
                "<th>mechanism checks passed</th>"
                f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")
        return [nodes.raw("", html, format="html")]


def setup(app):
    app.add_directive("reproduce-table", ReproduceTable)
    app.add_directive("reproduce-summary", ReproduceSummary)
    return {"version": "2", "parallel_read_safe": True, "parallel_write_safe": True}
