"""Settings on a :class:`~workbench.compose.RunConfig`: how ``replace``, ``with_strings`` and ``compose`` read
names and values (the config itself, its sections and names are :mod:`workbench.compose`; its module docstring
lists the forms a setting may take).

:func:`apply_settings` sorts the settings into top-level fields, method switches, section fields (dotted names
and section dicts) and the :data:`SHORTHANDS` ``epochs`` and ``seed``; refuses any other name without a section,
naming the dotted names it could mean; switches a section's method (:func:`~workbench.stages.switch_config`
keeps the fields of the same name); sets and, for strings, converts each field; then applies the
settings that follow others (:data:`DERIVED_RULES`, each noted in :meth:`~workbench.compose.RunConfig.notes`):
the layer count follows the fan-outs (``model.num_layers`` from ``sample.fanouts``) and the exchange follows a
switch of the sampler or the sync method. Every unknown name
and bad value is reported at once (:class:`~workbench._validation.ParamError`), with the valid names and the
closest match.

Example:
    >>> from workbench.compose import RunConfig
    >>> cfg = apply_settings(RunConfig(), {"partition": "random", "train.epochs": "3"}, strings=True)
    >>> cfg.method("partition"), cfg.train.epochs
    ('random', 3)
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Callable, Mapping, Optional

from workbench._validation import Config, ErrorCollector, ParamError, coerce_field, param_error
from workbench.composition import trainer_for
from workbench.stages import STAGE_SECTIONS, registry, switch_config

__all__ = ["apply_settings", "settable", "as_text", "NONE", "SHORTHANDS", "OPTIONAL_SECTIONS", "DerivedRule",
           "DERIVED_RULES"]

SHORTHANDS = ("epochs", "seed")
"""The names that need no section: ``epochs`` is ``train.epochs``; ``seed`` seeds every section that has a
seed (the weights, the partitioner, the sampler, ...). The CLI's ``--epochs`` and ``--seed``."""

OPTIONAL_SECTIONS = ("sample", "cache", "exchange", "schedule")
"""Sections that may be empty (method ``none``)."""
NONE = "none"


def as_text(value: Any) -> str:
    """A value as the ``--set`` syntax writes it (``none``, ``true``, ``10,5``)."""
    if value is None:
        return NONE
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(as_text(v) for v in value)
    return str(value)


def settable(sections: dict) -> list[str]:
    """The dotted names of a config with these sections (``graph``, ``partition.method``, ...)."""
    out = ["graph", "num_parts"]
    for section, cfg in sections.items():
        if section in STAGE_SECTIONS:
            out.append(f"{section}.method")
        if cfg is not None:
            out += [f"{section}.{f}" for f in type(cfg).field_names()]
    return out


