"""Writing a cycle's results: victims first, then admissions, then queue lifecycle, then
pending reasons and Queue statuses, each only when it changes something.

Every Job write carries the resourceVersion the cycle saw, so a write based on a stale view
fails with 409 instead of acting on it (the next cycle decides again), and the Job object
itself records admission, so a crash between two writes loses nothing and repeats nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from sluice.api.constants import (
    ADMITTED_AT_ANNOTATION,
    CLOSED_BY_PARENT_ANNOTATION,
    CONDITION_VALID,
    GROUP,
    PENDING_REASON_ANNOTATION,
    PLURAL,
    QUEUE_FINALIZER,
    QUEUE_LABEL,
    RECLAIMED_BY_ANNOTATION,
    REQUEUE_REASON_ANNOTATION,
    REQUEUED_AT_ANNOTATION,
    REQUEUES_ANNOTATION,
    ROOT_QUEUE,
    VERSION,
)
from sluice.api.views import parse_time, split_pending_reason
from sluice.operator.state import ClusterState, Obj, job_key
from sluice.operator.status import queue_status, status_differs
from sluice.scheduler.model import CycleResult, Decision
from sluice.scheduler.readiness import backoff_reason

log = logging.getLogger("sluice.operator.apply")

REPORTER = "sluice-operator"
MERGE_PATCH = "application/merge-patch+json"

POSITION_REFRESH = 30.0
"""Seconds between two writes of a pending job's reason that differ only in its position."""


@dataclass
class WriteStats:
    writes: int = 0
    conflicts: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def conflict(self) -> None:
        with self.lock:
            self.conflicts += 1

    def count(self, kind: str) -> None:
        with self.lock:
            self.writes += 1
            self.by_kind[kind] = self.by_kind.get(kind, 0) + 1


def _message(err: ApiException) -> str:
    try:
        return str(json.loads(err.body or "").get("message", err.reason))
    except (TypeError, ValueError):
        return str(err.reason)


Basis = tuple[int, str]
"""What a decision about a Job rests on: its spec's generation and its queue."""


def basis(obj: Obj) -> Basis:
    meta = obj.get("metadata") or {}
    queue = (meta.get("labels") or {}).get(QUEUE_LABEL) or ""
    return int(meta.get("generation") or 0), str(queue)


def cause(reason: str | None) -> str | None:
    """A pending reason without its leading "position N in QUEUE; " part."""
    return split_pending_reason(reason)[1]


def _drain(response: Any) -> bytes:
    """Read a raw answer and hand its connection back to the pool (urllib3 keeps it
    otherwise, and every later request would pay for a new TLS handshake)."""
    data: bytes = response.data
    response.release_conn()
    return data


