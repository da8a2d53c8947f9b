"""Parameter validation with one message template, and validated config dataclasses.

Every user-facing error reads the same way (after scikit-learn)::

    The 'num_parts' parameter of METISPartitioner must be an int in [1, num_nodes=34]. Got 50 instead.

Configs collect *all* their errors before raising, so a user fixes a run in one go.
"""

from __future__ import annotations

import dataclasses
import difflib
import numbers
import types
import typing
from typing import Any, Callable, Iterable, Mapping

from workbench.constraints import coerce, declared

__all__ = [
    "ParamError",
    "param_error",
    "check_int",
    "check_float",
    "check_choice",
    "Config",
    "ErrorCollector",
    "coerce_field",
]


class ParamError(ValueError):
    """A user-supplied parameter is invalid. ``errors`` holds one message per bad parameter."""

    def __init__(self, errors: Iterable[str]):
        self.errors = list(errors)
        super().__init__(self.errors[0] if len(self.errors) == 1 else
                         f"{len(self.errors)} invalid parameters:\n  - " + "\n  - ".join(self.errors))


def param_error(name: str, owner: str, constraint: str, value: Any) -> str:
    """Format the one message template. Returns the message (callers raise or collect it)."""
    return f"The {name!r} parameter of {owner} must be {constraint}. Got {value!r} instead."


