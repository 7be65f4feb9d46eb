"""The decision pass: a cycle's decisions, from only the waiting jobs that may be decided.

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
namespaceSelector (whether it is taken depends on its namespace) or with flavors (each
flavor's deserved rests on which flavors its waiting pod sets may be given), and every job
when the usage plugin orders jobs by their namespace's usage.

A kind that no pass can admit while the nodes and the queues' specs stay as they are is not
listed at all (``_stuck``): its pods fit on no node even were the node empty, or it asks
more than the cluster's whole room, or more than the capability of its queue or of an
ancestor. No victim can help it either (victims give back at most what they hold, within
the nodes and within the queues). Its request is summed per queue once, as it is filed and
forgotten, and every such kind is looked at again only when the nodes or the queues' specs
change. A fifo queue's kinds are always listed: its first job holds the others back.

The kinds are kept across passes, by the identity of each job's view: a pass looks once at
each stored job (is it the view seen last time?), then works on the kinds that may be
admitted and the admitted jobs, never on a sort of every waiting job. The decisions are
those the full cycle (``cycle.run_cycle``) would take on the same snapshot:
tests/unit/scheduler/test_decision_pass.py checks it on random sequences of events.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TypeVar

from sluice.api.constants import ROOT_QUEUE
from sluice.api.constraints import PodSpecView
from sluice.api.queue import Queue, QueueUsage
from sluice.api.resources import Resources
from sluice.api.topology import TopologyRequest
from sluice.api.views import JobPhase, NodeView, PodSet, WorkloadView
from sluice.queues.flavors import flavor_list
from sluice.queues.tree import QueueTree
from sluice.scheduler.cycle import Decided, decide
from sluice.scheduler.kept import Kept, as_is, name_and_spec, same_list
from sluice.scheduler.model import Decision, QueueResult, Snapshot
from sluice.scheduler.partial import smallest_request

FIRST = 1
"""Jobs of a kind listed at first."""
WHOLE = 4
"""A kind of at most this many waiting jobs is listed whole: running the pass again because
its first was admitted would cost more than listing the others."""
WIDER = 8
"""How many times more of a used-up kind the next run lists."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Kind:
    """What makes waiting jobs alike: jobs of one kind are decided alike, in their order."""

    queue: str
    priority_class_name: str | None
    never_preempts: bool
    request: Resources
    pod_sets: tuple[PodSet, ...]
    topology: TopologyRequest | None

    @classmethod
    def of(cls, view: WorkloadView) -> Kind:
        return cls(
            view.queue,
            view.priority_class_name,
            view.never_preempts,
            view.request,
            view.pod_sets,
            view.topology,
        )


@dataclass(slots=True)
class _Alike:
    """The waiting jobs of one kind, in job order (they share their priority)."""

    queue: str
    request: Mapping[str, int]
    waiting: list[tuple[datetime, str]] = field(default_factory=list)
    stuck: bool = False
    """No pass admits any of them while the frame stays as it is (``DecisionPass._stuck``)."""


@dataclass(frozen=True, slots=True)
class DecisionResult:
    decisions: tuple[Decision, ...]
    listed: int
    """Jobs listed in the pass's last run."""
    runs: int
    """Runs of the decisions: 1, plus one for each time a kind was used up."""
    usage: Mapping[str, QueueUsage] = field(default_factory=dict)
    """Each queue's usage as the pass sampled it (the usage plugin; else empty)."""
    decided: Decided | None = None
    """The run the decisions come from, which the queues' statuses are worked out from."""

    def queues(self) -> dict[str, QueueResult]:
        """Every queue's status after the decisions, as the full cycle shows it (the jobs
        left out count in their queue's pending and completed). Worked out when asked: the
        decision pass asks once its decisions are written, so they never wait for it."""
        return {} if self.decided is None else self.decided.queues()


