"""The README's metrics section names exactly the metrics the components export."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from sluice.operator.metrics import REGISTRY
from sluice.webhooks.metrics import WebhookMetrics

README = Path(__file__).resolve().parents[3] / "README.md"


def exported(registry: CollectorRegistry) -> set[str]:
    """Metric families by their exposed name; the client's ``*_created`` timestamps aside."""
    text = generate_latest(registry).decode()
    names = set(re.findall(r"^# TYPE (\S+) ", text, flags=re.MULTILINE))
    return {name for name in names if not name.endswith("_created")}


def documented() -> set[str]:
    section = README.read_text().split("## Metrics", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`(sluice_[a-z_]+)", section))


def test_every_exported_metric_is_documented_and_nothing_else() -> None:
    names = exported(REGISTRY) | exported(WebhookMetrics().registry)
    assert names, "no metric found: the registries changed shape"
    assert documented() == {n for n in names if n.startswith("sluice_")}


def test_both_components_export_the_standard_process_and_python_metrics() -> None:
    for registry in (REGISTRY, WebhookMetrics().registry):
        names = exported(registry)
        assert {
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "python_info",
        } <= names
        assert any(n.startswith("python_gc_") for n in names)
