"""What the dashboard shows, kept up to date from watched Queues and Jobs: the queue tree with
each queue's numbers, each queue's jobs in order (with their Topology domain and, for a
resizable workload, its pods admitted of those asked), a timeline of
decisions, and the domains of the Topologies with their free room (``domains.py``).

Everything comes from what the operator publishes (Queue status, the Jobs' annotations), so
every operator replica, and ``sluice dashboard`` on a laptop, shows the same thing. Each
object is read once, when its watch event arrives; a page asks for the tree (about a hundred
bytes per queue) and for one queue's jobs a page at a time, so 40,000 jobs cost nothing until
someone opens their queue. The JSON it produces is the one the page and ``sluice simulate
--html`` render (``tree`` and ``jobs_page``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from sluice.api.errors import InvalidObject
from sluice.api.queue import FlavorStatus, Queue
from sluice.api.views import PublishedJob, published_job
from sluice.api.workloads.job import JOB
from sluice.dashboard.domains import (
    DOMAINS_LISTED,
    Source,
    TopologyRoom,
    amounts_json,
    domain_rooms,
    rooms_json,
)

TIMELINE = 200
"""Decisions kept for the timeline (the newest)."""
DOMAINS_SECONDS = 2.0
"""The domain view is worked out again at most this often."""


def job_row(obj: Mapping[str, Any]) -> PublishedJob | None:
    """A managed job as the dashboard shows it; None when sluice does not manage it (or it
    cannot be read: the operator reports those)."""
    try:
        return published_job(obj, JOB.view)
    except InvalidObject:
        return None


def job_json(job: PublishedJob) -> dict[str, Any]:
    return {
        "namespace": job.namespace,
        "name": job.name,
        "state": job.state,
        "position": job.position,
        "reason": job.reason,
        "admittedAt": job.admitted_at,
        # The Topology domain it runs in (<level>=<value>), or what it asks while it waits.
        "domain": job.domain,
        "asks": job.asks,
        # A resizable workload's pods admitted of those asked (6/8, 0/8 while it waits) and
        # the same in words, with its minimum and its growth waiting (the operator's reason
        # for it when written); "" for any other.
        "size": job.sizes,
        "sizeWords": "; ".join(w for w in (job.size_words, job.growth) if w),
    }


def decision(
    old: PublishedJob | None, new: PublishedJob | None, when: str
) -> dict[str, Any] | None:
    """The timeline entry a change of a job makes, if it is a decision."""
    was_admitted = old is not None and old.state in ("inqueue", "running")
    if new is None:
        return None
    key = f"{new.namespace}/{new.name}"
    if new.state in ("inqueue", "running") and not was_admitted and old is not None:
        return {"time": when, "action": "Admitted", "job": key, "queue": new.queue}
    if was_admitted and new.state == "pending":
        for action, prefix in (("Reclaimed", "reclaimed for "), ("Preempted", "preempted for ")):
            if new.reason.startswith(prefix):
                return {
                    "time": when,
                    "action": action,
                    "job": key,
                    "queue": new.queue,
                    "for": new.reason.removeprefix(prefix),
                }
        return {"time": when, "action": "Requeued", "job": key, "queue": new.queue}
    if was_admitted and new.state == "completed":
        return {"time": when, "action": "Finished", "job": key, "queue": new.queue}
    return None


def queue_json(queue: Queue) -> dict[str, Any]:
    status, spec = queue.status, queue.spec
    valid = next((c for c in status.conditions if c.type == "Valid"), None)
    return {
        "name": queue.name,
        "parent": queue.parent,
        "state": status.state or "-",
        "valid": valid is None or valid.status != "False",
        "invalidReason": valid.message if valid is not None and valid.status == "False" else "",
        "weight": spec.weight,
        "share": round(status.share, 4),
        "pending": status.pending,
        "running": status.running + status.inqueue,
        "namespaces": spec.namespace_selector.describe() if spec.namespace_selector else "",
        "guarantee": amounts_json(spec.guarantee.resource),
        "deserved": amounts_json(status.deserved),
        "allocated": amounts_json(status.allocated),
        "capability": amounts_json(spec.capability),
        "overCapability": status.over_capability,
        # The usage plugin's dominant usage over time ("" without it).
        "usage": status.usage.dominant if status.usage is not None else "",
        "flavors": [flavor_json(queue, f) for f in status.flavors],
    }


def flavor_json(queue: Queue, figures: FlavorStatus) -> dict[str, Any]:
    """One flavor's bars of a queue, one per resource its entry counts (what it holds there
    where only an ancestor names the flavor): what it holds and its deserved there from the
    status, its guarantee and capability there from its entry."""
    entry = queue.spec.flavor(figures.name)
    return {
        "name": figures.name,
        "resources": sorted(entry.names() if entry else figures.allocated),
        "guarantee": amounts_json(entry.guarantee.resource if entry else None),
        "deserved": amounts_json(figures.deserved),
        "allocated": amounts_json(figures.allocated),
        "capability": amounts_json(entry.capability if entry else None),
    }


class DashboardView:
    """Queues and jobs by their watch events; thread-safe (watches may run in threads).

    ``listeners`` are called (without arguments) after every change; the server uses one to
    wake the pages' event streams.
    """

    def __init__(
        self, clock: Callable[[], datetime] | None = None, cluster: Source | None = None
    ) -> None:
        """``cluster``: the Topologies, nodes and pods as read (the domain view); None:
        no domain view."""
        self.cluster = cluster
        self._domains: tuple[float, list[TopologyRoom]] | None = None
        self._lock = threading.Lock()
        self._queues: dict[str, dict[str, Any]] = {}
        self._jobs: dict[str, PublishedJob] = {}
        self._by_queue: dict[str, dict[str, PublishedJob]] = {}
        self._timeline: deque[dict[str, Any]] = deque(maxlen=TIMELINE)
        self.version = 0
        self.listeners: list[Callable[[], None]] = []
        self._clock = clock or (lambda: datetime.now(UTC))

    def _changed(self) -> None:
        self.version += 1
        for listener in self.listeners:
            listener()

    def on_queue(self, event: str, obj: Mapping[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        with self._lock:
            if event == "DELETED":
                self._queues.pop(name, None)
            else:
                try:
                    self._queues[name] = queue_json(Queue.from_object(obj))
                except InvalidObject as err:
                    self._queues[name] = {"name": name, "parent": None, "unreadable": str(err)}
        self._changed()

    def on_job(self, event: str, obj: Mapping[str, Any], *, initial: bool = False) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        new = None if event == "DELETED" else job_row(obj)
        with self._lock:
            old = self._jobs.pop(key, None)
            if old is not None:
                self._by_queue.get(old.queue, {}).pop(key, None)
            if new is not None:
                self._jobs[key] = new
                self._by_queue.setdefault(new.queue, {})[key] = new
            if not initial:
                entry = decision(old, new, self._clock().strftime("%Y-%m-%dT%H:%M:%SZ"))
                if entry is not None:
                    self._timeline.append(entry)
        self._changed()

    def load(self, queues: Iterable[Mapping[str, Any]], jobs: Iterable[Mapping[str, Any]]) -> None:
        """A listing: the state as it is, no timeline entries for it."""
        for obj in queues:
            self.on_queue("ADDED", obj)
        for obj in jobs:
            self.on_job("ADDED", obj, initial=True)

    def tree(self) -> dict[str, Any]:
        with self._lock:
            queues = [dict(q) for q in self._queues.values()]
            counts = {name: len(jobs) for name, jobs in self._by_queue.items()}
            timeline = list(self._timeline)
        for queue in queues:
            queue["jobs"] = counts.get(queue["name"], 0)
        return {
            "version": self.version,
            "queues": sorted(queues, key=lambda q: q["name"]),
            "timeline": timeline[::-1],
        }

    def domains(
        self, shown: Mapping[str, str] | None = None, limit: int = DOMAINS_LISTED
    ) -> dict[str, Any]:
        """The domain view (``sluice.dashboard.domains.rooms_json``), its rooms worked out at
        most every ``DOMAINS_SECONDS``: that goes over every pod."""
        if self.cluster is None:
            return {"topologies": []}
        cached = self._domains
        if cached is not None and time.monotonic() - cached[0] < DOMAINS_SECONDS:
            rooms = cached[1]
        else:
            with self._lock:
                admitted = [job for job in self._jobs.values() if job.domain]
            rooms = domain_rooms(self.cluster(), admitted)
            self._domains = (time.monotonic(), rooms)
        return rooms_json(rooms, shown or {}, limit)

    def jobs_page(self, queue: str, offset: int = 0, limit: int = 50) -> dict[str, Any]:
        """One queue's jobs: running first, then the line in order, then finished ones."""
        with self._lock:
            rows = list(self._by_queue.get(queue, {}).values())
        rows.sort(key=PublishedJob.sort_key)
        page = rows[max(offset, 0) : max(offset, 0) + max(min(limit, 500), 1)]
        return {
            "queue": queue,
            "total": len(rows),
            "offset": offset,
            "jobs": [job_json(r) for r in page],
        }
