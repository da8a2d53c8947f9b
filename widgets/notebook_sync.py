"""Keep a notebook output's figures in step with the kernel (Panel's notebook comm, JupyterLab, ipykernel 7).

Three races of Panel 1.9's notebook comm made live views lose figures. In this project's JupyterLab test
about one quickstart run in four ended with the accuracy figure still the empty placeholder, or with
every figure of the ``RunView`` gone and ``reference ... isn't known`` in the browser console:

1. **Echoes.** The page applies the kernel's patches without a setter id (Panel's ``CommManager``), so
   it sends every change back. A layout's ``children`` echoed after the kernel changed them again
   reverts the kernel's document: of two figures replaced in one row within the round trip (loss and
   accuracy on the first epochs), the second is lost, Panel's bookkeeping no longer matches the document
   and a later replacement of that figure fails. A ``children`` list echoed with a figure's whole
   definition can also make the kernel's and the page's models differ.
2. **Threads.** ipykernel 7 handles comm messages off the main thread. Panel applies a client message
   between ``doc.hold()`` and ``doc.unhold()``, and the unhold discards whatever change the main thread
   had made but not pushed yet (a figure replaced, not yet sent).
3. **Order.** A change made before the page has opened the output's comm is sent again every 0.1 s until
   it can be (Panel's ``push``), each message on its own timer: once the comm opens, a later message can
   go first, and the page then meets references to models it has not received yet (a run on the
   ``local`` runner finishes its first epochs before the page has drawn the output).

:func:`install` (called when :mod:`widgets` is imported) fixes both for every notebook output of the
process: client patches lose their ``children`` changes and their ``tabs`` changes where no tab can be
closed, which a page never makes by itself, and client messages are applied holding :data:`LOCK`, the
lock :class:`widgets.base.Refresher` holds while it redraws; and the refresher redraws a notebook output
only once its comm is open (:func:`comms_open`). Served apps (Bokeh server sessions, which
keep pages in sync by themselves) do not go through this path.

Example:
    >>> install()
    >>> echo = {"events": [{"kind": "ModelChanged", "model": {"id": "r"}, "attr": "children", "new": []},
    ...                    {"kind": "ModelChanged", "model": {"id": "t"}, "attr": "active", "new": 1}]}
    >>> [e["attr"] for e in drop_layout_echoes(echo, doc=None)["events"]]
    ['active']
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Optional

__all__ = ["LOCK", "install", "drop_layout_echoes", "comms_open"]

#: held while a client message is applied to a notebook output's document, and while views redraw
LOCK = threading.RLock()

_current = threading.local()


def _closable_tabs(doc: Any, model_id: str) -> bool:
    """Whether the Tabs model ``model_id`` of ``doc`` has a tab the user can close (then ``tabs`` may
    legitimately change in the page)."""
    model = doc.get_model_by_id(model_id) if doc is not None else None
    return model is None or any(getattr(tab, "closable", False) for tab in getattr(model, "tabs", []))


def drop_layout_echoes(content: Any, doc: Optional[Any]) -> Any:
    """Remove from a client patch's ``content`` the layout changes a page only ever echoes.

    ``children`` changes always; ``tabs`` changes of Tabs models with no closable tab (``doc`` None: kept).
    Returns ``content`` (changed in place).
    """
    events = content.get("events") if isinstance(content, dict) else None
    if not events:
        return content
    keep = []
    for event in events:
        if isinstance(event, dict) and event.get("kind") == "ModelChanged":
            attr, model_id = event.get("attr"), (event.get("model") or {}).get("id")
            if attr == "children" or (attr == "tabs" and doc is not None and not _closable_tabs(doc, model_id)):
                continue
        keep.append(event)
    content["events"] = keep
    return content


def comms_open(objects: Any) -> bool:
    """Whether every notebook output showing one of ``objects`` (rendered Panel components) has its comm
    open, so that a change made now reaches the page in order. True for served pages and for objects not
    shown anywhere yet.

    Example:
        >>> import panel as pn
        >>> comms_open([pn.Column()])
        True
    """
    from panel.io.state import state
    from pyviz_comms import JupyterComm

    for obj in objects:
        for ref in list(getattr(obj, "_models", {})):
            view = state._views.get(ref)
            comm = view[3] if view else None
            if isinstance(comm, JupyterComm) and comm._comm is None:   # opened when the page connects
                return False
    return True


def install() -> None:
    """Filter echoed layout changes out of notebook client messages and apply them holding :data:`LOCK`.

    Idempotent; does nothing when Panel is missing its notebook comm manager.
    """
    try:
        from panel.models.comm_manager import CommManager
        from panel.viewable import MimeRenderMixin
    except ImportError:  # pragma: no cover - other Panel versions
        return
    if getattr(MimeRenderMixin._on_msg, "_workbench_sync", False):
        return
    on_msg, assemble = MimeRenderMixin._on_msg, CommManager.assemble

    @functools.wraps(assemble)
    def assemble_without_echoes(self: Any, msg: Any) -> Any:
        message = assemble(self, msg)
        if getattr(_current, "active", False):
            drop_layout_echoes(message.content, getattr(_current, "doc", None))
        return message

    @functools.wraps(on_msg)
    def on_msg_locked(self: Any, ref: str, manager: Any, msg: Any) -> None:
        from panel.io.state import state

        view = state._views.get(ref)
        with LOCK:
            _current.active, _current.doc = True, (view[2] if view else None)
            try:
                on_msg(self, ref, manager, msg)
            finally:
                _current.active, _current.doc = False, None

    on_msg_locked._workbench_sync = True
    CommManager.assemble = assemble_without_echoes
    MimeRenderMixin._on_msg = on_msg_locked
