"""Running the operator: prime the caches, then, on every replica, one Kopf operator (the
watches of Queues, nodes and the rest) and the workloads' and pods' watches resumed from that
listing (``watches.py``), the Lease, and in the Lease holder only the scheduling loop's
cycles, the Queue reconciler and the Topologies' statuses. A replica that loses the Lease
ends."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import kopf
from kubernetes import client
from prometheus_client import start_http_server

from sluice.api.constants import CONFIGMAP_NAME, GROUP, PLURAL, VERSION
from sluice.api.workloads import ADAPTERS, Adapter
from sluice.api.workloads.job import JOB
from sluice.dashboard.server import serve as serve_dashboard
from sluice.dashboard.view import DashboardView
from sluice.kube.errors import API_ERRORS, message
from sluice.kube.writer import WRITERS, WriteClient, WriteGate, write_client
from sluice.operator import metrics
from sluice.operator.exiting import end_within
from sluice.operator.handlers import build_registry
from sluice.operator.health import serve_health
from sluice.operator.leader import LeaseElector
from sluice.operator.loop import LoopSettings, SchedulingLoop
from sluice.operator.queue_reconciler import QueueReconciler
from sluice.operator.state import ClusterState
from sluice.operator.topology_status import TopologyReconciler
from sluice.operator.watches import Listing, list_anew, list_into, listings, resumed
from sluice.scheduler.snapshot import readers

log = logging.getLogger("sluice.operator")

USER_AGENT = "sluice-operator"
PRIME_RETRY_SECONDS = 2.0
"""How soon the first listing is tried again after the API server could not answer it."""


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
    full_pass_seconds: float = 5.0
    max_queue_depth: int = 5
    dashboard_port: int = 8081
    workload_kinds: tuple[str, ...] = (JOB.kind,)
    """The kinds of workload sluice gates (docs/workloads.md): each is watched, read and
    held through its adapter."""
    stop_seconds: float | None = None
    """Once stopping, the process ends after this long at the latest (``exiting.py``);
    None: only when all has stopped, as when it runs inside another program."""

    @property
    def workloads(self) -> tuple[Adapter, ...]:
        return tuple(a for a in ADAPTERS if a.kind in self.workload_kinds)


Versions = dict[str, str | None]
"""Kind -> the resourceVersion its listing ended at, for the kinds the resumed watches
(``watches.py``) start from."""


def prime(
    api: client.ApiClient, state: ClusterState, workloads: tuple[Adapter, ...] = (JOB,)
) -> Versions:
    """An authoritative listing: before the first cycle, so it never sees half a cluster, and
    again when this replica becomes the leader after it last listed (``state.listed_at``);
    a workload or pod stored that it no longer holds is forgotten. Where the workloads' and
    the pods' listings ended, for their watches to start from."""
    began = time.monotonic()
    objects = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    # What namespaces add to their pods' requests comes before the workloads, read with it.
    before: list[Listing] = [
        (partial(objects.list_cluster_custom_object, GROUP, VERSION, PLURAL),
         f"{GROUP}/{VERSION}", "Queue", state.on_queue, ""),
        (core.list_limit_range_for_all_namespaces, "v1", "LimitRange", state.on_limit_range, ""),
        (client.NodeV1Api(api).list_runtime_class,
         "node.k8s.io/v1", "RuntimeClass", state.on_runtime_class, ""),
    ]  # fmt: skip
    after: list[Listing] = [
        (core.list_node, "v1", "Node", state.on_node, ""),
        (core.list_namespace, "v1", "Namespace", state.on_namespace, ""),
        (client.SchedulingV1Api(api).list_priority_class,
         "scheduling.k8s.io/v1", "PriorityClass", state.on_priority_class, ""),
    ]  # fmt: skip
    for listing in before:
        list_into(*listing)
    versions: Versions = {}
    for listing in listings(api, state, workloads):
        versions[listing[2]] = list_anew(state, listing)
    for listing in after:
        list_into(*listing)
    state.listed_at = began
    return versions


