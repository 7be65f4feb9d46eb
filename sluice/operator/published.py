"""The latest cycle's results, as the scheduling loop hands them to the Queue handlers."""

from __future__ import annotations

import asyncio
from datetime import datetime

from sluice.scheduler.model import CycleResult


class Published:
    """Written by the loop after each cycle; each Queue's status handler waits for the next
    one. Lives on the event loop: publish and wait from coroutines or loop callbacks only."""

    def __init__(self) -> None:
        self.result: CycleResult | None = None
        self.now: datetime | None = None
        self.version = 0
        self._next = asyncio.Event()

    def publish(self, result: CycleResult, now: datetime) -> None:
        self.result, self.now = result, now
        self.version += 1
        done, self._next = self._next, asyncio.Event()
        done.set()

    async def newer_than(self, seen: int) -> int:
        """Wait until a cycle later than ``seen`` is published; its version."""
        while self.version == seen:
            await self._next.wait()
        return self.version
