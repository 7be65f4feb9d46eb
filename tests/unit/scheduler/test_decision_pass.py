"""The decision pass decides as the full cycle does: random sequences of events (jobs created in
bursts of alike ones, finished, deleted; queues and nodes changed) go through one DecisionPass
kept across the whole sequence and, after every event, through the full cycle on the same
cluster. Each step's decisions must be the same, so the same jobs end admitted and evicted
and none is admitted that the full cycle would not admit; the cluster moves on by them, and
no admission may take a queue over its capability, or leave it over, in a resource the job
asks for.

Some jobs may be admitted smaller (a minimum below their size), at the same sizes by both.
Some jobs are stuck for a while (sluice/scheduler/decision_pass.py leaves them unlisted): they ask
more than any node holds, a resource (gpu) or a label (zone) only some nodes have now and
then, or more than their queue's capability; node and queue changes unstick them.

The DecisionPass keeps what its sessions work out from one pass to the next
(sluice/scheduler/kept.py): the node index, the queue records, each queue's request and
each parent's split, what the pods take. So the events also change each of their inputs
alone: one queue's weight, guarantee or capability, a priority class's value, a node, and
the pods (admitted jobs' pods bound, growing past what they were admitted with, finishing,
terminating; pods of no workload)."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta
from typing import Any

from builders import NOW, gang, job, node, pod, queue, snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluice.api.queue import Guarantee, Queue
from sluice.api.resources import Resources
from sluice.api.views import JobPhase, NodeView, PodView, WorkloadView
from sluice.scheduler.cycle import apply_decisions, run_cycle
from sluice.scheduler.decision_pass import DecisionPass, DecisionResult
from sluice.scheduler.model import Snapshot

ACTIONS = "enqueue, allocate, reclaim, preempt, backfill"
CONFIGS: list[dict[str, Any]] = [
    {"actions": ACTIONS},
    {
        "actions": ACTIONS,
        "tiers": [
            {"plugins": [{"name": "priority"}]},
            {"plugins": [{"name": "proportion_optimize", "arguments": {"ElasticEnable": False}}]},
        ],
    },
    {
        "actions": ACTIONS,
        "tiers": [{"plugins": [{"name": "priority"}]}, {"plugins": [{"name": "capacity"}]}],
    },
    {
        "actions": "enqueue, allocate, reclaim, preempt",
        "configurations": [{"name": "enqueue", "arguments": {"jobOrder": "global"}}],
    },
]


class World:
    """One cluster and the events that change it."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.config = rng.choice(CONFIGS)
        self.departments = [f"d{i}" for i in range(rng.randint(1, 2))]
        self.queues: dict[str, Queue] = {}
        for name in self.departments:
            self.queues[name] = self.random_queue(name, None)
        self.leaves: list[str] = []
        for i in range(rng.randint(2, 5)):
            name = f"q{i}"
            self.queues[name] = self.random_queue(name, rng.choice(self.departments))
            self.leaves.append(name)
        self.nodes = [self.random_node(f"n{i}") for i in range(rng.randint(1, 3))]
        self.jobs: dict[str, WorkloadView] = {}
        self.pods: list[PodView] = []
        self.classes = {"hi": 100, "lo": -5}
        self.made = 0
        self.now = NOW

    def random_queue(self, name: str, parent: str | None) -> Queue:
        rng = self.rng
        spec: dict[str, Any] = {"weight": rng.randint(1, 3)}
        if rng.random() < 0.3:
            spec["capability"] = {"cpu": rng.randint(2, 8)}
            if rng.random() < 0.3:  # a queue over in gpu admits what asks none
                spec["capability"]["gpu"] = rng.randint(0, 2)
        if parent is not None:
            ranked = rng.choice((0, 0, 5, "hi"))  # "hi": its PriorityClass's value
            spec["priority_class_name" if ranked == "hi" else "priority"] = ranked
            if rng.random() < 0.2:
                spec["dequeue"] = "fifo"
            if rng.random() < 0.2:
                spec["reclaimable"] = False
            if rng.random() < 0.3:
                spec["deserved"] = {"cpu": rng.randint(1, 6)}
            if rng.random() < 0.2:
                spec["guarantee"] = {"cpu": rng.randint(1, 2)}
        return queue(name, parent, created=len(self.queues), **spec)

    def random_node(self, name: str) -> NodeView:
        """Mostly plain; now and then with a gpu, in zone b, or not usable."""
        rng = self.rng
        extra: dict[str, Any] = {"gpu": 2} if rng.random() < 0.15 else {}
        labels = {"zone": "b"} if rng.random() < 0.2 else None
        return node(
            name,
            cpu=rng.randint(2, 12),
            labels=labels,
            cordoned=rng.random() < 0.1,
            **extra,
        )

    def snapshot(self) -> Snapshot:
        return snapshot(
            list(self.queues.values()),
            list(self.jobs.values()),
            list(self.nodes),
            config=self.config,
            priority_classes=dict(self.classes),
            now=self.now,
            pods=list(self.pods),
        )

    # Events -------------------------------------------------------------------------------
    def event(self) -> str:
        rng = self.rng
        self.now += timedelta(seconds=rng.randint(1, 30))
        kind = rng.choices(
            ["create", "finish", "delete", "queue", "tweak", "class", "node", "pods"],
            weights=[6, 3, 2, 1, 1, 0.5, 1, 2],
        )[0]
        if kind == "create":
            self.create()
        elif kind == "finish":
            self.finish()
        elif kind == "delete":
            if self.jobs:
                del self.jobs[rng.choice(sorted(self.jobs))]
        elif kind == "queue":
            name = rng.choice(self.leaves + self.departments)
            parent = self.queues[name].spec.parent
            self.queues[name] = self.random_queue(name, parent if name in self.leaves else None)
        elif kind == "tweak":
            self.tweak_queue()
        elif kind == "class":
            self.classes["hi"] = rng.choice((100, 3, -10))
        elif kind == "node":
            self.change_node()
        else:
            self.change_pods()
        return kind

    def tweak_queue(self) -> None:
        """One input of one queue's share changed alone: its weight, guarantee or capability."""
        rng = self.rng
        name = rng.choice(self.leaves + self.departments)
        before = self.queues[name]
        what = rng.choice(("weight", "guarantee", "capability"))
        if what == "weight":
            change: dict[str, Any] = {"weight": rng.randint(1, 4)}
        elif what == "capability":
            change = {"capability": Resources.limit({"cpu": rng.randint(2, 10) * 1000})}
        else:
            change = {"guarantee": Guarantee(resource=Resources({"cpu": rng.randint(0, 3) * 1000}))}
        spec = before.spec.model_copy(update=change)
        self.queues[name] = before.model_copy(update={"spec": spec})

    def change_pods(self) -> None:
        """The pods of an admitted job bound to nodes (now and then one asking more than it
        was admitted with), one of them finishing or terminating, or a pod of no workload."""
        rng = self.rng
        admitted = sorted(k for k, j in self.jobs.items() if j.phase.admitted and j.uid)
        roll = rng.random()
        if roll < 0.5 and admitted and self.nodes:
            owner = self.jobs[rng.choice(admitted)]
            for _ in range(sum(s.count for s in owner.pod_sets)):
                extra: dict[str, Any] = {"cpu": 4} if rng.random() < 0.1 else {}
                self.made += 1
                at = rng.choice(self.nodes).name if rng.random() < 0.8 else None
                self.pods.append(pod(f"p{self.made}", at, owner=owner, **extra))
        elif roll < 0.8 and self.pods:
            i = rng.randrange(len(self.pods))
            gone = ("finished", "terminating")[rng.random() < 0.5]
            self.pods[i] = replace(self.pods[i], **{gone: True})
        elif self.nodes:
            self.made += 1
            at = rng.choice(self.nodes).name
            self.pods.append(pod(f"p{self.made}", at, cpu=rng.choice((1, 2))))

    def create(self) -> None:
        """A burst of alike jobs (one kind, as from one template), now and then a gang."""
        rng = self.rng
        leaf = rng.choice(self.leaves)
        shape: dict[str, Any] = {
            "priority_class": rng.choice((None, None, "hi", "lo")),
            "preemptable": rng.random() < 0.8,
        }
        pods = rng.choice((1, 1, 1, 2))
        resizable = rng.random() < 0.15  # admitted smaller when whole does not fit
        if resizable:
            pods = rng.choice((3, 4, 6))
        minimum = rng.randint(1, pods - 1) if resizable else -1
        cpu = rng.choice((0, 1, 1, 2, 3, 11))
        extra: dict[str, Any] = {"gpu": 1} if rng.random() < 0.1 else {}
        zoned = rng.random() < 0.1
        for _ in range(rng.choice((1, 1, 2, 3, 6))):
            self.made += 1
            name = f"j{self.made}"
            created = int((self.now - NOW).total_seconds()) + 3600 + rng.randint(-5, 0)
            if pods == 1 and not zoned:
                made = job(name, leaf, cpu=cpu, created=created, **shape, **extra)
                made = replace(made, uid=f"uid-{name}")
            else:
                made = gang(
                    name,
                    leaf,
                    pods,
                    cpu=cpu,
                    created=created,
                    selector={"zone": "b"} if zoned else None,
                    **shape,
                    **extra,
                )
                made = replace(made, pod_sets=(replace(made.pod_sets[0], min_count=minimum),))
            self.jobs[made.key] = made

    def finish(self) -> None:
        admitted = sorted(k for k, j in self.jobs.items() if j.phase.admitted)
        if admitted:
            key = self.rng.choice(admitted)
            done = self.jobs[key] = replace(self.jobs[key], phase=JobPhase.COMPLETED)
            self.pods = [
                replace(p, finished=True) if p.job_uid == done.uid and done.uid else p
                for p in self.pods
            ]

    def change_node(self) -> None:
        rng = self.rng
        if rng.random() < 0.3 and len(self.nodes) > 1:
            self.nodes.pop(rng.randrange(len(self.nodes)))
        elif rng.random() < 0.5:
            self.nodes.append(self.random_node(f"n{len(self.nodes)}-{self.made}"))
        else:
            i = rng.randrange(len(self.nodes))
            self.nodes[i] = self.random_node(self.nodes[i].name)

    def apply(self, snap: Snapshot, result: Any) -> None:
        after = apply_decisions(snap, result, self.now)
        self.jobs = {j.key: j for j in after.workloads}
        self.pods = list(after.pods or ())


