"""The benchmark records under ``docs/benchmarks/`` (written by ``benchmarks/*.py --save``) are complete and each
renders as a section with its headline table (``docs/_ext/wbdocs_benchmarks.py``), without a Sphinx build."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "docs" / "benchmarks"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ext = _load("wbdocs_benchmarks_under_test", ROOT / "docs" / "_ext" / "wbdocs_benchmarks.py")
FILES = sorted(RECORDS.glob("*.json"))


def test_there_are_records():
    assert FILES, "no benchmark record under docs/benchmarks/ (run a benchmark with --save docs/benchmarks/NAME.json)"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_record_has_the_required_keys_a_date_and_stays_small(path):
    record = json.loads(path.read_text(encoding="utf-8"))
    assert ext.problems(record) == [], f"{path.name}: {ext.problems(record)}"
    assert set(ext.REQUIRED) <= set(record)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", record["date"])
    assert record["command"].split()[1] == f"benchmarks/{record['benchmark']}.py", record["command"]
    for when in ("before", "after"):
        assert len(record["load_average"][when]) == 3
    assert path.stat().st_size < 50_000, f"{path.name} is {path.stat().st_size} bytes"


def _doctree(lines: list[str]):
    docutils = pytest.importorskip("docutils")
    del docutils
    from docutils.core import publish_doctree
    from docutils.parsers.rst import directives
    from docutils.parsers.rst.directives.body import CodeBlock

    directives.register_directive("code-block", CodeBlock)   # Sphinx's name for docutils' code directive
    return publish_doctree("\n".join(lines), settings_overrides={"report_level": 5, "halt_level": 5,
                                                                  "syntax_highlight": "none", "doctitle_xform": False})


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_record_renders_a_section_with_its_headline_table(path):
    from docutils import nodes

    record = json.loads(path.read_text(encoding="utf-8"))
    lines = ext.record_rst(record)
    tree = _doctree(lines)
    errors = [m for m in tree.findall(nodes.system_message) if m["level"] >= 2]
    assert not errors, [m.astext() for m in errors]
    sections = list(tree.findall(nodes.section))
    assert len(sections) == 1
    text = sections[0].astext()
    assert record["benchmark"] in text and record["date"] in text and record["machine"] in text
    assert record["command"] in text
    tables = list(tree.findall(nodes.table))
    assert len(tables) == 1
    rows = list(tables[0].findall(nodes.row))
    assert len(rows) == len(record["headline"]) + 1                       # the header, then one row per headline
    assert [e.astext() for e in rows[0].findall(nodes.entry)] == list(ext.HEADER)
    for row, head in zip(rows[1:], record["headline"]):
        cells = [e.astext() for e in row.findall(nodes.entry)]
        assert cells[0] == head["label"]
        assert cells[5].replace("\u00a0", " ") == {True: "met", False: "not met", None: "–"}[ext.met(head)]


def test_met_follows_the_relation_and_what_the_target_is_on():
    assert ext.met({"ratio": 0.9, "target": 1.0}) is True
    assert ext.met({"ratio": 1.1, "target": 1.0, "relation": "<="}) is False
    assert ext.met({"ratio": 1.34, "target": 1.0, "relation": ">="}) is True
    assert ext.met({"value": 2.5, "ratio": None, "target": 10.0, "relation": ">=", "on": "value"}) is False
    assert ext.met({"value": 2.5, "ratio": None, "target": None}) is None
    assert ext.met({"value": None, "ratio": None, "target": 1.0}) is None


def test_the_benchmarks_record_helper_writes_what_the_directive_reads(tmp_path):
    rec = _load("benchmarks_record_under_test", ROOT / "benchmarks" / "_record.py")
    record = rec.Record("sampling", ROOT / "benchmarks" / "sampling.py", ["--quick", "--save", "x y.json"])
    results = {"per_batch": list(range(1000)), "seconds": 0.123456789, "pair": (1, 2)}
    path = record.save(tmp_path / "sampling.json", results,
                       [rec.row("workbench vs dgl", 2.0, "seeds/s", 1.0, "dgl", 1.0, ">=")])
    data = json.loads(path.read_text(encoding="utf-8"))
    assert ext.problems(data) == []
    assert data["command"].endswith("benchmarks/sampling.py --quick --save 'x y.json'")
    assert data["results"]["per_batch"]["n"] == 1000 and data["results"]["seconds"] == 0.123457
    assert data["headline"][0]["ratio"] == 2.0 and ext.met(data["headline"][0]) is True
    assert re.fullmatch(r".+, \d+ cores, .+", data["machine"])
    table = [line for line in ext.record_rst(data) if line.startswith("   * - ")]
    assert len(table) == 2
