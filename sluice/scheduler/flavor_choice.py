"""A flavor for each pod set, chosen at admission (docs/flavors.md, *A flavor chosen at
admission*).

Pod sets are taken in the workload's order, each on what the ones before it were given. For
one, each flavor of its queue's list its pods may be given (``flavor_fit``) is tried in order
and classed: it *fits* (every level naming the flavor stays within its realCapability and
its deserved there, and the flavored pods place on the free room), *borrows* (as fits, but
some level goes over its deserved there), *reclaims* (within the deserved of every level, but
not within a limit or the room now: reclaim or preempt could free it), or *no*. The search
stops at the first that fits, and at one that borrows or reclaims where the queue's
``flavorFungibility`` says so; otherwise the best class met is taken, the earlier flavor
among equals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from sluice.api.constraints import PodSpecView
from sluice.api.flavor import FlavorView
from sluice.api.flavor_assignment import flavors_text
from sluice.api.queue import FlavorFungibility
from sluice.scheduler.fit import unplaced
from sluice.scheduler.flavor_fit import flavor_refusal, in_flavor
from sluice.scheduler.flavor_limits import levels
from sluice.scheduler.flavor_quota import FlavorAmounts, counted
from sluice.scheduler.placement import Footprint
from sluice.scheduler.records import JobInfo
from sluice.scheduler.session import Session

FITS, BORROWS, RECLAIMS, NO = range(4)
UNEXPLAINED = "its pods do not fit on the nodes"


@dataclass(frozen=True, slots=True)
class Chosen:
    """The flavor of each pod set, and what follows from it."""

    flavors: tuple[tuple[str, str], ...]
    """(pod set, flavor), in the workload's order."""
    pods: tuple[PodSpecView, ...]
    """Each pod set's pod as admission into its flavor leaves it: given the flavor's labels
    and tolerations (``in_flavor``), for placement."""
    held_in: FlavorAmounts
    """What it would hold per flavor (``flavor_quota.counted``)."""
    rank: int
    """The worst class among its pod sets: FITS, BORROWS or RECLAIMS."""
    waits: str = ""
    """Why it does not fit now, when its rank is RECLAIMS: its pending reason."""
    reclaims_in: str = ""
    """The flavor of its first pod set that reclaims: where reclaim and preempt look for
    victims (docs/flavors.md); "" when it fits now."""

    @property
    def text(self) -> str:
        """Where it goes, for the admission reason: ``flavor h100``, or per pod set."""
        return flavors_text(self.flavors)

    def job(self, job: JobInfo) -> JobInfo:
        """The job with its pods in their flavors, for placement to place (made only for a
        job that is to be placed: most that wait never are)."""
        sets = tuple(
            p if p.pod is pod else replace(p, pod=pod)
            for p, pod in zip(job.view.pod_sets, self.pods, strict=True)
        )
        return replace(job, view=replace(job.view, pod_sets=sets))


def choose_flavors(
    session: Session, job: JobInfo, freed: Footprint | None = None, explain: bool = True
) -> Chosen | str:
    """A flavor for each of the job's pod sets, or why none can be given to one (its
    pending reason). ``freed``: room on the nodes as if victims had left them. Without
    ``explain``, pods that do not fit on a flavor's nodes are not told why (a look at every
    node): the actions choose without it, and a job that waits is told once the cycle is
    over (``flavor_reason``).

    On the session's own room (no ``freed``), the choice for jobs alike is made once while
    nothing is admitted or evicted (``Session.chosen``): admission, reclaim and preempt
    each ask it of the same waiting job."""
    if freed is not None:
        return _choose(session, job, freed, explain)
    view, version = job.view, session.placement.version
    alike = (explain, job.queue, view.request, view.pod_sets, view.topology)
    known = session.chosen.get(alike)
    if known is not None and known[0] == version:
        return known[1]
    chosen = _choose(session, job, None, explain)
    session.chosen[alike] = (version, chosen)
    return chosen


def _choose(session: Session, job: JobInfo, freed: Footprint | None, explain: bool) -> Chosen | str:
    view, rules = job.view, session.queues[job.queue].fungibility
    given: dict[str, str] = {}
    flavored: list[PodSpecView] = []
    rank, waits, reclaims_in = FITS, "", ""
    # Most jobs, one pod set without claims of its own, ask the same in every flavor.
    first = view.pod_sets[0] if view.pod_sets else None
    alone = first.request.amounts if first is not None and not first.named_claims else None
    for index, pods in enumerate(view.pod_sets):
        picked = _pick(session, job, index, given, rules, freed, explain, alone)
        where = f"pod set {pods.name}: " if len(view.pod_sets) > 1 else ""
        if isinstance(picked, str):
            return where + picked if picked.startswith("no ") else f"pod set {pods.name} {picked}"
        found, flavor, notes, shaped = picked
        given[pods.name] = flavor.name
        flavored.append(shaped)
        if found == RECLAIMS and not waits:
            waits, reclaims_in = f"{where}no flavor fits: {notes}", flavor.name
        rank = max(rank, found)
    return Chosen(
        flavors=tuple(given.items()),
        pods=tuple(flavored),
        held_in=(
            {given[first.name]: dict(alone)}
            if alone is not None and first is not None and len(view.pod_sets) == 1
            else counted(view.pod_sets, given)
        ),
        rank=rank,
        waits=waits,
        reclaims_in=reclaims_in,
    )


