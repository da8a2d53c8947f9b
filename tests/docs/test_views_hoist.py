"""The notebook views of the tutorials share one copy of BokehJS (``docs/_ext/wbdocs_views.py``), without a
Sphinx build: :func:`hoist` moves each big inline script of a saved view into a file named by its content."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("wbdocs_views_under_test", ROOT / "docs" / "_ext" / "wbdocs_views.py")
ext = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ext)

BIG = "var s = '<script>' + '<style>';" + "x = 1;" * 3000   # tag-like strings inside BokehJS are not tags
PAGE = f"""<html><head><link rel="icon" href="https://cdn.holoviz.org/panel/dist/images/favicon.ico">
<style>body {{ margin: 0 }}</style>
<script type="esms-options">{{"shimMode": true}}</script>
<script type="text/javascript">{BIG}</script><script>Bokeh.set_log_level("info");</script>
</head><body><div data-root-id="r"></div>
<script type="application/json" id="doc">{{"roots": []}}</script></body></html>"""


def test_big_scripts_move_to_shared_files_and_the_rest_stays(tmp_path):
    out = ext.hoist(PAGE, tmp_path, "../_resources/")
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and files[0].read_text() == BIG and files[0].suffix == ".js"
    assert f'<script type="text/javascript" src="../_resources/{files[0].name}"></script>' in out
    assert BIG not in out and "x = 1;" not in out
    for kept in ('<script type="esms-options">{"shimMode": true}</script>', 'Bokeh.set_log_level("info");',
                 '<script type="application/json" id="doc">{"roots": []}</script>', "<style>body { margin: 0 }</style>"):
        assert kept in out
    assert "https://" not in out                                   # Panel's favicon link is dropped
    assert ext.hoist(PAGE, tmp_path, "../_resources/") == out and len(list(tmp_path.iterdir())) == 1   # shared


def test_a_choice_of_notebooks_is_checked():
    class App:
        class config:
            wbdocs_views = "00_quickstart, 01_partitioning.ipynb"
    assert ext.selected(App, "00_quickstart") and ext.selected(App, "01_partitioning")
    assert not ext.selected(App, "06_psc_gcn")
    App.config.wbdocs_views = "all"
    assert ext.selected(App, "06_psc_gcn")
    App.config.wbdocs_views = "none"
    assert not ext.selected(App, "00_quickstart")
