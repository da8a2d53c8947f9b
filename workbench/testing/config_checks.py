"""What every stage's ``Config`` must do, and the failure wrapper that names the stage.

Every check takes a stage (a class or an instance) or a bare ``Config`` class and raises
:class:`StageCheckFailed` (an ``AssertionError``) whose message names the stage, the check and what failed.

- :func:`check_config_defaults`: the defaults validate;
- :func:`check_config_rejects_bad_values`: every field with a declared constraint (:mod:`workbench.constraints`)
  refuses each of the constraint's :meth:`~workbench.constraints.Constraint.bad_values` (wrong type, out of range,
  unknown choice) with the one message template naming that field and saying the constraint (``The 'F' parameter
  of C must be <describe()>. Got ... instead.``); a typed field without one must refuse :data:`BAD` in its
  ``_validate``;
- :func:`check_config_round_trips`: the config round-trips through its ``--set`` strings;
- :func:`check_config_documented`: every field has an attribute docstring (``--help`` and the form's tooltips).

Example:
    >>> import dataclasses
    >>> from workbench._validation import Config
    >>> @dataclasses.dataclass(kw_only=True)
    ... class Knob(Config):
    ...     width: int = 2
    >>> check_config_defaults(Knob)
    >>> check_config_documented(Knob)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    workbench.testing.config_checks.StageCheckFailed: config Knob failed check_config_documented: Knob.width has no attribute docstring (help text)...
"""

from __future__ import annotations

import functools
import re
import typing
import unittest
from typing import Any, Callable

from workbench.constraints import BAD, declared

__all__ = ["StageCheckFailed", "stage_kind", "stage_label", "stage_check", "config_class", "typed_fields",
           "check_config_defaults", "check_config_rejects_bad_values", "check_config_round_trips",
           "check_config_documented", "CONFIG_CHECKS", "check_config", "BAD", "TEMPLATE", "bad_values"]

TEMPLATE = r"The '{field}' parameter of [\w.]+ must be .+\. Got .+ instead\."
"""The one message template of a refused setting (a regular expression, ``{field}`` filled in)."""


class StageCheckFailed(AssertionError):
    """A conformance check failed; the message names the stage, the check and what failed."""


def _is_config_class(obj: Any) -> bool:
    from workbench._validation import Config

    return isinstance(obj, type) and issubclass(obj, Config)


def _class(stage: Any) -> type:
    return stage if isinstance(stage, type) else type(stage)


def config_class(stage: Any) -> type:
    """The ``Config`` class of a stage (class or instance), or ``stage`` itself when it is a ``Config`` class."""
    if _is_config_class(stage):
        return stage
    if not isinstance(stage, type) and _is_config_class(type(stage)):
        return type(stage)
    return _class(stage).Config


def stage_kind(stage: Any) -> str:
    """The stage kind (registry name) of a stage class or instance: the registry holding it, else ``partition``
    for a :class:`~workbench.partition.base.Partitioner` (whose ``kind`` says edge- or vertex-cut), else its
    ``kind`` attribute."""
    from workbench.stages import REGISTRIES

    cls = _class(stage)
    name = getattr(cls, "name", "")
    for kind, reg in REGISTRIES.items():
        if name and reg.get(name) is cls:
            return kind
    from workbench.partition.base import Partitioner

    if issubclass(cls, Partitioner):
        return "partition"
    kind = getattr(cls, "kind", "")
    if not kind:
        raise TypeError(f"{cls.__qualname__} is not a stage: it has no 'kind' (one of {sorted(REGISTRIES)})")
    return kind


def stage_label(stage: Any) -> str:
    """How failures name a stage: ``partition method 'halves' (Halves)``, or ``config TrainLoopConfig``."""
    if _is_config_class(stage) or _is_config_class(type(stage)):
        return f"config {config_class(stage).__qualname__}"
    cls = _class(stage)
    try:
        kind = stage_kind(cls)
    except TypeError:
        kind = "stage"
    return f"{kind} method {getattr(cls, 'name', '')!r} ({cls.__qualname__})"