def apply_settings(run: Any, settings: Mapping[str, Any], *, strings: bool) -> Any:
    """A copy of ``run`` (a :class:`~workbench.compose.RunConfig`) with ``settings`` applied: Python values, or
    ``NAME=VALUE`` strings when ``strings``; every error reported at once (:class:`ParamError`)."""
    errs = ErrorCollector(type(run).__name__)
    top: dict[str, Any] = {}
    methods: dict[str, tuple[str, Any]] = {}          # section -> (name used, method or Config or None)
    fields: dict[str, dict[str, Any]] = {}             # section -> {field: value}
    shorthands: list[tuple[str, Any]] = []
    given: dict[str, tuple[str, Any]] = {}             # dotted name -> (name it was given as, value)

    def once(dotted: str, used: str, value: Any) -> bool:
        """False (an error) when ``dotted`` was given before with another value: one of the two would be lost."""
        first = given.setdefault(dotted, (used, value))
        same = first[1] is value or _same(first[1], value)
        errs.check(same, used, f"given once: {dotted} is also given as {first[0]}={first[1]!r}", value)
        return same

    for name, value in settings.items():
        section, dot, field = name.partition(".")
        if dot:
            if section not in run.section_names():
                _unknown(run, errs, name)
            elif section in STAGE_SECTIONS and field == "method":
                if once(name, name, value):
                    methods[section] = (name, value)
            elif once(name, name, value):
                fields.setdefault(section, {})[field] = value
        elif name in ("graph", "num_parts"):
            top[name] = value
        elif name in run.section_names() and isinstance(value, Mapping):
            for key, item in value.items():
                if key == "method" and name in STAGE_SECTIONS:
                    if once(f"{name}.method", f"{name}['method']", item):
                        methods[name] = (f"{name}.method", item)
                elif once(f"{name}.{key}", f"{name}[{key!r}]", item):
                    fields.setdefault(name, {})[str(key)] = item
        elif name in STAGE_SECTIONS:
            if once(f"{name}.method", name, value):
                methods[name] = (name, value)
        elif name == "train":
            if isinstance(value, Config):
                top["train"] = value
            else:
                errs.add(param_error("train", type(run).__name__, "a TrainLoopConfig or a dict of train settings "
                                     "({'epochs': 3})", value))
        else:   # a shorthand, or a flat name: refused below, naming the dotted names it could mean
            shorthands.append((name, value))
    new = {s: getattr(run, s) for s in run.section_names()}
    if "train" in top:
        new["train"] = top.pop("train")
    chosen = dict(run._methods)
    for section, (used, value) in methods.items():
        new[section], name = _switch(run, errs, section, used, new[section], value)
        chosen.pop(section, None)
        if name is not None:
            chosen[section] = name
    for name, value in shorthands:   # a section's own setting wins over ``seed``; ``epochs`` is one setting
        for section in _shorthand_sections(run, name, new, errs, value):
            if name == "epochs":
                once(f"{section}.{name}", name, value)
            fields.setdefault(section, {}).setdefault(name, value)
    for section, changes in fields.items():
        new[section] = _set_fields(run, errs, section, new[section], changes, strings)
    derived = _derive(_Given(run, errs, new, methods, fields, chosen))
    if strings:
        top = {name: value if name == "graph" else coerce_field(type(run), name, str(value))
               for name, value in top.items()}
    errs.raise_if_any()
    return dataclasses.replace(run, **top, **new, _methods=chosen, _derived=derived)


def _same(a: Any, b: Any) -> bool:
    """Whether two given values are the same setting (``3`` and ``"3"`` are; a failed comparison is not)."""
    try:
        return bool(a == b) or str(a) == str(b)
    except Exception:  # noqa: BLE001 - arrays and the like: not the same
        return False


@dataclasses.dataclass
class _Given:
    """What a :class:`DerivedRule` sees: the config before, the errors so far, the new sections and what
    these settings gave (method switches, section fields, the method names chosen)."""

    run: Any
    errs: ErrorCollector
    new: dict
    methods: dict
    fields: dict
    chosen: dict

    def given(self, section: str, field: str) -> bool:
        """Whether these settings give ``section.field``: the field, or a whole ``Config``."""
        return field in self.fields.get(section, {}) or isinstance(self.methods.get(section, (None, None))[1],
                                                                   Config)

    def name_of(self, section: str) -> Optional[str]:
        """The method the new settings chose for ``section`` (None: empty)."""
        cfg = self.new[section]
        return None if cfg is None else self.chosen.get(section) or registry(STAGE_SECTIONS[section]).name_of(cfg)


@dataclasses.dataclass(frozen=True)
class DerivedRule:
    """A setting that follows others when these settings do not give it; the run notes it
    (:meth:`~workbench.compose.RunConfig.notes`: ``TARGET=VALUE (from SOURCE)``)."""

    target: str
    """The dotted name the rule sets (``model.num_layers``)."""
    overridden: Callable[[_Given], bool]
    """Whether these settings set ``target`` themselves: its earlier note is dropped."""
    derive: Callable[[_Given], Optional[str]]
    """Sets ``target`` in the new sections when it follows; returns the setting it followed (the note's
    source), else None."""


