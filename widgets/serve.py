"""``workbench serve``: the dashboard as a web app; ``workbench report``: a saved run as one HTML file.

Both are registered through the ``workbench.commands`` entry point.

Serves on 127.0.0.1 by default and prints the URL. The dashboard starts runs and reads graph files by
path, so ``--address`` beyond loopback (``0.0.0.0``, a LAN address, a host name) requires a token, as
JupyterLab does: ``--token``, else ``$WORKBENCH_TOKEN``, else a random one (``secrets.token_urlsafe``);
the printed URL carries it (``?token=...``). A request is served when its URL holds the token, its
``Authorization: token ...`` header does, or its cookie (set by the first such request, so the page's
own requests and its WebSocket follow) does; any other gets 403. On loopback no token is asked unless
one is given. ``--demo`` starts a live demo run on the embedded Dask ``LocalCluster`` (runner ``dask``)
as soon as the page is up.

SIGTERM (``docker stop``, systemd) and Ctrl-C end the server within seconds: the runs are asked to stop
at their next epoch (a few seconds at most), the Dask runs still going are then aborted
(:func:`workbench.runtime.dask_runner.abort_runs`: their embedded clusters close with their worker
processes), and the process exits. A second signal skips the wait.

``workbench report RUN_DIR --out report.html`` writes every view of a saved run with its resources
inline (:meth:`widgets.RunView.save`): the file opens offline, e.g. attached to a review or an issue.

Example:
    $ workbench serve --port 5006 --demo
    Dashboard: http://127.0.0.1:5006/
    $ workbench serve --address 0.0.0.0 --port 5006
    Dashboard: http://myhost:5006/?token=Zr5...
    $ workbench report runs/sancus-20261122-120000-ab12 --out report.html
    Report: report.html
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import ipaddress
import os
import secrets
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional
from urllib.parse import quote

from bokeh.server.auth_provider import AuthProvider

from workbench._validation import ParamError, check_int, param_error

__all__ = ["register", "serve", "start_demo", "write_report", "DEMO_GRAPH", "TokenAuth", "resolve_token",
           "is_loopback"]

#: graph of the demo run: small enough for 2 cores, big enough to see bytes move
DEMO_GRAPH = "sbm:num_nodes=1500,num_blocks=6,avg_degree=8,num_features=32,seed=0"

_STOP_GRACE_S = 3.0    # on SIGTERM / Ctrl-C: how long runs get to stop at an epoch boundary before they are aborted
_ABORT_WAIT_S = 15.0   # then how long the aborted runs get to close their clusters


def register(subparsers: Any) -> None:
    """Add ``serve`` to the ``workbench`` command."""
    p = subparsers.add_parser(
        "serve", help="serve the dashboard (live views of runs, run control)",
        description="Serve the Panel dashboard. Binds 127.0.0.1 unless --address is given; beyond loopback "
                    "every request needs a token (--token, $WORKBENCH_TOKEN, or a random one printed in the "
                    "URL). SIGTERM or Ctrl-C stops the runs and exits within seconds.")
    p.add_argument("--port", type=int, default=5006, help="port (default 5006; 0 picks a free one)")
    p.add_argument("--address", default=None,
                   help="address to bind (default 127.0.0.1; e.g. 0.0.0.0 exposes the dashboard to the network, "
                        "behind a token)")
    p.add_argument("--token", default=None,
                   help="token a request must carry (?token=..., an 'Authorization: token ...' header, or the "
                        "cookie the first such request sets); default $WORKBENCH_TOKEN, else a random one when "
                        "--address is beyond loopback, else none")
    p.add_argument("--demo", action=argparse.BooleanOptionalAction, default=False,
                   help="start a live demo run on the embedded Dask LocalCluster")
    p.add_argument("--runs", default="runs", help="run log folder (default runs/)")
    p.add_argument("--show", action="store_true", help="open a browser tab")
    p.set_defaults(func=_main)

    r = subparsers.add_parser(
        "report", help="write every view of a saved run to one HTML file (opens offline)",
        description="Write the views of a saved run (progress, training curves, partition, staleness, "
                    "communication) to one HTML file with its JavaScript and CSS inline.")
    r.add_argument("run_dir", metavar="RUN_DIR", help="a run folder, e.g. runs/<run-id> (holds events.jsonl)")
    r.add_argument("--out", default="report.html", help="HTML file to write (default report.html)")
    r.add_argument("--title", default=None, help="page title (default: the run id)")
    r.set_defaults(func=_report_main)


def write_report(run_dir: str | os.PathLike, out: str | os.PathLike, *, title: Optional[str] = None) -> Path:
    """Write the views of the saved run in ``run_dir`` to ``out`` (one HTML file, resources inline).

    Raises:
        FileNotFoundError: ``run_dir`` holds no run log.
    """
    from widgets.store import RunStore
    from widgets.views import RunView

    folder = Path(run_dir)
    if not (folder / "events.jsonl").is_file():
        raise FileNotFoundError(f"The 'run_dir' parameter of workbench report must be a run folder holding "
                         f"events.jsonl. Got {str(run_dir)!r} instead.")
    view = RunView(RunStore.from_log(folder), runs_dir=folder.parent, live=False)
    return view.save(out, title=title)


def _report_main(args: argparse.Namespace) -> int:
    path = write_report(args.run_dir, args.out, title=args.title)
    print(f"Report: {path}", flush=True)
    return 0


def demo_config(epochs: int = 2000) -> Any:
    """The demo run's config: SANCUS if available (staleness to watch), else full-graph training.

    Long enough (about two minutes on two cores) to watch it happen."""
    from widgets.control import discover_recipes

    recipes = discover_recipes()
    for name in ("sancus", "full_graph"):
        if name in recipes:
            cfg = recipes[name]()   # the settings as on the command line (epochs: train.epochs), never dropped
            cfg = cfg.with_strings({"graph": DEMO_GRAPH, "epochs": str(epochs)})
            return cfg.replace(num_parts=None) if "num_parts" in type(cfg).field_names() else cfg
    return None


def start_demo(registry: Any, *, runner: str = "dask", workers: int = 2, epochs: int = 2000) -> threading.Thread:
    """Start the demo run on a background thread (a Dask cluster takes seconds to start).

    Falls back to a replay of a fabricated run when the runtime or the recipes are not available."""

    def go() -> None:
        try:
            cfg = demo_config(epochs)
            if cfg is None:
                raise RuntimeError("no recipe available")
            registry.launch(cfg, runner=runner, workers=workers)
        except Exception as exc:
            from widgets.synthetic import SyntheticRun

            print(f"workbench serve: demo run not started ({exc}); replaying a fabricated run instead",
                  file=sys.stderr)
            registry.add(SyntheticRun(out=str(registry.runs_dir or "runs"), num_parts=workers, epochs=epochs,
                                      delay=0.5, num_nodes=400))

    t = threading.Thread(target=go, daemon=True, name="workbench-demo")
    t.start()
    return t


class TokenAuth(AuthProvider):
    """Bokeh server authentication by a shared token, as JupyterLab's.

    A request is let in when its URL has ``?token=TOKEN``, its ``Authorization`` header is
    ``token TOKEN``, or it carries the cookie that the first such request set (HTTP only, SameSite
    strict, named after a digest of the token so that two servers on one host keep theirs apart): the
    page's own requests and its WebSocket follow with the cookie. Any other request gets 403; a
    WebSocket without it is refused by Panel's handler with 403 before the handshake.

    Args:
        token: the token (compared in constant time).
    """

    def __init__(self, token: str):
        self.token = token
        self.cookie_name = "workbench-token-" + hashlib.sha256(token.encode()).hexdigest()[:12]
        super().__init__()

    @property
    def get_user(self):
        return self._user

    @property
    def get_login_url(self):
        return self._refuse

    def _matches(self, given: Optional[str]) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def _user(self, handler: Any) -> Optional[str]:
        if self._matches(handler.get_cookie(self.cookie_name)):
            return "token"
        given = handler.get_query_argument("token", None)
        header = handler.request.headers.get("Authorization", "")
        if given is None and header[:6].lower() == "token ":
            given = header[6:].strip()
        if not self._matches(given):
            return None
        if handler.request.headers.get("Upgrade", "").lower() != "websocket":   # a handshake takes no cookie
            handler.set_cookie(self.cookie_name, self.token, httponly=True, samesite="Strict")
        return "token"

    def _refuse(self, handler: Any) -> str:
        from tornado.web import HTTPError

        raise HTTPError(403, reason="Forbidden: open the URL workbench serve printed (it ends in ?token=...)")


def is_loopback(address: Optional[str]) -> bool:
    """Whether ``address`` (a bind address; ``None`` is 127.0.0.1) keeps the server on this machine.

    Example:
        >>> [is_loopback(a) for a in (None, "127.0.0.1", "localhost", "::1", "0.0.0.0", "", "myhost")]
        [True, True, True, True, False, False, False]
    """
    if address is None or address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:   # a host name, or "" (every interface)
        return False


def resolve_token(address: Optional[str], token: Optional[str], env_token: Optional[str] = None) -> Optional[str]:
    """The token the server asks for: ``token`` (``--token``), else ``env_token`` (``$WORKBENCH_TOKEN``,
    empty counts as unset), else a random one when ``address`` is beyond loopback, else ``None``.

    Raises:
        ParamError: ``token`` is given but empty or not printable ASCII.

    Example:
        >>> resolve_token(None, None) is None, resolve_token("127.0.0.1", "s3cret")
        (True, 's3cret')
        >>> len(resolve_token("0.0.0.0", None)) >= 32   # secrets.token_urlsafe(32)
        True
    """
    if token is not None and not (token and token.isascii() and token.isprintable() and token.strip() == token):
        raise ParamError([param_error("token", "workbench serve",
                                      "a non-empty string of printable ASCII without surrounding spaces", token)])
    token = token or env_token or None
    if token is None and not is_loopback(address):
        token = secrets.token_urlsafe(32)
    return token


def serve(registry: Any, *, port: int = 5006, address: Optional[str] = None, show: bool = False,
          threaded: bool = False, token: Optional[str] = None) -> Any:
    """Start the Bokeh server for the dashboard; returns it (``threaded=True``: running on a thread).

    Args:
        registry: the runs the dashboard shows and starts (:class:`widgets.app.RunRegistry`).
        port: the port (0: a free one).
        address: the address to bind (default 127.0.0.1).
        show: open a browser tab (at the URL with the token, when there is one).
        threaded: serve on a thread and return at once.
        token: require this token of every request (:class:`TokenAuth`); needed beyond loopback.

    Raises:
        ParamError: ``address`` is beyond loopback and ``token`` is ``None``.
    """
    import panel as pn

    from widgets.app import make_app

    if token is None and not is_loopback(address):
        raise ParamError([param_error(
            "token", "serve", f"a token when 'address' is beyond loopback (address={address!r}: anyone who can "
                              "reach it could start runs and read files)", token)])
    host = "127.0.0.1" if address is None else address
    if _every_interface(host):
        origins = ["*"]   # any host name of this machine; the token (a SameSite cookie) guards the WebSocket
    else:
        origins = [f"{host}:{port}", f"localhost:{port}", f"127.0.0.1:{port}"] if port else ["*"]
    extra = {"auth_provider": TokenAuth(token)} if token is not None else {}
    server = pn.serve({"/": make_app(registry)}, port=port, address=host, show=show and token is None,
                      start=threaded, threaded=threaded, title="GNN workbench", websocket_origin=origins, **extra)
    if show and token is not None:
        import webbrowser

        loop = server.asyncio_loop if threaded else server.io_loop.asyncio_loop
        loop.call_soon_threadsafe(webbrowser.open, dashboard_urls(address, getattr(server, "port", port), token)[0])
    return server


def _every_interface(host: str) -> bool:
    return host in ("", "0.0.0.0", "::")


def dashboard_urls(address: Optional[str], port: int, token: Optional[str]) -> list[str]:
    """The URLs to print: the bound address (the host name for every interface, then 127.0.0.1)."""
    query = f"?token={quote(token, safe='')}" if token else ""
    host = "127.0.0.1" if address is None else address
    if _every_interface(host):
        return [f"http://{socket.gethostname()}:{port}/{query}", f"http://127.0.0.1:{port}/{query}"]
    if ":" in host:
        host = f"[{host}]"
    return [f"http://{host}:{port}/{query}"]


def _main(args: argparse.Namespace) -> int:
    from widgets.app import RunRegistry

    port = check_int(args.port, "port", "workbench serve", 0, 65535)
    if args.address is not None and not _every_interface(args.address):
        try:   # an unknown host name was a socket.gaierror traceback from inside the server
            socket.getaddrinfo(args.address, port)
        except OSError as exc:
            raise ParamError([param_error("--address", "workbench serve", f"an address or host name of this machine "
                                          f"({exc.strerror or exc})", args.address)]) from None
    token = resolve_token(args.address, args.token, os.environ.get("WORKBENCH_TOKEN"))
    registry = RunRegistry(args.runs)
    server = serve(registry, port=port, address=args.address, show=args.show, token=token)
    server.start()
    first, *more = dashboard_urls(args.address, server.port, token)
    print(f"Dashboard: {first}" + "".join(f"\n       or: {u}" for u in more), flush=True)
    if not is_loopback(args.address):
        print(f"workbench serve: listening on {args.address or 'every interface'}; requests without the "
              f"token get 403", file=sys.stderr, flush=True)
    stop = _SignalStop(server)
    try:
        demo = start_demo(registry) if args.demo else None
        grace_s = _STOP_GRACE_S
        try:
            server.io_loop.start()
        except KeyboardInterrupt:   # two signals before the loop stopped: no grace
            grace_s = 0.0
        _shutdown(registry, demo, grace_s=grace_s)
        try:
            server.stop()
        except Exception:
            pass
    finally:
        stop.restore()
    return 0


class _SignalStop:
    """SIGTERM and SIGINT (Ctrl-C): the first stops the server's loop (``_main`` then shuts down), a
    later one raises ``KeyboardInterrupt`` in the main thread (the shutdown stops waiting)."""

    def __init__(self, server: Any):
        self.server = server
        self.count = 0
        self.previous = {sig: signal.signal(sig, self) for sig in (signal.SIGTERM, signal.SIGINT)}

    def __call__(self, signum: int, frame: Any) -> None:
        self.count += 1
        if self.count > 1:
            raise KeyboardInterrupt
        self.server.io_loop.asyncio_loop.call_soon_threadsafe(self.server.io_loop.stop)

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def _shutdown(registry: Any, demo: Optional[threading.Thread], grace_s: float = _STOP_GRACE_S,
              abort_wait_s: float = _ABORT_WAIT_S) -> None:
    """Stop every live run: ask them (``grace_s`` in all), then abort the Dask runs still going and
    wait (``abort_wait_s``) for them to close their clusters. A second signal skips the waiting."""
    print("workbench serve: stopping runs…", file=sys.stderr, flush=True)
    deadline = time.monotonic() + grace_s
    try:
        if demo is not None:   # a demo run still being prepared registers itself first
            demo.join(timeout=grace_s)
        registry.stop_all(timeout=max(0.1, deadline - time.monotonic()))
    except KeyboardInterrupt:
        pass
    live = [s.handle for s in registry.live_stores() if s.handle is not None and not _handle_done(s.handle)]
    if not live:
        return
    from workbench.runtime.dask_runner import abort_runs

    for h in live:
        h.stop()
    abort_runs()
    deadline = time.monotonic() + abort_wait_s
    try:
        for h in live:
            _wait_quietly(h, max(0.1, deadline - time.monotonic()))
    except KeyboardInterrupt:
        pass


def _handle_done(handle: Any) -> bool:
    done = getattr(handle, "done", None)
    return bool(done()) if callable(done) else getattr(handle, "status", "") in ("finished", "failed", "stopped")


def _wait_quietly(handle: Any, timeout: float) -> None:
    try:
        handle.wait(timeout=timeout)
    except Exception:  # noqa: BLE001 - its error is in its run log; the server is going away
        pass


if __name__ == "__main__":  # pragma: no cover
    parser = argparse.ArgumentParser(prog="workbench")
    register(parser.add_subparsers())
    ns = parser.parse_args(["serve", *sys.argv[1:]])
    raise SystemExit(ns.func(ns))
