"""The manager of named runnables: those that need the Lease start once it is held, the others
at once; a signal, a lost Lease or a runnable that ends stops them all, the servers last, after
the Lease is handed over."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import pytest
from kubernetes import client

from sluice.dashboard.view import DashboardView
from sluice.operator import run
from sluice.operator.manager import Manager, Runnable
from sluice.operator.run import OperatorOptions


class Lease:
    def __init__(self) -> None:
        self.held = asyncio.Event()

    async def leading(self) -> None:
        await self.held.wait()


class Log:
    """What the runnables did, in order."""

    def __init__(self) -> None:
        self.said: list[str] = []
        self.started: dict[str, asyncio.Event] = {}

    def runnable(self, name: str, **how: bool) -> Runnable:
        started = self.started[name] = asyncio.Event()

        async def run() -> None:
            self.said.append(f"start {name}")
            started.set()
            try:
                await asyncio.Event().wait()
            finally:
                self.said.append(f"end {name}")

        return Runnable(name, run, **how)


async def test_a_runnable_that_needs_the_lease_starts_once_it_is_held() -> None:
    lease, log = Lease(), Log()
    manager = Manager("me", lease.leading)
    manager.start(log.runnable("watches"), log.runnable("queues", needs_lease=True))
    await log.started["watches"].wait()
    for _ in range(10):
        await asyncio.sleep(0)
    assert log.said == ["start watches"]
    lease.held.set()
    await log.started["queues"].wait()
    assert log.said == ["start watches", "start queues"]
    assert [t.get_name() for t in manager.tasks] == ["watches", "queues"]
    await manager.stop(_nothing)


async def _nothing() -> None:
    pass


async def test_a_signal_stops_them_all_the_servers_last_after_the_lease_is_handed_over() -> None:
    lease, log = Lease(), Log()
    lease.held.set()
    manager = Manager("me", lease.leading)
    asked: list[str] = []
    ended = asyncio.Event()

    async def kopf() -> None:
        log.said.append("start kopf")
        await ended.wait()
        log.said.append("end kopf")

    def stop_kopf() -> None:
        asked.append("kopf")
        ended.set()

    manager.start(log.runnable("health", server=True))
    manager.start(Runnable("kopf", kopf, stop=stop_kopf), log.runnable("loop"))
    await log.started["loop"].wait()
    running = asyncio.get_running_loop()
    manager.stop_on_signals()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert await manager.until_stopped(asyncio.Event().wait()) == 0
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            running.remove_signal_handler(sig)

    async def hand_over() -> None:
        log.said.append("hand over")

    await manager.stop(hand_over)
    assert asked == ["kopf"]  # asked to end on its own, not cancelled
    assert log.said[-4:] == ["end kopf", "end loop", "hand over", "end health"]
    assert all(task.done() for task in manager.tasks)


async def test_a_lost_lease_ends_with_status_1(caplog: pytest.LogCaptureFixture) -> None:
    lease, log = Lease(), Log()
    manager = Manager("me", lease.leading)
    manager.start(log.runnable("loop"))
    lost = asyncio.Event()
    lost.set()
    with caplog.at_level(logging.ERROR, logger="sluice.operator"):
        assert await manager.until_stopped(lost.wait()) == 1
    assert "event=lease-lost identity=me exiting=1" in caplog.text
    await manager.stop(_nothing)


async def test_a_runnable_that_fails_ends_them_all_with_status_1(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lease, log = Lease(), Log()
    manager = Manager("me", lease.leading)

    async def broken() -> None:
        raise RuntimeError("a bug")

    manager.start(log.runnable("loop"), Runnable("queues", broken))
    with caplog.at_level(logging.ERROR, logger="sluice.operator"):
        assert await manager.until_stopped(asyncio.Event().wait()) == 1
    assert "event=task-failed task=queues error=RuntimeError('a bug')" in caplog.text
    await manager.stop(_nothing)
    assert log.said == ["start loop", "end loop"]


async def test_a_runnable_that_ends_on_its_own_ends_them_all_with_status_0() -> None:
    """Kopf, once it has taken SIGTERM over, ends its task: that is the signal."""
    lease, log = Lease(), Log()
    manager = Manager("me", lease.leading)

    async def kopf() -> None:
        pass

    manager.start(log.runnable("loop"), Runnable("kopf", kopf))
    assert await manager.until_stopped(asyncio.Event().wait()) == 0
    await manager.stop(_nothing)
    assert log.said[-1] == "end loop"


async def test_the_operators_runnables_and_which_of_them_need_the_lease() -> None:
    """Only the reconcilers of Queues and Topologies wait for the Lease; the watches and the
    loop run on every replica (a follower stays warm), the servers answer from the start."""
    options = OperatorOptions(namespace="ns", dashboard_port=8081)
    parts = run.build(client.ApiClient(), options)
    servers = run.servers(parts, options, list)
    assert [(r.name, r.needs_lease, r.server) for r in servers] == [
        ("health", False, True),
        ("metrics", False, True),
    ]
    view = DashboardView(cluster=parts.state.cluster_views)
    found = run.runnables(parts, options, {}, view)
    assert {r.name: r.needs_lease for r in found} == {
        "kopf": False,
        "watches": False,
        "loop": False,
        "queues": True,
        "topologies": True,
        "dashboard": False,
    }
    assert not any(r.server for r in found)
    assert [r.name for r in found if r.stop is not None] == ["kopf", "watches"]
