"""Constraints on config fields, declared as data beside the field's type (after scikit-learn's
``_parameter_constraints``: ``Interval``, ``StrOptions``).

A field carries its constraint in its annotation::

    epochs: Annotated[int, Interval(1, None)] = 20
    optimizer: Annotated[str, Options(*OPTIMIZERS)] = "adam"
    refine: Annotated[Optional[str], OneOf(None, Options(REFINERS))] = None   # a registry's keys, read live
    budget: Annotated[Optional[Union[int, str]], OneOf(None, "auto", Interval(1, None, unit="bytes"))] = None
    fanouts: Annotated[tuple[int, ...], TupleOf(OneOf(-1, Interval(1, None)))] = (10, 5)

A ``bool`` or ``Literal[...]`` annotation is its own constraint (:class:`Bool`, :class:`Options`).

Why ``typing.Annotated`` rather than ``dataclasses.field(metadata=...)``: the type and its constraint are
written together, in one place, and a field with a plain default needs no ``field()`` call;
``typing.get_type_hints(cls, include_extras=True)`` reads both, while the plain ``get_type_hints`` that other
readers use still sees the bare type. An ``Interval`` takes ``int`` or ``float`` from the annotation it sits in.

Every reader goes through the same objects: :meth:`Config.validate <workbench._validation.Config.validate>`
(one generic check, the one message template), :func:`coerce` (``--set`` strings), ``workbench stages`` (the
field's type and :meth:`Constraint.describe`), the dashboard form (:attr:`Constraint.choices`, the bounds of an
:class:`Interval`) and the conformance checks (:meth:`Constraint.bad_values`).

Example:
    >>> c = OneOf(None, "auto", Interval(1, None, type=int))
    >>> c.describe(), c.check("auto"), c.check(0), coerce("8", c), coerce("none", c)
    ("None, 'auto' or an int >= 1", True, False, 8, None)
    >>> Interval(0, 1, closed="right").describe(), Options("adam", "sgd").describe()
    ('a number in (0, 1]', "one of ['adam', 'sgd']")
    >>> TupleOf(OneOf(-1, Interval(1, None, type=int))).describe()
    'a non-empty tuple, each -1 or an int >= 1'
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
import types
import typing
from typing import Any, Mapping, Optional

__all__ = ["Constraint", "Interval", "Options", "Bool", "OneOf", "TupleOf", "coerce", "declared", "constraint_of",
           "type_name", "BAD"]

BAD = "bogus-value"
"""A string no numeric, boolean, tuple or option constraint accepts (the conformance checks send it)."""
_NONE_WORDS = ("none", "null")


class Constraint:
    """What one field accepts. Subclasses implement :meth:`check` and :meth:`describe`."""

    choices: Optional[list] = None
    """Every accepted value, where there are finitely many (the form's ``Select``); else ``None``."""

    def check(self, value: Any) -> bool:
        """Whether ``value`` satisfies the constraint."""
        raise NotImplementedError

    def describe(self) -> str:
        """The phrase of the message template: ``The 'F' parameter of C must be <describe()>. Got ...``."""
        raise NotImplementedError

    def coerce(self, text: str) -> Any:
        """A ``--set`` string as a value of this constraint's type; ``ValueError`` when it is not one."""
        return text

    def convert(self, value: Any) -> Any:
        """The canonical form of an accepted value (an int for a float field becomes a float, a list a tuple)."""
        return value

    def hint(self, value: Any) -> str:
        """Extra words after the phrase for this refused value (``(did you mean 'metis'?)``)."""
        return ""

    def bad_values(self) -> list:
        """Values the constraint refuses (the conformance checks expect each refused with the template)."""
        return [v for v in (BAD,) if not self.check(v)]

    def bind(self, tp: Any) -> "Constraint":
        """This constraint with what it leaves open (an :class:`Interval`'s type) taken from annotation ``tp``."""
        return self

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.describe()}>"


