"""The rules a managed plain pod must pass at the door, as pure functions (docs/workloads.md,
"Plain pods and pod groups"; docs/operations.md, "Tenancy").

A plain pod is held by the scheduling gate sluice.dev/admission from its creation: the gate is
sluice's to remove, the pod keeps the queue and group it was created in, and never requests
more than it did. Pods a Job controls are their Job's (``jobs.check_pod_update``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.api.constants import (
    ADMISSION_GATE,
    POD_GROUP_LABEL,
    POD_GROUP_TOTAL_ANNOTATION,
    QUEUE_LABEL,
    RESIZABLE_LABEL,
)
from sluice.api.errors import InvalidObject
from sluice.api.pod_views import gated, job_pod
from sluice.api.queue import Queue
from sluice.api.workloads.pods import group_total
from sluice.queues.jobs import (
    Setting,
    Writer,
    check_annotations,
    check_job_create,
    check_pod_growth,
    metadata_map,
    metadata_of,
    spec_of,
)
from sluice.queues.verdict import ALLOW, Verdict, deny


def _who(pod: Mapping[str, Any], namespace: str) -> str:
    meta = metadata_of(pod)
    name = meta.get("name") or meta.get("generateName") or "?"
    return f"pod {meta.get('namespace') or namespace}/{name}"


def is_plain_pod(pod: Mapping[str, Any]) -> bool:
    """A pod no Job controls: its own workload, or one of its group's, when a queue manages
    it (a Job's pods are their Job's)."""
    return not job_pod(metadata_of(pod))


def pod_settings(pod: Mapping[str, Any], queue_name: str) -> list[Setting]:
    """What a new managed plain pod gets at the door: its queue named on it (the pod
    webhooks and the operator see it by that label) and sluice's scheduling gate, which
    holds it unscheduled until sluice admits it."""
    out: list[Setting] = []
    if not metadata_map(pod, "labels").get(QUEUE_LABEL):
        out.append((("metadata", "labels", QUEUE_LABEL), queue_name))
    return out + _gate(pod)


def _gate(pod: Mapping[str, Any]) -> list[Setting]:
    """Sluice's scheduling gate added after the pod's own gates; nothing when it has it."""
    spec = spec_of(pod)
    if gated(spec):
        return []
    gates = spec.get("schedulingGates")
    kept = list(gates) if isinstance(gates, list) else []
    return [(("spec", "schedulingGates"), [*kept, {"name": ADMISSION_GATE}])]


def job_pod_settings(pod: Mapping[str, Any]) -> list[Setting]:
    """What a new pod of a managed job gets at the door: sluice's scheduling gate when its
    template carried sluice.dev/resizable (its workload declares a minimum), so that the
    pods beyond its admitted size wait for the queue; nothing for any other job's pod."""
    if metadata_map(pod, "labels").get(RESIZABLE_LABEL) is None:
        return []
    return _gate(pod)


def _group_refusal(pod: Mapping[str, Any], namespace: str) -> Verdict:
    if not metadata_map(pod, "labels").get(POD_GROUP_LABEL):
        return ALLOW
    try:
        total = metadata_map(pod, "annotations").get(POD_GROUP_TOTAL_ANNOTATION)
        group_total(total, _who(pod, namespace).removeprefix("pod "))
    except InvalidObject as err:
        return deny("pod-group-count", str(err))
    return ALLOW


def check_pod_create(
    pod: Mapping[str, Any],
    namespace: str,
    existing: Mapping[str, Queue],
    labels: Mapping[str, str] | None,
    writer: Writer,
) -> Verdict:
    """A new managed plain pod: its queue takes it, its group says how many pods it has, and
    it carries no sluice.dev/ annotation its writer may not set (anyone may opt a pod in as
    a victim). ``labels``: the namespace's, when the queue selects namespaces."""
    if not is_plain_pod(pod):
        return ALLOW
    verdict = check_job_create(pod, namespace, existing, labels, writer, opting_in=True)
    if not verdict.allowed:
        return verdict
    return _group_refusal(pod, namespace)


HOLDING = (
    ("label", QUEUE_LABEL, "labels"),
    ("label", POD_GROUP_LABEL, "labels"),
    ("annotation", POD_GROUP_TOTAL_ANNOTATION, "annotations"),
)
"""What ties a plain pod to its queue and group: it stays as the pod was created."""


def check_plain_pod_update(
    old: Mapping[str, Any], new: Mapping[str, Any], namespace: str, writer: Writer
) -> Verdict:
    """A managed plain pod: only sluice removes its gate; its queue and group stay as created
    (moved, a gated pod would skip its queue's line, an admitted one run outside its quota);
    its requests never grow; its sluice.dev/ annotations are sluice's."""
    if writer.operator:
        return ALLOW
    who = _who(new, namespace)
    queue = metadata_map(old, "labels").get(QUEUE_LABEL) or metadata_map(new, "labels").get(
        QUEUE_LABEL
    )
    if gated(spec_of(old)) and not gated(spec_of(new)):
        return deny(
            "pod-ungate",
            f"{who}: only sluice may remove the scheduling gate {ADMISSION_GATE} of a pod of"
            f" queue {queue}; it does so when the queue's quota allows",
        )
    for what, key, where in HOLDING:
        was, now = metadata_map(old, where).get(key), metadata_map(new, where).get(key)
        if was != now:
            return deny(
                "pod-queue-immutable",
                f"{who}: its {what} {key} cannot change (from {was or 'nothing'} to"
                f" {now or 'nothing'}); it ties the pod to its queue and group: create a new pod"
                " instead",
            )
    verdict = check_annotations(old, new, namespace, writer, opting_in=True)
    if not verdict.allowed:
        return verdict
    return check_pod_growth(
        old,
        new,
        who,
        f"{who} of queue {queue}: its request cannot grow past what it was created with",
    )
