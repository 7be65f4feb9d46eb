"""The writes that release gated pods or delete running ones (``plan.py``): a workload of
plain pods admitted (each gated pod released into its Topology domain and onto its flavor's
nodes), the stragglers of one admitted before, one that gives its room back (its running pods
deleted), and the pods a sized workload's record admits (docs/workloads.md, "Plain pods and
pod groups"; docs/elastic.md).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sluice.api.constants import (
    ADMISSION_GATE,
    ADMITTED_AT_ANNOTATION,
    FLAVOR_ASSIGNMENT_ANNOTATION,
    PENDING_REASON_ANNOTATION,
)
from sluice.api.flavor import FlavorView
from sluice.api.flavor_assignment import flavor_assignment_text
from sluice.api.topology import Assignment
from sluice.api.views import PodView
from sluice.api.workloads.domain_patches import pod_annotation, pod_ops, pointer_token
from sluice.api.workloads.flavor_patches import NotEnforceable
from sluice.api.workloads.pod_flavors import (
    PodFlavor,
    pod_flavor_ops,
    pod_flavors,
    straggler_flavors,
)
from sluice.api.workloads.pods import PodMember, PodWorkload
from sluice.operator.writes import EventSpec, PodChange, Write, rfc3339
from sluice.scheduler.model import Decision

log = logging.getLogger("sluice.operator.plan")  # one logger for all of the plan's warnings


def gate_release(key: str, gated: Sequence[PodView]) -> Write:
    """The gates of a workload's pods removed (its record admits them): each pod's gate,
    tested to be sluice's where the cycle saw it, so a pod changed since is left alone."""
    changes = tuple(
        PodChange(
            f"{p.namespace}/{p.name}",
            p.uid,
            patch=[
                {
                    "op": "test",
                    "path": f"/spec/schedulingGates/{p.gate_index}/name",
                    "value": ADMISSION_GATE,
                },
                {"op": "remove", "path": f"/spec/schedulingGates/{p.gate_index}"},
            ],
        )
        for p in gated
    )
    return Write("admit", key, {}, None, None, changes)


def pod_decision(
    decision: Decision, workload: PodWorkload, now: datetime, flavors: Mapping[str, FlavorView]
) -> Write:
    """Admitted: every gated pod of it released, each on its flavor. A victim: every pod of
    it that runs deleted (their controller creates them again, gated, and they queue anew).
    Raises NotEnforceable when its flavors cannot be written."""
    if decision.action == "admit":
        gated = [m for m in workload.members if m.gated]
        event = EventSpec("Admitted", f"admitted by queue {decision.queue}: {decision.reason}")
        on = pod_flavors(decision.flavors, workload, gated, flavors)
        return _release(workload.key, gated, now, event, decision.domain, on)
    doomed = tuple(
        PodChange(m.key, m.uid) for m in workload.members if not m.gated and not m.finished
    )
    if decision.action == "requeue":
        event = EventSpec("Requeued", f"pods deleted by sluice: {decision.reason}", warning=True)
    else:
        title = "Reclaimed" if decision.action == "reclaim" else "Preempted"
        event = EventSpec(title, f"{decision.reason}; pods deleted by sluice")
    return Write(decision.action, workload.key, {}, None, event, doomed)


def stragglers(
    workload: PodWorkload, now: datetime, flavors: Mapping[str, FlavorView]
) -> Write | None:
    """The release of the gated pods of an admitted workload, on the flavors of the pods they
    replace; None when one of those cannot be told or no longer exists (logged)."""
    try:
        on = straggler_flavors(workload, flavors)
    except NotEnforceable as err:
        log.warning("event=admission-not-written job=%s reason=%s", workload.key, err.reason)
        return None
    return _release(workload.key, workload.stragglers, now, None, workload.domain, on)


def _release(
    key: str,
    members: Sequence[PodMember],
    now: datetime,
    event: EventSpec | None,
    domain: str = "",
    flavors: Mapping[str, PodFlavor] | None = None,
) -> Write:
    """``flavors``: the flavor of each pod (by key) that goes on one."""
    on = flavors or {}
    changes = tuple(
        PodChange(m.key, m.uid, m.resource_version, _release_patch(m, now, domain, on.get(m.key)))
        for m in members
    )
    return Write("admit", key, {}, None, event, changes)


def _release_patch(
    member: PodMember, now: datetime, domain: str = "", flavor: PodFlavor | None = None
) -> list[dict[str, Any]]:
    """Remove sluice's gate from a pod that has not changed since the cycle saw it, and stamp
    its admission; put it in its Topology ``domain`` and on its ``flavor``'s nodes first
    (api.workloads.domain_patches, api.workloads.flavor_patches)."""
    gate = f"/spec/schedulingGates/{member.gate_index}"
    ops: list[dict[str, Any]] = [
        {"op": "replace", "path": "/metadata/resourceVersion", "value": member.resource_version},
        {"op": "test", "path": f"{gate}/name", "value": ADMISSION_GATE},
        *pod_ops(member, domain),
    ]
    stamps = {ADMITTED_AT_ANNOTATION: rfc3339(now), **pod_annotation(domain, member)}
    if flavor is not None:
        asked = Assignment.parse(domain)
        also = {asked.level: asked.value} if asked is not None else {}
        flavor_ops, added = pod_flavor_ops(member, *flavor, also)
        ops += flavor_ops
        stamps[FLAVOR_ASSIGNMENT_ANNOTATION] = flavor_assignment_text((added,))
    ops.append({"op": "remove", "path": gate})
    if not member.has_annotations:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": stamps})
        return ops
    for key, value in stamps.items():
        ops.append({"op": "add", "path": _annotation_path(key), "value": value})
    if member.pending_reason is not None:
        ops.append({"op": "remove", "path": _annotation_path(PENDING_REASON_ANNOTATION)})
    return ops


def _annotation_path(key: str) -> str:
    return "/metadata/annotations/" + pointer_token(key)
