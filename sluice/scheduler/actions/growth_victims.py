"""Victims above a minimum (docs/scheduler.md, *Victims above a minimum*): reclaim and
preempt take an admitted resizable workload's pods above its minimum as victims of their
own, one unit of its kind's size at a time (a Job's pod, a Ray group's replica), the newest
first, before the workload itself. Taking one lowers the workload's size (the operator
writes its size field and its record lower, and its controller deletes the pods beyond
it, or, for a kind whose controller deletes only the pods named to it, those the parts
name: ``JobInfo.named``); below its minimum only the whole workload goes, suspended as any
victim is.

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


def parts_of(session: Session, job: JobInfo) -> tuple[JobInfo, ...]:
    """The victims above the minimum of an admitted workload with a size record, newest
    first: per pod set of its record (the last pod set first), one per unit of its size above
    its minimum, the highest first; () for any other workload, and for one whose controller
    would delete pods other than those counted as gone (``WorkloadView.sheds`` ``whole``: a
    RayJob without Ray's autoscaler). Worked out once a cycle."""
    if job.parts is None:
        view = job.view
        shrinks = view.sized and job.admitted and view.sheds != "whole"
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
    left = {i: room for i, room in footprint.items() if any(room.values())}
    return _standing_for(victim, held, left, held_in if victim.held_in else NOWHERE, rest_of=victim)


def _standing_for(
    job: JobInfo,
    held: Mapping[str, int],
    footprint: Footprint,
    held_in: Mapping[str, Mapping[str, int]],
    part_of: JobInfo | None = None,
    part: tuple[str, int, int] = ("", 0, 0),
    rest_of: JobInfo | None = None,
) -> JobInfo:
    """A victim standing for some of an admitted workload's pods, a part of it
    (``part_of``) or what its parts chosen leave of it (``rest_of``): the workload's own
    record (its view, priority, queue, admission, flavors), holding ``held`` of its queues,
    ``footprint`` of the nodes and ``held_in`` of its flavors."""
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
        held_in=held_in,
        parts=(),
        part_of=part_of,
        part=part,
        rest_of=rest_of,
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


def named_deletes(job: JobInfo) -> tuple[tuple[str, str], ...]:
    """What a shrink of a workload whose controller deletes only the pods named to it
    (``WorkloadView.sheds`` ``named``) names, as (pod set, pod): the pods of its parts taken
    this cycle, the newest first, then its gated pods of those pod sets, the newest first
    (its growth goes with the shrink, and its size is lowered under them); () for any other
    workload."""
    if job.view.sheds != "named":
        return ()
    taken = [p for p in job.parts or () if p.evicted]
    out = [(p.part[0], name) for p in taken for name in p.named]
    names = {p.part[0] for p in taken}
    sets = job.view.pod_sets
    gated = [
        p
        for p in job.pods
        if p.gated and not p.finished and not p.terminating
        if (i := pod_set_of(sets, p)) >= 0 and sets[i].name in names
    ]
    gated.sort(key=lambda p: (p.creation_timestamp, p.name), reverse=True)
    return (*out, *((sets[pod_set_of(sets, p)].name, p.name) for p in gated))


def _parts(session: Session, job: JobInfo) -> tuple[JobInfo, ...]:
    recorded = {r.pod_set for r in job.view.sized}
    sets = job.view.pod_sets
    flavors = dict(job.flavors)
    left: dict[int, dict[str, int]] | None = None
    named = job.view.sheds == "named"
    usable = session.placement.usable
    out: list[JobInfo] = []
    for index in reversed(range(len(sets))):
        pod_set = sets[index]
        step = max(pod_set.count_step, 1)
        units = (pod_set.count - pod_set.min_count) // step
        if pod_set.name not in recorded or units <= 0:
            continue
        if left is None:
            left = {i: dict(room) for i, room in job.footprint.items()}
        pods = _newest_pods(job, sets, index, bound=not named)
        if not named:
            pods = [p for p in pods if p.node and usable.get(p.node, -1) >= 0]
        # Named: the pods not made yet are the first to go (lowering the size is enough for
        # them), then the newest that run, each by name.
        unborn = max(pod_set.count - len(pods), 0) if named else 0
        # Every part of a pod set holds the same: one mapping, never written, serves them all.
        held = pod_set.pod.request.scale(step).amounts
        flavor = flavors.get(pod_set.name)
        held_in = {flavor: held} if flavor is not None else NOWHERE
        for _ in range(units):
            mine: list[PodView] = []
            for _ in range(step):
                if unborn:
                    unborn -= 1
                elif pods:
                    mine.append(pods.pop())
            nodes = [usable.get(p.node, -1) if p.node else -1 for p in reversed(mine)]
            if not named:
                nodes = [i for i in nodes if i >= 0]
            footprint = _footprint(pod_set, nodes, left)
            part = _standing_for(job, held, footprint, held_in, job, (pod_set.name, step, 0))
            if named:
                part.named = tuple(p.name for p in mine)
            out.append(part)
    for rank, part in zip(range(len(out), 0, -1), out, strict=True):
        part.part = (part.part[0], part.part[1], rank)
        part.key = f"{job.key} ({part.part[0]} above its minimum, {rank})"
    return tuple(out)


def _newest_pods(job: JobInfo, sets: tuple[PodSet, ...], index: int, bound: bool) -> list[PodView]:
    """The workload's live pods of one pod set released from their gate (``bound``: only
    those bound to a node), the newest last (the list is taken from its end)."""
    one = len(sets) == 1 and sets[0].pods_by is None  # every pod is of its only set
    pods: list[PodView] = [
        p
        for p in job.pods
        if (p.node or not bound) and not p.gated and not p.finished and not p.terminating
        if one or pod_set_of(sets, p) == index
    ]
    pods.sort(key=lambda p: (p.creation_timestamp, p.name))
    return pods


def _footprint(pod_set: PodSet, nodes: list[int], left: dict[int, dict[str, int]]) -> Footprint:
    """The room one unit's pods hold, taken from what the workload holds on the nodes
    (``left``): on ``nodes`` (where its pods run, the last taken first; -1, a pod not bound)
    first, else where room is kept for its pods not bound yet."""
    pod = pod_set.pod.request.amounts
    out: Footprint = {}
    for _ in range(max(pod_set.count_step, 1)):
        node = nodes.pop() if nodes else None
        if node is None or node < 0 or not _holds(left.get(node, {}), pod):
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