def decided(result: Any) -> list[tuple[str, str, str | None, tuple[tuple[str, int, int], ...]]]:
    return sorted((d.action, d.job, d.for_job, d.sizes) for d in result.decisions)


def within_capability(world: World, admitted: set[str]) -> None:
    """Every queue on the path of a job admitted this step holds no more than its capability
    in each resource that job asks for (a queue whose capability was lowered under what runs
    keeps what runs, admitting only what asks for none of the resources it is over in)."""
    held: dict[str, dict[str, int]] = {}
    asked: dict[str, set[str]] = {}
    for one in world.jobs.values():
        if not one.phase.admitted:
            continue
        name: str | None = one.queue
        while name is not None and name in world.queues:
            mine = held.setdefault(name, {})
            for r, a in one.request.items():
                mine[r] = mine.get(r, 0) + a
            if one.key in admitted:
                asked.setdefault(name, set()).update(r for r, a in one.request.items() if a > 0)
            name = world.queues[name].spec.parent
    for name, resources in asked.items():
        caps = world.queues[name].spec.capability.amounts
        for r in resources & caps.keys():
            assert held[name].get(r, 0) <= caps[r], f"queue {name} holds {r} {held[name]} > {caps}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32), st.integers(min_value=10, max_value=60))
def test_the_fast_pass_decides_as_the_full_cycle(seed: int, steps: int) -> None:
    rng = random.Random(seed)
    world = World(rng)
    first, whole = rng.choice((1, 2)), rng.choice((0, 0, 3))
    fast = DecisionPass(first, whole)
    told = DecisionPass(first, whole)  # told only the jobs that changed, as the operator does
    last: dict[str, WorkloadView] = {}
    for step in range(steps):
        kind = world.event()
        snap = world.snapshot()
        full = run_cycle(snap)
        quick: DecisionResult = fast.decide(snap)
        assert decided(quick) == decided(full), f"step {step} ({kind}), config {world.config}"
        # The queues' statuses, which the decision pass writes, are the full cycle's.
        assert quick.queues() == full.queues, f"step {step} ({kind}), the queues' statuses"
        jobs = world.jobs
        changed = {
            k: jobs.get(k) for k in jobs.keys() | last.keys() if jobs.get(k) is not last.get(k)
        }
        by_log = told.decide(replace(snap, workloads=()), changed) if step else told.decide(snap)
        assert decided(by_log) == decided(full), f"step {step} ({kind}), told the changes"
        assert by_log.queues() == full.queues, f"step {step} ({kind}), statuses, told the changes"
        last = dict(jobs)
        world.apply(snap, full)
        within_capability(world, {d.job for d in full.decisions if d.action == "admit"})


