"""One scheduling cycle: Snapshot in, CycleResult out. The only entry point callers need."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from sluice.api.constants import ROOT_QUEUE
from sluice.api.queue import QueueUsage
from sluice.api.resources import EMPTY, Resources
from sluice.api.views import JobPhase, WorkloadView
from sluice.queues import limits
from sluice.queues.lifecycle import derive_states
from sluice.scheduler import usage as usage_rule
from sluice.scheduler.actions.admit import admit
from sluice.scheduler.actions.backfill import backfill
from sluice.scheduler.actions.outcome import Outcome
from sluice.scheduler.actions.preempt import preempt
from sluice.scheduler.actions.reclaim import reclaim
from sluice.scheduler.actions.requeue import requeue
from sluice.scheduler.fit import over_capability
from sluice.scheduler.flavor_apply import admitted_into, suspended_from
from sluice.scheduler.growth import (
    gates_to_release,
    grown_workload,
    growth_key,
    pods_beyond,
    rejoined,
    split_all,
    with_growth,
)
from sluice.scheduler.kept import Kept, SpecMemo
from sluice.scheduler.model import CycleResult, FlavorFigures, PendingJob, QueueResult, Snapshot
from sluice.scheduler.order import leaf_order
from sluice.scheduler.partial import admitted_smaller, restored
from sluice.scheduler.records import JobInfo, QueueInfo
from sluice.scheduler.session import Session, job_order_key
from sluice.scheduler.usage_note import UsageNotes


def run_cycle(snapshot: Snapshot, specs: SpecMemo | None = None) -> CycleResult:
    """The whole cycle: every decision, and every waiting job's position and reason.
    ``specs``: what follows from the queues' specs, as the last cycle of the same caller
    left it (sluice/scheduler/kept.py); none: worked out afresh."""
    session = Session(snapshot, specs=specs)
    leaves = [n for n in session.tree.leaves() if n in session.queues]
    queue_order = leaf_order(session, leaves)
    outcome = _act(session)
    return CycleResult(
        queue_order=queue_order,
        queues=_queue_results(session, outcome),
        decisions=tuple(outcome.decisions),
        pending=tuple(_pending(session, outcome, queue_order)),
        cluster_total=session.total,
        domains_free=session.domains.widest_free(),
        releases=tuple(
            (job.key, tuple(pods))
            for job in session.admitted_at_start
            if job.admitted
            and job.key not in outcome.shrunk  # its record is being lowered: none released
            and (pods := gates_to_release(job.view, job.pods))
        ),
    )


class Decided:
    """A cycle's decisions, and the session they were taken in: what the queues' statuses
    show is worked out from it only when asked (``queues``), once, after the last run of the
    decision pass (sluice/scheduler/decision_pass.py)."""

    __slots__ = ("decisions", "outcome", "session")

    def __init__(self, session: Session, outcome: Outcome) -> None:
        self.session = session
        self.outcome = outcome
        self.decisions = tuple(outcome.decisions)

    def queues(self) -> dict[str, QueueResult]:
        """Every queue's status after the decisions, as ``run_cycle`` gives it."""
        return _queue_results(self.session, self.outcome)

    def usage(self) -> dict[str, QueueUsage]:
        """Each queue's usage as the cycle sampled it, the entry penalties of its decisions
        included (empty when the usage plugin is off), the root's left out."""
        session = self.session
        sampled = {name: _usage(session, name) for name in session.queues if name != ROOT_QUEUE}
        return {name: usage for name, usage in sampled.items() if usage is not None}


def decide(snapshot: Snapshot, kept: Kept | None = None) -> Decided:
    """The decisions of a cycle, without what explains the jobs that wait (positions,
    reasons): what the decision pass runs (sluice/scheduler/decision_pass.py). ``kept``:
    what the last session worked out, taken where it still holds (sluice/scheduler/kept.py)."""
    session = Session(snapshot, kept)
    return Decided(session, _act(session))


def _act(session: Session) -> Outcome:
    """The configured actions, in order, on the session."""
    outcome = Outcome()
    requeue(session, outcome)
    for action in session.config.actions:
        if action in ("enqueue", "allocate"):
            if outcome.changed:
                admit(session, outcome, action)
        elif action == "reclaim":
            reclaim(session, outcome)
        elif action == "preempt":
            preempt(session, outcome)
        elif action == "backfill":
            backfill(session, outcome)
    return outcome


