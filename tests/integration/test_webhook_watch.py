"""The Queue cache's list+watch against a small fake API server: relist on 410 Gone,
reconnect after a dropped connection."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aiohttp import web
from kubernetes import client
from webhook_harness import free_port

from sluice.webhooks.cache import QueueCache, QueueWatcher

PATH = "/apis/scheduling.sluice.dev/v1beta1/queues"


def q(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sluice.dev/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {"parent": "root"} if name != "root" else {},
    }


class FakeApiServer:
    def __init__(self) -> None:
        self.lists = 0
        self.watches = 0
        self.listings = [["root", "a"], ["root", "a", "b", "c"], ["root", "b", "c", "d"]]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") in ("true", "1", "True"):
            return await self.watch(request)
        names = self.listings[min(self.lists, len(self.listings) - 1)]
        self.lists += 1
        return web.json_response(
            {
                "apiVersion": "scheduling.sluice.dev/v1beta1",
                "kind": "QueueList",
                "metadata": {"resourceVersion": str(self.lists * 10)},
                "items": [q(n) for n in names],
            }
        )

    async def watch(self, request: web.Request) -> web.StreamResponse:
        self.watches += 1
        response = web.StreamResponse()
        await response.prepare(request)
        if self.watches == 1:
            await response.write(json.dumps({"type": "ADDED", "object": q("b")}).encode() + b"\n")
            gone = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
            await response.write(json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n")
            return response
        if self.watches == 2:
            await response.write(json.dumps({"type": "DELETED", "object": q("a")}).encode() + b"\n")
            request.transport.close()  # the connection drops mid-watch
            return response
        await asyncio.sleep(30)
        return response


async def wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


async def test_the_watch_relists_on_410_and_reconnects_after_a_drop() -> None:
    fake = FakeApiServer()
    app = web.Application()
    app.router.add_get(PATH, fake.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.2)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    config = client.Configuration()
    config.host = f"http://127.0.0.1:{port}"
    cache = QueueCache()
    watcher = QueueWatcher(client.ApiClient(config), cache, resync_seconds=5)
    watcher.start()
    try:
        await wait_for(lambda: cache.synced)
        await wait_for(lambda: fake.lists >= 2)  # relisted after 410 Gone
        await wait_for(lambda: fake.lists >= 3)  # relisted after the dropped connection
        await wait_for(lambda: set(cache.queues) == {"root", "b", "c", "d"})
    finally:
        watcher.stop()
        await runner.cleanup()
    assert fake.watches >= 2
