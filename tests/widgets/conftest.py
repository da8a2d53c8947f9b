"""Fixtures for the view tests: fabricated runs, saved run logs, and a headless render helper."""

from __future__ import annotations

import pytest

pytest.importorskip("panel")
pytest.importorskip("holoviews")

from workbench.events import RunLog  # noqa: E402
from widgets.synthetic import fabricate_run  # noqa: E402


@pytest.fixture
def events():
    return fabricate_run(num_parts=3, epochs=4, num_layers=2, run_id="fab")


@pytest.fixture
def saved_run(tmp_path, events):
    """A run log folder ``tmp_path/runs/fab`` written by :class:`RunLog`."""
    with RunLog(tmp_path / "runs", "fab", recipe="sancus", config=events[0].config) as log:
        for ev in events:
            log.emit(ev)
    return tmp_path / "runs" / "fab"


@pytest.fixture
def render():
    """Build the Bokeh model of a Panel object without a server or browser (layer 1)."""
    import panel as pn
    from bokeh.document import Document
    from pyviz_comms import Comm

    def _render(obj):
        return pn.panel(obj).get_root(Document(), comm=Comm())

    return _render