def _pending(session: Session, outcome: Outcome, queue_order: list[str]) -> list[PendingJob]:
    by_queue: dict[str, list[JobInfo]] = {}
    mixed: set[str] = set()  # queues whose waiting jobs are not all in job order already
    for info in session.queues.values():
        waiting = [j for j in info.pending_jobs if not j.admitted]  # kept in job order
        if info.refused_jobs:
            waiting += info.refused_jobs
            mixed.add(info.name)
        if waiting:
            by_queue[info.name] = waiting
    for job in [*outcome.evicted, *session.orphans]:
        if not job.admitted:
            by_queue.setdefault(job.queue, []).append(job)
            mixed.add(job.queue)
    rank = {name: i for i, name in enumerate(queue_order)}
    notes = UsageNotes(session)
    out: list[PendingJob] = []
    for queue in sorted(by_queue, key=lambda q: (rank.get(q, len(rank)), q)):
        jobs = by_queue[queue]
        if queue in mixed:
            jobs = sorted(jobs, key=job_order_key)
        for position, job in enumerate(jobs, start=1):
            cause = outcome.reason(session, job) or (
                "no admission action is configured"
                if not {"enqueue", "allocate"} & set(session.config.actions)
                else "not reached this cycle"
            )
            if note := notes.note(queue):
                cause = f"{cause}; {note}"
            out.append(PendingJob(job.key, queue, position, cause))
    return out


@dataclass(slots=True)
class _Counts:
    """A queue's jobs by state, as its status shows them."""

    pending: int = 0
    inqueue: int = 0
    running: int = 0
    completed: int = 0

    @property
    def unfinished(self) -> int:
        return self.pending + self.inqueue + self.running

    def add(self, other: _Counts) -> None:
        self.pending += other.pending
        self.inqueue += other.inqueue
        self.running += other.running
        self.completed += other.completed


def _counts(session: Session, outcome: Outcome) -> dict[str, _Counts]:
    """Each queue's own jobs by state, after the decisions (the jobs the decision pass left out
    counted in)."""
    counts = {name: _Counts() for name in session.queues}
    for job in outcome.evicted:
        if job.queue in counts:
            counts[job.queue].pending += 1
    for info in session.queues.values():
        own = counts[info.name]
        own.pending += len([j for j in info.pending_jobs if not j.admitted])
        own.pending += len(info.refused_jobs)
        for job in info.admitted_jobs:
            if job.view.phase is JobPhase.RUNNING and not job.fresh:
                own.running += 1
            else:
                own.inqueue += 1
        own.completed += info.completed
    snapshot = session.snapshot
    for name, left_out in snapshot.unlisted_jobs.items():
        if name in counts:
            counts[name].pending += left_out
    for name, finished in snapshot.unlisted_finished.items():
        if name in counts:
            counts[name].completed += finished
    return counts


def _queue_results(session: Session, outcome: Outcome) -> dict[str, QueueResult]:
    counts = _counts(session, outcome)
    unfinished = {name: c.unfinished for name, c in counts.items()}
    states = derive_states(session.tree, unfinished)
    for info in sorted(session.queues.values(), key=lambda q: -q.depth):
        if info.parent is not None:
            counts[info.parent].add(counts[info.name])
    out: dict[str, QueueResult] = {}
    for name, info in sorted(session.queues.items()):
        if name == ROOT_QUEUE:
            continue
        own = counts[name]
        # Decisions of this cycle (a reclaim by another queue) may have brought it back.
        info.over_capability = limits.over_capability(info.allocated, info.capability)
        out[name] = QueueResult(
            state=states.get(name, "Unknown"),
            parent=session.tree.parent(name),
            weight=info.weight,
            priority=info.priority,
            deserved=info.deserved,
            allocated=Resources(info.allocated),
            guarantee=info.guarantee,
            real_capability=info.real_capability,
            share=session.share(name),
            pending=own.pending,
            inqueue=own.inqueue,
            running=own.running,
            completed=own.completed,
            valid=not info.invalid_reason,
            invalid_reason=info.invalid_reason,
            children=info.children,
            over_capability=over_capability(session, name),
            usage=_usage(session, name),
            usage_key=session.usage_key(name),
            flavors=flavor_figures(info),
        )
    return out


def flavor_figures(info: QueueInfo) -> tuple[FlavorFigures, ...]:
    """The queue's figures per flavor: each flavor its own entries name, in its list's order,
    then each other flavor its subtree holds in, by name."""
    named = [f for f in info.flavor_list if f in info.flavor_real_capability]
    named += sorted(set(info.flavor_real_capability) - set(named))
    held = sorted(f for f, a in info.flavor_allocated.items() if f not in named and any(a.values()))
    return tuple(
        FlavorFigures(
            name=f,
            allocated=Resources(info.flavor_allocated.get(f, {})),
            deserved=info.flavor_deserved.get(f, EMPTY),
            real_capability=info.flavor_real_capability[f],
            resources=tuple(sorted(_entry_names(info, f))),
        )
        for f in named
    ) + tuple(
        FlavorFigures(name=f, allocated=Resources(info.flavor_allocated[f]), named=False)
        for f in held
    )


