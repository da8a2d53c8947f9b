"""The staleness timeline of a 2,500-epoch run in a real browser: both plots span the chosen epoch
window, the oldest-block plot is bucketed; screenshots in test-artifacts/ (look at them)."""

from __future__ import annotations

import panel as pn

from tests.ui.conftest import ARTIFACTS, free_port, wait_listening, wait_until
from widgets.staleness import StalenessView
from widgets.store import RunStore
from widgets.synthetic import fabricate_run
from workbench.events import Staleness


def test_long_run_staleness_in_chromium(page):
    store = RunStore(events=fabricate_run(num_parts=4, epochs=2500, num_layers=2))
    store.push(Staleness(rank=2, layer=0, epoch=1234, state="STALE", ages=[0, 0, 0, 40]))   # a peak to survive
    views = {"last60": StalenessView(store, layer="0"), "all": StalenessView(store, layer="0", last_epochs=0)}
    port = free_port()
    server = pn.serve({name: (lambda v=v: pn.Column(v, width=1400)) for name, v in views.items()}, port=port,
                      address="127.0.0.1", threaded=True, show=False)
    try:
        wait_listening(port)
        ARTIFACTS.mkdir(exist_ok=True)
        for name, view in views.items():
            page.goto(f"http://127.0.0.1:{port}/{name}")
            wait_until(lambda: page.locator("canvas").count() >= 2, timeout=60)
            page.wait_for_timeout(1500)   # let Bokeh paint
            page.screenshot(path=str(ARTIFACTS / f"staleness-2500-{name}.png"), full_page=True)
            first, last = view.window()
            assert (first, last) == ((2440, 2499) if name == "last60" else (0, 2499))
        assert "maximum per" in views["all"]._ages.element.opts.get().kwargs["title"]
    finally:
        server.stop()
