"""Prometheus metrics of the operator, and how a cycle's result becomes them."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Iterable
from datetime import UTC, datetime

from prometheus_client import Counter, Gauge, Histogram

from sluice.api.queue import Queue
from sluice.api.views import WorkloadView
from sluice.api.workload_sizes import pods_admitted_and_waiting
from sluice.observability import new_registry
from sluice.queues.limits import over_capability
from sluice.scheduler.growth import grown_workload
from sluice.scheduler.model import CycleResult, Decision, QueueResult

REGISTRY = new_registry()

CYCLE_SECONDS = Histogram(
    "sluice_cycle_duration_seconds",
    "Time of one full pass (snapshot, the whole cycle), without the writes.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
DECISION_SECONDS = Histogram(
    "sluice_decision_duration_seconds",
    "Time of one decision pass (snapshot, the decision pass's decisions), without the writes.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
APPLY_SECONDS = Histogram(
    "sluice_apply_duration_seconds",
    "Time to write one cycle's results to the API server.",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
DECISIONS = Counter(
    "sluice_decisions", "Job decisions written, by action.", ["action"], registry=REGISTRY
)
API_WRITES = Counter(
    "sluice_api_writes", "Writes to the API server, by kind of write.", ["kind"], registry=REGISTRY
)
STALE_WRITES = Counter(
    "sluice_stale_writes",
    "Job writes refused because the Job changed since the cycle read it (decided again next).",
    registry=REGISTRY,
)
EVENTS_DROPPED = Counter(
    "sluice_events_dropped",
    "Events not posted because too many were waiting for the API server (decisions are on the"
    " Jobs regardless).",
    registry=REGISTRY,
)
UNSURE_JOBS = Gauge(
    "sluice_unsure_jobs",
    "Jobs whose last write has an unknown outcome; no cycle runs until they are read again.",
    registry=REGISTRY,
)
PENDING = Gauge(
    "sluice_pending_jobs",
    "Pending jobs after the last cycle, by queue and class of reason (quota, cluster, fifo,"
    " namespace, queue, victim, other).",
    ["queue", "reason"],
    registry=REGISTRY,
)
ADMISSION_WAIT = Histogram(
    "sluice_admission_wait_seconds",
    "From a job's creation to its admission, by queue.",
    ["queue"],
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400),
    registry=REGISTRY,
)
EVICTIONS = Counter(
    "sluice_evictions",
    "Admitted jobs suspended again, by queue and reason (reclaim, preempt, requeue).",
    ["queue", "reason"],
    registry=REGISTRY,
)
PARTIAL_ADMISSIONS = Counter(
    "sluice_partial_admissions",
    "Workloads admitted smaller than they asked, at a size at or above their minimum, by queue.",
    ["queue"],
    registry=REGISTRY,
)
WORKLOAD_ADMITTED_PODS = Gauge(
    "sluice_workload_admitted_pods",
    "Pods its queue admitted, per resizable workload (one that declares a minimum or is"
    " admitted with a record of its size; no other workload has a series), as the last full"
    " cycle saw it: 0 while it waits. Its series goes when the workload finishes or is deleted.",
    ["namespace", "name", "queue"],
    registry=REGISTRY,
)
WORKLOAD_WAITING_PODS = Gauge(
    "sluice_workload_waiting_pods",
    "Pods waiting in its queue, per resizable workload (as sluice_workload_admitted_pods):"
    " all it asks while it waits, its growth beyond its admitted size while admitted. Its"
    " series goes when the workload finishes or is deleted.",
    ["namespace", "name", "queue"],
    registry=REGISTRY,
)
EVENT_LOOP_LAG = Histogram(
    "sluice_event_loop_lag_seconds",
    "How late a timer on the operator's event loop fires (probed every 0.1 s): the longest a"
    " watch event waits for the loop to store it.",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
LAG_PROBE_SECONDS = 0.1
WATCH_ECHO = Histogram(
    "sluice_watch_echo_seconds",
    "How long each of the operator's own writes to a workload or Queue took to come back on"
    " its watch: how far behind the watches run (events wait in the watch streams and in"
    " Kopf's queues before the operator sees them).",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900),
    registry=REGISTRY,
)
LEADER = Gauge("sluice_leader", "1 while this replica holds the Lease.", registry=REGISTRY)
CONFIG_ERRORS = Counter(
    "sluice_config_errors",
    "Scheduler configurations refused (the last good one stays in use).",
    registry=REGISTRY,
)
QUEUE_ALLOCATED = Gauge(
    "sluice_queue_allocated",
    "Allocated per queue and resource (units of the resource).",
    ["queue", "resource"],
    registry=REGISTRY,
)
QUEUE_DESERVED = Gauge(
    "sluice_queue_deserved",
    "Deserved per queue and resource (units of the resource).",
    ["queue", "resource"],
    registry=REGISTRY,
)
QUEUE_SHARE = Gauge("sluice_queue_share", "Share per queue.", ["queue"], registry=REGISTRY)
QUEUE_USAGE = Gauge(
    "sluice_queue_usage",
    "Usage over time per queue and resource: resource-seconds held, decayed with the usage"
    " plugin's half-life (absent when the plugin is off).",
    ["queue", "resource"],
    registry=REGISTRY,
)
QUEUE_GUARANTEE = Gauge(
    "sluice_queue_guarantee",
    "Guarantee per queue and resource (units of the resource).",
    ["queue", "resource"],
    registry=REGISTRY,
)
QUEUE_CAPABILITY = Gauge(
    "sluice_queue_capability",
    "Capability (spec) per queue and resource (units of the resource); absent: unlimited.",
    ["queue", "resource"],
    registry=REGISTRY,
)
QUEUE_OVER_CAPABILITY = Gauge(
    "sluice_queue_over_capability",
    "How much more than its capability a queue holds, per resource (units of the resource),"
    " while its workloads' pods ask more than they were admitted with; absent: within it.",
    ["queue", "resource"],
    registry=REGISTRY,
)
QUEUE_FLAVOR_ALLOCATED = Gauge(
    "sluice_queue_flavor_allocated",
    "Allocated per queue, flavor and resource (units of the resource): what the admitted"
    " workloads of its subtree hold in the flavor.",
    ["queue", "flavor", "resource"],
    registry=REGISTRY,
)
QUEUE_FLAVOR_DESERVED = Gauge(
    "sluice_queue_flavor_deserved",
    "Deserved per queue, flavor and resource (units of the resource), for the flavors its own"
    " entries name.",
    ["queue", "flavor", "resource"],
    registry=REGISTRY,
)
QUEUE_FLAVOR_REAL_CAPABILITY = Gauge(
    "sluice_queue_flavor_real_capability",
    "realCapability per queue, flavor and resource (units of the resource), for the flavors"
    " its own entries name.",
    ["queue", "flavor", "resource"],
    registry=REGISTRY,
)
TOPOLOGY_FREE = Gauge(
    "sluice_topology_domain_free",
    "Free room per domain of each Topology's widest level and resource (units of the"
    " resource), after the last cycle.",
    ["level", "domain", "resource"],
    registry=REGISTRY,
)
QUEUE_INFO = Gauge(
    "sluice_queue_info",
    "1 per queue, with its parent and state.",
    ["queue", "parent", "state"],
    registry=REGISTRY,
)

REASON_CLASSES = (
    ("would use", "quota"),
    ("over its capability", "quota"),
    ("cluster has", "cluster"),
    ("no node", "cluster"),
    ("waiting behind", "fifo"),
    ("takes jobs only from namespaces", "namespace"),
    ("is not valid", "queue"),
    ("child queues", "queue"),
    ("does not exist", "queue"),
    ("queue root", "queue"),
    ("reclaimed for", "victim"),
    ("preempted for", "victim"),
    (" holds ", "topology"),
    ("Topology", "topology"),
)


@functools.cache
def reason_class(cause: str) -> str:
    """The class of what stops a pending job, for the pending_jobs label (a few values, not
    text). Causes repeat across the jobs of a queue, so each is classed once."""
    for words, kind in REASON_CLASSES:
        if words in cause:
            return kind
    return "other"


Series = dict[tuple[Gauge, tuple[str, ...]], float]
"""A cycle's gauge values, by gauge and label values."""


