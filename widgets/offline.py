"""Views load Panel, Bokeh and HoloViews from the installed packages, never from a CDN.

Panel and HoloViews default to their public CDNs (``cdn.bokeh.org``, ``cdn.holoviz.org``) for the
JavaScript and CSS a notebook needs: on a machine without internet every view then renders as an empty
output. Importing :mod:`widgets` calls :func:`use_inline_resources`, so a notebook, an exported HTML file
and the served dashboard work offline without a flag; the views' :class:`Viewer` base also loads the
Panel extension (inline) the first time a view is displayed in a kernel that never called
``pn.extension()``.

Panel 1.9 inlines the stylesheets of a notebook output when it is first drawn, but a live update (a
status pane's new text, every refresh) sends the component's stylesheets again as CDN URLs
(``cdn.holoviz.org/.../theme/default.css``, ``css/loading.css``): :func:`use_inline_resources` also
makes those updates carry the CSS from the package (a few kB each), except in a served app, whose
Bokeh server serves the files itself.

Example:
    >>> import panel as pn
    >>> use_inline_resources()
    >>> pn.config.inline
    True
"""

from __future__ import annotations

import functools
from typing import Any

import panel as pn
from panel.viewable import Viewer as _PanelViewer

__all__ = ["use_inline_resources", "ensure_notebook_extension", "Viewer"]


def use_inline_resources() -> None:
    """Inline Panel's and HoloViews' JavaScript and CSS in notebook outputs, also in live updates.

    Sets ``pn.config.inline`` (notebook output, ``pn.extension()`` called with no ``inline``) and the
    default of ``hv.extension``'s ``inline``, and inlines the stylesheets of model updates outside a
    served app. Idempotent. ``PANEL_INLINE=0`` in the environment still wins (a user who wants the CDN).
    Exported files get their resources from :meth:`widgets.RunView.save` (``resources=INLINE``).
    """
    pn.config.inline = True
    _inline_stylesheet_updates()
    try:
        import holoviews as hv
    except ImportError:  # pragma: no cover - holoviews comes with the views extra
        return
    hv.extension.inline = True  # the default of every later hv.extension(...) call


def _inline_stylesheet(sheet: Any) -> Any:
    """An ``ImportedStyleSheet`` of Panel's dist folder as an ``InlineStyleSheet`` (others unchanged)."""
    from bokeh.models import ImportedStyleSheet, InlineStyleSheet
    from panel.io.resources import CDN_DIST, DIST_DIR, LOCAL_DIST

    if not isinstance(sheet, ImportedStyleSheet):
        return sheet
    url = sheet.url.split("?")[0]
    for prefix in (CDN_DIST, LOCAL_DIST):
        if url.startswith(prefix):
            path = DIST_DIR / url[len(prefix):]
            if path.is_file():
                return InlineStyleSheet(css=path.read_text(encoding="utf-8"))
    return sheet


def _served() -> bool:
    from panel.io.state import state

    return state.curdoc is not None and state.curdoc.session_context is not None


def _inline_stylesheet_updates() -> None:
    """Make every component's stylesheets inline when Panel computes them (notebooks, exports)."""
    from panel.reactive import Syncable

    original = Syncable._process_param_change
    if getattr(original, "_inlines_stylesheets", False):
        return

    @functools.wraps(original)
    def process_param_change(self: Any, params: dict) -> dict:
        props = original(self, params)
        if "stylesheets" in props and pn.config.inline and not _served():
            props["stylesheets"] = [_inline_stylesheet(s) for s in props["stylesheets"]]
        return props

    process_param_change._inlines_stylesheets = True  # type: ignore[attr-defined]
    Syncable._process_param_change = process_param_change


def ensure_notebook_extension() -> None:
    """Load the Panel extension (inline resources) in an IPython kernel where nothing loaded it yet.

    Lets ``widgets.RunView(run)`` display in a notebook that never ran ``pn.extension()``. Outside a
    kernel (scripts, tests, the served app) it does nothing.
    """
    from panel.config import panel_extension

    if panel_extension._loaded:
        return
    try:
        import holoviews as hv

        if getattr(hv.extension, "_loaded", False):
            return
    except ImportError:  # pragma: no cover
        pass
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return
    ip = get_ipython()
    if ip is None or getattr(ip, "kernel", None) is None:
        return
    use_inline_resources()
    pn.extension(inline=True)


class Viewer(_PanelViewer):
    """Panel's ``Viewer`` that loads the extension (inline) on its first notebook display."""

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        ensure_notebook_extension()
        return super()._repr_mimebundle_(include, exclude)
