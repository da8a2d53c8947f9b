"""The dashboard behind a token in a real browser: refused without it; with ``?token=`` the page and its
WebSocket work (the live run's epochs reach the page), and the cookie then lets the plain URL in."""

from __future__ import annotations

from tests.ui.conftest import free_port, wait_until
from widgets.app import RunRegistry
from widgets.serve import serve
from widgets.synthetic import SyntheticRun, fabricate_run

TOKEN = "ui-t0ken"


def _epochs_shown(page) -> int:
    return int(page.locator(".wb-epochs").first.inner_text())


def test_token_page_connects_and_the_cookie_lets_the_plain_url_in(page, tmp_path):
    reg = RunRegistry(tmp_path / "runs")
    run = SyntheticRun(fabricate_run(num_parts=2, epochs=2000, run_id="tok"), delay=0.25, out=None, run_id="tok")
    reg.add(run)
    port = free_port()
    server = serve(reg, port=port, threaded=True, token=TOKEN)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_until(lambda: _goto_status(page, url) is not None)
        assert _goto_status(page, url) == 403
        assert _goto_status(page, url + "?token=" + TOKEN) == 200
        page.wait_for_selector(".wb-epochs")
        first = _epochs_shown(page)
        wait_until(lambda: _epochs_shown(page) > first + 1)   # pushed over the WebSocket
        assert _goto_status(page, url) == 200                 # same browser: the cookie carries the token
        page.wait_for_selector(".wb-epochs")
        first = _epochs_shown(page)
        wait_until(lambda: _epochs_shown(page) > first + 1)
    finally:
        run.stop()
        server.stop()


def _goto_status(page, url):
    try:
        response = page.goto(url)
    except Exception:  # noqa: BLE001 - the server is not up yet
        return None
    return response.status if response is not None else None
