"""``workbench reproduce``: the verdict rule, the JSON shape, and the quick reproduction of all seven systems
end to end through the CLI."""

from __future__ import annotations

import json
import math

import pytest

from recipes.reproduce import SYSTEMS, Claim, explain, to_json, verdict
from recipes.reproduce.core import RELATIONS, VERDICTS, not_reproducible
from workbench.cli import main

KEYS = {"id", "claim", "source", "paper", "measured", "unit", "tolerance", "verdict", "note"}


def _expected(measured, relation, bound, tol) -> str:
    """The documented rule, written out again independently of ``recipes.reproduce.core``."""
    if measured is None:
        return "not reproducible here"
    m = float(measured)
    if relation == "in":
        ok = bound[0] - tol <= m <= bound[1] + tol
    else:
        ok = {"==": abs(m - bound) <= tol, "<=": m <= bound + tol, "<": m < bound + tol,
              ">=": m >= bound - tol, ">": m > bound - tol}[relation]
    return "holds" if ok else "does not hold"


@pytest.mark.parametrize("measured,relation,bound,tol,want", [
    (1.0, "==", 1.0, 0.0, "holds"), (1.02, "==", 1.0, 0.01, "does not hold"), (1.01, "==", 1.0, 0.02, "holds"),
    (0.9, "<=", 1.0, 0.0, "holds"), (1.0, "<=", 1.0, 0.0, "holds"), (1.05, "<=", 1.0, 0.03, "does not hold"),
    (1.0, "<", 1.0, 0.0, "does not hold"), (1.0, "<", 1.0, 0.1, "holds"),
    (2.0, ">=", 2.14, 0.0, "does not hold"), (2.1, ">=", 2.14, 0.05, "holds"),
    (1.0, ">", 1.0, 0.0, "does not hold"), (1.001, ">", 1.0, 0.0, "holds"),
    (0.30, "in", (0.28, 0.33), 0.0, "holds"), (0.34, "in", (0.28, 0.33), 0.0, "does not hold"),
    (0.335, "in", (0.28, 0.33), 0.01, "holds"), (0.27, "in", (0.28, 0.33), 0.0, "does not hold"),
    (None, "==", 1.0, 0.0, "not reproducible here"), (math.nan, "<=", 1.0, 0.0, "does not hold"),
])
def test_the_verdict_rule(measured, relation, bound, tol, want):
    assert verdict(measured, relation, bound, tol) == want
    if measured is None or not math.isnan(measured):
        assert _expected(measured, relation, bound, tol) == want


def test_a_claim_computes_its_verdict_and_says_why():
    c = Claim("s.ratio", "A at least twice B", "Fig. 1", paper=2.0, relation=">=", measured=1.5, unit="x")
    assert c.verdict == "does not hold" and explain(c) == "does not hold: 1.5 < 2"
    trend = Claim("s.trend", "A above B", "Fig. 1", paper=2.14, bound=1.0, relation=">", measured=1.3)
    assert trend.verdict == "holds" and trend.target == 1.0 and trend.to_dict()["bound"] == 1.0
    gone = not_reproducible("s.gpu", "13 s per epoch", "§1", 13.0, "s", "16 machines")
    assert gone.verdict == "not reproducible here" and "16 machines" in explain(gone)


def test_claims_refuse_what_the_rule_cannot_judge():
    with pytest.raises(ValueError, match="relation"):
        Claim("s.x", "c", "s", paper=1.0, relation="~", measured=1.0)
    with pytest.raises(ValueError, match="must say why"):
        Claim("s.x", "c", "s", paper=1.0)                       # not measured and no reason
    with pytest.raises(ValueError, match="paper number or a bound"):
        Claim("s.x", "c", "s", paper=None, measured=1.0)
    with pytest.raises(ValueError, match="low, high"):
        Claim("s.x", "c", "s", paper=(1.0, 2.0, 3.0), relation="in", measured=1.0)


def test_json_shape():
    claims = [Claim("s.a", "a below 1", "T1", paper=0.5, bound=1.0, relation="<", measured=0.7, unit="ratio"),
              Claim("s.b", "range", "T2", paper=(0.2, 0.3), relation="in", measured=0.4, tolerance=0.05),
              not_reproducible("s.c", "GPU time", "F3", 1.0, "s", "needs GPUs")]
    out = json.loads(json.dumps(to_json({"systems": {"s": {"claims": claims, "seconds": 1.0}}})))
    records = out["systems"]["s"]["claims"]
    assert [r["verdict"] for r in records] == ["holds", "does not hold", "not reproducible here"]
    assert all(KEYS <= set(r) for r in records)
    assert records[1]["paper"] == [0.2, 0.3] and records[2]["measured"] is None
    assert out["systems"]["s"]["counts"] == {"holds": 1, "does not hold": 1, "not reproducible here": 1}


def _consistent(record: dict) -> None:
    assert KEYS <= set(record) and record["verdict"] in VERDICTS and record["relation"] in RELATIONS
    bound = record["bound"]
    want = _expected(record["measured"], record["relation"], tuple(bound) if isinstance(bound, list) else bound,
                     record["tolerance"])
    assert record["verdict"] == want, record
    assert record["note"], record["id"]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """``workbench reproduce --quick --json`` of all seven systems, once (about 30 s): ``(output, out dir)``."""
    import contextlib
    import io

    out_dir = tmp_path_factory.mktemp("reproduce")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["reproduce", "--quick", "--json", "--out", str(out_dir)]) == 0
    return json.loads(buf.getvalue()), out_dir


def test_quick_reproduction_of_every_system(quick):
    """All seven systems end to end: at least five measured claims each, every verdict the documented rule's,
    every claim explained, unique ids, and the counts add up."""
    out, out_dir = quick
    assert list(out["systems"]) == list(SYSTEMS)
    for system, result in out["systems"].items():
        records = result["claims"]
        assert len([r for r in records if r["measured"] is not None]) >= 5, system
        assert len({r["id"] for r in records}) == len(records) and all(r["id"].startswith(system) for r in records)
        for record in records:
            _consistent(record)
        assert sum(result["counts"].values()) == len(records)
        assert (out_dir / f"{system}.html").exists()


def test_quick_hp_gcn_page_and_exact_claims(quick):
    out, tmp_path = quick
    records = out["systems"]["hp_gcn"]["claims"]
    exact = {r["id"]: r for r in records}
    assert exact["hp_gcn.km1_rows"]["verdict"] == exact["hp_gcn.bytes_formula"]["verdict"] == "holds"
    page = (tmp_path / "hp_gcn.html").read_text()
    assert "hp_gcn.km1_rows" in page and "<script" not in page and "http" not in page.replace(
        "http://www.w3.org/2000/svg", "")                        # offline: no script, no CDN
    saved = json.loads((tmp_path / "reproduce.json").read_text())
    assert saved["systems"]["hp_gcn"]["claims"] == records


def test_unknown_system_is_refused(capsys):
    assert main(["reproduce", "hp-gcn", "--quick"]) == 2
    assert "one of" in capsys.readouterr().err and "hp_gcn" in SYSTEMS
