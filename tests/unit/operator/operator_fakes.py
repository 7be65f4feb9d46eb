"""In-memory stand-ins for the Kubernetes APIs the operator's writers use.

They keep objects as plain dicts, apply JSON merge patches, honour resourceVersion
preconditions with a 409 like the API server, and record every call in order.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import ProtocolError

from sluice.operator.custom_writer import CustomWriter
from sluice.operator.events import EventSink
from sluice.operator.executor import Executor
from sluice.operator.plan import plan
from sluice.operator.queue_reconciler import QueueReconciler, QueueWriter
from sluice.operator.state import ClusterState
from sluice.operator.writes import Basis
from sluice.scheduler.model import CycleResult


def merge(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


class FakeCluster:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}  # "job/ns/name" or "queue/name"
        self.calls: list[tuple[str, str]] = []  # (verb, key)
        self.events: list[dict[str, Any]] = []
        self.refuse: set[str] = set()  # keys whose next writes fail with 403
        self.lose_answer: set[str] = set()  # keys whose writes happen but whose answer is lost
        # A validating webhook on creates: the message it refuses a body with, or None.
        self.webhook: Callable[[dict[str, Any]], str | None] = lambda body: None
        self.version = 100

    def add(self, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.objects[key] = obj
        return copy.deepcopy(obj)

    def patch(self, key: str, body: dict[str, Any], verb: str = "patch") -> dict[str, Any]:
        self.calls.append((verb, key))
        if key in self.refuse:
            raise ApiException(status=403, reason="Forbidden")
        stored = self.objects.get(key)
        if stored is None:
            raise ApiException(status=404, reason="NotFound")
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != stored["metadata"]["resourceVersion"]:
            raise ApiException(status=409, reason="Conflict")
        uid = (body.get("metadata") or {}).get("uid")
        if uid is not None and uid != stored["metadata"].get("uid"):
            raise ApiException(status=422, reason="Invalid")  # metadata.uid is immutable
        merge(stored, copy.deepcopy(body))
        self.version += 1
        stored["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(stored)

    def answer(self, key: str, body: dict[str, Any]) -> RawResponse:
        """A patch as a writer's raw answer, lost on the way back for keys in lose_answer."""
        answer = RawResponse(self.patch(key, body))
        if key in self.lose_answer:
            raise ProtocolError("Connection aborted.", ConnectionResetError(104, "reset"))
        return answer


class RawResponse:
    """What the client hands back with ``_preload_content=False``."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self.data = json.dumps(obj).encode()
        self.released = False

    def release_conn(self) -> None:
        self.released = True


class FakeCore:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

    def create_namespaced_event(
        self, namespace: str, event: dict[str, Any], **_: Any
    ) -> RawResponse:
        self.cluster.calls.append(("event", f"job/{namespace}/{event['involvedObject']['name']}"))
        self.cluster.events.append(event)
        return RawResponse(event)


def _key(plural: str, namespace: str, name: str) -> str:
    """A workload's key in the fake cluster: "job/ns/name" for a batch/v1 Job."""
    return f"{'job' if plural == 'jobs' else plural}/{namespace}/{name}"


