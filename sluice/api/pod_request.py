"""The request of a pod as Kubernetes counts it for scheduling, worked out once per pod shape.

Kubernetes counts, for a pod: max(sum of its app containers + sum of its restartable
(sidecar) init containers, for each init container: its request + the sidecars started
before it); replaced, for the resources it names, by the pod-level request (spec.resources);
plus the pod overhead. A container requests its requests, its limit for a resource it names
no request for, and for one it names neither its namespace's LimitRange default request; a
pod that names no overhead gets its RuntimeClass's (docs/workloads.md, "The request sluice
counts").

The tens of thousands of workloads and pods of a cluster come from a few hundred pod
templates. So a pod spec is first reduced to its ``PodShape``: everything of it the request
depends on, as written (each container's and init container's limits and requests, which
init containers are sidecars, the pod-level resources, the overhead), and what its
namespace adds (the default requests, its RuntimeClass's overhead). The request is a
function of the shape alone, worked out once per distinct shape in a bounded table
(sluice.api.memo): two pods of one shape ask the same by construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from sluice.api.errors import InvalidObject
from sluice.api.memo import Memo
from sluice.api.pod_defaults import NO_DEFAULTS, PodDefaults
from sluice.api.quantity import QuantityError
from sluice.api.resources import EMPTY, Resources

Quantities = tuple[tuple[Any, Any], ...]
"""A resource map as written: its (resource, quantity) pairs, in order."""
Requirements = tuple[Quantities, Quantities]
"""A ResourceRequirements as written: its limits, then its requests."""
NO_REQUIREMENTS: Final[Requirements] = ((), ())

SHAPES_KEPT = 4096
"""Distinct pod shapes whose request is remembered (the least recently used go first)."""


class PodShape(NamedTuple):
    """What of a pod spec, and of its namespace, its request depends on: equal shapes ask
    the same."""

    containers: tuple[Requirements, ...]
    init_containers: tuple[tuple[Requirements, bool], ...]
    """Each init container's requirements and whether it is a sidecar (restartPolicy
    Always)."""
    pod_level: Requirements
    overhead: Quantities
    default_requests: Resources | None
    """Its namespace's LimitRange default container requests (None: none)."""
    class_overhead: Resources | None
    """Its RuntimeClass's overhead, what it gets if it names none (None: none)."""

    def plain(self) -> bool:
        """Every quantity in it is a string, as the API server writes them: only such a shape
        is remembered. (It is checked when a shape is remembered, not when one is looked
        up: in Python ``True == 1``, so a table holding ``1`` would answer for ``True``,
        which is no quantity; no string equals ``True``.)"""
        maps = [q for r in self.containers for q in r]
        maps += [q for r, _ in self.init_containers for q in r]
        maps += [*self.pod_level, self.overhead]
        return all(type(value) is str for q in maps for _, value in q)


