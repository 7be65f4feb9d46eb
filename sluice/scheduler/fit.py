"""Does a job fit, and if not, what exactly stops it (the text of its pending reason): its
queue's limits, the cluster's free room, and whether its pods can be placed (placement.py)."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass

from sluice.api.quantity import format_quantity
from sluice.api.resources import Resources, describe_amount
from sluice.scheduler.domain_room import Domain
from sluice.scheduler.placement import Footprint
from sluice.scheduler.records import JobInfo
from sluice.scheduler.session import Session
from sluice.scheduler.set_domains import (
    Placed,
    SetDomains,
    Where,
    asks_per_set,
    explain_sets,
    place_sets,
)


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
        f"{session.snapshot.devices.asked_through_claims(r)}"
    )
    return text + " (ElasticEnable is false)" if breach.label == "deserved" else text


def over_capability(session: Session, name: str, resources: Collection[str] | None = None) -> str:
    """What puts a queue over its capability (``QueueInfo.over_capability``), for its
    condition and the reason of every job it holds back: ``memory 5Gi > capability 4Gi;
    pods ask more than admitted: ns/train memory 1Gi``; "" when it is within it. With
    ``resources``, only those (what a waiting job asks for)."""
    info = session.queues[name]
    over = {
        r: figures
        for r, figures in info.over_capability.items()
        if resources is None or r in resources
    }
    if not over:
        return ""
    text = "; ".join(
        f"{describe_amount(r, used)} > capability {format_quantity(cap, r)}"
        for r, (used, cap) in sorted(over.items())
    )
    grown = [
        (key, Resources({r: a for r, a in extra.amounts.items() if r in over}))
        for key, extra in info.grown
        if any(r in over for r in extra.amounts)
    ]
    if grown:
        shown = ", ".join(f"{key} {extra.describe()}" for key, extra in grown[:3])
        more = f" and {len(grown) - 3} more" if len(grown) > 3 else ""
        text += f"; pods ask more than admitted: {shown}{more}"
    return text


def over_capability_failure(session: Session, job: JobInfo) -> str | None:
    """Why the job waits because its queue or an ancestor holds more than its capability in
    a resource the job asks for (docs/scheduler.md, *What a workload holds*), naming the
    nearest such level; None when the job asks for none of the resources they are over in:
    a queue over in memory still admits a job that asks no memory, within its limits as
    ever. Per resource name, whatever the resource."""
    leaf = job.queue
    for name in session.chain(leaf):
        over = session.queues[name].over_capability
        if not over:  # most often: the walk up the tree is all it costs
            continue
        hit = sorted(r for r, a in job.request.items() if a > 0 and r in over)
        if not hit:
            continue
        level = name if name == leaf else f"{name} (ancestor of {leaf})"
        which = hit[0] if len(hit) == 1 else f"{', '.join(hit[:-1])} and {hit[-1]}"
        them = "it" if len(hit) == 1 else "any of them"
        return (
            f"queue {level} is over its capability in {which}, and admits nothing more that"
            f" asks for {them} until it fits again: {over_capability(session, name, hit)}"
        )
    return None


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
                f"{session.snapshot.devices.asked_through_claims(r)}"
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


def place_where(
    session: Session, job: JobInfo, freed: Footprint | None = None, domain: Where | None = None
) -> Placed | None:
    """Where every pod of every pod set of the job would go now (or with ``freed`` given
    back), as what it would hold on each node, and the Topology domains it goes in (``domain``
    when given; docs/scheduler.md, *Topology*); None when they do not all fit."""
    view = job.view
    if isinstance(domain, Domain):
        inside = session.domains.place_in(view, domain, freed)
        return None if inside is None else (inside, domain)
    if isinstance(domain, SetDomains) or asks_per_set(view):
        fixed = domain if isinstance(domain, SetDomains) else None
        return place_sets(session.domains, view, freed, fixed)
    if view.topology is not None:
        found = session.domains.place(view, freed)
        if found is not None or view.topology.required:
            return found
    placement = session.placement
    sets = view.pod_sets
    if len(sets) == 1:
        pods = sets[0]
        assignment = placement.place(pods.pod, pods.pod_count, freed)
        return None if assignment is None else (placement.footprint(pods.pod, assignment), None)
    anywhere = placement.place_all([(p.pod, p.pod_count) for p in sets], freed)
    return None if anywhere is None else (anywhere, None)


def place(
    session: Session, job: JobInfo, freed: Footprint | None = None, domain: Where | None = None
) -> Footprint | None:
    """``place_where`` without the domain."""
    found = place_where(session, job, freed, domain)
    return None if found is None else found[0]


def placeable(session: Session, job: JobInfo) -> bool:
    """Whether every pod of the job fits on the nodes now (``place`` without the where)."""
    if job.view.topology is not None and session.domains.still_holds(job.view):
        return True
    if job.view.topology is not None or asks_per_set(job.view):
        return place_where(session, job) is not None
    sets = job.view.pod_sets
    if len(sets) == 1:
        return session.placement.place(sets[0].pod, sets[0].pod_count) is not None
    return session.placement.place_all([(p.pod, p.pod_count) for p in sets]) is not None


def unplaced(session: Session, job: JobInfo) -> str:
    """Why the job's pods do not fit on the nodes at once, in the words of a pending reason:
    placement's for a job of one pod set; for several, the first set that does not fit
    alone, else all of them."""
    placement = session.placement
    sets = job.view.pod_sets
    if job.view.topology is not None and job.view.topology.required:
        return session.domains.explain(job.view)
    if asks_per_set(job.view):
        return explain_sets(session.domains, job.view)
    if len(sets) == 1:
        return placement.explain(sets[0].pod, sets[0].pod_count)
    for pods in sets:
        if placement.place(pods.pod, pods.pod_count, {}) is None:
            return f"pod set {pods.name}: {placement.explain(pods.pod, pods.pod_count)}"
    each = ", ".join(
        f"{p.pod_count} x {p.pod.request.describe()} ({p.name})" for p in sets if p.pod_count
    )
    return f"its pod sets fit on the nodes one by one, not all at once: {each}"


def lacking(session: Session, job: JobInfo) -> set[str]:
    """What the nodes that may take the job's pods were found short of when they were placed
    this cycle (placement.lacking), over its pod sets; for a job that asks a Topology, all it
    requests (its domain is not chosen yet)."""
    if job.view.topology is not None or asks_per_set(job.view):
        return {r for r, a in job.request.items() if a > 0}
    out: set[str] = set()
    for pods in job.view.pod_sets:
        out |= session.placement.lacking(pods.pod)
    return out


def as_hard(job: JobInfo, other: JobInfo) -> bool:
    """Whether the job is at least as hard to admit as ``other``: it asks at least as much in
    total, and pod set by pod set as much per pod, for as many pods, of the same nodes. What
    stops ``other`` stops it."""
    mine, theirs = job.view.pod_sets, other.view.pod_sets
    if job.view.topology != other.view.topology:
        return False
    if len(mine) == 1 == len(theirs):  # reclaim asks this thousands of times a cycle
        m, t = mine[0], theirs[0]
        return (
            m.pod.constraints == t.pod.constraints
            and m.pod_count >= t.pod_count
            and all(job.request.get(r, 0) >= a for r, a in other.request.items())
            and all(m.pod.request.get_amount(r) >= a for r, a in t.pod.request.items())
        )
    if len(mine) != len(theirs):
        return False
    for m, t in zip(mine, theirs, strict=True):
        if m.pod.constraints != t.pod.constraints or m.pod_count < t.pod_count:
            return False
        if m.topology != t.topology:
            return False
    if not all(job.request.get(r, 0) >= a for r, a in other.request.items()):
        return False
    return all(
        m.pod.request.get_amount(r) >= a
        for m, t in zip(mine, theirs, strict=True)
        for r, a in t.pod.request.items()
    )