def flavor_reason(session: Session, job: JobInfo) -> str:
    """Why a job of a queue with flavors waits, on the quota and room the cycle leaves: the
    flavors tried and what stopped each, or why its pods, in the flavors they would be
    given, do not fit on the nodes at once."""
    chosen = choose_flavors(session, job)
    if isinstance(chosen, str) or chosen.waits:
        return chosen if isinstance(chosen, str) else chosen.waits
    return unplaced(session, chosen.job(job))


def _pick(
    session: Session,
    job: JobInfo,
    index: int,
    given: dict[str, str],
    rules: FlavorFungibility,
    freed: Footprint | None,
    explain: bool,
    alone: Mapping[str, int] | None,
) -> tuple[int, FlavorView, str, PodSpecView] | str:
    """The flavor for pod set ``index`` and its class, with what stopped the flavors tried
    before it, and its pod as it will be in it; or why none may be given (starting "no
    flavor fits" or "selects none"). ``alone``: the first pod set's request when it names
    no claims, what it holds in any flavor it is given."""
    pods = job.view.pod_sets[index]
    notes: list[str] = []
    selected: list[str] = []  # why the flavors its pods select out were ruled out
    best: tuple[int, FlavorView, PodSpecView] | None = None
    for name in session.queues[job.queue].flavor_list:
        flavor = session.flavor_views.get(name)
        if flavor is None:
            notes.append(f"flavor {name} does not exist")
            selected.append(notes[-1])
            continue
        if (refused := flavor_refusal(pods.pod, flavor)) is not None:
            notes.append(f"flavor {name}: {refused}")
            selected.append(refused)
            continue
        shaped = in_flavor(pods.pod, flavor)
        need = alone if index == 0 and alone is not None else _need(job, index, flavor, given)
        found, why = _classify(session, job, index, flavor, shaped, need, freed, explain)
        if (
            found == FITS
            or (found == BORROWS and rules.when_can_borrow == "Borrow")
            or (found == RECLAIMS and rules.when_can_reclaim == "Reclaim")
        ):
            best = (found, flavor, shaped)
            if why:
                notes.append(f"flavor {name}: {why}")
            break
        notes.append(f"flavor {name}: {why or 'it would borrow'}")
        if found != NO and (best is None or found < best[0]):
            best = (found, flavor, shaped)
    if best is not None:
        return best[0], best[1], "; ".join(notes), best[2]
    if len(selected) == len(notes):
        return f"selects none of queue {job.queue}'s flavors: " + "; ".join(selected)
    return "no flavor fits: " + "; ".join(notes)


def _need(job: JobInfo, index: int, flavor: FlavorView, given: dict[str, str]) -> dict[str, int]:
    """What the job would hold in ``flavor`` with pod set ``index`` given it, on what the
    ones before it were given (a claim named by two pod sets counts once)."""
    chosen = {**given, job.view.pod_sets[index].name: flavor.name}
    return counted(job.view.pod_sets[: index + 1], chosen).get(flavor.name, {})


def _classify(
    session: Session,
    job: JobInfo,
    index: int,
    flavor: FlavorView,
    shaped: PodSpecView,
    need: Mapping[str, int],
    freed: Footprint | None,
    explain: bool,
) -> tuple[int, str]:
    """The class of pod set ``index`` in ``flavor`` (its pod as it will be there:
    ``shaped``; what the job would then hold there: ``need``), and what stops it there (""
    when nothing does)."""
    pods = job.view.pod_sets[index]
    breach, over_deserved = levels(session, job.queue, flavor.name, need, explain)
    if breach is None:
        placement = session.placement
        if _places(session, job, index, shaped, freed):
            return (BORROWS if over_deserved else FITS), ""
        breach = placement.explain(shaped, pods.pod_count) if explain else UNEXPLAINED
    return (NO if over_deserved else RECLAIMS), breach


def _places(
    session: Session, job: JobInfo, index: int, shaped: PodSpecView, freed: Footprint | None
) -> bool:
    """Whether pod set ``index``'s pods, as they will be in a flavor (``shaped``), place on the
    free room: inside one domain of the level a job of one pod set requires of a Topology,
    since its pods carry the flavor's labels and a domain outside the flavor holds none of
    its nodes; on any nodes otherwise (the whole job is placed once all pod sets have one)."""
    view, pods = job.view, job.view.pod_sets[index]
    if view.topology is not None and view.topology.required and len(view.pod_sets) == 1:
        alone = replace(view, pod_sets=(replace(pods, pod=shaped),))
        return session.domains.place(alone, freed) is not None
    return session.placement.place(shaped, pods.pod_count, freed) is not None
