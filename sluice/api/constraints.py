"""Where a pod may run, as Kubernetes writes it: nodeSelector, required node affinity,
tolerations, and the nodes' taints. Read here into hashable values; the rules that match them
against nodes live in sluice/scheduler/placement.py.

Only what binds a pod to nodes is read: preferred affinity, pod (anti-)affinity and
topology spreading decide where kube-scheduler puts a pod among the nodes that can take it,
not whether one can.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sluice.api.errors import InvalidObject
from sluice.api.memo import Memo, Unkeyable, frozen, thawed
from sluice.api.resources import Resources

NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
"""Taint effects that keep a pod that does not tolerate them off the node (PreferNoSchedule
only asks kube-scheduler to avoid it)."""


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def describe(self) -> str:
        """As kubectl writes it: ``key=value:Effect``."""
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""  # empty with Exists: every taint
    operator: str = "Equal"  # Equal or Exists
    value: str = ""
    effect: str = ""  # empty: every effect


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Whether the toleration covers the taint, as Kubernetes matches them."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.value == taint.value


@dataclass(frozen=True, slots=True)
class NodeRequirement:
    """One matchExpressions (or matchFields, on metadata.name) entry of a node selector term."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    on_field: bool = False

    def describe(self) -> str:
        if self.operator == "Exists":
            return self.key
        if self.operator == "DoesNotExist":
            return f"!{self.key}"
        if self.operator in ("Gt", "Lt"):
            return f"{self.key} {'>' if self.operator == 'Gt' else '<'} {self.values[0]}"
        return f"{self.key} {self.operator.lower()} ({','.join(self.values)})"


NodeTerm = tuple[NodeRequirement, ...]
"""The requirements of one nodeSelectorTerm, all of which must hold."""


@dataclass(frozen=True, slots=True)
class PodSpecView:
    """What placement needs of a pod: its request and which nodes may take it.

    ``affinity`` is the required node affinity's terms, any one of which must hold; None when
    the pod has none (every node passes). Hashable, so placement can remember per pod shape
    which nodes take it.
    """

    request: Resources
    node_selector: tuple[tuple[str, str], ...] = ()
    affinity: tuple[NodeTerm, ...] | None = None
    tolerations: tuple[Toleration, ...] = ()
    constraints: tuple[object, ...] = field(init=False, repr=False, compare=False, default=())
    """Everything but the request: pods with equal constraints go on the same nodes."""
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        # Placement looks pod shapes up hundreds of thousands of times a cycle.
        constraints = (self.node_selector, self.affinity, self.tolerations)
        object.__setattr__(self, "constraints", constraints)
        object.__setattr__(self, "_hash", hash((frozenset(self.request.items()), constraints)))

    def __hash__(self) -> int:
        return self._hash


def pod_spec_view(
    spec: Mapping[str, Any], request: Resources, kind: str, name: str, base: str
) -> PodSpecView:
    """The PodSpecView of a pod spec (at ``base`` in object ``kind`` ``name``) of this
    request. Its constraints are read once per distinct nodeSelector, affinity and
    tolerations (and request): the pods of a cluster have a few hundred shapes."""
    try:
        return _REMEMBERED.lookup(
            (
                request,
                frozen(spec.get("nodeSelector")),
                frozen(spec.get("affinity")),
                frozen(spec.get("tolerations")),
            )
        )
    except (Unkeyable, InvalidObject):
        pass  # not a key, or not readable: read from the spec, to name the field
    return _read_pod_spec_view(spec, request, kind, name, base)


def _read_pod_spec_view(
    spec: Mapping[str, Any], request: Resources, kind: str, name: str, base: str
) -> PodSpecView:
    selector = spec.get("nodeSelector") or {}
    if not isinstance(selector, Mapping):
        raise InvalidObject(kind, name, f"{base}.nodeSelector", "expected a map of labels")
    return interned(
        PodSpecView(
            request=request,
            node_selector=tuple(sorted((str(k), str(v)) for k, v in selector.items())),
            affinity=_affinity(spec.get("affinity"), kind, name, f"{base}.affinity"),
            tolerations=tuple(
                _toleration(t, kind, name, f"{base}.tolerations[{i}]")
                for i, t in enumerate(spec.get("tolerations") or ())
            ),
        )
    )


