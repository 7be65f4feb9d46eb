"""Generated clusters for the scheduler benchmark, deterministic for a seed.

A three-level tree (departments -> teams -> leaf queues) with weights, some queue priorities and
deserved shares; a mix of CPU and GPU jobs, half admitted; nodes with and without GPUs. The
snapshot is built directly as the scheduler's input types so the benchmark times the cycle, not
the generator; ``to_objects`` writes the same cluster as a ``kubectl get -o json`` List for
timing the reader of ``sluice simulate``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sluice.api.config import SchedulerConfig
from sluice.api.queue import Queue
from sluice.api.resources import Resources
from sluice.api.views import JobPhase, JobView, NodeView, PriorityClassView
from sluice.scheduler.model import Snapshot

START = datetime(2026, 1, 1, tzinfo=UTC)
GIB = 1024**3 * 1000  # milli-units
ALL_ACTIONS = ("enqueue", "allocate", "reclaim", "preempt", "backfill")


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
    jobs: list[JobView] = []
    for i in range(size.admitted + size.pending):
        admitted = i < size.admitted
        request = {"cpu": rng.choice((1, 2, 4, 8)) * 1000, "memory": rng.choice((2, 8, 32)) * GIB}
        if rng.random() < 0.2:
            request["nvidia.com/gpu"] = rng.choice((1, 2, 4, 8)) * 1000
        created = START + timedelta(seconds=i)
        jobs.append(
            JobView(
                namespace=f"team-{i % 100}",
                name=f"job-{i}",
                queue=rng.choice(leaves),
                request=Resources(request),
                phase=JobPhase.RUNNING if admitted else JobPhase.PENDING,
                creation_timestamp=created,
                priority_class_name=rng.choice((None, None, "batch-high", "batch-low")),
                admitted_at=created if admitted else None,
            )
        )
    nodes = []
    for n in range(size.nodes):
        allocatable = {"cpu": 32_000, "memory": 256 * GIB}
        if n % 4 == 0:
            allocatable["nvidia.com/gpu"] = 8_000
        nodes.append(NodeView(name=f"node-{n}", allocatable=Resources(allocatable)))
    return Snapshot(
        queues=queues,
        jobs=jobs,
        nodes=nodes,
        now=START + timedelta(days=1),
        priority_classes=[
            PriorityClassView("batch-high", 1000),
            PriorityClassView("batch-low", 10),
        ],
        config=SchedulerConfig(actions=ALL_ACTIONS),
    )


def to_objects(snapshot: Snapshot) -> dict[str, Any]:
    """The cluster as ``kubectl get queues,jobs,nodes,priorityclasses -A -o json`` prints it."""
    items: list[dict[str, Any]] = []
    for queue in snapshot.queues:
        obj = queue.to_object()
        obj["metadata"]["creationTimestamp"] = queue.creation_timestamp.isoformat()
        items.append(obj)
    items.extend(_job(job) for job in snapshot.jobs)
    for node in snapshot.nodes:
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node.name},
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


def _job(job: JobView) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"requests": job.request.to_kube()}}]
    }
    if job.priority_class_name:
        pod["priorityClassName"] = job.priority_class_name
    meta: dict[str, Any] = {
        "name": job.name,
        "namespace": job.namespace,
        "labels": {"sluice.dev/queue-name": job.queue},
        "creationTimestamp": job.creation_timestamp.isoformat(),
    }
    if job.admitted_at is not None:
        meta["annotations"] = {"sluice.dev/admitted-at": job.admitted_at.isoformat()}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {"suspend": not job.phase.admitted, "template": {"spec": pod}},
        "status": {"active": 1} if job.phase is JobPhase.RUNNING else {},
    }
