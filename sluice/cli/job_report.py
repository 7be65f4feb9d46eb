"""Pure pieces of `sluice job list` and `sluice job why`: what the operator published about a
job (its annotations, its Events, its queue's status), read back for people.

Nothing here recomputes a decision: a tenant who can only read Jobs and Events in their own
namespace (and Queues) sees exactly what the operator decided, position and reason included.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from rich.table import Table

from sluice.api.errors import InvalidObject
from sluice.api.queue import Queue, QueueUsage
from sluice.api.topology import assignment_text
from sluice.api.usage_text import compared, parse_behind
from sluice.api.views import (
    JOB_KIND,
    JobPhase,
    PublishedJob,
    admitted_flavors,
    flavor_column,
    published_job,
    split_pending_reason,
    topology_asks,
)
from sluice.api.workloads import BY_KIND
from sluice.api.workloads.pods import GROUP_PREFIX, POD_PREFIX, PodWorkload


def _kind(obj: Mapping[str, Any]) -> str:
    return str(obj.get("kind") or JOB_KIND)


def job_line(obj: Mapping[str, Any]) -> PublishedJob | None:
    """One managed job (or workload of another kind, docs/workloads.md) as `job list` shows
    it; None when sluice does not manage it, and a line saying so for one sluice cannot
    read."""
    try:
        adapter = BY_KIND.get(_kind(obj))
        line = None if adapter is None else published_job(obj, adapter.view)
    except InvalidObject as err:
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name"))
        return PublishedJob(namespace, name, "-", "unreadable", reason=str(err))
    if line is not None and line.state == JobPhase.PENDING.value and not line.reason:
        return replace(line, reason=UNSEEN)
    return line


UNSEEN = "not yet considered by the operator"


def pod_workload_line(workload: PodWorkload) -> PublishedJob:
    """A workload of plain pods (docs/workloads.md, "Plain pods and pod groups") as `job list
    --kind Pod` shows it, from what the operator wrote on its pods; a group not complete says
    what it waits for, as the operator writes it on them."""
    namespace, _, name = workload.key.partition("/")
    view = workload.view
    if view is None:
        queue = workload.members[0].queue
        return PublishedJob(namespace, name, queue, JobPhase.PENDING.value, reason=workload.waiting)
    position, cause = None, ""
    if view.phase is JobPhase.PENDING:
        position, said = split_pending_reason(view.pending_reason)
        cause = said or UNSEEN
    times = [m.admitted_at for m in workload.members if m.admitted_at is not None]
    admitted = min(times).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if times else ""
    domain = assignment_text(view.assignment) if view.phase.admitted else ""
    asks = topology_asks(view)
    return PublishedJob(
        namespace,
        name,
        view.queue,
        view.phase.value,
        position,
        cause,
        admitted,
        "",
        domain,
        asks,
        admitted_flavors(view),
        flavor_column(view),
    )


def pod_workload_name(given: str, namespace: str) -> tuple[str, str] | None:
    """(namespace, name) of a workload of plain pods given as ``[NAMESPACE/]pod/NAME`` or
    ``[NAMESPACE/]pod-group/GROUP``; None when it is neither."""
    parts = given.split("/")
    if len(parts) == 3:
        namespace, parts = parts[0], parts[1:]
    prefixes = (POD_PREFIX, GROUP_PREFIX)
    if len(parts) != 2 or f"{parts[0]}/" not in prefixes or not parts[1] or not namespace:
        return None
    return namespace, "/".join(parts)


def job_table(lines: Sequence[PublishedJob], all_namespaces: bool) -> Table:
    """By queue; in each, admitted jobs first, then the line in order, then finished ones."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    columns = ["NAME", "QUEUE", "STATE", "POSITION", "REASON", "ADMITTED-AT", "ADMITTED", "FLAVOR"]
    for column in ["NAMESPACE", *columns] if all_namespaces else columns:
        table.add_column(column, overflow="fold")
    ordered = sorted(
        lines,
        key=lambda j: (j.queue, *j.sort_key()),
    )
    for line in ordered:
        row = [
            line.name,
            line.queue,
            line.state,
            str(line.position) if line.position is not None else "-",
            line.reason or "-",
            line.admitted_at or "-",
            line.sizes or "-",
            line.flavor_column,
        ]
        table.add_row(*([line.namespace, *row] if all_namespaces else row))
    return table


def _event_time(event: Mapping[str, Any]) -> str:
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        value = event.get(key)
        if value:
            return value.isoformat() if isinstance(value, datetime) else str(value)
    meta = event.get("metadata") or {}
    return str(meta.get("creationTimestamp") or "")


