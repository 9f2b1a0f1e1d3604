"""The page's server: starlette on uvicorn, updates pushed as server-sent events (sse-starlette).

One poller per server reads the campaign (``CampaignView``) every ``POLL_S``; each open page
gets the snapshot whenever it changed (event ``state``) and the running sample every
``LIVE_S`` (event ``live``). The campaign's files are only read: the runner never waits for
the watcher, and a watcher that dies leaves nothing behind.

Routes: ``/`` the page; ``/static/*`` its script, style and plotly.min.js (from the installed
plotly package: no CDN, works offline); ``/api/state`` and ``/api/live`` the same data as JSON;
``/events`` the event stream.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import uvicorn
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from harness.errors import ConfigError
from harness.resources import package_path
from harness.watch import LOOPBACK
from harness.watch.state import CampaignView, open_view

log = logging.getLogger("mplab.watch")

#: How often the store is checked for changes (stat calls; reading only what was appended).
POLL_S = 0.1
#: How often the running sample's view is refreshed and pushed (when it changed).
LIVE_S = 1.0
PAGE = package_path("harness", "watch", "page")
PLOTLY_JS = package_path("plotly", "package_data", "plotly.min.js")
STATIC = {"watch.js": (PAGE / "watch.js", "text/javascript"), "watch.css": (PAGE / "watch.css", "text/css"),
          "plotly.min.js": (PLOTLY_JS, "text/javascript")}


class Hub:
    """The latest snapshot and live view, refreshed by one poller and read by every page."""

    def __init__(self, view: CampaignView) -> None:
        self.view = view
        self.state: str = ""
        self.state_version = -1
        self.live: str = json.dumps({"running": False})
        self.live_version = 0
        self._live_body = ""
        self.stopping = asyncio.Event()

    def refresh(self, with_live: bool) -> None:
        """Poll the store (in a worker thread: reading never blocks the pages' connections)."""
        if self.view.poll() or self.state_version < 0:
            self.state = json.dumps(self.view.snapshot(), default=str)
            self.state_version = self.view.version
        if with_live:
            live = self.view.live()
            body = json.dumps({k: v for k, v in live.items() if k != "now"}, default=str)
            if body != self._live_body:  # an idle campaign pushes nothing
                self._live_body = body
                self.live = json.dumps(live, default=str)
                self.live_version += 1

    async def run(self) -> None:
        ticks = 0
        while not self.stopping.is_set():
            await asyncio.to_thread(self.refresh, ticks % round(LIVE_S / POLL_S) == 0)
            ticks += 1
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), POLL_S)

    async def events(self) -> AsyncIterator[ServerSentEvent]:
        sent_state, sent_live = -2, -1
        while not self.stopping.is_set():
            if self.state_version != sent_state and self.state:
                sent_state = self.state_version
                yield ServerSentEvent(data=self.state, event="state")
            if self.live_version != sent_live:
                sent_live = self.live_version
                yield ServerSentEvent(data=self.live, event="live")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), POLL_S / 2)


def build_app(hub: Hub) -> Starlette:
    """The starlette app serving ``hub``'s campaign."""

    async def page(request) -> Response:
        return FileResponse(PAGE / "index.html", media_type="text/html")

    async def static(request) -> Response:
        found = STATIC.get(request.path_params["name"])
        if found is None:
            return Response("not found", status_code=404)
        return FileResponse(found[0], media_type=found[1], headers={"Cache-Control": "max-age=3600"})

    async def api_state(request) -> Response:
        return Response(hub.state, media_type="application/json")

    async def api_live(request) -> Response:
        return Response(hub.live, media_type="application/json")

    async def events(request) -> Response:
        return EventSourceResponse(hub.events(), ping=15)

    async def favicon(request) -> Response:
        return Response(status_code=204)  # no icon: a 404 would be a failed request in the browser

    @contextlib.asynccontextmanager
    async def lifespan(app):
        task = asyncio.create_task(hub.run())
        try:
            yield
        finally:
            hub.stopping.set()
            await task

    return Starlette(routes=[Route("/", page), Route("/static/{name}", static), Route("/api/state", api_state),
                             Route("/api/live", api_live), Route("/events", events),
                             Route("/favicon.ico", favicon)], lifespan=lifespan)


class _Server(uvicorn.Server):
    """uvicorn's server that ends the open event streams when SIGINT/SIGTERM comes, and returns.

    uvicorn re-raises a captured signal once it has shut down (the process would then die by
    SIGTERM, or raise KeyboardInterrupt into the command line's "resume your campaign" message);
    a watcher that stopped cleanly just returns, naming the signal.
    """

    hub: Hub
    stopped_by: int | None = None

    def handle_exit(self, sig: int, frame) -> None:
        self.hub.stopping.set()  # the streams end, so the graceful shutdown does not wait for them
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C: do not wait for open connections
        self.stopped_by = sig
        self.should_exit = True


def bind_socket(listen: str, port: int) -> socket.socket:
    """A listening socket on ``listen:port`` (port 0: any free one); ``ConfigError`` (exit 2) if it cannot bind."""
    family = socket.AF_INET6 if ":" in listen else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((listen, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {listen} port {port}: {exc.strerror} (give another --port, or 0 for "
                          "any free one)", field="--port") from None
    sock.listen(64)
    return sock


def serve(view: CampaignView, sock: socket.socket, on_ready=None) -> int | None:
    """Serve until SIGINT or SIGTERM, then return the signal that stopped it."""
    hub = Hub(view)
    config = uvicorn.Config(build_app(hub), log_level="warning", lifespan="on", timeout_graceful_shutdown=3,
                            access_log=False)
    server = _Server(config)
    server.hub = hub
    if on_ready is not None:
        on_ready()
    asyncio.run(server.serve(sockets=[sock]))
    return server.stopped_by


def start_watch(run_dir: Path, port: int, listen: str, announce=print) -> None:
    """Serve ``run_dir``'s page on ``listen:port`` until SIGINT/SIGTERM."""
    view = open_view(run_dir)
    if listen not in (LOOPBACK, "::1", "localhost"):
        print(f"warning: listening on {listen}: the page has no authentication; anyone who can reach this address "
              "sees the campaign", file=sys.stderr)
    sock = bind_socket(listen, port)
    host, bound = sock.getsockname()[:2]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{bound}/"

    def ready() -> None:
        announce(f"watching campaign {view.manifest.get('campaign')} at {url} (read-only; Ctrl-C stops)")
        sys.stdout.flush()

    stopped_by = serve(view, sock, on_ready=ready)
    if stopped_by is not None:
        announce(f"mplab watch stopped by {signal.Signals(stopped_by).name} (the campaign was only read)")
