"""Liveness and readiness: ready once listed, dead when a task stopped or the loop stalled."""

from __future__ import annotations

import asyncio
import time

from aiohttp.test_utils import TestClient, TestServer
from kubernetes import client

from sluice.operator.health import health_app, stale_after
from sluice.operator.loop import LoopSettings, SchedulingLoop
from sluice.operator.state import ClusterState


class Elector:
    is_leader = False

    def holds(self) -> bool:
        return False


async def test_ready_after_the_listing_and_live_until_something_stops() -> None:
    settings = LoopSettings(namespace="ns", resync_seconds=10)
    loop = SchedulingLoop(client.ApiClient(), ClusterState(), Elector(), settings)  # type: ignore[arg-type]
    blocker = asyncio.Event()
    tasks: list[asyncio.Task[object]] = [asyncio.create_task(blocker.wait(), name="kopf")]
    async with TestClient(TestServer(health_app(loop, lambda: tasks))) as http:
        assert (await http.get("/readyz")).status == 503
        loop.synced.set()
        assert (await http.get("/readyz")).status == 200
        assert (await http.get("/healthz")).status == 200

        loop.heartbeat = time.monotonic() - stale_after(10) - 1
        stalled = await http.get("/healthz")
        assert stalled.status == 500 and "loop idle" in await stalled.text()

        loop.heartbeat = time.monotonic()
        blocker.set()
        await tasks[0]
        stopped = await http.get("/healthz")
        assert stopped.status == 500 and "kopf" in await stopped.text()
