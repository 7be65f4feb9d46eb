"""Generated clusters for the scheduler benchmark, deterministic for a seed.

A three-level tree (departments -> teams -> leaf queues) with weights, some queue priorities and
deserved shares; a mix of CPU and GPU jobs of one to four pods, half admitted; nodes with and
without GPUs, the GPU ones tainted (GPU jobs tolerate it) and in two pools some jobs select.
Every node runs a DaemonSet pod; the admitted jobs' pods are bound to nodes first fit, the
ones that found no room left pending, as kube-scheduler would leave them. The snapshot is built
directly as the scheduler's input types so the benchmark times the cycle, not the generator;
``to_objects`` writes the same cluster as a ``kubectl get -o json`` List for timing the reader
of ``sluice simulate``; ``to_device_objects`` writes it with its GPUs handed out through Dynamic
Resource Allocation instead of as the extended resource ``nvidia.com/gpu``; ``with_resizable``
gives a quarter of its jobs a minimum size, some of them grown beyond their record.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sluice.api.admitted_size import SizeRecord
from sluice.api.config import SchedulerConfig
from sluice.api.constraints import PodSpecView, Taint, Toleration, interned
from sluice.api.flavor import FlavorView
from sluice.api.queue import Queue
from sluice.api.resources import Resources
from sluice.api.views import (
    MAIN_POD_SET,
    JobPhase,
    NodeView,
    PodSet,
    PodView,
    PriorityClassView,
    WorkloadView,
)
from sluice.scheduler.model import Snapshot
from sluice.scheduler.placement import Placement

START = datetime(2026, 1, 1, tzinfo=UTC)
GIB = 1024**3 * 1000  # milli-units
ALL_ACTIONS = ("enqueue", "allocate", "reclaim", "preempt", "backfill")
GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
GPU_TOLERATION = Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule")
GPU = "nvidia.com/gpu"
GPU_CLASS = "gpu.nvidia.com"
"""The DeviceClass (and the driver) of the GPUs ``to_device_objects`` hands out."""
DEVICE_MAPPING = f"deviceClassMappings:\n- name: {GPU}\n  deviceClassNames: [{GPU_CLASS}]\n"
"""scheduler.yaml's mapping under which the DRA GPUs count as ``nvidia.com/gpu``."""
DAEMON = Resources({"cpu": 100, "memory": GIB // 8})


@dataclass(frozen=True)
class Size:
    departments: int
    teams: int  # per department
    leaves: int  # per team
    pending: int
    admitted: int
    nodes: int

    @property
    def queues(self) -> int:
        teams = self.departments * self.teams
        return self.departments + teams + teams * self.leaves

    def scaled(self, factor: int) -> Size:
        return replace(
            self,
            departments=self.departments * factor,
            pending=self.pending * factor,
            admitted=self.admitted * factor,
            nodes=self.nodes * factor,
        )


BASE = Size(departments=10, teams=9, leaves=10, pending=20_000, admitted=20_000, nodes=2_000)
"""1,000 queues, 20,000 pending + 20,000 admitted jobs, 2,000 nodes."""


def _queue(name: str, parent: str, at: int, **spec: Any) -> Queue:
    return Queue.model_validate(
        {
            "name": name,
            "creation_timestamp": START + timedelta(seconds=at),
            "spec": {"parent": parent, **spec},
        }
    )


def generate(size: Size, seed: int = 1) -> Snapshot:
    rng = random.Random(seed)
    queues = [Queue(name="root")]
    leaves: list[str] = []
    at = 0
    for d in range(size.departments):
        department = f"d{d}"
        queues.append(_queue(department, "root", at, weight=rng.randint(1, 4)))
        for t in range(size.teams):
            team = f"{department}-t{t}"
            at += 1
            queues.append(_queue(team, department, at, weight=rng.randint(1, 4)))
            for leaf in range(size.leaves):
                name = f"{team}-q{leaf}"
                at += 1
                queues.append(
                    _queue(
                        name,
                        team,
                        at,
                        weight=rng.randint(1, 8),
                        priority=rng.choice((0, 0, 0, 10, 100)),
                        deserved={"cpu": str(rng.choice((8, 16, 32)))},
                    )
                )
                leaves.append(name)
    jobs: list[WorkloadView] = []
    for i in range(size.admitted + size.pending):
        admitted = i < size.admitted
        # Sized so that the admitted half fills about nine tenths of the nodes.
        pods = rng.choice((1, 1, 1, 2, 4))
        request = {
            "cpu": rng.choice((500, 1000, 1000, 2000, 2000)),
            "memory": rng.choice((1, 2, 4, 8)) * GIB,
        }
        gpu = rng.random() < 0.05
        if gpu:
            request["nvidia.com/gpu"] = rng.choice((1, 1, 2, 4)) * 1000
        pool = rng.choice((None, None, None, "a", "b"))
        # As the reader makes them: one object per distinct pod shape.
        pod = interned(
            PodSpecView(
                request=Resources(request),
                node_selector=(("pool", pool),) if pool else (),
                tolerations=(GPU_TOLERATION,) if gpu else (),
            )
        )
        created = START + timedelta(seconds=i)
        jobs.append(
            WorkloadView(
                namespace=f"team-{i % 100}",
                name=f"job-{i}",
                uid=f"uid-{i}",
                queue=rng.choice(leaves),
                request=pod.request.scale(pods),
                phase=JobPhase.RUNNING if admitted else JobPhase.PENDING,
                creation_timestamp=created,
                priority_class_name=rng.choice((None, None, "batch-high", "batch-low")),
                pod_sets=(PodSet(MAIN_POD_SET, pods, pod),),
                admitted_at=created if admitted else None,
            )
        )
    nodes = []
    for n in range(size.nodes):
        allocatable = {"cpu": 32_000, "memory": 256 * GIB}
        gpu = n % 4 == 0
        if gpu:
            allocatable["nvidia.com/gpu"] = 8_000
        nodes.append(
            NodeView(
                name=f"node-{n}",
                allocatable=Resources(allocatable),
                labels={"pool": "ab"[n % 2]},
                taints=(GPU_TAINT,) if gpu else (),
            )
        )
    return Snapshot(
        queues=queues,
        workloads=jobs,
        nodes=nodes,
        now=START + timedelta(days=1),
        priority_classes=[
            PriorityClassView("batch-high", 1000),
            PriorityClassView("batch-low", 10),
        ],
        config=SchedulerConfig(actions=ALL_ACTIONS),
        pods=_pods(jobs, nodes, START + timedelta(days=1)),
    )


FLAVOR_ZONES = ("x", "y", "z")
"""The zones of ``with_flavors``: one flavor per zone, every third node in each."""


def zoned(snapshot: Snapshot) -> Snapshot:
    """The nodes labelled ``zone`` x, y, z in turn: the cluster ``with_flavors`` splits, so
    that a run without flavors reads the same nodes."""
    nodes = [
        replace(n, labels={**n.labels, "zone": FLAVOR_ZONES[i % 3]})
        for i, n in enumerate(snapshot.nodes)
    ]
    return replace(snapshot, nodes=nodes)


def with_flavors(snapshot: Snapshot) -> Snapshot:
    """``zoned``, with a Flavor per zone and each department (the queues below root) holding
    cpu deserved in each of the three, in order: every pending job's pod sets are given one
    at admission. Admitted jobs record none and count in the queues' own fields."""
    flavors = [FlavorView(f"zone-{z}", {"zone": z}) for z in FLAVOR_ZONES]
    entries = [{"name": f.name, "deserved": {"cpu": "2000"}} for f in flavors]
    queues = [
        Queue.model_validate(
            {**q.model_dump(), "spec": {**q.spec.model_dump(), "flavors": entries}}
        )
        if q.spec.parent == "root"
        else q
        for q in snapshot.queues
    ]
    return replace(zoned(snapshot), queues=queues, flavors=flavors)


def chosen_resizable(index: int, job: WorkloadView) -> bool:
    """Whether ``with_resizable`` gives the ``index``-th job a minimum: five in eight of the
    jobs of more than one pod (two in five jobs ask 2 or 4 pods), a quarter of all jobs. A
    job of one pod cannot be admitted smaller, so it is never chosen."""
    return job.pod_sets[0].count > 1 and index % 8 < 5


def with_resizable(snapshot: Snapshot, grown: bool = False) -> Snapshot:
    """A quarter of the jobs resizable (docs/elastic.md): each chosen job (``chosen_resizable``)
    declares a minimum of half its pods, and every admitted one carries the record the operator
    writes (whole, as admitted): what the jobs hold and where their pods run is as in
    ``snapshot``. ``grown``: one in four of those admitted has grown since, its owner having
    raised its size by its minimum, whose pods wait gated and unbound as its growth: more
    pods wait than in ``snapshot``."""
    jobs: list[WorkloadView] = []
    raised: list[WorkloadView] = []
    for i, job in enumerate(snapshot.workloads):
        if not chosen_resizable(i, job):
            jobs.append(job)
            continue
        (main,) = job.pod_sets
        minimum = max(1, main.count // 2)
        sized = (SizeRecord(main.name, main.count, main.count),) if job.phase.admitted else ()
        pod_set = replace(main, min_count=minimum)
        if grown and job.phase.admitted and i % 32 < 5:  # one in four chosen and admitted
            more = main.count + minimum
            pod_set = replace(pod_set, count=more, pod_count=main.pod_count + minimum)
            raised.append(job)
        request = pod_set.pod.request.scale(pod_set.count)
        jobs.append(replace(job, pod_sets=(pod_set,), sized=sized, request=request))
    pods = list(snapshot.pods or ())
    seen = snapshot.now - timedelta(minutes=1)
    for job in raised:
        (main,) = job.pod_sets
        for n in range(main.count, main.count + max(1, main.count // 2)):
            pod = replace(_pod(job, n, None, seen), unschedulable="")
            pods.append(replace(pod, gated=True, gate_index=0, resizable=True))
    return replace(snapshot, workloads=jobs, pods=pods)


def _pods(jobs: list[WorkloadView], nodes: list[NodeView], now: datetime) -> list[PodView]:
    """A DaemonSet pod on every node, then the admitted jobs' pods bound first fit where they
    fit (largest jobs first), pending where they do not (created a minute ago: none has
    waited podsReadyTimeout yet)."""
    placement = Placement(nodes)
    pods = [PodView("kube-system", f"daemon-{node.name}", DAEMON, node=node.name) for node in nodes]
    placement.hold({i: dict(DAEMON) for i in range(len(nodes))})
    admitted = [j for j in jobs if j.phase.admitted]
    admitted.sort(key=lambda j: (-sum(j.pod_sets[0].pod.request.values()), j.name))
    for job in admitted:
        (main,) = job.pod_sets
        assignment = placement.place(main.pod, main.pod_count, partial=True) or []
        placement.hold(placement.footprint(main.pod, assignment))
        names = iter(range(job.pod_count))
        for i, count in assignment:
            for _ in range(count):
                pods.append(
                    _pod(job, next(names), placement.nodes[i].name, job.admitted_at or START)
                )
        pods.extend(_pod(job, n, None, now - timedelta(minutes=1)) for n in names)
    return pods


def _pod(job: WorkloadView, n: int, node: str | None, created: datetime) -> PodView:
    return PodView(
        job.namespace,
        f"{job.name}-{n}",
        job.pod_sets[0].pod.request,
        node=node,
        job_uid=job.uid,
        creation_timestamp=created,
        unschedulable="" if node else "Unschedulable: 0/2000 nodes are available",
    )


def to_objects(snapshot: Snapshot) -> dict[str, Any]:
    """The cluster as ``kubectl get queues,jobs,pods,nodes,priorityclasses -A -o json`` prints
    it."""
    items: list[dict[str, Any]] = []
    for queue in snapshot.queues:
        obj = queue.to_object()
        obj["metadata"]["creationTimestamp"] = queue.creation_timestamp.isoformat()
        items.append(obj)
    items.extend(_job(job) for job in snapshot.workloads)
    items.extend(_pod_object(pod) for pod in snapshot.pods or ())
    for node in snapshot.nodes:
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node.name, "labels": dict(node.labels)},
                "spec": {
                    "taints": [
                        {"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints
                    ]
                },
                "status": {
                    "allocatable": node.allocatable.to_kube(),
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    for pc in snapshot.priority_classes:
        items.append(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": pc.name},
                "value": pc.value,
            }
        )
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _job(job: WorkloadView) -> dict[str, Any]:
    (main,) = job.pod_sets
    pod: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"requests": main.pod.request.to_kube()}}]
    }
    if main.pod.node_selector:
        pod["nodeSelector"] = dict(main.pod.node_selector)
    if main.pod.tolerations:
        pod["tolerations"] = [
            {"key": t.key, "operator": t.operator, "effect": t.effect} for t in main.pod.tolerations
        ]
    if job.priority_class_name:
        pod["priorityClassName"] = job.priority_class_name
    meta: dict[str, Any] = {
        "name": job.name,
        "namespace": job.namespace,
        "uid": job.uid,
        "labels": {"sluice.dev/queue-name": job.queue},
        "creationTimestamp": job.creation_timestamp.isoformat(),
    }
    if job.admitted_at is not None:
        meta["annotations"] = {"sluice.dev/admitted-at": job.admitted_at.isoformat()}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "suspend": not job.phase.admitted,
            "parallelism": main.count,
            "completions": main.count,
            "template": {"spec": pod},
        },
        "status": {"active": 1} if job.phase is JobPhase.RUNNING else {},
    }


