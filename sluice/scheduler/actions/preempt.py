"""preempt: inside one queue, a higher-priority pending job suspends lower-priority ones.

Victims are the queue's own admitted jobs of strictly lower priority that may be preempted,
in victim order (lowest priority, most recently admitted, most recently created, name); if
all of them together would not make room (in the queue, in the cluster and on the nodes its
pods may use), nothing is preempted, and victims it turns out not to need are left alone. A
fifo queue preempts only for its first waiting job.
"""

from __future__ import annotations

from sluice.scheduler.actions.admit import admissible_leaves
from sluice.scheduler.actions.flavor_victims import Memo, preempting, take_in_flavor
from sluice.scheduler.actions.growth_victims import forget, with_parts
from sluice.scheduler.actions.outcome import Outcome
from sluice.scheduler.actions.reclaim_rules import victim_order
from sluice.scheduler.actions.victims import (
    PerQueue,
    Victims,
    cluster_need,
    domain_rank,
    frees_alone,
    frees_together,
)
from sluice.scheduler.domain_room import Domain
from sluice.scheduler.fit import (
    as_hard,
    fits,
    over_capability_failure,
    placeable,
    queue_overage,
)
from sluice.scheduler.order import leaf_order
from sluice.scheduler.records import JobInfo
from sluice.scheduler.session import Session
from sluice.scheduler.set_domains import Placed, Search, Where, victim_search


def preempt(session: Session, outcome: Outcome) -> None:
    for leaf in leaf_order(session, admissible_leaves(session, outcome)):
        info = session.queues[leaf]
        waiting = [j for j in info.pending_jobs if not j.admitted]
        if not waiting:
            continue
        top = max(j.priority for j in waiting)
        eligible = [
            v for v in info.admitted_jobs if v.view.preemptable and not v.fresh and v.priority < top
        ]
        victims = sorted(  # a workload's pods above its minimum first, as victims of their own
            with_parts(session, eligible),
            key=lambda v: victim_order(v, session.namespace_key(leaf, v.view.namespace)),
        )
        if victims:
            _preempt_in(session, outcome, leaf, victims)
        info.pending_jobs = [j for j in info.pending_jobs if not j.admitted]


def _preempt_in(session: Session, outcome: Outcome, leaf: str, victims: list[JobInfo]) -> None:
    memo: Memo = {}  # jobs alike that reclaim in no flavor (flavor_victims.reclaiming)
    failed: list[JobInfo] = []  # jobs that found no room (fit.as_hard: so do harder ones)
    fifo = session.queues[leaf].queue.spec.dequeue_strategy == "fifo"
    first: JobInfo | None = None
    for job in session.queues[leaf].pending_jobs:
        if job.admitted or job.evicted:
            continue
        if fifo and first is not None and not first.admitted:
            break  # a fifo queue's later jobs wait behind its first that does not fit
        first = job
        if held_back := over_capability_failure(session, job):
            # Held back until its queues fit again: no victim is taken for it.
            outcome.reasons[job.key] = held_back
            continue
        if job.never_preempts:
            outcome.waits_for_room(job)
            continue
        if not victims or victims[0].priority >= job.priority:
            continue
        if any(other.priority >= job.priority and as_hard(job, other) for other in failed):
            continue
        if session.queues[leaf].flavor_list:
            _preempt_in_flavor(session, outcome, leaf, job, victims, memo)
            if not job.admitted:
                failed.append(job)
            continue
        if fits(session, job) and placeable(session, job):
            continue
        over = queue_overage(session, job)
        if _short_of(session, job, over):
            failed.append(job)
            continue
        search = victim_search(session.domains, job.view)
        if search is None or search.request is None:
            found = _choose(session, job, victims, over, search.anywhere if search else None)
        else:
            found = _in_one_domain(session, job, victims, over, search)
        if found is not None:
            chosen, (footprint, domain) = found
            for v in chosen.chosen:
                outcome.evict(session, "preempt", v, job)
            forget(victims, chosen.chosen)
            reason = f"preempt: higher priority in queue {leaf}"
            if domain is not None:
                reason += f", in {domain.text}"
            outcome.admit(session, job, reason, footprint, domain)
        if not job.admitted:
            failed.append(job)


