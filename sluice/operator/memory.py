"""Keeping Python's cyclic garbage collector from stalling the operator.

The operator holds every managed Job, Queue, Node and Pod, as read and as a view: millions of
Python objects in a large cluster. A full collection walks them all and stops every thread
while it does, so watch events wait and cycles pause, for objects that are long-lived and
never in a reference cycle. So the objects that survived a collection are frozen
(``gc.freeze``, out of the collector's sight; freeing by reference count is untouched): after
the first listing, and then every ``young_seconds`` for what has come since, so that each
collection walks only what is new. Between those, only the young generations are collected
before freezing (a full collection walks everything not frozen, and holds the event loop as
long); what reached the oldest generation since is frozen unexamined. Every ``full_seconds``
everything is thawed and collected once, so that a cycle formed among frozen objects is not
kept for ever.

While a scheduling pass runs, the collector is off (``paused``): a pass allocates an
object or more per job, all alive until it ends and none of them in a reference cycle, so the
collector would walk them again and again for nothing. The decision pass and the full pass run
on two threads at once, so the pause is counted: the first pass in turns the collector off,
and only the last one out turns it back on (when it was on before the first came in).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

log = logging.getLogger("sluice.operator.memory")
P = ParamSpec("P")
T = TypeVar("T")


class CollectorPacer:
    def __init__(
        self,
        young_seconds: float = 30.0,
        full_seconds: float = 900.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.young_seconds = young_seconds
        self.full_seconds = full_seconds
        self.clock = clock
        self._young = self._full = clock()

    def settle(self, generation: int = 2) -> None:
        """After a listing: collect what is garbage (up to ``generation``), freeze the rest."""
        gc.collect(generation)
        gc.freeze()
        self._young = self.clock()

    def tick(self) -> None:
        """Between cycles: freeze what survived since the last time, thaw all now and then."""
        now = self.clock()
        if now - self._full >= self.full_seconds:
            started = time.perf_counter()
            gc.unfreeze()
            self.settle()
            self._full = now
            log.info("event=gc-full seconds=%.3f frozen=%d", time.perf_counter() - started,
                     gc.get_freeze_count())  # fmt: skip
        elif now - self._young >= self.young_seconds:
            self.settle(generation=1)


class CollectorPause:
    """The collector held off while any holder is inside (``held``), for the whole process:
    the collector is one per process, so each process has one of these (``PAUSE``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._restore = False
        """Whether the collector was on when the first holder came in."""

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            if self._holders == 0:
                self._restore = gc.isenabled()
                gc.disable()
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0 and self._restore:
                    gc.enable()


PAUSE = CollectorPause()


def paused(call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``call`` with the collector off (``PAUSE``): how a scheduling pass runs."""
    with PAUSE.held():
        return call(*args, **kwargs)