class DecisionPass:
    """The waiting jobs by kind, kept from one pass to the next."""

    def __init__(self, first: int = FIRST, whole: int = WHOLE) -> None:
        self.first = first
        self.whole = whole
        self.views: dict[str, WorkloadView] = {}
        self.filed: dict[int, WorkloadView] = {}
        """The views filed, by identity: what ``observe`` compares the stored jobs with."""
        self.kind_of: dict[str, Kind] = {}
        self.kinds: dict[Kind, _Alike] = {}
        self.live: dict[Kind, _Alike] = {}
        """The kinds that are not stuck: those a pass lists."""
        self.stuck_request: dict[str, dict[str, int]] = {}
        """Leaf queue -> the summed request of its waiting jobs of stuck kinds."""
        self.stuck_jobs: dict[str, int] = {}
        """Leaf queue -> how many waiting jobs of stuck kinds it has."""
        self.finished: dict[str, int] = {}
        """Leaf queue -> how many of its stored jobs are finished (never listed)."""
        self.always: dict[str, WorkloadView] = {}
        self.kept = Kept()
        """What each run's session leaves for the next (sluice/scheduler/kept.py)."""
        self.frame = _Frame((), (), self.kept)

    def decide(
        self, snapshot: Snapshot, changed: Mapping[str, WorkloadView | None] | None = None
    ) -> DecisionResult:
        """The decisions the full cycle would take on the snapshot.

        ``changed``: when given, the snapshot's workloads are not looked at: the workloads
        are those of the last pass, with these put in by key (None: gone), every workload
        whose view changed since among them (the operator's change log)."""
        self._reframe(snapshot)
        if changed is None:
            self.observe(snapshot.workloads)
        else:
            self.change(changed)
        if snapshot.config.usage is not None:
            # Usage orders the jobs of a queue by namespace: every one is listed.
            every = snapshot.workloads if changed is None else tuple(self.views.values())
            whole = decide(replace(snapshot, workloads=every), self.kept)
            return DecisionResult(whole.decisions, len(every), 1, whole.usage(), whole)
        selective = self.frame.selective
        widths: dict[Kind, int] = {}
        runs = 0
        while True:
            runs += 1
            listed, unlisted, left_out, shown = self._listing(selective, widths)
            decided = decide(
                replace(
                    snapshot,
                    workloads=listed,
                    unlisted=unlisted,
                    unlisted_jobs=left_out,
                    unlisted_finished=self.finished,
                ),
                self.kept,
            )
            admitted = {d.job for d in decided.decisions if d.action == "admit"}
            used_up = [kind for kind, keys in shown.items() if admitted.issuperset(keys)]
            if not used_up:
                return DecisionResult(decided.decisions, len(listed), runs, decided=decided)
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

    def change(self, changed: Mapping[str, WorkloadView | None]) -> None:
        """Put in the workloads whose view changed, by key (None: gone)."""
        views, filed = self.views, self.filed
        for key, view in changed.items():
            before = views.get(key)
            if before is view:
                continue
            if before is not None:
                del filed[id(before)]
                del views[key]
                self._forget(before)
            if view is not None:
                filed[id(view)] = view
                self._file(view)

    def _file(self, view: WorkloadView) -> None:
        self.views[view.key] = view
        if view.phase is JobPhase.COMPLETED:
            self.finished[view.queue] = self.finished.get(view.queue, 0) + 1
            return
        if view.phase.admitted or view.requeued_at is not None:
            self.always[view.key] = view
            return
        kind = Kind.of(view)
        alike = self.kinds.get(kind)
        if alike is None:
            alike = self.kinds[kind] = _Alike(view.queue, view.request.amounts)
            alike.stuck = self._stuck(kind)
            if not alike.stuck:
                self.live[kind] = alike
        insort(alike.waiting, (view.creation_timestamp, view.key))
        self.kind_of[view.key] = kind
        if alike.stuck:
            self._count_stuck(alike, 1)

    def _forget(self, view: WorkloadView) -> None:
        key = view.key
        if view.phase is JobPhase.COMPLETED:
            left = self.finished[view.queue] - 1
            if left:
                self.finished[view.queue] = left
            else:
                del self.finished[view.queue]
            return
        if self.always.pop(key, None) is not None:
            return
        kind = self.kind_of.pop(key, None)
        if kind is None:
            return
        alike = self.kinds[kind]
        del alike.waiting[bisect_left(alike.waiting, (view.creation_timestamp, key))]
        if alike.stuck:
            self._count_stuck(alike, -1)
        if not alike.waiting:
            del self.kinds[kind]
            self.live.pop(kind, None)

    def _count_stuck(self, alike: _Alike, times: int) -> None:
        """Add (or take away) ``times`` jobs of a stuck kind to its queue's summed request."""
        summed = self.stuck_request.setdefault(alike.queue, {})
        for r, a in alike.request.items():
            left = summed.get(r, 0) + a * times
            if left:
                summed[r] = left
            else:
                del summed[r]
        if not summed:
            del self.stuck_request[alike.queue]
        jobs = self.stuck_jobs.get(alike.queue, 0) + times
        if jobs:
            self.stuck_jobs[alike.queue] = jobs
        else:
            del self.stuck_jobs[alike.queue]

    # Kinds no pass can admit -----------------------------------------------------------------
    def _reframe(self, snapshot: Snapshot) -> None:
        """Take in the nodes and the queues' specs; when they changed, every kind is asked
        again whether it is stuck."""
        frame = self.frame
        if same_list(snapshot.nodes, frame.nodes, as_is) and same_list(
            snapshot.queues, frame.queues, name_and_spec
        ):
            return
        self.frame = _Frame(tuple(snapshot.nodes), tuple(snapshot.queues), self.kept)
        for kind, alike in self.kinds.items():
            stuck = self._stuck(kind)
            if stuck == alike.stuck:
                continue
            if alike.stuck:
                self._count_stuck(alike, -len(alike.waiting))
                self.live[kind] = alike
            else:
                del self.live[kind]
            alike.stuck = stuck
            if stuck:
                self._count_stuck(alike, len(alike.waiting))

    def _stuck(self, kind: Kind) -> bool:
        """Whether no job of the kind can be admitted, whatever else is admitted or evicted,
        while the frame stays as it is: it asks more of a resource than the usable nodes
        hold together, or than a capability on its queue's path allows, or one of its pods
        fits on no node that may take it, even empty; at its minimum size when it may be
        admitted smaller. Never in a fifo queue, nor in one whose workloads are given flavors."""
        frame = self.frame
        queue = kind.queue
        specs = frame.specs
        spec = specs.get(queue)
        if spec is None or spec.dequeue_strategy == "fifo" or queue in frame.flavored:
            return False
        amounts = smallest_request(kind.request, kind.pod_sets).amounts  # admitted smaller
        total = frame.placement.total
        if any(a > total.get(r, 0) for r, a in amounts.items()):
            return True
        if any(s.pod_count > 0 and not frame.holds(s.pod) for s in kind.pod_sets):
            return True
        name: str | None = queue
        seen: set[str] = set()
        while name is not None and name != ROOT_QUEUE and name not in seen:
            seen.add(name)
            spec = specs.get(name)
            if spec is None:
                break
            cap = spec.capability
            if any(r in cap and a > cap[r] for r, a in amounts.items()):
                return True
            name = spec.parent_name(name)
        return False

    def _listing(
        self, selective: set[str], widths: Mapping[Kind, int]
    ) -> tuple[
        list[WorkloadView], dict[str, dict[str, int]], dict[str, int], dict[Kind, list[str]]
    ]:
        """The jobs a run lists; the summed request of those it leaves out, and how many they
        are, by queue; and, for each kind with jobs left out, the keys of those listed."""
        views = self.views
        listed = list(self.always.values())
        unlisted: dict[str, dict[str, int]] = dict(self.stuck_request)
        left_out: dict[str, int] = dict(self.stuck_jobs)
        copied: set[str] = set()  # queues whose sum here is this run's own copy
        shown: dict[Kind, list[str]] = {}
        for kind, alike in self.live.items():
            width = widths.get(kind, self.first)
            if alike.queue in selective or len(alike.waiting) <= self.whole:
                width = len(alike.waiting)
            keys = [key for _, key in alike.waiting[:width]]
            listed += [views[key] for key in keys]
            left = len(alike.waiting) - len(keys)
            if left > 0:
                shown[kind] = keys
                left_out[alike.queue] = left_out.get(alike.queue, 0) + left
                if alike.queue not in copied:
                    copied.add(alike.queue)
                    unlisted[alike.queue] = dict(unlisted.get(alike.queue, {}))
                summed = unlisted[alike.queue]
                for r, a in alike.request.items():
                    summed[r] = summed.get(r, 0) + a * left
        return listed, unlisted, left_out, shown