def _entry_names(info: QueueInfo, flavor: str) -> frozenset[str]:
    entry = info.queue.spec.flavor(flavor)
    return entry.names() if entry is not None else frozenset()


def _usage(session: Session, name: str) -> QueueUsage | None:
    """The queue's usage as this cycle sampled it; None when the usage plugin is off."""
    settings = session.usage_settings
    if settings is None:
        return None
    amounts = session.usage.queues.get(name, {})
    _, resource = usage_rule.dominant(amounts, session.total.amounts, settings)
    return QueueUsage(
        sampled_at=session.now,
        resources=amounts,
        namespaces=session.usage.namespaces.get(name, {}),
        dominant=usage_rule.describe(amounts, resource),
    )


def apply_decisions(snapshot: Snapshot, result: CycleResult, now: datetime) -> Snapshot:
    """The snapshot as it would be once the operator wrote the cycle's decisions (and the Job
    controller deleted the pods of the jobs it suspended): a workload admitted into flavors
    carries them and their record, a suspended one is given back its pods as they were. A
    growth entry (sluice/scheduler/growth.py, split as the cycle splits it) joins its workload
    once admitted, raising its record, and goes back into it when the workload is suspended,
    which then asks its whole size; one left waiting stays in the snapshot beside its held
    workload. A workload shrunk by reclaim or preempt stays admitted at its lower sizes, its
    growth gone and its pods beyond them deleted."""
    admitted = {d.job: d for d in result.decisions if d.action == "admit"}
    shrunk = {d.job: d for d in result.decisions if d.shrinks}
    suspended = {d.job: d for d in result.decisions if d.action != "admit" and not d.shrinks}
    gone: set[str] = set()
    lowered: list[WorkloadView] = []  # workloads shrunk, at their lower sizes
    named: set[tuple[str, str, str]] = set()  # (namespace, label, name) of the others' pods
    jobs: list[WorkloadView] = []
    workloads, _ = split_all(snapshot.workloads, snapshot.pods, snapshot.now)
    entries = {j.key: j for j in workloads if grown_workload(j.key) is not None}
    for job in workloads:
        entry = entries.get(growth_key(job.key))
        grows = grown_workload(job.key)
        if job.key in entries and (job.key in admitted or grows in suspended or grows in shrunk):
            continue  # a growth entry admitted into its workload, or gone with its suspension
        if job.key in shrunk:  # its size fields lowered: what it asked beyond is gone too
            jobs.append(admitted_smaller(job, shrunk[job.key].sizes))
            lowered.append(jobs[-1])
            continue
        if entry is not None and (entry.key in admitted or job.key in suspended):
            job = rejoined(job, entry)
            if job.key not in suspended:
                jobs.append(with_growth(job, entry))
                continue
        decision = suspended.get(job.key)
        if job.key in admitted:
            job = admitted_smaller(job, admitted[job.key].sizes)
            jobs.append(replace(job, phase=JobPhase.INQUEUE, admitted_at=now))
            if admitted[job.key].flavors:
                jobs[-1] = admitted_into(jobs[-1], admitted[job.key].flavors, snapshot.flavors)
        elif decision is not None:
            if job.pods_by:
                named.update((job.namespace, label, value) for label, value in job.pods_by)
            else:
                gone.add(job.uid)
            jobs.append(
                replace(restored(suspended_from(job)), phase=JobPhase.PENDING, admitted_at=None)
            )
            if decision.action == "requeue":
                jobs[-1] = replace(
                    jobs[-1],
                    requeues=decision.requeues,
                    requeued_at=now,
                    requeue_reason=decision.reason,
                )
        else:
            jobs.append(job)
    pods = snapshot.pods
    if pods is not None and (gone or named or lowered):
        beyond = {id(p) for view in lowered for p in pods_beyond(view, pods)}
        pods = [
            p
            for p in pods
            if p.finished
            or (
                (not p.job_uid or p.job_uid not in gone)
                and not any((p.namespace, k, v) in named for k, v in p.named_by)
                and id(p) not in beyond
            )
        ]
    return replace(snapshot, workloads=tuple(jobs), now=now, pods=pods)
