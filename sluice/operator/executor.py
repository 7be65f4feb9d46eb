"""Carrying out a plan (``plan.py``): the workload writes, in their phases, and their Events.

Every failed API call is read by the one classifier (``sluice.kube.errors``); here each class
has one policy:

- ``conflict``: the object changed since it was read (409), or the decision's precondition no
  longer holds: nothing is written, the next cycle decides again on the fresh view.
- ``gone``: the object no longer exists (404): nothing to do.
- ``unsure``: the call may or may not have happened (a timeout, a dropped connection, a server
  error): no cycle runs before the workload has been read again.
- ``retry``: the API server did nothing and asks to come back (429): the loop decides again
  in a moment.
- ``forbidden``, ``refused`` (and ``expired``, which no write meets): the API server said no
  for good (RBAC, a webhook): logged, the rest goes on.
- ``unsent``: the write client kept it back, as the replica no longer holds the Lease (or is
  stopping): nothing was written, and the writes still queued meet the same gate; they are
  counted (``WriteStats.abandoned``), not logged one by one.

A crash between two writes loses nothing and repeats nothing: the workload itself records its
admission, and the next leader decides from the workloads as they are.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from sluice.api.objects import Obj
from sluice.api.workloads import Adapter
from sluice.api.workloads.job import JOB
from sluice.kube.errors import API_ERRORS, Failure, classify, message
from sluice.kube.watch import drain
from sluice.kube.writer import JSON_PATCH, MERGE_PATCH, WRITERS
from sluice.operator import metrics
from sluice.operator.events import EventSink, named, post_event
from sluice.operator.plan import Plan
from sluice.operator.state import ClusterState
from sluice.operator.writes import EventSpec, PodChange, Write, adapter_of, basis

log = logging.getLogger("sluice.operator.executor")

WINDOW = 500
"""The most writes of one phase handed to the writers at once (``Executor._phase``)."""
BACKGROUND_WRITERS = 2
"""Parallel writes of the full pass, which decides nothing (pending reasons): few, so that
the API server, which they keep busy while a new leader first explains every stored job,
still answers the decisions' writes, the watches and the tenants' own requests promptly."""


@dataclass
class WriteStats:
    conflicts: int = 0
    abandoned: int = 0
    """Writes the write client kept back (the Lease no longer held, or stopping)."""
    by_kind: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def conflict(self) -> None:
        with self.lock:
            self.conflicts += 1

    def abandon(self) -> None:
        with self.lock:
            self.abandoned += 1

    def count(self, kind: str) -> None:
        with self.lock:
            self.by_kind[kind] = self.by_kind.get(kind, 0) + 1


class Executor:
    def __init__(
        self, api: client.ApiClient, state: ClusterState, writer: client.ApiClient | None = None
    ) -> None:
        """``writer``: the client every write goes through (``sluice.kube.writer``); reads
        go through ``api``."""
        self.core = client.CoreV1Api(writer or api)
        self.custom = client.CustomObjectsApi(writer or api)
        self.reads = client.CustomObjectsApi(api)
        self.state = state
        self.stats = WriteStats()
        self.unsure: set[str] = set()  # workloads whose last write has an unknown outcome
        self.positions_written: dict[str, float] = {}  # workload -> clock of its last reason
        self.clock: Callable[[], float] = time.monotonic
        self.events = EventSink(self._create_event)

    # Workloads ---------------------------------------------------------------------------
    def write(self, write: Write) -> Obj | None:
        """One workload's write (a patch of the workload, or of its plain pods), while its
        precondition holds. A decision sends the newest resourceVersion seen, so it never
        undoes a change the operator has not seen yet. A pending reason, sluice's own
        annotation, undoes no one's change: it sends the uid seen instead, so it lands on that
        object (not on one created since under its name) whatever else changed meanwhile. A
        controller writes the status of the workloads it owns (the Job controller marks every
        new suspended Job), and a reason sent with the resourceVersion would conflict with
        each of those writes."""
        if write.pods is not None:
            return self.write_pods(write, write.pods)
        current = self.state.workloads.get(write.workload)
        if current is None:
            return None
        if write.basis is not None and basis(current) != write.basis:
            self.stats.conflict()
            log.info("event=stale-decision job=%s kind=%s", write.workload, write.kind)
            return None
        meta = current.get("metadata") or {}
        body = {**write.patch, "metadata": {**write.patch.get("metadata", {})}}
        if write.kind == "reason":
            if meta.get("uid"):
                body["metadata"]["uid"] = meta["uid"]
        else:
            body["metadata"]["resourceVersion"] = meta.get("resourceVersion")
        namespace, name = write.workload.split("/", 1)
        try:
            obj = self._patch(adapter_of(current), namespace, name, body)
        except API_ERRORS as err:
            self._failed(write, err)
            return None
        self.stats.count(write.kind)
        self.state.remember_workload(obj)
        if write.kind == "reason":
            with self.stats.lock:
                self.positions_written[write.workload] = self.clock()
        return obj

    # Plain pods ---------------------------------------------------------------------------
    def write_pods(self, write: Write, changes: tuple[PodChange, ...]) -> Obj | None:
        """A decision about a workload of plain pods: each of its pods' writes in turn. Done
        (the first pod's answer, which its Event goes on) only when every one landed; a pod
        already gone counts as deleted. An outcome unknown is left to the pod watch."""
        first: Obj | None = None
        for change in changes:
            namespace, name = change.pod.split("/", 1)
            stub: Obj = {
                "apiVersion": "v1",
                "metadata": {"name": name, "namespace": namespace, "uid": change.uid},
            }
            try:
                if change.patch is None:
                    options = client.V1DeleteOptions(
                        preconditions=client.V1Preconditions(uid=change.uid)
                    )
                    answer = self.core.delete_namespaced_pod(
                        name, namespace, body=options, _preload_content=False
                    )
                else:
                    kind = MERGE_PATCH if isinstance(change.patch, Mapping) else JSON_PATCH
                    body: Any = change.patch
                    answer = self.core.patch_namespaced_pod(
                        name, namespace, body, _content_type=kind, _preload_content=False
                    )
                obj: Obj = json.loads(drain(answer))
            except API_ERRORS as err:
                if change.patch is None and classify(err) is Failure.GONE:
                    obj = stub
                else:
                    self._failed(write, err, change.pod)
                    return None
            if change.patch is not None:
                self.state.on_pod("MODIFIED", obj)
            if obj.get("kind") != "Pod":  # a deletion answered with a Status
                obj = stub
            first = first or obj
            self.stats.count(write.kind)
        if write.kind == "reason":
            with self.stats.lock:
                self.positions_written[write.workload] = self.clock()
        return first or {}

    def _patch(self, adapter: Adapter, namespace: str, name: str, body: dict[str, Any]) -> Obj:
        """A merge patch of one workload at its kind's API path (the custom objects API
        serves every group's resources: batch/v1 Jobs as much as the CRDs)."""
        # The raw answer: building and flattening client models costs more CPU than the
        # request itself, and the loop writes hundreds of workloads per cycle in a burst.
        answer = self.custom.patch_namespaced_custom_object(
            *_path(adapter, namespace),
            name,
            body,
            _content_type=MERGE_PATCH,
            _preload_content=False,
        )
        obj: Obj = json.loads(drain(answer))
        return obj

    def _read(self, adapter: Adapter, namespace: str, name: str) -> Obj:
        raw = self.reads.get_namespaced_custom_object(
            *_path(adapter, namespace), name, _preload_content=False
        )
        obj: Obj = json.loads(drain(raw))
        return obj

    def _failed(self, write: Write, err: BaseException, pod: str = "") -> None:
        failure = classify(err)
        if failure is Failure.UNSENT:
            self.stats.abandon()
        elif failure in (Failure.CONFLICT, Failure.GONE):
            self.stats.conflict()
            log.info(
                "event=stale-write job=%s kind=%s failure=%s",
                write.workload,
                write.kind,
                failure.value,
            )
        elif failure is Failure.RETRY:
            log.info("event=write-throttled job=%s kind=%s", write.workload, write.kind)
            self.state.notify()
        elif failure is Failure.UNSURE and pod:
            log.warning(
                "event=pod-write-unsure workload=%s pod=%s kind=%s error=%s",
                write.workload,
                pod,
                write.kind,
                message(err),
            )
        elif failure is Failure.UNSURE:
            log.warning(
                "event=job-write-unsure job=%s kind=%s error=%s",
                write.workload,
                write.kind,
                message(err),
            )
            with self.stats.lock:
                self.unsure.add(write.workload)
        else:
            log.warning(
                "event=job-write-refused job=%s kind=%s reason=%s",
                write.workload,
                write.kind,
                message(err),
            )

    def reread_unsure(self) -> bool:
        """Read again every workload whose last write has an unknown outcome; False while any
        of them still cannot be read (then no cycle may run)."""
        with self.stats.lock:
            keys = sorted(self.unsure)
        for key in keys:
            namespace, name = key.split("/", 1)
            try:
                adapter = adapter_of(self.state.workloads.get(key))
                self.state.on_workload("MODIFIED", self._read(adapter, namespace, name))
            except API_ERRORS as err:
                if classify(err) is not Failure.GONE:
                    return False
                current = self.state.workloads.get(key)
                if current is not None:
                    self.state.on_workload("DELETED", current)
            with self.stats.lock:
                self.unsure.discard(key)
        return True

    def post_event(self, obj: Obj, spec: EventSpec, kind: str = "Job") -> None:
        """Handed to the event sink: an Event never holds up a cycle nor fails one."""
        self.events.post(obj, spec, kind)

    def _create_event(self, namespace: str, event: dict[str, Any]) -> None:
        if post_event(self.core, namespace, event):
            self.stats.count("event")

    # Phases ------------------------------------------------------------------------------
    def run(
        self,
        plan: Plan,
        may_write: Callable[[], bool],
        decided: Callable[[], None] = lambda: None,
        writers: int = WRITERS,
    ) -> bool:
        """Carry the phases out in order; ``may_write`` is asked before each, so a replica that
        lost the Lease stops there. Admissions count on the room the victims leave: when any
        victim could not be suspended, no job of this cycle is admitted (the loop decides again
        on the fresh view). Events follow every decision of the cycle, so the workload is the record
        and the Event only tells it. ``decided`` is called once every decision is written,
        before the pending reasons (what the queues' statuses show is known by then). Returns
        whether every phase ran. ``writers``: how many writes run at once."""
        with ThreadPoolExecutor(writers, thread_name_prefix="sluice-write") as pool:
            if not may_write():
                return False
            done = self._phase(pool, plan.victims)
            if len(done) < len(plan.victims):
                log.info(
                    "event=admissions-deferred victims=%d suspended=%d admissions=%d",
                    len(plan.victims),
                    len(done),
                    len(plan.admissions),
                )
                self._announce(done)
                self.state.notify()
                return False
            if not may_write():
                self._announce(done)
                return False
            done += self._phase(pool, plan.admissions)
            self._announce(done)
            decided()
            if not may_write():
                return False
            self._announce(self._phase(pool, plan.reasons))
            if plan.pending is not None:
                with self.stats.lock:
                    for key in set(self.positions_written) - plan.pending:
                        del self.positions_written[key]
            return True

    def _phase(
        self, pool: ThreadPoolExecutor, writes: tuple[Write, ...]
    ) -> list[tuple[Write, Obj]]:
        """The writes that landed, each with what its Event names of the answer (``events.named``).
        They are handed to the writers a window at a time: a new leader's first full pass
        writes a reason on every stored job, and all of them at once, each with its answer
        kept to the end, was a peak of memory the operator's size kept afterwards."""
        done: list[tuple[Write, Obj]] = []
        abandoned = self.stats.abandoned
        for start in range(0, len(writes), WINDOW):
            window = writes[start : start + WINDOW]
            for write, obj in zip(window, pool.map(self.write, window), strict=True):
                if obj is not None:
                    done.append((write, named(obj)))
                    if write.decision is not None:  # counted once, as it landed
                        metrics.decision_written(write.decision, write.created)
            if self.stats.abandoned > abandoned:
                # The write client kept writes back: the Lease is gone, the rest stay unsent.
                left = len(writes) - start - len(window)
                log.info("event=writes-abandoned kept_back=%d not_tried=%d",
                         self.stats.abandoned - abandoned, left)  # fmt: skip
                break
        return done

    def _announce(self, done: list[tuple[Write, Obj]]) -> None:
        """Hand the Events of the writes that landed to the sink (it posts them in order)."""
        for write, obj in done:
            if write.event is not None and obj:
                kind = "Pod" if write.pods is not None else str(obj.get("kind") or JOB.kind)
                self.post_event(obj, write.event, kind)


def _path(adapter: Adapter, namespace: str) -> tuple[str, str, str, str]:
    return adapter.group, adapter.version, namespace, adapter.plural