def stage_check(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator of a check ``fn(stage, **options)``: a failed assertion, or any error the stage raised, becomes a
    :class:`StageCheckFailed` naming the stage and the check (``unittest.SkipTest`` passes through)."""

    @functools.wraps(fn)
    def wrapper(stage: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(stage, *args, **kwargs)
        except (StageCheckFailed, unittest.SkipTest):
            raise
        except AssertionError as exc:
            raise StageCheckFailed(f"{stage_label(stage)} failed {fn.__name__}: {exc or 'an assertion failed'}") \
                from exc
        except Exception as exc:  # noqa: BLE001 - a stage that crashes fails the check, named
            raise StageCheckFailed(f"{stage_label(stage)} failed {fn.__name__}: it raised "
                                   f"{type(exc).__name__}: {exc}") from exc

    return wrapper


def typed_fields(cls: type) -> list[str]:
    """Fields of the ``Config`` class ``cls`` that must refuse a bad value: those with a declared constraint, and
    those typed int, float, bool, tuple or list (or ``Optional`` of one) without one."""
    hints, constraints, out = typing.get_type_hints(cls), declared(cls), []
    for name in cls.field_names():
        tp = hints[name]
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        base = args[0] if typing.get_origin(tp) is typing.Union and len(args) == 1 else tp
        if name in constraints or base in (int, float, bool) or typing.get_origin(base) in (tuple, list):
            out.append(name)
    return out


def bad_values(cls: type, field: str) -> list:
    """The values :func:`check_config_rejects_bad_values` sends to ``field``: its declared constraint's
    :meth:`~workbench.constraints.Constraint.bad_values`, else :data:`BAD`."""
    constraint = declared(cls).get(field)
    return constraint.bad_values() if constraint is not None else [BAD]


@stage_check
def check_config_defaults(stage: Any) -> None:
    """The default config validates (and ``validate()`` returns it)."""
    cfg = config_class(stage)()
    assert cfg.validate() is cfg, "Config().validate() must return the config"


@stage_check
def check_config_rejects_bad_values(stage: Any) -> None:
    """Every field with a declared constraint refuses each of its bad values with the one template naming the field
    and the constraint's phrase; a typed field without one refuses :data:`BAD` (its ``_validate`` must)."""
    from workbench._validation import ParamError

    cls = config_class(stage)
    constraints = declared(cls)
    for field in typed_fields(cls):
        for bad in bad_values(cls, field):
            try:
                cls(**{field: bad})
            except ParamError as exc:
                errors = exc.errors
            else:
                raise AssertionError(f"{cls.__qualname__}({field}={bad!r}) was accepted: "
                                     + (f"its constraint says {constraints[field].describe()!r}" if field in
                                        constraints else "declare a constraint or refuse it in _validate"))
            assert any(re.fullmatch(TEMPLATE.format(field=field), e) for e in errors), (
                f"{cls.__qualname__}({field}={bad!r}) was refused, but no message names {field!r} with the "
                f"template \"The '{field}' parameter of C must be .... Got ... instead.\": {errors}")
            if field in constraints:
                phrase = constraints[field].describe()
                assert any(f"must be {phrase}" in e for e in errors), (
                    f"{cls.__qualname__}({field}={bad!r}) was refused without its constraint {phrase!r}: {errors}")


@stage_check
def check_config_round_trips(stage: Any) -> None:
    """The default config, written as ``--set`` strings and read back, is the same config."""
    from workbench.compose import as_text

    cls = config_class(stage)
    cfg = cls()
    strings = {f: as_text(getattr(cfg, f)) for f in cls.field_names()}
    again = cfg.with_strings(strings)
    assert again.to_dict() == cfg.to_dict(), f"{strings} read back as {again.to_dict()}, not {cfg.to_dict()}"


@stage_check
def check_config_documented(stage: Any) -> None:
    """Every field has an attribute docstring (the ``--help`` text and the dashboard form's tooltip)."""
    cls = config_class(stage)
    docs = cls.field_docs()
    for name in cls.field_names():
        assert docs.get(name), f"{cls.__qualname__}.{name} has no attribute docstring (help text)"


CONFIG_CHECKS = (check_config_defaults, check_config_rejects_bad_values, check_config_round_trips,
                 check_config_documented)
"""The checks every stage's ``Config`` runs (and any bare ``Config`` class)."""


def check_config(config_cls: Any) -> None:
    """Every check of :data:`CONFIG_CHECKS` on a ``Config`` class (or a stage's ``Config``)."""
    for check in CONFIG_CHECKS:
        check(config_cls)
