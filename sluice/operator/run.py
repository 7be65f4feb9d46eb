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
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import kopf
from kubernetes import client
from prometheus_client import start_http_server

from sluice.api.constants import CONFIGMAP_NAME, GROUP, PLURAL, QUEUE_LABEL, VERSION
from sluice.api.workloads import ADAPTERS, Adapter
from sluice.api.workloads.job import JOB
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
from sluice.scheduler.snapshot import readers

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
    workload_kinds: tuple[str, ...] = (JOB.kind,)
    """The kinds of workload sluice gates (docs/workloads.md): each is watched, read and
    held through its adapter."""

    @property
    def workloads(self) -> tuple[Adapter, ...]:
        return tuple(a for a in ADAPTERS if a.kind in self.workload_kinds)


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


def prime(
    api: client.ApiClient, state: ClusterState, workloads: tuple[Adapter, ...] = (JOB,)
) -> None:
    """An authoritative listing: before the first cycle, so it never sees half a cluster, and
    again whenever this replica becomes the leader."""
    objects = client.CustomObjectsApi(api)
    listing = cast(dict[str, Any], objects.list_cluster_custom_object(GROUP, VERSION, PLURAL))
    for item in listing.get("items", []):
        state.on_queue("ADDED", item)
    # What namespaces add to their pods' requests comes first: the workloads are read with it.
    core = client.CoreV1Api(api)
    for item in _pages(core.list_limit_range_for_all_namespaces):
        state.on_limit_range("ADDED", item)
    for item in _pages(client.NodeV1Api(api).list_runtime_class):
        state.on_runtime_class("ADDED", item)
    listings: list[tuple[Callable[..., Any], str, str, Callable[[str, Any], None], str]] = [
        (
            client.BatchV1Api(api).list_job_for_all_namespaces
            if adapter is JOB
            else partial(
                objects.list_cluster_custom_object, adapter.group, adapter.version, adapter.plural
            ),
            adapter.api_version,
            adapter.kind,
            state.on_job,
            QUEUE_LABEL,
        )
        for adapter in workloads
    ]
    listings += [
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


class _QueueHandlers:
    """Kopf's Queue handlers on a thread and event loop of their own.

    Kopf, when one of its operators ends, cancels every task created on its event loop since
    it started, whoever created them ("hung" tasks): run beside the watches on one loop,
    handlers stopped on a lost Lease would take the watches' workers with them, and a replica
    that took the Lease back would go on deciding on what it stopped seeing. On their own
    loop, stopping them touches nothing else; Kopf off the main thread also leaves the
    process's signals alone."""

    def __init__(self, state: ClusterState, api: client.ApiClient) -> None:
        self.stop = threading.Event()
        self.failure: Exception | None = None
        self.thread = threading.Thread(
            target=self._run, args=(state, api), name="sluice-queue-handlers", daemon=True
        )
        self.thread.start()

    def _run(self, state: ClusterState, api: client.ApiClient) -> None:
        operator = kopf.operator(
            registry=build_queue_registry(state, api),
            standalone=True,
            clusterwide=True,
            stop_flag=self.stop,
        )
        try:
            asyncio.run(operator)
        except Exception as err:
            log.exception("event=queue-handlers-failed")
            self.failure = err  # and the task that waits on the thread fails with it

    def running(self) -> bool:
        return self.thread.is_alive()

    async def halt(self, seconds: float = 15.0) -> None:
        """Until they have stopped: new ones must never run beside them."""
        self.stop.set()
        await asyncio.to_thread(self.thread.join, seconds)
        while self.thread.is_alive():
            log.warning("event=queue-handlers-still-stopping after=%gs", seconds)
            await asyncio.to_thread(self.thread.join, seconds)


class _NotOffMainThread(logging.Filter):
    """Kopf warns that it takes no OS signals when run off the main thread: that is the
    point of running the Queue handlers there (the process's own handlers stop it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "running not in the main thread" not in record.getMessage()


async def lead_queues(api: client.ApiClient, state: ClusterState, elector: LeaseElector) -> None:
    """Kopf's Queue handlers, run while this replica holds the Lease: started when it takes
    the Lease, stopped as soon as it no longer holds it. Returns if they stop by themselves."""
    logging.getLogger("kopf").addFilter(_NotOffMainThread())
    while True:
        while not elector.holds():
            await _lease_changed(elector)
        handlers = _QueueHandlers(state, api)
        log.info("event=queue-handlers-started")
        lost = False
        try:
            while handlers.running() and not (lost := not elector.holds()):
                await _lease_changed(elector)
        finally:
            await handlers.halt()
        if handlers.failure is not None:
            raise handlers.failure
        if not lost:
            return  # they stopped by themselves: so does the operator
        # Held again by the time they stopped, perhaps: they start anew all the same.
        log.info("event=queue-handlers-stopped reason=lease-lost")


async def _lease_changed(elector: LeaseElector, seconds: float = 1.0) -> None:
    """Until the elector says its holding changed, or ``seconds`` (it also stops holding
    silently, when a renewal is late)."""
    elector.changed.clear()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(elector.changed.wait(), seconds)


async def run_operator(api: client.ApiClient, options: OperatorOptions) -> None:
    api = _with_room_for_writers(api)
    workloads = options.workloads
    state = ClusterState(loop=asyncio.get_running_loop())
    state.readers = readers(
        workload_kinds=[a.kind for a in workloads], defaults_of=state.pod_defaults.of
    )
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
        relist=lambda: prime(api, state, workloads),
    )
    tasks: list[asyncio.Task[Any]] = []
    health = await serve_health(loop, tasks, options.health_port) if options.health_port else None
    if options.metrics_port:
        start_http_server(options.metrics_port, registry=metrics.REGISTRY)
    stop = asyncio.Event()
    running = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # until Kopf's watches take them over
        running.add_signal_handler(sig, stop.set)
    await asyncio.to_thread(prime, api, state, workloads)
    loop.memory.settle()
    loop.synced.set()
    view = DashboardView()
    if options.dashboard_port:
        jobs = [o for o in state.jobs.values() if o.get("kind") == JOB.kind]  # the dashboard's
        view.load(list(state.queues.values()), jobs)
    log.info(
        "event=started identity=%s queues=%d jobs=%d", identity, len(state.queues), len(state.jobs)
    )
    registry = build_registry(state, api, view if options.dashboard_port else None, workloads)
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
        asyncio.create_task(lead_queues(api, state, elector), name="queues"),
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
