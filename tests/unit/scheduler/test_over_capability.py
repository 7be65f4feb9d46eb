"""A queue over its capability in a resource (docs/scheduler.md, *What a workload holds*)
holds back only the jobs that ask for that resource: one that asks for none of the resources
it or an ancestor is over in is admitted within its limits as ever; one that asks for one of
them waits, its reason naming the queue level, the resources and both figures of each, and
takes no victim, neither in its queue nor elsewhere.

A queue gets over its capability when what its workloads hold grows past it (their pods ask
more than they were admitted with, tests/unit/scheduler/test_holding.py) or when its
capability is lowered below what it holds; here, the latter: the rule is the same."""

from __future__ import annotations

from builders import job, node, queue, running, snapshot

from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.model import CycleResult

NODES = [node("n1", cpu=64, memory="64Gi", nvidia_com_gpu=8)]
PREEMPT = {"actions": "enqueue, allocate, preempt"}
PRIORITIES = {"high": 100}


def admitted(result: CycleResult) -> list[str]:
    return sorted(d.job.split("/")[1] for d in result.decisions if d.action == "admit")


def evicted(result: CycleResult) -> list[str]:
    return [d.job.split("/")[1] for d in result.decisions if d.action != "admit"]


def reason(result: CycleResult, name: str) -> str:
    return next(p.reason for p in result.pending if p.job == f"ns/{name}").partition("; ")[2]


def held_back(level: str, resource: str, figures: str) -> str:
    return (
        f"queue {level} is over its capability in {resource}, and admits nothing more that"
        f" asks for it until it fits again: {figures}"
    )


def test_a_queue_over_in_memory_admits_what_asks_no_memory() -> None:
    q1 = queue("q1", capability={"memory": "2Gi", "cpu": "4"})
    jobs = [
        running("big", "q1", cpu=1, memory="3Gi"),
        job("cpu-only", "q1", cpu=2, created=1),
        job("gpu-only", "q1", cpu=0, nvidia_com_gpu=2, created=2),
        job("hungry", "q1", cpu=0, memory="1Gi", created=3),
        job("too-big", "q1", cpu=2, created=4),  # over the cpu limit once cpu-only is in
    ]
    result = run_cycle(snapshot([q1], jobs, NODES))
    assert admitted(result) == ["cpu-only", "gpu-only"]
    assert reason(result, "hungry") == held_back("q1", "memory", "memory 3Gi > capability 2Gi")
    # The other limits hold as ever.
    assert reason(result, "too-big") == "q1 would use cpu 5 > capability 4"
    assert result.queues["q1"].over_capability == "memory 3Gi > capability 2Gi"


def test_an_ancestor_over_holds_back_what_asks_for_its_resource_in_every_queue_below() -> None:
    queues = [queue("dept", capability={"memory": "2Gi"}), queue("a", "dept"), queue("b", "dept")]
    jobs = [
        running("big", "a", cpu=1, memory="3Gi"),
        job("light", "b", cpu=1, created=1),
        job("heavy", "b", cpu=1, memory="512Mi", created=2),
    ]
    result = run_cycle(snapshot(queues, jobs, NODES))
    assert admitted(result) == ["light"]
    assert reason(result, "heavy") == held_back(
        "dept (ancestor of b)", "memory", "memory 3Gi > capability 2Gi"
    )