def _pod_object(pod: PodView) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": pod.name,
        "namespace": pod.namespace,
        "creationTimestamp": pod.creation_timestamp.isoformat(),
    }
    if pod.job_uid:
        meta["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "uid": pod.job_uid, "controller": True}
        ]
    status: dict[str, Any] = {"phase": "Running" if pod.node else "Pending"}
    if pod.unschedulable:
        reason, _, message = pod.unschedulable.partition(": ")
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
        ]
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"requests": pod.request.to_kube()}}]
    }
    if pod.node:
        spec["nodeName"] = pod.node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def to_device_objects(snapshot: Snapshot) -> dict[str, Any]:
    """The cluster of ``to_objects`` with its GPUs handed out through DRA (resource.k8s.io/v1),
    as the API server returns the objects: a DeviceClass; per GPU node one ResourceSlice of
    its devices, the node no longer advertising ``nvidia.com/gpu``; per namespace one
    ResourceClaimTemplate per GPU count its Jobs ask, each GPU Job's pod template naming it;
    per pod of an admitted GPU Job the claim the resourceclaim controller makes from it (owned
    by the pod, named in its status), allocated on the pod's node as kube-scheduler writes it
    when the pod is bound. Every other object is as ``to_objects`` writes it."""
    items: list[dict[str, Any]] = [_device_class()]
    templates: set[tuple[str, int]] = set()
    next_device: dict[str, int] = {}
    for obj in to_objects(snapshot)["items"]:
        kind = obj["kind"]
        if kind == "Job":
            count = _claim_instead(obj["spec"]["template"]["spec"], obj["metadata"]["namespace"])
            if count:
                templates.add((obj["metadata"]["namespace"], count))
        elif kind == "Pod":
            count = _claim_instead(obj["spec"], obj["metadata"]["namespace"])
            if count:
                items.append(_generated_claim(obj, count, next_device))
        elif kind == "Node":
            gpus = obj["status"]["allocatable"].pop(GPU, None)
            if gpus is not None:
                items.append(_resource_slice(obj["metadata"]["name"], int(gpus)))
        items.append(obj)
    items.extend(_claim_template(namespace, count) for namespace, count in sorted(templates))
    return {"apiVersion": "v1", "kind": "List", "items": items}


