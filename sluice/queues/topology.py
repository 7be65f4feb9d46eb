"""The rules at the door for Topologies and for what workloads ask of them.

A Topology names at least one level, each a valid label key, none twice. A workload (or a
plain pod) may ask sluice.dev/topology-required or sluice.dev/topology-preferred, not both on
one object or pod template, naming a level of some Topology; what it asks cannot change while
it is admitted (it would run outside the domain it was admitted into, or claim one it was not
given). A pod set may ask on its own template, or the workload on its metadata for all its pod
sets together, not both otherwise. Only the kinds whose pods sluice can confine to a domain
may ask: those with pod templates of their own (not a TrainJob), and plain pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.constants import (
    TOPOLOGY_KIND,
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
)
from sluice.api.errors import InvalidObject
from sluice.api.topology import (
    TopologyRequest,
    assignment_text,
    assignments_of,
    level_problems,
    request_of,
    whole_request,
)
from sluice.api.workloads import Adapter
from sluice.api.workloads.confine import unkept
from sluice.api.workloads.job import JOB
from sluice.api.workloads.model import at
from sluice.queues.verdict import ALLOW, Verdict, deny

REQUEST_ANNOTATIONS = frozenset({TOPOLOGY_REQUIRED_ANNOTATION, TOPOLOGY_PREFERRED_ANNOTATION})
"""The sluice.dev/ annotations a workload's owner writes (the others are sluice's)."""


def check_topology(obj: Mapping[str, Any]) -> Verdict:
    problems = level_problems((obj.get("spec") or {}).get("levels"))
    if not problems:
        return ALLOW
    name = (obj.get("metadata") or {}).get("name") or "?"
    return deny("topology-invalid", f"{TOPOLOGY_KIND.lower()} {name}: " + "; ".join(problems))


def asks_topology(obj: Mapping[str, Any], adapter: Adapter = JOB) -> bool:
    """Whether the object or one of its pod templates carries a topology annotation: only
    then are the Topologies looked up."""
    sources = [obj, *(at(obj, path) for path in adapter.template_paths(obj))]
    return any(
        key in REQUEST_ANNOTATIONS
        for source in sources
        if isinstance(source, Mapping)
        for key in ((source.get("metadata") or {}).get("annotations") or {})
    )


Asks = tuple[tuple[str, TopologyRequest], ...]
"""What a workload asks, and where: ``("", ask)`` on its own metadata (all its pod sets
together), ``(pod set, ask)`` on that pod set's template."""


def _annotations(source: Any) -> Mapping[str, Any]:
    meta = source.get("metadata") if isinstance(source, Mapping) else None
    found = meta.get("annotations") if isinstance(meta, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def requests(obj: Mapping[str, Any], adapter: Adapter) -> Asks:
    """What the workload (or plain pod) asks; raises InvalidObject for both annotations on
    one object or template, or a pod set that asks otherwise than the workload's metadata
    (api.topology.whole_request)."""
    name = str((obj.get("metadata") or {}).get("name") or "?")
    own = request_of(_annotations(obj), "", name, "metadata.annotations")
    sets = [
        (pod_set, request_of(_annotations(at(obj, path)), "", name, f"pod set {pod_set}"))
        for pod_set, path in adapter.pod_set_templates(obj)
    ]
    whole_request(own, sets, "", name)
    out: list[tuple[str, TopologyRequest]] = [("", own)] if own is not None else []
    return (*out, *((pod_set, r) for pod_set, r in sets if r is not None))


def check_topology_request(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    who: str,
    admitted: bool,
    levels: frozenset[str],
    adapter: Adapter = JOB,
) -> Verdict:
    """``old``: None on create; ``admitted``: the old object runs (held no more);
    ``levels``: the node labels of every Topology's levels."""
    try:
        asked = requests(new, adapter)
        before = requests(old, adapter) if old is not None else ()
    except InvalidObject as err:
        return deny("topology-request-invalid", f"{who}: {err.problem}")
    if admitted and asked != before:
        return deny(
            "topology-request-immutable",
            f"{who}: what an admitted workload asks of a Topology cannot change (from"
            f" {_said(before)} to {_said(asked)}); suspend it to queue it again with the new ask",
        )
    kind = str(new.get("kind") or adapter.kind)
    if admitted and old is not None and kind != "Pod":
        # A pod's nodeSelector cannot change once its gate is gone; a template's can.
        kept = assignments_of((old.get("metadata") or {}).get("annotations") or {})
        if (pod_set := unkept(new, adapter, kept)) is not None:
            return deny(
                "topology-assignment-kept",
                f"{who}: the pod template of pod set {pod_set} must keep the nodeSelector of"
                f" the domain it was admitted into ({assignment_text(kept)}) while it runs",
            )
    if not asked or asked == before:
        return ALLOW
    if kind != "Pod" and not adapter.domain_templates(new):
        return deny(
            "topology-request-kind",
            f"{who}: sluice keeps a workload in its domain through the nodeSelector of its pod"
            f" templates, and a {kind} has none of its own (its pods come from elsewhere): it"
            f" cannot ask {asked[0][1].annotation}",
        )
    for where, request in asked:
        if where in adapter.made_at_creation:
            return deny(
                "topology-request-pod-set",
                f"{who}: {request.annotation} (pod set {where}): the {kind}'s controller makes"
                f" the pods of {where} from its template once, when the {kind} is created, so"
                " sluice cannot keep them in a domain; ask on the other pod sets, or on the"
                f" {kind}'s metadata to place those together",
            )
    for where, request in asked:
        if request.level not in levels:
            known = ", ".join(sorted(levels)) or "none: no Topology exists"
            on = f" (pod set {where})" if where else ""
            return deny(
                "topology-request-level",
                f"{who}: {request.annotation}{on}: {request.level} is no level of any Topology"
                f" (levels: {known})",
            )
    return ALLOW


def _said(asked: Asks) -> str:
    if not asked:
        return "nothing"
    return ", ".join(f"{where}: {r.describe()}" if where else r.describe() for where, r in asked)
