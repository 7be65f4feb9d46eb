"""The collector paused while scheduling passes run: two passes at once, on two threads, never
turn it back on under each other."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator

import pytest

from sluice.operator.memory import paused


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


class Pass:
    """A pass on a thread of its own, inside ``paused`` until told to leave; it notes whether
    the collector is on when told to look."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.look = threading.Event()
        self.looked = threading.Event()
        self.leave = threading.Event()
        self.seen: list[bool] = []
        self.thread = threading.Thread(target=paused, args=(self._body,), daemon=True)

    def _body(self) -> None:
        self.inside.set()
        while True:
            self.look.wait()
            if self.leave.is_set():
                return
            self.look.clear()
            self.seen.append(gc.isenabled())
            self.looked.set()

    def enter(self) -> None:
        self.thread.start()
        self.inside.wait()

    def glance(self) -> bool:
        self.looked.clear()
        self.look.set()
        self.looked.wait()
        return self.seen[-1]

    def exit(self) -> None:
        self.leave.set()
        self.look.set()
        self.thread.join()


@pytest.mark.parametrize("first_out", ["decision", "full"])
def test_the_collector_stays_off_until_the_last_of_two_passes_leaves(first_out: str) -> None:
    passes = {"decision": Pass(), "full": Pass()}
    passes["decision"].enter()
    passes["full"].enter()
    assert not passes["decision"].glance() and not passes["full"].glance()
    passes[first_out].exit()
    still = next(p for name, p in passes.items() if name != first_out)
    assert not still.glance()  # the other pass left: the collector is still off here
    still.exit()
    assert gc.isenabled()  # the last one out turned it back on


def test_a_collector_off_before_the_passes_stays_off_after_them() -> None:
    gc.disable()
    one, two = Pass(), Pass()
    one.enter()
    two.enter()
    one.exit()
    two.exit()
    assert not gc.isenabled()


def test_a_pass_that_raises_still_gives_the_collector_back() -> None:
    def fails() -> None:
        raise RuntimeError("pass failed")

    call: Callable[[], None] = fails
    with pytest.raises(RuntimeError):
        paused(call)
    assert gc.isenabled()
