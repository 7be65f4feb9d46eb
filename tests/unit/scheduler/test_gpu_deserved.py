"""Deserved that names some resources only (GPU-only quotas, as teams often write them).

Under capacity a resource the queue's deserved does not name neither stops the queue from
taking room back nor puts it over its share; a queue that deserves nothing is best-effort, as
is a job that asks for none of the resources its queue's deserved names; a named resource
counts in full. Quota shapes from Volcano's capacity plugin guide and its GPU-only case."""

from __future__ import annotations

from typing import Any

from builders import job, node, queue, running, snapshot

from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.model import CycleResult

CAPACITY = {
    "actions": "enqueue, allocate, reclaim",
    "tiers": [{"plugins": [{"name": "priority"}]}, {"plugins": [{"name": "capacity"}]}],
}
GPU = "nvidia.com/gpu"


def decisions(result: CycleResult) -> list[tuple[str, str]]:
    return [(d.action, d.job) for d in result.decisions]


def gpu_job(name: str, queue_name: str, gpus: int, cpu: int, **kw: Any) -> Any:
    maker = running if kw.pop("admitted_job", False) else job
    return maker(name, queue_name, cpu=cpu, nvidia_com_gpu=gpus, memory="16Gi", **kw)


def gpu_running(name: str, queue_name: str, gpus: int, cpu: int, at: int) -> Any:
    return gpu_job(name, queue_name, gpus, cpu, admitted_job=True, admitted=at)


def test_a_gpu_only_queue_reclaims_for_a_job_that_also_requests_cpu_and_memory() -> None:
    queues = [queue("a", deserved={GPU: 4}), queue("b", deserved={GPU: 4})]
    jobs = [
        *(gpu_running(f"a{i}", "a", 2, 8, at=10 * i) for i in range(4)),
        gpu_job("b1", "b", 2, 8),
    ]
    nodes = [node(cpu=64, nvidia_com_gpu=8, memory="512Gi")]
    result = run_cycle(snapshot(queues, jobs, nodes, config=CAPACITY))
    assert decisions(result) == [("reclaim", "ns/a3"), ("admit", "ns/b1")]


def test_use_of_a_resource_deserved_leaves_out_does_not_make_a_victim() -> None:
    # g is at its GPU share and holds most of the cpu; c is owed cpu and the cluster lacks
    # it. g's jobs are within g's share, the best-effort queue's job is the victim.
    queues = [queue("g", deserved={GPU: 4}), queue("c", deserved={"cpu": 32}), queue("e")]
    jobs = [
        gpu_running("g1", "g", 2, 20, at=30),
        gpu_running("g2", "g", 2, 20, at=40),
        running("e1", "e", cpu=8, admitted=10),
        running("c1", "c", cpu=8, admitted=5),
        job("c2", "c", cpu=16),
    ]
    nodes = [node(cpu=64, nvidia_com_gpu=4, memory="512Gi")]
    result = run_cycle(snapshot(queues, jobs, nodes, config=CAPACITY))
    assert decisions(result) == [("reclaim", "ns/e1"), ("admit", "ns/c2")]
    assert result.queues["g"].share == 1.0  # its GPUs; the cpu it uses is not part of it


def test_a_queue_that_deserves_nothing_stays_best_effort() -> None:
    queues = [queue("g", deserved={GPU: 4}), queue("e")]
    jobs = [gpu_running("g1", "g", 4, 8, at=10), gpu_job("e1", "e", 2, 2)]
    nodes = [node(cpu=64, nvidia_com_gpu=4, memory="512Gi")]
    result = run_cycle(snapshot(queues, jobs, nodes, config=CAPACITY))
    assert result.decisions == ()  # e is owed nothing, so takes nothing back
    assert result.queues["e"].share == 1.0


def test_a_named_resource_counts_in_full() -> None:
    # t's deserved names cpu too: one GPU is within its share, 12 cpu is not.
    queues = [queue("t", deserved={"cpu": 8, GPU: 4}), queue("o", deserved={GPU: 4})]
    jobs = [*(gpu_running(f"o{i}", "o", 2, 2, at=i) for i in range(4)), gpu_job("t1", "t", 1, 12)]
    nodes = [node(cpu=64, nvidia_com_gpu=8, memory="512Gi")]
    result = run_cycle(snapshot(queues, jobs, nodes, config=CAPACITY))
    assert result.decisions == ()
    small = [*jobs[:-1], gpu_job("t1", "t", 1, 8)]
    result = run_cycle(snapshot(queues, small, nodes, config=CAPACITY))
    assert decisions(result) == [("reclaim", "ns/o3"), ("admit", "ns/t1")]


def test_a_job_asking_for_nothing_its_queue_is_owed_is_best_effort_there() -> None:
    # A cpu-only job of a GPU-only queue: it cannot reclaim, and it is a victim even though
    # its queue is within its GPU share.
    queues = [queue("g", deserved={GPU: 4}), queue("c", deserved={"cpu": 16})]
    jobs = [
        gpu_running("g-gpu", "g", 2, 4, at=10),
        running("g-cpu", "g", cpu=12, admitted=5),
        job("c1", "c", cpu=8),
        job("g-more", "g", cpu=8),
    ]
    nodes = [node(cpu=20, nvidia_com_gpu=4, memory="512Gi")]
    result = run_cycle(snapshot(queues, jobs, nodes, config=CAPACITY))
    assert decisions(result) == [("reclaim", "ns/g-cpu"), ("admit", "ns/c1")]
    pending = {p.job for p in result.pending}
    assert {"ns/g-more", "ns/g-cpu"} <= pending