CLAIM = "gpus"
"""The name of the GPU claim in every pod spec ``to_device_objects`` writes."""


def _claim_instead(spec: dict[str, Any], namespace: str) -> int:
    """A pod spec's GPUs asked through a template claim instead of its container's requests;
    how many (0: it asks none)."""
    (container,) = spec["containers"]
    gpus = container["resources"]["requests"].pop(GPU, None)
    if gpus is None:
        return 0
    count = int(gpus)
    container["resources"]["claims"] = [{"name": CLAIM}]
    spec["resourceClaims"] = [{"name": CLAIM, "resourceClaimTemplateName": f"gpu-{count}"}]
    return count


def _device_class() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": GPU_CLASS},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{GPU_CLASS}'"}}]},
    }


def _resource_slice(node: str, gpus: int) -> dict[str, Any]:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "index": {"int": i},
                "type": {"string": "gpu"},
                "productName": {"string": "NVIDIA H100 80GB HBM3"},
                "driverVersion": {"version": "570.124.6"},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(gpus)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{GPU_CLASS}"},
        "spec": {
            "driver": GPU_CLASS,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _claim_spec(count: int) -> dict[str, Any]:
    exactly = {"deviceClassName": GPU_CLASS, "allocationMode": "ExactCount", "count": count}
    return {"devices": {"requests": [{"name": CLAIM, "exactly": exactly}]}}


def _claim_template(namespace: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": f"gpu-{count}", "namespace": namespace},
        "spec": {"metadata": {}, "spec": _claim_spec(count)},
    }


def _generated_claim(
    pod: dict[str, Any], count: int, next_device: dict[str, int]
) -> dict[str, Any]:
    """The claim the resourceclaim controller makes for ``pod`` from its template, named in
    the pod's status; allocated ``count`` devices of its node when the pod is bound (the
    node's devices handed out in order)."""
    meta = pod["metadata"]
    name = f"{meta['name']}-{CLAIM}-x7k2q"
    pod["status"]["resourceClaimStatuses"] = [{"name": CLAIM, "resourceClaimName": name}]
    claim: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "generateName": f"{meta['name']}-{CLAIM}-",
            "namespace": meta["namespace"],
            "annotations": {"resource.kubernetes.io/pod-claim-name": CLAIM},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "controller": True}
            ],
        },
        "spec": _claim_spec(count),
        "status": {},
    }
    node = pod["spec"].get("nodeName")
    if node:
        first = next_device.get(node, 0)
        next_device[node] = first + count
        results = [
            {"request": CLAIM, "driver": GPU_CLASS, "pool": node, "device": f"gpu-{i}"}
            for i in range(first, first + count)
        ]
        claim["status"] = {
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": meta["name"]}],
        }
    return claim
