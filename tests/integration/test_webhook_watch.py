"""The Queue cache's list-and-watch against a small fake API server: a list again on 410 Gone,
a watch resumed from the last version seen after a dropped connection."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aiohttp import web
from kubernetes import client
from webhook_harness import free_port

from sluice.api.constants import QUEUE_LABEL
from sluice.api.workloads.jobset import JOBSET
from sluice.webhooks.cache import KubeFacts, QueueCache, QueueWatcher

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
        self.resumed_from: list[str] = []
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
        self.resumed_from.append(request.query.get("resourceVersion", ""))
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
        await wait_for(lambda: fake.lists >= 2)  # listed again after 410 Gone
        await wait_for(lambda: fake.watches >= 3)  # watching again after the dropped connection
        await wait_for(lambda: set(cache.queues) == {"root", "b", "c"})
    finally:
        watcher.stop()
        await runner.cleanup()
    assert fake.lists == 2  # the drop cost no listing: the watch resumed where it was
    assert fake.resumed_from[-1] == "1"  # the version of the last event seen


class FakeJobsAndNamespaces:
    """The two questions KubeFacts asks the API server, answered from lists a test edits."""

    def __init__(self) -> None:
        self.jobs: list[dict[str, Any]] = []
        self.labels: dict[str, str] = {}
        self.job_queries: list[dict[str, str]] = []
        self.queues: dict[str, dict[str, Any]] = {}

    async def list_jobs(self, request: web.Request) -> web.Response:
        self.job_queries.append(dict(request.query))
        selector = request.query.get("labelSelector", "")
        queue = selector.removeprefix("sluice.dev/queue-name=")
        matching = [j for j in self.jobs if j["metadata"]["labels"].get(QUEUE_LABEL) == queue]
        start = int(request.query.get("continue") or 0)
        limit = int(request.query.get("limit") or len(matching) or 1)
        page = matching[start : start + limit]
        more = start + limit < len(matching)
        return web.json_response(
            {
                "apiVersion": "batch/v1",
                "kind": "JobList",
                "metadata": {"continue": str(start + limit) if more else ""},
                "items": page,
            }
        )

    async def read_namespace(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name != "ns":
            status = {"kind": "Status", "code": 404, "reason": "NotFound", "message": "not found"}
            return web.json_response(status, status=404)
        labels = {"sluice.dev/default-queue": self.labels[name]} if name in self.labels else {}
        return web.json_response(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
        )

    async def read_queue(self, request: web.Request) -> web.Response:
        queue = self.queues.get(request.match_info["name"])
        if queue is None:
            status = {"kind": "Status", "code": 404, "reason": "NotFound", "message": "not found"}
            return web.json_response(status, status=404)
        return web.json_response(queue)


def fake_job(name: str, queue: str, finished: bool) -> dict[str, Any]:
    conditions = [{"type": "Complete", "status": "True"}] if finished else []
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ns", "labels": {QUEUE_LABEL: queue}},
        "spec": {"template": {"spec": {"containers": []}}},
        "status": {"conditions": conditions},
    }


async def test_cluster_facts_from_the_api_server() -> None:
    fake = FakeJobsAndNamespaces()
    app = web.Application()
    app.router.add_get("/apis/batch/v1/jobs", fake.list_jobs)
    app.router.add_get("/api/v1/namespaces/{name}", fake.read_namespace)
    app.router.add_get("/apis/scheduling.sluice.dev/v1beta1/queues/{name}", fake.read_queue)
    runner = web.AppRunner(app, shutdown_timeout=0.2)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    config = client.Configuration()
    config.host = f"http://127.0.0.1:{port}"
    facts = KubeFacts(client.ApiClient(config))
    try:
        # A queue the cache has not seen: read as stored, never remembered missing.
        assert await facts.stored_queue("dept") is None
        fake.queues["dept"] = {"metadata": {"name": "dept"}, "spec": {"parent": "root"}}
        assert await facts.stored_queue("dept") == fake.queues["dept"]
        # Finished jobs do not hold a queue, however many pages of them come first.
        fake.jobs = [fake_job(f"done-{i}", "team", True) for i in range(150)]
        assert await facts.queue_holds_jobs("team") is False
        fake.jobs.append(fake_job("running", "team", False))
        assert await facts.queue_holds_jobs("team") is True
        assert fake.job_queries[0]["labelSelector"] == f"{QUEUE_LABEL}=team"
        assert await facts.queue_holds_jobs("other") is False
        # A namespace labelled after a first look is seen at once.
        assert await facts.namespace_default_queue("ns") is None
        fake.labels["ns"] = "team"
        assert await facts.namespace_default_queue("ns") == "team"
        assert await facts.namespace_default_queue("missing-ns") is None
    finally:
        await runner.cleanup()


async def test_a_queue_holds_the_workloads_of_every_gated_kind() -> None:
    fake = FakeJobsAndNamespaces()
    jobsets: list[dict[str, Any]] = []

    async def list_jobsets(request: web.Request) -> web.Response:
        queue = request.query.get("labelSelector", "").removeprefix(f"{QUEUE_LABEL}=")
        items = [j for j in jobsets if j["metadata"]["labels"].get(QUEUE_LABEL) == queue]
        return web.json_response({"kind": "JobSetList", "metadata": {}, "items": items})

    app = web.Application()
    app.router.add_get("/apis/batch/v1/jobs", fake.list_jobs)
    app.router.add_get("/apis/jobset.x-k8s.io/v1alpha2/jobsets", list_jobsets)
    runner = web.AppRunner(app, shutdown_timeout=0.2)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    config = client.Configuration()
    config.host = f"http://127.0.0.1:{port}"
    facts = KubeFacts(client.ApiClient(config), workloads=[JOBSET])
    try:
        fake.jobs = [fake_job("done", "team", True)]
        assert await facts.queue_holds_jobs("team") is False
        sweep = {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "sweep", "namespace": "ns", "labels": {QUEUE_LABEL: "team"}},
            "spec": {"replicatedJobs": []},
            "status": {"conditions": [{"type": "Completed", "status": "True"}]},
        }
        jobsets.append(sweep)
        assert await facts.queue_holds_jobs("team") is False  # finished, as a JobSet says it
        sweep["status"] = {}
        assert await facts.queue_holds_jobs("team") is True
    finally:
        await runner.cleanup()
