"""Admission at a smaller size: a resizable workload whose whole size does not fit is
admitted at the largest size at or above its minimums that does (docs/elastic.md,
*Admitted smaller*).

What fits is exactly what admission tests of a whole workload (``fit``: the capability its
queues are over, their limits, the cluster's free room, the placement of its pods with their
Topology domain, and in a queue with flavors the flavor each pod set is given), asked of
the workload as admitted at a size (``partial.view_at``). The
search (``partial.shrink_to_fit``) asks about a dozen sizes for a thousand pods; each size
is tested once. The admission books the smaller request, so the rest of the cycle (shares,
reclaim, the queues' status) sees what was admitted, and its decision carries the sizes for
the operator to write.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sluice.api.views import WorkloadView
from sluice.scheduler.actions.outcome import Outcome
from sluice.scheduler.fit import (
    cluster_failure,
    limits,
    over_capability_failure,
    place_where,
)
from sluice.scheduler.flavor_choice import Chosen, choose_flavors
from sluice.scheduler.partial import (
    Sizes,
    ranges_of,
    request_at,
    shrink_to_fit,
    sizes_at,
    view_at,
)
from sluice.scheduler.records import JobInfo
from sluice.scheduler.session import Session
from sluice.scheduler.set_domains import Placed


@dataclass(frozen=True, slots=True)
class Trial:
    """One size tested: the workload at that size, and where its pods go (None: it does not
    fit), or what stopped it, in the words of an admission reason."""

    job: JobInfo
    """The workload at that size; as far as it was made when the size does not fit (what
    stopped it is all that is read of it then)."""
    placed: Placed | None
    stopped: str = ""
    chosen: Chosen | None = None
    """The flavor of each pod set at that size, in a queue with flavors."""


def at_size(job: JobInfo, view: WorkloadView) -> JobInfo:
    """The job's record as it would be at a smaller view: its request that of the view."""
    return replace(job, view=view, request=view.request.amounts)


def trial(
    session: Session, job: JobInfo, sizes: Sizes | None = None, quota_passed: bool = False
) -> Trial:
    """Whether the job fits as admission tests it, at ``sizes`` when given (else as it is),
    and if not, what stops it. The tests of its queues and of the cluster read only what it
    asks, so they run on the request at ``sizes`` before the workload at that size is made:
    most sizes tried in a full cluster stop there, and making it costs more than they do.
    ``quota_passed``: its whole size passed them, so every smaller size does (they only
    add up what it asks) and they are not run again."""
    if sizes is not None:
        request = request_at(job.view, sizes)
        if not quota_passed:
            asked = replace(job, request=request.amounts)
            if stopped := quota_stop(session, asked):
                return Trial(asked, None, stopped)
        if not _may_place(session, job, sizes):
            return Trial(job, None, NO_ROOM)
        job = at_size(job, view_at(job.view, sizes, request))
    elif not quota_passed and (stopped := quota_stop(session, job)):
        return Trial(job, None, stopped)
    chosen = None
    if session.queues[job.queue].flavor_list:
        picked = choose_flavors(session, job, explain=False)
        if isinstance(picked, str) or picked.waits:
            return Trial(job, None, "no flavor has room for more")
        chosen = picked
    placed = place_where(session, job if chosen is None else chosen.job(job))
    stopped = "" if placed is not None else NO_ROOM
    return Trial(job, placed, stopped, chosen)


NO_ROOM = "no room for more on the nodes"


def _may_place(session: Session, job: JobInfo, sizes: Sizes) -> bool:
    """False when the pods of a workload of one pod set, asking no Topology, in a queue
    without flavors, do not fit on the nodes at ``sizes``: the very question ``place_where``
    asks of it at that size, asked before the workload at that size is made (most sizes
    tried in a full cluster stop there, and making it costs more than asking). True for any
    other workload: its trial places it whole."""
    view, pod_set = job.view, job.view.pod_sets[0]
    if len(view.pod_sets) != 1 or view.topology is not None or pod_set.topology is not None:
        return True
    if session.queues[job.queue].flavor_list:
        return True
    n = sizes[0]
    pods = pod_set.pod_count if n == pod_set.count else min(n, pod_set.pod_count)
    return session.placement.place(pod_set.pod, pods) is not None


def quota_stop(session: Session, job: JobInfo) -> str:
    """What stops the job in its queues or the cluster, as a trial says it; "" for nothing."""
    if over_capability_failure(session, job) is not None:
        return f"queue {job.queue} is over its capability"
    breach = next(limits(session, job), None)
    if breach is not None:
        return f"no room for more in queue {breach.queue}'s {breach.label}"
    if cluster_failure(session, job) is not None:
        return "no room for more in the cluster"
    return ""


def search(
    session: Session, job: JobInfo, quota_passed: bool = False
) -> tuple[Sizes, Trial, Trial] | None:
    """The largest sizes the job fits at below its whole size, the trial that fits there,
    and the trial of the next larger size on the search's path (what stops more); None when
    it cannot shrink or even its minimums do not fit. The whole size is known not to fit;
    ``quota_passed``: it passed the tests of its queues and the cluster (``trial``)."""
    view = job.view
    if not any(s.resizable for s in view.pod_sets):
        return None
    ranges = ranges_of(view.pod_sets)
    whole = sizes_at(ranges, 0)
    tried: dict[Sizes, Trial] = {whole: Trial(job, None)}

    def fits(sizes: Sizes) -> bool:
        if sizes not in tried:
            tried[sizes] = trial(session, job, sizes, quota_passed)
        return tried[sizes].placed is not None

    found = shrink_to_fit(ranges, fits)
    if found is None or found == whole:
        return None
    # The search ends between a size that fits and the next larger one on its path, which
    # it tried: of the sizes that did not fit, the one of fewest pods.
    larger = min((s for s, t in tried.items() if t.placed is None), key=sum)
    stop = tried[larger] if larger != whole else trial(session, job, quota_passed=quota_passed)
    return found, tried[found], stop


def sizes_text(job: JobInfo, sizes: Sizes) -> str:
    """``6 of 8 workers (min 4)`` for a workload of one pod set; per pod set admitted
    smaller, by name, for several."""
    pod_sets = job.view.pod_sets
    if len(pod_sets) == 1:
        s = pod_sets[0]
        return f"{sizes[0]} of {s.count} workers (min {s.min_count})"
    return ", ".join(
        f"{s.name} {n} of {s.count} (min {s.min_count})"
        for s, n in zip(pod_sets, sizes, strict=True)
        if n < s.count
    )


def admit_smaller(
    session: Session, outcome: Outcome, job: JobInfo, action: str, quota_passed: bool = False
) -> bool:
    """Admits the job at the largest sizes that fit when it is resizable and some size at or
    above its minimums fits; whether it did. Called only once its whole size did not fit;
    ``quota_passed``: its whole size passed its queues and the cluster (``trial``)."""
    found = search(session, job, quota_passed)
    if found is None:
        return False
    sizes, fitting, stop = found
    assert fitting.placed is not None
    footprint, domain = fitting.placed
    asked = job.view.pod_sets
    reason = f"{action}: admitted {sizes_text(job, sizes)}: {stop.stopped}"
    if fitting.chosen is not None:
        reason += f", in {fitting.chosen.text}"
    if domain is not None:
        reason += f", in {domain.text}"
    job.view, job.request = fitting.job.view, fitting.job.request
    recorded = tuple((s.name, s.count, n) for s, n in zip(asked, sizes, strict=True) if n < s.count)
    outcome.admit(session, job, reason, footprint, domain, fitting.chosen, sizes=recorded)
    return True
