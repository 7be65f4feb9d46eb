"""What the API server adds to a pod's request when it creates the pod: its namespace's
LimitRange default requests and its RuntimeClass's overhead (docs/workloads.md, "The request
sluice counts"); and what the devices it asks through claims count as (its namespace's
``DeviceContext``, docs/scheduler.md, *Devices (DRA)*).

A workload's pod templates state what their containers ask; the pods created from them ask
that plus these, and the pods are what take room on the nodes. So sluice decides on the pods'
request, not the template's: a template is read with its namespace's ``PodDefaults``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sluice.api.device_context import NO_DEVICES, DeviceContext
from sluice.api.errors import InvalidObject
from sluice.api.quantity import QuantityError
from sluice.api.resources import EMPTY, Resources


@dataclass(frozen=True, slots=True)
class PodDefaults:
    """What a pod created in one namespace gets from the API server."""

    container_requests: Resources = EMPTY
    """Per resource, the request a container that names neither a request nor a limit for
    it gets (its LimitRanges' ``defaultRequest``, once the API server has defaulted them)."""
    overheads: Mapping[str, Resources] = field(default_factory=dict)
    """RuntimeClass name -> its ``overhead.podFixed``: added to a pod that names the class."""
    devices: DeviceContext = NO_DEVICES
    """What the devices its pods ask through claims (and device-backed extended resources)
    count as."""

    def __bool__(self) -> bool:
        return bool(self.container_requests) or bool(self.overheads) or bool(self.devices)


NO_DEFAULTS = PodDefaults()


@dataclass(frozen=True, slots=True)
class LimitRangeView:
    """A LimitRange as the pods of its namespace see it: the requests it gives containers."""

    namespace: str
    name: str
    container_requests: Resources


@dataclass(frozen=True, slots=True)
class RuntimeClassView:
    name: str
    overhead: Resources


def _quantities(raw: Any, kind: str, name: str, where: str) -> Resources:
    if raw is None:
        return EMPTY
    if not isinstance(raw, Mapping):
        raise InvalidObject(kind, name, where, "expected an object")
    try:
        return Resources.parse(raw, "")
    except QuantityError as err:
        raise InvalidObject(kind, name, where, str(err)) from None


def limit_range_from_object(obj: Mapping[str, Any]) -> LimitRangeView:
    """The container default requests of a LimitRange, as the API server fills them in when
    it stores one: a ``default`` limit defaults to ``max``, a ``defaultRequest`` to the
    ``default`` limit, else to ``min``. Only items of type Container give defaults."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "default")
    full = f"{namespace}/{name}"
    spec = obj.get("spec") or {}
    requests: dict[str, int] = {}
    for i, item in enumerate(spec.get("limits") or ()):
        if not isinstance(item, Mapping) or item.get("type") != "Container":
            continue
        where = f"spec.limits[{i}]"

        def read(key: str, i_where: str = where, one: Mapping[str, Any] = item) -> Resources:
            return _quantities(one.get(key), "LimitRange", full, f"{i_where}.{key}")

        limit = {**read("max"), **read("default")}
        # A later item overrides an earlier one, as the API server applies them.
        requests.update({**read("min"), **limit, **read("defaultRequest")})
    return LimitRangeView(namespace, name, Resources(requests))


def runtime_class_from_object(obj: Mapping[str, Any]) -> RuntimeClassView:
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    overhead = obj.get("overhead") or {}
    fixed = overhead.get("podFixed") if isinstance(overhead, Mapping) else None
    return RuntimeClassView(name, _quantities(fixed, "RuntimeClass", name, "overhead.podFixed"))


def pod_defaults(
    limit_ranges: Iterable[LimitRangeView],
    runtime_classes: Iterable[RuntimeClassView],
    devices: Mapping[str, DeviceContext] | None = None,
) -> dict[str, PodDefaults]:
    """Namespace -> its PodDefaults, for every namespace that has a LimitRange or a
    DeviceContext of its own (``device_context.device_contexts``); the key "" holds what
    every other namespace gets (the RuntimeClasses and the DeviceClasses alone). Several
    LimitRanges in one namespace: for each resource, the first by name that gives a
    request."""
    overheads = {rc.name: rc.overhead for rc in runtime_classes if rc.overhead}
    by_namespace: dict[str, dict[str, int]] = {}
    for lr in sorted(limit_ranges, key=lambda v: (v.namespace, v.name)):
        mine = by_namespace.setdefault(lr.namespace, {})
        for r, amount in lr.container_requests.items():
            mine.setdefault(r, amount)
    devices = devices or {}
    cluster = devices.get("", NO_DEVICES)
    return {
        ns: PodDefaults(Resources(by_namespace.get(ns, {})), overheads, devices.get(ns, cluster))
        for ns in {*by_namespace, *devices, ""}
    }


def defaults_for(table: Mapping[str, PodDefaults], namespace: str) -> PodDefaults:
    """The PodDefaults of a namespace from a ``pod_defaults`` table."""
    return table.get(namespace) or table.get("") or NO_DEFAULTS


DefaultsOf = Callable[[str], PodDefaults]
"""namespace -> what its pods get from the API server."""


def no_defaults(namespace: str) -> PodDefaults:
    """Nothing is added (no LimitRange, no RuntimeClass known)."""
    return NO_DEFAULTS


class PodDefaultsTable:
    """The LimitRanges and RuntimeClasses seen so far, and the PodDefaults they give each
    namespace: what the operator keeps as their watch events arrive."""

    def __init__(self) -> None:
        self._limit_ranges: dict[str, LimitRangeView] = {}
        self._runtime_classes: dict[str, RuntimeClassView] = {}
        self._devices: Mapping[str, DeviceContext] = {}
        self._table: dict[str, PodDefaults] = {"": NO_DEFAULTS}

    def of(self, namespace: str) -> PodDefaults:
        return defaults_for(self._table, namespace)

    def set_limit_range(self, key: str, view: LimitRangeView | None) -> bool:
        """Keep (or, None, forget) the LimitRange at namespace/name; whether its namespace's
        defaults changed."""
        namespace = key.partition("/")[0]
        before = self.of(namespace)
        if view is None:
            self._limit_ranges.pop(key, None)
        else:
            self._limit_ranges[key] = view
        self._rebuild()
        return self.of(namespace) != before

    def set_runtime_class(self, name: str, view: RuntimeClassView | None) -> bool:
        """Keep (or forget) a RuntimeClass; whether any pod's overhead changed."""
        before = self._runtime_classes.get(name)
        if view is None:
            self._runtime_classes.pop(name, None)
        else:
            self._runtime_classes[name] = view
        self._rebuild()
        return before != view

    def set_devices(self, devices: Mapping[str, DeviceContext]) -> list[str] | None:
        """Keep each namespace's DeviceContext (``device_context.device_contexts``); the
        namespaces whose context changed, or None when every namespace's did (the classes or
        the mapping changed)."""
        before = self._devices
        self._devices = devices
        self._rebuild()
        if before.get("", NO_DEVICES) != devices.get("", NO_DEVICES):
            return None
        return [
            ns
            for ns in {*before, *devices}
            if ns and before.get(ns, before.get("", NO_DEVICES)) != self.of(ns).devices
        ]

    def _rebuild(self) -> None:
        # A new table is swapped in whole: a reader on another thread sees the old or the new.
        self._table = pod_defaults(
            self._limit_ranges.values(), self._runtime_classes.values(), self._devices
        )
