"""Victims above a minimum (docs/scheduler.md, *Victims above a minimum*): reclaim and
preempt take an admitted resizable workload's pods above its minimum as victims of their
own, one unit of its kind's size at a time (a Job's pod, a Ray group's replica), the newest
first, before the workload itself. Taking one lowers the workload's size (the operator
writes its size field and its record lower, and its controller deletes the pods beyond
it); below its minimum only the whole workload goes, suspended as any victim is.

Pure. A part is a ``JobInfo`` of its own (``JobInfo.part_of``): what its pods hold of the
queues (``held``), of the nodes (``footprint``: where the workload's newest pods of its pod
set run, else room kept for it) and of its flavor (``held_in``), so every rule of reclaim
and preempt (guarantees, deserved shares, Topology domains, flavors, the nodes) reads it as
it reads a workload. A workload chosen whole after some of its parts counts only what they
leave (``remainder``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sluice.api.views import PodSet, PodView
from sluice.scheduler.holding import pod_set_of
from sluice.scheduler.placement import Footprint, add_room
from sluice.scheduler.records import NOWHERE, JobInfo
from sluice.scheduler.session import Session

TAKEN_WHOLE = frozenset({"RayJob"})
"""Kinds whose size sluice does not lower while they run: KubeRay, with autoscaling on,
deletes on a lowered ``replicas`` only the pods its group's ``workersToDelete`` names, so
the pods a part stands for could run on while counted as gone. A RayJob is taken whole."""


def parts_of(session: Session, job: JobInfo) -> tuple[JobInfo, ...]:
    """The victims above the minimum of an admitted workload with a size record, newest
    first: per pod set of its record (the last pod set first), one per unit of its size above
    its minimum, the highest first; () for any other workload, and for a kind ``TAKEN_WHOLE``.
    Worked out once a cycle."""
    if job.parts is None:
        view = job.view
        shrinks = view.sized and job.admitted and view.kind not in TAKEN_WHOLE
        job.parts = _parts(session, job) if shrinks else ()
    return job.parts


def with_parts(session: Session, jobs: Iterable[JobInfo]) -> list[JobInfo]:
    """Each of ``jobs`` preceded by its parts not taken yet (``parts_of``)."""
    out: list[JobInfo] = []
    for job in jobs:
        out += [p for p in parts_of(session, job) if p.admitted]
        out.append(job)
    return out


def whole(victim: JobInfo) -> JobInfo:
    """The workload a victim stands for in part or whole; the victim itself for a workload."""
    return victim.part_of or victim.rest_of or victim


def remainder(victim: JobInfo, chosen: Iterable[JobInfo]) -> JobInfo:
    """The victim as it counts once ``chosen`` are taken: a workload some of whose parts are
    among them counts what they leave of it (its ``rest_of``), so nothing is counted twice;
    any other victim as it is."""
    if victim.part_of is not None or not victim.parts:
        return victim
    taken = [p for p in chosen if p.part_of is victim]
    if not taken:
        return victim
    held = dict(victim.held)
    footprint = {i: dict(room) for i, room in victim.footprint.items()}
    held_in = {f: dict(amounts) for f, amounts in victim.held_in.items()}
    for part in taken:
        _take(held, part.held)
        for i, room in part.footprint.items():
            _take(footprint.setdefault(i, {}), room)
        for flavor, amounts in part.held_in.items():
            _take(held_in.setdefault(flavor, {}), amounts)
    return JobInfo(
        view=victim.view,
        priority=victim.priority,
        request=held,
        admitted=True,
        admitted_at=victim.admitted_at,
        finished=False,
        key=victim.key,
        queue=victim.queue,
        held=held,
        footprint={i: room for i, room in footprint.items() if any(room.values())},
        flavors=victim.flavors,
        held_in=held_in if victim.held_in else NOWHERE,
        parts=(),
        rest_of=victim,
    )


def shrunk_sizes(job: JobInfo, taken: Mapping[str, int]) -> tuple[tuple[str, int, int], ...]:
    """What a workload's record says once ``taken`` (pod set -> pods) are taken from it: per
    pod set of its record, (its name, pods asked, pods admitted), admitted being what it
    held less what was taken."""
    held = {s.name: s.count for s in job.view.pod_sets}
    return tuple(
        (r.pod_set, r.asked, held.get(r.pod_set, r.admitted) - taken.get(r.pod_set, 0))
        for r in job.view.sized
    )


def _parts(session: Session, job: JobInfo) -> tuple[JobInfo, ...]:
    recorded = {r.pod_set for r in job.view.sized}
    sets = job.view.pod_sets
    flavors = dict(job.flavors)
    left = {i: dict(room) for i, room in job.footprint.items()}
    out: list[JobInfo] = []
    for index in reversed(range(len(sets))):
        pod_set = sets[index]
        units = (pod_set.count - pod_set.min_count) // max(pod_set.count_step, 1)
        if pod_set.name not in recorded or units <= 0:
            continue
        newest = _newest_pods(session, job, sets, index)
        for _ in range(units):
            out.append(_part(job, pod_set, _footprint(pod_set, newest, left), flavors))
    for rank, part in zip(range(len(out), 0, -1), out, strict=True):
        part.part = (part.part[0], part.part[1], rank)
        part.key = f"{job.key} ({part.part[0]} above its minimum, {rank})"
    return tuple(out)


def _part(
    job: JobInfo, pod_set: PodSet, footprint: Footprint, flavors: Mapping[str, str]
) -> JobInfo:
    step = max(pod_set.count_step, 1)
    held = dict(pod_set.pod.request.scale(step).amounts)
    flavor = flavors.get(pod_set.name)
    return JobInfo(
        view=job.view,
        priority=job.priority,
        request=held,
        admitted=True,
        admitted_at=job.admitted_at,
        finished=False,
        key=job.key,
        queue=job.queue,
        held=held,
        footprint=footprint,
        flavors=job.flavors,
        held_in={flavor: held} if flavor is not None else NOWHERE,
        parts=(),
        part_of=job,
        part=(pod_set.name, step, 0),
    )


def _newest_pods(session: Session, job: JobInfo, sets: tuple[PodSet, ...], index: int) -> list[int]:
    """The nodes of the workload's running pods of one pod set, the newest pod's last (the
    list is taken from its end)."""
    usable = session.placement.usable
    pods: list[PodView] = [
        p
        for p in job.pods
        if p.node and not p.gated and not p.finished and not p.terminating
        if pod_set_of(sets, p) == index
    ]
    pods.sort(key=lambda p: (p.creation_timestamp, p.name))
    return [i for p in pods if p.node and (i := usable.get(p.node, -1)) >= 0]


def _footprint(pod_set: PodSet, newest: list[int], left: dict[int, dict[str, int]]) -> Footprint:
    """The room one unit's pods hold, taken from what the workload holds on the nodes
    (``left``): on the nodes of its newest pods first, else where room is kept for its pods
    not bound yet."""
    pod = pod_set.pod.request.amounts
    out: Footprint = {}
    for _ in range(max(pod_set.count_step, 1)):
        node = newest.pop() if newest else None
        if node is None or not _holds(left.get(node, {}), pod):
            node = next((i for i in sorted(left, reverse=True) if _holds(left[i], pod)), None)
        if node is None:
            continue
        _take(left[node], pod)
        add_room(out.setdefault(node, {}), pod)
    return out


def _holds(room: Mapping[str, int], pod: Mapping[str, int]) -> bool:
    return all(room.get(r, 0) >= a for r, a in pod.items())


def _take(target: dict[str, int], amounts: Mapping[str, int]) -> None:
    for r, a in amounts.items():
        target[r] = target.get(r, 0) - a


def forget(listed: list[JobInfo], victims: Iterable[JobInfo]) -> None:
    """Take victims taken out of a list of victims: a part alone, a workload (or the
    remainder standing for it) with its parts."""
    gone: set[int] = set()
    for victim in victims:
        listed_as = victim.rest_of or victim
        gone.add(id(listed_as))
        if victim.part_of is None:
            gone.update(map(id, listed_as.parts or ()))
    listed[:] = [x for x in listed if id(x) not in gone]
