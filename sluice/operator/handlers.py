"""The operator's one Kopf registry: watch handlers that store what they see, wake the loop and
name the Queues due for reconciling; every replica runs them. The workloads and the pods,
which a cluster holds by the hundred thousand, are watched outside it (``watches.py``).

They are coroutines so that they run on the event loop itself: Kopf would run plain
functions in its thread pool, one hop more per event.

They are all ``@kopf.on.event`` handlers, which keep no state on the objects: Kopf writes
nothing to any object, so a follower writes nothing, and no object gets a Kopf finalizer or
annotation. The Lease holder's Queue writes are the Queue reconciler's
(``queue_reconciler.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import kopf
from kubernetes import client

from sluice.api.constants import FLAVOR_PLURAL, GROUP, PLURAL, PREFIX, TOPOLOGY_PLURAL, VERSION
from sluice.api.devices import GROUP as DRA_GROUP
from sluice.dashboard.view import DashboardView
from sluice.kube.watch import PAGE
from sluice.operator import metrics
from sluice.operator.state import ClusterState


def _event(kind: str | None) -> str:
    # Kopf reports the objects of the initial listing with no type: they are additions.
    return kind or "ADDED"


def connection_info(api: client.ApiClient) -> kopf.ConnectionInfo:
    cfg = api.configuration
    header = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken")
    scheme, token = None, None
    if header:
        scheme, _, token = str(header).partition(" ")
        if not token:
            scheme, token = "Bearer", scheme
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
        scheme=scheme,
        token=token,
        username=cfg.username or None,
        password=cfg.password or None,
    )


class NoEssence(kopf.DiffBaseStorage):
    """Kopf keeps an object's last-handled essence to tell its change handlers what changed.
    sluice registers none (only event handlers, ``build_registry``), so none is kept and none
    is built: the default deep-copies every object of every event, a cost that grows with
    the objects' size and makes the watches fall behind at thousands of queues."""

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None
    ) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


class NoProgress(kopf.ProgressStorage):
    """Kopf records each change handler's progress on the object. sluice registers none
    (``NoEssence``), so nothing is recorded, and the essence Kopf hands over on each event
    is not copied to strip records it cannot hold (two copies per event by default)."""

    def fetch(self, *, key: kopf.HandlerId, body: kopf.Body) -> kopf.ProgressRecord | None:
        return None

    def store(
        self, *, key: kopf.HandlerId, record: kopf.ProgressRecord, body: kopf.Body,
        patch: kopf.Patch,
    ) -> None:  # fmt: skip
        return None

    def purge(self, *, key: kopf.HandlerId, body: kopf.Body, patch: kopf.Patch) -> None:
        return None

    def touch(self, *, body: kopf.Body, patch: kopf.Patch, value: str | None) -> None:
        return None

    def clear(self, *, essence: kopf.BodyEssence) -> kopf.BodyEssence:
        return essence


def configure_settings(settings: kopf.OperatorSettings) -> None:
    # Never the Queues' subtree finalizer: Kopf takes its own finalizer off any object that
    # no handler of it needs one for.
    settings.persistence.finalizer = f"{PREFIX}/kopf-finalizer"
    settings.persistence.diffbase_storage = NoEssence()
    settings.persistence.progress_storage = NoProgress()
    settings.posting.enabled = False  # sluice posts its own Events, about decisions
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    # The watches' first listing in pages, as the operator's own (kube.watch.PAGE): whole, a
    # listing of 10,000 nodes or Queues is one answer parsed at once.
    settings.watching.chunk_size = PAGE
    # No CRD watch: the resources are known at start-up (listing Queues fails without the
    # CRD), and the operator's role need not read CustomResourceDefinitions.
    settings.scanning.disabled = True


def build_registry(
    state: ClusterState,
    api: client.ApiClient,
    view: DashboardView | None = None,
    queue_seen_by: Callable[[Mapping[str, Any]], None] = lambda obj: None,
    topology_due: Callable[[], None] = lambda: None,
) -> kopf.OperatorRegistry:
    """The watches: they fill the state (and the dashboard's view, on every replica).
    ``queue_seen_by``: told of every Queue event (the Queue reconciler); ``topology_due``:
    called on every Topology, Flavor and Node event (their statuses follow the nodes'
    labels)."""
    registry = kopf.OperatorRegistry()
    _register_lifecycle(registry, api)
    _register_watches(registry, state, view, queue_seen_by, topology_due)
    _register_device_watches(registry, state)
    return registry