def _layers_overridden(g: _Given) -> bool:
    return g.given("model", "num_layers") and getattr(g.new["model"], "num_layers", None) != getattr(
        g.run.model, "num_layers", None)


def _layers_from_fanouts(g: _Given) -> Optional[str]:
    """DGL's examples take the number of layers from the fan-outs: when these settings give
    ``sample.fanouts`` and not ``model.num_layers``, the model gets one layer per fan-out; when they give
    both, they must agree."""
    fanouts, model = getattr(g.new["sample"], "fanouts", None), g.new["model"]
    if not g.given("sample", "fanouts") or not isinstance(fanouts, tuple) or not hasattr(model, "num_layers"):
        return None
    if g.given("model", "num_layers"):
        if model.num_layers != len(fanouts):
            g.errs.add(param_error("sample.fanouts", type(g.run).__name__, f"one fan-out per model layer, as "
                                   f"model.num_layers={model.num_layers} was also set (set only sample.fanouts "
                                   "and the layer count follows it)", fanouts))
        return None
    if model.num_layers == len(fanouts):
        return None
    try:
        g.new["model"] = dataclasses.replace(model, num_layers=len(fanouts))
    except ParamError as exc:
        g.errs.errors.extend(f"{e} (model.num_layers is taken from sample.fanouts={as_text(fanouts)})"
                             for e in exc.errors)
        return None
    return "sample.fanouts"


def _exchange_overridden(g: _Given) -> bool:
    return "exchange" in g.methods and g.run.method("exchange") != (g.name_of("exchange") or NONE)


def _exchange_follows_sample(g: _Given) -> Optional[str]:
    """When these settings switch the sample or sync method and give no exchange, an exchange that the new
    program cannot use becomes that program's ``default_exchange`` (full-graph training ``halo``,
    edge sampling ``prefetch``, mini-batch training none). An exchange given in the same settings is never
    replaced: :func:`~workbench.composition.check_composition` judges it."""
    if not {"sample", "sync"} & set(g.methods) or "exchange" in g.methods or "exchange" in g.fields:
        return None
    try:
        program = trainer_for(g.name_of("sample"), scheduled=g.new.get("schedule") is not None,
                              sync=g.name_of("sync"))
    except ParamError:
        return None
    exchange = g.name_of("exchange")
    cls = registry("exchange").get(exchange) if exchange else None
    if (cls is not None and set(cls.requires) <= set(program.provides)) or (
            exchange is None and program.default_exchange is None):
        return None
    target = program.default_exchange
    g.new["exchange"] = registry("exchange").config_class(target)() if target else None
    g.chosen.pop("exchange", None)
    if target:
        g.chosen["exchange"] = target
    return "sample.method" if "sample" in g.methods else "sync.method"


DERIVED_RULES: list[DerivedRule] = [
    DerivedRule("model.num_layers", _layers_overridden, _layers_from_fanouts),
    DerivedRule("exchange.method", _exchange_overridden, _exchange_follows_sample),
]
"""The settings that follow others, applied in this order after the settings' own fields are set."""


def _derive(g: _Given) -> dict:
    """Apply :data:`DERIVED_RULES`; returns the new ``_derived`` (dotted name -> the setting it followed)."""
    derived = dict(g.run._derived)
    for rule in DERIVED_RULES:
        if rule.overridden(g):
            derived.pop(rule.target, None)   # the user's value replaces the derived one
        source = rule.derive(g)
        if source is not None:
            derived[rule.target] = source
    return derived


def _switch(run: Any, errs: ErrorCollector, section: str, used: str, current: Any,
            value: Any) -> tuple[Any, Optional[str]]:
    """``(the section's new config, the method name chosen or None)``."""
    if isinstance(value, Config) or (value is None and section in OPTIONAL_SECTIONS):
        return value, None
    choices = run.method_choices(section)
    name = str(value)
    current_name = run.method(section) if current is getattr(run, section) else None
    if name not in choices:
        hint = difflib.get_close_matches(name, choices, n=1)
        extra = f" (did you mean {hint[0]!r}?)" if hint else ""
        errs.add(param_error(used, type(run).__name__, f"one of {choices}{extra}", value))
        return current, current_name
    if name == NONE:
        return None, None
    if current is not None and current_name == name:
        return current, name
    try:
        return switch_config(current, registry(STAGE_SECTIONS[section]).config_class(name)), name
    except ParamError as exc:
        errs.errors.extend(exc.errors)
        return current, current_name


