"""The rules a Job, or a workload of any kind sluice gates (docs/workloads.md), and the pods
of a managed Job must pass at the door, as pure functions. Each rule reads the workload
through its kind's adapter: one rule for every kind.

What a tenant can write is a way around quota until a rule here says no: the queue a job goes
to (docs/operations.md, "Tenancy"), its size once admitted, the sluice.dev/ annotations that
change decisions, orphaning its pods, the DRA claims its pod templates name once it is
admitted, and the pods themselves (their requests and the labels that tie them to their Job).
Every denial names the job, the rule and who may do it instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sluice.api.admitted_size import size_records_of
from sluice.api.constants import (
    ADMISSION_GATE,
    MIN_PARALLELISM_ANNOTATION,
    POD_GROUP_TOTAL_ANNOTATION,
    PREEMPTABLE_ANNOTATION,
    PREFIX,
    QUEUE_LABEL,
    RESIZABLE_LABEL,
    ROOT_QUEUE,
)
from sluice.api.errors import InvalidObject
from sluice.api.pod_request import pod_request
from sluice.api.pod_views import JOB_POD_UID_LABELS, gated
from sluice.api.queue import Queue
from sluice.api.resources import EMPTY, Resources, describe_amount
from sluice.api.selector import namespace_labels
from sluice.api.workloads import POD_LABELS, Adapter
from sluice.api.workloads.job import JOB
from sluice.api.workloads.model import at
from sluice.queues.admission import closed_ancestor
from sluice.queues.sizes import (
    check_min_size,
    declares_a_minimum,
    declares_minimums,
    gated_templates,
)
from sluice.queues.template_labels import check_template_labels
from sluice.queues.topology import REQUEST_ANNOTATIONS
from sluice.queues.tree import children_of
from sluice.queues.verdict import ALLOW, Verdict, deny

JOB_POD_LABELS = tuple(
    dict.fromkeys(
        (
            QUEUE_LABEL,
            *JOB_POD_UID_LABELS,
            "batch.kubernetes.io/job-name",
            "job-name",
            *POD_LABELS,
            RESIZABLE_LABEL,
        )
    )
)
"""Labels that tie a pod to its workload and its pod set (the Job controller selects its pods
by controller-uid, the other kinds' controllers and sluice by the labels of
docs/workloads.md): changed, the pod would leave its workload and run on outside any quota
while its controller replaces it."""

ORPHAN_FINALIZER = "orphan"
"""The finalizer that makes a deletion leave the Job's pods behind."""


@dataclass(frozen=True, slots=True)
class Writer:
    """Who sends a request, and what the installation lets them do."""

    name: str
    groups: tuple[str, ...] = ()
    operator: bool = False
    """One of the operator's accounts (--operator-user): may admit, suspend and annotate."""
    protectors: tuple[str, ...] = ()
    """The users and groups that may protect jobs (chart value webhooks.protectedJobUsers)."""

    @property
    def may_protect(self) -> bool:
        return self.operator or any(p == self.name or p in self.groups for p in self.protectors)


# Reading a job -----------------------------------------------------------------------------