def cycle_series(
    result: CycleResult, queues: Iterable[Queue], workloads: Iterable[WorkloadView] = ()
) -> Series:
    """Every per-queue gauge value a written cycle shows, and the pods of each resizable
    workload among ``workloads`` (its snapshot's)."""
    series: Series = workload_series(workloads)
    for job in result.pending:
        key = (PENDING, (job.queue, reason_class(job.cause)))
        series[key] = series.get(key, 0) + 1
    for name, q in result.queues.items():
        series[QUEUE_SHARE, (name,)] = q.share
        series[QUEUE_INFO, (name, q.parent or "", q.state)] = 1
        for gauge, amounts in (
            (QUEUE_ALLOCATED, q.allocated),
            (QUEUE_DESERVED, q.deserved),
            (QUEUE_GUARANTEE, q.guarantee),
        ):
            for resource, amount in amounts.items():
                series[gauge, (name, resource)] = amount / 1000
        if q.usage is not None:
            for resource, used in q.usage.resources.items():
                series[QUEUE_USAGE, (name, resource)] = used
        series.update(flavor_series(name, q))
    for where, free in result.domains_free.items():
        level, _, value = where.partition("=")
        for resource, amount in free.items():
            series[TOPOLOGY_FREE, (level, value, resource)] = amount / 1000
    for spec in queues:
        capability = spec.spec.capability
        for resource, amount in capability.items():
            series[QUEUE_CAPABILITY, (spec.name, resource)] = amount / 1000
        shown = result.queues.get(spec.name)
        if shown is not None and capability:
            for r, (used, cap) in over_capability(shown.allocated.amounts, capability).items():
                series[QUEUE_OVER_CAPABILITY, (spec.name, r)] = (used - cap) / 1000
    return series


