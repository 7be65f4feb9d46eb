"""The dashboard's web server: the page, its JSON, and a server-sent event stream that tells
open pages when something changed (at most every ``PUSH_INTERVAL`` seconds, so a burst of
thousands of job events costs each page one refresh).

Read-only by construction: it serves GET requests only, from a DashboardView.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from importlib import resources

from aiohttp import web

from sluice.dashboard.domains import DOMAINS_LISTED
from sluice.dashboard.view import DashboardView

PUSH_INTERVAL = 0.5
VIEW_KEY: web.AppKey[DashboardView] = web.AppKey("view", DashboardView)
CLIENTS_KEY: web.AppKey[set[asyncio.Event]] = web.AppKey("clients", set)

STATIC = ("app.js", "app.css")


def static_text(name: str) -> str:
    return resources.files("sluice.dashboard").joinpath("static", name).read_text()


def build_app(view: DashboardView) -> web.Application:
    app = web.Application()
    app[VIEW_KEY] = view
    clients: set[asyncio.Event] = set()  # one per open event stream
    app[CLIENTS_KEY] = clients
    loop = asyncio.get_event_loop()

    def wake_all() -> None:
        for client in clients:
            client.set()

    def changed() -> None:
        # Watches may call from their own threads.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(wake_all)

    view.listeners.append(changed)
    app.router.add_get("/", page)
    app.router.add_get("/static/{name}", asset)
    app.router.add_get("/api/tree", tree)
    app.router.add_get("/api/queues/{queue}/jobs", jobs)
    app.router.add_get("/api/topology", domains)
    app.router.add_get("/api/events", events)
    return app


async def page(_: web.Request) -> web.Response:
    return web.Response(text=static_text("index.html"), content_type="text/html")


async def asset(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in STATIC:
        raise web.HTTPNotFound()
    kind = "application/javascript" if name.endswith(".js") else "text/css"
    return web.Response(text=static_text(name), content_type=kind)


async def tree(request: web.Request) -> web.Response:
    return web.json_response(request.app[VIEW_KEY].tree(), dumps=json.dumps)


async def domains(request: web.Request) -> web.Response:
    # ?show=<topology>:<level> (repeated) picks the level listed; ?all=1 lists every domain.
    shown = dict(one.partition(":")[::2] for one in request.query.getall("show", []))
    limit = 1_000_000 if request.query.get("all") == "1" else DOMAINS_LISTED
    view = request.app[VIEW_KEY]
    # Off the event loop: it goes over every pod (the operator's watches share the loop).
    found = await asyncio.to_thread(view.domains, shown, limit)
    return web.json_response(found)


async def jobs(request: web.Request) -> web.Response:
    try:
        offset = int(request.query.get("offset", "0"))
        limit = int(request.query.get("limit", "50"))
    except ValueError:
        raise web.HTTPBadRequest(text="offset and limit are integers") from None
    found = request.app[VIEW_KEY].jobs_page(request.match_info["queue"], offset, limit)
    return web.json_response(found)


async def events(request: web.Request) -> web.StreamResponse:
    """The event stream: the view's version whenever it changed, at most every
    ``PUSH_INTERVAL``, and a comment every 15 s that keeps proxies from closing it."""
    stream = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await stream.prepare(request)
    view, clients = request.app[VIEW_KEY], request.app[CLIENTS_KEY]
    wake = asyncio.Event()
    clients.add(wake)
    sent = -1
    try:
        while True:
            if view.version != sent:
                sent = view.version
                await stream.write(f"data: {sent}\n\n".encode())
            wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), 15)
            if view.version == sent:
                await stream.write(b": keep-alive\n\n")
            await asyncio.sleep(PUSH_INTERVAL)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        clients.discard(wake)
    return stream


async def serve(view: DashboardView, host: str, port: int, stop: asyncio.Event) -> None:
    runner = web.AppRunner(build_app(view), access_log=None, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
