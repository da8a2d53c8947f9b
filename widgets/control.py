"""Run control: pick a recipe, a graph, workers, a runner and the recipe's options; start and stop runs.

The option widgets are generated from the recipe config's dataclass fields: their declared constraints
(:mod:`workbench.constraints`) give a ``Select`` its choices and a number input its range, the fields' attribute
docstrings (``Config.field_docs()``) the tooltips. A composed run config (:class:`workbench.compose.RunConfig`)
gets one group per stage: a method choice listing the stage registry's methods (read when the form is
drawn, so a newly registered method appears with no edit here) and the chosen method's fields, named
``STAGE.FIELD`` as on the command line; switching the method redraws the group. Every value goes
through ``config.with_strings`` and ``config.build()``, so the form refuses exactly what the command line
refuses, with the same message; the page never shows a traceback.

Example:
    >>> from workbench._validation import Config
    >>> import dataclasses
    >>> @dataclasses.dataclass(kw_only=True)
    ... class Demo(Config):
    ...     epochs: int = 3
    ...     '''Training epochs.'''
    >>> form = RunControl(recipes={"demo": Demo}, launcher=lambda *a, **k: None)
    >>> form.settings()
    {'epochs': '3'}
"""

from __future__ import annotations

import dataclasses
import html
import importlib
import inspect
import threading
import typing
from typing import Any, Callable, Optional

import panel as pn

from widgets.offline import Viewer
from workbench._validation import Config, ParamError
from workbench.constraints import Constraint, Interval, declared

__all__ = ["RunControl", "discover_recipes", "config_widgets", "section_widgets", "RUNNERS"]

RUNNERS = ["local", "dask", "single"]

Launcher = Callable[..., Any]


def discover_recipes() -> dict[str, Callable[[], Config]]:
    """Recipe name -> function returning a config, named as ``workbench run`` names them.

    ``recipes/sancus.py:recipe`` is ``sancus``, its variant ``epoch_fixed`` is ``sancus:epoch_fixed``.
    Names them as :mod:`workbench.runtime.recipes` does; empty when the ``recipes`` package is not importable
    (the dashboard started outside the repository).
    """
    from workbench.runtime.recipes import available_recipes, recipe_variants

    out: dict[str, Callable[[], Config]] = {}
    for mod_name in available_recipes():
        try:
            mod = importlib.import_module(f"recipes.{mod_name}")
        except Exception:  # a broken recipe must not hide the others
            continue
        for fname in recipe_variants(mod):
            fn = getattr(mod, fname)
            if any(p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                   for p in inspect.signature(fn).parameters.values()):
                continue
            out[mod_name if fname == "recipe" else f"{mod_name}:{fname}"] = fn
    return out


def _is_composed(config: Any) -> bool:
    return callable(getattr(config, "sections", None)) and callable(getattr(config, "method_choices", None))


def section_widgets(config: Any, section: str) -> dict[str, pn.widgets.Widget]:
    """The widgets of one section of a composed run config: ``SECTION.method`` (a choice of the registered
    methods) and ``SECTION.FIELD`` for each field of the chosen method."""
    out: dict[str, pn.widgets.Widget] = {}
    cfg = getattr(config, section)
    if section in config.stage_sections():
        choices, method = config.method_choices(section), config.method(section)
        doc = type(config).field_docs().get(section, "")
        out[f"{section}.method"] = pn.widgets.Select(
            label=f"{section}.method", options=choices, value=method if method in choices else None,
            description=doc or None, sizing_mode="stretch_width", margin=(2, 6),
            css_classes=[f"wb-field-{section}-method", "wb-method"])
    if cfg is not None:
        out.update({f"{section}.{name}": w for name, w in config_widgets(cfg, prefix=f"{section}.").items()})
    return out


def _choices(constraint: Optional[Constraint], value: Any) -> Optional[list[str]]:
    """The ``--set`` texts of a constraint's finite choices (``none`` for None), when the value is one of them."""
    choices = getattr(constraint, "choices", None)
    if not choices or any(not isinstance(c, (str, type(None))) for c in choices):
        return None
    texts = [_as_text(c) for c in choices]
    return texts if _as_text(value) in texts else None