def workload_series(workloads: Iterable[WorkloadView]) -> Series:
    """Pods admitted and waiting per resizable workload (``pods_admitted_and_waiting``):
    a series only for those, so that the labels stay as many as the workloads that resize."""
    series: Series = {}
    for view in workloads:
        pods = pods_admitted_and_waiting(view)
        if pods is None:
            continue
        labels = (view.namespace, view.name, view.queue)
        series[WORKLOAD_ADMITTED_PODS, labels], series[WORKLOAD_WAITING_PODS, labels] = pods
    return series


def flavor_series(name: str, queue: QueueResult) -> Series:
    """A queue's gauges per flavor: allocated in every flavor it holds in, deserved and
    realCapability in those its own entries name."""
    series: Series = {}
    for figures in queue.flavors:
        shown = [(QUEUE_FLAVOR_ALLOCATED, figures.allocated)]
        if figures.named:
            shown += [
                (QUEUE_FLAVOR_DESERVED, figures.deserved),
                (QUEUE_FLAVOR_REAL_CAPABILITY, figures.real_capability),
            ]
        for gauge, amounts in shown:
            for resource, amount in amounts.items():
                series[gauge, (name, figures.name, resource)] = amount / 1000
    return series


_shown: Series = {}
"""The per-queue series last published: a cycle sets only the values that changed and
removes the series that are gone (a deleted queue's, a class of reason no job has any more).
With a thousand queues, setting every series each cycle took longer than its decisions."""
_shown_lock = threading.Lock()


def publish(
    result: CycleResult, queues: Iterable[Queue], workloads: Iterable[WorkloadView] = ()
) -> None:
    """A full pass as metrics: per-queue numbers, pending by reason, and the pods of each
    resizable workload of its snapshot (``workloads``). The series follow the cycle whole,
    so a deleted queue's and a finished or deleted workload's go away."""
    global _shown
    series = cycle_series(result, queues, workloads)
    with _shown_lock:
        for (gauge, labels), value in series.items():
            if _shown.get((gauge, labels)) != value:
                gauge.labels(*labels).set(value)
        for gauge, labels in _shown.keys() - series.keys():
            with contextlib.suppress(KeyError):  # already gone
                gauge.remove(*labels)
        _shown = series


def decision_written(decision: Decision, created: datetime | None) -> None:
    """One decision has landed on its workload, whichever pass made it: counted by action; an
    admission's wait since the workload was created observed, and counted by its queue when
    it is admitted smaller; an eviction counted by its queue and why (a workload that only
    gives pods above its minimum, ``Decision.shrinks``, is not suspended: no eviction)."""
    DECISIONS.labels(decision.action).inc()
    if decision.action != "admit":
        if not decision.shrinks:
            EVICTIONS.labels(decision.queue, decision.action).inc()
        return
    if decision.smaller and grown_workload(decision.job) is None:
        # A growth's record may still say less than was first asked: it is no partial admission.
        PARTIAL_ADMISSIONS.labels(decision.queue).inc()
    if created is not None:
        waited = (datetime.now(UTC) - created).total_seconds()
        ADMISSION_WAIT.labels(decision.queue).observe(max(waited, 0.0))


async def probe_event_loop_lag(interval: float = LAG_PROBE_SECONDS) -> None:
    """Observe, forever, how late a sleep of ``interval`` wakes on the running loop.

    Watch events are read and stored on that loop, so a loop busy elsewhere (a cycle's
    snapshot, say) holds every event back by as much: this is the watch lag it causes.
    """
    loop = asyncio.get_running_loop()
    while True:
        asked = loop.time()
        await asyncio.sleep(interval)
        EVENT_LOOP_LAG.observe(max(loop.time() - asked - interval, 0.0))