def test_victims_across_several_resources_stop_where_each_share_is_met() -> None:
    # b lacks 2 GPUs and 16 cpu. a is over its GPU share: its newest job frees 2 GPUs and
    # 8 cpu and brings it back to its share, so its older jobs stay; the best-effort job
    # frees the other 8 cpu it still lacks.
    queues = [queue("a", deserved={GPU: 4}), queue("b", deserved={GPU: 4}), queue("e")]
    jobs = [
        gpu_running("a1", "a", 2, 8, at=10),
        gpu_running("a2", "a", 2, 8, at=20),
        gpu_running("a3", "a", 2, 8, at=30),
        running("e1", "e", cpu=12, admitted=25),
        gpu_running("b1", "b", 2, 4, at=1),
        gpu_job("b2", "b", 2, 16),
    ]
    nodes = [node(cpu=40, nvidia_com_gpu=8, memory="512Gi")]
    result = run_cycle(snapshot(queues, jobs, nodes, config=CAPACITY))
    assert decisions(result) == [("reclaim", "ns/a3"), ("reclaim", "ns/e1"), ("admit", "ns/b2")]


def test_in_a_mixed_tree_the_sibling_gives_back_gpus_and_the_cpu_department_is_untouched() -> None:
    queues = [
        queue("research", deserved={GPU: 8}),
        queue("vision", "research", deserved={GPU: 4}),
        queue("nlp", "research", deserved={GPU: 4}),
        queue("production", deserved={"cpu": 32}),
        queue("etl", "production", deserved={"cpu": 32}),
    ]
    jobs = [
        *(gpu_running(f"nlp{i}", "nlp", 2, 4, at=10 * i) for i in range(4)),
        running("etl1", "etl", cpu=40, admitted=50),
        gpu_job("vision1", "vision", 2, 8),
    ]
    nodes = [node(cpu=64, nvidia_com_gpu=8, memory="512Gi")]
    result = run_cycle(snapshot(queues, jobs, nodes, config=CAPACITY))
    assert decisions(result) == [("reclaim", "ns/nlp3"), ("admit", "ns/vision1")]


# Volcano's capacity-plugin cases for GPU-only and partial deserved (its issue 4918), one pod
# per job: a node of 4 cpu, 8Gi and 4 or 1 GPUs.


def test_volcano_case_7_allocation_without_gpus_is_not_over_a_share_that_names_them() -> None:
    full = {"cpu": 2, "memory": "4Gi", GPU: 2}
    queues = [queue("queue14", deserved=full), queue("queue15"), queue("queue16", deserved=full)]
    jobs = [
        running("p22", "queue14", cpu=2, memory="4Gi", admitted=1),
        running("p23", "queue15", cpu=0, nvidia_com_gpu=1, admitted=2),
        running("p24", "queue16", cpu=2, memory="1Gi", nvidia_com_gpu=1, admitted=3),
        job("p25", "queue16", cpu=2, memory="3Gi", nvidia_com_gpu=1),
    ]
    nodes = [node(cpu=4, memory="8Gi", nvidia_com_gpu=4)]
    result = run_cycle(snapshot(queues, jobs, nodes, config=CAPACITY))
    assert result.decisions == ()  # as in Volcano: nothing is evicted


def _volcano_case_8(queue18_cpu: int) -> CycleResult:
    queues = [
        queue("queue17", deserved={"cpu": 2, "memory": "2Gi"}),
        queue("queue18", deserved={"cpu": queue18_cpu, "memory": "4Gi", GPU: 1}),
    ]
    jobs = [
        running("p26", "queue17", cpu=0, memory="4Gi", admitted=1),
        running("p27", "queue17", cpu=1, admitted=2),
        running("p28", "queue17", cpu=0, nvidia_com_gpu=1, admitted=3),
        running("p29", "queue18", cpu=2, memory="4Gi", admitted=4),
        job("p30", "queue18", cpu=1, nvidia_com_gpu=1),
    ]
    nodes = [node(cpu=4, memory="8Gi", nvidia_com_gpu=1)]
    return run_cycle(snapshot(queues, jobs, nodes, config=CAPACITY))


def test_volcano_case_8_evicts_only_the_job_on_the_dimension_the_reclaimer_lacks() -> None:
    # queue18 deserves 2 cpu and uses them: p30's cpu would take it past a resource its
    # deserved names, which sluice counts in full (Volcano reclaims when any one named
    # resource fits). With room for that cpu, the GPU job p28, best-effort in queue17 whose
    # deserved names no GPU, is the one victim, as in Volcano.
    assert _volcano_case_8(queue18_cpu=2).decisions == ()
    assert decisions(_volcano_case_8(queue18_cpu=3)) == [("reclaim", "ns/p28"), ("admit", "ns/p30")]


def test_volcano_case_9_a_gpu_only_queue_within_its_gpus_keeps_the_cpu_it_uses() -> None:
    queues = [
        queue("queue19", deserved={GPU: 1}),
        queue("queue20", deserved={"cpu": 2, "memory": "2Gi"}),
    ]
    jobs = [
        running("p31", "queue19", cpu=4, memory="4Gi", nvidia_com_gpu=1, admitted=1),
        job("p32", "queue20", cpu=1, memory="1Gi"),
    ]
    nodes = [node(cpu=4, memory="8Gi", nvidia_com_gpu=1)]
    result = run_cycle(snapshot(queues, jobs, nodes, config=CAPACITY))
    assert result.decisions == ()  # as in Volcano
