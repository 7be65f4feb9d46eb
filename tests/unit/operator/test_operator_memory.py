"""The collector pacing: survivors frozen, young ones now and then, everything thawed rarely."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from sluice.operator.memory import CollectorPacer


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    yield
    gc.unfreeze()


def test_survivors_are_frozen_young_ones_on_schedule_and_all_thawed_rarely() -> None:
    now = [0.0]
    pacer = CollectorPacer(young_seconds=30, full_seconds=900, clock=lambda: now[0])
    pacer.settle()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    kept = [[i] for i in range(1000)]  # lists are always tracked by the collector
    now[0] = 10
    pacer.tick()  # too soon: what came since stays in the collector's sight
    assert gc.get_freeze_count() == frozen
    now[0] = 31
    pacer.tick()
    assert gc.get_freeze_count() >= frozen + len(kept)
    # A cycle of frozen objects that became garbage is only reclaimed by the full round.
    ring: list[object] = []
    ring.append(ring)
    pacer.settle()
    del ring
    assert gc.collect() == 0
    now[0] = 901
    pacer.tick()
    assert gc.get_freeze_count() >= len(kept)  # the survivors are frozen again
    assert kept[0] == [0]
