"""Running the operator: prime the caches, then Kopf's watches, the Lease and the loop."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from dataclasses import dataclass
from typing import Any

import kopf
from kubernetes import client
from prometheus_client import start_http_server

from sluice.api.constants import GROUP, PLURAL, QUEUE_LABEL, VERSION
from sluice.operator import metrics
from sluice.operator.handlers import build_registry
from sluice.operator.health import serve_health
from sluice.operator.leader import LeaseElector
from sluice.operator.loop import LoopSettings, SchedulingLoop
from sluice.operator.state import ClusterState

log = logging.getLogger("sluice.operator")


@dataclass
class OperatorOptions:
    namespace: str
    lease_name: str = "sluice-operator"
    identity: str = ""
    health_port: int = 8080
    metrics_port: int = 9090
    lease_seconds: int = 15
    renew_seconds: float = 5.0
    resync_seconds: float = 10.0
    max_queue_depth: int = 5


def prime(api: client.ApiClient, state: ClusterState) -> None:
    """One authoritative listing before the first cycle, so it never sees half a cluster."""
    serialize = api.sanitize_for_serialization
    objects = client.CustomObjectsApi(api)
    for item in objects.list_cluster_custom_object(GROUP, VERSION, PLURAL).get("items", []):
        state.on_queue("ADDED", item)
    batch = client.BatchV1Api(api)
    token: str | None = None
    while True:
        page = batch.list_job_for_all_namespaces(
            label_selector=QUEUE_LABEL, limit=500, _continue=token
        )
        for job in page.items:
            obj = serialize(job)
            obj.setdefault("apiVersion", "batch/v1")
            obj.setdefault("kind", "Job")
            state.on_job("ADDED", obj)
        token = page.metadata._continue if page.metadata else None
        if not token:
            break
    for node in client.CoreV1Api(api).list_node().items:
        state.on_node("ADDED", serialize(node))
    for pc in client.SchedulingV1Api(api).list_priority_class().items:
        state.on_priority_class("ADDED", serialize(pc))


async def run_operator(api: client.ApiClient, options: OperatorOptions) -> None:
    state = ClusterState(loop=asyncio.get_running_loop())
    identity = options.identity or f"{socket.gethostname()}-{os.getpid()}"
    elector = LeaseElector(
        api,
        options.namespace,
        options.lease_name,
        identity,
        lease_seconds=options.lease_seconds,
        renew_seconds=options.renew_seconds,
    )
    loop = SchedulingLoop(
        api,
        state,
        elector,
        LoopSettings(
            namespace=options.namespace,
            resync_seconds=options.resync_seconds,
            max_queue_depth=options.max_queue_depth,
        ),
        relist=lambda: prime(api, state),
    )
    tasks: list[asyncio.Task[Any]] = []
    health = await serve_health(loop, tasks, options.health_port) if options.health_port else None
    if options.metrics_port:
        start_http_server(options.metrics_port, registry=metrics.REGISTRY)
    stop = asyncio.Event()
    running = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        running.add_signal_handler(sig, stop.set)
    await asyncio.to_thread(prime, api, state)
    loop.synced.set()
    log.info(
        "event=started identity=%s queues=%d jobs=%d", identity, len(state.queues), len(state.jobs)
    )
    registry = build_registry(state, api)
    kopf_stop: asyncio.Future[None] = running.create_future()
    tasks += [
        asyncio.create_task(
            kopf.operator(
                registry=registry, standalone=True, clusterwide=True, stop_flag=kopf_stop
            ),
            name="kopf",
        ),
        asyncio.create_task(elector.run(), name="lease"),
        asyncio.create_task(loop.run(), name="loop"),
    ]
    waiter = asyncio.create_task(stop.wait())
    try:
        # Kopf takes SIGTERM/SIGINT over once it runs; its task ending is then the signal.
        done, _ = await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not waiter and not task.cancelled() and task.exception() is not None:
                log.error("event=task-failed task=%s error=%r", task.get_name(), task.exception())
    finally:
        log.info("event=stopping")
        if not kopf_stop.done():
            kopf_stop.set_result(None)
        for task in [waiter, *tasks[1:]]:
            task.cancel()
        await asyncio.gather(waiter, *tasks, return_exceptions=True)
        # Hand the Lease over at once instead of making a follower wait for it to expire.
        await asyncio.to_thread(elector.release)
        if health is not None:
            await health.cleanup()
        log.info("event=stopped")