def test_a_used_up_kind_is_listed_further() -> None:
    """Ten alike jobs and room for seven: the first run lists two of them, both admitted, so
    the pass runs again with more listed, and admits the seven the full cycle admits."""
    jobs = [job(f"j{i}", "a", cpu=1, created=i) for i in range(10)]
    snap = snapshot([queue("a")], jobs, [node(cpu=7)], config={"actions": ACTIONS})
    result = DecisionPass(first=2, whole=0).decide(snap)
    assert decided(result) == decided(run_cycle(snap))
    assert [d.job for d in result.decisions] == [f"ns/j{i}" for i in range(7)]
    assert result.runs == 2


def test_waiting_jobs_alike_past_the_first_are_not_listed() -> None:
    """A thousand alike jobs that do not fit now: two are listed, the others only counted."""
    held = job("held", "a", cpu=3, phase=JobPhase.RUNNING, admitted=0)
    jobs = [job(f"j{i}", "a", cpu=2, created=i) for i in range(1000)]
    snap = snapshot([queue("a")], [held, *jobs], [node(cpu=4)], config={"actions": ACTIONS})
    fast = DecisionPass(first=2)
    result = fast.decide(snap)
    assert result.decisions == () and result.listed == 3 and result.runs == 1
    # One finishes elsewhere... the next pass looks only at the changed job.
    done = replace(jobs[999], phase=JobPhase.COMPLETED)
    more = replace(snap, workloads=[held, *jobs[:999], done])
    assert fast.decide(more).listed == 3
    assert sum(len(a.waiting) for a in fast.kinds.values()) == 999


