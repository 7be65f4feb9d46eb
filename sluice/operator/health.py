"""Liveness and readiness over HTTP.

Live: the scheduling loop has turned recently and none of the operator's tasks has died (a
wedged loop is worth a restart; a slow API server is not, hence the generous limit).
Ready: the caches hold a full listing. Followers are ready too: they are warm standbys.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from aiohttp import web

from sluice.operator.loop import SchedulingLoop


def stale_after(resync_seconds: float) -> float:
    return max(60.0, 6 * resync_seconds)


def health_app(loop: SchedulingLoop, tasks: Sequence[asyncio.Task[object]]) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        dead = [task.get_name() for task in tasks if task.done()]
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


async def serve_health(
    loop: SchedulingLoop, tasks: Sequence[asyncio.Task[object]], port: int
) -> web.AppRunner:
    runner = web.AppRunner(health_app(loop, tasks), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", port).start()
    return runner
