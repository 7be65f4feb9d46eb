"""The operator's HTTP servers for Kubernetes and Prometheus: liveness, readiness, metrics.

Live: the scheduling loop has turned recently and none of the operator's tasks has died (a
wedged loop is worth a restart; a slow API server is not, hence the generous limit).
Ready: the caches hold a full listing. Followers are ready too: they are warm standbys.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from aiohttp import web
from prometheus_client import start_http_server

from sluice.operator import metrics
from sluice.operator.loop import SchedulingLoop

Tasks = Callable[[], Sequence[asyncio.Task[object]]]
"""The operator's tasks as they are now (the manager starts more as the process goes on)."""


def stale_after(resync_seconds: float) -> float:
    return max(60.0, 6 * resync_seconds)


def health_app(loop: SchedulingLoop, tasks: Tasks) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        dead = [task.get_name() for task in tasks() if task.done()]
        if dead:
            return web.Response(status=500, text=f"stopped: {', '.join(dead)}\n")
        idle = time.monotonic() - loop.heartbeat
        if idle > stale_after(loop.settings.resync_seconds):
            return web.Response(status=500, text=f"loop idle for {idle:.0f}s\n")
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        if not loop.synced.is_set():
            return web.Response(status=503, text="caches not yet listed\n")
        return web.Response(text="ok\n")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


async def serve_health(loop: SchedulingLoop, tasks: Tasks, port: int) -> None:
    """/healthz and /readyz on ``port``, until cancelled."""
    runner = web.AppRunner(health_app(loop, tasks), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "0.0.0.0", port).start()
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


async def serve_metrics(port: int) -> None:
    """The Prometheus metrics on ``port`` (served by a thread of their own), until
    cancelled."""
    server, _ = start_http_server(port, registry=metrics.REGISTRY)
    try:
        await asyncio.Event().wait()
    finally:
        await asyncio.to_thread(server.shutdown)
        server.server_close()
