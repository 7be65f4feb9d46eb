"""Prometheus metrics of the webhook server (own registry: tests start several servers)."""

from __future__ import annotations

import platform
from dataclasses import dataclass, field

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)

from sluice import __version__


@dataclass
class WebhookMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            self.registry.register(collector)
        build = Gauge(
            "sluice_build_info",
            "1, with sluice's version and Python's.",
            ["version", "python"],
            registry=self.registry,
        )
        build.labels(__version__, platform.python_version()).set(1)
        self.requests = Counter(
            "sluice_webhook_requests",
            "Admission requests by path and outcome (allowed, denied, bad_request, error).",
            ["path", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "sluice_webhook_latency_seconds",
            "Time to answer an admission request, by path and decision (allowed, denied,"
            " bad_request, error).",
            ["path", "decision"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
            registry=self.registry,
        )
        self.denials = Counter(
            "sluice_webhook_denials",
            "Denied admission requests by rule.",
            ["rule"],
            registry=self.registry,
        )
        self.queues = Gauge(
            "sluice_webhook_cached_queues",
            "Queues in the webhook's watch-fed cache.",
            registry=self.registry,
        )