def _shorthand_sections(run: Any, name: str, new: dict, errs: ErrorCollector, value: Any) -> list[str]:
    """The sections a shorthand sets (``epochs``: ``train``; ``seed``: every section that has a seed); any
    other name without a section is refused, naming the dotted names it could mean."""
    if name == "epochs":
        return ["train"]
    have = [s for s, cfg in new.items() if cfg is not None and name in type(cfg).field_names()]
    if name == "seed":
        return have
    could = [f"{s}.{name}" for s in have]
    if not could:   # a field of a method not chosen: name the section and the methods that have it
        for section, kind in STAGE_SECTIONS.items():
            methods = [m for m, stage in sorted(registry(kind).items()) if name in stage.Config.field_names()]
            if methods:
                could.append(f"{section}.{name} (with {section}.method={' or '.join(methods)})")
    if could:
        write = f": write {could[0]}" if len(could) == 1 else f": write one of {', '.join(could)}"
    else:
        dotted = settable(new)
        hint = difflib.get_close_matches(name, ["graph", "num_parts", *run.section_names(), *SHORTHANDS], n=1)
        if not hint:   # a misspelt field: the dotted name of the closest one
            field = difflib.get_close_matches(name, [v.rpartition(".")[2] for v in dotted], n=1)
            hint = [v for v in dotted if field and v.rpartition(".")[2] == field[0]][:1]
        write = f" (did you mean {hint[0]!r}?)" if hint else ""
    errs.add(param_error(name, type(run).__name__, f"a section, a dotted name or a shorthand "
                         f"({', '.join(SHORTHANDS)}){write}", value))
    return []


def _unknown(run: Any, errs: ErrorCollector, name: str, new: Optional[dict] = None) -> None:
    field = name.rpartition(".")[2]
    elsewhere = [f"{section}.method={method}" for section, kind in STAGE_SECTIONS.items()
                 for method, stage in sorted(registry(kind).items()) if field in stage.Config.field_names()]
    valid = settable(run.sections() if new is None else new)
    hint = difflib.get_close_matches(name, valid, n=1) or difflib.get_close_matches(
        name, [v.rpartition(".")[2] for v in valid], n=1)
    extra = f" (did you mean {hint[0]!r}?)" if hint else ""
    where = f" It is an option of {', '.join(elsewhere)}: choose that method first." if elsewhere else ""
    errs.add(f"{type(run).__name__} has no option {name!r}{extra}.{where} Valid options: {', '.join(valid)}.")


def _set_fields(run: Any, errs: ErrorCollector, section: str, cfg: Any, changes: dict, strings: bool) -> Any:
    if cfg is None:
        errs.add(param_error(f"{section}.method", type(run).__name__,
                             f"set (one of {run.method_choices(section)[1:]}) before {section} options "
                             f"({', '.join(sorted(changes))})", NONE))
        return cfg
    cls = type(cfg)
    valid = cls.field_names()
    unknown = [f for f in changes if f not in valid]
    for f in unknown:
        _unknown(run, errs, f"{section}.{f}")
    changes = {f: v for f, v in changes.items() if f in valid}
    if strings:
        coerced = {}
        for f, text in changes.items():
            try:
                coerced[f] = coerce_field(cls, f, str(text))
            except (TypeError, ValueError) as exc:
                errs.add(param_error(f"{section}.{f}", cls.__qualname__, str(exc), text))
        changes = coerced
    if not changes:
        return cfg
    try:
        return dataclasses.replace(cfg, **changes)
    except ParamError as exc:
        errs.errors.extend(exc.errors)
        return cfg
