"""What every cycle must respect, checked on random clusters with all five actions on."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import replace

from builders import gang, job, node, queue, running, snapshot

from sluice.api.admitted_size import SizeRecord
from sluice.api.views import WorkloadView
from sluice.scheduler.cycle import apply_decisions, run_cycle
from sluice.scheduler.model import CycleResult, Snapshot

ALL_ACTIONS = {"actions": "enqueue, allocate, reclaim, preempt, backfill"}


def random_snapshot(seed: int) -> Snapshot:
    rng = random.Random(seed)
    queues, leaves = [], []
    for d in range(rng.randint(1, 3)):
        dept: dict[str, object] = {"weight": rng.randint(1, 3)}
        if rng.random() < 0.4:
            dept["capability"] = {"cpu": rng.randint(3, 8)}
        queues.append(queue(f"d{d}", **dept))
        for q in range(rng.randint(1, 3)):
            name = f"d{d}q{q}"
            spec: dict[str, object] = {"weight": rng.randint(1, 3), "priority": rng.choice((0, 5))}
            if rng.random() < 0.3:
                spec["capability"] = {"cpu": rng.randint(2, 6)}
            if rng.random() < 0.2:
                spec["reclaimable"] = False
            if rng.random() < 0.2:
                spec["dequeue"] = "fifo"
            queues.append(queue(name, f"d{d}", created=rng.randint(0, 3), **spec))
            leaves.append(name)
    jobs: list[WorkloadView] = []
    for i in range(rng.randint(5, 30)):
        where = rng.choice(leaves)
        kw = {
            "cpu": rng.choice((0, 1, 2, 3)),
            "priority_class": rng.choice((None, None, "hi")),
            "preemptable": rng.random() < 0.8,
            "created": rng.randint(0, 20),
        }
        if rng.random() < 0.4:
            jobs.append(running(f"r{i}", where, admitted=rng.randint(0, 100), **kw))
        else:
            jobs.append(job(f"p{i}", where, **kw))
    return snapshot(
        queues,
        jobs,
        [node(cpu=rng.randint(4, 12))],
        config=ALL_ACTIONS,
        priority_classes={"hi": 100},
    )


def check(snap: Snapshot, result: CycleResult) -> None:
    views = {j.key: j for j in snap.workloads}
    queues = {q.name: q for q in snap.queues}
    admitted_now = [d.job for d in result.decisions if d.action == "admit"]
    victims = [d for d in result.decisions if d.action != "admit"]
    # Victims come before the job they make room for, which is admitted in the same cycle.
    for victim in victims:
        assert victim.for_job in admitted_now
        first_admit = next(i for i, d in enumerate(result.decisions) if d.job == victim.for_job)
        assert result.decisions.index(victim) < first_admit
        view = views[victim.job]
        assert view.preemptable and view.phase.admitted
        if victim.action == "reclaim":
            assert queues[victim.queue].spec.reclaimable
            assert victim.queue != views[victim.for_job].queue
        else:
            assert victim.queue == views[victim.for_job].queue
    # Nobody is admitted twice or both admitted and pending; nothing admitted was admitted.
    assert len(admitted_now) == len(set(admitted_now))
    assert not set(admitted_now) & {p.job for p in result.pending}
    assert all(not views[key].phase.admitted for key in admitted_now)
    # Every pending job has a reason that starts with its position in its queue.
    positions: dict[str, list[int]] = defaultdict(list)
    for pending in result.pending:
        assert pending.reason.startswith(f"position {pending.position} in {pending.queue}; ")
        assert len(pending.reason) > len(f"position {pending.position} in {pending.queue}; ")
        positions[pending.queue].append(pending.position)
    for found in positions.values():
        assert sorted(found) == list(range(1, len(found) + 1))
    # The cluster is not overcommitted by the cycle, and no queue goes over its capability.
    total = result.cluster_total.get_amount("cpu")
    used_before = sum(j.request.get_amount("cpu") for j in snap.workloads if j.phase.admitted)
    evicted = {d.job for d in victims if not d.shrinks}
    used_after = sum(
        cpu_after(j, result)
        for j in snap.workloads
        if (j.phase.admitted and j.key not in evicted) or j.key in admitted_now
    )
    assert used_after <= max(total, used_before)
    for name, state in result.queues.items():
        cap = queues[name].spec.capability.get("cpu") if name in queues else None
        gained = any(
            name in (views[key].queue, queues[views[key].queue].parent)
            and cpu_after(views[key], result) > 0
            for key in admitted_now
        )
        if cap is not None and gained:
            assert state.allocated.get_amount("cpu") <= cap


def cpu_after(view: WorkloadView, result: CycleResult) -> int:
    """What a workload asks once the cycle's decisions are written: at the sizes its
    admission or its shrink carries, else its request."""
    sizes = next((d.sizes for d in result.decisions if d.job == view.key and d.sizes), ())
    if not sizes:
        return view.request.get_amount("cpu")
    pods = {name: admitted for name, _, admitted in sizes}
    return sum(s.pod.request.get_amount("cpu") * pods.get(s.name, s.count) for s in view.pod_sets)


def test_every_cycle_keeps_the_rules_on_random_clusters() -> None:
    decided: Counter[str] = Counter()
    for seed in range(150):
        snap = random_snapshot(seed)
        result = run_cycle(snap)
        check(snap, result)
        assert run_cycle(snap) == result  # same input, same output
        decided.update(d.action for d in result.decisions)
    # The random clusters do exercise every kind of decision.
    assert decided["admit"] > 200 and decided["reclaim"] > 20 and decided["preempt"] > 20


def test_a_queue_changed_since_the_last_cycle_is_seen_as_it_is_now() -> None:
    """The queue tree and its rule violations are kept from one cycle to the next while the
    queues are the same; a changed queue is seen at once, and a change back as well."""
    child = queue("b", "a", capability={"cpu": 4})
    narrow = snapshot([queue("a", capability={"cpu": 2}), child], [], [node(cpu=8)])
    wide = replace(narrow, queues=[queue("a", capability={"cpu": 8}), child])
    seen = [run_cycle(s).queues["b"].valid for s in (narrow, narrow, wide, wide, narrow)]
    assert seen == [False, False, True, True, False]


def resizable_snapshot(seed: int) -> Snapshot:
    """Random clusters where some running jobs are resizable, admitted whole at up to 6 pods
    of 1 cpu with a minimum below that, and some leaves hold a guarantee of 2 cpus."""
    rng = random.Random(seed)
    snap = random_snapshot(seed)
    guaranteed = {q.name for q in snap.queues if q.spec.parent != "root" and rng.random() < 0.3}
    queues = [
        queue(q.name, q.spec.parent, guarantee={"cpu": 2}, weight=q.spec.weight)
        if q.name in guaranteed
        else q
        for q in snap.queues
    ]
    jobs: list[WorkloadView] = []
    for view in snap.workloads:
        if not view.phase.admitted or rng.random() < 0.2:
            jobs.append(view)
            continue
        pods = rng.randint(2, 6)
        grown = gang(
            view.name,
            view.queue,
            pods,
            cpu=1,
            phase=view.phase,
            admitted=rng.randint(0, 100),
            priority_class=view.priority_class_name,
            preemptable=view.preemptable,
        )
        (pod_set,) = grown.pod_sets
        minimum = replace(pod_set, min_count=rng.randint(1, pods))
        jobs.append(replace(grown, pod_sets=(minimum,), sized=(SizeRecord("main", pods, pods),)))
    return replace(snap, queues=queues, workloads=jobs, nodes=[node(cpu=rng.randint(6, 14))])


def check_sizes(snap: Snapshot, result: CycleResult) -> None:
    """A shrink takes pods above a minimum only, from an admitted resizable workload, for a
    job admitted in the same cycle; every queue keeps its guarantee (or what it held, when
    below it) and no capability is passed; nothing is admitted below its minimum."""
    views = {j.key: j for j in snap.workloads}
    admitted_now = {d.job for d in result.decisions if d.action == "admit"}
    for d in result.decisions:
        if d.shrinks:
            view = views[d.job]
            ((name, asked, admitted),) = d.sizes
            (pod_set,) = view.pod_sets
            assert view.phase.admitted and view.sized and name == pod_set.name
            assert pod_set.min_count <= admitted < pod_set.count == asked
            assert d.for_job in admitted_now
        for name, _, admitted in d.sizes if d.action == "admit" else ():
            pod_set = next(s for s in views[d.job].pod_sets if s.name == name)
            assert admitted >= pod_set.min_count
    before: dict[str, int] = defaultdict(int)
    for view in snap.workloads:
        if view.phase.admitted:
            before[view.queue] += view.request.get_amount("cpu")
    for q in snap.queues:
        guarantee = q.spec.guarantee.resource.get_amount("cpu")
        if guarantee and q.name in result.queues:
            after = result.queues[q.name].allocated.get_amount("cpu")
            assert after >= min(guarantee, before[q.name])


def test_victims_above_a_minimum_keep_the_rules_on_random_clusters() -> None:
    shrunk = 0
    for seed in range(150):
        snap = resizable_snapshot(seed)
        for _ in range(3):  # the next cycles on what the operator would write
            result = run_cycle(snap)
            check(snap, result)
            check_sizes(snap, result)
            assert run_cycle(snap) == result
            shrunk += sum(d.shrinks for d in result.decisions)
            snap = apply_decisions(snap, result, snap.now)
    assert shrunk > 10  # the random clusters do shrink workloads