class _Frame:
    """What whether a kind is stuck rests on: the nodes, and the queues' specs (and which
    queues have a namespaceSelector)."""

    def __init__(self, nodes: tuple[NodeView, ...], queues: tuple[Queue, ...], kept: Kept) -> None:
        self.nodes = nodes
        self.queues = queues
        self.specs = {q.name: q.spec for q in queues}
        self.selective = {q.name for q in queues if q.spec.namespace_selector is not None}
        """The queues with a namespaceSelector, or flavors: their waiting jobs are all listed."""
        self.flavored: set[str] = set()
        """The queues whose workloads are given flavors: their waiting jobs are all listed
        and never stuck, as each flavor's deserved is split by what the waiting pod sets that
        may be given it ask, which a sum per queue does not say."""
        if any(q.spec.flavors for q in queues):
            tree = QueueTree({q.name: q for q in queues})
            self.flavored = {name for name in tree.queues if flavor_list(tree, name)}
            self.selective |= self.flavored
        self.placement = kept.placement_for(nodes)
        self._holds: dict[PodSpecView, bool] = {}

    def holds(self, pod: PodSpecView) -> bool:
        """Whether some node may take the pod and could hold one, empty."""
        found = self._holds.get(pod)
        if found is None:
            placement = self.placement
            found = self._holds[pod] = any(
                placement.could_hold(pod, i) for i in placement.eligible(pod)
            )
        return found
