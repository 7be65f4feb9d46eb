"""The latest cycle's results, as the scheduling loop hands them to the Queue handlers."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime

from sluice.scheduler.model import CycleResult


class Published:
    """Written by the loop after each cycle; each Queue's status handler waits for the next
    one. The Queue handlers run on an event loop of their own (``run.lead_queues``), so a
    waiter is woken on its own loop, whichever loop publishes."""

    def __init__(self) -> None:
        self.result: CycleResult | None = None
        self.now: datetime | None = None
        self.version = 0
        self._lock = threading.Lock()
        self._waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def publish(self, result: CycleResult, now: datetime) -> None:
        with self._lock:
            self.result, self.now = result, now
            self.version += 1
            waiting, self._waiting = self._waiting, []
        for loop, future in waiting:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_wake, future)

    async def newer_than(self, seen: int) -> int:
        """Wait until a cycle later than ``seen`` is published; its version."""
        while True:
            with self._lock:
                if self.version != seen:
                    return self.version
                future = asyncio.get_running_loop().create_future()
                self._waiting.append((asyncio.get_running_loop(), future))
            await future


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
