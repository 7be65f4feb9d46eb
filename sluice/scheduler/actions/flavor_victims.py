"""Reclaim and preempt for a job of a queue with flavors (docs/flavors.md, *A flavor chosen
at admission*).

A job whose best flavor for some pod set only *reclaims* (within its deserved there, but not
within a limit or the room now) takes victims in that flavor only: admitted workloads holding
in it. For reclaim, a victim's queue and each of its ancestors below the common ancestor with
the job's queue that name the flavor (one at least) must be above their deserved in it, in a
resource the job asks there, or the victim best-effort there (it holds none of the resources
the level's entry names), and the victim's going must keep each at or above its guarantee in
it: the reclaim rules read over the flavor's own tree. For preempt, a flavor its queue's quota
classes *no* (at its capability, or above its deserved, there) is one to preempt in all the
same when the job would fit were its queue's own lower-priority workloads gone: victims are
those of them holding in it. Victims are taken in the order given until
the job fits, its flavors chosen again on the room and quota they leave; when all of them
together cannot make it fit, none is taken.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from sluice.scheduler.actions.growth_victims import remainder
from sluice.scheduler.actions.reclaim_rules import Order
from sluice.scheduler.fit import cluster_failure, place_where, queue_failure
from sluice.scheduler.flavor_choice import RECLAIMS, Chosen, choose_flavors
from sluice.scheduler.flavor_quota import add_in
from sluice.scheduler.placement import Footprint, add_room
from sluice.scheduler.records import JobInfo
from sluice.scheduler.session import Session
from sluice.scheduler.set_domains import Placed

Found = tuple[list[JobInfo], Chosen, Placed]
"""The victims taken, the flavors then chosen, and where the job's pods go."""


Memo = dict[tuple[object, ...], int]
"""Jobs alike (queue, request, pod sets, topology) for which no victim was found, and the
placement's version then: every admission and eviction changes it. Preempt's look at its
own queue's workloads (``preempting``) is noted apart, with the job's priority."""


def alike(job: JobInfo) -> tuple[object, ...]:
    view = job.view
    return (job.queue, view.request, view.pod_sets, view.topology)


def reclaiming(session: Session, job: JobInfo, memo: Memo) -> Chosen | None:
    """The job's flavors when the best it can be given reclaims in some flavor
    (``Chosen.reclaims_in``); None when it fits now, or could not even by reclaiming, or a
    job alike found no victim with nothing admitted or evicted since (``memo``)."""
    version = session.placement.version
    if memo.get(alike(job)) == version:
        return None
    chosen = choose_flavors(session, job, explain=False)
    if isinstance(chosen, str) or chosen.rank != RECLAIMS:
        memo[alike(job)] = version
        return None
    return chosen


def preempting(session: Session, job: JobInfo, victims: list[JobInfo], memo: Memo) -> Chosen | None:
    """The job's flavors for preempt, ``victims`` being its queue's own lower-priority
    workloads: those of ``reclaiming`` when it reclaims in some flavor; else, when the
    victims' going would let it fit (its queue at its capability or above its deserved in a
    flavor classes that flavor ``no``, though its own workloads hold the room), the flavors
    chosen as if they were gone, victims taken in the first of them that some victim holds
    in. None when neither, as ``memo`` then notes."""
    chosen = reclaiming(session, job, memo)
    version, own = session.placement.version, ("own", job.priority, *alike(job))
    if chosen is not None or memo.get(own) == version:
        return chosen
    with without(session, victims) as freed:
        alone = choose_flavors(session, job, freed, explain=False)
    if not isinstance(alone, str) and alone.rank != RECLAIMS:
        held = {flavor for victim in victims for flavor in victim.held_in}
        flavor = next((f for _, f in alone.flavors if f in held), None)
        if flavor is not None:
            return replace(alone, rank=RECLAIMS, reclaims_in=flavor)
    memo[own] = version
    return None


def nearest_first(
    session: Session, queue: str, victims: list[JobInfo], order: Callable[[JobInfo], Order]
) -> list[JobInfo]:
    """Victims for a job of ``queue``, as reclaim takes them: nearest relatives first (the
    deepest common ancestor), then lower queue priority, then victim ``order``."""
    depth = {name: i for i, name in enumerate(session.chain(queue))}

    def key(victim: JobInfo) -> tuple[int, int, Order]:
        common = next(n for n in session.chain(victim.queue) if n in depth)
        return (depth[common], session.queues[victim.queue].priority, order(victim))

    return sorted(victims, key=key)


