"""What an admitted workload holds of the nodes and of its queues, from its own pods
(docs/scheduler.md, *What a workload holds*): which workload a pod is of, what the pods take
of each node, and, per pod set, the larger of what the workload was admitted with and what
its live pods ask (``Session._account_pods`` runs these)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sluice.api.constraints import PodSpecView
from sluice.api.resources import Resources
from sluice.api.views import PodSet, PodView
from sluice.scheduler.placement import Placement, add_room
from sluice.scheduler.records import JobInfo


def owner_of(
    pod: PodView,
    by_uid: Mapping[str, JobInfo],
    by_label: Mapping[tuple[str, str, str], JobInfo],
) -> JobInfo | None:
    """The admitted workload a pod is of: the Job that controls it (in its namespace), else
    the first workload that names it by one of its labels."""
    owner = by_uid.get(pod.job_uid) if pod.job_uid else None
    if owner is not None and owner.view.namespace != pod.namespace:
        owner = None
    if owner is None and pod.named_by and by_label:
        owner = next(
            (
                found
                for label, name in pod.named_by
                if (found := by_label.get((pod.namespace, label, name))) is not None
            ),
            None,
        )
    return owner


def take_room(
    placement: Placement,
    pods: Iterable[PodView],
    by_uid: Mapping[str, JobInfo],
    by_label: Mapping[tuple[str, str, str], JobInfo],
    used: dict[str, int],
) -> None:
    """Every unfinished pod bound to a node that holds room takes its request there: for its
    workload (``owner_of``), on its footprint; for none, in ``used``."""
    usable = placement.usable
    for pod in pods:  # tens of thousands: the loop does its own adding
        owner = owner_of(pod, by_uid, by_label)
        if owner is not None:
            owner.pods.append(pod)  # finished ones too: they tell when it last got pods
        if pod.finished or not pod.node:
            continue
        i = usable.get(pod.node)
        if i is None:
            continue
        room = placement.room(i)
        holder = owner.footprint.setdefault(i, {}) if owner is not None else used
        for r, a in pod.request.items():
            room[r] = room.get(r, 0) - a
            holder[r] = holder.get(r, 0) + a


def pod_set_of(sets: tuple[PodSet, ...], pod: PodView) -> int:
    """Which of its workload's pod sets an own pod is of, by the label its controller gave
    it (the set's ``pods_by``); the only set when it names none; -1 for none of them (a pod
    of what the workload's runtime adds). Sets of plain pods are formed from the pods' own
    shapes, so a plain pod is of the set of its own request."""
    if len(sets) == 1 and sets[0].pods_by is None:
        return 0
    for i, pod_set in enumerate(sets):
        if pod_set.pods_by is None:
            if pod_set.pod.request == pod.request:
                return i
        elif pod_set.pods_by in pod.named_by:
            return i
    return -1


Holding = tuple[Mapping[str, int], Mapping[str, int], list[tuple[JobInfo, PodSpecView, int]]]
"""What an admitted workload holds, what its pods being deleted take, and its pods of each
set not bound yet (``holding``)."""


def holding(job: JobInfo) -> Holding:
    """What an admitted workload holds: per pod set, the larger (per resource) of what it
    was admitted with and what its live pods of that set ask, plus what its pods of no set
    ask; what its terminating pods still take of their nodes, beside that (they no longer
    count for its queues); and, per pod set, how many of the pods it still starts are not
    bound yet (room is kept for them). The pods of a workload with a size record that still
    carry sluice's gate are its growth, waiting for the queue (docs/elastic.md, *Grown
    through the queue*): they hold nothing until it is admitted."""
    sets = job.view.pod_sets
    pods = [p for p in job.pods if not p.gated] if job.view.sized else job.pods
    if not pods:
        return job.request, {}, [(job, s.pod, s.pod_count) for s in sets if s.pod_count > 0]
    if len(sets) == 1 and sets[0].pods_by is None:
        alike = _holding_as_admitted(job, sets[0], pods)
        if alike is not None:
            return alike
    bound = [0] * len(sets)
    live: list[dict[str, int]] = [{} for _ in sets]
    others: dict[str, int] = {}
    leaving: dict[str, int] = {}
    for pod in pods:
        if pod.finished:
            continue
        i = pod_set_of(sets, pod)
        if i >= 0 and pod.node:
            bound[i] += 1
        if pod.terminating:
            if pod.node:
                add_room(leaving, pod.request)
        else:
            add_room(live[i] if i >= 0 else others, pod.request)
    held = others
    grew = bool(others)
    add_room(held, job.view.claimed)  # the claims its pods name: once, whatever the pods
    for pod_set, asked in zip(sets, live, strict=True):
        admitted = pod_set.request
        for r, a in asked.items():
            if a > admitted.get_amount(r):
                grew = True
        add_room(held, Resources(asked).maximum(admitted) if asked else admitted)
    missing = [
        (job, s.pod, s.pod_count - n) for s, n in zip(sets, bound, strict=True) if s.pod_count > n
    ]
    return (held if grew else job.request), leaving, missing


def _holding_as_admitted(job: JobInfo, only: PodSet, pods: list[PodView]) -> Holding | None:
    """``holding`` of a workload of one pod set (every Job) whose live pods ask what its
    template says, no more of them than it holds: counted without adding anything up. None
    when a pod asks otherwise or there are more of them."""
    shape = only.pod.request
    placed = live = 0
    gone: dict[str, int] = {}
    for pod in pods:
        if pod.finished:
            continue
        if pod.node:
            placed += 1
            if pod.terminating:
                add_room(gone, pod.request)
        if not pod.terminating:
            live += 1
            if pod.request is not shape and pod.request != shape:
                return None
    if live > only.count:
        return None
    missing = only.pod_count - placed
    return job.request, gone, ([(job, only.pod, missing)] if missing > 0 else [])
