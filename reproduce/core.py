"""The claim record, the one verdict rule, the mechanism checks, and the runner that collects every system's claims.

A :class:`Claim` holds what a paper states (``paper``: a number, a ``(low, high)`` range, or ``None`` for a
claim with no number), how it is checked, and what this workbench measured (``measured``, with its ``spread``:
half the range over repeated measurements, ``0`` for exact counts). Its verdict is never set by hand:
:func:`verdict` computes it from those fields alone, so anyone can recompute it from the JSON.

**Effect claims** (``null`` given: the value of "no effect", e.g. ``1`` for a ratio, ``0`` for a saved fraction)
say that something changes a number, in a direction (``relation`` against ``null``) and by how much (``paper``).
With ``e = measured - null`` and ``E = paper - null``:

=========================  ========================================================================
verdict                    when
=========================  ========================================================================
``inconclusive``           ``|e| <= spread``: a tie, or an effect within the noise
``does not hold``          the effect points the other way (``relation`` against ``null`` fails)
``holds``                  the direction agrees and the size too: ``0.5 <= e / E <= 2`` (a factor of 2
                           of the paper's effect), or ``measured`` inside the paper's range (± ``tolerance``);
                           a claim without a number (``paper=None``) holds on its direction
``direction only``         the direction agrees, the size does not
=========================  ========================================================================

**Bound claims** (``null=None``: a bound on a number, e.g. an accuracy loss of at most 0.005) hold when
``measured`` satisfies ``relation`` against ``bound`` (default the paper's number) with slack ``tolerance``:

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

and are ``inconclusive`` when ``measured`` lies within ``spread`` of the accepted region's edge (either side).

``measured is None`` gives **not reproducible here** (the claim's ``note`` says why: hardware, absolute
times, data that cannot be downloaded). :func:`explain` spells every verdict out with the numbers.

A number the paper does not print but that follows from it (two figures divided, a table's example) says so in
``derived``. What only checks this workbench's own mechanism (bytes equal a formula, binned equals unbinned,
a partitioner within its own capacity) is a :class:`Check`, listed apart from the claims: it is a test, not a
result.

Example:
    >>> c = Claim("x.ratio", "A is 2x faster than B", "Fig. 1", paper=2.0, null=1.0, relation=">", measured=1.3)
    >>> print(c.verdict + " | " + explain(c))
    direction only | direction only: effect +0.3 is 0.3x the paper's +1 (holds within 0.5-2x)
    >>> verdict(0.31, "in", (0.28, 0.33), 0.0), verdict(None, "==", 1.0, 0.0)
    ('holds', 'not reproducible here')
    >>> verdict(1.0, ">", None, 0.0, null=1.0), verdict(0.006, "<=", 0.005, 0.0, spread=0.002)
    ('inconclusive', 'inconclusive')
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import time
from typing import Any, Optional, Sequence, Union

__all__ = ["Claim", "Check", "verdict", "explain", "RELATIONS", "VERDICTS", "SYSTEMS", "run_system", "run_systems",
           "not_reproducible", "fmt", "run_config", "geomean", "code_digest", "spread_of", "mean_spread",
           "over_seeds", "measured_in", "SEEDS"]

SYSTEMS = ("distdgl", "bytegnn", "sancus", "hp_gcn", "catgnn", "psc_gcn", "g3")
"""The seven systems, in the order the tables are printed (each a module of this package)."""

RELATIONS = ("==", "<=", "<", ">=", ">", "in")
HOLDS, DIRECTION, INCONCLUSIVE, FAILS, NOT_HERE = ("holds", "direction only", "inconclusive", "does not hold",
                                                   "not reproducible here")
VERDICTS = (HOLDS, DIRECTION, INCONCLUSIVE, FAILS, NOT_HERE)
FACTOR = 2.0
"""An effect holds within this factor of the paper's (either way)."""

Number = Union[int, float]
Bound = Union[Number, Sequence[Number], None]


def _holds(m: float, relation: str, b: Bound, t: float) -> bool:
    if relation == "in":
        lo, hi = b  # type: ignore[misc]
        return lo - t <= m <= hi + t
    b = float(b)  # type: ignore[arg-type]
    return {"==": abs(m - b) <= t, "<=": m <= b + t, "<": m < b + t,
            ">=": m >= b - t, ">": m > b - t}[relation]


