"""Find a recipe by name or path: ``full_graph``, ``sancus:epoch_fixed``, ``./my_recipe.py``.

A recipe is a module of short functions returning configs. By convention the module's default is
``recipe(**overrides) -> Config``; other public functions are named variants. Where they are looked up:

* ``NAME`` or ``NAME:VARIANT``: module ``recipes.NAME`` (the repository's ``recipes/`` package; add
  your own module there to make it a name);
* ``PATH.py`` or ``PATH.py:VARIANT``: a Python file anywhere.

The core never imports ``recipes`` statically (recipes import the core, not the other way round);
this module resolves a name the user typed, like a plugin.

Example:
    >>> fn = load_recipe("full_graph")                  # doctest: +SKIP
    >>> fn(epochs=3).train.epochs                        # doctest: +SKIP
    3
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import pkgutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Callable

from workbench._validation import ParamError, param_error

__all__ = ["load_recipe", "available_recipes", "recipe_variants", "DEFAULT_FUNCTION"]

DEFAULT_FUNCTION = "recipe"
_PACKAGE = "recipes"


def available_recipes() -> list[str]:
    """Names of the recipe modules in the ``recipes`` package (empty when it is not importable); a
    subpackage is not a recipe (the papers' claims are the separate top-level package ``reproduce``)."""
    try:
        pkg = importlib.import_module(_PACKAGE)
    except ImportError:
        return []
    return sorted(m.name for m in pkgutil.iter_modules(getattr(pkg, "__path__", []))
                  if not m.name.startswith("_") and not m.ispkg)


def recipe_variants(module: ModuleType) -> list[str]:
    """Public functions defined in a recipe module that take no required argument (its default and named
    variants: ``workbench run NAME:VARIANT`` calls one with none).

    A module lists public helpers that are not variants (a sweep returning several configs) in
    ``__helpers__``; a function with a required parameter (HP-GCN's byte formulas) is a helper too.
    """
    helpers = set(getattr(module, "__helpers__", ()))
    return sorted(name for name, obj in vars(module).items()
                  if inspect.isfunction(obj) and obj.__module__ == module.__name__ and not name.startswith("_")
                  and name not in helpers and not _required(obj))


def _required(fn: Callable) -> list[str]:
    """The parameters of ``fn`` without a default (``*args``/``**kwargs`` are optional)."""
    return [p.name for p in inspect.signature(fn).parameters.values() if p.default is inspect.Parameter.empty
            and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]


def _load_path(path: Path) -> ModuleType:
    name = f"_workbench_recipe_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ParamError([param_error("recipe", "workbench run", "a Python file", str(path))])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    try:  # classes defined in the file travel to Dask workers by value (they cannot import the file)
        import cloudpickle

        cloudpickle.register_pickle_by_value(module)
    except (ImportError, ValueError):
        pass
    return module


def _load_module(name: str) -> ModuleType:
    if name.endswith(".py") or "/" in name or "\\" in name:
        path = Path(name).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"recipe file {str(path)!r} does not exist")
        return _load_path(path.resolve())
    names = available_recipes()
    if name not in names:
        hint = difflib.get_close_matches(name, names, n=1)
        extra = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise ParamError([param_error("recipe", "workbench run", f"one of {names}{extra} or a path to a .py file",
                                      name)])
    return importlib.import_module(f"{_PACKAGE}.{name}")


def load_recipe(name_or_path: str) -> Callable[..., object]:
    """The recipe function for ``NAME[:VARIANT]`` or ``PATH.py[:VARIANT]`` (default variant ``recipe``); only the
    module's :func:`recipe_variants` are variants (not its ``__helpers__``, imported names or other attributes).

    Raises:
        ParamError: unknown recipe or variant, or a helper named as a variant (the message lists the valid ones).
        FileNotFoundError: a path that does not exist.
    """
    spec = str(name_or_path)
    base, _, variant = spec.rpartition(":") if ":" in Path(spec).name else (spec, "", "")
    if not base:
        base, variant = spec, ""
    module = _load_module(base)
    variant = variant or DEFAULT_FUNCTION
    variants = recipe_variants(module)   # a helper (``__helpers__``) or anything else is not a run config
    if variant not in variants:
        hint = difflib.get_close_matches(variant, variants, n=1)
        extra = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise ParamError([param_error("recipe", "workbench run", f"a variant of {module.__name__.split('.')[-1]}: "
                                      f"one of {variants}{extra}", spec)])
    return getattr(module, variant)