def explain(
    job: Mapping[str, Any],
    queue: Mapping[str, Any] | None,
    events: Sequence[Mapping[str, Any]],
    queue_error: str = "",
    others: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[str]:
    """What `job why` prints: the job's state, the operator's reason and position, its queue's
    numbers and the sluice Events on it, newest last."""
    line = job_line(job)
    meta = job.get("metadata") or {}
    key = f"{_kind(job).lower()} {meta.get('namespace')}/{meta.get('name')}"
    if line is None:
        return [f"{key} is not managed by sluice (no sluice.dev/queue-name label)"]
    if line.state == "unreadable":
        return [f"{key} cannot be read: {line.reason}"]
    mine = [
        e for e in events if (e.get("involvedObject") or {}).get("uid") in (None, meta.get("uid"))
    ]
    return _explain(key, line, queue, mine, queue_error, others or {})


def usage_queues(job: Mapping[str, Any]) -> tuple[str, str] | None:
    """The queues whose usage ``job why`` compares: the job's reason says its queue (or an
    ancestor) goes after a sibling that used less over time; None when it does not."""
    line = job_line(job)
    found = parse_behind(line.reason) if line is not None else None
    return (found[0], found[1]) if found else None


def _usage_line(reason: str, others: Mapping[str, Mapping[str, Any]]) -> str:
    found = parse_behind(reason)
    if found is None:
        return ""
    behind, ahead, half_life = found

    def usage(name: str) -> QueueUsage | None:
        obj = others.get(name)
        if obj is None:
            return None
        try:
            return Queue.from_object(obj).status.usage
        except InvalidObject:
            return None

    return compared(behind, usage(behind), ahead, usage(ahead), half_life)


def explain_pods(
    workload: PodWorkload,
    queue: Mapping[str, Any] | None,
    events: Sequence[Mapping[str, Any]],
    queue_error: str = "",
) -> list[str]:
    """What `job why --kind Pod` prints of a workload of plain pods, as ``explain`` does of a
    Job; its Events are those sluice posted on its pods."""
    line = pod_workload_line(workload)
    mine = {m.uid for m in workload.members}
    ours = [e for e in events if (e.get("involvedObject") or {}).get("uid") in mine]
    return _explain(workload.key, line, queue, ours, queue_error)


def _explain(
    key: str,
    line: PublishedJob,
    queue: Mapping[str, Any] | None,
    events: Sequence[Mapping[str, Any]],
    queue_error: str,
    others: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[str]:
    out: list[str] = []
    if line.state == JobPhase.COMPLETED.value:
        out.append(f"{key} has finished (queue {line.queue})")
    elif line.state in (JobPhase.INQUEUE.value, JobPhase.RUNNING.value):
        admitted = line.admitted_at or "at an unknown time"
        out.append(f"{key} is admitted in queue {line.queue} ({admitted}); {line.state}")
        if line.domain:
            out.append(f"  in {line.domain}, as it asks ({line.asks})")
        if line.size_words:
            out.append(f"  {line.size_words}")
        if line.flavors:
            out.append(f"  in {line.flavors}")
        if line.growth:
            out.append(f"  {line.growth}")
    else:
        where = f"position {line.position} in" if line.position is not None else "in"
        out.append(f"{key} is pending, {where} queue {line.queue}")
        out.append(f"  reason: {line.reason}")
        if usage := _usage_line(line.reason or "", others or {}):
            out.append(f"  usage: {usage}")
        if line.asks:
            out.append(f"  it asks {line.asks}")
        if line.size_words:
            out.append(f"  it {line.size_words}")
        if line.reclaimed_by:
            out.append(f"  it was suspended to make room for {line.reclaimed_by}")
    out.extend(f"  {text}" for text in _queue_lines(line.queue, queue, queue_error))
    if events:
        out.append("  events:")
        for event in sorted(events, key=_event_time)[-5:]:
            out.append(
                f"    {_event_time(event)}  {event.get('type', 'Normal')}  {event.get('reason')}:"
                f" {event.get('message')}"
            )
    return out


def _queue_lines(name: str, obj: Mapping[str, Any] | None, error: str) -> list[str]:
    if obj is None:
        return [f"queue {name}: {error or 'not found'}"]
    try:
        queue = Queue.from_object(obj)
    except InvalidObject as err:
        return [f"queue {name}: {err}"]
    status, spec = queue.status, queue.spec
    parts = [
        f"state {status.state or '-'}",
        f"allocated {status.allocated.describe()}",
        f"deserved {status.deserved.describe()}",
    ]
    if spec.capability:
        parts.append(f"capability {spec.capability.describe()}")
    if spec.namespace_selector is not None:
        parts.append(f"namespaces {spec.namespace_selector.describe()}")
    return [f"queue {name}: " + ", ".join(parts) + f"; {status.pending} pending"]