def _rfc3339(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(obj: Obj, annotation: str) -> datetime:
    """A time the operator wrote on the object (as written, to the second)."""
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(annotation)
    return parse_time(value, "Job", job_key(obj), annotation) or datetime.now(UTC)


class Writer:
    def __init__(self, api: client.ApiClient, state: ClusterState) -> None:
        self.batch = client.BatchV1Api(api)
        self.core = client.CoreV1Api(api)
        self.objects = client.CustomObjectsApi(api)
        self.state = state
        self.stats = WriteStats()
        self.unsure: set[str] = set()  # Jobs whose last write has an unknown outcome
        self.position_written: dict[str, float] = {}  # Job -> when its reason was last written
        self.clock: Callable[[], float] = time.monotonic
        self.decided: dict[str, Basis] = {}  # Job -> what this cycle decided on

    # Jobs --------------------------------------------------------------------------------
    def _patch_job(
        self, key: str, body: dict[str, Any], kind: str, decided_on: Basis | None = None
    ) -> Obj | None:
        """A merge patch conditional on the resourceVersion last seen; for a decision, only
        while the Job's spec and queue are still what the cycle decided on (``decided_on``):
        a status update since does not matter, a tenant's move or resize does."""
        current = self.state.jobs.get(key)
        if current is None:
            return None
        if decided_on is not None and basis(current) != decided_on:
            self.stats.conflict()
            log.info("event=stale-decision job=%s kind=%s", key, kind)
            return None
        meta = current.get("metadata") or {}
        body.setdefault("metadata", {})["resourceVersion"] = meta.get("resourceVersion")
        namespace, name = key.split("/", 1)
        try:
            # The raw answer: building and flattening client models costs more CPU than the
            # request itself, and the loop writes hundreds of Jobs per cycle in a burst.
            result = self.batch.patch_namespaced_job(
                name, namespace, body, _content_type=MERGE_PATCH, _preload_content=False
            )
        except ApiException as err:
            if err.status in (404, 409):
                self.stats.conflict()
                log.info("event=stale-write job=%s status=%s", key, err.status)
            elif err.status == 0 or err.status >= 500:
                self._unsure(key, kind, f"status {err.status}")
            else:
                # A refused write (RBAC, a webhook) must not stop the rest of the cycle.
                log.warning(
                    "event=job-write-refused job=%s kind=%s status=%s reason=%s",
                    key,
                    kind,
                    err.status,
                    _message(err),
                )
            return None
        except (HTTPError, OSError) as err:
            self._unsure(key, kind, repr(err))
            return None
        self.stats.count(kind)
        obj: Obj = json.loads(_drain(result))
        self.state.remember_job(obj)
        return obj

    def _unsure(self, key: str, kind: str, error: str) -> None:
        """The write may or may not have happened (a timeout, a dropped connection, a server
        error): the next cycle must not decide before it has read that Job again."""
        log.warning("event=job-write-unsure job=%s kind=%s error=%s", key, kind, error)
        with self.stats.lock:
            self.unsure.add(key)

    def reread_unsure(self) -> bool:
        """Read again every Job whose last write has an unknown outcome; False while any of
        them still cannot be read (then no cycle may run)."""
        with self.stats.lock:
            keys = sorted(self.unsure)
        for key in keys:
            namespace, name = key.split("/", 1)
            try:
                raw = self.batch.read_namespaced_job(name, namespace, _preload_content=False)
                self.state.on_job("MODIFIED", json.loads(_drain(raw)))
            except ApiException as err:
                if err.status != 404:
                    return False
                current = self.state.jobs.get(key)
                if current is not None:
                    self.state.on_job("DELETED", current)
            except (HTTPError, OSError):
                return False
            with self.stats.lock:
                self.unsure.discard(key)
        return True

    def _event(
        self, obj: Obj, reason: str, message: str, kind: str = "Job", warning: bool = False
    ) -> None:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        now = datetime.now(UTC)
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta.get('name')}.{uuid.uuid4().hex[:10]}",
                "namespace": namespace,
            },
            "involvedObject": {
                "apiVersion": obj.get("apiVersion", "batch/v1"),
                "kind": kind,
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message[:1000],
            "type": "Warning" if warning else "Normal",
            "source": {"component": REPORTER},
            "reportingComponent": REPORTER,
            "firstTimestamp": _rfc3339(now),
            "lastTimestamp": _rfc3339(now),
            "count": 1,
        }
        try:
            body: Any = event  # the client takes plain JSON as well as its models
            _drain(self.core.create_namespaced_event(namespace, body, _preload_content=False))
            self.stats.count("event")
        except ApiException as err:  # an event is a courtesy; never fail a cycle for it
            log.warning("event=event-post-failed object=%s status=%s", meta.get("name"), err.status)
        except (HTTPError, OSError) as err:
            log.warning("event=event-post-failed object=%s error=%r", meta.get("name"), err)

    def evict(self, decision: Decision, now: datetime) -> Obj | None:
        """Suspend a reclaim or preempt victim, or a job requeued because its pods were not
        scheduled in time (which records how often, when and why: its back-off and its
        place behind the jobs of its priority follow from them)."""
        annotations: dict[str, str | None] = {ADMITTED_AT_ANNOTATION: None}
        if decision.action == "requeue":
            annotations |= {
                RECLAIMED_BY_ANNOTATION: None,
                REQUEUES_ANNOTATION: str(decision.requeues),
                REQUEUED_AT_ANNOTATION: _rfc3339(now),
                REQUEUE_REASON_ANNOTATION: decision.reason,
                PENDING_REASON_ANNOTATION: backoff_reason(decision.requeues, now, decision.reason),
            }
        else:
            annotations |= {
                RECLAIMED_BY_ANNOTATION: decision.for_job or "",
                PENDING_REASON_ANNOTATION: f"{decision.action}ed for {decision.for_job}",
            }
        body = {"metadata": {"annotations": annotations}, "spec": {"suspend": True}}
        version = self.decided.get(decision.job)
        return self._patch_job(decision.job, body, decision.action, version)

    def admit(self, decision: Decision, now: datetime) -> Obj | None:
        body = {
            "metadata": {
                "annotations": {
                    ADMITTED_AT_ANNOTATION: _rfc3339(now),
                    PENDING_REASON_ANNOTATION: None,
                    RECLAIMED_BY_ANNOTATION: None,
                }
            },
            "spec": {"suspend": False},
        }
        return self._patch_job(decision.job, body, "admit", self.decided.get(decision.job))

    def announce(self, decision: Decision, obj: Obj) -> None:
        """The Event of a decision already written to its Job."""
        if decision.action == "admit":
            self._event(obj, "Admitted", f"admitted by queue {decision.queue}: {decision.reason}")
        elif decision.action == "requeue":
            when = _time(obj, REQUEUED_AT_ANNOTATION)
            message = backoff_reason(decision.requeues, when, decision.reason)
            self._event(obj, "Requeued", f"suspended by sluice, {message}", warning=True)
        else:
            reason = "Reclaimed" if decision.action == "reclaim" else "Preempted"
            self._event(obj, reason, f"{decision.reason}; suspended by sluice")

    def pending_reason(self, key: str, reason: str) -> None:
        """Write why a job waits when it changed. A change of position alone (the jobs ahead
        were admitted) is written at most every POSITION_REFRESH seconds per job, or each
        admission would rewrite every job queued behind it; `sluice job why` derives the
        live position. An Event is posted only when the cause itself changed."""
        current = self.state.jobs.get(key)
        if current is None:
            return
        annotations = (current.get("metadata") or {}).get("annotations") or {}
        previous = annotations.get(PENDING_REASON_ANNOTATION)
        if previous == reason:
            return
        same_cause = cause(previous) == cause(reason)
        written = self.position_written.get(key)
        if same_cause and written is not None and self.clock() - written < POSITION_REFRESH:
            return
        obj = self._patch_job(
            key, {"metadata": {"annotations": {PENDING_REASON_ANNOTATION: reason}}}, "reason"
        )
        if obj is None:
            return
        self.position_written[key] = self.clock()
        if not same_cause:
            # A job that cannot run is something to look at: Warning, as kubectl shows them.
            self._event(obj, "Pending", reason, warning=True)

    def forget_positions(self, pending: set[str]) -> None:
        for key in set(self.position_written) - pending:
            del self.position_written[key]

    # Queues ------------------------------------------------------------------------------
    def _patch_queue(self, name: str, body: dict[str, Any], kind: str) -> None:
        try:
            result = self.objects.patch_cluster_custom_object(
                GROUP, VERSION, PLURAL, name, body, _content_type=MERGE_PATCH
            )
        except ApiException as err:
            if err.status in (404, 409):
                self.stats.conflict()
                return
            log.warning(
                "event=queue-write-failed queue=%s status=%s body=%s", name, err.status, err.body
            )
            return
        self.stats.count(kind)
        self.state.remember_queue(cast(Obj, result))

    def _patch_queue_status(self, name: str, status: dict[str, Any]) -> None:
        try:
            result = self.objects.patch_cluster_custom_object_status(
                GROUP, VERSION, PLURAL, name, {"status": status}, _content_type=MERGE_PATCH
            )
        except ApiException as err:
            if err.status in (404, 409):
                return
            log.warning("event=status-write-failed queue=%s status=%s", name, err.status)
            return
        self.stats.count("status")
        self.state.remember_queue(cast(Obj, result))

    def queue_action(self, action: str, queue: str, reason: str) -> None:
        if action == "create":
            body: dict[str, Any] = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "Queue",
                "metadata": {"name": queue},
                "spec": {} if queue == ROOT_QUEUE else {"parent": ROOT_QUEUE},
            }
            try:
                result = self.objects.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
                self.stats.count("create")
                self.state.remember_queue(cast(Obj, result))
                log.info("event=queue-created queue=%s", queue)
            except ApiException as err:
                if err.status != 409:
                    log.warning("event=queue-create-failed queue=%s status=%s", queue, err.status)
        elif action == "close":
            self._patch_queue(
                queue,
                {
                    "metadata": {"annotations": {CLOSED_BY_PARENT_ANNOTATION: reason}},
                    "spec": {"state": "Closed"},
                },
                "close",
            )
        elif action == "reopen":
            self._patch_queue(
                queue,
                {
                    "metadata": {"annotations": {CLOSED_BY_PARENT_ANNOTATION: None}},
                    "spec": {"state": "Open"},
                },
                "reopen",
            )
        elif action == "delete":
            try:
                self.objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, queue)
                self.stats.count("delete")
            except ApiException as err:
                if err.status != 404:
                    log.warning(
                        "event=queue-delete-failed queue=%s status=%s body=%s",
                        queue,
                        err.status,
                        err.body,
                    )

    def finalizers(self) -> None:
        """Every Queue carries the subtree finalizer; a deleted one loses it once no child
        queue is left, so deleting a parent deletes its children first."""
        queues = self.state.queue_objects()
        parents = {
            (obj.get("spec") or {}).get("parent") or ROOT_QUEUE
            for name, obj in queues
            if name != ROOT_QUEUE
        }
        for name, obj in queues:
            meta = obj.get("metadata") or {}
            finalizers = list(meta.get("finalizers") or [])
            deleting = meta.get("deletionTimestamp") is not None
            if not deleting and QUEUE_FINALIZER not in finalizers:
                body = {
                    "metadata": {
                        "finalizers": [*finalizers, QUEUE_FINALIZER],
                        "resourceVersion": meta.get("resourceVersion"),
                    }
                }
                self._patch_queue(name, body, "finalizer")
            elif deleting and QUEUE_FINALIZER in finalizers and name not in parents:
                rest = [f for f in finalizers if f != QUEUE_FINALIZER]
                body = {
                    "metadata": {"finalizers": rest, "resourceVersion": meta.get("resourceVersion")}
                }
                self._patch_queue(name, body, "finalizer")

    def statuses(self, result: CycleResult, now: datetime) -> None:
        root = self.state.queues.get(ROOT_QUEUE)
        if root is not None and (root.get("status") or {}).get("state") != "Open":
            self._patch_queue_status(ROOT_QUEUE, {"state": "Open"})
        for name, queue in result.queues.items():
            obj = self.state.queues.get(name)
            if obj is None:
                continue
            current = obj.get("status") or {}
            wanted = queue_status(obj, queue, now)
            if status_differs(current, wanted):
                patch = dict(wanted)
                for key in ("allocated", "deserved"):
                    gone = set(current.get(key) or {}) - set(wanted[key])
                    patch[key] = {
                        **wanted[key],
                        **dict.fromkeys(gone),
                    }  # null removes in a merge patch
                self._patch_queue_status(name, patch)


