"""``.. recipe-functions:: MODULE``: a recipe module's variants (``workbench run NAME:VARIANT``) and helpers.

The variants are what ``workbench run`` offers (:func:`workbench.runtime.recipes.recipe_variants`: public
functions defined in the module, less its ``__helpers__``); each is documented from its docstring with
autodoc, so a new variant appears here without an edit.
"""

from __future__ import annotations

import importlib
import inspect

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective


class RecipeFunctions(SphinxDirective):
    required_arguments = 1

    def run(self):
        from workbench.runtime.recipes import recipe_variants

        module_name = self.arguments[0]
        module = importlib.import_module(module_name)
        short = module_name.rsplit(".", 1)[-1]
        variants = recipe_variants(module)
        helpers = sorted(name for name in getattr(module, "__helpers__", ())
                         if inspect.isfunction(getattr(module, name, None)))
        lines = [".. list-table::", "   :header-rows: 1", "   :widths: 35 65", "",
                 "   * - run it", "     - what it is"]
        for name in variants:
            cmd = f"workbench run {short}" if name == "recipe" else f"workbench run {short}:{name}"
            doc = inspect.getdoc(getattr(module, name)) or ""
            first = doc.split("\n\n")[0].replace("\n", " ").strip() or "-"
            lines += [f"   * - ``{cmd}``", f"     - {first}"]
        lines.append("")
        for name in variants + helpers:
            lines += [f".. autofunction:: {module_name}.{name}", ""]
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source=f"<recipe-functions {module_name}>"), self.content_offset,
                                container)
        return container.children


def setup(app):
    app.add_directive("recipe-functions", RecipeFunctions)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