def _edge_distance(m: float, relation: str, b: Bound, t: float) -> float:
    """How far ``m`` is from the edge of the accepted region (either side)."""
    if relation == "in":
        lo, hi = b  # type: ignore[misc]
        return min(abs(m - (lo - t)), abs(m - (hi + t)))
    b = float(b)  # type: ignore[arg-type]
    if relation == "==":
        return abs(abs(m - b) - t)
    return abs(m - (b + t if relation[0] == "<" else b - t))


def _effect_ratio(m: float, paper: Bound, null: float) -> Optional[float]:
    """``(m - null) / (paper - null)`` for a paper number (``None`` for a range or no number)."""
    if paper is None or isinstance(paper, (tuple, list)):
        return None
    E = float(paper) - null
    return (m - null) / E if E else None


def verdict(measured: Optional[Number], relation: str, bound: Bound, tolerance: float, *,
            null: Optional[Number] = None, paper: Bound = None, spread: float = 0.0) -> str:
    """One of :data:`VERDICTS` by the rule of the module docstring (``bound``: a bound claim's target; an effect
    claim (``null`` given) checks its direction against ``null`` and its size against ``paper``).

    Example:
        >>> verdict(1.10, "<=", 1.0, 0.0), verdict(0.996, "==", 1.0, 0.005)
        ('does not hold', 'holds')
        >>> verdict(1.8, ">", None, 0.0, null=1.0, paper=2.0), verdict(0.9, ">", None, 0.0, null=1.0, paper=2.0)
        ('holds', 'does not hold')
    """
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {RELATIONS}, got {relation!r}")
    if measured is None:
        return NOT_HERE
    m, t, sp = float(measured), float(tolerance), float(spread or 0.0)
    if math.isnan(m):
        return FAILS
    if null is None:
        if sp > 0 and _edge_distance(m, relation, bound, t) <= sp:
            return INCONCLUSIVE
        return HOLDS if _holds(m, relation, bound, t) else FAILS
    n = float(null)
    if abs(m - n) <= sp:
        return INCONCLUSIVE
    if not _holds(m, relation, n, 0.0):
        return FAILS
    if paper is None:
        return HOLDS
    if isinstance(paper, (tuple, list)):
        return HOLDS if _holds(m, "in", paper, t) else DIRECTION
    ratio = _effect_ratio(m, paper, n)
    return HOLDS if ratio is not None and 1 / FACTOR <= ratio <= FACTOR else DIRECTION


SEEDS = (0, 1, 2)
"""The seeds (``RunConfig.compose(seed=...)``: weights, partitioner, sampler) a claim whose measurement varies is
measured over: its ``measured`` is the mean, its ``spread`` half the range."""


def mean_spread(values: Sequence[float]) -> tuple[float, float]:
    """``(mean, spread_of(values))`` of repeated measurements.

    Example:
        >>> mean_spread([0.70, 0.74, 0.72])
        (0.72, 0.02)
    """
    v = [float(x) for x in values]
    return round(sum(v) / len(v), 12), spread_of(v)


def over_seeds(per_seed: Sequence[Any], f: Any = None) -> dict:
    """A claim's ``measured`` and ``spread`` from one result per seed (:data:`SEEDS`): the mean and half the range
    of ``f(result)`` (of the results themselves without ``f``), as keyword arguments of :class:`Claim`.

    Example:
        >>> over_seeds([{"acc": 0.70}, {"acc": 0.74}, {"acc": 0.72}], lambda r: r["acc"])
        {'measured': 0.72, 'spread': 0.02}
    """
    m, sp = mean_spread([x if f is None else f(x) for x in per_seed])
    return {"measured": m, "spread": sp}


def measured_in(first: str, values: Sequence[float]) -> str:
    """The note of a claim measured in the same runs as claim ``first``, whose note lists them: where, and this
    claim's own value per seed.

    Example:
        >>> measured_in("distdgl.epoch_metis_vs_random", [1.2, 1.25])
        'measured in the runs of distdgl.epoch_metis_vs_random (its note lists them); per seed 1.200, 1.250'
    """
    return f"measured in the runs of {first} (its note lists them); per seed " + ", ".join(f"{x:.3f}" for x in values)


