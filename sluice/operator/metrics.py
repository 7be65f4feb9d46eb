"""Prometheus metrics of the operator."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry()

CYCLE_SECONDS = Histogram(
    "sluice_cycle_duration_seconds",
    "Time of one scheduling cycle (snapshot, decisions), without the writes.",
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
UNSURE_JOBS = Gauge(
    "sluice_unsure_jobs",
    "Jobs whose last write has an unknown outcome; no cycle runs until they are read again.",
    registry=REGISTRY,
)
PENDING = Gauge("sluice_pending_jobs", "Pending jobs after the last cycle.", registry=REGISTRY)
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
