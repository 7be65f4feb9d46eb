"""The patches that confine a workload to its Topology domains, and that undo it
(docs/scheduler.md, *Topology*): pure, decided here, planned by the operator's plan and
written by its executor.

Admitted into domains, a workload's pod templates get each domain's label in their
nodeSelector in the very patch that releases it (api.workloads.confine: a suspended Job's
scheduling directives may change, and so may the templates of a suspended JobSet, PyTorchJob,
MPIJob or RayJob), and ``sluice.dev/topology-assignment`` records what sluice added. Once the
workload is suspended again (reclaimed, preempted, requeued, or by its owner) the labels are
taken off and the annotation with it, so its templates are as they were before admission and
the next admission may choose other domains. A plain pod gets the label before its gate goes
(a gated pod's nodeSelector may grow); a victim's pods are deleted and come back from their
controller as they were.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.constants import TOPOLOGY_ASSIGNMENT_ANNOTATION
from sluice.api.objects import Obj
from sluice.api.topology import Assignment, assignment_text, assignments_of, parse_assignments
from sluice.api.workloads import Adapter
from sluice.api.workloads.confine import confine, unconfine
from sluice.api.workloads.pods import PodMember


def admission_patch(domain: str, obj: Obj | None, adapter: Adapter) -> dict[str, Any]:
    """What a workload admitted into ``domain`` (the decision's domains, as
    sluice.dev/topology-assignment writes them) gets besides its release: the labels in its
    templates' nodeSelector and the annotation saying what was added; {} when it asks no
    domain or nothing is added."""
    if obj is None:
        return {}
    patch, added = confine(obj, adapter, parse_assignments(domain))
    if not added:
        return {}
    record = {"metadata": {"annotations": {TOPOLOGY_ASSIGNMENT_ANNOTATION: assignment_text(added)}}}
    return merged(patch, record)


def restore_patch(
    obj: Obj, adapter: Adapter, base: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """For a suspended workload that sluice had confined to domains: the patch that takes the
    labels it added off its templates again, and the record of them, merged into ``base``
    (a patch written with it); None otherwise."""
    meta = obj.get("metadata") or {}
    assignments = assignments_of(meta.get("annotations") or {})
    if not assignments or not adapter.suspended(obj):
        return None
    body: dict[str, Any] = {"metadata": {"annotations": {TOPOLOGY_ASSIGNMENT_ANNOTATION: None}}}
    return merged(base or {}, merged(body, unconfine(obj, adapter, assignments)))


def merged(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Two merge patches as one (maps merged key by key, ``extra`` winning elsewhere)."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def pointer_token(key: str) -> str:
    """A map key as one token of a JSON pointer (RFC 6901: ``~`` and ``/`` escaped)."""
    return key.replace("~", "~0").replace("/", "~1")


def pod_ops(member: PodMember, domain: str) -> list[dict[str, Any]]:
    """The JSON patch operations that put a gated plain pod in its domain before its gate
    goes: the label added to its nodeSelector, and the annotation; none when it asks no
    domain or already selects that label. They go before the annotation ops of the release,
    which add the annotations map when the pod has none."""
    assignment = Assignment.parse(domain)
    if assignment is None:
        return []
    selected = dict(member.pod.node_selector)
    if assignment.level in selected:
        return []
    if selected:
        path = f"/spec/nodeSelector/{pointer_token(assignment.level)}"
        op: dict[str, Any] = {"op": "add", "path": path, "value": assignment.value}
    else:
        op = {
            "op": "add",
            "path": "/spec/nodeSelector",
            "value": {assignment.level: assignment.value},
        }
    return [op]


def pod_annotation(domain: str, member: PodMember) -> dict[str, str]:
    """The annotation a released pod gets with its domain ({} when none was added)."""
    assignment = Assignment.parse(domain)
    if assignment is None or assignment.level in dict(member.pod.node_selector):
        return {}
    return {TOPOLOGY_ASSIGNMENT_ANNOTATION: assignment.text()}