WRITERS = 8
"""Parallel writes within one phase; phases stay ordered (victims before admissions)."""


async def apply_result(
    writer: Writer,
    result: CycleResult,
    now: datetime,
    may_write: Callable[[], bool] = lambda: True,
    decided_on: Mapping[str, Basis] | None = None,
) -> bool:
    """Write a cycle's results in the order that keeps quota safe at every step.

    Admissions count on the room the victims leave: when any victim could not be suspended
    (its Job changed meanwhile, or the write was refused), no job of this cycle is admitted
    and the loop decides again on the fresh view. ``may_write`` is asked before each phase,
    so a replica that lost the Lease mid-apply stops there. ``decided_on`` maps each job to
    the spec generation and queue the cycle saw: admissions and evictions are written only
    while the Job still has them (a tenant may have moved or resized it meanwhile).
    Returns whether every phase ran.
    """
    writer.decided = dict(decided_on or {})

    def write() -> bool:
        with ThreadPoolExecutor(WRITERS, thread_name_prefix="sluice-write") as pool:
            # Requeued jobs give their room back like victims, before anyone takes it.
            victims = [d for d in result.decisions if d.action != "admit"]
            if not may_write():
                return False
            evicted = list(pool.map(lambda d: writer.evict(d, now), victims))
            admits = [d for d in result.decisions if d.action == "admit"]
            written = [(d, obj) for d, obj in zip(victims, evicted, strict=True) if obj]
            if len(written) < len(victims):
                log.info(
                    "event=admissions-deferred victims=%d suspended=%d admissions=%d",
                    len(victims),
                    len(written),
                    len(admits),
                )
                list(pool.map(lambda pair: writer.announce(*pair), written))
                writer.state.notify()
                return False
            if not may_write():
                list(pool.map(lambda pair: writer.announce(*pair), written))
                return False
            admitted = list(pool.map(lambda d: writer.admit(d, now), admits))
            written += [(d, obj) for d, obj in zip(admits, admitted, strict=True) if obj]
            # Events after every decision is on its Job: the Job is the record, not the Event.
            list(pool.map(lambda pair: writer.announce(*pair), written))
            if not may_write():
                return False
            for action in result.queue_actions:
                if action.action not in ("invalid", "valid"):
                    writer.queue_action(action.action, action.queue, action.reason)
            writer.finalizers()
            list(pool.map(lambda p: writer.pending_reason(p.job, p.reason), result.pending))
            writer.forget_positions({p.job for p in result.pending})
            if not may_write():
                return False
            writer.statuses(result, now)
            return True

    return await asyncio.to_thread(write)


def decisions_by_action(result: CycleResult) -> Mapping[str, int]:
    out: dict[str, int] = {}
    for decision in result.decisions:
        out[decision.action] = out.get(decision.action, 0) + 1
    return out


__all__ = ["CONDITION_VALID", "Writer", "apply_result", "decisions_by_action"]