def _bounds(constraint: Optional[Constraint]) -> dict[str, Any]:
    """``start``/``end`` of a number input from an :class:`Interval` constraint (its accepted extremes)."""
    if not isinstance(constraint, Interval):
        return {}
    return {k: v for k, v in (("start", constraint.start), ("end", constraint.end)) if v is not None}


def config_widgets(config: Config, prefix: str = "") -> dict[str, pn.widgets.Widget]:
    """One widget per config field, typed after the field's annotation and declared constraint
    (:mod:`workbench.constraints`): a ``Select`` of an option's choices, a number input bounded by an
    interval, a checkbox for a bool, else a text box (``--set`` syntax); the field's docstring is the tooltip."""
    docs, constraints = type(config).field_docs(), declared(type(config))
    hints = typing.get_type_hints(type(config))
    out: dict[str, pn.widgets.Widget] = {}
    for f in dataclasses.fields(config):
        if f.name.startswith("_"):
            continue
        value, tp, doc = getattr(config, f.name), hints.get(f.name, str), docs.get(f.name, "")
        constraint = constraints.get(f.name)
        css = f"wb-field-{prefix.replace('.', '-')}{f.name}"
        kw = dict(label=f"{prefix}{f.name}", description=doc or None, sizing_mode="stretch_width", margin=(2, 6),
                  css_classes=[css])
        choices = _choices(constraint, value)
        if tp is bool:
            w = pn.widgets.Checkbox(value=bool(value), **{k: v for k, v in kw.items() if k != "description"})
        elif choices:
            w = pn.widgets.Select(options=choices, value=_as_text(value), **kw)
        elif tp is int and isinstance(value, int):
            w = pn.widgets.IntInput(value=value, **_bounds(constraint), **kw)
        elif tp is float and isinstance(value, (int, float)):
            w = pn.widgets.FloatInput(value=float(value), **_bounds(constraint), **kw)
        else:
            text = "" if value is None else ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
            w = pn.widgets.TextInput(value=text, placeholder="none" if value is None else "", **kw)
        out[f.name] = w
    return out


