"""Growth through the queue (docs/elastic.md, *Grown through the queue*): what an admitted
resizable workload asks beyond the size its record admitted waits as an entry of its own.

Pure. ``split_growth`` splits an admitted workload into what its queue holds for it (its
pod sets at the sizes admitted, or lower where its owner lowered them, which frees that
quota at once) and its growth entry, ``ns/name (growth)``: the pods each pod set asks
beyond what was admitted, at the workload's priority, placed in its queue as a new workload
created when the growth was first seen, so that it waits behind the jobs already waiting
and is admitted by every rule a new workload meets. ``grown_records`` is the record once a
growth entry is admitted: the admitted sizes raised by the growth; ``with_growth`` the
workload once that record is written, which the next split holds at its grown size;
``rejoined`` the workload as its object asks, its entry's pods put back; ``growth_seen_at``
the place of its entry; ``split_all`` every workload of a cycle split, what the session
places; ``growth_sizes`` the sizes an admitted entry's decision carries.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime

from sluice.api.admitted_size import SizeRecord
from sluice.api.resources import EMPTY
from sluice.api.views import JobPhase, PodSet, PodView, WorkloadView
from sluice.scheduler.holding import pod_set_of
from sluice.scheduler.partial import view_at

GROWTH_SUFFIX = " (growth)"
"""What a growth entry's name adds to its workload's."""


def growth_key(key: str) -> str:
    """The key of the growth entry of the workload ``key`` (namespace/name)."""
    return f"{key}{GROWTH_SUFFIX}"


def grown_workload(key: str) -> str | None:
    """The workload whose growth entry ``key`` names; None when it names no growth entry."""
    if not key.endswith(GROWTH_SUFFIX):
        return None
    return key[: -len(GROWTH_SUFFIX)]


def split_growth(view: WorkloadView, seen_at: datetime) -> tuple[WorkloadView, WorkloadView | None]:
    """The workload as its queue holds it, and its growth entry (None when it asks no more
    than was admitted). Only an admitted workload with a record grows: the record says what
    was admitted, and a workload without one is held at what its spec asks, as before."""
    if not view.phase.admitted or not view.sized:
        return view, None
    admitted = {r.pod_set: r.admitted for r in view.sized}
    held = tuple(min(s.count, admitted.get(s.name, s.count)) for s in view.pod_sets)
    more = [_beyond(s, n) for s, n in zip(view.pod_sets, held, strict=True) if s.count > n]
    if not more:
        return view, None
    return view_at(view, held), _entry(view, tuple(more), seen_at)


def _beyond(pod_set: PodSet, held: int) -> PodSet:
    """The pods of ``pod_set`` beyond the ``held`` admitted: admitted all together or not
    at all, since its minimum is already met by what runs."""
    more = pod_set.count - held
    starts = max(0, min(more, pod_set.pod_count - held))
    return replace(pod_set, count=more, pod_count=starts, min_count=more, topology=None)


def _entry(view: WorkloadView, pod_sets: tuple[PodSet, ...], seen_at: datetime) -> WorkloadView:
    """The growth entry: waiting, its own pods only (the claims its pods name are counted
    once, in the workload), and no domain of its own to choose: its pod templates carry the
    nodeSelector of the domain the workload was admitted into, so its pods place only there."""
    request = EMPTY
    for pod_set in pod_sets:
        request = request + pod_set.request
    return replace(
        view,
        name=f"{view.name}{GROWTH_SUFFIX}",
        uid="",
        phase=JobPhase.PENDING,
        pod_sets=pod_sets,
        request=request,
        claimed=EMPTY,
        creation_timestamp=seen_at,
        admitted_at=None,
        requeues=0,
        requeued_at=None,
        requeue_reason=None,
        pending_reason=None,
        topology=None,
        assignment=(),
        sized=(),
    )


def grown_records(
    records: Sequence[SizeRecord], growth: Sequence[tuple[str, int]]
) -> tuple[SizeRecord, ...]:
    """The record once ``growth`` (per pod set, the pods admitted beyond the record) is
    admitted: each pod set's admitted size raised by its growth, and what it asks with it
    where it grew past what it first asked; the fields lowered at its first admission are
    kept, as they are what a requeue puts back."""
    more = dict(growth)
    out: list[SizeRecord] = []
    for r in records:
        admitted = r.admitted + more.get(r.pod_set, 0)
        out.append(replace(r, admitted=admitted, asked=max(r.asked, admitted)))
    return tuple(out)


def with_growth(view: WorkloadView, growth: WorkloadView) -> WorkloadView:
    """The workload once its growth entry ``growth`` is admitted and the record raised by it
    is written: held at its grown size from then on."""
    more = [(s.name, s.count) for s in growth.pod_sets]
    return replace(view, sized=grown_records(view.sized, more))


def rejoined(held: WorkloadView, entry: WorkloadView) -> WorkloadView:
    """The workload ``split_growth`` held, with the pods of its growth ``entry`` back: as its
    object asks, for what follows its admission or its suspension."""
    more = {s.name: s for s in entry.pod_sets}
    pod_sets = tuple(_joined(s, more.get(s.name)) for s in held.pod_sets)
    request = held.claimed
    for pod_set in pod_sets:
        request = request + pod_set.request
    return replace(held, pod_sets=pod_sets, request=request)


def _joined(pod_set: PodSet, growth: PodSet | None) -> PodSet:
    if growth is None:
        return pod_set
    count = pod_set.count + growth.count
    return replace(pod_set, count=count, pod_count=pod_set.pod_count + growth.pod_count)


def growth_seen_at(pods: Sequence[PodView], now: datetime) -> datetime:
    """When a workload's growth was first seen, from its pods (``pods``): the creation of the
    oldest still carrying sluice's gate, as its gated pods are its growth; ``now`` when none
    is made yet (its size field raised before its controller made the pods)."""
    gated = [p.creation_timestamp for p in pods if p.gated and not p.finished and not p.terminating]
    return min(gated, default=now)


def split_all(
    workloads: Iterable[WorkloadView], pods: Sequence[PodView] | None, now: datetime
) -> tuple[list[WorkloadView], dict[str, WorkloadView]]:
    """The workloads of a cycle as its session places them: each admitted workload with a
    record held at its admitted size, its growth entry after it, placed at ``growth_seen_at``
    over its pods (``now`` when the pods are not known); and, by each entry's key, the
    workload it grows. An entry already among ``workloads`` (a cycle played on from
    ``apply_decisions``) is kept as it is, its workload being held already."""
    out: list[WorkloadView] = []
    grows: dict[str, WorkloadView] = {}
    given: list[WorkloadView] = []  # entries already split
    gated: GatedPods | None = None
    for view in workloads:
        if not view.sized:  # most workloads: nothing to split (an entry has no record)
            out.append(view)
            if view.name.endswith(GROWTH_SUFFIX):
                given.append(view)
            continue
        held, entry = split_growth(view, now)
        out.append(held)
        if entry is not None:
            if gated is None:
                gated = GatedPods(pods or ())
            seen_at = growth_seen_at(gated.of(view), now)
            out.append(replace(entry, creation_timestamp=seen_at))
            grows[entry.key] = held
    if given:
        keys = {v.key: v for v in out}
        for entry in given:
            workload = keys.get(key) if (key := grown_workload(entry.key)) else None
            if workload is not None:
                grows[entry.key] = workload
    return out, grows


def _pod_of(pod: PodView, view: WorkloadView) -> bool:
    """Whether ``pod`` is of the workload ``view``: controlled by it, or named by its label."""
    if pod.namespace != view.namespace:
        return False
    if pod.job_uid and pod.job_uid == view.uid:
        return True
    return any(named in view.pods_by for named in pod.named_by)


class GatedPods:
    """The pods carrying sluice's gate, indexed by what makes a pod a workload's
    (``_pod_of``): its controller's uid, and each label naming it, so that every growing
    workload finds its own in one look instead of going over every gated pod (a cycle of
    thousands of growing workloads would otherwise cost their number times the gated
    pods)."""

    def __init__(self, pods: Iterable[PodView]) -> None:
        self._by_uid: dict[str, list[PodView]] = {}
        self._by_label: dict[tuple[str, str, str], list[PodView]] = {}
        for pod in pods:
            if not pod.gated:
                continue
            if pod.job_uid:
                self._by_uid.setdefault(pod.job_uid, []).append(pod)
            for label, value in pod.named_by:
                self._by_label.setdefault((pod.namespace, label, value), []).append(pod)

    def of(self, view: WorkloadView) -> list[PodView]:
        """The gated pods of the workload ``view``: of its namespace, controlled by it (its
        uid) or named by one of its labels (``pods_by``)."""
        mine = self._by_uid.get(view.uid, [])  # no pod is indexed under an empty uid
        found = {id(p): p for p in mine if p.namespace == view.namespace}
        for label, value in view.pods_by:
            named = self._by_label.get((view.namespace, label, value), [])
            found.update((id(p), p) for p in named)
        return list(found.values())


def growth_sizes(held: WorkloadView, entry: WorkloadView) -> tuple[tuple[str, int, int], ...]:
    """What the admission of ``entry`` carries for the operator to record: per pod set of
    the workload ``held``'s record, (its name, pods asked, pods admitted) once the growth is
    admitted (``grown_records``)."""
    more = [(s.name, s.count) for s in entry.pod_sets]
    return tuple((r.pod_set, r.asked, r.admitted) for r in grown_records(held.sized, more))


def gates_to_release(view: WorkloadView, pods: Sequence[PodView]) -> list[PodView]:
    """Of an admitted workload's own ``pods``, those whose gate sluice removes: per pod set,
    its pods gated for their size (``PodView.resizable``), oldest first, up to its admitted
    size (its record's, else what it asks) less its live pods already released. The record
    is the one the cycle read, never one being written: a growth's pods are released once
    its raised record has landed."""
    if not view.phase.admitted:
        return []
    admitted = {r.pod_set: r.admitted for r in view.sized}
    sets = view.pod_sets
    released = [0] * len(sets)
    gated: list[list[PodView]] = [[] for _ in sets]
    for pod in pods:
        i = pod_set_of(sets, pod)
        if i < 0 or pod.finished or pod.terminating:
            continue
        if pod.gated:
            if pod.resizable:  # gated for its size; a plain pod's gate is its own
                gated[i].append(pod)
        else:
            released[i] += 1
    out: list[PodView] = []
    for i, pod_set in enumerate(sets):
        room = admitted.get(pod_set.name, pod_set.count) - released[i]
        oldest = sorted(gated[i], key=lambda p: (p.creation_timestamp, p.name))
        out += oldest[: max(0, room)]
    return out


def pods_beyond(view: WorkloadView, pods: Sequence[PodView]) -> list[PodView]:
    """Of ``pods``, those of the workload ``view`` that its controller deletes once its size
    fields hold the sizes of its view (a size lowered by reclaim or preempt): per pod set,
    its live pods beyond its size, the gated first, then the newest."""
    sets = view.pod_sets
    live: list[list[PodView]] = [[] for _ in sets]
    for pod in pods:
        if _pod_of(pod, view) and not pod.finished and not pod.terminating:
            i = pod_set_of(sets, pod)
            if i >= 0:
                live[i].append(pod)
    out: list[PodView] = []
    for pod_set, own in zip(sets, live, strict=True):
        own.sort(key=lambda p: (p.gated, p.creation_timestamp, p.name))  # kept first
        out += own[pod_set.count :]
    return out


def growth_pods(view: WorkloadView) -> int:
    """How many pods an admitted workload asks beyond what its record admitted: its growth
    entry's, counted from the workload as its object asks."""
    admitted = {r.pod_set: r.admitted for r in view.sized}
    return sum(max(0, s.count - admitted[s.name]) for s in view.pod_sets if s.name in admitted)
