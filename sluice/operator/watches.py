"""The watches of what a cluster holds many of: the workloads sluice gates and the pods.

They start where the operator's own first listing (``run.prime``) ended, from its
resourceVersion, instead of listing everything a second time: a cluster holds these by the
hundred thousand, and a second listing through Kopf's per-event machinery would cost the
operator's processor far more than the first (docs/operations.md, *Sizing*). Each runs in
a thread of its own (``sluice.kube.watch``): an event is parsed once, read into its view
and stored (``ClusterState``, whose lock and wake-up serve threads). When the version has
expired (410), the kind is listed again page by page into the state, and what that listing
no longer holds is forgotten: it was deleted while no watch was there to say so. A new
leader's listing (``run.prime`` again) forgets the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, NamedTuple

from kubernetes import client

from sluice.api.constants import QUEUE_LABEL
from sluice.api.workloads import Adapter
from sluice.api.workloads.job import JOB
from sluice.api.workloads.ray_cluster import RAY_CLUSTER_KIND
from sluice.api.workloads.rayjob import RAY_JOB
from sluice.dashboard.view import DashboardView
from sluice.kube.errors import API_ERRORS
from sluice.kube.watch import Lister, Watching, pages
from sluice.operator.state import ClusterState, object_key
from sluice.operator.stored import as_version

log = logging.getLogger("sluice.operator")

Store = Callable[[str, Mapping[str, Any]], None]
"""``store(event, object)``: an ADDED, MODIFIED or DELETED object into the state."""


class Listing(NamedTuple):
    """One kind to list: the list call, its apiVersion and kind, where each object is stored,
    and the label selector (empty: every object)."""

    call: Lister
    api_version: str
    kind: str
    store: Store
    selector: str = ""


def list_into(
    call: Lister, api_version: str, kind: str, store: Store, selector: str = ""
) -> tuple[set[str], str | None]:
    """One kind listed page by page, each object stored as its page arrives (the whole
    listing is never held at once): the keys listed, and the version to watch from."""
    listed: set[str] = set()
    version: str | None = None
    try:
        for items, at in pages(call, label_selector=selector):
            version = at
            for item in items:
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                store("ADDED", item)
                listed.add(object_key(item))
    except API_ERRORS as err:
        # Whoever logs the failure can say which listing it was (``listing_of``).
        err.add_note(f"{kind} {api_version}")
        raise
    return listed, version


def listing_of(err: BaseException) -> str:
    """The kind and apiVersion whose listing raised ``err`` (``list_into``), or "" when it was
    raised elsewhere."""
    notes = getattr(err, "__notes__", None)
    return notes[-1] if notes else ""


def list_if_served(listing: Listing) -> None:
    """``list_into`` for a kind the API server may not serve (an API group turned off) or
    the operator may not be allowed to read (a role from before the kind was read): nothing
    of it is stored then, and the log says so, as an error when it is forbidden (what needs
    the kind waits: a workload whose claim templates are not known says so)."""
    try:
        list_into(*listing[:4])
    except client.ApiException as err:
        if err.status == 404:
            log.info(
                "event=kind-not-served kind=%s apiVersion=%s", listing.kind, listing.api_version
            )
        elif err.status == 403:
            log.error(
                "event=kind-forbidden kind=%s apiVersion=%s", listing.kind, listing.api_version
            )
        else:
            raise


def list_anew(state: ClusterState, listing: Listing) -> str | None:
    """One of ``listings`` listed into the state (``list_into``), and what it no longer
    holds forgotten (``ClusterState.unlisted``): the version to watch from."""
    call, api_version, kind, store, selector = listing
    listed, version = list_into(call, api_version, kind, store, selector)
    for key in state.unlisted(kind, listed, as_version(version)):
        namespace, _, name = key.partition("/")
        gone = {"metadata": {"namespace": namespace, "name": name}}
        store("DELETED", {"apiVersion": api_version, "kind": kind, **gone})
    return version


class Resumed(Watching):
    """A kind's watch, started from a listing already made (``version``); when that
    version has expired, it lists anew (``list_anew``)."""

    def __init__(self, state: ClusterState, listing: Listing, version: str | None) -> None:
        call, _, kind, store, selector = listing
        super().__init__(kind.lower(), call, store, label_selector=selector)
        self.state = state
        self.kind_listing = listing
        self.version = version

    def listing(self) -> None:
        self.version = list_anew(self.state, self.kind_listing)


def store_workload(state: ClusterState, view: DashboardView | None) -> Store:
    """How a managed workload's event is stored (and shown, for a Job, on the dashboard)."""

    def store(event: str, obj: Mapping[str, Any]) -> None:
        # The label selector sends only managed workloads; one whose label went away comes
        # as a deletion carrying its new, unlabelled self, which must still leave the cache.
        labels = (obj.get("metadata") or {}).get("labels") or {}
        event = event if QUEUE_LABEL in labels else "DELETED"
        state.on_workload(event, obj)
        if view is not None and obj.get("kind", JOB.kind) == JOB.kind:
            view.on_job(event, obj)  # the dashboard shows Jobs

    return store


def listings(
    api: client.ApiClient,
    state: ClusterState,
    workloads: tuple[Adapter, ...],
    view: DashboardView | None = None,
) -> list[Listing]:
    """What the resumed watches list and watch: each workload kind (and, with RayJobs, the
    RayClusters they run), then the pods."""
    objects = client.CustomObjectsApi(api)
    workload = store_workload(state, view)
    kinds: list[Listing] = [
        Listing(
            partial(
                objects.list_cluster_custom_object, adapter.group, adapter.version, adapter.plural
            ),
            adapter.api_version,
            adapter.kind,
            workload,
            QUEUE_LABEL,
        )
        for adapter in workloads
    ]
    if any(adapter.kind == RAY_JOB.kind for adapter in workloads):
        # Where Ray's autoscaler sizes a RayJob's worker groups; KubeRay copies the RayJob's
        # labels onto the cluster it makes, so a managed RayJob's carries its queue label.
        clusters = partial(objects.list_cluster_custom_object, RAY_JOB.group, "v1", "rayclusters")
        kinds.append(
            Listing(clusters, "ray.io/v1", RAY_CLUSTER_KIND, state.on_ray_cluster, QUEUE_LABEL)
        )
    pods = Listing(client.CoreV1Api(api).list_pod_for_all_namespaces, "v1", "Pod", state.on_pod)
    return [*kinds, pods]


def resumed(
    api: client.ApiClient,
    state: ClusterState,
    workloads: tuple[Adapter, ...],
    versions: Mapping[str, str | None],
    view: DashboardView | None = None,
) -> list[Resumed]:
    """A watch of each of ``listings``, from the version its listing ended at (``versions``,
    by kind; none: it lists first), storing into the state and ``view``; not yet started."""
    return [
        Resumed(state, listing, versions.get(listing.kind))
        for listing in listings(api, state, workloads, view)
    ]