def _as_text(value: Any) -> str:
    if value is None or value == "":
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class RunControl(Viewer):
    """The run form: recipe, graph, workers, runner, the recipe's options; Start and Stop.

    Args:
        recipes: name -> function returning a config (default: :func:`discover_recipes`).
        launcher: ``launcher(config, runner=..., workers=...) -> handle``; a raised ``ParamError`` or
            ``ValueError`` is shown in the form.
        on_started: called with the new handle.
        on_stop: called when Stop is pressed (the app stops the selected run).
    """

    def __init__(self, *, recipes: Optional[dict[str, Callable[[], Config]]] = None, launcher: Launcher,
                 on_started: Optional[Callable[[Any], None]] = None, on_stop: Optional[Callable[[], None]] = None,
                 default_recipe: Optional[str] = None, graph: Optional[str] = None, workers: int = 2,
                 runner: str = "local", **params: Any):
        super().__init__(**params)
        self.recipes = recipes if recipes is not None else discover_recipes()
        self.launcher, self.on_started, self.on_stop = launcher, on_started, on_stop
        names = sorted(self.recipes)
        default = default_recipe if default_recipe in self.recipes else (names[0] if names else None)
        self.recipe = pn.widgets.Select(label="recipe", options=names, value=default, sizing_mode="stretch_width")
        self.recipe_doc = pn.pane.HTML("", styles={"color": "#555", "font-size": "12px"}, margin=(0, 10),
                                       sizing_mode="stretch_width")
        self.graph_override = graph
        self.runner = pn.widgets.Select(label="runner", options=RUNNERS, value=runner, sizing_mode="stretch_width",
                                        description="local: threads in this process; dask: one Dask worker "
                                                    "process per rank; single: one process, no communication")
        self.workers = pn.widgets.IntInput(label="workers", value=workers, start=1, end=64,
                                           sizing_mode="stretch_width", description="Number of ranks (one per part)")
        self.start_button = pn.widgets.Button(label="▶ Start run", color="primary", sizing_mode="stretch_width")
        self.stop_button = pn.widgets.Button(label="■ Stop", color="warning", sizing_mode="stretch_width")
        self.message = pn.pane.Alert("", alert_type="danger", visible=False, margin=(4, 6),
                                     sizing_mode="stretch_width", css_classes=["wb-form-message"])
        self._fields = pn.Column(sizing_mode="stretch_width", margin=0)
        self.widgets: dict[str, pn.widgets.Widget] = {}
        self._base: Optional[Config] = None
        self.start_button.on_click(lambda *_: self.start())
        self.stop_button.on_click(lambda *_: self.stop())
        self.recipe.param.watch(lambda *_: self._load_recipe(), "value")
        self.runner.param.watch(lambda *_: self._sync_workers(), "value")
        self._workers_wanted = workers
        self.busy = False
        self.last_handle: Any = None
        self._load_recipe()

    # -- form ---------------------------------------------------------------------------------------------
    def _load_recipe(self) -> None:
        self.widgets = {}
        self._base = None
        name = self.recipe.value
        if name is None:
            self._fields.objects = [pn.pane.Markdown("*No recipes found.*")]
            return
        try:
            self._base = self.recipes[name]()
        except Exception as exc:
            self._fields.objects = []
            self.show_error(f"Recipe {name!r} could not be loaded: {exc}")
            return
        if not isinstance(self._base, Config):
            self._fields.objects = []
            self.show_error(f"Recipe {name!r} did not return a config (got {type(self._base).__name__}).")
            self._base = None
            return
        doc = (inspect.getdoc(self.recipes[name]) or "").split("\n\n")[0]
        self.recipe_doc.object = html.escape(doc)
        if _is_composed(self._base):
            self._draw_composed()
        else:
            self.widgets = config_widgets(self._base)
            self._fields.objects = list(self.widgets.values())
        if self.graph_override and "graph" in self.widgets:
            self.widgets["graph"].value = self.graph_override
        if "num_parts" in self.widgets:
            self.widgets["num_parts"].param.watch(lambda *_: self._sync_workers(), "value")
        self._sync_workers()
        self.message.visible = False

    def _fixed_ranks(self) -> Optional[int]:
        """The ranks the run will have whatever the workers box says: 1 on the single runner, else the form's
        ``num_parts`` when it is set (None: the workers box decides)."""
        if self.runner.value == "single":
            return 1
        w = self.widgets.get("num_parts")
        try:
            return int(str(w.value).strip()) if w is not None and str(w.value).strip() not in ("", "None") else None
        except ValueError:
            return None

    def _sync_workers(self) -> None:
        """Show in the workers box what the run will use: fixed (and disabled) by the single runner or by
        ``num_parts``, else editable (the launcher is never handed a count the run would ignore)."""
        fixed = self._fixed_ranks()
        if fixed is None:
            if self.workers.disabled:
                self.workers.value, self.workers.disabled = self._workers_wanted, False
            return
        if not self.workers.disabled:
            self._workers_wanted = self.workers.value
        self.workers.value, self.workers.disabled = max(1, min(fixed, 64)), True

    # -- composed run configs: one group per stage --------------------------------------------------------
    def _draw_composed(self) -> None:
        base = self._base
        top = {k: w for k, w in config_widgets(base).items() if k not in base.sections()}
        self.widgets = dict(top)
        self._groups: dict[str, pn.Column] = {}
        objects: list = list(top.values())
        for section in base.sections():
            group = pn.Column(sizing_mode="stretch_width", margin=(4, 0), css_classes=[f"wb-stage-{section}"])
            self._groups[section] = group
            self._fill_section(base, section)
            objects.append(pn.pane.Markdown(f"**{section}**", margin=(6, 6, 0, 6)))
            objects.append(group)
        self._fields.objects = objects

    def _fill_section(self, config: Any, section: str) -> None:
        for key in [k for k in self.widgets if k.startswith(f"{section}.")]:
            del self.widgets[key]
        widgets = section_widgets(config, section)
        self.widgets.update(widgets)
        self._groups[section].objects = list(widgets.values())
        chooser = widgets.get(f"{section}.method")
        if chooser is not None:
            chooser.param.watch(lambda event, s=section: self._switch_method(s, event.new), "value")

    def _switch_method(self, section: str, method: Any) -> None:
        """Redraw a stage's fields for the chosen method (fields of the same name keep their values)."""
        try:
            kept = {k: v for k, v in self.settings().items() if k.startswith(f"{section}.")}
            kept[f"{section}.method"] = str(method)
            config = self._base.with_strings({k: v for k, v in kept.items() if k == f"{section}.method"})
            fields = {k: v for k, v in kept.items() if k != f"{section}.method"
                      and k.rpartition(".")[2] in (type(getattr(config, section)).field_names()
                                                  if getattr(config, section) is not None else [])}
            try:
                config = config.with_strings(fields)
            except (ParamError, ValueError):
                pass
        except (ParamError, ValueError) as exc:
            self.show_error(f"Refused: {exc}")
            return
        self._fill_section(config, section)

    def settings(self) -> dict[str, str]:
        """The form's option values as ``NAME=VALUE`` strings (the ``--set`` syntax)."""
        out = {}
        for name, w in self.widgets.items():
            v = w.value
            if isinstance(w, pn.widgets.TextInput) and str(v).strip() == "":
                v = None
            out[name] = _as_text(v)
        return out

    def config(self) -> Config:
        """The validated config of the form. Raises ``ParamError``/``ValueError`` with the reason."""
        if self._base is None:
            raise ValueError("choose a recipe first")
        settings = self.settings()
        if callable(getattr(self._base, "to_strings", None)):
            # only what the user changed, as on the command line: a setting one follows from another
            # (model.num_layers from sample.fanouts) follows it unless the user changed both
            before = self._base.to_strings()
            settings = {k: v for k, v in settings.items() if before.get(k) != v}
        cfg = self._base.with_strings(settings)
        cfg.validate()
        if hasattr(cfg, "build"):
            cfg.build()
        return cfg

    def show_error(self, text: str) -> None:
        self.message.alert_type = "danger"
        self.message.object = html.escape(text, quote=False).replace("\n", "<br>")
        self.message.visible = True

    def show_info(self, text: str) -> None:
        self.message.alert_type = "success"
        self.message.object = html.escape(text, quote=False)
        self.message.visible = True

    # -- actions ------------------------------------------------------------------------------------------
    def start(self, wait: bool = False) -> Optional[threading.Thread]:
        """Validate and launch on a background thread (the page stays responsive during ``prepare``)."""
        try:
            cfg = self.config()
        except (ParamError, ValueError, TypeError) as exc:
            self.show_error(f"Refused: {exc}")
            return None
        except Exception as exc:  # any other failure: still a message, never a traceback
            self.show_error(f"Refused: {type(exc).__name__}: {exc}")
            return None
        self.busy = True
        self.start_button.disabled = True
        self.show_info("Starting…")
        runner, recipe = self.runner.value, self.recipe.value
        workers = None if self.workers.disabled else int(self.workers.value)   # None: the run's own count

        def go() -> None:
            try:
                handle = self.launcher(cfg, runner=runner, workers=workers, recipe=recipe)
            except (ParamError, ValueError, TypeError, FileNotFoundError) as exc:
                self.show_error(f"Refused: {exc}")
            except Exception as exc:
                self.show_error(f"Could not start: {type(exc).__name__}: {exc}")
            else:
                self.last_handle = handle
                notes = "; ".join(getattr(getattr(handle, "program", None), "notes", None) or [])
                self.show_info(f"Started run {getattr(handle, 'run_id', '')}" + (f" ({notes})" if notes else ""))
                if self.on_started is not None:
                    self.on_started(handle)
            finally:
                self.busy = False
                self.start_button.disabled = False

        t = threading.Thread(target=go, daemon=True, name="run-control-start")
        t.start()
        if wait:
            t.join()
        return t

    def stop(self) -> None:
        if self.on_stop is not None:
            self.on_stop()
        elif self.last_handle is not None:
            self.last_handle.stop()

    def __panel__(self) -> pn.viewable.Viewable:
        return pn.Column(
            pn.pane.Markdown("### New run", margin=(0, 6)), self.recipe, self.recipe_doc, self.runner, self.workers,
            pn.pane.Markdown("**Options** (hover ? for help)", margin=(6, 6, 0, 6)), self._fields,
            pn.Row(self.start_button, self.stop_button, sizing_mode="stretch_width"), self.message,
            sizing_mode="stretch_width")
