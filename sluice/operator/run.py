"""Running the operator: one replica is one manager of named runnables (``manager.py``).

It serves health and metrics, seeks the Lease, and primes the caches with one listing; then,
on every replica, one Kopf operator (the watches of Queues, nodes and the rest), the
workloads' and pods' watches resumed from that listing (``watches.py``) and the scheduling
loop, which decides only in the Lease holder; in the Lease holder only, the Queue reconciler
and the Topologies' statuses. A replica that loses the Lease ends. Every thread and task:
docs/architecture.md, *Threads and tasks*."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from dataclasses import dataclass
from functools import partial

import kopf
from kubernetes import client

from sluice.api.constants import CONFIGMAP_NAME, FLAVOR_KIND, FLAVOR_PLURAL, GROUP, PLURAL, VERSION
from sluice.api.devices import GROUP as DRA_GROUP
from sluice.api.workloads import ADAPTERS, Adapter
from sluice.api.workloads.job import JOB
from sluice.dashboard.server import serve as serve_dashboard
from sluice.dashboard.view import DashboardView
from sluice.kube.errors import API_ERRORS, message
from sluice.kube.writer import WRITERS, WriteClient, WriteGate, write_client
from sluice.operator import metrics
from sluice.operator.exiting import end_within
from sluice.operator.handlers import build_registry
from sluice.operator.health import Tasks, serve_health, serve_metrics
from sluice.operator.leader import LeaseElector
from sluice.operator.loop import LoopSettings, SchedulingLoop
from sluice.operator.manager import Manager, Runnable
from sluice.operator.queue_reconciler import QueueReconciler
from sluice.operator.state import ClusterState
from sluice.operator.topology_status import TopologyReconciler
from sluice.operator.watches import (
    Listing,
    Resumed,
    list_anew,
    list_if_served,
    list_into,
    listing_of,
    listings,
    resumed,
)
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
        Listing(partial(objects.list_cluster_custom_object, GROUP, VERSION, PLURAL),
                f"{GROUP}/{VERSION}", "Queue", state.on_queue),
        Listing(partial(objects.list_cluster_custom_object, GROUP, VERSION, FLAVOR_PLURAL),
                f"{GROUP}/{VERSION}", FLAVOR_KIND, state.on_flavor),
        Listing(core.list_limit_range_for_all_namespaces, "v1", "LimitRange",
                state.on_limit_range),
        Listing(client.NodeV1Api(api).list_runtime_class,
                "node.k8s.io/v1", "RuntimeClass", state.on_runtime_class),
    ]  # fmt: skip
    dra, served = client.ResourceV1Api(api), f"{DRA_GROUP}/v1"
    # What the pods' claims count as is read before the workloads too (docs/scheduler.md,
    # *Devices (DRA)*); a cluster that does not serve DRA has none of it.
    devices: list[Listing] = [
        Listing(dra.list_device_class, served, "DeviceClass", state.on_device_class),
        Listing(dra.list_resource_claim_template_for_all_namespaces, served,
                "ResourceClaimTemplate", state.on_claim_template),
        Listing(dra.list_resource_claim_for_all_namespaces, served, "ResourceClaim",
                state.on_resource_claim),
        Listing(dra.list_resource_slice, served, "ResourceSlice", state.on_resource_slice),
    ]  # fmt: skip
    after: list[Listing] = [
        Listing(core.list_node, "v1", "Node", state.on_node),
        Listing(core.list_namespace, "v1", "Namespace", state.on_namespace),
        Listing(client.SchedulingV1Api(api).list_priority_class,
                "scheduling.k8s.io/v1", "PriorityClass", state.on_priority_class),
    ]  # fmt: skip
    for listing in before:
        list_into(*listing)
    for listing in devices:
        list_if_served(listing)
    versions: Versions = {}
    for listing in listings(api, state, workloads):
        versions[listing.kind] = list_anew(state, listing)
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
            log.warning(
                "event=list-failed listing=%r error=%s retry_seconds=%g",
                listing_of(err),
                message(err),
                retry_seconds,
            )
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


@dataclass
class Parts:
    """What the runnables of one replica share, made once at start."""

    api: client.ApiClient
    identity: str
    state: ClusterState
    elector: LeaseElector
    gate: WriteGate
    queues: QueueReconciler
    topologies: TopologyReconciler
    loop: SchedulingLoop


def build(api: client.ApiClient, options: OperatorOptions) -> Parts:
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
    settings = LoopSettings(
        namespace=options.namespace,
        config_map_name=options.config_map_name,
        resync_seconds=options.resync_seconds,
        full_pass_seconds=options.full_pass_seconds,
        max_queue_depth=options.max_queue_depth,
    )
    relist = partial(prime, api, state, workloads)
    loop = SchedulingLoop(
        api, state, elector, settings, relist=relist, decided=queues.publish, writer=writer
    )
    topologies = TopologyReconciler(queues.writer.custom, state)
    return Parts(api, identity, state, elector, gate, queues, topologies, loop)


def servers(parts: Parts, options: OperatorOptions, tasks: Tasks) -> list[Runnable]:
    """The HTTP servers that answer from the start to the end: health and metrics."""
    found = []
    if options.health_port:
        found.append(
            Runnable("health", partial(serve_health, parts.loop, tasks, options.health_port),
                     server=True)
        )  # fmt: skip
    if options.metrics_port:
        found.append(Runnable("metrics", partial(serve_metrics, options.metrics_port), server=True))
    return found


def watching(watches: list[Resumed]) -> Runnable:
    """The workloads' and pods' list-and-watch threads, as one runnable."""
    stopped = asyncio.Event()

    async def run() -> None:
        for watch in watches:
            watch.start()
        await stopped.wait()

    def stop() -> None:
        for watch in watches:
            watch.stop.set()
        stopped.set()

    return Runnable("watches", run, stop=stop)


def runnables(
    parts: Parts, options: OperatorOptions, versions: Versions, view: DashboardView | None
) -> list[Runnable]:
    """What runs once the caches hold a full listing: Kopf's watches of the small kinds, the
    workloads' and the pods' watches resumed from that listing (watches.py), the scheduling
    loop, and in the Lease holder only the Queue and Topology reconcilers; the dashboard."""
    state, queues, topologies = parts.state, parts.queues, parts.topologies
    registry = build_registry(state, parts.api, view, queues.on_queue, topologies.due)
    kopf_stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    kopf_run = partial(
        kopf.operator, registry=registry, standalone=True, clusterwide=True, stop_flag=kopf_stop
    )
    found = [
        # Kopf takes SIGTERM/SIGINT over once it runs; its task ending is then the signal.
        Runnable("kopf", kopf_run, stop=partial(_settle, kopf_stop)),
        watching(resumed(parts.api, state, options.workloads, versions, view)),
        Runnable("loop", parts.loop.run),
        Runnable("queues", queues.run, needs_lease=True),
        Runnable("topologies", topologies.run, needs_lease=True),
    ]
    if view is not None:
        dashboard = partial(
            serve_dashboard, view, "0.0.0.0", options.dashboard_port, asyncio.Event()
        )
        found.append(Runnable("dashboard", dashboard))
    return found


def _settle(flag: asyncio.Future[None]) -> None:
    if not flag.done():
        flag.set_result(None)


def _dashboard(parts: Parts, options: OperatorOptions) -> DashboardView | None:
    if not options.dashboard_port:
        return None
    view = DashboardView(cluster=parts.state.cluster_views)
    state = parts.state
    jobs = [o for o in state.workloads.values() if o.get("kind") == JOB.kind]  # it shows Jobs
    view.load(list(state.queues.values()), jobs)
    return view


async def _hand_over(gate: WriteGate, elector: LeaseElector) -> None:
    """Hand the Lease over at once instead of making a follower wait for it to expire, once
    no write is in flight (each ends within write_timeout): a write still on its way would
    otherwise land after the next holder's. One that does not end leaves the Lease to
    expire."""
    if await asyncio.to_thread(gate.wait_idle, elector.write_timeout):
        await asyncio.to_thread(elector.release)
    else:
        log.warning("event=lease-kept reason=writes-in-flight")


async def run_operator(api: client.ApiClient, options: OperatorOptions) -> int:
    """Until a signal (0), or until the Lease is lost or a task fails (1: Kubernetes starts
    the process again, and it comes back as a warm follower)."""
    parts = build(api, options)
    elector, state = parts.elector, parts.state
    manager = Manager(parts.identity, partial(elector.until, True))
    manager.start(*servers(parts, options, lambda: manager.tasks))
    manager.stop_on_signals()
    # The Lease is sought before the first listing: a replica that takes it as it starts
    # (none held it, or its holder let it go) then lists once, not again as a new leader.
    manager.start(Runnable("lease", elector.run))
    await asyncio.to_thread(elector.rounded.wait, elector.call_timeout)
    versions = await prime_until_listed(parts.api, state, options.workloads, manager.stopping)
    status = 0
    try:
        # Stopped before or while it listed (it may hold the Lease already): no watch is
        # started only to be stopped, and the Lease is handed over all the same.
        if versions is not None and not manager.stopping.is_set():
            parts.loop.memory.settle()
            parts.loop.synced.set()
            view = _dashboard(parts, options)
            log.info(
                "event=started identity=%s queues=%d workloads=%d",
                parts.identity,
                len(state.queues),
                len(state.workloads),
            )
            manager.start(*runnables(parts, options, versions, view))
            status = await manager.until_stopped(_until_lease_lost(elector))
    finally:
        _stopping(options, status)
        # What is still queued (windows of writes, Events, Queue writes) stays unsent.
        parts.gate.close()
        await manager.stop(partial(_hand_over, parts.gate, elector))
        log.info("event=stopped")
    return status