def _number(x: float) -> str:
    if _is_int(x) and x >= 2**16 and x & (x - 1) == 0:
        return f"2**{int(x).bit_length() - 1}"   # a power of two as written: [0, 2**31)
    return str(int(x)) if isinstance(x, float) and x.is_integer() and abs(x) < 1e15 else str(x)


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and not (isinstance(v, float) and math.isnan(v))


class Interval(Constraint):
    """An int or a number between ``low`` and ``high`` (``None``: unbounded on that side).

    Args:
        closed: which ends belong to it: ``both`` (default), ``left``, ``right`` or ``neither``.
        type: ``int`` or ``float``; ``None`` takes it from the annotation (``float`` when it names no number).
        unit: a word added to the phrase (``an int >= 1 (bytes)``).
    """

    def __init__(self, low: Optional[float] = None, high: Optional[float] = None, *, closed: str = "both",
                 type: Optional[type] = None, unit: str = ""):
        if closed not in ("both", "left", "right", "neither"):
            raise ValueError(f"closed must be 'both', 'left', 'right' or 'neither', not {closed!r}")
        self.low, self.high, self.closed, self.type, self.unit = low, high, closed, type, unit

    @property
    def _noun(self) -> str:
        return "an int" if self.type is int else "a number"

    def check(self, value: Any) -> bool:
        if not (_is_int(value) if self.type is int else _is_real(value)):
            return False
        lo_in, hi_in = self.closed in ("both", "left"), self.closed in ("both", "right")
        return ((self.low is None or value > self.low or (lo_in and value == self.low))
                and (self.high is None or value < self.high or (hi_in and value == self.high)))

    def describe(self) -> str:
        lo_in, hi_in = self.closed in ("both", "left"), self.closed in ("both", "right")
        if self.low is not None and self.high is not None:
            text = (f"{self._noun} in {'[' if lo_in else '('}{_number(self.low)}, {_number(self.high)}"
                    f"{']' if hi_in else ')'}")
        elif self.low is not None:
            text = f"{self._noun} {'>=' if lo_in else '>'} {_number(self.low)}"
        elif self.high is not None:
            text = f"{self._noun} {'<=' if hi_in else '<'} {_number(self.high)}"
        else:
            text = self._noun
        return f"{text} ({self.unit})" if self.unit else text

    def coerce(self, text: str) -> Any:
        return int(text) if self.type is int else float(text)

    def convert(self, value: Any) -> Any:
        return int(value) if self.type is int else float(value)

    @property
    def start(self) -> Optional[float]:
        """The smallest accepted value (an int's open bound moved in), for a form's number input."""
        if self.low is None or self.type is not int or self.closed in ("both", "left"):
            return self.low
        return math.floor(self.low) + 1

    @property
    def end(self) -> Optional[float]:
        """The largest accepted value, as :attr:`start`."""
        if self.high is None or self.type is not int or self.closed in ("both", "right"):
            return self.high
        return math.ceil(self.high) - 1

    def bad_values(self) -> list:
        step = 1 if self.type is int else 0.5
        out = [BAD, 1.5 if self.type is int else math.nan]
        out += [] if self.low is None else [self.low, self.low - step]
        out += [] if self.high is None else [self.high, self.high + step]
        return [v for v in out if not self.check(v)]

    def bind(self, tp: Any) -> "Interval":
        if self.type is not None:
            return self
        found = _numeric_types(tp)
        return Interval(self.low, self.high, closed=self.closed, type=int if found == {int} else float,
                        unit=self.unit)


def _numeric_types(tp: Any) -> set:
    if tp in (int, float):
        return {tp}
    return set().union(*(_numeric_types(a) for a in typing.get_args(tp) if a is not Ellipsis)) \
        if typing.get_args(tp) else set()