class FakeObjects:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

    def patch_cluster_custom_object(
        self, group: str, version: str, plural: str, name: str, body: dict[str, Any], **_: Any
    ) -> dict[str, Any]:
        return self.cluster.patch(f"queue/{name}", body)

    def patch_cluster_custom_object_status(
        self, group: str, version: str, plural: str, name: str, body: dict[str, Any], **_: Any
    ) -> dict[str, Any]:
        key = f"queue/{name}" if plural == "queues" else f"{plural}/{name}"
        return self.cluster.patch(key, body, "status")

    def create_cluster_custom_object(
        self, group: str, version: str, plural: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        key = f"queue/{body['metadata']['name']}"
        self.cluster.calls.append(("create", key))
        if key in self.cluster.objects:
            raise ApiException(status=409, reason="AlreadyExists")
        refusal = self.cluster.webhook(body)
        if refusal is not None:
            denied = ApiException(status=400, reason="BadRequest")
            said = f"admission webhook denied the request: {refusal}"
            denied.body = json.dumps({"message": said})
            raise denied
        return self.cluster.add(key, copy.deepcopy(body))

    def patch_namespaced_custom_object(
        self,
        group: str,
        version: str,
        namespace: str,
        plural: str,
        name: str,
        body: dict[str, Any],
        **_: Any,
    ) -> RawResponse:
        return self.cluster.answer(_key(plural, namespace, name), body)

    def get_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, name: str, **_: Any
    ) -> RawResponse:
        stored = self.cluster.objects.get(_key(plural, namespace, name))
        if stored is None:
            raise ApiException(status=404, reason="NotFound")
        return RawResponse(stored)

    def delete_cluster_custom_object(
        self, group: str, version: str, plural: str, name: str
    ) -> None:
        key = f"queue/{name}"
        self.cluster.calls.append(("delete", key))
        if key not in self.cluster.objects:
            raise ApiException(status=404, reason="NotFound")
        self.cluster.objects[key]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"


def fake_executor() -> tuple[Executor, FakeCluster, ClusterState]:
    cluster = FakeCluster()
    state = ClusterState()
    executor = Executor(client.ApiClient(), state)
    executor.core = FakeCore(cluster)  # type: ignore[assignment]
    executor.custom = executor.reads = FakeObjects(cluster)  # type: ignore[assignment]
    return executor, cluster, state


def fake_custom_writer() -> tuple[CustomWriter, FakeCluster, ClusterState]:
    """A writer of custom objects whose Events go to the fake cluster too."""
    cluster = FakeCluster()
    state = ClusterState()
    writer = CustomWriter(client.ApiClient(), state)
    writer.objects = FakeObjects(cluster)  # type: ignore[assignment]
    writer.events = EventSink(FakeCore(cluster).create_namespaced_event)
    return writer, cluster, state


def fake_queue_writer() -> tuple[QueueWriter, FakeCluster, ClusterState]:
    """A Queue writer whose Events go to the fake cluster too."""
    custom, cluster, state = fake_custom_writer()
    return QueueWriter(custom), cluster, state


def fake_reconciler(
    may_write: Callable[[], bool],
) -> tuple[QueueReconciler, FakeCluster, ClusterState]:
    cluster = FakeCluster()
    state = ClusterState()
    reconciler = QueueReconciler(client.ApiClient(), state, may_write)
    reconciler.writer.custom.objects = FakeObjects(cluster)  # type: ignore[assignment]
    return reconciler, cluster, state


def job(cluster: FakeCluster, state: ClusterState, name: str, **annotations: str) -> dict[str, Any]:
    """A suspended managed job, stored in the fake cluster and seen by the operator."""
    seen = cluster.add(f"job/ns/{name}", job_object(name, **annotations))
    state.on_workload("ADDED", seen)
    return seen


def job_object(name: str, **annotations: str) -> dict[str, Any]:
    """A suspended managed job in namespace ns, queue team."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": {"sluice.dev/queue-name": "team"},
            "annotations": {f"sluice.dev/{k.replace('_', '-')}": v for k, v in annotations.items()},
        },
        "spec": {"suspend": True},
    }


def queue(cluster: FakeCluster, state: ClusterState, name: str, **meta: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "scheduling.sluice.dev/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "generation": 1, **meta.pop("metadata", {})},
        "spec": meta.pop("spec", {} if name == "root" else {"parent": "root"}),
        **meta,
    }
    seen = cluster.add(f"queue/{name}", body)
    state.on_queue("ADDED", seen)
    return seen


def apply_result(
    executor: Executor,
    cycle: CycleResult,
    now: datetime,
    may_write: Callable[[], bool] = lambda: True,
    decided_on: Mapping[str, Basis] | None = None,
) -> bool:
    """What the loop does with a cycle's result: plan it, then carry the plan out."""
    writes = plan(
        cycle,
        executor.state.workloads,
        executor.state.workload_views,
        decided_on or {},
        now,
        executor.clock(),
        executor.positions_written,
    )
    done = executor.run(writes, may_write)
    executor.events.join()
    return done
