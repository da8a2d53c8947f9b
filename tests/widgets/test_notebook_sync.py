"""The guard of live notebook outputs against Panel's comm races (widgets.notebook_sync).

The races themselves are exercised by the JupyterLab test of the notebooks (tests/ui), where they made a
quickstart figure stay empty in about one run in four; here: what the filter keeps and drops, and that
importing the views installs it once.
"""

import threading

from bokeh.document import Document
from bokeh.models import Div, TabPanel, Tabs

import widgets
from widgets import notebook_sync
from widgets.notebook_sync import drop_layout_echoes


def _changed(model_id, attr, new):
    return {"kind": "ModelChanged", "model": {"id": model_id}, "attr": attr, "new": new}


def _tabs_doc(closable: bool):
    doc = Document()
    tabs = Tabs(tabs=[TabPanel(child=Div(text="a"), title="a", closable=closable),
                      TabPanel(child=Div(text="b"), title="b")])
    doc.add_root(tabs)
    return doc, tabs


def test_children_echoes_are_dropped_other_changes_kept():
    content = {"events": [_changed("row", "children", [{"id": "x"}]), _changed("fig", "inner_width", 300),
                          _changed("tabs", "active", 2), {"kind": "RootAdded", "model": {"id": "r"}}]}
    kept = drop_layout_echoes(content, doc=None)["events"]
    assert [e.get("attr") for e in kept] == ["inner_width", "active", None]


def test_tabs_changes_dropped_only_where_no_tab_can_be_closed():
    doc, tabs = _tabs_doc(closable=False)
    content = {"events": [_changed(tabs.id, "tabs", []), _changed(tabs.id, "active", 1)]}
    assert [e["attr"] for e in drop_layout_echoes(content, doc)["events"]] == ["active"]
    doc, tabs = _tabs_doc(closable=True)   # the user closed a tab: a real change
    content = {"events": [_changed(tabs.id, "tabs", [])]}
    assert [e["attr"] for e in drop_layout_echoes(content, doc)["events"]] == ["tabs"]
    assert drop_layout_echoes({"events": [_changed(tabs.id, "tabs", [])]}, None)["events"]  # no doc: kept


def test_messages_without_events_pass_unchanged():
    assert drop_layout_echoes({}, None) == {}
    assert drop_layout_echoes("not a patch", None) == "not a patch"


def test_importing_the_views_installs_the_guard_once():
    from panel.models.comm_manager import CommManager
    from panel.viewable import MimeRenderMixin

    assert getattr(MimeRenderMixin._on_msg, "_workbench_sync", False)
    on_msg, assemble = MimeRenderMixin._on_msg, CommManager.assemble
    notebook_sync.install()
    assert (MimeRenderMixin._on_msg, CommManager.assemble) == (on_msg, assemble)
    assert widgets.notebook_sync.LOCK is notebook_sync.LOCK


def test_a_redraw_holds_the_lock_a_client_message_waits_for():
    from widgets.synthetic import fabricate_run
    from widgets.views import Refresher, RunView

    view = RunView(fabricate_run(epochs=2))
    seen = []

    class Probe:
        store = view.store

        def refresh(self):
            # another thread (ipykernel's comm handler) cannot take the lock while the redraw runs
            t = threading.Thread(target=lambda: seen.append(notebook_sync.LOCK.acquire(blocking=False)))
            t.start()
            t.join()

        def up_to_date(self):
            return True

        def resend_pending(self):
            return False

    Refresher([Probe()]).tick()
    assert seen == [False]


def test_a_notebook_output_is_redrawn_only_once_its_comm_is_open(events):
    """Changes made before the page opened the output's comm could reach it out of order (Panel resends
    each on its own timer): the refresher polls, and redraws once the comm is open."""
    import panel as pn
    from bokeh.document import Document
    from pyviz_comms import JupyterComm

    from widgets.store import RunStore
    from widgets.views import RunView

    store = RunStore(events=events[:10])
    view = RunView(store, runs_dir=None)
    comm, doc = JupyterComm(), Document()
    shown = pn.panel(view)
    root = shown.get_root(doc, comm=comm)
    doc.hold()   # as a notebook output's document is: changes wait for the push over the comm
    pn.state._views[root.ref["id"]] = (shown, root, doc, comm)   # what displaying it in a notebook records

    class Connected:   # what the comm holds once the page has opened it
        def send(self, *args, **kwargs):
            pass

    try:
        store.extend(events[10:])
        view.curves._next_ok = 0
        assert not notebook_sync.comms_open([view.curves._layout])
        view.refresh()
        assert not view.curves.up_to_date()    # not connected: nothing drawn
        comm._comm = Connected()
        assert notebook_sync.comms_open([view.curves._layout])
        view.refresh()
        assert view.curves.up_to_date()
    finally:
        pn.state._views.pop(root.ref["id"], None)
