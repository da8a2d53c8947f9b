"""The Time tab of a run that samples ahead, in a real browser: beside each epoch's stacked bar, a slim bar of the
sampling and feature pulls done off the critical path, painted in its pale colours. Screenshot:
test-artifacts/time-batches-ahead.png (look at it)."""

from __future__ import annotations

import panel as pn

from tests.ui.conftest import ARTIFACTS, free_port, painted_pixels, wait_listening, wait_until
from widgets.store import RunStore
from widgets.timing import AHEAD_COLORS, PHASE_COLORS, TimingView
from workbench.events import StepTimes


def test_overlapped_work_is_a_slim_bar_beside_each_epoch_in_chromium(page):
    store = RunStore()
    for epoch in range(6):
        for rank in (0, 1):
            store.push(StepTimes(rank=rank, epoch=epoch, steps=8, wall_s=0.6,
                                 seconds={"sample": 0.05, "forward": 0.2, "backward": 0.25, "evaluate": 0.1},
                                 overlapped={"sample": 0.3, "fetch": 0.2}))
    view = TimingView(store)
    port = free_port()
    server = pn.serve({"time": lambda: pn.Column(view, width=1200)}, port=port, address="127.0.0.1", threaded=True,
                      show=False)
    try:
        wait_listening(port)
        page.goto(f"http://127.0.0.1:{port}/time")
        colors = {**{p: PHASE_COLORS[p] for p in ("forward", "backward")}, **AHEAD_COLORS}
        wait_until(lambda: min(painted_pixels(page, colors).values()) > 1500, what=lambda: painted_pixels(page, colors))
        painted = painted_pixels(page, colors)
        # the slim bar is about a third of the epoch bar's width: 500 ms of it against the epoch's 600 ms
        assert painted["sample ahead"] + painted["fetch ahead"] < painted["forward"] + painted["backward"]
        wait_until(lambda: page.locator(".wb-time-overlapped").count() == 1)
        assert "off the critical path: 500 ms" in page.locator(".wb-time-overlapped").first.inner_text()
        page.wait_for_timeout(1000)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "time-batches-ahead.png"), full_page=True)
    finally:
        server.stop()
