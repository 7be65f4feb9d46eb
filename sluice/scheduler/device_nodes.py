"""Devices handed out through DRA as room on the nodes and as what pods hold
(docs/scheduler.md, *Devices (DRA)*): each device counts as one unit of its class's quota
resource, so placement, holding and reclaim work on devices as on any resource.

A node's allocatable gains, per device resource, its free devices (as the ResourceSlices and
the allocated claims say, ``api.device_room``) plus what the claims of the pods bound to it
hold; those pods' requests gain what their own claims (made from templates) hold, and their
device-backed extended resources count under the class's resource. Taking the pods' requests
off the nodes' allocatable then leaves exactly the free devices, and a pod's devices are
part of what it frees when it is evicted. A claim a pod names directly may be shared: its
devices are held on the nodes but are no pod's, and its workload counts it once
(``WorkloadView.claimed``).

The class selectors are evaluated once per set of slices and classes (``_Matching``); the
nodes and pods a call returns are the very objects of the call before whenever what was
added to them is the same, so the scheduler's caches, which compare by identity, hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from sluice.api.device_cel import SelectorError
from sluice.api.device_claims import ResourceClaim
from sluice.api.device_quota import (
    ONE_DEVICE,
    DeviceMapping,
    claim_holds,
    extended_requests,
    serving_classes,
)
from sluice.api.device_room import DeviceKey, free_room, held_devices, matching
from sluice.api.devices import DeviceClass, NodeAccess, Pool, ResourceSlice, pools
from sluice.api.resources import EMPTY, Resources
from sluice.api.views import NodeView, PodView
from sluice.scheduler.placement import terms_hold


@dataclass(frozen=True, slots=True)
class DeviceObjects:
    """The DRA objects of the cluster, as read."""

    classes: Sequence[DeviceClass] = ()
    slices: Sequence[ResourceSlice] = ()
    claims: Sequence[ResourceClaim] = ()

    def __bool__(self) -> bool:
        return bool(self.classes) or bool(self.slices) or bool(self.claims)


@dataclass(frozen=True, slots=True)
class DeviceNotes:
    """What the cycle's reasons say of device resources."""

    classes_of: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Quota resource -> the DeviceClasses whose devices count as it."""
    unknown: Mapping[str, str] = field(default_factory=dict)
    """Quota resource -> why its free devices are not known (a selector that fails): no
    device of it is counted free, and a job asking it waits with this."""

    def asked_through_claims(self, resource: str) -> str:
        """`` (devices of <classes> asked through claims)`` for a device resource, else ""."""
        classes = self.classes_of.get(resource)
        return f" (devices of {', '.join(classes)} asked through claims)" if classes else ""


NO_NOTES = DeviceNotes()


def with_devices(
    nodes: Sequence[NodeView],
    pods: Sequence[PodView] | None,
    objects: DeviceObjects,
    mapping: DeviceMapping,
) -> tuple[Sequence[NodeView], Sequence[PodView] | None, DeviceNotes]:
    """The nodes and pods with the devices counted in (the module's docstring)."""
    if not objects:
        return nodes, pods, NO_NOTES
    classes = {c.name: c for c in objects.classes}
    serving = serving_classes(classes)
    by_resource: dict[str, list[DeviceClass]] = {}
    for c in sorted(classes.values(), key=lambda c: c.name):
        by_resource.setdefault(mapping.resource_of(c), []).append(c)
    notes = DeviceNotes({r: tuple(c.name for c in found) for r, found in by_resource.items()})
    claims = {(c.namespace, c.name): c for c in objects.claims}
    held = held_devices(objects.claims)
    free, unknown = _free(objects.slices, by_resource, held, nodes)
    notes = replace(notes, unknown=unknown)
    added: dict[str, dict[str, int]] = {}
    out_pods = pods
    if pods is not None:
        out_pods = _pods_with_devices(pods, claims, classes, serving, mapping, added)
    out_nodes = [
        _node_with(n, free.get(n.name), added.get(n.name), serving, mapping) for n in nodes
    ]
    return out_nodes, out_pods, notes


def _free(
    slices: Sequence[ResourceSlice],
    by_resource: Mapping[str, Sequence[DeviceClass]],
    held: frozenset[DeviceKey],
    nodes: Sequence[NodeView],
) -> tuple[dict[str, dict[str, int]], dict[str, str]]:
    """Node -> device resource -> its free devices; resource -> why not known."""
    found = _MATCHING.of(slices, by_resource)
    free: dict[str, dict[str, int]] = {}
    unknown: dict[str, str] = {}
    for resource, matched in found.matched.items():
        if isinstance(matched, SelectorError):
            unknown[resource] = (
                f"the free devices of {', '.join(c.name for c in by_resource[resource])} are "
                f"not known: {matched}"
            )
            continue
        room = free_room(found.pools, held, matched)
        for name, count in room.by_node.items():
            _add(free.setdefault(name, {}), resource, count * ONE_DEVICE)
        for access, shared in room.shared:
            for node in nodes:
                if _reaches(access, node):
                    _add(free.setdefault(node.name, {}), resource, shared * ONE_DEVICE)
    return free, unknown


@dataclass(slots=True)
class _Found:
    slices: tuple[int, ...]
    classes: tuple[tuple[str, tuple[int, ...]], ...]
    pools: tuple[Pool, ...]
    kept: tuple[ResourceSlice, ...]
    """The slices themselves: their ids stay theirs while this record holds them."""
    matched: dict[str, frozenset[DeviceKey] | SelectorError]


class _Matching:
    """The devices each resource's classes select, kept while the slices and classes are
    the very objects of the last call (the stores keep a view until its object changes)."""

    def __init__(self) -> None:
        self._last: _Found | None = None

    def of(
        self, slices: Sequence[ResourceSlice], by_resource: Mapping[str, Sequence[DeviceClass]]
    ) -> _Found:
        slice_ids = tuple(id(s) for s in slices)
        class_ids = tuple((r, tuple(id(c) for c in cs)) for r, cs in sorted(by_resource.items()))
        last = self._last
        if last is not None and last.slices == slice_ids and last.classes == class_ids:
            return last
        found_pools = pools(slices)
        matched = {r: matching(found_pools, cs) for r, cs in by_resource.items()}
        self._last = _Found(slice_ids, class_ids, found_pools, tuple(slices), matched)
        return self._last


_MATCHING = _Matching()


def _pods_with_devices(
    pods: Sequence[PodView],
    claims: Mapping[tuple[str, str], ResourceClaim],
    classes: Mapping[str, DeviceClass],
    serving: Mapping[str, DeviceClass],
    mapping: DeviceMapping,
    added: dict[str, dict[str, int]],
) -> list[PodView]:
    out: list[PodView] = []
    served = serving.keys()
    class_objects = tuple(classes.values())
    for pod in pods:
        if not pod.claims and served.isdisjoint(pod.request):
            out.append(pod)
            continue
        found = tuple(claims.get((pod.namespace, name)) for name in pod.claims)
        made, on_node = _POD_MEMO.pod(pod, found, class_objects, classes, serving, mapping)
        if pod.node and not pod.finished:
            target = added.setdefault(pod.node, {})
            for r, a in on_node.items():
                _add(target, r, a)
        out.append(made)
    return out


def _claims_of(
    pod: PodView,
    claims: Sequence[ResourceClaim | None],
    classes: Mapping[str, DeviceClass],
    mapping: DeviceMapping,
) -> tuple[Resources, Resources]:
    """What the pod's own claims (made for it from templates) count as, allocated or not;
    and what the allocated ones among them and its extended-resource claim hold on its node.
    ``claims``: the ResourceClaims it uses, None for one not there. A claim it names directly
    is not its own: its workload counts it once."""
    own = on_node = EMPTY
    for claim in claims:
        if claim is None or (claim.owner_pod != pod.name and not claim.for_extended_resources):
            continue
        if not claim.for_extended_resources:
            holds = claim_holds(claim, classes, mapping)
            own = own + holds if isinstance(holds, Resources) else own
        if claim.allocation is not None:
            given = claim_holds(replace(claim, for_extended_resources=False), classes, mapping)
            on_node = on_node + given if isinstance(given, Resources) else on_node
    return own, on_node


@dataclass(slots=True)
class _PodKept:
    pod: PodView
    claims: tuple[ResourceClaim | None, ...]
    classes: tuple[DeviceClass, ...]
    mapping: DeviceMapping
    made: PodView
    on_node: Resources


class _PodMemo:
    """Each pod with devices counted in, and what its claims hold on its node: the same
    objects while its view, its claims' views and the classes are the very objects of the
    call before (the stores keep a view until its object changes), so neither the claims
    are counted again nor the scheduler's caches, which compare by identity, are missed."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str], _PodKept] = {}

    def pod(
        self,
        pod: PodView,
        claims: tuple[ResourceClaim | None, ...],
        class_objects: tuple[DeviceClass, ...],
        classes: Mapping[str, DeviceClass],
        serving: Mapping[str, DeviceClass],
        mapping: DeviceMapping,
    ) -> tuple[PodView, Resources]:
        key = (pod.namespace, pod.name)
        kept = self._kept.get(key)
        if (
            kept is not None
            and kept.pod is pod
            and _same(kept.claims, claims)
            and _same(kept.classes, class_objects)
            and kept.mapping == mapping
        ):
            return kept.made, kept.on_node
        own, on_node = _claims_of(pod, claims, classes, mapping)
        made = pod
        if own or not serving.keys().isdisjoint(pod.request):
            made = replace(pod, request=extended_requests(pod.request, serving, mapping) + own)
        if kept is not None and kept.pod is pod and kept.made.request == made.request:
            made = kept.made
        if len(self._kept) > 200_000:
            self._kept.clear()
        self._kept[key] = _PodKept(pod, claims, class_objects, mapping, made, on_node)
        return made, on_node


def _same(kept: Sequence[object], now: Sequence[object]) -> bool:
    """Whether two sequences hold the very same objects."""
    return len(kept) == len(now) and all(a is b for a, b in zip(kept, now, strict=True))


_POD_MEMO = _PodMemo()


def _node_with(
    node: NodeView,
    free: Mapping[str, int] | None,
    added: Mapping[str, int] | None,
    serving: Mapping[str, DeviceClass],
    mapping: DeviceMapping,
) -> NodeView:
    if not free and not added and serving.keys().isdisjoint(node.allocatable):
        return node
    return _NODE_MEMO.node(node, Resources(free or {}) + (added or {}), serving, mapping)


class _NodeMemo:
    """Each node with its devices counted in: the same object while its view, its devices and
    what names its extended resources count under (the serving classes, the mapping) are."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[NodeView, Resources, dict[str, str], NodeView]] = {}

    def node(
        self,
        node: NodeView,
        devices: Resources,
        serving: Mapping[str, DeviceClass],
        mapping: DeviceMapping,
    ) -> NodeView:
        names = {r: mapping.resource_of(c) for r, c in serving.items() if r in node.allocatable}
        kept = self._kept.get(node.name)
        if kept is not None and kept[0] is node and kept[1] == devices and kept[2] == names:
            return kept[3]
        allocatable = extended_requests(node.allocatable, serving, mapping) + devices
        made = replace(node, allocatable=allocatable)
        if len(self._kept) > 50_000:
            self._kept.clear()
        self._kept[node.name] = (node, devices, names, made)
        return made


_NODE_MEMO = _NodeMemo()


def _reaches(access: NodeAccess, node: NodeView) -> bool:
    if access.all_nodes:
        return True
    if access.node_selector is not None:
        return terms_hold(access.node_selector, node)
    return access.node_name == node.name


def _add(target: dict[str, int], resource: str, amount: int) -> None:
    target[resource] = target.get(resource, 0) + amount
