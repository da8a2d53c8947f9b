"""Live views of runs for notebooks and the served dashboard (Panel + HoloViews over the event stream).

Everything here reads a run's typed events (:mod:`workbench.events`): live from a run handle, or from a
saved run log. The core package never imports this one.

Importing it makes Panel, Bokeh and HoloViews load their JavaScript and CSS from the installed packages
(inline), never from a CDN (:mod:`widgets.offline`): views render on a machine without internet. It
also guards live notebook outputs against three races of Panel's notebook comm (:mod:`widgets.notebook_sync`).

Example:
    >>> import widgets
    >>> from widgets.synthetic import fabricate_run
    >>> view = widgets.RunView(fabricate_run(epochs=2))   # display it in a notebook, or pn.panel(view)
    >>> view.store.status
    'finished'
"""

from __future__ import annotations

from widgets import notebook_sync
from widgets.offline import use_inline_resources
from widgets.store import RunStore, list_runs
from widgets.views import ProgressView, RunView, as_store

use_inline_resources()
notebook_sync.install()   # live notebook outputs keep every figure (Panel's comm: echoes, threads)

__all__ = ["RunStore", "list_runs", "as_store", "RunView", "ProgressView", "CurvesView", "PartitionView",
           "StalenessView", "TrafficView", "CompareView", "CacheView", "RunControl", "Dashboard", "RunRegistry",
           "dashboard"]

_LAZY = {
    "CurvesView": "widgets.curves", "PartitionView": "widgets.partition", "StalenessView": "widgets.staleness",
    "TrafficView": "widgets.traffic", "CompareView": "widgets.compare", "CacheView": "widgets.cache",
    "RunControl": "widgets.control",
    "Dashboard": "widgets.app", "RunRegistry": "widgets.app", "dashboard": "widgets.app",
}
_LAZY["ScheduleView"] = "widgets.schedule"
__all__.append("ScheduleView")
_LAZY["PipelineView"] = "widgets.pipeline"
__all__.append("PipelineView")
_LAZY["TimingView"] = "widgets.timing"
__all__.append("TimingView")


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'widgets' has no attribute {name!r}")
