"""Prometheus metrics of the webhook server (own registry: tests start several servers)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sluice.observability import new_registry


@dataclass
class WebhookMetrics:
    registry: CollectorRegistry = field(default_factory=new_registry)

    def __post_init__(self) -> None:
        self.requests = Counter(
            "sluice_webhook_requests",
            "Admission requests by path and outcome (allowed, denied, bad_request, abandoned,"
            " error).",
            ["path", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "sluice_webhook_latency_seconds",
            "Time to answer an admission request, by path and decision (allowed, denied,"
            " bad_request, abandoned, error).",
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