class Options(Constraint):
    """One of a set of strings: ``Options("adam", "sgd")``. A mapping among them stands for its keys, read each
    time (``Options("none", STALENESS_RULES)``: a registry filled as modules register methods)."""

    def __init__(self, *choices: Any):
        self._choices = choices

    @property
    def choices(self) -> list:  # type: ignore[override]
        out: list = []
        for c in self._choices:
            out += list(c) if isinstance(c, Mapping) else [c]
        return list(dict.fromkeys(out))

    def check(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.choices

    def describe(self) -> str:
        return f"one of {self.choices}"

    def hint(self, value: Any) -> str:
        close = difflib.get_close_matches(str(value), [str(c) for c in self.choices], n=1)
        return f" (did you mean {close[0]!r}?)" if close else ""


class Bool(Constraint):
    """``True`` or ``False`` (``--set`` reads true/false, yes/no, on/off, 1/0)."""

    choices = [False, True]

    def check(self, value: Any) -> bool:
        return isinstance(value, bool)

    def describe(self) -> str:
        return "a bool"

    def coerce(self, text: str) -> Any:
        word = text.strip().lower()
        if word not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            raise ValueError(text)
        return word in ("1", "true", "yes", "on")


class _Equals(Constraint):
    """Exactly one value (``None``, ``'auto'``, ``-1``): a member of :class:`OneOf` written as the value itself."""

    def __init__(self, value: Any):
        self.value, self.choices = value, [value]

    def check(self, value: Any) -> bool:
        return type(value) is type(self.value) and value == self.value

    def describe(self) -> str:
        return repr(self.value)

    def coerce(self, text: str) -> Any:
        if self.value is None:
            if text.strip().lower() in _NONE_WORDS:
                return None
        elif str(self.value) == text.strip():
            return self.value
        raise ValueError(text)


class OneOf(Constraint):
    """Any of ``members``: constraints, or plain values for themselves (``OneOf(None, "auto", Interval(1, None))``)."""

    def __init__(self, *members: Any):
        self.members = [m if isinstance(m, Constraint) else _Equals(m) for m in members]

    @property
    def choices(self) -> Optional[list]:  # type: ignore[override]
        found = [m.choices for m in self.members]
        return None if any(c is None for c in found) else [v for c in found for v in c]

    def _first(self, value: Any) -> Optional[Constraint]:
        return next((m for m in self.members if m.check(value)), None)

    def check(self, value: Any) -> bool:
        return self._first(value) is not None

    def describe(self) -> str:
        words = [m.describe() for m in self.members]
        return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"

    def coerce(self, text: str) -> Any:
        for member in self.members:
            try:
                value = member.coerce(text)
            except (TypeError, ValueError):
                continue
            if member.check(value):
                return value
        raise ValueError(text)

    def convert(self, value: Any) -> Any:
        member = self._first(value)
        return value if member is None else member.convert(value)

    def hint(self, value: Any) -> str:
        return next((h for h in (m.hint(value) for m in self.members) if h), "")

    def bad_values(self) -> list:
        return list(dict.fromkeys(v for m in self.members for v in m.bad_values() if not self.check(v)))

    def bind(self, tp: Any) -> "OneOf":
        return OneOf(*(m.bind(tp) for m in self.members))


class TupleOf(Constraint):
    """A tuple (a list is accepted and kept as a tuple) of ``min_len`` to ``max_len`` items, each ``item``;
    ``--set`` writes it ``10,5``."""

    def __init__(self, item: Any, *, min_len: int = 1, max_len: Optional[int] = None):
        self.item = item if isinstance(item, Constraint) else _Equals(item)
        self.min_len, self.max_len = min_len, max_len

    def check(self, value: Any) -> bool:
        return (isinstance(value, (tuple, list)) and len(value) >= self.min_len
                and (self.max_len is None or len(value) <= self.max_len) and all(self.item.check(v) for v in value))

    def describe(self) -> str:
        size = (f"a tuple of {self.min_len} to {self.max_len} items" if self.max_len is not None else
                "a non-empty tuple" if self.min_len == 1 else f"a tuple of at least {self.min_len} items")
        return f"{size}, each {self.item.describe()}"

    def coerce(self, text: str) -> Any:
        parts = [p.strip() for p in text.replace(";", ",").split(",") if p.strip()]
        return tuple(coerce(p, self.item, strict=True) for p in parts)

    def convert(self, value: Any) -> Any:
        return tuple(self.item.convert(v) for v in value)

    def bad_values(self) -> list:
        out = [BAD, ()] + [(v,) for v in self.item.bad_values() if v is not None]
        return [v for v in out if not self.check(v)]

    def bind(self, tp: Any) -> "TupleOf":
        args = [a for a in typing.get_args(_strip_optional(tp)) if a is not Ellipsis]
        return TupleOf(self.item.bind(args[0] if args else tp), min_len=self.min_len, max_len=self.max_len)


def coerce(text: str, constraint: Constraint, *, strict: bool = False) -> Any:
    """``text`` (a ``--set`` string or a form's value) read as ``constraint``'s type. Text that does not read
    is returned as it is (``strict``: ``ValueError``), so validation refuses it with the constraint's phrase."""
    try:
        return constraint.coerce(text)
    except (TypeError, ValueError):
        if strict:
            raise
        return text


def _strip_optional(tp: Any) -> Any:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1 else tp


def constraint_of(tp: Any) -> Optional[Constraint]:
    """The constraint an annotation declares: its ``Annotated`` constraint (bound to the type), a ``bool``'s
    :class:`Bool` or a ``Literal``'s :class:`Options` (``None`` allowed where ``Optional``); else ``None``."""
    if typing.get_origin(tp) is typing.Annotated:
        base, *extras = typing.get_args(tp)
        found = [e for e in extras if isinstance(e, Constraint)]
        return found[0].bind(base) if found else constraint_of(base)
    base = _strip_optional(tp)
    if base is bool:
        inner: Optional[Constraint] = Bool()
    elif typing.get_origin(base) is typing.Literal:
        inner = Options(*typing.get_args(base))
    else:
        return None
    return inner if base is tp else OneOf(None, inner)


def declared(cls: type) -> dict[str, Constraint]:
    """``{field: constraint}`` of a dataclass ``cls``, for the fields that declare one (cached per class).

    A subclass that re-declares a field with the same bare type, to change its default (``num_nodes: int =
    20000``), keeps the constraint of the class it inherits the field from."""
    cache = cls.__dict__.get("__constraints_cache__")
    if cache is None:
        hints = typing.get_type_hints(cls, include_extras=True)
        cache = {}
        for f in dataclasses.fields(cls):
            tp = hints.get(f.name, Any)
            c = constraint_of(tp)
            if c is None:
                c = next((declared(base)[f.name] for base in cls.__mro__[1:] if dataclasses.is_dataclass(base)
                          and f.name in declared(base) and _bare(typing.get_type_hints(base, include_extras=True)
                                                                 [f.name]) == tp), None)
            if c is not None and not f.name.startswith("_"):
                cache[f.name] = c
        type.__setattr__(cls, "__constraints_cache__", cache)
    return cache


def _bare(tp: Any) -> Any:
    return typing.get_args(tp)[0] if typing.get_origin(tp) is typing.Annotated else tp


def type_name(tp: Any) -> str:
    """A field's type as ``workbench stages`` prints it: ``int``, ``int or None``, ``tuple of int``."""
    tp = _bare(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        names = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(names) + (" or None" if type(None) in args else "")
    if origin is typing.Literal:
        return "str"
    if origin in (tuple, list):
        inner = [a for a in args if a is not Ellipsis]
        return f"{origin.__name__} of {type_name(inner[0])}" if inner else origin.__name__
    return getattr(tp, "__name__", str(tp).replace("typing.", ""))
