"""The soak's own view of the cluster: a watch of Jobs and queued pods of its own (not the
operator's caches), from which it keeps every workload's history and checks the invariants at
every resourceVersion it sees:

- no queue's admitted workloads ask more cpu than its capability, or than any ancestor's (a
  suspected breach is confirmed by listing Jobs and pods at exactly that resourceVersion);
- no workload is admitted twice (its ``sluice.dev/admitted-at`` replaced while it stays
  admitted).

``final`` checks the rest when the soak ends.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.watch.watch import iter_resp_lines

from chaos.load import KIND_LABEL, QUEUE_LABEL, QUEUES

ADMITTED_AT = "sluice.dev/admitted-at"
PENDING_REASON = "sluice.dev/pending-reason"
REQUEUES = "sluice.dev/requeues"
RECLAIMED_BY = "sluice.dev/reclaimed-by"
GATE = "sluice.dev/admission"
Obj = dict[str, Any]

PARENTS = {q["name"]: q["spec"]["parent"] for q in QUEUES}
CAPABILITY: dict[str, str | None] = {
    q["name"]: q["spec"].get("capability", {}).get("cpu") for q in QUEUES
}


def millicpu(value: str) -> int:
    return int(value[:-1]) if value.endswith("m") else int(float(value) * 1000)


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _annotations(obj: Obj) -> dict[str, str]:
    return _meta(obj).get("annotations") or {}


def pod_cpu(spec: Obj) -> int:
    return sum(
        millicpu(((c.get("resources") or {}).get("requests") or {}).get("cpu", "0"))
        for c in spec.get("containers") or []
    )


def job_finished(job: Obj) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def job_admitted(job: Obj) -> bool:
    return (job.get("spec") or {}).get("suspend") is False and ADMITTED_AT in _annotations(job)


def job_usage(job: Obj) -> int:
    """cpu an admitted, unfinished Job holds: its pods still to run at once (parallelism less
    the completions reached) times its pod's request."""
    if not job_admitted(job) or job_finished(job):
        return 0
    spec = job.get("spec") or {}
    parallelism = spec.get("parallelism", 1)
    completions = spec.get("completions", parallelism)
    succeeded = (job.get("status") or {}).get("succeeded") or 0
    running = max(min(int(parallelism), int(completions) - int(succeeded)), 0)
    return running * pod_cpu((spec.get("template") or {}).get("spec") or {})


def pod_owned_by_job(pod: Obj) -> bool:
    return any(o.get("kind") == "Job" for o in _meta(pod).get("ownerReferences") or [])


def pod_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") or bool(
        _meta(pod).get("deletionTimestamp")
    )


