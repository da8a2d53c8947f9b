"""The cache view: hit rate per rank, bytes avoided, policy comparison; its tab appears with cache events."""

from __future__ import annotations

import holoviews as hv
import panel as pn
import pytest
import torch

from widgets.app import Dashboard, RunRegistry
from widgets.cache import CacheView, cache_summary, hit_rate_plot
from widgets.store import RunStore
from widgets.synthetic import fabricate_run
from widgets.views import RunView
from workbench.cache import hit_rate_curve


def _shown(pane):
    obj = pane.object
    return obj[()] if isinstance(obj, hv.DynamicMap) else obj


def _titles(view) -> list[str]:
    return [_shown(p).opts.get().kwargs.get("title", "") for p in view._layout.select(pn.pane.HoloViews)
            if p.object is not None and p.visible]


def _cache_run(run_id, policy, ratio=0.1, epochs=3):
    return RunStore(events=fabricate_run(run_id=run_id, num_parts=3, epochs=epochs, cache=policy, cache_ratio=ratio))


def test_cache_view_draws_hit_rate_bytes_and_comparison(render):
    runs = {"deg": _cache_run("deg", "degree"), "rnd": _cache_run("rnd", "random"), "lru": _cache_run("lru", "lru", 0.3)}
    view = CacheView(runs["deg"], stores=lambda: runs)
    render(view)
    assert _titles(view) == ["Hit rate per rank and epoch", "Bytes the cache avoided, and refresh bytes, per epoch",
                             "Hit rate by policy and ratio (runs)"]
    cmp = view.comparison_frame().set_index("run_id")
    assert cmp.loc["deg", "hit_rate"] > 2 * cmp.loc["rnd", "hit_rate"]
    assert set(cmp["policy"]) == {"degree", "random", "lru"}
    s = cache_summary(runs["deg"])
    c = runs["deg"].frame("cache")
    assert s["MB_saved"] == pytest.approx(c["bytes_saved"].sum() / 1e6)
    assert sorted(view.bytes_frame()["what"].unique()) == ["avoided", "refresh"]


def test_no_cache_events_no_tab_then_the_tab_appears(render):
    events = fabricate_run(run_id="late", num_parts=2, epochs=3, cache="degree")
    plain = RunView(RunStore(events=fabricate_run(run_id="plain", epochs=2)), runs_dir=None)
    render(plain)
    assert plain.cache is None and len(plain._tabs) == 4
    store = RunStore(events=[e for e in events if e.type != "cache"])
    view = RunView(store, runs_dir=None)
    render(view)
    view._tabs.active = 3
    assert view.cache is None
    store.extend([e for e in events if e.type == "cache"])
    view.refresh()
    assert view.cache is not None and view._tabs._names[4] == "Cache" and view._tabs.active == 3
    view._tabs.active = 4
    assert view.visible_views() == [view.progress, view.cache] and view.cache.up_to_date()


def test_dashboard_shows_the_cache_tab_before_compare(render):
    reg = RunRegistry(runs_dir=None)
    d = Dashboard(fabricate_run(run_id="cached", num_parts=2, epochs=2, cache="inclusion"), registry=reg,
                  control=False)
    render(d)
    names = list(d.view._tabs._names)
    assert names[-2:] == ["Cache", "Compare runs"]
    d.view._tabs.active = len(names) - 1
    assert d.view.active_view() is d.compare


def test_hit_rate_plot_from_the_curve():
    node_part = torch.tensor([0, 1, 1, 1, 1])
    df = hit_rate_curve(torch.tensor([1, 1, 2, 3, 4]), node_part, 0, ["degree", "random"], [0.25, 0.5, 1.0],
                        degrees=torch.tensor([0, 5, 1, 1, 1]))
    plot = hit_rate_plot(df)
    assert len(plot) == 4 and plot.opts.get().kwargs["title"] == "Hit rate against cache ratio"
