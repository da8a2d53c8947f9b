"""Browser tests: Playwright driving Debian's chromium (no browser download), headless, no sandbox."""

from __future__ import annotations

import inspect
import os
import socket
import time
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/ui/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.ui)


@pytest.fixture(scope="session")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed (the Makefile installs Debian's chromium through apt)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                    "--disable-component-update", "--disable-sync", "--no-first-run"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1500, "height": 1100})
    # a bound, not a speed: `make test` runs the browser tests beside the rest of the suite on two cores, where a
    # dashboard's first page (BokehJS, the form) once took over 30 s to show its "Start run" button
    context.set_default_timeout(90_000)
    # no internet here: refuse external requests at once instead of waiting for them (template web fonts)
    context.route("**/*", lambda route: route.continue_() if "127.0.0.1" in route.request.url else route.abort())
    pg = context.new_page()
    yield pg
    context.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(tmp_path):
    """``served(registry) -> url``: the dashboard on a free port of 127.0.0.1, stopped after the test."""
    from widgets.serve import serve

    servers = []

    def _serve(registry):
        port = free_port()
        servers.append(serve(registry, port=port, threaded=True))
        wait_listening(port)
        return f"http://127.0.0.1:{port}/"

    yield _serve
    for s in servers:
        try:
            s.stop()
        except RuntimeError:
            pass


def wait_listening(port: int, timeout: float = 60.0) -> None:
    """Wait until something accepts connections on 127.0.0.1:``port``: a server started on a thread returns before
    it listens, and a page opened in between is refused (``net::ERR_CONNECTION_REFUSED``, seen on a loaded CI)."""
    def accepts():
        with socket.socket() as s:
            s.settimeout(1.0)
            return s.connect_ex(("127.0.0.1", port)) == 0
    wait_until(accepts, timeout=timeout, what=lambda: f"nothing listens on 127.0.0.1:{port}")


def wait_until(cond, timeout=60.0, interval=0.1, what=None):
    """Poll ``cond`` until it is true; fail naming the condition's source line (or ``what()``) when it never is."""
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(interval)
    if what is not None:
        what = what()
    else:
        try:
            what = inspect.getsource(cond).strip()
        except (OSError, TypeError):
            what = repr(cond)
    raise AssertionError(f"condition not met within {timeout} s: {what}")


def plotted_rows(view) -> int:
    """Rows in the Bokeh data sources of a view's visible figures: what the server sent the page."""
    import panel as pn
    from bokeh.models import ColumnDataSource

    total = 0
    for pane in view._layout.select(pn.pane.HoloViews):
        if pane.object is None or not pane.visible:
            continue
        for plot, _ in list(pane._plots.values()):
            for cds in plot.state.select({"type": ColumnDataSource}):
                total += max((len(col) for col in cds.data.values()), default=0)
    return total


def open_tab(page, reg, session, title: str, attr: str):
    """Click the tab ``title`` of the served run view (whose ``view.<attr>`` holds it), reloading the page once
    if the tab inserted on the server did not reach it (seen once in the full suite on a loaded machine; root
    cause open; a reload, as a user would do, shows it). Returns the session whose page shows the tab."""
    header = page.get_by_text(title, exact=True)
    try:
        wait_until(lambda: header.count() > 0, timeout=30)
    except (AssertionError, pytest.fail.Exception):
        page.reload()
        page.wait_for_selector(".wb-epochs")
        old = session
        wait_until(lambda: any(s is not old and s.view is not None and getattr(s.view, attr) is not None
                               for s in list(reg.sessions)))
        session = next(s for s in list(reg.sessions) if s is not old and s.view is not None)
        wait_until(lambda: header.count() > 0, timeout=30)
    header.first.click()
    return session


def guard_requests(context, allowed=None) -> tuple[list[str], list[str]]:
    """Route every request of ``context``: continue those ``allowed(url)`` accepts (default: to 127.0.0.1),
    abort the rest. Returns ``(requests, external)``: every URL asked for, and those refused (a test of an
    offline page asserts ``external == []``)."""
    from urllib.parse import urlparse

    allowed = allowed or (lambda url: urlparse(url).hostname == "127.0.0.1")
    requests: list[str] = []
    external: list[str] = []

    def route(r):
        requests.append(r.request.url)
        if allowed(r.request.url):
            r.continue_()
        else:
            external.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    return requests, external


def painted_pixels(page, colors: dict[str, str]) -> dict[str, int]:
    """Pixels of each colour (``#rrggbb``) on the page's canvases (Bokeh draws in shadow roots)."""
    return page.evaluate("""(colors) => {
        const want = Object.entries(colors).map(([k, c]) =>
            [k, parseInt(c.slice(1, 3), 16), parseInt(c.slice(3, 5), 16), parseInt(c.slice(5, 7), 16)]);
        const counts = Object.fromEntries(want.map(([k]) => [k, 0]));
        const walk = (root) => {
            for (const el of root.querySelectorAll('*')) {
                if (el.tagName === 'CANVAS' && el.width > 50 && el.height > 50) {
                    const d = el.getContext('2d').getImageData(0, 0, el.width, el.height).data;
                    for (let i = 0; i < d.length; i += 4)
                        for (const [k, r, g, b] of want)
                            if (Math.abs(d[i] - r) < 4 && Math.abs(d[i + 1] - g) < 4 && Math.abs(d[i + 2] - b) < 4) counts[k]++;
                }
                if (el.shadowRoot) walk(el.shadowRoot);
            }
        };
        walk(document);
        return counts;
    }""", colors)
