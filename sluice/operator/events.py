"""Events: how sluice tells people about its decisions, off the decisions' own path.

A decision is recorded on its Job; the Event only tells it. So Events are posted by
background threads from a bounded queue, in the order they were handed over: a cycle never
waits for them, and when the API server is too slow to take them all, the newest are dropped
(counted in ``sluice_events_dropped_total``) rather than held without limit. They go
through the operator's write client: once the replica no longer holds the Lease, or stops,
those still queued are kept back as their turn comes, unsent.
"""

from __future__ import annotations

import logging
import queue
import threading
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from sluice.kube.errors import API_ERRORS, Failure, classify, message
from sluice.kube.watch import drain
from sluice.operator import metrics
from sluice.operator.writes import EventSpec, rfc3339

log = logging.getLogger("sluice.operator.events")

REPORTER = "sluice-operator"
CAPACITY = 10_000
"""Events waiting to be posted at most."""
POSTERS = 1
"""One poster keeps them in order."""


def named(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Only what ``event_body`` reads of the object an Event is about: kept in its place by a
    writer that would otherwise hold whole answers until their Events are handed over."""
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    out["metadata"] = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion")
                       if k in meta}  # fmt: skip
    return out


def event_body(obj: Mapping[str, Any], spec: EventSpec, kind: str, now: datetime) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{meta.get('name')}.{uuid.uuid4().hex[:10]}",
            "namespace": meta.get("namespace") or "default",
        },
        "involvedObject": {
            "apiVersion": obj.get("apiVersion", "batch/v1"),
            "kind": kind,
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "reason": spec.reason,
        "message": spec.message[:1000],
        "type": "Warning" if spec.warning else "Normal",
        "source": {"component": REPORTER},
        "reportingComponent": REPORTER,
        "firstTimestamp": rfc3339(now),
        "lastTimestamp": rfc3339(now),
        "count": 1,
    }


def post_event(core: client.CoreV1Api, namespace: str, event: dict[str, Any]) -> bool:
    """Create one Event; a failure is logged, never raised (one kept back by the write client
    is dropped without a word: the replica no longer writes). Whether it was created."""
    body: Any = event  # the client takes plain JSON as well as its models
    try:
        drain(core.create_namespaced_event(namespace, body, _preload_content=False))
    except API_ERRORS as err:
        if classify(err) is Failure.UNSENT:
            return False
        name = event["involvedObject"]["name"]
        log.warning("event=event-post-failed object=%s/%s error=%s", namespace, name, message(err))
        return False
    return True


class EventSink:
    """``create(namespace, body)`` posts one Event; a failure is logged by it, never raised
    (what it returns is not looked at)."""

    def __init__(self, create: Callable[[str, dict[str, Any]], object]) -> None:
        self._create = create
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue(CAPACITY)
        self._started = False
        self._lock = threading.Lock()

    def post(self, obj: Mapping[str, Any], spec: EventSpec, kind: str = "Job") -> None:
        self._start()
        try:
            self._queue.put_nowait(event_body(obj, spec, kind, datetime.now(UTC)))
        except queue.Full:
            metrics.EVENTS_DROPPED.inc()

    def join(self) -> None:
        """Until every Event handed over so far has been posted (or failed)."""
        self._queue.join()

    def _start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
        for i in range(POSTERS):
            threading.Thread(target=self._drain, name=f"sluice-events-{i}", daemon=True).start()

    def _drain(self) -> None:
        while True:
            body = self._queue.get()
            try:
                self._create(body["metadata"]["namespace"], body)
            except Exception:  # a poster must outlive any one Event
                log.exception("event=event-post-failed object=%s", body["involvedObject"])
            finally:
                self._queue.task_done()
