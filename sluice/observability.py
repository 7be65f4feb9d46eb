"""What every sluice process exports besides its own metrics: the standard process and
Python collectors, and ``sluice_build_info``."""

from __future__ import annotations

import platform

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Gauge,
)

from sluice import __version__


def new_registry() -> CollectorRegistry:
    """A registry with the process and Python collectors and the build info in it."""
    registry = CollectorRegistry()
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(collector)
    build = Gauge(
        "sluice_build_info",
        "1, with sluice's version and Python's.",
        ["version", "python"],
        registry=registry,
    )
    build.labels(__version__, platform.python_version()).set(1)
    return registry
