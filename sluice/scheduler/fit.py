"""Does a job fit, and if not, what exactly stops it (the text of its pending reason): its
queue's limits, the cluster's free room, and whether its pods can be placed (placement.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sluice.api.quantity import format_quantity
from sluice.api.resources import describe_amount
from sluice.scheduler.placement import Assignment, Footprint
from sluice.scheduler.session import JobInfo, Session


@dataclass(frozen=True, slots=True)
class LimitBreach:
    """A limit admitting a job would take its queue or an ancestor past."""

    queue: str  # the level that sets the limit
    resource: str
    would_use: int
    limit: int
    label: str  # capability, realCapability, or deserved (ElasticEnable false)

    @property
    def over(self) -> int:
        return self.would_use - self.limit


def limits(session: Session, job: JobInfo) -> Iterator[LimitBreach]:
    """Every limit of the job's queue and its ancestors that admitting it would break: from
    the top down, so the first names the level that sets the limit (a team under a full
    department inherits the department's limit; the department is what to look at); per
    resource its realCapability, then its deserved when ElasticEnable is false.

    Root's limit is the cluster, and a limit equal to the whole cluster is the cluster's:
    cluster_failure says those.
    """
    total, elastic = session.total.amounts, session.elastic
    request = [(r, a) for r, a in job.request.items() if a > 0]
    for name in reversed(session.chain(job.queue)):
        info = session.queues[name]
        if info.parent is None:
            continue
        allocated, caps = info.allocated, info.real_capability.amounts
        for r, amount in request:
            would = allocated.get(r, 0) + amount
            limit = caps.get(r, 0)
            if would > limit and limit < total.get(r, 0):
                capped = r in info.capability and info.capability[r] == limit
                label = "capability" if capped else "realCapability"
                yield LimitBreach(name, r, would, limit, label)
            if not elastic and would > (deserved := info.deserved.get_amount(r)):
                yield LimitBreach(name, r, would, deserved, "deserved")


def queue_failure(session: Session, job: JobInfo) -> str | None:
    """Why admitting the job would take its queue or an ancestor over its limit, or None."""
    breach = next(limits(session, job), None)
    if breach is None:
        return None
    leaf, name, r = job.queue, breach.queue, breach.resource
    level = name
    if name != leaf:
        relation = "parent" if session.queues[leaf].parent == name else "ancestor"
        level = f"{name} ({relation} of {leaf})"
    text = (
        f"{level} would use {describe_amount(r, breach.would_use)}"
        f" > {breach.label} {format_quantity(breach.limit, r)}"
    )
    return text + " (ElasticEnable is false)" if breach.label == "deserved" else text


def cluster_failure(session: Session, job: JobInfo) -> str | None:
    """Why the cluster has no room for the job, or None."""
    total, used = session.total.amounts, session.used
    for r, amount in job.request.items():
        if amount <= 0:
            continue
        free = total.get(r, 0) - used.get(r, 0)
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


def fits(session: Session, job: JobInfo) -> bool:
    """Whether the cluster has room for the job and no limit of its queues stops it."""
    return cluster_failure(session, job) is None and next(limits(session, job), None) is None


def queue_overage(session: Session, job: JobInfo) -> dict[str, dict[str, int]]:
    """Queue -> resource -> how far admitting the job would take that queue past its limit
    (the farther of its realCapability and deserved), nearest queue first; empty exactly when
    the job fits its queues. What reclaim must free below each of those queues, on top of
    what the cluster lacks."""
    over: dict[str, dict[str, int]] = {}
    for breach in limits(session, job):
        mine = over.setdefault(breach.queue, {})
        mine[breach.resource] = max(mine.get(breach.resource, 0), breach.over)
    return {name: over[name] for name in session.chain(job.queue) if name in over}


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
