"""The claim record, the one verdict rule, and the runner that collects every system's claims.

A :class:`Claim` holds what a paper states (``paper``: a number, a ``(low, high)`` range, or ``None`` for a
claim with no number), the direction it is checked in (``relation`` against ``bound``, which defaults to the
paper's number), a ``tolerance`` in the claim's unit, and what this workbench measured. Its verdict is never
set by hand: :func:`verdict` computes it from those fields alone.

**The rule** (``m`` measured, ``b`` bound, ``t`` tolerance, all in the claim's unit):

=========  ==========================================
relation   holds when
=========  ==========================================
``==``     ``|m - b| <= t``
``<=``     ``m <= b + t``
``<``      ``m < b + t``
``>=``     ``m >= b - t``
``>``      ``m > b - t``
``in``     ``b[0] - t <= m <= b[1] + t``
=========  ==========================================

``measured is None`` gives **not reproducible here** (the claim's ``note`` says why: hardware, absolute
times, data that cannot be downloaded); a number that fails the relation gives **does not hold**, and
:func:`explain` spells the comparison out with the numbers.

Example:
    >>> c = Claim("x.ratio", "A is at least twice B", "Fig. 1", paper=2.0, relation=">=", measured=1.5,
    ...           unit="x", tolerance=0.1)
    >>> c.verdict, explain(c)
    ('does not hold', 'does not hold: 1.5 < 2 - 0.1')
    >>> verdict(0.31, "in", (0.28, 0.33), 0.0), verdict(None, "==", 1.0, 0.0)
    ('holds', 'not reproducible here')
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import time
from typing import Any, Optional, Sequence, Union

__all__ = ["Claim", "verdict", "explain", "RELATIONS", "VERDICTS", "SYSTEMS", "run_system", "run_systems",
           "not_reproducible", "fmt", "run_config", "geomean", "code_digest"]

SYSTEMS = ("distdgl", "bytegnn", "sancus", "hp_gcn", "catgnn", "psc_gcn", "g3")
"""The seven systems, in the order the tables are printed (each a module of this package)."""

RELATIONS = ("==", "<=", "<", ">=", ">", "in")
HOLDS, FAILS, NOT_HERE = "holds", "does not hold", "not reproducible here"
VERDICTS = (HOLDS, FAILS, NOT_HERE)

Number = Union[int, float]
Bound = Union[Number, Sequence[Number], None]


def _holds(m: float, relation: str, b: Bound, t: float) -> bool:
    if relation == "in":
        lo, hi = b  # type: ignore[misc]
        return lo - t <= m <= hi + t
    b = float(b)  # type: ignore[arg-type]
    return {"==": abs(m - b) <= t, "<=": m <= b + t, "<": m < b + t,
            ">=": m >= b - t, ">": m > b - t}[relation]


def verdict(measured: Optional[Number], relation: str, bound: Bound, tolerance: float) -> str:
    """``holds``, ``does not hold`` or ``not reproducible here`` by the rule of the module docstring.

    Example:
        >>> verdict(1.10, "<=", 1.0, 0.0), verdict(0.996, "==", 1.0, 0.005)
        ('does not hold', 'holds')
    """
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {RELATIONS}, got {relation!r}")
    if measured is None:
        return NOT_HERE
    m = float(measured)
    if math.isnan(m):
        return FAILS
    return HOLDS if _holds(m, relation, bound, float(tolerance)) else FAILS


def fmt(x: Any, digits: int = 4) -> str:
    """A short number: ``fmt(0.333333) == '0.3333'``, ``fmt(28800.0) == '28800'``, ``fmt((1, 2)) == '1-2'``."""
    if x is None:
        return "-"
    if isinstance(x, (tuple, list)):
        return "-".join(fmt(v, digits) for v in x)
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    if isinstance(x, int) or float(x).is_integer() and abs(x) >= 1:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


@dataclasses.dataclass(frozen=True)
class Claim:
    """One claim of a paper beside this workbench's measurement (see the module docstring).

    Args:
        id: ``system.short_name``.
        claim: the claim in words, with its direction (what ``measured`` is).
        source: where the paper states it (table, figure, section).
        paper: the paper's number, a ``(low, high)`` range, or ``None`` (a claim without a number).
        relation: one of :data:`RELATIONS`; the claim's direction.
        measured: this workbench's number (``None``: not reproducible here).
        unit: unit of ``paper``, ``bound``, ``measured`` and ``tolerance``.
        tolerance: slack of the rule, in ``unit`` (the note says where it comes from).
        bound: what ``measured`` is compared with; ``None`` = ``paper``.
        note: how it was measured, at what scale, and why it differs or cannot be reproduced.
    """

    id: str
    claim: str
    source: str
    paper: Bound = None
    relation: str = "=="
    measured: Optional[Number] = None
    unit: str = ""
    tolerance: float = 0.0
    bound: Bound = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.relation not in RELATIONS:
            raise ValueError(f"{self.id}: relation must be one of {RELATIONS}, got {self.relation!r}")
        if self.measured is not None and self.target is None:
            raise ValueError(f"{self.id}: a measured claim needs a paper number or a bound")
        if self.relation == "in" and self.target is not None and len(self.target) != 2:  # type: ignore[arg-type]
            raise ValueError(f"{self.id}: relation 'in' needs a (low, high) bound")
        if self.measured is None and not self.note:
            raise ValueError(f"{self.id}: a claim not reproducible here must say why (note)")

    @property
    def target(self) -> Bound:
        """What ``measured`` is compared with: ``bound``, else ``paper``."""
        return self.paper if self.bound is None else self.bound

    @property
    def verdict(self) -> str:
        return verdict(self.measured, self.relation, self.target, self.tolerance)

    def to_dict(self) -> dict[str, Any]:
        """The JSON record: ``id, claim, source, paper, measured, unit, tolerance, verdict, note`` and the rule's
        ``relation``, ``bound`` and ``explanation``."""
        listed = lambda v: list(v) if isinstance(v, (tuple, list)) else v  # noqa: E731
        return {"id": self.id, "claim": self.claim, "source": self.source, "paper": listed(self.paper),
                "measured": self.measured, "unit": self.unit, "tolerance": self.tolerance, "verdict": self.verdict,
                "note": self.note, "relation": self.relation, "bound": listed(self.target),
                "explanation": explain(self)}


def explain(c: Claim) -> str:
    """The verdict with the numbers: ``holds: 0.31 in 0.28-0.33 ± 0.01``.

    Example:
        >>> explain(Claim("a.b", "ratio above 1", "Fig. 2", paper=None, bound=1.0, relation=">", measured=1.2))
        'holds: 1.2 > 1'
    """
    v = c.verdict
    if v == NOT_HERE:
        return f"{v}: {c.note}"
    m, b, t = fmt(c.measured), fmt(c.target), c.tolerance
    tol = f" ± {fmt(t)}" if t else ""
    if c.relation == "in":
        word = "in" if v == HOLDS else "outside"
        return f"{v}: {m} {word} {b}{tol}"
    if c.relation == "==":
        return f"{v}: |{m} - {b}| {'<=' if v == HOLDS else '>'} {fmt(t)}"
    op = c.relation if v == HOLDS else {"<=": ">", "<": ">=", ">=": "<", ">": "<="}[c.relation]
    sign = {"<": "+", ">": "-"}[c.relation[0]]
    return f"{v}: {m} {op} {b}" + (f" {sign} {fmt(t)}" if t else "")


def not_reproducible(id: str, claim: str, source: str, paper: Bound, unit: str, why: str) -> Claim:
    """A claim this machine cannot test (``why``: the hardware, absolute times or data it needs).

    Example:
        >>> not_reproducible("s.x", "13 s per epoch", "§1", 13.0, "s", "16 machines").verdict
        'not reproducible here'
    """
    return Claim(id, claim, source, paper=paper, relation="==" if not isinstance(paper, tuple) else "in",
                 unit=unit, note=why)


def run_config(config: Any, workers: int = 2, *, events: bool = False):
    """Run a recipe config on in-process thread ranks (no run log); the summary, with the events if asked."""
    from workbench.runtime import launch

    handle = launch(config, runner="local", workers=workers, out=None)
    summary = handle.wait(timeout=1800)
    return (summary, handle.events) if events else summary


def geomean(values: Sequence[float]) -> float:
    """Geometric mean of the positive finite values (``nan`` when there are none).

    Example:
        >>> geomean([1.0, 4.0])
        2.0
    """
    v = [float(x) for x in values if x is not None and math.isfinite(float(x)) and float(x) > 0]
    return math.exp(sum(map(math.log, v)) / len(v)) if v else math.nan


def code_digest() -> str:
    """SHA-256 (first 12 hex digits) of the recipes and their reproduction (``recipes/**/*.py``, by path and
    content): a saved run records it (``code``), and the tests refuse a saved run whose claims were computed by
    other recipe code (``make docs-data`` writes both runs anew).

    Example:
        >>> len(code_digest())
        12
    """
    import hashlib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def run_system(name: str, quick: bool = False) -> dict[str, Any]:
    """Run one system's claims (module ``recipes.reproduce.NAME``): ``{"claims": [Claim], "seconds": s}``."""
    if name not in SYSTEMS:
        raise ValueError(f"unknown system {name!r}: one of {list(SYSTEMS)}")
    module = importlib.import_module(f"recipes.reproduce.{name}")
    t0 = time.perf_counter()
    claims = list(module.claims(quick=quick))
    return {"claims": claims, "seconds": time.perf_counter() - t0, "title": getattr(module, "TITLE", name),
            "setting": getattr(module, "setting", lambda q: "")(quick)}


def run_systems(names: Sequence[str] = SYSTEMS, quick: bool = False, progress=None) -> dict[str, Any]:
    """Every named system's claims, in :data:`SYSTEMS` order: ``{"systems": {NAME: run_system(...)}}``.

    ``progress(name, result)`` is called after each system (e.g. to print its table at once)."""
    out: dict[str, Any] = {"systems": {}, "quick": bool(quick)}
    for name in [s for s in SYSTEMS if s in set(names)]:
        out["systems"][name] = run_system(name, quick)
        if progress is not None:
            progress(name, out["systems"][name])
    return out
