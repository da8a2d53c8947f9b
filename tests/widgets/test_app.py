"""The dashboard: shared registry of runs, per-session views, failed runs, stopping, serving."""

from __future__ import annotations

import argparse
import socket
import time
import urllib.request

import pytest

from widgets.app import Dashboard, RunRegistry, dashboard, make_app
from widgets.serve import register, serve
from widgets.store import RunStore
from widgets.synthetic import SyntheticRun, fabricate_run


def _wait(cond, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_registry_lists_live_then_saved_runs(saved_run):
    reg = RunRegistry(saved_run.parent)
    reg.add(RunStore(events=fabricate_run(run_id="live1", epochs=1)))
    reg._scan_saved(force=True)
    assert reg.run_ids() == ["live1", "fab"]
    assert reg.store("fab").epochs_done == 4
    assert reg.store("nope") is None


def test_two_sessions_share_one_store_and_stay_consistent(tmp_path, render):
    reg = RunRegistry(tmp_path)
    run = SyntheticRun(fabricate_run(num_parts=2, epochs=6), delay=0.05, out=str(tmp_path), run_id="shared")
    reg.add(run)
    a, b = Dashboard(registry=reg, control=False), Dashboard(registry=reg, control=False)
    render(a), render(b)
    assert a.view.store is b.view.store
    run.wait(10)
    a.tick(), b.tick()
    a.view.curves._next_ok = b.view.curves._next_ok = 0
    a.view.curves.refresh(), b.view.curves.refresh()
    assert a.view.curves.plot_data().equals(b.view.curves.plot_data())
    assert len(a.view.curves.plot_data()) == 12
    # closing a session (dropping its views) does not stop the run; the run ended on its own
    a.stop_refreshing()
    assert run.status == "finished"


def test_failed_run_is_shown_and_app_keeps_working(tmp_path):
    reg = RunRegistry(tmp_path)
    bad = SyntheticRun(fabricate_run(num_parts=2, epochs=4, fail_at=1), delay=0.01, out=str(tmp_path), run_id="bad")
    bad_store = reg.add(bad)
    _wait(lambda: bad.status == "failed")
    d = Dashboard(registry=reg, control=False)
    d.tick()
    assert d.view.store is bad_store and d.view.progress._failure.visible
    good = reg.add(RunStore(events=fabricate_run(run_id="good", epochs=2)))
    d._pending = "good"
    d.tick()
    assert d.view.store is good and not d.view.progress._failure.visible


def test_form_started_runs_appear_and_stop(tmp_path):
    def launcher(cfg, **kw):
        return SyntheticRun(fabricate_run(num_parts=2, epochs=50), delay=0.05, out=str(tmp_path), run_id="formrun")

    reg = RunRegistry(tmp_path, launcher=launcher)
    d = Dashboard(registry=reg)
    d.control.start(wait=True)
    assert _wait(lambda: (d.tick() or True) and d.view is not None and d.view.store.run_id == "formrun")
    assert _wait(lambda: d.view.store.status == "running")
    d.control.stop()  # stops the selected run
    assert _wait(lambda: d.view.store.poll() is not None and d.view.store.status == "stopped")


def test_a_form_run_listed_from_its_folder_first_is_shown_from_its_handle(tmp_path):
    """A run started from the form writes its log folder before the registry has its handle (``launch``
    prepares the run first): a page with nothing selected yet took it from the folder listing, as a saved
    run. Once the handle is registered the page shows the live store: Stop reaches the run."""
    reg = RunRegistry(tmp_path)
    run = SyntheticRun(fabricate_run(num_parts=2, epochs=200), delay=0.05, out=str(tmp_path), run_id="early",
                       start=False)  # its folder exists, the registry does not know it yet
    d = Dashboard(registry=reg)
    assert d.view is not None and d.view.store.run_id == "early" and d.view.store.handle is None
    live = reg.add(run.start())
    d._on_started(run)
    d.tick()
    assert d.view.store is live
    d.control.stop()
    assert _wait(lambda: live.poll() is not None and live.status == "stopped")


def test_stop_all_stops_live_runs(tmp_path):
    reg = RunRegistry(tmp_path)
    runs = [SyntheticRun(fabricate_run(epochs=100), delay=0.05, out=str(tmp_path), run_id=f"r{i}") for i in range(2)]
    for r in runs:
        reg.add(r)
    reg.stop_all(timeout=10)
    assert [r.status for r in runs] == ["stopped", "stopped"]


def test_dashboard_in_a_notebook_cell(render):
    d = dashboard(fabricate_run(run_id="nb", epochs=2), runs_dir=None)
    render(d)
    assert d.view.store.run_id == "nb" and d.run_select.value == "nb"


def test_serve_command_defaults_to_localhost():
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["serve"])
    assert args.port == 5006 and args.address is None and args.demo is False and args.runs == "runs"
    args = parser.parse_args(["serve", "--demo", "--address", "0.0.0.0", "--port", "7000"])
    assert args.demo and args.address == "0.0.0.0" and args.port == 7000


def test_served_page_answers(tmp_path):
    reg = RunRegistry(tmp_path)
    reg.add(RunStore(events=fabricate_run(run_id="srv", epochs=2)))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = serve(reg, port=port, threaded=True)
    try:
        assert _wait(lambda: _get(f"http://127.0.0.1:{port}/") is not None, 20)
        assert "GNN workbench" in _get(f"http://127.0.0.1:{port}/")
    finally:
        server.stop()


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode()
    except OSError:
        return None


def test_make_app_gives_a_template_per_session(tmp_path):
    import panel as pn

    app = make_app(RunRegistry(tmp_path))
    a, b = app(), app()
    assert isinstance(a, pn.template.BaseTemplate) and a is not b