def test_over_in_several_resources_names_those_the_job_asks_for() -> None:
    q1 = queue("q1", capability={"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "1"})
    jobs = [
        running("big", "q1", cpu=3, memory="3Gi", nvidia_com_gpu=2),
        job("memory-only", "q1", cpu=0, memory="1Gi", created=1),
        job("both", "q1", cpu=1, memory="1Gi", created=2),
        job("all", "q1", cpu=1, memory="1Gi", nvidia_com_gpu=1, created=3),
        job("nothing", "q1", cpu=0, created=4),
    ]
    result = run_cycle(snapshot([q1], jobs, NODES))
    assert admitted(result) == ["nothing"]
    assert reason(result, "memory-only") == held_back("q1", "memory", "memory 3Gi > capability 2Gi")
    assert reason(result, "both") == (
        "queue q1 is over its capability in cpu and memory, and admits nothing more that asks"
        " for any of them until it fits again: cpu 3 > capability 2; memory 3Gi > capability 2Gi"
    )
    assert reason(result, "all") == (
        "queue q1 is over its capability in cpu, memory and nvidia.com/gpu, and admits nothing"
        " more that asks for any of them until it fits again: cpu 3 > capability 2;"
        " memory 3Gi > capability 2Gi; nvidia.com/gpu 2 > capability 1"
    )


def test_the_nearest_level_over_in_what_the_job_asks_is_named() -> None:
    queues = [
        queue("dept", capability={"memory": "2Gi"}),
        queue("a", "dept", capability={"cpu": "1"}),
    ]
    jobs = [
        running("big", "a", cpu=2, memory="3Gi"),
        job("memory-only", "a", cpu=0, memory="1Gi", created=1),
        job("cpu-only", "a", cpu=1, created=2),
    ]
    result = run_cycle(snapshot(queues, jobs, NODES))
    assert admitted(result) == []
    assert reason(result, "memory-only") == held_back(
        "dept (ancestor of a)", "memory", "memory 3Gi > capability 2Gi"
    )
    assert reason(result, "cpu-only") == held_back("a", "cpu", "cpu 2 > capability 1")


def test_a_job_held_back_preempts_nothing_and_one_that_is_not_preempts_as_ever() -> None:
    q1 = queue("q1", capability={"cpu": "2", "memory": "2Gi"})
    low = running("low", "q1", cpu=2, memory="3Gi", admitted=5)
    hungry = job("hungry", "q1", cpu=0, memory="1Gi", priority_class="high", created=1)
    result = run_cycle(
        snapshot([q1], [low, hungry], NODES, config=PREEMPT, priority_classes=PRIORITIES)
    )
    # Preempting low would bring q1 within its capability and let hungry in: it waits instead.
    assert evicted(result) == [] and admitted(result) == []
    assert reason(result, "hungry") == held_back("q1", "memory", "memory 3Gi > capability 2Gi")
    # A job that asks no memory is not held back: it preempts for the cpu it lacks.
    urgent = job("urgent", "q1", cpu=1, priority_class="high", created=1)
    result = run_cycle(
        snapshot([q1], [low, urgent], NODES, config=PREEMPT, priority_classes=PRIORITIES)
    )
    assert evicted(result) == ["low"] and admitted(result) == ["urgent"]


def test_a_job_held_back_by_an_ancestor_reclaims_nothing_below_it() -> None:
    # a is above its deserved cpu (dept's 4 split with b); the cluster lacks cpu for b's jobs.
    queues = [queue("dept", capability={"memory": "2Gi"}), queue("a", "dept"), queue("b", "dept")]
    big = running("big", "a", cpu=3, memory="3Gi", admitted=5)
    small = [node("n1", cpu=4, memory="64Gi")]
    heavy = job("heavy", "b", cpu=2, memory="512Mi", created=1)
    result = run_cycle(snapshot(queues, [big, heavy], small))
    # Reclaiming big would bring dept within its capability and let heavy in: it waits instead.
    assert evicted(result) == [] and admitted(result) == []
    assert reason(result, "heavy") == held_back(
        "dept (ancestor of b)", "memory", "memory 3Gi > capability 2Gi"
    )
    # A job that asks no memory reclaims the cpu b is owed, from below the same ancestor.
    light = job("light", "b", cpu=2, created=1)
    result = run_cycle(snapshot(queues, [big, light], small))
    assert evicted(result) == ["big"] and admitted(result) == ["light"]


def test_a_fifo_queue_waits_behind_its_first_job_held_back() -> None:
    q1 = queue("q1", capability={"memory": "2Gi"}, dequeue="fifo")
    jobs = [
        running("big", "q1", cpu=1, memory="3Gi"),
        job("hungry", "q1", cpu=0, memory="1Gi", created=1),
        job("cpu-only", "q1", cpu=1, created=2),
    ]
    result = run_cycle(snapshot([q1], jobs, NODES))
    assert admitted(result) == []
    assert reason(result, "hungry") == held_back("q1", "memory", "memory 3Gi > capability 2Gi")
    assert reason(result, "cpu-only") == "waiting behind ns/hungry, the first job of fifo queue q1"
