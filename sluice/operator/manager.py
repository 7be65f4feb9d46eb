"""The operator process as a manager of named runnables, in the shape of controller-runtime's
manager: each part of the process (the watches, the Lease, the scheduling loop, the
reconcilers, the HTTP servers) is one ``Runnable`` with a name, started as one task of that
name. A runnable that needs the Lease starts once this replica holds it; the others run on
every replica, so that a follower stays warm.

The manager stops them all on a signal, on a lost Lease (Kubernetes then starts the process
again, and it comes back as a follower) and when one of them ends: first every runnable but
the servers, then what the caller hands over (the Lease), then the servers, so that health
and metrics answer to the end. Every thread and task of the process: docs/architecture.md,
*Threads and tasks*.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("sluice.operator")

Leading = Callable[[], Awaitable[None]]
"""Returns once this replica holds the Lease."""


@dataclass(frozen=True)
class Runnable:
    name: str
    run: Callable[[], Coroutine[Any, Any, object]]
    needs_lease: bool = False
    """Started only once this replica holds the Lease (it writes)."""
    stop: Callable[[], None] | None = None
    """Asks it to end on its own (Kopf, the watch threads); without one its task is
    cancelled."""
    server: bool = False
    """Stopped last, after the Lease is handed over: it answers until the process ends."""


class Manager:
    def __init__(self, identity: str, leading: Leading) -> None:
        self.identity = identity
        self.leading = leading
        self.started: list[tuple[Runnable, asyncio.Task[object]]] = []
        self.stopping = asyncio.Event()
        """Set by SIGTERM or SIGINT (until Kopf's watches take them over)."""

    @property
    def tasks(self) -> list[asyncio.Task[object]]:
        """Every runnable's task, in the order they were started."""
        return [task for _, task in self.started]

    def stop_on_signals(self) -> None:
        running = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            running.add_signal_handler(sig, self.stopping.set)

    def start(self, *runnables: Runnable) -> None:
        for runnable in runnables:
            task = asyncio.create_task(self._run(runnable), name=runnable.name)
            self.started.append((runnable, task))

    async def _run(self, runnable: Runnable) -> object:
        if runnable.needs_lease:
            await self.leading()
        return await runnable.run()

    async def until_stopped(self, lost: Awaitable[None]) -> int:
        """Until a signal (0), until ``lost`` returns (the Lease lost: 1) or a runnable ends
        (1 when it failed; 0 when it ended on its own, as Kopf does once it took the signal
        over)."""
        waiter: asyncio.Future[object] = asyncio.ensure_future(self.stopping.wait())
        losing: asyncio.Future[object] = asyncio.ensure_future(lost)
        try:
            done, _ = await asyncio.wait(
                [waiter, losing, *self.tasks], return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in (waiter, losing):
                task.cancel()
            await asyncio.gather(waiter, losing, return_exceptions=True)
        status = 0
        if losing in done:
            # As controller-runtime's managers do: stop writing, end, start again as a follower.
            log.error("event=lease-lost identity=%s exiting=1", self.identity)
            status = 1
        for task in self.tasks:
            if task in done and not task.cancelled() and task.exception():
                log.error("event=task-failed task=%s error=%r", task.get_name(), task.exception())
                status = 1
        return status

    async def stop(self, hand_over: Callable[[], Awaitable[None]]) -> None:
        """Stops every runnable but the servers, then ``hand_over``, then the servers."""
        await _stop([pair for pair in self.started if not pair[0].server])
        await hand_over()
        await _stop([pair for pair in self.started if pair[0].server])


async def _stop(started: Sequence[tuple[Runnable, asyncio.Task[object]]]) -> None:
    for runnable, task in started:
        if runnable.stop is not None:
            runnable.stop()
        else:
            task.cancel()
    await asyncio.gather(*(task for _, task in started), return_exceptions=True)