def test_a_kind_no_node_can_hold_is_not_listed_until_the_nodes_change() -> None:
    """Jobs that ask more than any node holds are stuck: none is listed, their request still
    counts for their queue; a bigger node unsticks them, and they are admitted."""
    jobs = [job(f"j{i}", "a", cpu=9, created=i) for i in range(1000)]
    snap = snapshot([queue("a")], jobs, [node(cpu=4)], config={"actions": ACTIONS})
    fast = DecisionPass(first=2)
    result = fast.decide(snap)
    assert result.decisions == () and result.listed == 0
    assert fast.stuck_request == {"a": {"cpu": 9000 * 1000}}
    bigger = replace(snap, nodes=[node(cpu=4), node("n2", cpu=20)])
    result = fast.decide(bigger)
    assert decided(result) == decided(run_cycle(bigger))
    assert [d.job for d in result.decisions] == ["ns/j0", "ns/j1"]
    assert fast.stuck_request == {}


def test_a_kind_over_its_queues_capability_is_not_listed_until_the_queue_changes() -> None:
    jobs = [job(f"j{i}", "b", cpu=3, created=i) for i in range(10)]
    queues = [queue("d", capability={"cpu": 2}), queue("b", "d")]
    snap = snapshot(queues, jobs, [node(cpu=8)], config={"actions": ACTIONS})
    fast = DecisionPass(first=1, whole=0)
    assert fast.decide(snap).listed == 0
    lifted = replace(snap, queues=[queue("d", capability={"cpu": 6}), queue("b", "d")])
    result = fast.decide(lifted)
    assert decided(result) == decided(run_cycle(lifted))
    assert [d.job for d in result.decisions] == ["ns/j0", "ns/j1"]


def test_a_resizable_job_larger_than_its_queue_is_judged_stuck_by_its_minimum() -> None:
    """Its whole size is more than its queue's capability and the cluster's room, its
    minimum is not: the pass lists it, and admits it smaller as the full cycle does."""
    whole = gang("big", "a", 8, cpu=1)
    big = replace(whole, pod_sets=(replace(whole.pod_sets[0], min_count=4),))
    snap = snapshot(
        [queue("a", capability={"cpu": 6})], [big], [node(cpu=7)], config={"actions": ACTIONS}
    )
    fast = DecisionPass(first=2)
    result = fast.decide(snap)
    assert decided(result) == decided(run_cycle(snap))
    assert [(d.job, d.sizes) for d in result.decisions] == [("ns/big", (("main", 8, 6),))]
    assert fast.stuck_request == {}