def pod_admitted(pod: Obj) -> bool:
    gates = [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
    return GATE not in gates and ADMITTED_AT in _annotations(pod)


def pod_usage(pod: Obj) -> int:
    if pod_owned_by_job(pod) or pod_terminal(pod) or not pod_admitted(pod):
        return 0
    return pod_cpu(pod.get("spec") or {})


def usage_by_queue(jobs: Iterator[Obj], pods: Iterator[Obj]) -> dict[str, int]:
    """cpu held per queue, each leaf's counted in every ancestor too."""
    used: dict[str, int] = {}
    for obj, amount in [*((j, job_usage(j)) for j in jobs), *((p, pod_usage(p)) for p in pods)]:
        queue = str((_meta(obj).get("labels") or {}).get(QUEUE_LABEL))
        while amount and queue in PARENTS:
            used[queue] = used.get(queue, 0) + amount
            queue = PARENTS[queue]
    return used


def over_capability(used: dict[str, int]) -> list[str]:
    return [
        f"{queue} holds {used[queue]}m cpu over its capability {cap}"
        for queue, cap in CAPABILITY.items()
        if cap is not None and used.get(queue, 0) > millicpu(cap)
    ]


def _items(raw: Any) -> list[Obj]:
    """The items of a listing asked for raw (``_preload_content=False``)."""
    items: list[Obj] = json.loads(raw.data)["items"]
    return items


def workload_key(obj: Obj) -> str:
    meta = _meta(obj)
    kind = "Job" if obj.get("kind") == "Job" or "parallelism" in (obj.get("spec") or {}) else "Pod"
    return f"{kind}:{meta.get('namespace')}/{meta.get('name')}"


@dataclass
class History:
    kind: str
    queue: str
    first_seen: float
    admissions: list[float] = field(default_factory=list)
    evictions: list[tuple[float, str]] = field(default_factory=list)
    finished: float | None = None
    deleted: float | None = None
    newest_pod: str = ""
    """A Job's: the creationTimestamp of its newest pod seen (RFC 3339, as the API server
    writes it, so it compares with ``sluice.dev/admitted-at``)."""


@dataclass
class Observer:
    api: client.ApiClient
    log: Callable[[str], None]
    jobs: dict[str, Obj] = field(default_factory=dict)
    pods: dict[str, Obj] = field(default_factory=dict)
    history: dict[str, History] = field(default_factory=dict)
    decisions: list[tuple[float, str, str]] = field(default_factory=list)
    """(wall time, admit|evict, workload) as the watch saw them."""
    violations: list[str] = field(default_factory=list)
    gaps: int = 0
    """Watches restarted from a fresh list (a resourceVersion gone): events not seen."""
    events: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _confirming: set[str] = field(default_factory=set)

    def start(self) -> None:
        core, batch = client.CoreV1Api(self.api), client.BatchV1Api(self.api)
        for name, lister, store in (
            ("jobs", batch.list_job_for_all_namespaces, self.jobs),
            ("pods", core.list_pod_for_all_namespaces, self.pods),
        ):
            selector = KIND_LABEL if name == "jobs" else QUEUE_LABEL
            threading.Thread(
                target=self._watch, args=(lister, selector, store), name=f"observe-{name}",
                daemon=True,
            ).start()  # fmt: skip

    def stop(self) -> None:
        self._stop.set()

    def violation(self, text: str) -> None:
        with self._lock:
            self.violations.append(text)
        self.log(f"VIOLATION {text}")

    # watching -----------------------------------------------------------------------------
    def _watch(self, lister: Callable[..., Any], selector: str, store: dict[str, Obj]) -> None:
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    version = self._relist(lister, selector, store)
                response = lister(
                    label_selector=selector, watch=True, resource_version=version,
                    allow_watch_bookmarks=True, timeout_seconds=120,
                    _preload_content=False, _request_timeout=(5, 150),
                )  # fmt: skip
                for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
                    event = json.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        version = ""  # 410 Gone: list again
                        break
                    version = _meta(obj).get("resourceVersion") or version
                    if event["type"] != "BOOKMARK":
                        self._seen(event["type"], obj, store)
            except Exception:  # noqa: BLE001 - the API server restarts under us: watch again
                time.sleep(0.5)

    def _relist(self, lister: Callable[..., Any], selector: str, store: dict[str, Obj]) -> str:
        raw = lister(label_selector=selector, _preload_content=False, _request_timeout=30)
        listing = json.loads(raw.data)
        kind = listing["kind"].removesuffix("List")
        with self._lock:
            if store:
                self.gaps += 1
            fresh = {workload_key({**o, "kind": kind}): {**o, "kind": kind}
                     for o in listing["items"]}  # fmt: skip
        for key in set(store) - set(fresh):
            self._seen("DELETED", store[key], store)
        for obj in fresh.values():
            self._seen("MODIFIED", obj, store)
        return str(listing["metadata"]["resourceVersion"])

    def _seen(self, kind: str, obj: Obj, store: dict[str, Obj]) -> None:
        now = time.time()
        key = workload_key(obj)
        with self._lock:
            self.events += 1
            old = store.get(key)
            if kind == "DELETED":
                store.pop(key, None)
            else:
                store[key] = obj
            self._record(key, old, None if kind == "DELETED" else obj, now)
            breaches = over_capability(usage_by_queue(iter(self.jobs.values()),
                                                      iter(self.pods.values())))  # fmt: skip
        version = _meta(obj).get("resourceVersion")
        if breaches and version and version not in self._confirming:
            self._confirming.add(version)
            threading.Thread(target=self._confirm, args=(version, breaches), daemon=True).start()

    def _record(self, key: str, old: Obj | None, new: Obj | None, now: float) -> None:
        obj = new or old
        assert obj is not None
        is_job = key.startswith("Job:")
        if not is_job and pod_owned_by_job(obj):
            # A Job's pod: the Job is the workload; remember when it last got a pod.
            meta = _meta(obj)
            owner = next(o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Job")
            record = self.history.get(f"Job:{meta.get('namespace')}/{owner.get('name')}")
            created = str(meta.get("creationTimestamp") or "")
            if record is not None and created > record.newest_pod:
                record.newest_pod = created
            return
        labels = _meta(obj).get("labels") or {}
        history = self.history.get(key)
        if history is None:
            history = self.history[key] = History(
                labels.get(KIND_LABEL, "pod"), labels.get(QUEUE_LABEL, ""), now
            )
        admitted = job_admitted if is_job else pod_admitted
        was = old is not None and admitted(old)
        if new is None:
            history.deleted = now
            return
        now_admitted = admitted(new)
        if now_admitted and not was:
            history.admissions.append(now)
            self.decisions.append((now, "admit", key))
        elif now_admitted and was:
            before, after = _annotations(old or {}).get(ADMITTED_AT), _annotations(new)[ADMITTED_AT]
            if before != after:
                self.violations.append(f"{key} admitted again ({before} then {after})")
                self.log(f"VIOLATION {key} admitted twice")
        elif was and not now_admitted and is_job:
            notes = _annotations(new)
            why = (
                "requeue"
                if notes.get(REQUEUES) != _annotations(old or {}).get(REQUEUES)
                else ("reclaim" if RECLAIMED_BY in notes else "suspend")
            )
            history.evictions.append((now, why))
            self.decisions.append((now, "evict", key))
        if is_job and history.finished is None and job_finished(new):
            history.finished = now
        if (
            not is_job
            and history.finished is None
            and pod_terminal(new)
            and ((new.get("status") or {}).get("phase") in ("Succeeded", "Failed"))
        ):
            history.finished = now

    def _confirm(self, version: str, suspected: list[str]) -> None:
        """List Jobs and queued pods at exactly ``version``: a breach there is a violation."""
        core, batch = client.CoreV1Api(self.api), client.BatchV1Api(self.api)
        try:
            jobs = _items(
                batch.list_job_for_all_namespaces(
                    label_selector=KIND_LABEL,
                    _preload_content=False,
                    resource_version=version,
                    resource_version_match="Exact",
                )
            )
            pods = _items(
                core.list_pod_for_all_namespaces(
                    label_selector=QUEUE_LABEL, _preload_content=False,
                    resource_version=version, resource_version_match="Exact",
                )
            )  # fmt: skip
        except Exception as err:  # noqa: BLE001 - compacted, or the API server away
            self.log(f"could not confirm at resourceVersion {version} ({err!r}): {suspected}")
            return
        for job in jobs:
            job["kind"] = "Job"
        breaches = over_capability(usage_by_queue(iter(jobs), iter(pods)))
        for breach in breaches:
            self.violation(f"at resourceVersion {version}: {breach}")
