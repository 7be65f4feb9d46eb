"""Free devices: how many devices of a class (and a request's selectors) can still be
allocated, per node, as the ResourceSlices and the allocated claims say (docs/scheduler.md,
*Devices (DRA)*, node room).

A device is counted free only when sluice is sure of it:
- its pool is complete (all the slices of its newest generation are there);
- no allocated claim holds it (a claim being deleted still does, until it is gone); a device
  that allows multiple allocations and is already held is not counted, for its remaining
  capacity is not known to suit another request;
- it has no NoSchedule or NoExecute taint;
- the shared counters it consumes are left, after the devices already held and the free
  devices counted before it (in slice then device order: a set of devices that can all be
  allocated at once, so never more than kube-scheduler can give);
- it satisfies every selector, each evaluating to true. A selector that fails on a device
  makes the whole answer an error: the workload waits with it rather than on a guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sluice.api.constraints import BLOCKING_EFFECTS
from sluice.api.device_cel import PreparedDevice, Selector, SelectorError, compile_selector
from sluice.api.device_claims import ResourceClaim
from sluice.api.devices import Device, DeviceClass, NodeAccess, Pool, ResourceSlice

DeviceKey = tuple[str, str, str]
"""(driver, pool, device), as an allocation result names a device."""


@dataclass(frozen=True, slots=True)
class ClassRoom:
    """The free devices of one class: node-local ones by node, network-attached ones with the
    nodes that reach them (each counted once, whichever of those nodes a pod lands on)."""

    by_node: dict[str, int] = field(default_factory=dict)
    shared: tuple[tuple[NodeAccess, int], ...] = ()
    incomplete_pools: tuple[str, ...] = ()
    """`driver/pool` of pools left out: not all their slices are published."""


def held_devices(claims: Iterable[ResourceClaim]) -> frozenset[DeviceKey]:
    """The devices allocated claims hold (admin access takes no device from anyone)."""
    return frozenset(
        (r.driver, r.pool, r.device)
        for claim in claims
        if claim.allocation is not None
        for r in claim.allocation
        if not r.admin_access
    )


def class_room(
    pools: Sequence[Pool],
    held: frozenset[DeviceKey],
    device_class: DeviceClass,
    request_selectors: Sequence[str] = (),
) -> ClassRoom | SelectorError:
    """The free devices of `device_class` narrowed by a request's selectors."""
    matched = matching(pools, [device_class], request_selectors)
    if isinstance(matched, SelectorError):
        return matched
    return free_room(pools, held, matched)


def matching(
    pools: Sequence[Pool], classes: Sequence[DeviceClass], request_selectors: Sequence[str] = ()
) -> frozenset[DeviceKey] | SelectorError:
    """The devices of complete pools that belong to any of `classes` (satisfy all its
    selectors) and satisfy all `request_selectors`: what ``free_room`` counts among. It
    depends on the slices and classes alone, so a caller keeps it while they stay."""
    alternatives: list[list[Selector]] = []
    extra: list[Selector] = []
    for group, out in [*[(c.selectors, None) for c in classes], (request_selectors, extra)]:
        compiled_group: list[Selector] = [] if out is None else out
        for expression in group:
            compiled = compile_selector(expression)
            if isinstance(compiled, SelectorError):
                return compiled
            compiled_group.append(compiled)
        if out is None:
            alternatives.append(compiled_group)
    found: set[DeviceKey] = set()
    for pool in pools:
        if not pool.complete:
            continue
        for _, device in pool.devices:
            prepared = PreparedDevice(device.for_cel(pool.driver))
            verdict = _matches(extra, prepared)
            if verdict is True:
                verdict = _any_class(alternatives, prepared)
            if isinstance(verdict, SelectorError):
                return verdict
            if verdict:
                found.add((pool.driver, pool.name, device.name))
    return frozenset(found)


def free_room(
    pools: Sequence[Pool], held: frozenset[DeviceKey], matched: frozenset[DeviceKey]
) -> ClassRoom:
    """How many of the ``matched`` devices are free, by node (``ClassRoom``)."""
    by_node: dict[str, int] = {}
    shared: list[tuple[NodeAccess, int]] = []
    incomplete: list[str] = []
    for pool in pools:
        if not pool.complete:
            incomplete.append(f"{pool.driver}/{pool.name}")
            continue
        counters = _counters_left(pool, held)
        shared_here: dict[NodeAccess, int] = {}
        for slice_, device in pool.devices:
            if (pool.driver, pool.name, device.name) not in matched:
                continue
            if not _takeable(pool, device, held, counters):
                continue
            _consume(device, counters)
            access = _access(slice_, device)
            if access.node_name is not None:
                by_node[access.node_name] = by_node.get(access.node_name, 0) + 1
            else:
                shared_here[access] = shared_here.get(access, 0) + 1
        shared.extend(shared_here.items())
    return ClassRoom(by_node, tuple(shared), tuple(incomplete))


def _any_class(
    alternatives: Sequence[Sequence[Selector]], device: PreparedDevice
) -> bool | SelectorError:
    for selectors in alternatives:
        verdict = _matches(selectors, device)
        if verdict is not False:
            return verdict
    return False


def _matches(selectors: Sequence[Selector], device: PreparedDevice) -> bool | SelectorError:
    for selector in selectors:
        verdict = selector.evaluate(device)
        if verdict is not True:
            return verdict
    return True


def _takeable(
    pool: Pool, device: Device, held: frozenset[DeviceKey], counters: dict[str, dict[str, int]]
) -> bool:
    if (pool.driver, pool.name, device.name) in held:
        return False
    if any(t.effect in BLOCKING_EFFECTS for t in device.taints):
        return False
    for use in device.consumes_counters:
        left = counters.get(use.counter_set)
        if left is None:  # a counter set the pool does not publish: not sure
            return False
        if any(left.get(name, 0) < amount for name, amount in use.counters.items()):
            return False
    return True


def _counters_left(pool: Pool, held: frozenset[DeviceKey]) -> dict[str, dict[str, int]]:
    left = {name: dict(values) for name, values in pool.shared_counters.items()}
    for _, device in pool.devices:
        if (pool.driver, pool.name, device.name) in held:
            _consume(device, left)
    return left


def _consume(device: Device, counters: dict[str, dict[str, int]]) -> None:
    for use in device.consumes_counters:
        left = counters.setdefault(use.counter_set, {})
        for name, amount in use.counters.items():
            left[name] = left.get(name, 0) - amount


def _access(slice_: ResourceSlice, device: Device) -> NodeAccess:
    access = device.access or slice_.access
    return access if access is not None else NodeAccess()