def _register_lifecycle(registry: kopf.OperatorRegistry, api: client.ApiClient) -> None:
    """Kopf's settings, its login, and the event loop's lag probe, started and ended with it."""

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure_settings(settings)

    probes: list[asyncio.Task[None]] = []  # held here: the loop keeps only weak references

    @kopf.on.startup(registry=registry)
    async def probe_watch_lag(**_: Any) -> None:
        # On the loop the watches run on: how late it serves them (sluice_event_loop_lag_seconds).
        probes.append(asyncio.create_task(metrics.probe_event_loop_lag(), name="loop-lag"))

    @kopf.on.cleanup(registry=registry)
    async def stop_probes(**_: Any) -> None:
        # Ended with the operator: Kopf otherwise waits 5 s for a task it did not start to
        # end by itself before it cancels it, and a replica that lost the Lease exits late.
        for probe in probes:
            probe.cancel()
        await asyncio.gather(*probes, return_exceptions=True)
        probes.clear()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        # Kopf connects exactly as the rest of sluice does (sluice.kube: kubeconfig or in-cluster).
        return connection_info(api)


def _register_watches(
    registry: kopf.OperatorRegistry,
    state: ClusterState,
    view: DashboardView | None,
    queue_seen_by: Callable[[Mapping[str, Any]], None],
    topology_due: Callable[[], None],
) -> None:
    """One event handler per small kind: each stores what it sees in the state."""

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def queue_seen(type: str | None, body: Mapping[str, Any], **_: Any) -> None:
        state.on_queue(_event(type), dict(body))
        queue_seen_by(body)
        if view is not None:
            view.on_queue(_event(type), body)

    @kopf.on.event("", "v1", "nodes", registry=registry)
    async def node_seen(type: str | None, body: Mapping[str, Any], **_: Any) -> None:
        state.on_node(_event(type), dict(body))
        topology_due()

    @kopf.on.event("", "v1", "namespaces", registry=registry)
    async def namespace_seen(type: str | None, body: Mapping[str, Any], **_: Any) -> None:
        # Their labels decide which queues take their jobs (spec.namespaceSelector).
        state.on_namespace(_event(type), dict(body))

    @kopf.on.event("", "v1", "limitranges", registry=registry)
    async def limit_range_seen(type: str | None, body: Mapping[str, Any], **_: Any) -> None:
        # What a namespace's pods get as default requests (docs/workloads.md).
        state.on_limit_range(_event(type), dict(body))

    @kopf.on.event("node.k8s.io", "v1", "runtimeclasses", registry=registry)
    async def runtime_class_seen(type: str | None, body: Mapping[str, Any], **_: Any) -> None:
        # The overhead a pod of the class gets (docs/workloads.md).
        state.on_runtime_class(_event(type), dict(body))

    @kopf.on.event(GROUP, VERSION, TOPOLOGY_PLURAL, registry=registry)
    async def topology_seen(type: str | None, body: Mapping[str, Any], **_: Any) -> None:
        # The levels workloads may ask one domain of (docs/scheduler.md, *Topology*).
        state.on_topology(_event(type), dict(body))
        topology_due()

    @kopf.on.event(GROUP, VERSION, FLAVOR_PLURAL, registry=registry)
    async def flavor_seen(type: str | None, body: Mapping[str, Any], **_: Any) -> None:
        # The nodes queues hold quota in, per flavor (docs/scheduler.md, *Flavors*).
        state.on_flavor(_event(type), dict(body))
        topology_due()  # its status counts the nodes that carry its labels

    @kopf.on.event("scheduling.k8s.io", "v1", "priorityclasses", registry=registry)
    async def priority_class_seen(type: str | None, body: Mapping[str, Any], **_: Any) -> None:
        state.on_priority_class(_event(type), dict(body))


def _register_device_watches(registry: kopf.OperatorRegistry, state: ClusterState) -> None:
    """One event handler per kind of Dynamic Resource Allocation: what the pods' claims count
    as and which devices are free (docs/scheduler.md, *Devices (DRA)*)."""

    @kopf.on.event(DRA_GROUP, "v1", "deviceclasses", registry=registry)
    async def device_class_seen(type: str | None, body: Mapping[str, Any], **_: Any) -> None:
        state.on_device_class(_event(type), dict(body))

    @kopf.on.event(DRA_GROUP, "v1", "resourceslices", registry=registry)
    async def resource_slice_seen(type: str | None, body: Mapping[str, Any], **_: Any) -> None:
        state.on_resource_slice(_event(type), dict(body))

    @kopf.on.event(DRA_GROUP, "v1", "resourceclaims", registry=registry)
    async def resource_claim_seen(type: str | None, body: Mapping[str, Any], **_: Any) -> None:
        state.on_resource_claim(_event(type), dict(body))

    @kopf.on.event(DRA_GROUP, "v1", "resourceclaimtemplates", registry=registry)
    async def claim_template_seen(type: str | None, body: Mapping[str, Any], **_: Any) -> None:
        state.on_claim_template(_event(type), dict(body))
