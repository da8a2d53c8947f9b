"""The served dashboard asks nothing of the internet: every request it makes goes to 127.0.0.1."""

from __future__ import annotations

from tests.ui.conftest import guard_requests, wait_until
from widgets.app import RunRegistry
from widgets.store import RunStore
from widgets.synthetic import fabricate_run

TABS = ("Training curves", "Partition", "Staleness", "Communication", "Compare runs")


def test_served_dashboard_requests_only_127_0_0_1(browser, served, tmp_path):
    reg = RunRegistry(tmp_path / "runs")
    reg.add(RunStore(events=fabricate_run(run_id="offline", num_parts=2, epochs=6)))
    url = served(reg)
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    requests, external = guard_requests(context)
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector(".wb-epochs", timeout=60_000)
    for tab in TABS:
        page.get_by_text(tab, exact=True).first.click()
        page.wait_for_timeout(500)
    wait_until(lambda: len(requests) > 5)
    context.close()
    assert not external, "the dashboard requested:\n" + "\n".join(sorted(set(external)))
