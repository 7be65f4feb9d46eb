"""The invariants that are not checked event by event (those are in ``observe``): admitted
workloads whose pods stay unscheduled (checked every 2 s while the soak runs), and at the
end: every workload accounted for, no tenant write taken while no webhook answered, no
traceback in sluice's logs, and no decision written by a replica not holding the Lease."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from chaos import audit
from chaos.faults import Fault
from chaos.load import Submission
from chaos.observe import (
    ADMITTED_AT,
    PENDING_REASON,
    Obj,
    Observer,
    job_admitted,
    job_finished,
    pod_admitted,
    pod_owned_by_job,
    pod_terminal,
)
from chaos.system import LEASE_SECONDS

PODS_READY_TIMEOUT = 30.0
"""The soak's scheduler configuration (podsReadyTimeout: 30s)."""
RESYNC = 10.0
OPERATOR_FAULTS = ("kill-leader", "partition-leader", "apiserver-restart", "etcd-pause")
"""Faults during which no replica may be able to decide: they extend the time allowed."""


def _created(obj: Obj) -> float:
    text = (obj.get("metadata") or {}).get("creationTimestamp") or ""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else 0.0


def _admitted_at(job: Obj) -> str:
    return str(((job.get("metadata") or {}).get("annotations") or {}).get(ADMITTED_AT, ""))


class Unscheduled:
    """No admitted workload's pods stay unscheduled (or, for a Job, none made since its
    admission) past podsReadyTimeout without a requeue, allowing a resync, a Lease's worth,
    and the length of any fault in that time that could keep every replica from deciding."""

    def __init__(self, observer: Observer, faults: list[Fault]) -> None:
        self.observer = observer
        self.faults = faults
        self.reported: set[tuple[str, float]] = set()
        self._stop = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="unscheduled", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def allowance(self, since: float, now: float) -> float:
        extra = sum(
            (f.healed or now) - f.began + LEASE_SECONDS
            for f in list(self.faults)
            if f.kind in OPERATOR_FAULTS and f.began < now and (f.healed or now) > since
        )
        return PODS_READY_TIMEOUT + RESYNC + LEASE_SECONDS + 5 + extra

    def _run(self) -> None:
        while not self._stop.wait(2):
            self.check(time.time())

    def check(self, now: float) -> None:
        observer = self.observer
        with observer._lock:
            jobs = list(observer.jobs.items())
            pods = list(observer.pods.values())
            history = dict(observer.history)
        by_job: dict[str, list[Obj]] = {}
        for pod in pods:
            meta = pod.get("metadata") or {}
            for owner in meta.get("ownerReferences") or []:
                if owner.get("kind") == "Job":
                    by_job.setdefault(
                        f"Job:{meta.get('namespace')}/{owner.get('name')}", []
                    ).append(pod)
        waiting: list[tuple[str, float, str]] = []
        for key, job in jobs:
            record = history.get(key)
            if (
                record is None
                or not record.admissions
                or not job_admitted(job)
                or job_finished(job)
            ):
                continue
            admitted = record.admissions[-1]
            live = [p for p in by_job.get(key, []) if not pod_terminal(p)]
            unbound = [p for p in live if not (p.get("spec") or {}).get("nodeName")]
            status = job.get("status") or {}
            started = sum(status.get(k) or 0 for k in ("active", "succeeded", "failed"))
            if unbound:
                since = max(admitted, min(_created(p) for p in unbound))
                waiting.append((key, since, f"{len(unbound)} pod(s) unscheduled"))
            elif not live and not started and record.newest_pod < _admitted_at(job):
                # No pod made since its admission (pods made then lost are the Job
                # controller's to make again: they do not count).
                waiting.append((key, admitted, "no pod created"))
        for pod in pods:
            if pod_owned_by_job(pod) or pod_terminal(pod) or not pod_admitted(pod):
                continue
            if (pod.get("spec") or {}).get("nodeName"):
                continue
            meta = pod.get("metadata") or {}
            key = f"Pod:{meta.get('namespace')}/{meta.get('name')}"
            record = history.get(key)
            if record and record.admissions:
                waiting.append((key, record.admissions[-1], "unscheduled"))
        for key, since, what in waiting:
            if now - since > self.allowance(since, now) and (key, since) not in self.reported:
                self.reported.add((key, since))
                observer.violation(
                    f"{key} admitted, {what} for {now - since:.0f} s and not requeued"
                )


def unaccounted(observer: Observer) -> list[str]:
    """Workloads at the end neither admitted, finished, nor pending with a reason."""
    found = []
    with observer._lock:
        jobs = list(observer.jobs.items())
        pods = list(observer.pods.items())
    for key, job in jobs:
        if job_finished(job) or job_admitted(job):
            continue
        if not ((job.get("metadata") or {}).get("annotations") or {}).get(PENDING_REASON):
            found.append(f"{key} suspended with no reason")
    for key, pod in pods:
        if pod_owned_by_job(pod) or pod_terminal(pod) or pod_admitted(pod):
            continue
        if not ((pod.get("metadata") or {}).get("annotations") or {}).get(PENDING_REASON):
            found.append(f"{key} gated with no reason")
    return found


def lost(observer: Observer, submissions: list[Submission]) -> list[str]:
    """Workloads the API server took that the watch never saw."""
    seen = set(observer.history)
    prefix = {"job": "Job:", "group-pod": "Pod:"}
    return [
        f"{s.kind} {s.key} accepted at {s.at:.3f} but never seen"
        for s in submissions
        if s.accepted and s.kind in prefix and prefix[s.kind] + s.key not in seen
    ]


GATED_WRITES = ("job", "group-pod")
"""Tenant writes sluice's webhooks judge (a Deployment is not: its pods are)."""


def taken_without_webhooks(faults: list[Fault], submissions: list[Submission]) -> list[str]:
    """Tenant writes accepted while neither webhook replica ran (failurePolicy Fail)."""
    windows = [(f.closed[0] + 0.5, f.closed[1]) for f in faults if f.closed]
    return [
        f"{s.kind} {s.key} accepted at {s.at:.3f} while no webhook ran"
        for s in submissions
        if s.accepted
        and s.kind in GATED_WRITES
        and any(start <= s.at <= end for start, end in windows)
    ]


def tracebacks(logs: list[Path]) -> list[str]:
    """Each distinct traceback in sluice's logs, by the exception it ends with."""
    found = []
    for path in logs:
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        ends: dict[str, int] = {}
        for index, line in enumerate(lines):
            if not line.startswith("Traceback (most recent call last)"):
                continue
            tail = next(
                (text for text in lines[index + 1 :] if text and not text.startswith(" ")), "?"
            )
            ends[tail] = ends.get(tail, 0) + 1
        found += [f"{path.name}: traceback x{count} ending {end}" for end, count in ends.items()]
    return found


def two_writers(audit_log: Path) -> list[str]:
    return audit.interleaved(audit.writes(audit_log))


def run_all(
    observer: Observer,
    submissions: list[Submission],
    faults: list[Fault],
    logs: list[Path],
    audit_log: Path,
    log: Callable[[str], None],
) -> None:
    for problem in (
        *unaccounted(observer),
        *lost(observer, submissions),
        *taken_without_webhooks(faults, submissions),
        *tracebacks(logs),
        *two_writers(audit_log),
    ):
        observer.violation(problem)
