"""What an admitted workload holds once its pods exist (docs/scheduler.md, *What a workload
holds*): its pods are matched to its pod sets by the labels their controller gives them, not
by their size; a bound pod takes its own request on its node in place of one pod of its set's
reservation; its queues are allocated, per pod set, the larger of what it was admitted with
and what its live pods ask; a queue that so holds more than its capability admits nothing
more below it that asks for a resource it is over in, and says why, and nothing is evicted
for it (tests/unit/scheduler/test_over_capability.py has the rule in full)."""

from __future__ import annotations

from dataclasses import replace

from builders import gang, job, node, pod, queue, res, snapshot

from sluice.api.constraints import PodSpecView
from sluice.api.views import JobPhase, PodSet, PodView, WorkloadView
from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.model import CycleResult
from sluice.scheduler.session import Session

ONLY_ADMIT = {"actions": "enqueue"}
CLUSTER = "ray.io/cluster"
GROUP = "ray.io/group"
NODE_TYPE = "ray.io/node-type"
JOB_NAME = "batch.kubernetes.io/job-name"


def ray(name: str, queue_name: str, workers: int, **kw: object) -> WorkloadView:
    """A RayJob as its adapter reads it: a head of cpu 1, workers of cpu 1 and memory 256Mi
    (KubeRay's init container), KubeRay's submitter of cpu 500m."""
    sets = (
        PodSet("head", 1, PodSpecView(res(cpu=1, memory="1Gi")), pods_by=(NODE_TYPE, "head")),
        PodSet(
            "workers",
            workers,
            PodSpecView(res(cpu=1, memory="256Mi")),
            pods_by=(GROUP, "workers"),
        ),
        PodSet("submitter", 1, PodSpecView(res(cpu="500m")), pods_by=(JOB_NAME, name)),
    )
    total = res()
    for one in sets:
        total = total + one.request
    base = job(name, queue_name, **kw)  # type: ignore[arg-type]
    return replace(
        base,
        kind="RayJob",
        uid=f"uid-{name}",
        request=total,
        pod_sets=sets,
        pods_by=((CLUSTER, f"{name}-raycluster"), (JOB_NAME, name)),
    )


def ray_pod(
    owner: WorkloadView, name: str, node_name: str, role: tuple[str, str], **req: object
) -> PodView:
    labels = ((CLUSTER, f"{owner.name}-raycluster"), role)
    if role[0] == JOB_NAME:
        labels = (role,)  # the submitter's pod carries only the Job controller's labels
    # Created after its admission (a second after T0), as its controller makes them.
    made = pod(name, node_name, created=2, **req)  # type: ignore[arg-type]
    return replace(made, named_by=labels)


def running_ray(
    name: str, queue_name: str, node_name: str, extra_memory: str = "0"
) -> tuple[WorkloadView, list[PodView]]:
    """A running RayJob of 2 workers and its pods on one node, each worker asking
    ``extra_memory`` more than its template (a sidecar nobody declared)."""
    view = ray(name, queue_name, 2, phase=JobPhase.RUNNING, admitted=1)
    worker_memory = res(memory="256Mi") + res(memory=extra_memory)
    pods = [
        ray_pod(view, f"{name}-head", node_name, (NODE_TYPE, "head"), cpu=1, memory="1Gi"),
        *(
            ray_pod(
                view,
                f"{name}-worker-{i}",
                node_name,
                (GROUP, "workers"),
                cpu=1,
                memory=worker_memory.to_kube()["memory"],
            )
            for i in range(2)
        ),
        ray_pod(view, f"{name}-submit", node_name, (JOB_NAME, name), cpu="500m"),
    ]
    return view, pods


def admitted(result: CycleResult) -> list[str]:
    return [d.job.split("/")[1] for d in result.decisions if d.action == "admit"]


def reason(result: CycleResult, name: str) -> str:
    return next(p.reason for p in result.pending if p.job == f"ns/{name}").partition("; ")[2]


