"""The fast pass: a cycle's decisions, from only the waiting jobs that may be decided.

A full cycle orders, places or explains every stored job. The decisions do not need that:
waiting jobs of one queue that are alike (same priority class, preemption policy, request,
pod sets and Topology request) are decided alike, in their order. Once the first of them is
not admitted, none after it is (room and quota only shrink while a pass admits; reclaim and
preempt pass over a job as hard as one that found no victims), so only the first few of each
kind are listed, and the request of the others is summed per queue: proportion counts what
a queue asks for, listed or not (``Snapshot.unlisted``). When every listed job of a kind is
admitted, the next ones might be too: the pass runs again with more of that kind listed,
until no kind is used up.

Listed always: admitted jobs (what the queues hold and what may be a victim), requeued jobs
(whether they still back off depends on the time), every waiting job of a queue with a
namespaceSelector (whether it is taken depends on its namespace), and every job when the
usage plugin orders jobs by their namespace's usage.

The kinds are kept across passes, by the identity of each job's view: a pass looks once at
each stored job (is it the view seen last time?), then works on the kinds and the admitted
jobs, never on a sort of every waiting job. The decisions are those the full cycle
(``cycle.run_cycle``) would take on the same snapshot: tests/unit/scheduler/test_fast_path.py
checks it on random sequences of events.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from sluice.api.queue import QueueUsage
from sluice.api.views import JobPhase, WorkloadView
from sluice.scheduler.cycle import decide, decide_sampling
from sluice.scheduler.model import Decision, Snapshot

FIRST = 1
"""Jobs of a kind listed at first."""
WHOLE = 4
"""A kind of at most this many waiting jobs is listed whole: running the pass again because
its first was admitted would cost more than listing the others."""
WIDER = 8
"""How many times more of a used-up kind the next run lists."""

Kind = tuple[object, ...]


@dataclass(slots=True)
class _Alike:
    """The waiting jobs of one kind, in job order (they share their priority)."""

    queue: str
    waiting: list[tuple[datetime, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class FastResult:
    decisions: tuple[Decision, ...]
    listed: int
    """Jobs listed in the pass's last run."""
    runs: int
    """Runs of the decisions: 1, plus one for each time a kind was used up."""
    usage: Mapping[str, QueueUsage] = field(default_factory=dict)
    """Each queue's usage as the pass sampled it (the usage plugin; else empty)."""


class FastPath:
    """The waiting jobs by kind, kept from one pass to the next."""

    def __init__(self, first: int = FIRST, whole: int = WHOLE) -> None:
        self.first = first
        self.whole = whole
        self.views: dict[str, WorkloadView] = {}
        self.filed: dict[int, WorkloadView] = {}
        """The views filed, by identity: what ``observe`` compares the stored jobs with."""
        self.kind_of: dict[str, Kind] = {}
        self.kinds: dict[Kind, _Alike] = {}
        self.always: dict[str, WorkloadView] = {}

    def decide(self, snapshot: Snapshot) -> FastResult:
        """The decisions the full cycle would take on the snapshot."""
        self.observe(snapshot.workloads)
        if snapshot.config.usage is not None:
            decisions, usage = decide_sampling(snapshot)
            return FastResult(decisions, len(snapshot.workloads), 1, usage)
        selective = {q.name for q in snapshot.queues if q.spec.namespace_selector is not None}
        widths: dict[Kind, int] = {}
        runs = 0
        while True:
            runs += 1
            listed, unlisted, shown = self._listing(selective, widths)
            decisions = decide(replace(snapshot, workloads=listed, unlisted=unlisted))
            admitted = {d.job for d in decisions if d.action == "admit"}
            used_up = [kind for kind, keys in shown.items() if admitted.issuperset(keys)]
            if not used_up:
                return FastResult(decisions, len(listed), runs)
            for kind in used_up:
                widths[kind] = len(shown[kind]) * WIDER

    # Keeping the kinds -----------------------------------------------------------------------
    def observe(self, workloads: Sequence[WorkloadView]) -> None:
        """Take in the stored jobs: those whose view is new, changed or gone since the last
        pass are filed again. Views are immutable and this pass holds each one it filed, so
        a view filed before is known by its identity alone: the stored jobs are compared as
        a set of identities, and only the few that differ are looked at one by one."""
        seen = set(map(id, workloads))
        filed = self.filed
        if seen == filed.keys():
            return
        gone = [filed[i] for i in filed.keys() - seen]
        for view in gone:
            del filed[id(view)]
            if self.views.get(view.key) is view:
                del self.views[view.key]
            self._forget(view)
        new = seen - filed.keys()
        for view in workloads:
            if id(view) in new:
                before = self.views.get(view.key)
                if before is not None:  # a job listed twice under one key: the later counts
                    del filed[id(before)]
                    self._forget(before)
                filed[id(view)] = view
                self._file(view)

    def _file(self, view: WorkloadView) -> None:
        self.views[view.key] = view
        if view.phase is JobPhase.COMPLETED:
            return
        if view.phase.admitted or view.requeued_at is not None:
            self.always[view.key] = view
            return
        kind = (
            view.queue,
            view.priority_class_name,
            view.never_preempts,
            view.request,
            view.pod_sets,
            view.topology,
        )
        alike = self.kinds.get(kind)
        if alike is None:
            alike = self.kinds[kind] = _Alike(view.queue)
        insort(alike.waiting, (view.creation_timestamp, view.key))
        self.kind_of[view.key] = kind

    def _forget(self, view: WorkloadView) -> None:
        key = view.key
        if self.always.pop(key, None) is not None:
            return
        kind = self.kind_of.pop(key, None)
        if kind is None:
            return
        alike = self.kinds[kind]
        del alike.waiting[bisect_left(alike.waiting, (view.creation_timestamp, key))]
        if not alike.waiting:
            del self.kinds[kind]

    def _listing(
        self, selective: set[str], widths: Mapping[Kind, int]
    ) -> tuple[list[WorkloadView], dict[str, dict[str, int]], dict[Kind, list[str]]]:
        """The jobs a run lists; the summed request of those it leaves out, by queue; and,
        for each kind with jobs left out, the keys of those listed."""
        views = self.views
        listed = list(self.always.values())
        unlisted: dict[str, dict[str, int]] = {}
        shown: dict[Kind, list[str]] = {}
        for kind, alike in self.kinds.items():
            width = widths.get(kind, self.first)
            if alike.queue in selective or len(alike.waiting) <= self.whole:
                width = len(alike.waiting)
            keys = [key for _, key in alike.waiting[:width]]
            listed += [views[key] for key in keys]
            left = len(alike.waiting) - len(keys)
            if left > 0:
                shown[kind] = keys
                summed = unlisted.setdefault(alike.queue, {})
                for r, a in views[keys[0]].request.amounts.items():
                    summed[r] = summed.get(r, 0) + a * left
        return listed, unlisted, shown
