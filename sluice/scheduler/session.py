"""A Session: one snapshot turned into the working state of one cycle.

It holds the tree, every queue's derived numbers (realCapability, deserved), the mutable
allocations the actions change as they admit and evict, and the per-queue job lists sorted
once. Allocations are plain dicts of milli-units because actions update them thousands of
times a cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from operator import is_
from typing import TYPE_CHECKING

from sluice.api.config import SchedulerConfig, UsageSettings
from sluice.api.constants import ROOT_QUEUE
from sluice.api.constraints import PodSpecView
from sluice.api.queue import Queue
from sluice.api.resources import EMPTY, Resources
from sluice.api.views import JobPhase, PodView, WorkloadView
from sluice.queues.jobs import namespace_refusal
from sluice.queues.limits import child_real_capability, over_capability
from sluice.queues.rules import tree_violations
from sluice.queues.tree import QueueTree
from sluice.scheduler import usage as usage_rule
from sluice.scheduler.flavor_counts import count_flavors, has_flavors
from sluice.scheduler.flavor_quota import FlavorAmounts, add_in
from sluice.scheduler.growth import growth_key, split_all
from sluice.scheduler.holding import holding, owner_of, take_room
from sluice.scheduler.kept import Kept, PodsTaken, SpecMemo, name_and_spec, same_list
from sluice.scheduler.model import Snapshot
from sluice.scheduler.placement import Footprint, Placement, add_room
from sluice.scheduler.plugins import deserved as deserved_plugins
from sluice.scheduler.readiness import backing_off
from sluice.scheduler.records import NOWHERE, JobInfo, Priorities, QueueInfo, Usage
from sluice.scheduler.topology import Domains

if TYPE_CHECKING:
    from sluice.scheduler.flavor_choice import Chosen


def queue_tree(
    queues: Iterable[Queue], max_queue_depth: int, memo: SpecMemo
) -> tuple[QueueTree, dict[str, str]]:
    """The queue tree (root added when missing) and its violations (``tree_violations``).

    Both follow from the queues' specs alone, which change far less often than cycles run
    (the decision passes run on every change; a queue's status is written after nearly every
    full pass): the last tree is kept, and used again while the queues are the same (most
    often the very same views, compared by identity first); while only what is outside their
    specs changed, the tree is the same walk over the new views, and the violations the very
    same dict. So what follows from the specs alone may be kept while the violations are
    the same object (``Session._derive``'s realCapability, the kept queue records). The
    last tree is the ``memo``'s: each pass has its own."""
    key = (tuple(queues), max_queue_depth)
    last = memo.tree
    if last is not None and last[0] == key:
        return last[1]
    named = {q.name: q for q in key[0]}
    if ROOT_QUEUE not in named:
        named[ROOT_QUEUE] = Queue(name=ROOT_QUEUE)
    if (
        last is not None
        and last[0][1] == max_queue_depth
        and same_list(key[0], last[0][0], name_and_spec)
    ):
        built = (last[1][0].over(named), last[1][1])
    else:
        tree = QueueTree(named)
        built = (tree, tree_violations(tree, max_queue_depth))
    memo.tree = (key, built)
    return built


class Session:
    def __init__(
        self, snapshot: Snapshot, kept: Kept | None = None, specs: SpecMemo | None = None
    ) -> None:
        """``kept``: what the last session on this cluster worked out, taken where its
        inputs are the same and left there for the next (sluice/scheduler/kept.py).
        ``specs``: what follows from the queues' specs, kept by a pass that keeps nothing
        else (the full cycle); ``kept``'s own when that is given, else none."""
        if specs is None:
            specs = kept.specs if kept is not None else SpecMemo()
        self.snapshot = snapshot
        self.kept = kept
        nodes = snapshot.nodes
        self.placement = Placement(nodes) if kept is None else kept.placement_for(nodes)
        self.domains = Domains(snapshot.topologies, self.placement)
        if kept is not None and kept.total_of is kept.placement:
            self.total = kept.total
        else:
            self.total = Resources(self.placement.total)
            if kept is not None:
                kept.total, kept.total_of = self.total, kept.placement
        self.tree, self.violations = queue_tree(snapshot.queues, snapshot.max_queue_depth, specs)
        self.priorities = Priorities.of(snapshot.priority_classes)
        self.used: dict[str, int] = {}
        self.queues: dict[str, QueueInfo] = {}
        self.orphans: list[JobInfo] = []  # jobs whose queue is missing
        self.refusals: dict[str, str] = {}  # job -> why it is not considered this cycle
        self.failed: dict[tuple[object, ...], tuple[int, str | None]] = {}
        """What a job alike (queue, request, pod sets) was last found not to fit on: the
        placement's version then (every admission holds room and every eviction gives it
        back, so it changes with all a job's fit depends on besides the job), and its reason
        (None: its pods could not be placed)."""
        self.flavor_views = {f.name: f for f in snapshot.flavors}
        """The Flavors by name (a cluster has a handful)."""
        self.chosen: dict[tuple[object, ...], tuple[int, Chosen | str]] = {}
        """The flavors last chosen for jobs alike (queue, request, pod sets, topology) on the
        room and quota the session has, and the placement's version then: what they depend
        on changes only as room is held or given back (``flavor_choice.choose_flavors``)."""
        self._build_queues()
        self.admitted_at_start: list[JobInfo] = []
        workloads, self.grows = split_all(snapshot.workloads, snapshot.pods, snapshot.now)
        """Each growth entry's key -> the workload it grows, held (sluice/scheduler/growth.py)."""
        self.growth: dict[str, JobInfo] = {}
        """Each growth entry placed, by its key."""
        self._place_jobs(workloads)
        self._account_pods(snapshot.pods or ())
        self._allocate()
        self.usage = Usage()
        if self.usage_settings is not None:
            self._sample_usage()
        self._derive(specs)
        if has_flavors(self.queues.values()):
            count_flavors(self)

    @property
    def config(self) -> SchedulerConfig:
        return self.snapshot.config

    @property
    def now(self) -> datetime:
        return self.snapshot.now

    @property
    def elastic(self) -> bool:
        """False: no queue may exceed its deserved."""
        return self.snapshot.config.elastic

    @property
    def usage_settings(self) -> UsageSettings | None:
        """The usage plugin's settings; None when it is off."""
        return self.snapshot.config.usage

    # Construction ------------------------------------------------------------------------
    def _queue_priority(self, queue: Queue) -> int:
        if queue.spec.priority is not None:
            return queue.spec.priority
        if queue.spec.priority_class_name:
            return self.priorities.values.get(queue.spec.priority_class_name, 0)
        return 0

    def _build_queues(self) -> None:
        kept = self.kept
        if kept is None:
            self._build_queue_infos()
            return
        classes = tuple(self.snapshot.priority_classes)
        made_of = kept.queues_from
        if made_of is not None and made_of[0] is self.violations and made_of[1] == classes:
            # The same specs (queue_tree): the records hold, each over its queue's view now.
            views = self.tree.queues
            for info in kept.order:
                info.clear()
                info.queue = views[info.name]
            self.queues = kept.queues
            return
        self._build_queue_infos()
        kept.queues_from, kept.queues = (self.violations, classes), self.queues
        kept.order = list(self.queues.values())  # built by (depth, name)
        kept.deepest_first = sorted(kept.order, key=lambda q: -q.depth)
        kept.forget_all_but(self.queues.keys())

    def _build_queue_infos(self) -> None:
        tree, violations = self.tree, self.violations
        for name in sorted(tree.queues, key=lambda n: (tree.depth(n), n)):
            queue = tree.queues[name]
            parent = tree.parent(name)
            ancestors = tree.ancestors(name)
            if parent not in tree.queues or not ancestors or ancestors[-1] != ROOT_QUEUE:
                # A missing parent or a cycle: the queue is cut loose from the tree (it is
                # invalid and admits nothing), so no walk up from it can go round forever.
                parent = None
            info = QueueInfo(
                name=name,
                queue=queue,
                parent=parent,
                children=tree.children(name),
                depth=tree.depth(name),
                priority=self._queue_priority(queue),
                weight=queue.spec.weight,
                guarantee=queue.spec.guarantee.resource,
                capability=queue.spec.capability,
                invalid_reason=violations.get(name, ""),
            )
            spec = queue.spec
            if spec.priority is not None:
                info.passed_on = spec.priority
            elif spec.priority_class_name:
                # A class that does not exist passes nothing on: the global default applies.
                info.passed_on = self.priorities.values.get(spec.priority_class_name)
            if info.invalid_reason:
                info.blocked_by = info.invalid_reason
            elif info.parent is not None and self.queues[info.parent].blocked_by:
                info.blocked_by = self.queues[info.parent].blocked_by
            self.queues[name] = info

    def job_priority(self, job: WorkloadView) -> int:
        if job.priority_class_name:
            value = self.priorities.values.get(job.priority_class_name)
            if value is not None:
                return value
        info = self.queues.get(job.queue)
        if info is not None and info.passed_on is not None:
            return info.passed_on
        return self.priorities.default

    def never_preempts(self, job: WorkloadView) -> bool:
        """``preemptionPolicy: Never`` in the pod template, or in the PriorityClass its pods
        get: the template's, else the queue's (the webhook copies it into the template), else
        the global default."""
        if job.never_preempts:
            return True
        named = job.priority_class_name
        if named is None or named not in self.priorities.values:
            info = self.queues.get(job.queue)
            named = info.queue.spec.priority_class_name if info is not None else None
        if named is not None and named in self.priorities.values:
            return named in self.priorities.never
        return self.priorities.default_never

    def _place_jobs(self, jobs: Iterable[WorkloadView]) -> None:
        admitted_phases = (JobPhase.INQUEUE, JobPhase.RUNNING)
        labels = {ns.name: ns.labels for ns in self.snapshot.namespaces}
        for view in jobs:
            phase = view.phase
            admitted = phase in admitted_phases
            job = JobInfo(
                view=view,
                priority=self.job_priority(view),
                request=view.request.amounts,  # read-only: shared with the view
                admitted=admitted,
                admitted_at=view.admitted_at,
                finished=phase is JobPhase.COMPLETED,
                # Only a waiting job may take room; an admitted one is not asked this cycle.
                never_preempts=not admitted and self.never_preempts(view),
                key=view.key,
                queue=view.queue,
            )
            info = self.queues.get(view.queue)
            if admitted:
                job.held = job.request
                self.admitted_at_start.append(job)
            elif job.key in self.grows:
                self.growth[job.key] = job
            if info is None:
                if not job.finished:
                    self.orphans.append(job)
                continue
            if job.finished:
                info.completed += 1
            elif admitted:
                # A selector changed after admission leaves what runs alone. What it holds
                # is known once its pods are (_account_pods).
                info.admitted_jobs.append(job)
            elif refusal := (
                namespace_refusal(info.queue, view.namespace, labels.get(view.namespace, {}))
                or backing_off(view, self.now)
                or view.devices_unknown
                or self._devices_unknown(view)
            ):
                self.refusals[job.key] = refusal
                info.refused_jobs.append(job)
            else:
                info.pending_jobs.append(job)
        for info in self.queues.values():
            info.pending_jobs.sort(key=job_order_key)

    def _devices_unknown(self, view: WorkloadView) -> str | None:
        """Why the free devices of a resource the job asks are not known, if they are not."""
        unknown = self.snapshot.devices.unknown
        if not unknown:
            return None
        return next((unknown[r] for r in view.request if r in unknown), None)

    def _account_pods(self, pods: Sequence[PodView]) -> None:
        """Every unfinished pod bound to a node that holds room takes its request there; an
        admitted workload holds, per pod set, the larger of what it was admitted with and
        what its live pods of that set ask (docs/scheduler.md, *What a workload holds*), and
        what its pods not bound yet need is kept on the nodes they would go on (first fit,
        largest pods first). Other pods (unmanaged workloads, a suspended job's pods still
        terminating) also count against the cluster's free room. Queues are allocated what
        their admitted workloads hold."""
        placement = self.placement
        by_uid: dict[str, JobInfo] = {}
        by_label: dict[tuple[str, str, str], JobInfo] = {}
        for job in self.admitted_at_start:
            view = job.view
            if view.pods_by:
                for label, value in view.pods_by:
                    by_label[(view.namespace, label, value)] = job
            elif view.uid:
                by_uid[view.uid] = job
        used = self.used
        if self.kept is None:
            take_room(placement, pods, by_uid, by_label, used)
        else:
            self._take_kept_room(pods, by_uid, by_label)
        waiting: list[tuple[JobInfo, PodSpecView, int]] = []
        for job in self.admitted_at_start:
            job.held, leaving, missing = holding(job)
            add_room(used, job.held)
            add_room(used, leaving)
            waiting += missing
        waiting.sort(key=lambda entry: (-placement.size(entry[1]), entry[0].key))
        for job, shape, count in waiting:
            assignment = placement.place(shape, count, partial=True) or []
            kept = placement.footprint(shape, assignment)
            placement.hold(kept)
            for i, room in kept.items():
                add_room(job.footprint.setdefault(i, {}), room)

    def _take_kept_room(
        self,
        pods: Sequence[PodView],
        by_uid: Mapping[str, JobInfo],
        by_label: Mapping[tuple[str, str, str], JobInfo],
    ) -> None:
        """``holding.take_room`` from what the pods take as none of them is owned, kept while the
        pods and the nodes are the same (``Kept.pods_taken``): only the pods of this
        session's admitted workloads are looked at, to move what they take from the
        others' (``used``) to their workload's footprint. Pods not seen by the last session
        are taken as without anything kept (``Kept.pods_seen_again``)."""
        assert self.kept is not None
        placement, used = self.placement, self.used
        taken = self.kept.pods_taken
        if taken is None or not taken.holds(pods, self.kept.placement):
            self.kept.pods_taken = None
            if not self.kept.pods_seen_again(pods):
                take_room(placement, pods, by_uid, by_label, used)
                return
            empty = Placement(placement.nodes, like=placement)
            alone: dict[str, int] = {}
            take_room(empty, pods, {}, {}, alone)
            taken = self.kept.pods_taken = PodsTaken(pods, self.kept.placement, empty.free, alone)
        placement.start_from(taken.free)
        add_room(used, taken.used)
        usable = placement.usable
        for pod in taken.of(by_uid, by_label):
            owner = owner_of(pod, by_uid, by_label)
            if owner is None:
                continue
            owner.pods.append(pod)
            if pod.finished or not pod.node:
                continue
            i = usable.get(pod.node)
            if i is None:
                continue
            holder = owner.footprint.setdefault(i, {})
            for r, a in pod.request.items():
                used[r] -= a
                holder[r] = holder.get(r, 0) + a

    def _allocate(self) -> None:
        """Each queue is allocated what the admitted workloads of its subtree hold; a queue
        that holds more than its capability in a resource admits nothing more below it that
        asks for that resource (``over``)."""
        for info in self.queues.values():
            for job in info.admitted_jobs:
                add_room(info.allocated, job.held)
        for info in self._deepest_first():
            if info.parent is not None and info.allocated:
                add_room(self.queues[info.parent].allocated, info.allocated)
        for info in self.queues.values():
            over = over_capability(info.allocated, info.capability) if info.allocated else None
            if over:
                info.over_capability = over
                info.grown = self._grown_below(info.name, over)

    def _sample_usage(self) -> None:
        """Each queue's usage (and each namespace's in a leaf) carried to ``now``: the last
        sample decayed, plus what it holds now, held since (docs/scheduler.md)."""
        assert self.usage_settings is not None
        half_life = self.usage_settings.half_life.total_seconds()
        given = self.snapshot.usage
        for name, info in self.queues.items():
            before = usage_rule.previous(
                name, given, info.queue.status.usage, info.queue.creation_timestamp
            )
            seconds = usage_rule.elapsed(before, self.now)
            self.usage.queues[name] = usage_rule.advance(
                before.resources if before else {},
                usage_rule.units(info.allocated),
                seconds,
                half_life,
            )
            if info.children:
                continue
            held: dict[str, dict[str, int]] = {}
            for job in info.admitted_jobs:
                add_room(held.setdefault(job.view.namespace, {}), job.held)
            stored = dict(before.namespaces) if before else {}
            self.usage.namespaces[name] = {
                ns: amounts
                for ns in sorted(set(stored) | set(held))
                if (
                    amounts := usage_rule.advance(
                        stored.get(ns, {}), usage_rule.units(held.get(ns, {})), seconds, half_life
                    )
                )
            }
            if info.pending_jobs and self.usage.namespaces[name]:
                info.pending_jobs = usage_rule.job_order(
                    info.pending_jobs,
                    lambda job: job.view.namespace,
                    lambda job: job.request,
                    lambda job: job.priority,
                    self.usage.namespaces[name],
                    self.total.amounts,
                    self.usage_settings,
                )

    def usage_key(self, name: str) -> float:
        """The dominant weighted usage per unit of weight (lower goes first)."""
        if self.usage_settings is None:
            return 0.0
        info = self.queues[name]
        value, _ = usage_rule.dominant(
            self.usage.queues.get(name, {}), self.total.amounts, self.usage_settings
        )
        return value / max(info.weight, 1)

    def namespace_key(self, leaf: str, namespace: str) -> float:
        """A namespace's dominant weighted usage in a leaf (0 when the plugin is off)."""
        if self.usage_settings is None:
            return 0.0
        used = self.usage.namespaces.get(leaf, {}).get(namespace, {})
        return usage_rule.dominant(used, self.total.amounts, self.usage_settings)[0]

    def _grown_below(self, name: str, over: Mapping[str, object]) -> list[tuple[str, Resources]]:
        """The admitted workloads under a queue whose pods hold more than they were admitted
        with, in a resource the queue is over in: (workload, how much more), most first."""
        out: list[tuple[str, Resources]] = []
        for leaf in self.leaves_under(name):
            for job in self.queues[leaf].admitted_jobs:
                extra = {
                    r: a - job.request.get(r, 0)
                    for r, a in job.held.items()
                    if r in over and a > job.request.get(r, 0)
                }
                if extra:
                    out.append((job.key, Resources(extra)))
        out.sort(key=lambda one: (-max(one[1].amounts.values()), one[0]))
        return out

    def chain(self, name: str) -> list[str]:
        """The queue and its ancestors, nearest first (root last). Do not modify."""
        info = self.queues[name]
        out = info.chain
        if out is None:
            out = info.chain = [name]
            parent = info.parent
            while parent is not None:
                out.append(parent)
                parent = self.queues[parent].parent
        return out

    def leaves_under(self, name: str) -> list[str]:
        """Leaf queues in the subtree of ``name`` (itself when it is a leaf)."""
        return [n for n in (name, *self.tree.descendants(name)) if not self.queues[n].children]

    # Derived numbers ---------------------------------------------------------------------
    def _deepest_first(self) -> list[QueueInfo]:
        if self.kept is None:
            return sorted(self.queues.values(), key=lambda q: -q.depth)
        return self.kept.deepest_first

    def _derive(self, specs: SpecMemo) -> None:
        kept = self.kept
        order = (
            kept.order
            if kept is not None
            else sorted(self.queues.values(), key=lambda q: (q.depth, q.name))
        )
        last = specs.real
        if last is not None and last[0] is self.violations and last[1] == self.total:
            for info in order:
                info.real_capability = last[2][info.name]
        else:
            taken: dict[str, Resources] = {}
            for info in order:
                info.real_capability = self._real_capability(info, taken)
            real = {info.name: info.real_capability for info in order}
            specs.real = (self.violations, self.total, real)
        requests = kept.requests if kept is not None else None
        unlisted = self.snapshot.unlisted
        for info in reversed(order):  # bottom-up requests
            wanted: dict[str, int] = {}
            parts: tuple[object, ...]  # what the request is added up from
            if info.children:
                parts = tuple([self.queues[child].request for child in info.children])
            elif info.blocked_by or info.allocated or info.pending_jobs:
                add_room(wanted, info.allocated)
                if not info.blocked_by:
                    for job in info.pending_jobs:
                        add_room(wanted, job.request)
                    add_room(wanted, unlisted.get(info.name, {}))
                parts = tuple(wanted.items())
            else:  # its unlisted jobs' request alone (most leaves, on the decision pass)
                wanted = dict(unlisted.get(info.name, {}))
                parts = tuple(wanted.items())
            if requests is not None:
                # Kept while added up from the same: the same children's requests, or the
                # same amounts in the same order.
                was = requests.get(info.name)
                if was is not None and (_same(was[0], parts) if info.children else was[0] == parts):
                    info.request = was[1]
                    continue
            if info.children:
                for part in parts:
                    add_room(wanted, part)  # type: ignore[arg-type]
            info.request = Resources(wanted)
            if requests is not None:
                requests[info.name] = (parts, info.request)
        self._derive_deserved(order)

    def _real_capability(self, info: QueueInfo, taken: dict[str, Resources]) -> Resources:
        """``taken``: the guarantees of each parent's children, summed once per parent."""
        if info.parent is None:
            return self.total
        parent = self.queues[info.parent]
        if parent.name not in taken:
            total = EMPTY
            for sibling in parent.children:
                total = total + self.queues[sibling].guarantee
            taken[parent.name] = total
        return Resources(
            child_real_capability(
                parent.real_capability,
                taken[parent.name],
                info.guarantee,
                info.capability,
                absent_is_unlimited=False,
            )
        )

    def _derive_deserved(self, order: list[QueueInfo]) -> None:
        plugin = self.config.deserved_plugin()
        root = self.queues[ROOT_QUEUE]
        root.deserved = self.total
        kept = self.kept
        if plugin is None or plugin.name == "capacity":
            for info in order:
                if info.parent is None:
                    continue
                wanted = info.queue.spec.deserved
                capped_on = (wanted, info.real_capability, info.guarantee)
                known = kept.capped.get(info.name) if kept is not None else None
                if known is not None and _same(known[0], capped_on):
                    info.deserved = known[1]
                    continue
                capped = Resources(
                    {r: min(a, info.real_capability.get_amount(r)) for r, a in wanted.items()}
                )
                info.deserved = capped.maximum(info.guarantee)
                if kept is not None:
                    kept.capped[info.name] = (capped_on, info.deserved)
            return
        for info in order:
            if not info.children:
                continue
            children = [self.queues[c] for c in info.children]
            if kept is not None:
                inputs: list[object] = [plugin, info.deserved, info.children]
                for child in children:
                    inputs += (child.weight, child.request, child.real_capability, child.guarantee)
                rests_on = tuple(inputs)
                last = kept.splits.get(info.name)
                if last is not None and _same(last[0], rests_on):
                    for child, amount in zip(children, last[1], strict=True):
                        child.deserved = amount
                    continue
            claims = [
                deserved_plugins.Claim(
                    name=child.name,
                    weight=child.weight,
                    cap=child.request.minimum(child.real_capability),
                    guarantee=child.guarantee,
                )
                for child in children
            ]
            shares = deserved_plugins.split(plugin, info.deserved, claims)
            for child in children:
                child.deserved = shares[child.name]
            if kept is not None:
                before = kept.splits.get(info.name)
                if before is not None and len(before[1]) == len(children):
                    # A share that did not move stays the same object: below it, nothing
                    # is split again.
                    for child, was in zip(children, before[1], strict=True):
                        if list(was.items()) == list(child.deserved.items()):
                            child.deserved = was
                kept.splits[info.name] = (rests_on, tuple(c.deserved for c in children))

    # Shares --------------------------------------------------------------------------------
    def share(self, name: str) -> float:
        """max over the resources deserved names of allocated/deserved; a resource deserved
        does not name counts for nothing, and a queue that deserves nothing is best-effort: 1."""
        info = self.queues[name]
        if not info.deserved:
            return 1.0
        best = 0.0
        for r, want in info.deserved.items():
            used = info.allocated.get(r, 0)
            if used > 0:
                best = max(best, used / want)
        return best

    def drf_share(self, name: str) -> float:
        """Dominant share of the cluster: max over resources of allocated/cluster total."""
        info, total = self.queues[name], self.total.amounts
        best = 0.0
        for r, used in info.allocated.items():
            if used <= 0:
                continue
            cap = total.get(r, 0)
            best = max(best, 1.0 if cap <= 0 else used / cap)
        return best

    # Mutations by actions ------------------------------------------------------------------
    def admit(
        self,
        job: JobInfo,
        footprint: Footprint,
        flavors: tuple[tuple[str, str], ...] = (),
        held_in: FlavorAmounts | None = None,
    ) -> None:
        """``flavors``, ``held_in``: the flavor each pod set is admitted into and what that
        holds per flavor (flavor_choice.py), counted along the queue's chain."""
        job.admitted = True
        job.fresh = True
        job.admitted_at = self.now
        job.held = job.request
        job.footprint = footprint
        self.placement.hold(job.footprint)
        add_room(self.used, job.request)
        for name in self.chain(job.queue):
            add_room(self.queues[name].allocated, job.request)
        if held_in:
            job.flavors, job.held_in = flavors, held_in
            for name in self.chain(job.queue):
                add_in(self.queues[name].flavor_allocated, held_in)
        info = self.queues[job.queue]
        info.admitted_jobs.append(job)
        if self.usage_settings is not None:
            for name in self.chain(job.queue):
                usage_rule.add_penalty(
                    self.usage.queues.setdefault(name, {}), job.request, self.usage_settings
                )
            spaces = self.usage.namespaces.setdefault(job.queue, {})
            usage_rule.add_penalty(
                spaces.setdefault(job.view.namespace, {}), job.request, self.usage_settings
            )

    def evict(self, job: JobInfo) -> None:
        job.admitted = False
        job.evicted = True
        job.admitted_at = None
        add_room(self.used, job.held, -1)
        self.placement.release(job.footprint)
        job.footprint = {}
        for name in self.chain(job.queue):
            add_room(self.queues[name].allocated, job.held, -1)
        if job.held_in:
            for name in self.chain(job.queue):
                add_in(self.queues[name].flavor_allocated, job.held_in, -1)
            job.flavors, job.held_in = (), NOWHERE
        self.queues[job.queue].admitted_jobs.remove(job)
        for part in job.parts or ():  # its victims above its minimum go with it
            part.admitted = False
        self._drop_growth(job)

    def shrink(self, part: JobInfo) -> None:
        """A workload gives back the pods of one of its parts above its minimum
        (actions/growth_victims.py) and stays admitted: what the part holds leaves the
        workload, its queues, its flavor and the nodes at once. Its growth waiting, if any,
        goes back with it: the write lowers the size its owner asks."""
        job = part.part_of
        assert job is not None
        part.admitted = False
        part.evicted = True
        held = dict(job.held)
        add_room(held, part.held, -1)
        job.held = held
        add_room(self.used, part.held, -1)
        self.placement.release(part.footprint)
        for i, room in part.footprint.items():
            left = job.footprint.get(i)
            if left is not None:
                add_room(left, room, -1)
        for name in self.chain(job.queue):
            add_room(self.queues[name].allocated, part.held, -1)
        if part.held_in:
            held_in = {f: dict(amounts) for f, amounts in job.held_in.items()}
            add_in(held_in, part.held_in, -1)
            job.held_in = held_in
            for name in self.chain(job.queue):
                add_in(self.queues[name].flavor_allocated, part.held_in, -1)
        self._drop_growth(job)

    def _drop_growth(self, job: JobInfo) -> None:
        """A workload suspended takes its growth back (it waits for its whole size): its
        entry, still waiting, is admitted no more this cycle and no longer waits apart."""
        entry = self.growth.get(growth_key(job.key))
        if entry is None or entry.admitted:
            return
        entry.evicted = True
        info = self.queues.get(entry.queue)
        if info is not None:
            info.pending_jobs = [j for j in info.pending_jobs if j is not entry]
            info.refused_jobs = [j for j in info.refused_jobs if j is not entry]


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """Whether two tuples hold the very same objects, in order."""
    return len(a) == len(b) and all(map(is_, a, b))


def job_order_key(job: JobInfo) -> tuple[int, datetime, str]:
    """Within a queue: higher job priority first, then queued earlier, then by name."""
    return (-job.priority, job.view.queued_at, job.key)
