"""What the operator writes to confine a workload to its Topology domain, and to undo it
(docs/scheduler.md, *Topology*): decided here, written by the executor.

Admitted into a domain, a Job's pod template gets the domain's label in its nodeSelector in
the very patch that releases it (a suspended Job's scheduling directives may change), and
``sluice.dev/topology-assignment`` records what sluice added. Once the Job is suspended again
(reclaimed, preempted, requeued, or by its owner) the label is taken off and the annotation
with it, so its template is as it was before admission and the next admission may choose
another domain. A plain pod gets the label before its gate goes (a gated pod's nodeSelector
may grow); a victim's pods are deleted and come back from their controller as they were.
When the template already selects that label, nothing is added and nothing recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.constants import TOPOLOGY_ASSIGNMENT_ANNOTATION
from sluice.api.topology import Assignment, assignment_of
from sluice.api.workloads import Adapter
from sluice.api.workloads.job import JOB
from sluice.api.workloads.pods import PodMember

Obj = Mapping[str, Any]


def _selector(template_spec: Any) -> Mapping[str, Any]:
    spec = template_spec if isinstance(template_spec, Mapping) else {}
    selector = spec.get("nodeSelector")
    return selector if isinstance(selector, Mapping) else {}


def _template_spec(obj: Obj) -> Any:
    return ((obj.get("spec") or {}).get("template") or {}).get("spec")


def admission_patch(domain: str, obj: Obj | None, adapter: Adapter) -> dict[str, Any]:
    """What a Job admitted into ``domain`` (``<level>=<value>``) gets besides its release: the
    label in its template's nodeSelector and the annotation saying so; {} when it asks no
    domain, is of another kind, or its template already selects that label."""
    assignment = Assignment.parse(domain)
    if assignment is None or obj is None or adapter is not JOB:
        return {}
    if assignment.level in _selector(_template_spec(obj)):
        return {}
    return {
        "metadata": {"annotations": {TOPOLOGY_ASSIGNMENT_ANNOTATION: assignment.text()}},
        "spec": {"template": {"spec": {"nodeSelector": {assignment.level: assignment.value}}}},
    }


def restore_patch(obj: Obj, adapter: Adapter) -> dict[str, Any] | None:
    """For a suspended Job that sluice had confined to a domain: the patch that takes the
    label it added off its template again, and the record of it; None otherwise."""
    meta = obj.get("metadata") or {}
    assignment = assignment_of(meta.get("annotations") or {})
    if assignment is None or adapter is not JOB or not adapter.suspended(obj):
        return None
    body: dict[str, Any] = {"metadata": {"annotations": {TOPOLOGY_ASSIGNMENT_ANNOTATION: None}}}
    if _selector(_template_spec(obj)).get(assignment.level) == assignment.value:
        body["spec"] = {"template": {"spec": {"nodeSelector": {assignment.level: None}}}}
    return body


def merged(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Two merge patches as one (maps merged key by key, ``extra`` winning elsewhere)."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def _pointer(key: str) -> str:
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
        path = f"/spec/nodeSelector/{_pointer(assignment.level)}"
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