def _pod_spec_view_of(key: tuple[Resources, Hashable, Hashable, Hashable]) -> PodSpecView:
    request, selector, affinity, tolerations = key
    spec = {"nodeSelector": thawed(selector), "affinity": thawed(affinity)}
    spec["tolerations"] = thawed(tolerations)
    return _read_pod_spec_view(spec, request, "", "", "")


_REMEMBERED: Final = Memo(_pod_spec_view_of, 4096)
"""Pod shapes whose PodSpecView is remembered (the least recently used go first)."""


_INTERNED: dict[PodSpecView, PodSpecView] = {}
INTERNED_MAX = 100_000
"""Distinct pod shapes kept; past that the table starts again (a cluster has far fewer)."""


def interned(pod: PodSpecView) -> PodSpecView:
    """The one PodSpecView equal to ``pod``: the jobs of a cluster have a few hundred pod
    shapes between tens of thousands of them, and a cycle compares and looks shapes up
    hundreds of thousands of times, which the same object answers at once."""
    if len(_INTERNED) >= INTERNED_MAX:
        _INTERNED.clear()
    return _INTERNED.setdefault(pod, pod)


def _affinity(raw: Any, kind: str, name: str, where: str) -> tuple[NodeTerm, ...] | None:
    node = (raw or {}).get("nodeAffinity") if isinstance(raw, Mapping) else None
    required = (node or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return None
    where = f"{where}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    return node_selector_terms(required, kind, name, where)


def node_selector_terms(
    raw: Mapping[str, Any], kind: str, name: str, where: str
) -> tuple[NodeTerm, ...]:
    """A NodeSelector (``nodeSelectorTerms``: a node matches when one term holds), as a
    pod's required affinity, a ResourceSlice and a claim's allocation write it."""
    terms: list[NodeTerm] = []
    for t, term in enumerate(raw.get("nodeSelectorTerms") or ()):
        at = f"{where}.nodeSelectorTerms[{t}]"
        if not isinstance(term, Mapping):
            raise InvalidObject(kind, name, at, "expected matchExpressions or matchFields")
        requirements = [
            _requirement(e, kind, name, f"{at}.matchExpressions[{i}]", on_field=False)
            for i, e in enumerate(term.get("matchExpressions") or ())
        ]
        requirements += [
            _requirement(e, kind, name, f"{at}.matchFields[{i}]", on_field=True)
            for i, e in enumerate(term.get("matchFields") or ())
        ]
        terms.append(tuple(requirements))
    return tuple(terms)


def _requirement(raw: Any, kind: str, name: str, where: str, *, on_field: bool) -> NodeRequirement:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("key"), str):
        raise InvalidObject(kind, name, where, "expected key, operator and values")
    operator = raw.get("operator")
    if operator not in NODE_OPERATORS:
        raise InvalidObject(
            kind,
            name,
            f"{where}.operator",
            f"{operator!r} is not one of {', '.join(NODE_OPERATORS)}",
        )
    values = tuple(str(v) for v in raw.get("values") or ())
    if operator in ("Gt", "Lt") and (len(values) != 1 or not _is_integer(values[0])):
        raise InvalidObject(kind, name, f"{where}.values", f"{operator} takes one integer")
    return NodeRequirement(raw["key"], operator, values, on_field)


def _is_integer(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _toleration(raw: Any, kind: str, name: str, where: str) -> Toleration:
    if not isinstance(raw, Mapping):
        raise InvalidObject(kind, name, where, "expected key, operator, value and effect")
    operator = raw.get("operator") or "Equal"
    if operator not in ("Equal", "Exists"):
        raise InvalidObject(kind, name, f"{where}.operator", f"{operator!r} is not Equal or Exists")
    return Toleration(
        key=str(raw.get("key") or ""),
        operator=operator,
        value=str(raw.get("value") or ""),
        effect=str(raw.get("effect") or ""),
    )


def taints_of(spec: Mapping[str, Any], name: str) -> tuple[Taint, ...]:
    out: list[Taint] = []
    for i, raw in enumerate(spec.get("taints") or ()):
        if not isinstance(raw, Mapping) or not isinstance(raw.get("key"), str):
            raise InvalidObject("Node", name, f"spec.taints[{i}]", "expected key and effect")
        out.append(Taint(raw["key"], str(raw.get("value") or ""), str(raw.get("effect") or "")))
    return tuple(out)
