"""enqueue / allocate: admit whole jobs while every limit on their path holds.

Queues are served one job at a time, always the best queue by the current order (shares
change with every admission, so two equal teams take turns instead of one taking all). The
choice walks the tree from the root through one heap of children per parent, so each pick
costs the depth of the tree times a log, not the number of queues.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from sluice.api.constants import ROOT_QUEUE
from sluice.scheduler.actions.outcome import Outcome
from sluice.scheduler.actions.shrink import admit_smaller
from sluice.scheduler.fit import (
    cluster_failure,
    over_capability_failure,
    place_where,
    queue_failure,
)
from sluice.scheduler.flavor_choice import choose_flavors
from sluice.scheduler.order import QueueKey, global_job_key, leaf_order, queue_key_function
from sluice.scheduler.records import JobInfo
from sluice.scheduler.session import Session


def admissible_leaves(session: Session, outcome: Outcome) -> list[str]:
    """Leaves whose pending jobs may be admitted; others get their reason here."""
    leaves: list[str] = []
    for key, refusal in session.refusals.items():
        outcome.reasons[key] = refusal
    for name, info in session.queues.items():
        if not info.pending_jobs:
            continue
        if info.blocked_by:
            for job in info.pending_jobs:
                outcome.reasons[job.key] = f"queue {name} is not valid: {info.blocked_by}"
            continue
        if info.children:
            for job in info.pending_jobs:
                outcome.reasons[job.key] = (
                    f"queue {name} has child queues; jobs run only in leaf queues"
                )
            continue
        if name == ROOT_QUEUE:
            for job in info.pending_jobs:
                outcome.reasons[job.key] = "jobs cannot run in queue root"
            continue
        leaves.append(name)
    for job in session.orphans:
        if not job.admitted:
            outcome.reasons[job.key] = f"queue {job.queue} does not exist"
    return leaves


def try_admit(session: Session, outcome: Outcome, job: JobInfo, action: str) -> bool:
    if job.evicted:  # a growth entry whose workload was suspended this cycle
        return False
    # A job alike to one that did not fit in the same queue, with nothing admitted or
    # evicted since, does not fit for the same reason: thousands waiting alike cost one look.
    view = job.view
    alike = (job.queue, view.request, view.pod_sets, view.topology)
    known = session.failed.get(alike)
    if known is not None and known[0] == session.placement.version:
        failure = known[1]
    else:
        failure = (
            over_capability_failure(session, job)
            or queue_failure(session, job)
            or cluster_failure(session, job)
        )
        if failure is None:
            admitted, failure = _place(session, outcome, job, action)
            if admitted:
                return True
        if admit_smaller(session, outcome, job, action, quota_passed=failure is None):
            return True
        session.failed[alike] = (session.placement.version, failure)
    if failure is None:
        outcome.unplaceable(job)
    else:
        outcome.reasons[job.key] = failure
    return False


def _place(
    session: Session, outcome: Outcome, job: JobInfo, action: str
) -> tuple[bool, str | None]:
    """Admit the job if its pods place on the nodes: (True, None). Else (False, None): it is
    told why once the cycle is over, on the room it leaves (``Outcome.reason``). A queue
    with flavors gives each pod set one first and places its pods as they will be in it;
    every other queue admits as in a cluster without flavors."""
    chosen = None
    if session.queues[job.queue].flavor_list:
        picked = choose_flavors(session, job, explain=False)
        if isinstance(picked, str) or picked.waits:
            return False, None  # told why once the cycle is over (flavor_reason)
        chosen = picked
    placing = job if chosen is None else chosen.job(job)
    placed = place_where(session, placing)
    if placed is None:
        return False, None
    footprint, domain = placed
    reason = f"{action}: fits in queue {job.queue}"
    if chosen is not None:
        reason += f", in {chosen.text}"
    if domain is not None:
        reason += f", in {domain.text}"
    outcome.admit(session, job, reason, footprint, domain, chosen)
    return True, None


def admit(session: Session, outcome: Outcome, action: str) -> None:
    leaves = admissible_leaves(session, outcome)
    if session.config.arguments(action).job_order == "global" or (
        action in ("enqueue", "allocate")
        and session.config.arguments("enqueue").job_order == "global"
    ):
        _admit_global(session, outcome, action, leaves)
    else:
        _admit_by_queue(session, outcome, action, leaves)
    for info in session.queues.values():
        info.pending_jobs = [j for j in info.pending_jobs if not j.admitted]
    outcome.changed = False


def _admit_global(session: Session, outcome: Outcome, action: str, leaves: list[str]) -> None:
    rank = {name: i for i, name in enumerate(leaf_order(session, leaves))}
    jobs = [j for name in leaves for j in session.queues[name].pending_jobs if not j.admitted]
    blocked: dict[str, str] = {}  # fifo queue -> the job it waits behind
    for job in sorted(jobs, key=global_job_key(rank)):
        info = session.queues[job.queue]
        if job.queue in blocked:
            outcome.reasons[job.key] = _behind(job.queue, blocked[job.queue])
            continue
        if not try_admit(session, outcome, job, action) and (
            info.queue.spec.dequeue_strategy == "fifo"
        ):
            blocked[job.queue] = job.key


def _behind(queue: str, first: str) -> str:
    return f"waiting behind {first}, the first job of fifo queue {queue}"


class _Picker:
    """Best leaf by the hierarchical queue order, with lazily refreshed per-parent heaps."""

    def __init__(self, session: Session, leaves: list[str], key: Callable[[str], QueueKey]):
        self.session = session
        self.key = key
        self.version: dict[str, int] = {}
        self.active: set[str] = set()
        self.heaps: dict[str, list[tuple[QueueKey, int, str]]] = {}
        for leaf in leaves:
            for name in session.chain(leaf):
                if name in self.active:
                    break
                self.active.add(name)
                parent = session.queues[name].parent
                if parent is not None:
                    self.version[name] = 0
                    self.heaps.setdefault(parent, []).append((key(name), 0, name))
        for heap in self.heaps.values():
            heapq.heapify(heap)

    def pick(self) -> str | None:
        node = ROOT_QUEUE
        while True:
            heap = self.heaps.get(node, [])
            while heap and (
                heap[0][2] not in self.active or heap[0][1] != self.version[heap[0][2]]
            ):
                heapq.heappop(heap)
            if not heap:
                if node == ROOT_QUEUE:
                    return None
                self.active.discard(node)
                node = ROOT_QUEUE
                continue
            child = heap[0][2]
            if not self.session.queues[child].children:
                return child
            node = child

    def refresh(self, leaf: str) -> None:
        """The leaf's allocation changed: re-key it and its ancestors among their siblings."""
        for name in self.session.chain(leaf):
            parent = self.session.queues[name].parent
            if parent is None:
                break
            self.version[name] += 1
            heapq.heappush(self.heaps[parent], (self.key(name), self.version[name], name))

    def retire(self, leaf: str) -> None:
        self.active.discard(leaf)


def _admit_by_queue(session: Session, outcome: Outcome, action: str, leaves: list[str]) -> None:
    picker = _Picker(session, leaves, queue_key_function(session))
    cursor = {name: 0 for name in leaves}
    while (leaf := picker.pick()) is not None:
        info = session.queues[leaf]
        jobs = info.pending_jobs
        fifo = info.queue.spec.dequeue_strategy == "fifo"
        i = cursor[leaf]
        # A job that does not fit changes nothing, so the pick would be this leaf again:
        # its next job is tried at once, until one is admitted or none is left.
        while True:
            while i < len(jobs) and jobs[i].admitted:
                i += 1
            if i >= len(jobs):
                picker.retire(leaf)
                break
            job = jobs[i]
            i += 1
            if try_admit(session, outcome, job, action):
                picker.refresh(leaf)
                break
            if fifo:
                for later in jobs[i:]:
                    if not later.admitted:
                        outcome.reasons[later.key] = _behind(leaf, job.key)
                picker.retire(leaf)
                break
        cursor[leaf] = i
