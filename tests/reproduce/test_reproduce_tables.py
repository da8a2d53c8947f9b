"""The saved reproductions the docs and the notebooks show (``docs/reproduce/full.json`` and ``quick.json``,
written by ``make docs-data``) and :func:`reproduce.report.claims_table`, which reads them."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from reproduce import SYSTEMS
from reproduce.report import FULL_RUN, QUICK_RUN, claim_from_record, claims_table

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = {"sancus": "02_staleness_sancus", "distdgl": "03_minibatch_sampling_caches",
             "hp_gcn": "04_hypergraph_partitioning", "catgnn": "05_streaming_catgnn", "psc_gcn": "06_psc_gcn",
             "bytegnn": "07_bytegnn", "g3": "08_g3"}


@pytest.mark.parametrize("path", [FULL_RUN, QUICK_RUN], ids=["full", "quick"])
def test_a_saved_run_is_small_dated_and_its_verdicts_follow_the_rule(path):
    assert path.stat().st_size < 300_000
    data = json.loads(path.read_text(encoding="utf-8"))
    assert list(data["systems"]) == list(SYSTEMS)
    assert data["date"] and data["machine"] and data["wall_s"] > 0
    for name, system in data["systems"].items():
        for record in system["claims"]:
            claim = claim_from_record(record)
            assert claim.verdict == record["verdict"], f"{name}: {record['id']}"
        counts = {v: sum(r["verdict"] == v for r in system["claims"]) for v in system["counts"]}
        assert counts == system["counts"], name


@pytest.mark.parametrize("path", [FULL_RUN, QUICK_RUN], ids=["full", "quick"])
def test_a_saved_run_comes_from_the_recipes_of_this_commit(path):
    """One source of truth: the docs' and notebooks' tables were computed by the recipe code they sit
    beside, the quick and the full run alike."""
    from reproduce.core import code_digest

    saved = json.loads(path.read_text(encoding="utf-8")).get("code")
    assert saved == code_digest(), (f"{path.name} was computed by recipe code {saved}, the recipes are now "
                                    f"{code_digest()}: run `make docs-data` and `make notebooks`")


def test_the_full_run_tests_the_quick_runs_claims():
    full, quick = (json.loads(p.read_text(encoding="utf-8")) for p in (FULL_RUN, QUICK_RUN))
    assert not full.get("quick") and quick["quick"]
    for name in SYSTEMS:
        for key in ("claims", "checks"):
            assert [c["id"] for c in full["systems"][name][key]] == \
                [c["id"] for c in quick["systems"][name][key]], name


def test_claims_table_renders_the_saved_numbers():
    table = claims_table("sancus")
    text, page = repr(table), table._repr_html_()
    assert table.date in text and table.machine in text
    assert ("quick mode" if table.quick else "full run") in text
    assert text.count("sancus.") >= len(table.claims)
    table_rows = page.split("rp-checks")[0]
    assert "rp-table" in page and table_rows.count("<tr>") == len(table.claims) + 1
    assert table.checks and "Mechanism checks" in page and all(k.id in page for k in table.checks)
    # drawn with what JupyterLab keeps in an untrusted output: no SVG, no <style>, every cell aligned inline
    assert page.count('class="rp-line"') == sum(c.measured is not None for c in table.claims)
    assert "<svg" not in page and "<style" not in page
    assert page.count("<td") == page.count("<td style='text-align:left") + page.count("<td class='rp-verdict' "
                                                                                       "style='text-align:left")
    assert claims_table("sancus", QUICK_RUN).quick


def test_a_verdict_that_differs_between_the_saved_runs_is_marked_scale_dependent(tmp_path):
    """A claim whose verdict differs between the quick and the full run (issue 42: the verdict depends on the
    scale) says so in both tables, with the other run's verdict; a run from other recipe code marks nothing."""
    full, quick = (json.loads(p.read_text(encoding="utf-8")) for p in (FULL_RUN, QUICK_RUN))
    for name in SYSTEMS:
        want = {r["id"] for r in full["systems"][name]["claims"]} - {
            a["id"] for a, b in zip(full["systems"][name]["claims"], quick["systems"][name]["claims"])
            if a["verdict"] == b["verdict"]}
        table, other = claims_table(name), claims_table(name, QUICK_RUN)
        assert set(table.other) == set(other.other) == want, name
        for claim_id in want:
            assert table.other[claim_id].startswith("quick run: ") and other.other[claim_id].startswith("full run: ")
            assert claim_id in repr(table) and "scale-dependent: quick run: " in table._repr_html_()
    (tmp_path / FULL_RUN.name).write_text(FULL_RUN.read_text(encoding="utf-8"), encoding="utf-8")
    stale = dict(quick, code="0" * 12)
    (tmp_path / QUICK_RUN.name).write_text(json.dumps(stale), encoding="utf-8")
    assert claims_table("hp_gcn", tmp_path / FULL_RUN.name).other == {}


def test_claims_table_refuses_what_it_cannot_read(tmp_path):
    with pytest.raises(ValueError, match="The 'system' parameter of claims_table must be one of"):
        claims_table("pregel")
    with pytest.raises(FileNotFoundError, match="make docs-data"):
        claims_table("sancus", tmp_path / "none.json")


@pytest.mark.parametrize("system", SYSTEMS)
def test_each_system_notebook_shows_its_saved_table(system):
    nb = nbformat.read(ROOT / "notebooks" / f"{NOTEBOOKS[system]}.ipynb", as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and f'claims_table("{system}")' in c.source]
    assert len(cells) == 1, f"{NOTEBOOKS[system]}: one cell calls claims_table({system!r})"
    data = [o.get("data", {}) for o in cells[0].get("outputs", [])]
    assert any("rp-table" in d.get("text/html", "") for d in data), "committed without its table"