async def prime_until_listed(
    api: client.ApiClient,
    state: ClusterState,
    workloads: tuple[Adapter, ...],
    stop: asyncio.Event,
    retry_seconds: float = PRIME_RETRY_SECONDS,
) -> Versions | None:
    """The first listing, tried again while the API server cannot be reached or refuses: a
    replica started during an outage (or cut off from the API server) waits, unready, and
    logs why, instead of crashing over and over. None when stopped before it listed."""
    while True:
        try:
            return await asyncio.to_thread(prime, api, state, workloads)
        except API_ERRORS as err:
            log.warning("event=list-failed error=%s retry_seconds=%g", message(err), retry_seconds)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), retry_seconds)
        if stop.is_set():
            return None


def _with_room_for_writers(api: client.ApiClient) -> client.ApiClient:
    """A client whose connection pool holds every parallel writer of both passes (a decision
    pass writes while a full pass writes its reasons) plus the Lease, relists and config
    reads (the default, five per CPU, is smaller than that on a one-CPU pod, and every
    connection it discards costs the next request a TLS handshake). The write client and the
    Lease's (``write_client``) are made from its configuration, with pools as large."""
    cfg = api.configuration
    wanted = 2 * WRITERS + 4
    if (cfg.connection_pool_maxsize or 0) >= wanted:
        return api
    cfg.connection_pool_maxsize = wanted
    return client.ApiClient(cfg)


def writes_of(api: client.ApiClient, elector: LeaseElector) -> tuple[WriteGate, WriteClient]:
    """The client every write but the Lease's goes through, and its gate: a write is sent only
    while this replica holds the Lease and has not begun to stop (``WriteGate.close``), never
    twice, and is over before another replica may take the Lease (docs/operations.md, "A
    replica that loses its Lease")."""
    gate = WriteGate(elector.holds)
    return gate, write_client(api, elector.write_timeout, gate)


async def _until_lease_lost(elector: LeaseElector) -> None:
    """Returns once this replica, having held the Lease, holds it no more."""
    await elector.until(True)
    await elector.until(False)


def _stopping(options: OperatorOptions, status: int) -> None:
    log.info("event=stopping status=%d", status)
    if options.stop_seconds is not None:
        end_within(options.stop_seconds, status)