class ErrorCollector:
    """Collect parameter errors, then raise them all at once.

    Example:
        >>> errs = ErrorCollector("MyStage")
        >>> errs.check(False, "k", "positive", -1)
        >>> errs.raise_if_any()
        Traceback (most recent call last):
        ...
        workbench._validation.ParamError: The 'k' parameter of MyStage must be positive. Got -1 instead.
    """

    def __init__(self, owner: str):
        self.owner = owner
        self.errors: list[str] = []

    def check(self, ok: bool, name: str, constraint: str, value: Any) -> None:
        if not ok:
            self.errors.append(param_error(name, self.owner, constraint, value))

    def add(self, message: str) -> None:
        self.errors.append(message)

    def raise_if_any(self) -> None:
        if self.errors:
            raise ParamError(self.errors)


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def check_int(value: Any, name: str, owner: str, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` if it is an int within ``[low, high]``, else raise :class:`ParamError`."""
    lo = "-inf" if low is None else low
    hi = "inf" if high is None else high
    if not _is_int(value) or (low is not None and value < low) or (high is not None and value > high):
        raise ParamError([param_error(name, owner, f"an int in [{lo}, {hi}]", value)])
    return int(value)


def check_float(value: Any, name: str, owner: str, low: float | None = None, high: float | None = None) -> float:
    """Return ``value`` as float if it is a real number within ``[low, high]``."""
    lo = "-inf" if low is None else low
    hi = "inf" if high is None else high
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok and value != value:  # NaN
        ok = False
    if not ok or (low is not None and value < low) or (high is not None and value > high):
        raise ParamError([param_error(name, owner, f"a number in [{lo}, {hi}]", value)])
    return float(value)


def check_choice(value: Any, name: str, owner: str, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``; the error lists them (and the closest match)."""
    choices = list(choices)
    if value not in choices:
        hint = difflib.get_close_matches(str(value), choices, n=1)
        extra = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise ParamError([param_error(name, owner, f"one of {choices}{extra}", value)])
    return value


# --------------------------------------------------------------------------------------------------------
# Config dataclasses
# --------------------------------------------------------------------------------------------------------


def _field_doc(cls: type, name: str) -> str:
    """Attribute docstrings (a string literal right after the field) become field help."""
    return getattr(cls, "__field_docs__", {}).get(name, "")


def _collect_field_docs(cls: type) -> dict[str, str]:
    import ast
    import inspect
    import textwrap

    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            src = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        tree = ast.parse(src)
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for prev, node in zip(body, body[1:]):
            if (isinstance(prev, ast.AnnAssign) and isinstance(prev.target, ast.Name)
                    and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)):
                docs[prev.target.id] = " ".join(node.value.value.split())
    return docs


def _coerce(text: str, tp: Any) -> Any:
    """Convert a command-line string to a field's declared type."""
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if text.lower() in ("none", "null") and len(args) < len(typing.get_args(tp)):
            return None
        for arg in args:
            try:
                return _coerce(text, arg)
            except (TypeError, ValueError):
                continue
        raise ValueError(text)
    if origin is typing.Literal:
        return text
    if origin in (tuple, list):
        (inner, *_) = typing.get_args(tp) or (str,)
        parts = [p for p in text.replace(";", ",").split(",") if p.strip()]
        return origin(_coerce(p.strip(), inner) for p in parts)
    if tp is bool:
        low = text.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValueError(text)
    if tp is int:
        return int(text)
    if tp is float:
        return float(text)
    return text


def coerce_field(cls: type, name: str, text: str) -> Any:
    """A ``--set`` string as a value of field ``name`` of config class ``cls``: read by the field's declared
    constraint (text it cannot read is kept, for :meth:`Config.validate` to refuse with the constraint's
    phrase), else by its type. Raises ``ValueError("of type T")`` for an unconstrained field's bad text."""
    constraint = declared(cls).get(name)
    if constraint is not None:
        return coerce(text, constraint)
    tp = typing.get_type_hints(cls)[name]
    try:
        return _coerce(text, tp)
    except (TypeError, ValueError):
        raise ValueError(f"of type {getattr(tp, '__name__', tp)}") from None


@dataclasses.dataclass(kw_only=True)
class Config:
    """Base class of every stage and recipe config.

    Subclasses are ``@dataclass(kw_only=True)`` with an attribute docstring under each field
    (it becomes ``--help`` text and the widget tooltip) and a constraint in each field's annotation
    (``epochs: Annotated[int, Interval(1, None)]``, :mod:`workbench.constraints`), which ``validate()``
    checks; :meth:`_validate` adds the cross-field errors to an :class:`ErrorCollector`. ``validate()`` raises
    all of them at once.
    """

    def __post_init__(self) -> None:
        self.validate()

    # -- validation ---------------------------------------------------------------------------------------
    def validate(self) -> "Config":
        """Check every field's declared constraint (:mod:`workbench.constraints`), then, when all hold, the
        cross-field checks of :meth:`_validate`; raise all errors at once. Accepted values are kept in their
        canonical form (an int given to a float field becomes a float, a list given to a tuple field a tuple)."""
        errs = ErrorCollector(type(self).__qualname__)
        for name, constraint in declared(type(self)).items():
            value = getattr(self, name)
            if not constraint.check(value):
                errs.check(False, name, constraint.describe() + constraint.hint(value), value)
                continue
            canonical = constraint.convert(value)
            if canonical is not value:
                object.__setattr__(self, name, canonical)
        if not errs.errors:   # cross-field checks may assume every field is of its type
            self._validate(errs)
        errs.raise_if_any()
        return self

    def _validate(self, errs: ErrorCollector) -> None:  # pragma: no cover - default: nothing to check
        """Cross-field checks (and checks that need a registry or the environment), after every field's own."""

    # -- introspection -------------------------------------------------------------------------------------
    @classmethod
    def field_docs(cls) -> dict[str, str]:
        if "__field_docs_cache__" not in cls.__dict__:
            cls.__field_docs_cache__ = _collect_field_docs(cls)
        return cls.__field_docs_cache__

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")]

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Config):
                v = {"__type__": type(v).__qualname__, **v.to_dict()}
            elif isinstance(v, tuple):
                v = list(v)
            out[f.name] = v
        return out

    def replace(self, **changes: Any) -> "Config":
        """A copy with ``changes`` applied (validated). Unknown names are an error listing the valid ones."""
        self._check_names(changes)
        return dataclasses.replace(self, **changes)

    @classmethod
    def _check_names(cls, names: Iterable[str]) -> None:
        valid = cls.field_names()
        errs = ErrorCollector(cls.__qualname__)
        for name in names:
            if name not in valid:
                hint = difflib.get_close_matches(name, valid, n=1)
                extra = f" (did you mean {hint[0]!r}?)" if hint else ""
                errs.add(f"{cls.__qualname__} has no option {name!r}{extra}. Valid options: {', '.join(valid)}.")
        errs.raise_if_any()

    def with_strings(self, settings: Mapping[str, str]) -> "Config":
        """Apply ``NAME=VALUE`` strings (from ``--set`` or a form), converting to each field's type."""
        self._check_names(settings)
        errs = ErrorCollector(type(self).__qualname__)
        changes = {}
        for name, text in settings.items():
            try:
                changes[name] = coerce_field(type(self), name, str(text))
            except (TypeError, ValueError) as exc:
                errs.check(False, name, str(exc), text)
        errs.raise_if_any()
        return dataclasses.replace(self, **changes)

    # -- notebook repr -------------------------------------------------------------------------------------
    def _repr_html_(self) -> str:
        docs = self.field_docs()
        rows = "".join(
            f"<tr><td style='text-align:left'><code>{f.name}</code></td>"
            f"<td style='text-align:left'>{getattr(self, f.name)!r}</td>"
            f"<td style='text-align:left;color:#666'>{docs.get(f.name, '')}</td></tr>"
            for f in dataclasses.fields(self))
        return (f"<b>{type(self).__name__}</b><table><tr><th>field</th><th>value</th><th>help</th></tr>"
                f"{rows}</table>")


def parse_settings(pairs: Iterable[str], owner: str = "--set") -> dict[str, str]:
    """Parse ``["a=1", "b=x"]`` into a dict; a pair without ``=``, or a name given twice with two values, is a
    :class:`ParamError` (the second value would silently win).

    Example:
        >>> parse_settings(["train.epochs=3", "model.hidden=16", "train.epochs=3"])
        {'train.epochs': '3', 'model.hidden': '16'}
        >>> parse_settings(["train.epochs=3", "train.epochs=5"])
        Traceback (most recent call last):
        ...
        workbench._validation.ParamError: The 'train.epochs' parameter of --set must be given once (also given as train.epochs=3). Got '5' instead.
    """
    out: dict[str, str] = {}
    errs = ErrorCollector(owner)
    for pair in pairs:
        name, sep, value = pair.partition("=")
        errs.check(bool(sep and name), "setting", "of the form NAME=VALUE", pair)
        if sep and name:
            name, value = name.strip(), value.strip()
            errs.check(out.get(name, value) == value, name, f"given once (also given as {name}={out.get(name)})",
                       value)
            out[name] = value
    errs.raise_if_any()
    return out


Validator = Callable[[Any], bool]