def owes_back(session: Session, victim: JobInfo, queue: str, chosen: Chosen) -> bool:
    """Whether the victim's queue gives back in the flavor the job reclaims in, by the reclaim
    rules over the flavor's own tree (the module's docstring)."""
    flavor = chosen.reclaims_in
    asked = [r for r, a in chosen.held_in.get(flavor, {}).items() if a > 0]
    theirs = victim.held_in.get(flavor, {})
    mine = set(session.chain(queue))
    levels = 0
    for name in session.chain(victim.queue):
        if name in mine:
            break
        info = session.queues[name]
        entry = info.queue.spec.flavor(flavor)
        if entry is None:
            continue
        levels += 1
        held = info.flavor_allocated.get(flavor, {})
        owed = info.flavor_deserved.get(flavor)
        named = entry.names()
        best_effort = not any(a > 0 and r in named for r, a in theirs.items())
        if not best_effort and (
            owed is None
            or not any(r in named and held.get(r, 0) > owed.get_amount(r) for r in asked)
        ):
            return False
        kept = entry.guarantee.resource
        if any(held.get(r, 0) - theirs.get(r, 0) < g for r, g in kept.items()):
            return False
    return levels > 0


@contextmanager
def without(session: Session, victims: list[JobInfo]) -> Iterator[Footprint]:
    """The session's quotas and free room counted as if the victims were gone, for as long
    as the block runs; yields the room they leave on the nodes (placement's ``freed``)."""
    freed: Footprint = {}
    for victim in victims:
        for i, room in victim.footprint.items():
            add_room(freed.setdefault(i, {}), room)
    _count(session, victims, -1)
    try:
        yield freed
    finally:
        _count(session, victims, +1)


def _count(session: Session, victims: list[JobInfo], sign: int) -> None:
    for victim in victims:
        add_room(session.used, victim.held, sign)
        for name in session.chain(victim.queue):
            add_room(session.queues[name].allocated, victim.held, sign)
            if victim.held_in:
                add_in(session.queues[name].flavor_allocated, victim.held_in, sign)


def fits_without(session: Session, job: JobInfo, victims: list[JobInfo]) -> Found | None:
    """The job's flavors and where its pods go were the victims gone; None when it still
    would not fit (its queues' own limits, the cluster, its flavors, the nodes)."""
    with without(session, victims) as freed:
        if queue_failure(session, job) or cluster_failure(session, job):
            return None
        chosen = choose_flavors(session, job, freed, explain=False)
        if isinstance(chosen, str) or chosen.rank == RECLAIMS:
            return None
        placed = place_where(session, chosen.job(job), freed)
    return None if placed is None else (victims, chosen, placed)


def take_in_flavor(
    session: Session,
    job: JobInfo,
    chosen: Chosen,
    candidates: Iterable[JobInfo],
    qualifies: Callable[[JobInfo], bool],
    memo: Memo,
) -> Found | None:
    """Victims holding in the flavor the job reclaims in, from ``candidates`` in their order,
    each while it ``qualifies`` with those before it gone, as few as make the job fit; None
    (and no victim) when all of them together cannot make it fit, as ``memo`` then notes.

    Whether the job fits is asked once of all of them, and then of halves of them (a
    binary search over how many of the first are taken), not once per victim: a flavor may
    hold thousands of workloads."""
    flavor = chosen.reclaims_in
    taken: list[JobInfo] = []
    try:
        for candidate in candidates:
            if not candidate.admitted:
                continue
            victim = remainder(candidate, taken)  # a workload less its parts taken before it
            if flavor in victim.held_in and qualifies(victim):
                taken.append(victim)
                _count(session, [victim], -1)  # the next one qualifies with this one gone
    finally:
        _count(session, taken, +1)
    found = fits_without(session, job, taken) if taken else None
    if found is None:
        memo[alike(job)] = session.placement.version
        return None
    low, high = 1, len(taken)
    while low < high:
        middle = (low + high) // 2
        if fits_without(session, job, taken[:middle]) is None:
            low = middle + 1
        else:
            high = middle
    return fits_without(session, job, taken[:low]) or found
