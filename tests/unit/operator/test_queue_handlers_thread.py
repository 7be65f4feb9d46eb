"""The Queue handlers run on an event loop of their own: stopping them (the Lease lost for a
moment) cancels nothing of the watches beside them, and a cycle's results still reach them."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from sluice.operator import run
from sluice.operator.published import Published
from sluice.operator.state import ClusterState
from sluice.scheduler.model import CycleResult


class Elector:
    def __init__(self) -> None:
        self.holding = True
        self.changed = asyncio.Event()

    def holds(self) -> bool:
        return self.holding


async def kopf_like_operator(*, stop_flag: threading.Event, **_: Any) -> None:
    """What Kopf's operator does when it ends: it cancels every task created on its event
    loop since it started, whoever created them."""
    existing = asyncio.all_tasks()
    while not stop_flag.is_set():
        await asyncio.sleep(0.01)
    for task in asyncio.all_tasks() - existing:
        task.cancel()


async def handlers_running(running: bool) -> None:
    """Until the handlers' thread is (or is no longer) there."""
    for _ in range(1000):
        names = {t.name for t in threading.enumerate()}
        if ("sluice-queue-handlers" in names) == running:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the queue handlers did not {'start' if running else 'stop'}")


async def test_stopping_the_queue_handlers_leaves_the_watches_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(run.kopf, "operator", kopf_like_operator)
    monkeypatch.setattr(run, "build_queue_registry", lambda state, api: None)
    elector = Elector()
    leading = asyncio.create_task(run.lead_queues(None, ClusterState(), elector))  # type: ignore[arg-type]
    await handlers_running(True)
    watch_worker = asyncio.create_task(asyncio.sleep(60))  # spawned while they run
    elector.holding = False
    elector.changed.set()
    await handlers_running(False)
    await asyncio.sleep(0)
    assert not watch_worker.cancelled() and not watch_worker.done()
    elector.holding = True  # taken back: they run again, and lead_queues goes on
    elector.changed.set()
    await handlers_running(True)
    assert not leading.done()
    leading.cancel()
    watch_worker.cancel()
    await asyncio.gather(leading, watch_worker, return_exceptions=True)


def test_a_cycle_published_wakes_a_waiter_on_another_event_loop() -> None:
    published = Published()
    seen: list[int] = []
    waiting = threading.Event()

    def handlers_loop() -> None:
        async def status() -> None:
            waiting.set()
            seen.append(await published.newer_than(0))

        asyncio.run(asyncio.wait_for(status(), 10))

    thread = threading.Thread(target=handlers_loop)
    thread.start()
    assert waiting.wait(10)
    published.publish(CycleResult(queue_order=(), queues={}), datetime.now(UTC))
    thread.join(10)
    assert seen == [1]


async def test_handlers_stopped_for_a_lease_held_again_meanwhile_start_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Lease held again before the handlers finished stopping: they start again, and the
    operator goes on (it stops only when they stop by themselves)."""
    stopping = threading.Event()

    async def slow_to_stop(*, stop_flag: threading.Event, **_: Any) -> None:
        while not stop_flag.is_set():
            await asyncio.sleep(0.01)
        stopping.set()
        await asyncio.sleep(0.3)  # Kopf stopping its daemons

    monkeypatch.setattr(run.kopf, "operator", slow_to_stop)
    monkeypatch.setattr(run, "build_queue_registry", lambda state, api: None)
    elector = Elector()
    leading = asyncio.create_task(run.lead_queues(None, ClusterState(), elector))  # type: ignore[arg-type]
    await handlers_running(True)
    [first] = [t for t in threading.enumerate() if t.name == "sluice-queue-handlers"]
    elector.holding = False
    elector.changed.set()
    assert await asyncio.to_thread(stopping.wait, 10)
    elector.holding = True  # renewed while they were still stopping
    await asyncio.to_thread(first.join, 10)
    await handlers_running(True)  # a new thread: they started anew
    assert not leading.done()
    leading.cancel()
    await asyncio.gather(leading, return_exceptions=True)