async def run_operator(api: client.ApiClient, options: OperatorOptions) -> int:
    """Until a signal (0), or until the Lease is lost or a task fails (1: Kubernetes starts
    the process again, and it comes back as a warm follower)."""
    api = _with_room_for_writers(api)
    workloads = options.workloads
    state = ClusterState(loop=asyncio.get_running_loop(), echo=metrics.WATCH_ECHO.observe)
    state.readers = readers(
        workload_kinds=[a.kind for a in workloads], defaults_of=state.pod_defaults.of
    )
    identity = options.identity or f"{socket.gethostname()}-{os.getpid()}"
    # Every write names the replica that made it: the field manager is `sluice-operator`, and
    # the API server's audit log shows which replica (the Lease holder's identity) wrote.
    api.user_agent = f"{USER_AGENT}/{identity}"
    # The Lease's calls, as every write, are never sent twice by the transport: a renewal that
    # went out late would only fail, and each call gives up after the elector's call_timeout.
    elector = LeaseElector(
        write_client(api),
        options.namespace,
        options.lease_name,
        identity,
        lease_seconds=options.lease_seconds,
        renew_seconds=options.renew_seconds,
    )
    elector.listeners.append(state.notify)  # the new holder's first cycle runs at once
    gate, writer = writes_of(api, elector)
    queues = QueueReconciler(writer, state, elector.holds)
    topologies = TopologyReconciler(queues.writer.custom, state)
    loop = SchedulingLoop(
        api,
        state,
        elector,
        LoopSettings(
            namespace=options.namespace,
            config_map_name=options.config_map_name,
            resync_seconds=options.resync_seconds,
            full_pass_seconds=options.full_pass_seconds,
            max_queue_depth=options.max_queue_depth,
        ),
        relist=lambda: prime(api, state, workloads),
        decided=queues.publish,
        writer=writer,
    )
    tasks: list[asyncio.Task[Any]] = []
    health = await serve_health(loop, tasks, options.health_port) if options.health_port else None
    if options.metrics_port:
        start_http_server(options.metrics_port, registry=metrics.REGISTRY)
    stop = asyncio.Event()
    running = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # until Kopf's watches take them over
        running.add_signal_handler(sig, stop.set)
    # The Lease is sought before the first listing: a replica that takes it as it starts
    # (none held it, or its holder let it go) then lists once, not again as a new leader.
    lease = asyncio.create_task(elector.run(), name="lease")
    await asyncio.to_thread(elector.rounded.wait, elector.call_timeout)
    versions = await prime_until_listed(api, state, workloads, stop)
    if versions is None or stop.is_set():
        # Stopped before or while it listed (it may hold the Lease already): no watch is
        # started only to be stopped, and the Lease is handed over all the same.
        _stopping(options, 0)
        lease.cancel()
        await asyncio.gather(lease, return_exceptions=True)
        await asyncio.to_thread(elector.release)
        log.info("event=stopped")
        return 0
    loop.memory.settle()
    loop.synced.set()
    view = DashboardView(cluster=state.cluster_views)
    if options.dashboard_port:
        jobs = [o for o in state.workloads.values() if o.get("kind") == JOB.kind]  # it shows Jobs
        view.load(list(state.queues.values()), jobs)
    log.info(
        "event=started identity=%s queues=%d workloads=%d",
        identity,
        len(state.queues),
        len(state.workloads),
    )
    shown = view if options.dashboard_port else None
    registry = build_registry(state, api, shown, queues.on_queue, topologies.due)
    # The workloads and the pods are watched from where the listing above ended, not listed
    # again (watches.py).
    watches = resumed(api, state, workloads, versions, shown)
    for watch in watches:
        watch.start()
    kopf_stop: asyncio.Future[None] = running.create_future()
    lost = asyncio.create_task(_until_lease_lost(elector), name="lease-lost")
    tasks += [
        asyncio.create_task(
            kopf.operator(
                registry=registry, standalone=True, clusterwide=True, stop_flag=kopf_stop
            ),
            name="kopf",
        ),
        lease,
        asyncio.create_task(loop.run(), name="loop"),
        asyncio.create_task(queues.run(partial(elector.until, True)), name="queues"),
        asyncio.create_task(topologies.run(partial(elector.until, True)), name="topologies"),
    ]
    if options.dashboard_port:
        dashboard = serve_dashboard(view, "0.0.0.0", options.dashboard_port, asyncio.Event())
        tasks.append(asyncio.create_task(dashboard, name="dashboard"))
    waiter = asyncio.create_task(stop.wait())
    status = 0
    try:
        # Kopf takes SIGTERM/SIGINT over once it runs; its task ending is then the signal.
        done, _ = await asyncio.wait([waiter, lost, *tasks], return_when=asyncio.FIRST_COMPLETED)
        if lost in done:
            # As controller-runtime's managers do: stop writing, end, start again as a follower.
            log.error("event=lease-lost identity=%s exiting=1", identity)
            status = 1
        for task in done:
            if task not in (waiter, lost) and not task.cancelled() and task.exception():
                log.error("event=task-failed task=%s error=%r", task.get_name(), task.exception())
                status = 1
    finally:
        _stopping(options, status)
        gate.close()  # what is still queued (windows of writes, Events, Queue writes) stays unsent
        if not kopf_stop.done():
            kopf_stop.set_result(None)
        for watch in watches:
            watch.stop.set()
        for task in [waiter, lost, *tasks[1:]]:
            task.cancel()
        await asyncio.gather(waiter, lost, *tasks, return_exceptions=True)
        # Hand the Lease over at once instead of making a follower wait for it to expire, once
        # no write is in flight (each ends within write_timeout): a write still on its way
        # would otherwise land after the next holder's. One that does not end leaves the
        # Lease to expire.
        if await asyncio.to_thread(gate.wait_idle, elector.write_timeout):
            await asyncio.to_thread(elector.release)
        else:
            log.warning("event=lease-kept reason=writes-in-flight")
        if health is not None:
            await health.cleanup()
        log.info("event=stopped")
    return status