def metadata_of(job: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object's metadata ({} when it has none, or none that is a map)."""
    meta = job.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def metadata_map(job: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """One map of an object's metadata: its labels or annotations ({} when none)."""
    value = metadata_of(job).get(key)
    return value if isinstance(value, Mapping) else {}


def spec_of(job: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object's spec ({} when it has none, or none that is a map)."""
    spec = job.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def job_queue(job: Mapping[str, Any]) -> str | None:
    queue = metadata_map(job, "labels").get(QUEUE_LABEL)
    return str(queue) if queue else None


def job_admitted(job: Mapping[str, Any], adapter: Adapter = JOB) -> bool:
    """Admitted (docs/scheduler.md): not held and not finished."""
    return not adapter.suspended(job) and not adapter.finished(job)


def _who(job: Mapping[str, Any], namespace: str, adapter: Adapter = JOB) -> str:
    """How a denial names the object: ``job ns/name``, ``pod ns/name`` for a Pod, and the
    kind for the other kinds of workload (``jobset ns/name``)."""
    meta = metadata_of(job)
    noun = "pod" if job.get("kind") == "Pod" else adapter.kind.lower()
    return f"{noun} {meta.get('namespace') or namespace}/{meta.get('name') or '?'}"


def _pods(job: Mapping[str, Any], adapter: Adapter) -> int:
    """How many pods it runs at once, as its growth is told (a Job's parallelism)."""
    return sum(p.count for p in adapter.pod_sets(job))


def workload_request(job: Mapping[str, Any], adapter: Adapter = JOB) -> Resources:
    """What the workload holds while admitted: the sum of its pod sets' requests, as its
    adapter reads them (a Job's: its pod's request times its parallelism)."""
    total = EMPTY
    for pods in adapter.pod_sets(job):
        total = total + pods.request
    return total


# Queue access ------------------------------------------------------------------------------


def check_job_queue(queue_name: str | None, existing: Mapping[str, Queue]) -> Verdict:
    if not queue_name:
        return deny("job-no-queue", f"the job names no queue (label {QUEUE_LABEL})")
    if queue_name == ROOT_QUEUE:
        return deny("job-root", "jobs cannot be submitted to queue root; use a leaf queue")
    queue = existing.get(queue_name)
    if queue is None:
        return deny("job-queue-missing", f"queue {queue_name} does not exist")
    children = children_of(existing, queue_name)
    if children:
        return deny(
            "job-not-leaf",
            f"queue {queue_name} has child queues ({', '.join(children[:5])}); jobs go to leaf"
            " queues only",
        )
    # Open is what spec says, not status.state: status lags a close (by a cycle, or for as
    # long as the operator is down) and a reopen alike.
    shown = queue.status.state if queue.status.state in ("Closing", "Closed") else "Closing"
    if queue.spec.state == "Closed":
        return deny("job-queue-not-open", f"queue {queue_name} is {shown}; it accepts no new jobs")
    closer = closed_ancestor(queue_name, existing)
    if closer is not None:
        return deny(
            "job-queue-not-open",
            f"queue {queue_name} is {shown} because its ancestor {closer} is Closed;"
            " it accepts no new jobs",
        )
    return ALLOW


def namespace_refusal(queue: Queue, namespace: str, labels: Mapping[str, str]) -> str | None:
    """Why the queue does not take jobs from this namespace, or None when it does.

    ``labels`` are the namespace's labels; its name label is always taken as set.
    """
    selector = queue.spec.namespace_selector
    if selector is None or selector.matches(namespace_labels(namespace, labels)):
        return None
    return (
        f"queue {queue.name} takes jobs only from namespaces matching {selector.describe()}"
        f" (spec.namespaceSelector); namespace {namespace} does not match"
    )


def needs_namespace_labels(queue_name: str | None, existing: Mapping[str, Queue]) -> bool:
    """Whether judging a job for this queue needs its namespace's labels."""
    queue = existing.get(queue_name) if queue_name else None
    return queue is not None and queue.spec.namespace_selector is not None


def _check_queue_for(
    job: Mapping[str, Any],
    namespace: str,
    existing: Mapping[str, Queue],
    labels: Mapping[str, str] | None,
    adapter: Adapter = JOB,
) -> Verdict:
    queue_name = job_queue(job)
    verdict = check_job_queue(queue_name, existing)
    if verdict.allowed and queue_name is not None and labels is not None:
        refusal = namespace_refusal(existing[queue_name], namespace, labels)
        if refusal is not None:
            verdict = deny("job-namespace-not-allowed", refusal)
    if verdict.allowed:
        return verdict
    return deny(verdict.rule, f"{_who(job, namespace, adapter)}: {verdict.message}")


# Annotations -------------------------------------------------------------------------------


def _sluice_annotations(job: Mapping[str, Any] | None) -> dict[str, str]:
    if job is None:
        return {}
    return {
        k: str(v) for k, v in metadata_map(job, "annotations").items() if k.startswith(f"{PREFIX}/")
    }


def check_annotations(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    namespace: str,
    writer: Writer,
    opting_in: bool = False,
    adapter: Adapter = JOB,
) -> Verdict:
    """sluice.dev/ annotations change decisions: sluice.dev/preemptable is for the operator and
    webhooks.protectedJobUsers, every other one (admitted-at, reclaimed-by, pending-reason, the
    requeue ones and any future one) for the operator alone. ``old`` is None on create, and
    for a job that sluice did not manage until this request. ``opting_in``: anyone may set
    sluice.dev/preemptable to "true" (a plain pod's opt-in: it gives protection up)."""
    if writer.operator:
        return ALLOW
    before = _sluice_annotations(old)
    after = _sluice_annotations(new)
    for key in sorted(set(before) | set(after)):
        if before.get(key) == after.get(key) or key == POD_GROUP_TOTAL_ANNOTATION:
            continue  # the group's size is its owner's to say (queues.pods keeps it)
        if key in REQUEST_ANNOTATIONS:
            continue  # its owner's to say (queues.topology checks them)
        if key == MIN_PARALLELISM_ANNOTATION and declares_minimums(new):
            continue  # its owner's to say (queues.sizes checks it)
        if key == PREEMPTABLE_ANNOTATION:
            if writer.may_protect or (opting_in and after.get(key, "").lower() == "true"):
                continue
            who = ", ".join(writer.protectors) or "no one else: the list is empty"
            return deny(
                "job-protected-annotation",
                f"{_who(new, namespace, adapter)}: annotation {key} can be set or changed only"
                f" by the sluice operator and the users and groups in webhooks.protectedJobUsers"
                f" ({who}); {writer.name} is not one of them",
            )
        return deny(
            "job-operator-annotation",
            f"{_who(new, namespace, adapter)}: annotation {key} is written by the sluice"
            f" operator only ({PREFIX}/ annotations record its decisions); {writer.name}"
            " cannot set or change it",
        )
    return ALLOW


# Size --------------------------------------------------------------------------------------


def _stays_admitted(
    old: Mapping[str, Any], new: Mapping[str, Any], writer: Writer, adapter: Adapter
) -> bool:
    """A tenant's write to an admitted workload that does not suspend it: what it was admitted
    with is what it may hold (the operator's own writes, and a write that holds it again,
    queue it anew)."""
    return not writer.operator and job_admitted(old, adapter) and not adapter.suspended(new)


def grows_through_the_queue(
    old: Mapping[str, Any], new: Mapping[str, Any], adapter: Adapter
) -> bool:
    """Whether a write grows an admitted workload only in pods the queue admits as growth:
    it declares a minimum, carries sluice's size record, and only the pod sets of its record
    ask more pods, each pod asking no more than before and its template carrying
    sluice.dev/resizable (so its new pods are gated: a minimum written while it waited, after
    its creation, left its templates without it). A pod set
    its owner lowered below its recorded size grows only once suspended: what the cycle
    holds for it is the lower of the two, so a raise back would take the quota it freed
    without the queue."""
    records = size_records_of(metadata_map(old, "annotations"))
    recorded = {r.pod_set: r.admitted for r in records}
    if not recorded or not declares_a_minimum(new, adapter):
        return False
    before = {p.name: p for p in adapter.pod_sets(old)}
    if any(name in recorded and p.count < recorded[name] for name, p in before.items()):
        return False
    gated = gated_templates(new, adapter)
    for pod_set in adapter.pod_sets(new):
        was = before.get(pod_set.name)
        if was is None or pod_set.pod.request.exceeding(was.pod.request, absent_is_unlimited=False):
            return False
        if pod_set.count > was.count and (
            pod_set.name not in recorded or not gated.get(pod_set.name)
        ):
            return False
    return True


def check_growth(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    namespace: str,
    writer: Writer,
    adapter: Adapter = JOB,
) -> Verdict:
    """An admitted job never holds more than it was admitted with: any write that raises its
    request while it stays admitted is refused (lowering it frees quota). Suspending it and
    raising it then requeues it at its new size. A resizable workload admitted with a size
    record may raise its recorded pod sets' sizes (``grows_through_the_queue``): its pods are
    gated and its growth waits in its queue (docs/elastic.md, *Grown through the queue*)."""
    if not _stays_admitted(old, new, writer, adapter):
        return ALLOW
    who = _who(new, namespace, adapter)
    try:
        before, after = workload_request(old, adapter), workload_request(new, adapter)
        grown = after.exceeding(before, absent_is_unlimited=False)
        was, now = (_pods(old, adapter), _pods(new, adapter)) if grown else (0, 0)
    except InvalidObject as err:
        return deny("job-invalid", f"{who}: {err}")
    if not grown or grows_through_the_queue(old, new, adapter):
        return ALLOW
    name, amount, limit = grown[0]
    counted = adapter.pods_named
    how = f" ({counted} {was} -> {now})" if was != now else ""
    return deny(
        "job-grows-past-admission",
        f"{who}: an admitted job cannot grow past what it was admitted with:"
        f" {describe_amount(name, limit)} -> {format_amount(name, amount)}{how}; lower it,"
        f" or suspend the job ({adapter.hold.name}: true) to queue it again at its new size",
    )


def _claims_by_pod_set(job: Mapping[str, Any], adapter: Adapter) -> dict[str, tuple[str, Any]]:
    """Each pod set's template's spec.resourceClaims (None when absent or empty), and where
    that field is, as ``spec.replicatedJobs[1].template...``."""
    out: dict[str, tuple[str, Any]] = {}
    for name, path in adapter.pod_set_templates(job):
        where = (*path, "spec", "resourceClaims")
        text = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in where).lstrip(".")
        out[name] = (text, at(job, where) or None)
    return out


def check_claims_kept(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    namespace: str,
    writer: Writer,
    adapter: Adapter = JOB,
) -> Verdict:
    """While a workload is admitted, the DRA claims its pod templates name
    (``spec.resourceClaims``) do not change: the devices they ask were counted when it was
    admitted, and a kind whose template stays mutable would otherwise let its next pods ask
    for more than its queue allows. Suspending it (and changing them in the same write, or
    after) queues it again with its new claims."""
    if not _stays_admitted(old, new, writer, adapter):
        return ALLOW
    before, after = _claims_by_pod_set(old, adapter), _claims_by_pod_set(new, adapter)
    for name in dict.fromkeys((*before, *after)):
        was, now = before.get(name, ("", None)), after.get(name, ("", None))
        if was[1] == now[1]:
            continue
        return deny(
            "job-claims-immutable",
            f"{_who(new, namespace, adapter)}: the resourceClaims of pod set {name}"
            f" ({now[0] or was[0]}) cannot change while it is admitted: its devices were"
            f" counted at admission; suspend it ({adapter.hold.name}: true) to change them"
            " and queue it again",
        )
    return ALLOW


def format_amount(name: str, milli: int) -> str:
    """The amount alone, as in ``cpu 4 -> 8``."""
    return describe_amount(name, milli).removeprefix(f"{name} ")


# What a new job gets --------------------------------------------------------------------

Setting = tuple[tuple[str | int, ...], Any]
"""A value to set at a path of the object (keys, and indexes of list items that exist; its
missing parents added as objects)."""


def job_settings(
    job: Mapping[str, Any], queue_name: str, queue: Queue | None, adapter: Adapter = JOB
) -> list[Setting]:
    """What a new managed workload gets at the door: it is held (its kind's hold, a Job's
    spec.suspend), its queue is named on it and on each of its pod templates, so that its
    pods carry it (the pod webhook sees them, and only them, by that label: docs/workloads.md)
    and, for a kind of one pod template, its pods' priorityClassName is its queue's when they
    name none. ``queue``: the queue, when it exists."""
    labelled = metadata_map(job, "labels").get(QUEUE_LABEL)
    out: list[Setting] = []
    if not labelled:
        out.append((("metadata", "labels", QUEUE_LABEL), queue_name))
    out.append((adapter.hold.path, True))
    resizable = declares_a_minimum(job, adapter)
    for where in adapter.template_paths(job):
        out.append(((*where, "metadata", "labels", QUEUE_LABEL), queue_name))
        if resizable:
            out.append(((*where, "metadata", "labels", RESIZABLE_LABEL), "true"))
    path = adapter.pod_template
    if not path:
        return out
    template: Any = job
    for key in path:
        template = template.get(key) if isinstance(template, Mapping) else None
    pod = template.get("spec") if isinstance(template, Mapping) else None
    named = isinstance(pod, Mapping) and pod.get("priorityClassName")
    if queue is not None and queue.spec.priority_class_name and not named:
        pcn = queue.spec.priority_class_name
        out.append(((*path, "spec", "priorityClassName"), pcn))
    return out


# Updates, deletes --------------------------------------------------------------------------


def check_job_create(
    job: Mapping[str, Any],
    namespace: str,
    existing: Mapping[str, Queue],
    labels: Mapping[str, str] | None,
    writer: Writer,
    opting_in: bool = False,
    adapter: Adapter = JOB,
) -> Verdict:
    """A new managed workload: its queue takes it, it carries no sluice.dev/ annotation its
    writer may not set, and sluice can read and hold it (a kind other than Job: a Job's
    fields are the API server's to check). ``labels``: the namespace's, when
    needs_namespace_labels says so; ``opting_in`` as for check_annotations."""
    verdict = _check_queue_for(job, namespace, existing, labels, adapter)
    if not verdict.allowed:
        return verdict
    if declares_minimums(job):  # its own rule names it, before the reading that fails on it
        verdict = check_min_size(None, job, _who(job, namespace, adapter), False, adapter)
        if not verdict.allowed:
            return verdict
    refusal = None if adapter.checked_by_the_api_server else adapter.refusal(job)
    if refusal is not None:
        return deny("job-not-manageable", f"{_who(job, namespace, adapter)}: {refusal}")
    return check_annotations(None, job, namespace, writer, opting_in, adapter)


def check_job_update(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    namespace: str,
    existing: Mapping[str, Queue],
    labels: Mapping[str, str] | None,
    writer: Writer,
    adapter: Adapter = JOB,
) -> Verdict:
    old_queue, new_queue = job_queue(old), job_queue(new)
    if old_queue is None and new_queue is None:
        return ALLOW
    who = _who(new, namespace, adapter)
    admitted = job_admitted(old, adapter)
    if admitted and new_queue != old_queue and old_queue is None:
        # A running job that had no queue: labelling it would count it in a queue no quota
        # let it into.
        return deny(
            "job-queue-immutable",
            f"{who}: a running job cannot join queue {new_queue} (label {QUEUE_LABEL});"
            " sluice admits only jobs that wait suspended: suspend it first",
        )
    if admitted and new_queue != old_queue:
        return deny(
            "job-queue-immutable",
            f"{who}: the queue label {QUEUE_LABEL} of an admitted job cannot change"
            f" (from {old_queue} to {new_queue or 'nothing'})",
        )
    if adapter.suspended(old) and not adapter.suspended(new) and not writer.operator:
        return deny(
            "job-unsuspend",
            f"{who}: only sluice may clear {adapter.hold.name} on a job of queue"
            f" {old_queue or new_queue}; it does so when the queue's quota allows",
        )
    if writer.operator:
        return ALLOW
    finished = adapter.finished(old)
    if new_queue != old_queue and not finished:
        if new_queue is None:
            # Taking the label off would let its owner unsuspend it outside any quota.
            return deny(
                "job-queue-label-removed",
                f"{who}: the label {QUEUE_LABEL} ({old_queue}) cannot be removed from an"
                " unfinished job; move it to another queue or delete it",
            )
        verdict = _check_queue_for(new, namespace, existing, labels, adapter)
        if not verdict.allowed:
            return verdict
    if new_queue is None:
        return ALLOW
    verdict = check_annotations(old if old_queue else None, new, namespace, writer, adapter=adapter)
    if not verdict.allowed:
        return verdict
    if ORPHAN_FINALIZER in _finalizers(new) and ORPHAN_FINALIZER not in _finalizers(old):
        return _refuse_orphaning(new, namespace, "the finalizer orphan", adapter)
    verdict = check_claims_kept(old, new, namespace, writer, adapter)
    if not verdict.allowed:
        return verdict
    staying = _stays_admitted(old, new, writer, adapter)
    verdict = check_min_size(old if old_queue else None, new, who, staying, adapter)
    if not verdict.allowed:
        return verdict
    verdict = check_template_labels(old, new, who, staying, adapter)
    if not verdict.allowed:
        return verdict
    return check_growth(old, new, namespace, writer, adapter)


def _finalizers(job: Mapping[str, Any]) -> Sequence[str]:
    value = metadata_of(job).get("finalizers")
    return [str(f) for f in value] if isinstance(value, list) else []


def _refuse_orphaning(
    job: Mapping[str, Any], namespace: str, how: str, adapter: Adapter = JOB
) -> Verdict:
    return deny(
        "job-orphans-pods",
        f"{_who(job, namespace, adapter)} of queue {job_queue(job)} is admitted; deleting it"
        f" with {how} would leave its pods running outside the queue's quota: delete it with"
        " propagationPolicy Background or Foreground (kubectl delete --cascade=background)",
    )


def check_job_delete(
    job: Mapping[str, Any],
    namespace: str,
    options: Mapping[str, Any] | None,
    writer: Writer,
    adapter: Adapter = JOB,
) -> Verdict:
    """Deleting an admitted workload must take its pods with it. ``options`` are the
    request's DeleteOptions; a batch/v1 Job deleted without a propagation policy orphans its
    pods (the other kinds' default takes them along)."""
    if job_queue(job) is None or not job_admitted(job, adapter) or writer.operator:
        return ALLOW
    options = options or {}
    policy = options.get("propagationPolicy")
    orphan = options.get("orphanDependents")
    if policy in ("Background", "Foreground") or (policy is None and orphan is False):
        return ALLOW
    if policy == "Orphan" or orphan is True:
        return _refuse_orphaning(job, namespace, "propagationPolicy Orphan", adapter)
    if not adapter.orphans_by_default:
        return ALLOW
    return _refuse_orphaning(job, namespace, "no propagationPolicy (a Job's default orphans)")


# Pods of managed jobs ----------------------------------------------------------------------


def check_pod_update(
    old: Mapping[str, Any], new: Mapping[str, Any], namespace: str, writer: Writer
) -> Verdict:
    """A pod of a managed job (it carries the queue label its Job's template got) keeps the
    labels that tie it to its Job and sluice's gate until sluice removes it, and never
    requests more than it did, whether through its spec or an in-place resize."""
    if writer.operator:
        return ALLOW
    meta = metadata_of(new)
    who = f"pod {meta.get('namespace') or namespace}/{meta.get('name') or '?'}"
    before, after = metadata_map(old, "labels"), metadata_map(new, "labels")
    queue = before.get(QUEUE_LABEL) or after.get(QUEUE_LABEL)
    if gated(spec_of(old)) and not gated(spec_of(new)):
        return deny(
            "pod-ungate",
            f"{who}: only sluice may remove the scheduling gate {ADMISSION_GATE} of a pod of"
            f" a job of queue {queue}; it does so up to the size its queue admitted",
        )
    for key in JOB_POD_LABELS:
        if before.get(key) != after.get(key):
            return deny(
                "pod-job-label",
                f"{who} belongs to a job of queue {queue};"
                f" its label {key} cannot change (it would leave its job and run outside the"
                " queue's quota)",
            )
    return check_pod_growth(
        old,
        new,
        who,
        f"{who} belongs to a job of queue {queue}; its request cannot grow past what the job"
        " was admitted with",
    )


def check_pod_growth(
    old: Mapping[str, Any], new: Mapping[str, Any], who: str, refusal: str
) -> Verdict:
    """A managed pod never requests more than it did, through its spec or an in-place resize;
    ``refusal`` opens the denial, the amounts follow it."""
    try:
        was = pod_request(spec_of(old), "Pod", who)
        now = pod_request(spec_of(new), "Pod", who)
    except InvalidObject as err:
        return deny("pod-invalid", f"{who}: {err}")
    grown = now.exceeding(was, absent_is_unlimited=False)
    if grown:
        name, amount, limit = grown[0]
        return deny(
            "pod-grows-past-admission",
            f"{refusal}: {describe_amount(name, limit)} -> {format_amount(name, amount)}",
        )
    return ALLOW
