"""The collector pacing: survivors frozen, young ones now and then, everything thawed rarely."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from sluice.operator.memory import CollectorPacer


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    yield
    gc.unfreeze()


class Ring:
    me: object = None


def frozen(obj: object) -> bool:
    """Tracked by the collector, yet in none of its generations: in the permanent one."""
    return gc.is_tracked(obj) and id(obj) not in {id(o) for o in gc.get_objects()}


def test_survivors_are_frozen_young_ones_on_schedule_and_all_thawed_rarely() -> None:
    now = [0.0]
    pacer = CollectorPacer(young_seconds=30, full_seconds=900, clock=lambda: now[0])
    old = [0]
    pacer.settle()
    assert frozen(old)
    young = [1]
    now[0] = 10
    pacer.tick()  # too soon: what came since stays in the collector's sight
    assert not frozen(young)
    now[0] = 31
    collected: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collected.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        pacer.tick()
    finally:
        gc.callbacks.remove(seen)
    assert frozen(young)
    assert collected and max(collected) < 2  # the young ones only: not a full collection
    # A cycle of frozen objects that became garbage is only reclaimed by the full round.
    ring = Ring()
    ring.me = ring
    gone = weakref.ref(ring)
    pacer.settle()
    del ring
    gc.collect()
    assert gone() is not None  # frozen: out of the collector's sight
    now[0] = 901
    pacer.tick()
    assert gone() is None
    assert frozen(old) and frozen(young)  # the survivors are frozen again