def _preempt_in_flavor(
    session: Session,
    outcome: Outcome,
    leaf: str,
    job: JobInfo,
    victims: list[JobInfo],
    memo: Memo,
) -> None:
    """Preempt for a job of a queue with flavors: victims holding in the flavor it reclaims
    in only, or in one where its own lower-priority workloads hold the room its queue's
    quota there lacks (flavor_victims.preempting), in victim order."""
    lower = [v for v in victims if v.priority < job.priority]
    workloads = [v for v in lower if v.part_of is None]  # each counted once, whole
    chosen = preempting(session, job, workloads, memo)
    if chosen is None:
        return
    found = take_in_flavor(session, job, chosen, lower, lambda v: True, memo)
    if found is None:
        return
    taken, given, (footprint, domain) = found
    for v in taken:
        outcome.evict(session, "preempt", v, job)
    forget(victims, taken)
    reason = f"preempt: higher priority in queue {leaf}, in {given.text}"
    if domain is not None:
        reason += f", in {domain.text}"
    outcome.admit(session, job, reason, footprint, domain, given)


def _short_of(session: Session, job: JobInfo, over: PerQueue) -> bool:
    """Whether all that the job's queue holds, every admitted job of it taken, would still
    free less than the cluster lacks for it or than a limit of its queues is over by
    (``over``): its victims hold some of that, so no choice of them makes it fit
    (``Victims.counted`` is never true), and the search is not made. All the victims are of
    its own queue, so each frees room below every queue of ``over``."""
    held = session.queues[job.queue].allocated
    if any(held.get(r, 0) < a for r, a in cluster_need(session, job).items()):
        return True
    return any(held.get(r, 0) < a for limits in over.values() for r, a in limits.items())


def _choose(
    session: Session,
    job: JobInfo,
    victims: list[JobInfo],
    over: PerQueue,
    where: Where | None,
    domain: Domain | None = None,
) -> tuple[Victims, Placed] | None:
    """The victims, in victim order, that make the job fit at ``where`` (inside ``domain``
    when given, none outside it), and where it then goes; None when they cannot. Nothing is
    taken yet. ``over``: how far admitting it takes its queues past their limits
    (fit.queue_overage)."""
    chosen = Victims(session, job, over, where)
    inside = frozenset(domain.nodes) if domain is not None else None
    for victim in victims:
        if victim.priority >= job.priority:
            break
        if inside is not None and inside.isdisjoint(victim.footprint):
            continue
        if chosen.counted() and not chosen.helps_pods(victim):
            continue  # enough in total: only room on a node its pods may use helps
        chosen.add(victim)
        if chosen.placeable():
            return chosen, chosen.prune()
    return None


def _in_one_domain(
    session: Session, job: JobInfo, victims: list[JobInfo], over: PerQueue, search: Search
) -> tuple[Victims, Placed] | None:
    """For a job that asks a Topology: the domain of the level searched (set_domains.Search)
    whose victims make it fit with the fewest of them, then the lowest priorities in total,
    then by name (a preferred level widens level by level, then to anywhere).

    A domain's search ends with a victim that stays (without it, the search had not been
    done), so a domain freed by one victim is freed by one that alone frees it: no domain
    comes before (1, the lowest priority of such a victim on it, its name), nor before
    (2, ...) when it has none. Domains are searched in that order until the best found
    comes before the next; one where what goes in it (``search.inside``) would not fit even
    with every victim on it gone is not searched."""
    request = search.request
    assert request is not None
    domains = session.domains
    usable = [v for v in victims if v.priority < job.priority]  # _choose stops at the rest
    need = cluster_need(session, job)
    for level in domains.levels(request):
        by_value = {d.value: d for d in domains.domains(level)}
        of_node = {i: d.value for d in by_value.values() for i in d.nodes}
        on: dict[str, list[JobInfo]] = {}
        for victim in usable:
            for value in sorted({of_node[i] for i in victim.footprint if i in of_node}):
                on.setdefault(value, []).append(victim)
        bounds: list[tuple[tuple[int, float, str], Domain]] = []
        for value, those in on.items():
            domain = by_value[value]
            if not frees_together(session, search.inside, domain, those):
                continue
            alone = [
                v.priority
                for v in those
                if frees_alone(session, need, over, v, search.inside, domain)
            ]
            bound = (1, float(min(alone)), value) if alone else (2, float("-inf"), value)
            bounds.append((bound, domain))
        bounds.sort(key=lambda entry: entry[0])
        best: tuple[tuple[int, int, str], tuple[Victims, Placed]] | None = None
        for bound, domain in bounds:
            if best is not None and best[0] < bound:
                break
            found = _choose(session, job, on[domain.value], over, search.where(domain), domain)
            if found is None:
                continue
            chosen = found[0].chosen
            key = domain_rank(chosen, domain)
            if best is None or key < best[0]:
                best = (key, found)
        if best is not None:
            return best[1]
    return None if request.required else _choose(session, job, victims, over, search.anywhere)
