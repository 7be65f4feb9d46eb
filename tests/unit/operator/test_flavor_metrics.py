"""The gauges per queue and flavor (sluice_queue_flavor_*), from the cycle's figures."""

from __future__ import annotations

from sluice.api.resources import Resources
from sluice.operator.metrics import (
    QUEUE_ALLOCATED,
    QUEUE_FLAVOR_ALLOCATED,
    QUEUE_FLAVOR_DESERVED,
    QUEUE_FLAVOR_REAL_CAPABILITY,
    cycle_series,
)
from sluice.scheduler.model import CycleResult, FlavorFigures, QueueResult

GPU = "nvidia.com/gpu"


def result(*figures: FlavorFigures) -> CycleResult:
    found = QueueResult(
        state="Open",
        parent="root",
        weight=1,
        priority=0,
        allocated=Resources({GPU: 6000}),
        flavors=figures,
    )
    return CycleResult(queue_order=("team",), queues={"team": found})


def test_each_flavor_has_its_allocated_deserved_and_real_capability() -> None:
    h100 = FlavorFigures(
        "h100", Resources({GPU: 4000}), Resources({GPU: 8000}), Resources({GPU: 16000})
    )
    held = FlavorFigures("a100", Resources({GPU: 2000}), named=False)
    series = cycle_series(result(h100, held), [])
    assert series[QUEUE_FLAVOR_ALLOCATED, ("team", "h100", GPU)] == 4
    assert series[QUEUE_FLAVOR_DESERVED, ("team", "h100", GPU)] == 8
    assert series[QUEUE_FLAVOR_REAL_CAPABILITY, ("team", "h100", GPU)] == 16
    assert series[QUEUE_FLAVOR_ALLOCATED, ("team", "a100", GPU)] == 2
    assert (QUEUE_FLAVOR_DESERVED, ("team", "a100", GPU)) not in series
    assert series[QUEUE_ALLOCATED, ("team", GPU)] == 6  # the per-queue gauge unchanged


def test_a_queue_without_flavors_has_no_series_per_flavor() -> None:
    gauges = {gauge for gauge, _ in cycle_series(result(), [])}
    assert not gauges & {QUEUE_FLAVOR_ALLOCATED, QUEUE_FLAVOR_DESERVED}
