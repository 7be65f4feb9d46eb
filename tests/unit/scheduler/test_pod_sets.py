"""Workloads of several pod sets (a JobSet's replicated Jobs, a RayJob's head and workers):
every pod of every set is placed at once, largest pods first, and their own pods are found by
the label their controller puts on them (docs/workloads.md)."""

from __future__ import annotations

from dataclasses import replace

from builders import T0, gang, job, node, pod, queue, res, snapshot

from sluice.api.constraints import PodSpecView
from sluice.api.views import JobPhase, PodSet, WorkloadView
from sluice.scheduler.cycle import apply_decisions, run_cycle
from sluice.scheduler.fit import as_hard
from sluice.scheduler.model import CycleResult
from sluice.scheduler.session import Session

ONLY_ADMIT = {"actions": "enqueue"}
JUST_NOW = 3590  # seconds after T0: NOW is an hour after it
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"


def workload(
    name: str, queue_name: str, sets: dict[str, tuple[int, int]], **kw: object
) -> WorkloadView:
    """A JobSet of pod sets name -> (pods, cpu per pod)."""
    pod_sets = tuple(
        PodSet(n, count, PodSpecView(res(cpu=cpu))) for n, (count, cpu) in sets.items()
    )
    total = sum(count * cpu for count, cpu in sets.values())
    base = job(name, queue_name, cpu=total, **kw)  # type: ignore[arg-type]
    return replace(
        base, kind="JobSet", uid=f"uid-{name}", pod_sets=pod_sets, pods_by=((JOBSET_LABEL, name),)
    )


def admitted(result: CycleResult) -> list[str]:
    return [d.job.split("/")[1] for d in result.decisions if d.action == "admit"]


def reason(result: CycleResult, name: str) -> str:
    return next(p.reason for p in result.pending if p.job == f"ns/{name}").partition("; ")[2]


def test_every_pod_set_is_placed_at_once_largest_pods_first() -> None:
    # First fit in the order written would put the workers on n1 and leave no node for the
    # head; the head goes first and the workers take n2.
    ray = workload("ray", "q", {"workers": (2, 2), "head": (1, 4)})
    result = run_cycle(snapshot([queue("q")], [ray], [node("n1", cpu=4), node("n2", cpu=4)]))
    assert admitted(result) == ["ray"]


def test_a_pod_set_that_fits_on_no_node_is_named() -> None:
    ray = workload("ray", "q", {"head": (1, 4), "workers": (1, 2)})
    nodes = [node("n1", cpu=3), node("n2", cpu=3)]
    result = run_cycle(snapshot([queue("q")], [ray], nodes, config=ONLY_ADMIT))
    assert admitted(result) == []
    assert reason(result, "ray") == (
        "pod set head: no node can hold a pod of cpu 4: the most free on one node is cpu 3 (n1)"
    )


def test_pod_sets_that_fit_one_by_one_but_not_together_wait() -> None:
    js = workload("js", "q", {"a": (1, 3), "b": (2, 2)})
    nodes = [node("n1", cpu=4), node("n2", cpu=3)]
    result = run_cycle(snapshot([queue("q")], [js], nodes, config=ONLY_ADMIT))
    assert admitted(result) == []
    assert reason(result, "js") == (
        "its pod sets fit on the nodes one by one, not all at once: 1 x cpu 3 (a), 2 x cpu 2 (b)"
    )


def test_its_own_pods_found_by_label_replace_its_reservation() -> None:
    js = workload("js", "q", {"workers": (2, 2)}, phase=JobPhase.RUNNING)
    pods = [
        replace(pod(f"js-{i}", "n1", cpu=2), named_by=((JOBSET_LABEL, "js"),)) for i in range(2)
    ]
    jobs = [js, gang("next", "q", 1, cpu=4, created=1)]
    result = run_cycle(snapshot([queue("q")], jobs, [node(cpu=8)], config=ONLY_ADMIT, pods=pods))
    assert admitted(result) == ["next"]


def test_pods_of_another_workload_of_that_name_elsewhere_are_not_its_own() -> None:
    js = workload("js", "q", {"workers": (2, 2)}, phase=JobPhase.RUNNING, admitted=JUST_NOW)
    pods = [
        replace(pod(f"js-{i}", "n1", cpu=2), namespace="other", named_by=((JOBSET_LABEL, "js"),))
        for i in range(2)
    ]
    jobs = [js, gang("next", "q", 1, cpu=4, created=1)]
    result = run_cycle(snapshot([queue("q")], jobs, [node(cpu=8)], config=ONLY_ADMIT, pods=pods))
    assert admitted(result) == []


def test_a_reclaimed_workloads_pods_go_with_it() -> None:
    low = workload("low", "low", {"workers": (4, 2)}, phase=JobPhase.RUNNING, admitted=1)
    pods = [
        replace(pod(f"low-{i}", "n1", cpu=2, created=2), named_by=((JOBSET_LABEL, "low"),))
        for i in range(4)
    ]
    queues = [queue("want", weight=2), queue("low", priority=1)]
    high = workload("high", "want", {"head": (1, 2), "workers": (1, 2)}, created=1)
    state = snapshot(queues, [low, high], [node(cpu=8)], pods=pods)
    result = run_cycle(state)
    assert [(d.action, d.job) for d in result.decisions] == [
        ("reclaim", "ns/low"),
        ("admit", "ns/high"),
    ]
    after = apply_decisions(state, result, T0)
    assert after.pods == []


def test_one_workload_is_as_hard_as_another_set_by_set() -> None:
    small = workload("small", "q", {"head": (1, 2), "workers": (2, 1)})
    big = workload("big", "q", {"head": (1, 2), "workers": (3, 1)})
    other = workload("other", "q", {"head": (1, 1), "workers": (4, 1)})
    session = Session(snapshot([queue("q")], [small, big, other], [node(cpu=8)]))
    info = {j.key: j for j in session.queues["q"].pending_jobs}
    assert as_hard(info["ns/big"], info["ns/small"])
    assert not as_hard(info["ns/small"], info["ns/big"])  # fewer workers
    assert not as_hard(info["ns/other"], info["ns/small"])  # a smaller head
    alone = info["ns/small"]
    assert not as_hard(info["ns/big"], replace(alone, view=gang("g", "q", 1, cpu=4)))
