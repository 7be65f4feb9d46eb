"""Does a job fit, and if not, what exactly stops it (the text of its pending reason): its
queue's limits, the cluster's free room, and whether its pods can be placed (placement.py)."""

from __future__ import annotations

from collections.abc import Mapping

from sluice.api.quantity import format_quantity
from sluice.api.resources import describe_amount
from sluice.scheduler.placement import Assignment, Footprint
from sluice.scheduler.session import JobInfo, Session


def _level(session: Session, leaf: str, name: str) -> str:
    if name == leaf:
        return name
    return (
        f"{name} (ancestor of {leaf})"
        if session.queues[leaf].parent != name
        else (f"{name} (parent of {leaf})")
    )


def queue_failure(
    session: Session, job: JobInfo, freed: Mapping[str, Mapping[str, int]] | None = None
) -> str | None:
    """Why admitting the job would take its queue or an ancestor over its limit, or None.

    ``freed`` lets reclaim and preempt ask the question as if some jobs were already gone.
    """
    leaf = job.queue
    # From the top down, so the reason names the level that sets the limit (a team under a
    # full department inherits the department's limit; the department is what to look at).
    for name in reversed(session.chain(leaf)):
        info = session.queues[name]
        if info.parent is None:
            continue  # root's limit is the cluster, checked separately
        gone = freed.get(name, {}) if freed else {}
        for r, amount in job.request.items():
            if amount <= 0:
                continue
            would = info.allocated.get(r, 0) - gone.get(r, 0) + amount
            limit = info.real_capability.get_amount(r)
            if would > limit and limit < session.total.get_amount(r):
                # a limit equal to the whole cluster is the cluster's: cluster_failure says it
                label = (
                    "capability"
                    if r in info.capability and info.capability[r] == limit
                    else "realCapability"
                )
                return (
                    f"{_level(session, leaf, name)} would use {describe_amount(r, would)}"
                    f" > {label} {format_quantity(limit, r)}"
                )
            if not session.elastic and would > info.deserved.get_amount(r):
                return (
                    f"{_level(session, leaf, name)} would use {describe_amount(r, would)}"
                    f" > deserved {format_quantity(info.deserved.get_amount(r), r)}"
                    " (ElasticEnable is false)"
                )
    return None


def cluster_failure(
    session: Session, job: JobInfo, freed: Mapping[str, int] | None = None
) -> str | None:
    """Why the cluster has no room for the job, or None."""
    for r, amount in job.request.items():
        if amount <= 0:
            continue
        free = session.total.get_amount(r) - session.used.get(r, 0) + (freed or {}).get(r, 0)
        if amount > free:
            return (
                f"cluster has {describe_amount(r, max(free, 0))} free,"
                f" job requests {describe_amount(r, amount)}"
            )
    return None


def short_resources(session: Session, job: JobInfo) -> dict[str, int]:
    """The resources the cluster lacks for this job, and by how much."""
    out: dict[str, int] = {}
    for r, amount in job.request.items():
        free = session.total.get_amount(r) - session.used.get(r, 0)
        if amount > free:
            out[r] = amount - max(free, 0)
    return out


def fits(
    session: Session,
    job: JobInfo,
    freed_queue: Mapping[str, int] | None = None,
    freed_cluster: Mapping[str, int] | None = None,
) -> bool:
    """cluster_failure(...) and queue_failure(...) are both None, without writing a message.

    ``freed_queue`` is what leaves the job's own queue (and so every ancestor); reclaim and
    preempt ask this question many times per job, and only the final answer needs words.
    """
    extra = freed_cluster or {}
    total = session.total
    for r, amount in job.request.items():
        if amount > 0 and amount > total.get_amount(r) - session.used.get(r, 0) + extra.get(r, 0):
            return False
    return fits_queue(session, job, freed_queue)


def fits_queue(session: Session, job: JobInfo, freed: Mapping[str, int] | None = None) -> bool:
    """queue_failure(...) is None, without writing a message."""
    gone = freed or {}
    for name in session.chain(job.queue):
        info = session.queues[name]
        if info.parent is None:
            continue
        for r, amount in job.request.items():
            if amount <= 0:
                continue
            would = info.allocated.get(r, 0) - gone.get(r, 0) + amount
            limit = info.real_capability.get_amount(r)
            if would > limit and limit < session.total.get_amount(r):
                return False
            if not session.elastic and would > info.deserved.get_amount(r):
                return False
    return True


def queue_overage(session: Session, job: JobInfo) -> dict[str, dict[str, int]]:
    """Queue -> resource -> how far admitting the job would take that queue past its limit.

    The same limits as fits_queue (empty exactly when it is True): what reclaim must free
    below each of those queues, on top of what the cluster lacks.
    """
    out: dict[str, dict[str, int]] = {}
    for name in session.chain(job.queue):
        info = session.queues[name]
        if info.parent is None:
            continue
        for r, amount in job.request.items():
            if amount <= 0:
                continue
            would = info.allocated.get(r, 0) + amount
            over = 0
            limit = info.real_capability.get_amount(r)
            if would > limit and limit < session.total.get_amount(r):
                over = would - limit
            if not session.elastic:
                over = max(over, would - info.deserved.get_amount(r))
            if over > 0:
                out.setdefault(name, {})[r] = over
    return out


# Placement ---------------------------------------------------------------------------------


def place(session: Session, job: JobInfo, freed: Footprint | None = None) -> Assignment | None:
    """Where every pod of the job would go now (or with ``freed`` given back), or None."""
    return session.placement.place(job.view.pod, job.view.pod_count, freed)


def as_hard(job: JobInfo, other: JobInfo) -> bool:
    """Whether the job is at least as hard to admit as ``other``: it asks at least as much in
    total and per pod, for as many pods, of the same nodes. What stops ``other`` stops it."""
    mine, theirs = job.view.pod, other.view.pod
    return (
        mine.constraints == theirs.constraints
        and job.view.pod_count >= other.view.pod_count
        and all(job.request.get(r, 0) >= a for r, a in other.request.items())
        and all(mine.request.get_amount(r) >= a for r, a in theirs.request.items())
    )
