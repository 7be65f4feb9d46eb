"""The domain search prunes and stops early; it must decide exactly what trying every domain
decides. Random small clusters of blocks and racks (pools, tainted GPU nodes, queues above and
below their share, priorities down to negative ones) with jobs asking a rack or a block,
required or preferred, for the whole workload or per pod set, or nothing, some of them alike
in several queues: the whole cycle's result, with the search as it is, equals the result with
the straightforward search below (every domain of a level placed, every candidate walked for
every domain), kept here as the reference.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from unittest import mock

import pytest
from builders import gang, node, pod, queue, snapshot

from sluice.api.constraints import Taint, Toleration
from sluice.api.topology import TopologyRequest, TopologyView
from sluice.api.views import JobPhase, NodeView, PodSet, PodView, WorkloadView
from sluice.scheduler.actions import preempt as preempt_action
from sluice.scheduler.actions import reclaim as reclaim_action
from sluice.scheduler.actions.outcome import Outcome
from sluice.scheduler.actions.reclaim_domain import InLevel
from sluice.scheduler.actions.victims import PerQueue, Victims, domain_rank
from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.model import Snapshot
from sluice.scheduler.placement import Footprint, Placement
from sluice.scheduler.records import JobInfo
from sluice.scheduler.session import Session
from sluice.scheduler.set_domains import Placed, Search, victim_search
from sluice.scheduler.topology import Domains

BLOCK, RACK = "example.com/block", "example.com/rack"
GPU = "nvidia.com/gpu"
TAINT = Taint(GPU, "present", "NoSchedule")
TOLERATION = Toleration(GPU, "Exists", "", "NoSchedule")
ACTIONS = {"actions": "enqueue, allocate, reclaim, preempt, backfill"}
CLASSES = {"high": 1000, "mid": 10, "low": -5, "lowest": -100}
CAPACITY = {**ACTIONS, "tiers": [{"plugins": [{"name": "priority"}, {"name": "capacity"}]}]}


# The reference: every domain tried --------------------------------------------------------


def best_at_everywhere(
    self: Domains, view: WorkloadView, level: str, freed: Footprint | None = None
) -> Placed | None:
    """Every domain of the level ranked by the room it has free, then placed in that order."""
    return self._best_freed(view, level, freed or {})


def reclaim_everywhere(
    self: reclaim_action._Reclaim,
    job: JobInfo,
    short: dict[str, int],
    over: dict[str, dict[str, int]],
    search: Search,
) -> tuple[Victims, Placed] | None:
    """Every candidate walked to the end for every domain, each domain searched on its own."""
    request = search.request
    assert request is not None
    domains = self.session.domains
    for level in domains.levels(request):
        of_node = {i: d for d in domains.domains(level) for i in d.nodes}
        searches: dict[str, tuple[Victims, dict[str, dict[str, int]]]] = {}
        done: set[str] = set()
        best: tuple[tuple[int, int, str], tuple[Victims, Placed]] | None = None
        paths: list[tuple[str, ...]] = []
        for victim in self.candidates(job, short, {}, paths):
            path = paths[-1]
            for domain in sorted({of_node[i] for i in victim.footprint if i in of_node},
                                 key=lambda d: d.value):  # fmt: skip
                if domain.value in done:
                    continue
                chosen, taken = searches.setdefault(
                    domain.value, (Victims(self.session, job, over, search.where(domain)), {})
                )
                if not all(self.gives_up(q, victim, taken, short) for q in path):
                    continue
                if not self._adds(chosen, taken, victim, over) or not chosen.placeable():
                    continue
                done.add(domain.value)
                found = (chosen, chosen.prune())
                key = domain_rank(chosen.chosen, domain)
                if best is None or key < best[0]:
                    best = (key, found)
        if best is not None:
            return best[1]
    return None if request.required else self._choose(job, short, over, search.anywhere)


def preempt_everywhere(
    session: Session, job: JobInfo, victims: list[JobInfo], over: PerQueue, search: Search
) -> tuple[Victims, Placed] | None:
    """Every domain searched over every victim, in name order."""
    request = search.request
    assert request is not None
    for level in session.domains.levels(request):
        best: tuple[tuple[int, int, str], tuple[Victims, Placed]] | None = None
        for domain in session.domains.domains(level):
            found = preempt_action._choose(
                session, job, victims, over, search.where(domain), domain
            )
            if found is None:
                continue
            chosen = found[0].chosen
            key = domain_rank(chosen, domain)
            if best is None or key < best[0]:
                best = (key, found)
        if best is not None:
            return best[1]
    return (
        None
        if request.required
        else preempt_action._choose(session, job, victims, over, search.anywhere)
    )


@contextmanager
def everywhere() -> Iterator[None]:
    with (
        mock.patch.object(Domains, "best_at", best_at_everywhere),
        mock.patch.object(Domains, "still_holds", lambda self, view: False),  # every domain tried
        mock.patch.object(reclaim_action._Reclaim, "_in_one_domain", reclaim_everywhere),
        mock.patch.object(preempt_action, "_in_one_domain", preempt_everywhere),
    ):
        yield


# Random clusters ----------------------------------------------------------------------------


def cluster(seed: int) -> Snapshot:
    rng = random.Random(seed)
    nodes: list[NodeView] = []
    for b in range(rng.randint(1, 3)):
        for r in range(rng.randint(1, 4)):
            for n in range(rng.randint(1, 3)):
                gpu = rng.random() < 0.3
                nodes.append(
                    node(
                        f"n-{b}-{r}-{n}",
                        labels={BLOCK: f"b{b}", RACK: f"r{b * 4 + r}", "pool": rng.choice("ab")},
                        taints=(TAINT,) if gpu else (),
                        cpu=rng.choice((4, 8)),
                        memory=f"{rng.choice((16, 32))}Gi",
                        **({GPU: 8} if gpu else {}),
                    )
                )
    if rng.random() < 0.2:  # a node of no rack
        nodes.append(node("loose", cpu=8, memory="32Gi"))
    leaves = [f"q{i}" for i in range(rng.randint(2, 5))]
    # Drawn apart, so the rest of each cluster stays as it was: departments with a deserved
    # share of their own, and a team between a department and some of its leaves (the walk
    # then passes queues not above their share above a leaf, which its victims may not ask).
    tree = random.Random(-1 - seed)
    shares = [{"deserved": {"cpu": str(tree.choice((4, 8, 16)))}} if tree.random() < 0.5 else {}]
    queues = [queue("dept-a", **shares[0]), queue("dept-b")]
    team = tree.random() < 0.5
    if team:
        queues.append(queue("team-a", "dept-a", deserved={"cpu": str(tree.choice((2, 4, 8)))}))
    for i, name in enumerate(leaves):
        parent = rng.choice(("dept-a", "dept-b"))
        if team and parent == "dept-a" and tree.random() < 0.7:
            parent = "team-a"
        queues.append(
            queue(
                name,
                parent,
                created=i,
                deserved={"cpu": str(rng.choice((2, 4, 8, 16)))},
                priority=rng.choice((0, 0, 10)),
                **({"guarantee": {"cpu": "1"}} if rng.random() < 0.2 else {}),
            )
        )
    placement = Placement(nodes)
    jobs: list[WorkloadView] = []
    pods: list[PodView] = []
    for i in range(rng.randint(10, 50)):
        admitted = rng.random() < 0.6
        job = gang(
            f"j{i}",
            rng.choice(leaves),
            rng.choice((1, 1, 2, 3, 4)),
            selector={"pool": rng.choice("ab")} if rng.random() < 0.25 else None,
            tolerations=(TOLERATION,) if rng.random() < 0.3 else (),
            created=i,
            admitted=i if admitted else None,
            priority_class=rng.choice((None, None, *CLASSES)),
            preemptable=rng.random() < 0.9,
            cpu=rng.choice((1, 1, 2, 4)),
            memory=f"{rng.choice((1, 2, 4, 8))}Gi",
            **({GPU: rng.choice((1, 2, 4))} if rng.random() < 0.2 else {}),
        )
        (main,) = job.pod_sets
        where = placement.place(main.pod, main.pod_count) if admitted else None
        if where is not None:
            placement.hold(placement.footprint(main.pod, where))
            names = iter(range(main.pod_count))
            for k, count in where:
                for _ in range(count):
                    pods.append(pod(f"j{i}-{next(names)}", placement.nodes[k].name, owner=job))
            job = replace(job, phase=JobPhase.RUNNING)
        else:
            job = replace(job, admitted_at=None)
            if rng.random() < 0.3:  # a second pod set
                (main,) = job.pod_sets
                other = replace(main.pod, request=main.pod.request.scale(2))
                sets = (main, PodSet("worker", rng.randint(1, 3), other))
                total = main.pod.request.scale(main.pod_count) + other.request.scale(sets[1].count)
                job = replace(job, pod_sets=sets, request=total)
            pick = rng.random()
            if pick < 0.6:
                level = RACK if rng.random() < 0.75 else BLOCK
                ask = TopologyRequest(level, rng.random() < 0.7)
                if len(job.pod_sets) > 1 and rng.random() < 0.6:  # per pod set
                    job = replace(job, pod_sets=per_pod_set(rng, job.pod_sets, ask))
                else:
                    job = replace(job, topology=ask)
        jobs.append(job)
    # Jobs alike (their pod sets and asks the same), in the same queue or another: a search
    # may reuse what it worked out for the first while nothing moved.
    pending = [j for j in jobs if j.phase is not JobPhase.RUNNING]
    for k, job in enumerate(rng.sample(pending, min(len(pending), rng.randint(0, 4)))):
        for copy in range(rng.randint(1, 3)):
            name = f"{job.name}-alike-{k}-{copy}"
            where = job.queue if rng.random() < 0.3 else rng.choice(leaves)
            jobs.append(replace(job, name=name, uid=f"uid-{name}", queue=where))
    return replace(
        snapshot(queues, jobs, nodes, config=ACTIONS, priority_classes=CLASSES, pods=pods),
        topologies=(TopologyView("default", (BLOCK, RACK)),),
    )


def per_pod_set(
    rng: random.Random, sets: tuple[PodSet, ...], ask: TopologyRequest
) -> tuple[PodSet, ...]:
    """Some of the pod sets ask a domain of their own (at least one does): the same level, or
    the other one, required or preferred."""
    chosen = rng.randrange(len(sets))
    out = []
    for k, pod_set in enumerate(sets):
        if k == chosen:
            out.append(replace(pod_set, topology=ask))
        elif rng.random() < 0.5:
            other = TopologyRequest(rng.choice((RACK, BLOCK)), rng.random() < 0.7)
            out.append(replace(pod_set, topology=other))
        else:
            out.append(pod_set)
    return tuple(out)


@pytest.mark.parametrize("seed", range(400))
def test_the_domain_search_decides_what_trying_every_domain_decides(seed: int) -> None:
    snap = cluster(seed)
    with everywhere():
        expected = run_cycle(snap)
    assert run_cycle(snap) == expected


def test_the_random_clusters_reach_every_search() -> None:
    """The clusters above do exercise reclaim and preempt into a domain, and leave jobs
    waiting for one: else the comparison would prove little."""
    kinds: dict[str, int] = {}
    per_set: dict[str, int] = {}  # admitted with domains per pod set
    waiting = 0
    for seed in range(400):
        result = run_cycle(cluster(seed))
        for d in result.decisions:
            if d.domain:
                kind = d.reason.partition(":")[0]
                kinds[kind] = kinds.get(kind, 0) + 1
                if ": " in d.domain:  # "<pod set>: <level>=<value>"
                    per_set[kind] = per_set.get(kind, 0) + 1
        waiting += sum(1 for p in result.pending if " holds " in p.cause)
    assert kinds.get("reclaim", 0) >= 10 and kinds.get("preempt", 0) >= 10, kinds
    assert sum(kinds.values()) >= 100 and waiting >= 20, (kinds, waiting)
    assert per_set.get("reclaim", 0) >= 3 and per_set.get("preempt", 0) >= 3, per_set


def test_what_the_search_keeps_from_one_job_to_the_next_follows_the_room() -> None:
    """Whether a victim alone frees a domain is kept from one job to the next, but not once
    the domain's room changed. Two alike jobs of 4 GPUs, each in one rack (r2's GPUs are
    tainted: the cluster has room, the racks do not): the first takes u (6 GPUs) in r0,
    where v (2) alone was too little; it leaves 2 free there, so for the second v alone is
    enough now, and r0 with v (priority -100) comes before r1 with w (priority 0)."""
    gpu = "nvidia.com/gpu"
    nodes = [
        node(f"r{r}-0", labels={BLOCK: "b0", RACK: f"r{r}", "host": f"r{r}-0"}, cpu=8, **{gpu: 8})
        for r in range(3)
    ]
    nodes[2] = replace(nodes[2], taints=(TAINT,))
    victims = [
        gang(name, "b", 1, selector={"host": host}, admitted=n, priority_class=cls, **{gpu: n_gpu})
        for n, (name, host, n_gpu, cls) in enumerate(
            [("v", "r0-0", 2, "lowest"), ("u", "r0-0", 6, None), ("w", "r1-0", 8, None)]
        )
    ]
    victims = [replace(v, phase=JobPhase.RUNNING) for v in victims]
    ask = TopologyRequest(RACK, True)
    jobs = [
        replace(gang(name, "a", 1, created=10 + n, **{gpu: 4}), topology=ask)
        for n, name in enumerate(("first", "second"))
    ]
    # b above its share all along: a weighs three times as much and asks for more still.
    huge = gang("huge", "a", 1, created=20, **{gpu: 100})
    queues = [queue("a", weight=3), queue("b")]
    snap = replace(
        snapshot(queues, [*victims, *jobs, huge], nodes, config=ACTIONS, priority_classes=CLASSES),
        topologies=(TopologyView("default", (BLOCK, RACK)),),
    )
    result = run_cycle(snap)
    assert [(d.action, d.job, d.domain) for d in result.decisions] == [
        ("reclaim", "ns/u", ""),
        ("admit", "ns/first", f"{RACK}=r0"),
        ("reclaim", "ns/v", ""),
        ("admit", "ns/second", f"{RACK}=r0"),
    ]
    with everywhere():
        assert run_cycle(snap) == result


def test_a_subtree_kept_from_one_job_to_the_next_follows_the_share_of_the_queues_above() -> None:
    """The victims of a queue's subtree are kept from one job to the next, but which of them
    the walk yields depends on the queues above it too (capacity: each deserved is what its
    spec names): while team t is not above its share in cpu, v (in l1, below t) asks what t
    is owed and is no victim for a job short of cpu and GPUs; once an admission in l1's
    sibling l2 puts t over its share, v is one, though nothing in l1 changed."""
    gpu = "nvidia.com/gpu"
    nodes = [node("n0", labels={BLOCK: "b0", RACK: "r0"}, cpu=16, **{gpu: 8})]
    queues = [
        queue("a", deserved={"cpu": "100"}),
        queue("t", deserved={"cpu": "4"}),
        queue("l1", "t"),
        queue("l2", "t"),
    ]
    v = replace(gang("v", "l1", 1, admitted=0, cpu=2, **{gpu: 2}), phase=JobPhase.RUNNING)
    pods = [pod("v-0", "n0", owner=v)]
    ask = TopologyRequest(RACK, True)
    jobs = [
        v,
        replace(gang("j", "a", 1, created=5, cpu=1, **{gpu: 1}), topology=ask),
        gang("w", "l2", 1, created=6, cpu=4),
    ]
    snap = replace(
        snapshot(queues, jobs, nodes, config=CAPACITY, priority_classes=CLASSES, pods=pods),
        topologies=(TopologyView("default", (BLOCK, RACK)),),
    )
    short = {"cpu": 1, gpu: 1}

    def victims(reclaim: reclaim_action._Reclaim, session: Session) -> list[str]:
        (job,) = session.queues["a"].pending_jobs
        search = victim_search(session.domains, job.view)
        assert search is not None
        level = InLevel(reclaim, job, short, {}, search, RACK)
        return [victim.key for _, victim, _ in level._on("r0")]

    session = Session(snap)
    kept = reclaim_action._Reclaim(session, Outcome())
    assert victims(kept, session) == []
    (w,) = session.queues["l2"].pending_jobs
    session.admit(w, {})
    kept.admitted(w)
    anew = reclaim_action._Reclaim(session, Outcome())
    assert victims(kept, session) == victims(anew, session) == ["ns/v"]


def test_the_domain_pods_alike_last_went_in_counts_only_at_a_level_the_job_may_go_at() -> None:
    """Reclaim first asks whether a job fits now, and the domain pods sets like its own were
    last put in is asked that first. Two jobs of 2 pods x 4 cpu: wide asks the block, goes
    on r0-0 and leaves 4 cpu free in each rack; narrow asks a rack, which none holds, though
    the block still does: it must take v in r0 (the first of two racks one victim frees)."""
    nodes = [
        node(name, labels={BLOCK: "b0", RACK: name[:2], "host": name}, cpu=8)
        for name in ("r0-0", "r0-1", "r1-0")
    ]
    victims = [
        replace(
            gang(name, "b", 1, selector={"host": host}, admitted=n, cpu=4),
            phase=JobPhase.RUNNING,
        )
        for n, (name, host) in enumerate([("v", "r0-1"), ("u", "r1-0")])
    ]
    jobs = [
        replace(gang(name, "a", 2, created=10 + n, cpu=4), topology=TopologyRequest(level, True))
        for n, (name, level) in enumerate([("wide", BLOCK), ("narrow", RACK)])
    ]
    huge = gang("huge", "a", 1, created=20, cpu=100)  # a asks more than it may have
    snap = replace(
        snapshot([queue("a", weight=3), queue("b")], [*victims, *jobs, huge], nodes,
                 config=ACTIONS),
        topologies=(TopologyView("default", (BLOCK, RACK)),),
    )  # fmt: skip
    result = run_cycle(snap)
    assert [(d.action, d.job, d.domain) for d in result.decisions] == [
        ("admit", "ns/wide", f"{BLOCK}=b0"),
        ("reclaim", "ns/v", ""),
        ("admit", "ns/narrow", f"{RACK}=r0"),
    ]
    with everywhere():
        assert run_cycle(snap) == result
