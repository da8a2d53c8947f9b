"""What ``workbench stages`` prints: every registered method of every stage kind with its options
(:func:`describe_stages`; where a step's batch comes from, :func:`describe_batches`), and every cache, exchange,
schedule, sync, loss, evaluate and step method against every sample method (:func:`composition_matrix`,
``--matrix``). Read from the registries and the run config's declared constraints, so a method registered tomorrow
is listed the day it is registered.

Example:
    >>> print(describe_stages(short=True).splitlines()[-1])
      step.method: binned | whole_part
"""

from __future__ import annotations

import typing

from workbench._validation import ParamError
from workbench.compose import OPTIONAL_SECTIONS, RunConfig, as_text, load_stage_modules
from workbench.composition import check_composition, unavailable_methods, unmet_needs
from workbench.constraints import declared, type_name
from workbench.stages import REGISTRIES, STAGE_SECTIONS, registry

__all__ = ["describe_stages", "describe_batches", "composition_matrix", "format_matrix"]


def describe_stages(short: bool = False) -> str:
    """The registered methods of every stage kind with their options (``workbench stages``, ``--help``);
    ``short``: one line per stage kind, the method names only."""
    load_stage_modules()
    from workbench.train.loop import TrainLoopConfig

    if short:
        return "\n".join(f"  {section}.method: {' | '.join(RunConfig.method_choices(section)) or '(none registered)'}"
                         for section in STAGE_SECTIONS)
    lines = []
    for section, kind in STAGE_SECTIONS.items():
        reg = REGISTRIES.get(kind) or registry(kind)
        names = sorted(reg)
        none = " (or none)" if section in OPTIONAL_SECTIONS else ""
        lines.append(f"{section}.method: {', '.join(names) if names else '(none registered)'}{none}")
        for name in names:
            cfg = reg[name].Config
            default = cfg()
            opts = [f"{section}.{f}={as_text(getattr(default, f))}" for f in cfg.field_names()]
            lines.append(f"  {name}: {' '.join(opts) if opts else '(no options)'}")
            lines += _field_lines(cfg)
    lines.append("train: " + " ".join(f"train.{f}={as_text(getattr(TrainLoopConfig(), f))}"
                                      for f in TrainLoopConfig.field_names()))
    return "\n".join(lines + _field_lines(TrainLoopConfig) + describe_batches())


def describe_batches() -> list[str]:
    """Where a step's batch comes from, one line per trainer record (:data:`~workbench.composition.TRAINERS`): not
    a section of its own, it follows the ``sample``, ``schedule`` and ``sync`` methods (``workbench stages
    batches``)."""
    from workbench.composition import TRAINERS

    lines = ["batches: chosen by sample.method, schedule.method and sync.method (the trainer record)"]
    for key, spec in TRAINERS.items():
        named = {section: "|".join(name for name, cls in sorted(registry(section).items())
                                   if getattr(cls, "trains_with", None) == key) for section in ("sample", "sync")}
        named = [f"{section}.method={names}" for section, names in named.items() if names]
        how = spec.chosen_by + (f" ({', '.join(named)})" if named else "")
        lines.append(f"  {key}: {spec.batches or spec.trainer}; chosen by {how}")
        lines.append(f"      provides: {', '.join(sorted(spec.provides))}")
    return lines


def _field_lines(cls: type) -> list[str]:
    """``      FIELD (TYPE; CONSTRAINT): HELP`` for every field of a config class (``workbench stages``)."""
    docs, hints, constraints = cls.field_docs(), typing.get_type_hints(cls), declared(cls)
    kinds = {f: type_name(hints[f]) + ("" if f not in constraints or hints[f] is bool
                                       else f"; {constraints[f].describe()}") for f in cls.field_names()}
    return [f"      {f} ({kinds[f]}): {docs.get(f, '')}".rstrip(": ") for f in cls.field_names()]


def composition_matrix() -> list[dict]:
    """Every method of the optional stage kinds (cache, exchange, schedule) and of sync, loss, evaluate and step under
    every sample method (and none), on the recipes' defaults otherwise: one row per cell with ``status`` ``composes``
    or ``refused`` and, when refused, ``why`` (what the method lacks). ``workbench stages --matrix`` prints it.

    Example:
        >>> rows = composition_matrix()
        >>> {r["sample"]: r["status"] for r in rows if (r["section"], r["method"]) == ("schedule", "fifo")
        ...  and r["sample"] in ("none", "neighbor", "psc")}
        {'none': 'refused', 'neighbor': 'composes', 'psc': 'refused'}
    """
    load_stage_modules()
    rows = []
    for sample in RunConfig.method_choices("sample"):
        base = RunConfig.compose(sample=None if sample == "none" else sample)   # the exchange follows the sample
        for section in ("cache", "exchange", "schedule", "sync", "loss", "evaluate", "step"):
            for method in RunConfig.method_choices(section):
                row = {"sample": sample, "section": section, "method": method, "status": "composes", "why": ""}
                unmet, cfg = [], None
                try:
                    cfg = base.replace(**{section: None if method == "none" else method})
                    unmet = unmet_needs(cfg)[1]
                    check_composition(cfg)
                except ParamError as exc:   # by the config itself (a cache with sample=none) or by the check
                    why = [f"{s}.method={m} needs {', '.join(lack)}" for s, m, lack in unmet]
                    why += [f"{s}.method={m}: {reason}" for s, m, reason in (unavailable_methods(cfg) if cfg else ())]
                    why = "; ".join(why) or str(exc).split(" must be ", 1)[-1].split(". Got ")[0]
                    row.update(status="refused", why=why)
                rows.append(row)
    return rows


def format_matrix(rows: list[dict]) -> str:
    """The matrix as text: one line per cell, grouped by sample method."""
    width = max(len(f"{r['section']}.method={r['method']}") for r in rows)
    lines, last = [], None
    for r in rows:
        if r["sample"] != last:
            lines.append(f"sample.method={r['sample']}")
            last = r["sample"]
        cell = f"{r['section']}.method={r['method']}"
        lines.append(f"  {cell:<{width}}  {r['status']}" + (f": {r['why']}" if r["why"] else ""))
    return "\n".join(lines)
