"""``.. stage-methods::``, ``.. composition-matrix::``, ``.. event-types::``: registries, composition, run log.

Both read the code at build time: every registered method of every stage kind with its class, what it
``requires`` and ``provides`` and its docstring's first sentence; and ``workbench stages --matrix``
(:func:`workbench.stage_listing.composition_matrix`): every cache, exchange, schedule and sync method against every
sample method, composes or refused with the reason; and every event type of the run log with its fields.
A new method or event appears here without an edit.
"""

from __future__ import annotations

import re
from html import escape

from docutils import nodes
from docutils.parsers.rst import Directive


def _first_sentence(doc: str, limit: int = 220) -> str:
    """The docstring's first paragraph as plain text, cut at ``limit`` characters on a word boundary."""
    text = " ".join((doc or "").strip().split("\n\n")[0].split())
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text).replace("``", "")
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " …"
    return text


def _table(headers: list[str], rows: list[str]) -> list:
    """A scrolling ``wb-table`` of already escaped ``<tr>`` rows under ``headers`` (plain text), as a raw node."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return [nodes.raw("", f"<div class='wb-scroll'><table class='wb-table'><thead><tr>{head}</tr></thead>"
                          f"<tbody>{''.join(rows)}</tbody></table></div>", format="html")]


class StageMethods(Directive):
    def run(self):
        from workbench.compose import load_stage_modules
        from workbench.stages import REGISTRIES

        load_stage_modules()
        rows = []
        for kind, reg in REGISTRIES.items():
            for name, cls in sorted(reg.items()):
                req = ", ".join(sorted(getattr(cls, "requires", None) or ())) or "-"
                prov = ", ".join(sorted(getattr(cls, "provides", None) or ())) or "-"
                rows.append(f"<tr><td>{escape(kind)}</td><td><code>{escape(name)}</code></td>"
                            f"<td><code>{escape(cls.__qualname__)}</code><br>"
                            f"<span class='wb-module'>{escape(cls.__module__)}</span></td>"
                            f"<td>{escape(req)}</td><td>{escape(prov)}</td>"
                            f"<td>{escape(_first_sentence(cls.__doc__))}</td></tr>")
        return _table(["kind", "method", "class", "requires", "provides", "what it does"], rows)


class CompositionMatrix(Directive):
    def run(self):
        from workbench.stage_listing import composition_matrix

        rows = composition_matrix()
        samples = list(dict.fromkeys(r["sample"] for r in rows))
        columns = list(dict.fromkeys((r["section"], r["method"]) for r in rows))
        cell = {(r["sample"], r["section"], r["method"]): r for r in rows}
        head = "".join(f"<th>{escape(s)}<br><code>{escape(m)}</code></th>" for s, m in columns)
        body = []
        for sample in samples:
            tds = []
            for section, method in columns:
                r = cell.get((sample, section, method))
                if r is None:
                    tds.append("<td></td>")
                elif r["status"] == "composes":
                    tds.append("<td class='wb-ok' title='composes'>&#10003;</td>")
                else:
                    why = escape(r["why"], quote=True)
                    tds.append(f"<td class='wb-no' title='{why}'>&#10007;</td>")
            body.append(f"<tr><th><code>{escape(sample)}</code></th>{''.join(tds)}</tr>")
        refused = [r for r in rows if r["status"] != "composes"]
        reasons = "".join(f"<li><code>sample.method={escape(r['sample'])}</code> + "
                          f"<code>{escape(r['section'])}.method={escape(r['method'])}</code>: {escape(r['why'])}</li>"
                          for r in refused)
        html = ("<div class='wb-scroll'><table class='wb-table wb-matrix'><thead><tr><th>sample \\ section</th>"
                f"{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
                f"<details><summary>Why each refused cell is refused ({len(refused)})</summary><ul>{reasons}</ul>"
                "</details>")
        return [nodes.raw("", html, format="html")]


class EventTypes(Directive):
    """``.. event-types::``: every event type of the run log (``"type"`` on each line) with its fields."""

    def run(self):
        import dataclasses

        from workbench.events import EVENT_TYPES

        rows = []
        for type_name, cls in EVENT_TYPES.items():
            fields = [f.name for f in dataclasses.fields(cls) if f.name not in ("run_id", "time")]
            rows.append(f"<tr><td><code>{escape(type_name)}</code></td><td><code>{escape(cls.__name__)}</code></td>"
                        f"<td>{escape(', '.join(fields))}</td><td>{escape(_first_sentence(cls.__doc__))}</td></tr>")
        return _table(["type", "class", "fields (besides run_id, time)", "what"], rows)


def setup(app):
    app.add_directive("stage-methods", StageMethods)
    app.add_directive("composition-matrix", CompositionMatrix)
    app.add_directive("event-types", EventTypes)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
