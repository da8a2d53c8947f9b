"""``workbench serve``: a token beyond loopback (as JupyterLab), 403 without it, and a server that ends
within seconds on SIGTERM or Ctrl-C, its demo run stopped and its Dask worker processes gone."""

from __future__ import annotations

import http.client
import http.cookiejar
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import psutil
import pytest

from widgets.app import RunRegistry
from widgets.serve import DEMO_GRAPH, TokenAuth, dashboard_urls, demo_config, is_loopback, resolve_token, serve
from workbench._validation import ParamError


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _status(url: str, opener=None, headers: dict | None = None) -> int:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with (opener or urllib.request.build_opener()).open(request, timeout=10) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as err:
        return err.code


def _wait_status(url: str, timeout: float = 60.0) -> int:
    """The status of ``url`` once the server answers at all."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return _status(url)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _websocket_handshake(port: int, headers: dict | None = None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/ws", headers={"Connection": "Upgrade", "Upgrade": "websocket",
                                            "Sec-WebSocket-Version": "13", "Origin": f"http://127.0.0.1:{port}",
                                            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", **(headers or {})})
        return conn.getresponse().status
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------------------
# When a token is asked for
# ---------------------------------------------------------------------------------------------------------


def test_loopback_addresses():
    assert all(is_loopback(a) for a in (None, "127.0.0.1", "127.0.0.2", "localhost", "::1"))
    assert not any(is_loopback(a) for a in ("0.0.0.0", "::", "", "192.168.1.5", "myhost.example.org"))


def test_a_token_is_required_beyond_loopback_only():
    assert resolve_token(None, None) is None and resolve_token("127.0.0.1", None, "") is None   # today's default
    assert resolve_token("127.0.0.1", "mine") == "mine"                                          # asked for
    assert resolve_token(None, None, env_token="from-env") == "from-env"                        # $WORKBENCH_TOKEN
    assert resolve_token("0.0.0.0", "mine", env_token="from-env") == "mine"                     # --token wins
    made = {resolve_token("0.0.0.0", None) for _ in range(2)}
    assert len(made) == 2 and all(len(t) >= 32 for t in made)                                   # random, new each time
    assert len(resolve_token("myhost", None, env_token="")) >= 32


@pytest.mark.parametrize("bad", ["", " padded ", "tab\there", "naïve"])
def test_a_bad_token_is_refused_with_the_template_message(bad):
    with pytest.raises(ParamError, match=r"The 'token' parameter of workbench serve must be a non-empty string "
                                         r"of printable ASCII without surrounding spaces\. Got .* instead\."):
        resolve_token("0.0.0.0", bad)


def test_serve_beyond_loopback_without_a_token_is_refused(tmp_path):
    with pytest.raises(ParamError, match=r"The 'token' parameter of serve must be a token when 'address' is "
                                         r"beyond loopback .*Got None instead\."):
        serve(RunRegistry(tmp_path), port=0, address="0.0.0.0")


def test_printed_urls_carry_the_token():
    assert dashboard_urls(None, 5006, None) == ["http://127.0.0.1:5006/"]
    assert dashboard_urls("::1", 5006, "a/b") == ["http://[::1]:5006/?token=a%2Fb"]
    every = dashboard_urls("0.0.0.0", 5006, "t0k")
    assert every == [f"http://{socket.gethostname()}:5006/?token=t0k", "http://127.0.0.1:5006/?token=t0k"]


# ---------------------------------------------------------------------------------------------------------
# The token at work (threaded servers on free ports, stopped after each test)
# ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def token_server(tmp_path):
    """``start(address) -> port``: the dashboard behind the token ``t0k-secret``."""
    servers = []

    def start(address=None):
        port = _free_port("0.0.0.0" if address == "0.0.0.0" else "127.0.0.1")
        servers.append(serve(RunRegistry(tmp_path), port=port, address=address, threaded=True, token="t0k-secret"))
        return port

    yield start
    for s in servers:
        try:
            s.stop()
        except RuntimeError:
            pass


def test_requests_without_the_token_get_403_and_the_token_lets_the_page_in(token_server):
    port = token_server()
    base = f"http://127.0.0.1:{port}/"
    assert _wait_status(base) == 403
    assert _status(base + "?token=wrong") == 403
    assert _status(base, headers={"Authorization": "token wrong"}) == 403
    assert _websocket_handshake(port) == 403
    assert _status(base, headers={"Authorization": "token t0k-secret"}) == 200
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    assert _status(base + "?token=t0k-secret", opener=browser) == 200
    cookie = next(c for c in jar if c.name == TokenAuth("t0k-secret").cookie_name)
    assert cookie.has_nonstandard_attr("HttpOnly")
    assert _status(base, opener=browser) == 200                 # later requests: the cookie is enough
    ws = _websocket_handshake(port, {"Cookie": f"{cookie.name}={cookie.value}"})
    assert ws != 403                                            # past the token (Bokeh then wants its session token)


def test_bound_to_every_interface_the_token_guards_it(token_server):
    port = token_server("0.0.0.0")
    base = f"http://127.0.0.1:{port}/"
    assert _wait_status(base) == 403
    assert _status(base + "?token=t0k-secret") == 200


def test_loopback_without_a_token_serves_as_before(tmp_path):
    port = _free_port()
    server = serve(RunRegistry(tmp_path), port=port, threaded=True)
    try:
        assert _wait_status(f"http://127.0.0.1:{port}/") == 200
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------------------------
# Signals: the command in a subprocess
# ---------------------------------------------------------------------------------------------------------


def _start_command(tmp_path, *args: str, token: str = "sig-token"):
    port = _free_port()
    env = {**os.environ, "WORKBENCH_TOKEN": token, "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "workbench", "serve", "--port", str(port), "--runs",
                             str(tmp_path / "runs"), *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert _wait_status(f"http://127.0.0.1:{port}/?token={token}", timeout=90) == 200
    except BaseException:
        proc.kill()
        print(proc.communicate()[0])
        raise
    return proc, port


def _end(proc, sig, timeout: float) -> tuple[float, str]:
    """Send ``sig``; seconds until ``proc`` exited (killed and failed after ``timeout``) and its output."""
    t0 = time.monotonic()
    proc.send_signal(sig)
    try:
        out = proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        out = proc.communicate()[0]
        pytest.fail(f"still running {timeout:g} s after {sig.name}:\n{out}")
    return time.monotonic() - t0, out


def test_ctrl_c_ends_the_server(tmp_path):
    proc, port = _start_command(tmp_path)
    took, out = _end(proc, signal.SIGINT, 10)
    assert proc.returncode == 0, out
    assert f"Dashboard: http://127.0.0.1:{port}/?token=sig-token" in out    # the URL carries the token


@pytest.mark.slow
def test_sigterm_ends_the_demo_run_and_its_workers_within_seconds(tmp_path):
    proc, _ = _start_command(tmp_path, "--demo")
    try:
        deadline = time.monotonic() + 120   # wait until the demo run trains on its Dask workers
        while not any('"type": "epoch"' in p.read_text() for p in (tmp_path / "runs").glob("*/events.jsonl")):
            assert time.monotonic() < deadline and proc.poll() is None, "the demo run did not start"
            time.sleep(0.2)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 2   # the worker processes (and multiprocessing's resource tracker)
    except BaseException:
        proc.kill()
        raise
    took, out = _end(proc, signal.SIGTERM, 10)
    assert proc.returncode == 0, out
    _, alive = psutil.wait_procs(children, timeout=2)
    assert not alive, f"left behind: {alive}"
    (log,) = (tmp_path / "runs").glob("*/events.jsonl")
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["type"] == "run_finished" and last["status"] == "stopped", last
    print(f"SIGTERM to exit: {took:.1f} s")


def test_the_demo_run_trains_the_epochs_it_is_given():
    """The demo's epochs reach the run (train.epochs), on the demo graph: a 30-epoch demo ended within seconds, before
    the dashboard's stop could reach it (its epochs had been dropped since epochs moved into the train section)."""
    cfg = demo_config(epochs=123)
    assert cfg.train.epochs == 123 and cfg.graph == DEMO_GRAPH and cfg.num_parts is None
    assert demo_config().train.epochs == 2000


def test_an_address_that_does_not_resolve_is_one_message(capsys):
    """``--address bogus.invalid`` (RFC 6761: never resolves) was a socket.gaierror traceback from the server."""
    from workbench.cli import main

    assert main(["serve", "--address", "bogus.invalid", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "The '--address' parameter of workbench serve must be an address or host name of this machine" in err
    assert "'bogus.invalid'" in err and "Traceback" not in err