class _Unreadable(ValueError):
    """A field of the pod spec that cannot be read, ``where`` relative to the spec."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


class _NotPlain(Exception):
    """A shape not to be remembered (``PodShape.plain``)."""


def pod_request(
    pod_spec: Mapping[str, Any],
    kind: str,
    name: str,
    base: str = "spec.template.spec",
    defaults: PodDefaults = NO_DEFAULTS,
) -> Resources:
    """The request of a pod of this spec (at ``base`` in object ``kind`` ``name``) as
    Kubernetes computes it for scheduling; ``defaults``: what the API server adds to a pod
    created from it in its namespace (a template's containers get their LimitRange default
    requests, the pod its RuntimeClass's overhead). Raises InvalidObject naming the field."""
    try:
        return request_of(pod_shape(pod_spec, defaults))
    except _Unreadable as err:
        raise InvalidObject(kind, name, f"{base}.{err.where}", err.problem) from None


def requirements_request(
    requirements: Mapping[str, Any], kind: str, name: str, where: str
) -> Resources:
    """What a ResourceRequirements (limits, requests) at ``where`` requests: its requests, and
    its limit for a resource it names no request for."""
    try:
        return _requirements_request(_requirements(requirements, where), where)
    except _Unreadable as err:
        raise InvalidObject(kind, name, err.where, err.problem) from None


def pod_shape(pod_spec: Mapping[str, Any], defaults: PodDefaults = NO_DEFAULTS) -> PodShape:
    """A pod spec's shape, with what its namespace adds. Raises _Unreadable for a field that
    does not hold what a pod spec holds there."""
    containers = _listed(pod_spec, "containers")
    inits = _listed(pod_spec, "initContainers")
    overheads = defaults.overheads
    runtime_class = str(pod_spec.get("runtimeClassName") or "") if overheads else ""
    return PodShape(
        tuple([_container(c, "containers", i) for i, c in enumerate(containers)]),
        tuple(
            [
                (_container(c, "initContainers", i), c.get("restartPolicy") == "Always")
                for i, c in enumerate(inits)
            ]
        ),
        _requirements(pod_spec.get("resources"), "resources"),
        _quantities(pod_spec.get("overhead"), "overhead", ""),
        # None rather than an empty Resources: hashed at C speed.
        defaults.container_requests or None,
        overheads.get(runtime_class) or None if overheads else None,
    )


def request_of(shape: PodShape) -> Resources:
    """The request of a pod of this shape; remembered when the shape is plain."""
    try:
        return _REMEMBERED.lookup(shape)
    except (_NotPlain, TypeError):  # TypeError: a quantity written as a list or a map
        return _request_of(shape)


def _request_of(shape: PodShape) -> Resources:
    fill = shape.default_requests or EMPTY
    total = EMPTY
    for i, requirements in enumerate(shape.containers):
        total = total + _container_request(requirements, fill, "containers", i)
    sidecars = EMPTY
    init_peak = EMPTY
    for i, (requirements, sidecar) in enumerate(shape.init_containers):
        request = _container_request(requirements, fill, "initContainers", i)
        if sidecar:
            sidecars = sidecars + request
            init_peak = init_peak.maximum(sidecars)
        else:
            init_peak = init_peak.maximum(sidecars + request)
    result = (total + sidecars).maximum(init_peak)
    # Pod-level resources (spec.resources), where set, are what the scheduler counts for
    # their resources, whatever the containers ask for.
    pod_level = _requirements_request(shape.pod_level, "resources")
    if pod_level:
        result = Resources({**result, **pod_level})
    # The API server sets a pod's overhead from its RuntimeClass when it names none.
    overhead = _parsed(shape.overhead, "overhead", "") or shape.class_overhead or EMPTY
    return result + overhead


def _remembered_request(shape: PodShape) -> Resources:
    if not shape.plain():
        raise _NotPlain
    return _request_of(shape)


_REMEMBERED: Final = Memo(_remembered_request, SHAPES_KEPT)


def _container_request(
    requirements: Requirements, fill: Resources, group: str, index: int
) -> Resources:
    """A container's request: its own, and for a resource it names neither a request nor a
    limit for, the namespace's default request (``fill``), as the API server fills them in."""
    own = _requirements_request(requirements, f"{group}[{index}].resources")
    return Resources({**fill, **own}) if fill else own


def _requirements_request(requirements: Requirements, where: str) -> Resources:
    limits, requests = requirements
    return Resources({**_parsed(limits, where, ".limits"), **_parsed(requests, where, ".requests")})


def _listed(spec: Mapping[str, Any], key: str) -> list[Any]:
    items = spec.get(key)
    if not items:
        return []
    if not isinstance(items, list):
        raise _Unreadable(key, "expected a list")
    return items


def _container(container: Any, group: str, index: int) -> Requirements:
    if type(container) is not dict and not isinstance(container, Mapping):
        raise _Unreadable(f"{group}[{index}]", "expected an object")
    resources = container.get("resources")
    return _requirements(resources, group, index) if resources else NO_REQUIREMENTS


def _requirements(requirements: Any, where: str, index: int = -1) -> Requirements:
    """A ResourceRequirements as written: at ``where``, or, given an ``index``, of the
    container at ``where[index]``."""
    if not requirements:
        return NO_REQUIREMENTS
    if index >= 0:
        where = f"{where}[{index}].resources"
    if type(requirements) is not dict and not isinstance(requirements, Mapping):
        raise _Unreadable(where, "expected an object")
    return (
        _quantities(requirements.get("limits"), where, ".limits"),
        _quantities(requirements.get("requests"), where, ".requests"),
    )


def _quantities(raw: Any, where: str, field: str) -> Quantities:
    if raw is None:
        return ()
    if type(raw) is not dict and not isinstance(raw, Mapping):
        _parsed(raw, where, field)  # raises, saying what a resource map is
    return tuple(raw.items())


def _parsed(quantities: Any, where: str, field: str) -> Resources:
    """Quantities (or, to say why they are not, a value that is no map) parsed."""
    try:
        return Resources.parse(
            dict(quantities) if isinstance(quantities, tuple) else quantities, ""
        )
    except QuantityError as err:
        raise _Unreadable(f"{where}{field}", str(err)) from None