def spread_of(values: Sequence[float]) -> float:
    """Half the range of repeated measurements (the ``spread`` of a claim measured over seeds).

    Example:
        >>> spread_of([0.70, 0.74, 0.71])
        0.02
    """
    v = [float(x) for x in values]
    return round((max(v) - min(v)) / 2, 12) if v else 0.0


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
        source: where the paper states it (table, figure, section of the paper).
        paper: the paper's number, a ``(low, high)`` range, or ``None`` (a claim without a number).
        relation: one of :data:`RELATIONS`: an effect's direction against ``null``, or a bound's relation.
        measured: this workbench's number (``None``: not reproducible here).
        unit: unit of ``paper``, ``bound``, ``measured``, ``tolerance`` and ``spread``.
        tolerance: slack of the rule, in ``unit`` (the note says where it comes from).
        bound: what a bound claim's ``measured`` is compared with; ``None`` = ``paper``.
        note: how it was measured, at what scale, and why it differs or cannot be reproduced.
        null: the value of "no effect" (an effect claim); ``None``: a bound claim.
        spread: half the range of ``measured`` over repeats (seeds, runs); ``0`` for an exact count.
        derived: how ``paper`` follows from the paper when the paper does not print it (empty: printed).
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
    null: Optional[Number] = None
    spread: float = 0.0
    derived: str = ""

    def __post_init__(self) -> None:
        if self.relation not in RELATIONS:
            raise ValueError(f"{self.id}: relation must be one of {RELATIONS}, got {self.relation!r}")
        if self.null is not None:
            if self.relation not in ("<", "<=", ">", ">="):
                raise ValueError(f"{self.id}: an effect claim (null given) needs a direction: <, <=, > or >=")
            if self.bound is not None:
                raise ValueError(f"{self.id}: an effect claim is checked against null and paper, not a bound")
        elif self.measured is not None and self.target is None:
            raise ValueError(f"{self.id}: a measured claim needs a paper number, a bound, or a null")
        if self.null is None and self.relation == "in" and self.target is not None and \
                len(self.target) != 2:  # type: ignore[arg-type]
            raise ValueError(f"{self.id}: relation 'in' needs a (low, high) bound")
        if self.measured is None and not self.note:
            raise ValueError(f"{self.id}: a claim not reproducible here must say why (note)")
        if self.spread < 0:
            raise ValueError(f"{self.id}: spread must be >= 0, got {self.spread}")

    @property
    def effect(self) -> bool:
        """Whether this is an effect claim (``null`` given)."""
        return self.null is not None

    @property
    def target(self) -> Bound:
        """What ``measured`` is compared with: ``null`` (an effect's direction), else ``bound``, else ``paper``."""
        if self.null is not None:
            return self.null
        return self.paper if self.bound is None else self.bound

    @property
    def verdict(self) -> str:
        return verdict(self.measured, self.relation, self.target, self.tolerance, null=self.null, paper=self.paper,
                       spread=self.spread)

    def to_dict(self) -> dict[str, Any]:
        """The JSON record: ``id, claim, source, paper, measured, unit, tolerance, verdict, note``, the rule's
        ``relation``, ``bound``, ``null``, ``spread``, ``derived`` and ``explanation``."""
        listed = lambda v: list(v) if isinstance(v, (tuple, list)) else v  # noqa: E731
        return {"id": self.id, "claim": self.claim, "source": self.source, "paper": listed(self.paper),
                "measured": self.measured, "unit": self.unit, "tolerance": self.tolerance, "verdict": self.verdict,
                "note": self.note, "relation": self.relation,
                "bound": None if self.null is not None else listed(self.target), "null": self.null,
                "spread": self.spread, "derived": self.derived, "explanation": explain(self)}


@dataclasses.dataclass(frozen=True)
class Check:
    """A self-check of this workbench's mechanism that a reproduction relies on (bytes equal a formula, binned
    equals unbinned, averaged weights equal Σ α W): a test, listed apart from the papers' claims.

    Example:
        >>> Check("g3.binned_exact", "binned training equals whole-part training", measured=0.0, expected=0.0,
        ...       tolerance=1e-5).passed
        True
    """

    id: str
    check: str
    measured: Number
    expected: Number
    tolerance: float = 0.0
    note: str = ""

    @property
    def passed(self) -> bool:
        m = float(self.measured)
        return not math.isnan(m) and abs(m - float(self.expected)) <= float(self.tolerance)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "check": self.check, "measured": self.measured, "expected": self.expected,
                "tolerance": self.tolerance, "passed": self.passed, "note": self.note}


