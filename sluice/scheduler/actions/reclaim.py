"""reclaim: a queue owed its deserved share takes it back from queues above theirs.

Design section 5 fixes the rules; what this module adds is keeping the search cheap: victim
queues are only those above their deserved share, each with its victims sorted once, merged
lazily in victim order, and the search stops as soon as the job fits.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from sluice.api.views import EPOCH
from sluice.scheduler.actions.admit import admissible_leaves
from sluice.scheduler.actions.outcome import Outcome
from sluice.scheduler.fit import cluster_failure, queue_failure, short_resources
from sluice.scheduler.order import leaf_order
from sluice.scheduler.session import JobInfo, Session

VictimKey = tuple[int, int, float, str]


def _victim_order(job: JobInfo) -> tuple[int, float, str]:
    """Lower job priority first, then the most recently admitted, then by name."""
    admitted = (job.admitted_at or EPOCH).timestamp()
    return (job.priority, -admitted, job.key)


def _eligible(job: JobInfo, now: datetime, min_runtime: timedelta) -> bool:
    if not job.view.preemptable or job.fresh:
        return False
    return job.admitted_at is None or now - job.admitted_at >= min_runtime


def _within_deserved(session: Session, job: JobInfo, name: str) -> bool:
    info = session.queues[name]
    return all(
        info.allocated.get(r, 0) + a <= info.deserved.get_amount(r)
        for r, a in job.request.items()
        if a > 0
    )


def _above_deserved(
    session: Session, name: str, taken: dict[str, dict[str, int]], short: dict[str, int]
) -> bool:
    info = session.queues[name]
    gone = taken.get(name, {})
    return any(
        info.allocated.get(r, 0) - gone.get(r, 0) > info.deserved.get_amount(r) for r in short
    )


def _keeps_guarantee(
    session: Session, name: str, victim: JobInfo, taken: dict[str, dict[str, int]]
) -> bool:
    info = session.queues[name]
    gone = taken.get(name, {})
    for r, g in info.guarantee.items():
        if g <= 0:
            continue
        left = info.allocated.get(r, 0) - gone.get(r, 0) - victim.request.get(r, 0)
        if victim.request.get(r, 0) > 0 and left < g:
            return False
    return True


def reclaim(session: Session, outcome: Outcome) -> None:
    min_runtime = session.config.arguments("reclaim").min_runtime
    leaves = leaf_order(session, admissible_leaves(session, outcome))
    failed: dict[str, list[dict[str, int]]] = {}  # leaf -> requests that found no victims
    for leaf in leaves:
        for job in list(session.queues[leaf].pending_jobs):
            if job.admitted or job in outcome.evicted:
                continue
            if any(
                all(job.request.get(r, 0) >= a for r, a in bigger.items())
                for bigger in failed.get(leaf, [])
            ):
                continue
            if queue_failure(session, job) is not None:
                continue  # its own queue's limit stops it; taking from others cannot help
            short = short_resources(session, job)
            if not short:
                continue
            if _reclaim_for(session, outcome, job, short, min_runtime):
                outcome.admit(session, job, f"reclaim: room taken back for queue {leaf}")
            else:
                failed.setdefault(leaf, []).append(dict(job.request))
    for info in session.queues.values():
        info.pending_jobs = [j for j in info.pending_jobs if not j.admitted]


def _candidates(session: Session, job: JobInfo, short: dict[str, int]) -> Iterator[JobInfo]:
    """Victims in order: nearest relatives, lower queue priority, lower job priority, newest."""
    tree = session.tree
    streams = []
    for name, info in session.queues.items():
        if name == job.queue or not info.admitted_jobs or info.children:
            continue
        if not info.queue.spec.reclaimable:
            continue
        if not any(info.allocated.get(r, 0) > info.deserved.get_amount(r) for r in short):
            continue
        common = tree.lowest_common_ancestor(job.queue, name)
        if common is None:
            continue
        rank = (-session.queues[common].depth, info.priority)
        streams.append(_stream(rank, info.admitted_jobs))
    for _, _, victim in heapq.merge(*streams, key=lambda item: (item[0], item[1])):
        yield victim


def _stream(rank: tuple[int, int], jobs: list[JobInfo]) -> Iterator[tuple[Any, ...]]:
    for job in sorted(jobs, key=_victim_order):
        yield (rank, _victim_order(job), job)


def _reclaim_for(
    session: Session,
    outcome: Outcome,
    job: JobInfo,
    short: dict[str, int],
    min_runtime: timedelta,
) -> bool:
    tree = session.tree
    chosen: list[JobInfo] = []
    taken: dict[str, dict[str, int]] = {}
    freed: dict[str, int] = {}
    requester_ok: dict[str, bool] = {}
    for victim in _candidates(session, job, short):
        if not any(victim.request.get(r, 0) > 0 for r in short):
            continue
        if not _eligible(victim, session.now, min_runtime):
            continue
        common = tree.lowest_common_ancestor(job.queue, victim.queue)
        if common is None:
            continue
        if common not in requester_ok:
            below = session.chain(job.queue)
            below = below[: below.index(common)] if common in below else below
            requester_ok[common] = all(_within_deserved(session, job, q) for q in below)
        if not requester_ok[common]:
            continue
        chain = session.chain(victim.queue)
        upto = chain[: chain.index(common)] if common in chain else chain
        if not all(_above_deserved(session, q, taken, short) for q in upto):
            continue
        if not _keeps_guarantee(session, victim.queue, victim, taken):
            continue
        chosen.append(victim)
        for q in chain:
            slot = taken.setdefault(q, {})
            for r, a in victim.request.items():
                slot[r] = slot.get(r, 0) + a
        for r, a in victim.request.items():
            freed[r] = freed.get(r, 0) + a
        if cluster_failure(session, job, freed) is None:
            for v in chosen:
                outcome.evict(session, "reclaim", v, job)
            return True
    return False
