"""Running the operator: prime the caches, then Kopf's watches, the Lease, the scheduling loop
and, in the Lease holder only, Kopf's Queue handlers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import kopf
from kubernetes import client
from prometheus_client import start_http_server

from sluice.api.constants import CONFIGMAP_NAME, GROUP, PLURAL, QUEUE_LABEL, VERSION
from sluice.dashboard.server import serve as serve_dashboard
from sluice.dashboard.view import DashboardView
from sluice.operator import metrics
from sluice.operator.executor import WRITERS
from sluice.operator.handlers import build_registry
from sluice.operator.health import serve_health
from sluice.operator.leader import LeaseElector
from sluice.operator.loop import LoopSettings, SchedulingLoop
from sluice.operator.queue_handlers import build_queue_registry
from sluice.operator.state import ClusterState

log = logging.getLogger("sluice.operator")


@dataclass
class OperatorOptions:
    namespace: str
    lease_name: str = "sluice-operator"
    config_map_name: str = CONFIGMAP_NAME
    identity: str = ""
    health_port: int = 8080
    metrics_port: int = 9090
    lease_seconds: int = 15
    renew_seconds: float = 5.0
    resync_seconds: float = 10.0
    max_queue_depth: int = 5
    dashboard_port: int = 8081


def _pages(call: Callable[..., Any], **kwargs: Any) -> Iterator[dict[str, Any]]:
    """Every item of a paged list, as raw JSON (client models cost more than the request)."""
    token: str | None = None
    while True:
        raw = call(limit=500, _continue=token, _preload_content=False, **kwargs)
        data = raw.data
        raw.release_conn()
        page = json.loads(data)
        yield from page.get("items") or ()
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return


def prime(api: client.ApiClient, state: ClusterState) -> None:
    """An authoritative listing: before the first cycle, so it never sees half a cluster, and
    again whenever this replica becomes the leader."""
    objects = client.CustomObjectsApi(api)
    listing = cast(dict[str, Any], objects.list_cluster_custom_object(GROUP, VERSION, PLURAL))
    for item in listing.get("items", []):
        state.on_queue("ADDED", item)
    listings: list[tuple[Callable[..., Any], str, str, Callable[[str, Any], None], str]] = [
        (
            client.BatchV1Api(api).list_job_for_all_namespaces,
            "batch/v1",
            "Job",
            state.on_job,
            QUEUE_LABEL,
        ),
        (client.CoreV1Api(api).list_node, "v1", "Node", state.on_node, ""),
        (client.CoreV1Api(api).list_namespace, "v1", "Namespace", state.on_namespace, ""),
        (client.CoreV1Api(api).list_pod_for_all_namespaces, "v1", "Pod", state.on_pod, ""),
        (
            client.SchedulingV1Api(api).list_priority_class,
            "scheduling.k8s.io/v1",
            "PriorityClass",
            state.on_priority_class,
            "",
        ),
    ]
    for call, api_version, kind, store, selector in listings:
        for item in _pages(call, label_selector=selector):
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
            store("ADDED", item)


def _with_room_for_writers(api: client.ApiClient) -> client.ApiClient:
    """A client whose connection pool holds every parallel writer plus the Lease, relists and
    config reads (the default, five per CPU, is smaller than that on a one-CPU pod, and every
    connection it discards costs the next request a TLS handshake)."""
    cfg = api.configuration
    wanted = WRITERS + 4
    if (cfg.connection_pool_maxsize or 0) >= wanted:
        return api
    cfg.connection_pool_maxsize = wanted
    return client.ApiClient(cfg)


async def lead_queues(
    api: client.ApiClient,
    state: ClusterState,
    elector: LeaseElector,
    take_signals_back: Callable[[], None],
) -> None:
    """Kopf's Queue handlers, run while this replica holds the Lease: started when it takes
    the Lease, stopped as soon as it no longer holds it. Returns when they stop by themselves
    (Kopf stops on SIGTERM/SIGINT, which it takes over while it runs)."""
    while True:
        while not elector.holds():
            await _lease_changed(elector)
        stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        handlers = asyncio.create_task(
            kopf.operator(
                registry=build_queue_registry(state, api),
                standalone=True,
                clusterwide=True,
                stop_flag=stop,
            ),
            name="queue-handlers",
        )
        log.info("event=queue-handlers-started")
        try:
            while elector.holds() and not handlers.done():
                await _lease_changed(elector)
        finally:
            if not stop.done():
                stop.set_result(None)
            await asyncio.wait([handlers], timeout=10)
            if not handlers.done():
                handlers.cancel()
                await asyncio.gather(handlers, return_exceptions=True)
            take_signals_back()  # Kopf leaves its own handlers behind, bound to a spent flag
        if not handlers.cancelled() and handlers.exception() is None and not elector.holds():
            log.info("event=queue-handlers-stopped reason=lease-lost")
            continue
        return


async def _lease_changed(elector: LeaseElector, seconds: float = 1.0) -> None:
    """Until the elector says its holding changed, or ``seconds`` (it also stops holding
    silently, when a renewal is late)."""
    elector.changed.clear()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(elector.changed.wait(), seconds)


async def run_operator(api: client.ApiClient, options: OperatorOptions) -> None:
    api = _with_room_for_writers(api)
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
    elector.listeners.append(state.notify)  # the new holder's first cycle runs at once
    loop = SchedulingLoop(
        api,
        state,
        elector,
        LoopSettings(
            namespace=options.namespace,
            config_map_name=options.config_map_name,
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

    def take_signals() -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            running.add_signal_handler(sig, stop.set)

    take_signals()
    await asyncio.to_thread(prime, api, state)
    loop.memory.settle()
    loop.synced.set()
    view = DashboardView()
    if options.dashboard_port:
        view.load(list(state.queues.values()), list(state.jobs.values()))
    log.info(
        "event=started identity=%s queues=%d jobs=%d", identity, len(state.queues), len(state.jobs)
    )
    registry = build_registry(state, api, view if options.dashboard_port else None)
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
        asyncio.create_task(lead_queues(api, state, elector, take_signals), name="queues"),
    ]
    if options.dashboard_port:
        dashboard = serve_dashboard(view, "0.0.0.0", options.dashboard_port, asyncio.Event())
        tasks.append(asyncio.create_task(dashboard, name="dashboard"))
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