def explain(c: Claim) -> str:
    """The verdict with the numbers: ``holds: 0.31 in 0.28-0.33 ± 0.01``.

    Example:
        >>> explain(Claim("a.b", "ratio above 1", "Fig. 2", paper=None, bound=1.0, relation=">", measured=1.2))
        'holds: 1.2 > 1'
        >>> print(explain(Claim("a.c", "saves 30 %", "Table 5", paper=(0.28, 0.33), null=0.0, relation=">",
        ...                     measured=0.42)))
        direction only: 0.42 > 0 but outside the paper's 0.28-0.33
    """
    v = c.verdict
    if v == NOT_HERE:
        return f"{v}: {c.note}"
    m, t = fmt(c.measured), c.tolerance
    sp = f" (spread ± {fmt(c.spread)})" if c.spread else ""
    if c.null is not None:
        n, e = fmt(c.null), float(c.measured) - float(c.null)
        if v == INCONCLUSIVE:
            if not c.spread:
                return f"{v}: a tie, {m} is no effect ({n})"
            return f"{v}: {m} is within ± {fmt(c.spread)} of no effect ({n})"
        if v == FAILS:
            op = {"<=": ">", "<": ">=", ">=": "<", ">": "<="}[c.relation]
            return f"{v}: {m} {op} {n}, the other way{sp}"
        if isinstance(c.paper, (tuple, list)):
            where = "inside" if v == HOLDS else "outside"
            tol = f" ± {fmt(t)}" if t else ""
            return f"{v}: {m} {c.relation} {n} and {where} the paper's {fmt(c.paper)}{tol}{sp}" if v == HOLDS else \
                f"{v}: {m} {c.relation} {n} but outside the paper's {fmt(c.paper)}{tol}{sp}"
        ratio = _effect_ratio(float(c.measured), c.paper, float(c.null))
        if ratio is None:
            return f"{v}: {m} {c.relation} {n} (no number in the paper){sp}"
        return (f"{v}: effect {e:+.4g} is {ratio:.2g}x the paper's {float(c.paper) - float(c.null):+.4g} "
                f"(holds within {1 / FACTOR:.1g}-{FACTOR:.0f}x){sp}")
    b = fmt(c.target)
    tol = f" ± {fmt(t)}" if t else ""
    if v == INCONCLUSIVE:
        return f"{v}: {m} is within ± {fmt(c.spread)} of the edge of {c.relation} {b}{tol}"
    if c.relation == "in":
        word = "in" if v == HOLDS else "outside"
        return f"{v}: {m} {word} {b}{tol}{sp}"
    if c.relation == "==":
        return f"{v}: |{m} - {b}| {'<=' if v == HOLDS else '>'} {fmt(t)}{sp}"
    op = c.relation if v == HOLDS else {"<=": ">", "<": ">=", ">=": "<", ">": "<="}[c.relation]
    sign = {"<": "+", ">": "-"}[c.relation[0]]
    return f"{v}: {m} {op} {b}" + (f" {sign} {fmt(t)}" if t else "") + sp


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
    """SHA-256 (first 12 hex digits) of the recipes and their reproduction (``recipes/**/*.py`` and
    ``reproduce/**/*.py``, by path from the repository root and content): a saved run records it (``code``), and
    the tests refuse a saved run whose claims were computed by other recipe code (``make docs-data`` writes both
    runs anew).

    Example:
        >>> len(code_digest())
        12
    """
    import hashlib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(p for package in ("recipes", "reproduce") for p in (root / package).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def run_system(name: str, quick: bool = False) -> dict[str, Any]:
    """Run one system's claims (module ``reproduce.NAME``, whose ``claims()`` returns its
    :class:`Claim` s and :class:`Check` s): ``{"claims": [Claim], "checks": [Check], "seconds": s}``."""
    if name not in SYSTEMS:
        raise ValueError(f"unknown system {name!r}: one of {list(SYSTEMS)}")
    module = importlib.import_module(f"reproduce.{name}")
    t0 = time.perf_counter()
    found = list(module.claims(quick=quick))
    return {"claims": [c for c in found if isinstance(c, Claim)], "checks": [c for c in found if isinstance(c, Check)],
            "seconds": time.perf_counter() - t0, "title": getattr(module, "TITLE", name),
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