def test_a_workloads_pods_count_once_on_the_nodes_whatever_their_size() -> None:
    # The RayJob's pods ask cpu 3500m on n1 (8): a Job of exactly the cpu left goes in. Were
    # its pods told apart by size, the workers (whose template lacks the init container's
    # memory) and the submitter would count twice: as someone else's and as its reservation.
    view, pods = running_ray("r", "q", "n1")
    sets = view.pod_sets
    template_view = replace(
        view,
        pod_sets=(sets[0], replace(sets[1], pod=PodSpecView(res(cpu=1))), sets[2]),
    )
    nodes = [node("n1", cpu=8, memory="64Gi")]
    fill = gang("fill", "q", 9, cpu="500m", created=2)
    result = run_cycle(
        snapshot([queue("q")], [template_view, fill], nodes, config=ONLY_ADMIT, pods=pods)
    )
    assert admitted(result) == ["fill"]
    state = snapshot([queue("q")], [template_view, fill], nodes, config=ONLY_ADMIT, pods=pods)
    session = Session(state)
    assert session.used == {"cpu": 3500, "memory": 1024 * 1024**2 * 3 // 2 * 1000}


def test_the_submitter_pod_is_the_rayjobs_own() -> None:
    view, pods = running_ray("r", "q", "n1")
    session = Session(snapshot([queue("q")], [view], [node("n1", cpu=8)], pods=pods))
    (info,) = session.queues["q"].admitted_jobs
    assert sorted(p.name for p in info.pods) == ["r-head", "r-submit", "r-worker-0", "r-worker-1"]
    # Nothing of it is kept on the nodes besides its pods: all of them are bound.
    assert info.footprint == {0: {"cpu": 3500, "memory": 1536 * 1024**2 * 1000}}


def test_a_queue_is_allocated_what_its_pods_really_ask_per_pod_set() -> None:
    # Each worker asks 1Gi more than admitted (a sidecar): the queue holds 2Gi more memory.
    view, pods = running_ray("r", "q", "n1", extra_memory="1Gi")
    state = snapshot([queue("q")], [view], [node("n1", cpu=8, memory="64Gi")], pods=pods)
    result = run_cycle(state)
    assert result.queues["q"].allocated == view.request + res(memory="2Gi")


def test_a_set_whose_pods_ask_less_still_holds_what_it_was_admitted_with() -> None:
    view, pods = running_ray("r", "q", "n1")
    small = [replace(p, request=res(cpu="100m")) if "worker" in p.name else p for p in pods]
    state = snapshot([queue("q")], [view], [node("n1", cpu=8, memory="64Gi")], pods=small)
    assert run_cycle(state).queues["q"].allocated == view.request


def test_pods_of_its_own_in_no_pod_set_count_as_they_run() -> None:
    view, pods = running_ray("r", "q", "n1")
    extra = ray_pod(view, "r-initializer", "n1", ("ray.io/group", "initializer"), cpu=2)
    state = snapshot([queue("q")], [view], [node("n1", cpu=8, memory="64Gi")], pods=[*pods, extra])
    assert run_cycle(state).queues["q"].allocated == view.request + res(cpu=2)


def test_terminating_pods_hold_their_node_but_not_their_queue() -> None:
    view, pods = running_ray("r", "q", "n1")
    leaving = replace(pods[1], name="r-worker-old", terminating=True, request=res(cpu=4))
    state = snapshot(
        [queue("q")], [view], [node("n1", cpu=8, memory="64Gi")], pods=[*pods, leaving]
    )
    session = Session(state)
    assert session.queues["q"].allocated == dict(view.request.amounts)
    assert session.used["cpu"] == 3500 + 4000


def test_a_queue_over_its_capability_admits_nothing_more_that_asks_for_it_and_says_why() -> None:
    view, pods = running_ray("r", "team", "n1", extra_memory="2Gi")
    capped = queue("team", capability={"memory": "4Gi"})
    hungry = job("hungry", "team", cpu=1, memory="1Gi", created=5)
    later = job("later", "team", cpu=1, created=6)  # asks no memory at all
    nodes = [node("n1", cpu=64, memory="64Gi")]
    result = run_cycle(snapshot([capped], [view, hungry, later], nodes, pods=pods))
    assert admitted(result) == ["later"]
    assert not [d for d in result.decisions if d.action != "admit"]  # nothing is evicted
    # Admitted with memory 1536Mi, its pods ask 5632Mi: each worker 2Gi more.
    over = "memory 5632Mi > capability 4Gi; pods ask more than admitted: ns/r memory 4Gi"
    assert result.queues["team"].over_capability == over
    assert reason(result, "hungry") == (
        "queue team is over its capability in memory, and admits nothing more that asks for it"
        f" until it fits again: {over}"
    )


def test_a_queue_over_its_capability_blocks_its_children_and_fits_again_when_pods_go() -> None:
    view, pods = running_ray("r", "a", "n1", extra_memory="2Gi")
    queues = [queue("dept", capability={"memory": "4Gi"}), queue("a", "dept"), queue("b", "dept")]
    other = job("other", "b", cpu=1, memory="1Gi", created=5)
    nodes = [node("n1", cpu=64, memory="64Gi")]
    result = run_cycle(snapshot(queues, [view, other], nodes, pods=pods))
    assert admitted(result) == []
    assert reason(result, "other").startswith(
        "queue dept (ancestor of b) is over its capability in memory"
    )
    # Without the sidecar its pods fit the capability again, and the queue admits.
    fine = [
        replace(p, request=res(cpu=1, memory="256Mi")) if "worker" in p.name else p for p in pods
    ]
    again = run_cycle(snapshot(queues, [view, other], nodes, pods=fine))
    assert admitted(again) == ["other"]
    assert again.queues["dept"].over_capability == ""
