"""Readable snapshots for scheduler tests: queues, jobs and nodes in one line each."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sluice.api.config import SchedulerConfig, parse_scheduler_config
from sluice.api.constraints import NodeRequirement, PodSpecView, Taint, Toleration
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

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)


ALIASES = {"nvidia_com_gpu": "nvidia.com/gpu"}


def res(**amounts: float | str) -> Resources:
    return Resources.parse({ALIASES.get(k, k): v for k, v in amounts.items()})


def queue(name: str, parent: str | None = None, *, created: int = 0, **spec: Any) -> Queue:
    body: dict[str, Any] = {}
    for key, value in spec.items():
        if key == "guarantee":
            body["guarantee"] = {"resource": value}
        elif key == "priority_class_name":
            body["priorityClassName"] = value
        elif key == "dequeue":
            body["dequeueStrategy"] = value
        else:
            body[key] = value
    if parent is not None:
        body["parent"] = parent
    return Queue.from_object(
        {
            "metadata": {
                "name": name,
                "creationTimestamp": (T0 + timedelta(seconds=created)).isoformat(),
            },
            "spec": body,
        }
    )


def job(
    name: str,
    queue_name: str,
    *,
    cpu: float | str = 1,
    phase: JobPhase = JobPhase.PENDING,
    created: int = 0,
    admitted: int | None = None,
    priority_class: str | None = None,
    preemptable: bool = True,
    **other: float | str,
) -> WorkloadView:
    request = res(cpu=cpu, **other)
    return WorkloadView(
        namespace="ns",
        name=name,
        queue=queue_name,
        request=request,
        phase=phase,
        creation_timestamp=T0 + timedelta(seconds=created),
        priority_class_name=priority_class,
        admitted_at=(
            T0 + timedelta(seconds=admitted)
            if admitted is not None
            else (T0 if phase.admitted else None)
        ),
        preemptable=preemptable,
    )


def running(name: str, queue_name: str, **kw: Any) -> WorkloadView:
    return job(name, queue_name, phase=JobPhase.RUNNING, **kw)


def node(
    name: str = "n1",
    *,
    labels: dict[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    ready: bool = True,
    cordoned: bool = False,
    **allocatable: float | str,
) -> NodeView:
    return NodeView(
        name=name,
        allocatable=res(**allocatable),
        ready=ready,
        schedulable=not cordoned,
        labels=labels or {},
        taints=taints,
    )


def gang(
    name: str,
    queue_name: str,
    pods: int,
    *,
    selector: dict[str, str] | None = None,
    affinity: tuple[tuple[NodeRequirement, ...], ...] | None = None,
    tolerations: tuple[Toleration, ...] = (),
    phase: JobPhase = JobPhase.PENDING,
    **per_pod: Any,
) -> WorkloadView:
    """A job of `pods` pods, each asking `per_pod` (plus the keywords of job())."""
    options = {k: per_pod.pop(k) for k in list(per_pod) if k in JOB_OPTIONS}
    pod = PodSpecView(
        request=res(**per_pod),
        node_selector=tuple(sorted((selector or {}).items())),
        affinity=affinity,
        tolerations=tolerations,
    )
    base = job(name, queue_name, phase=phase, cpu=0, **options)
    return replace(
        base,
        uid=f"uid-{name}",
        request=pod.request.scale(pods),
        pod_sets=(PodSet(MAIN_POD_SET, pods, pod),),
    )


JOB_OPTIONS = ("created", "admitted", "priority_class", "preemptable")


def pod(
    name: str,
    node_name: str | None,
    *,
    owner: WorkloadView | None = None,
    created: int | None = None,
    finished: bool = False,
    terminating: bool = False,
    unschedulable: str = "",
    **request: float | str,
) -> PodView:
    """A pod bound to `node_name` (None: not scheduled), of `owner` when given; created
    `created` seconds after T0, or when its owner was admitted."""
    if created is not None:
        at = T0 + timedelta(seconds=created)
    else:
        at = (owner.admitted_at if owner else None) or T0
    return PodView(
        namespace="ns",
        name=name,
        request=res(**request) if request else (owner.pod_sets[0].pod.request if owner else res()),
        node=node_name,
        finished=finished,
        terminating=terminating,
        job_uid=owner.uid if owner else "",
        creation_timestamp=at,
        unschedulable=unschedulable,
    )


def snapshot(
    queues: list[Queue],
    jobs: list[WorkloadView],
    nodes: list[NodeView],
    *,
    config: dict[str, Any] | None = None,
    priority_classes: dict[str, int] | None = None,
    now: datetime = NOW,
    pods: list[PodView] | None = None,
) -> Snapshot:
    cfg = parse_scheduler_config(config) if config is not None else SchedulerConfig()
    return Snapshot(
        queues=[queue("root"), *queues] if all(q.name != "root" for q in queues) else queues,
        workloads=jobs,
        nodes=nodes,
        now=now,
        priority_classes=[PriorityClassView(n, v) for n, v in (priority_classes or {}).items()],
        config=cfg,
        pods=pods,
    )
