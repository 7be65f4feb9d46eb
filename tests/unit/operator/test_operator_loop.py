"""The loop's wakes and the Lease: bursts coalesce, followers never decide, a new leader
lists first, nothing is decided before the configuration is read, and decisions never wait
for the full pass. The timing rules themselves are the pacing's (test_operator_pacing.py,
on a fake clock); these tests wait for what the loop does, never for a time."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from operator_fakes import job_object
from urllib3.exceptions import MaxRetryError, ProtocolError

from sluice.operator.loop import LoopSettings, SchedulingLoop
from sluice.operator.state import ClusterState


class Elector:
    def __init__(self, leading: bool) -> None:
        self.leading = leading
        self.is_leader = leading
        self.led_since = 0.0 if leading else float("inf")

    def holds(self) -> bool:
        return self.leading


class Recorder:
    """Stands in for the two passes, the relist and the configuration read, recording their
    order."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.ran = asyncio.Event()
        self.full_done = asyncio.Event()
        self.hold_full = asyncio.Event()
        self.hold_full.set()
        self.config_readable = True
        self.config_tried = asyncio.Event()
        self.found_decisions = False
        self.loop: SchedulingLoop

    async def decision(self, waited: float = 0.0) -> None:
        self.calls.append("decision")
        self.ran.set()

    async def full(self) -> bool:
        self.calls.append("full")
        await self.hold_full.wait()
        self.full_done.set()
        return self.found_decisions

    def forget(self) -> None:
        pass

    def relist(self) -> None:
        self.calls.append("relist")

    def read_config(self) -> None:
        self.calls.append("config")
        if self.config_readable:
            self.loop.config.text = ""
        elif self.calls.count("config") >= 2:
            self.config_tried.set()


def start(
    elector: Elector,
    debounce: float = 1.0,
    batch: float = 1.0,
    full_pass: float = 5.0,
    resync: float = 60,
) -> tuple[SchedulingLoop, Recorder]:
    state = ClusterState()
    recorder = Recorder()
    settings = LoopSettings(
        namespace="ns",
        debounce_seconds=debounce,
        batch_seconds=batch,
        resync_seconds=resync,
        full_pass_seconds=full_pass,
        retry_seconds=0,
    )
    loop = SchedulingLoop(client.ApiClient(), state, elector, settings, relist=recorder.relist)  # type: ignore[arg-type]
    recorder.loop = loop
    loop.passes = recorder  # type: ignore[assignment]
    loop.config.read = recorder.read_config  # type: ignore[method-assign]
    loop.synced.set()
    return loop, recorder


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_a_burst_of_events_makes_one_cycle_and_a_new_leader_lists_first() -> None:
    loop, recorder = start(Elector(leading=True))
    task = asyncio.create_task(loop.run())
    try:
        loop.state.notify()
        await settle()  # the loop is now in its debounce pause
        for _ in range(50):
            loop.state.notify()
        await recorder.ran.wait()
        await settle()
        assert recorder.calls[:3] == ["relist", "config", "decision"]
        assert recorder.calls.count("decision") == 1
        assert not loop.state.wake.is_set()  # the burst was folded into that one pass
    finally:
        task.cancel()


async def test_a_leader_whose_listing_began_after_it_took_the_lease_does_not_list_again() -> None:
    """A replica that takes the Lease as it starts lists once: its listing already holds
    every write of the leader before it."""
    elector = Elector(leading=True)
    elector.led_since = 100.0
    loop, recorder = start(elector, debounce=0)
    loop.state.listed_at = 100.5
    task = asyncio.create_task(loop.run())
    try:
        loop.state.notify(urgent=False)  # the new leader decides at once all the same
        await recorder.ran.wait()
    finally:
        task.cancel()
    assert recorder.calls[:2] == ["config", "decision"]
    loop.state.listed_at = 99.5  # began before it took the Lease: listed again
    loop._leading = False
    recorder.ran.clear()
    task = asyncio.create_task(loop.run())
    try:
        loop.state.notify(urgent=False)
        await recorder.ran.wait()
    finally:
        task.cancel()
    assert "relist" in recorder.calls


async def test_a_new_leader_that_cannot_list_says_so_in_one_line_and_lists_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The API server unreachable as a replica becomes the leader (restarting, or the network
    cut): a warning naming the error, no traceback, and the listing tried again until it
    works; nothing is decided before it has."""
    loop, recorder = start(Elector(leading=True), debounce=0)
    failures = [
        MaxRetryError(None, "/api/v1/nodes", ProtocolError("Connection aborted.")),  # type: ignore[arg-type]
        ApiException(status=503, reason="Service Unavailable"),
    ]

    def relist() -> None:
        recorder.calls.append("relist")
        if failures:
            raise failures.pop(0)

    loop.relist = relist
    task = asyncio.create_task(loop.run())
    try:
        with caplog.at_level(logging.WARNING, logger="sluice.operator.loop"):
            loop.state.notify()
            await recorder.ran.wait()
    finally:
        task.cancel()
    assert recorder.calls[:5] == ["relist", "relist", "relist", "config", "decision"]
    failed = [r for r in caplog.records if "event=relist-failed" in r.getMessage()]
    assert len(failed) == 2
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in failed)
    assert "Connection aborted" in failed[0].getMessage()
    assert "Service Unavailable" in failed[1].getMessage()


async def test_a_follower_keeps_listening_but_never_cycles() -> None:
    elector = Elector(leading=False)
    loop, recorder = start(elector, debounce=0)
    task = asyncio.create_task(loop.run())
    try:
        for _ in range(3):
            loop.state.notify()
            await settle()
        assert recorder.calls == []
        elector.leading = True
        loop.state.notify()
        await recorder.ran.wait()
        assert recorder.calls[:3] == ["relist", "config", "decision"]
    finally:
        task.cancel()


async def test_a_change_that_only_updates_statuses_waits_for_one_that_may_admit() -> None:
    loop, recorder = start(Elector(leading=True), debounce=0, batch=60)
    task = asyncio.create_task(loop.run())
    try:
        loop.state.notify(urgent=False)  # say, a job's pods started running
        await settle()
        assert recorder.calls == []  # batched: the loop stays free for what comes next
        loop.state.notify()  # a job is created
        await recorder.ran.wait()
        assert recorder.calls[:3] == ["relist", "config", "decision"]
        assert recorder.calls.count("decision") == 1
        assert not loop.state.wake.is_set()  # both folded into that one pass
    finally:
        task.cancel()


async def test_a_new_leaders_first_wake_decides_even_for_a_change_only_statuses_show() -> None:
    loop, recorder = start(Elector(leading=True), debounce=0, batch=0)
    task = asyncio.create_task(loop.run())
    try:
        loop.state.notify(urgent=False)
        await recorder.ran.wait()
        assert recorder.calls[:3] == ["relist", "config", "decision"]
    finally:
        task.cancel()


async def test_no_cycle_runs_before_the_configured_policy_could_be_read() -> None:
    loop, recorder = start(Elector(leading=True), debounce=0)
    recorder.config_readable = False
    task = asyncio.create_task(loop.run())
    try:
        loop.state.notify()
        await recorder.config_tried.wait()  # it keeps trying
        assert "decision" not in recorder.calls
        recorder.config_readable = True
        await recorder.ran.wait()
        assert recorder.calls[-2:] == ["config", "decision"]
    finally:
        task.cancel()


async def test_decisions_never_wait_for_the_full_pass() -> None:
    """The full pass runs in the background: changes that come while it runs are decided at
    once, and no second full pass starts beside it."""
    loop, recorder = start(Elector(leading=True), debounce=0, full_pass=0)
    recorder.hold_full.clear()  # the full pass takes its time
    task = asyncio.create_task(loop.run())
    try:
        loop.state.notify()
        await recorder.ran.wait()
        await settle()
        assert recorder.calls == ["relist", "config", "decision", "full"]
        for _ in range(3):
            recorder.ran.clear()
            loop.state.notify()
            await recorder.ran.wait()
        assert recorder.calls.count("decision") == 4
        assert recorder.calls.count("full") == 1
        recorder.hold_full.set()
        await recorder.full_done.wait()
    finally:
        task.cancel()


async def test_a_full_pass_that_fails_is_run_again() -> None:
    loop, recorder = start(Elector(leading=True), debounce=0, batch=0, full_pass=0)
    failing = recorder.full

    async def full() -> bool:
        if recorder.calls.count("full") == 0:
            recorder.calls.append("full")
            raise RuntimeError("a bad full pass")
        return await failing()

    recorder.full = full  # type: ignore[method-assign]
    task = asyncio.create_task(loop.run())
    try:
        loop.state.notify()
        await recorder.full_done.wait()
        # Run again on its own: the wake it asks for is not one a decision pass is for.
        assert recorder.calls == ["relist", "config", "decision", "full", "full"]
    finally:
        task.cancel()


async def test_a_full_pass_that_found_decisions_not_taken_gets_a_decision_pass() -> None:
    loop, recorder = start(Elector(leading=True), debounce=0, batch=0, full_pass=0)
    recorder.found_decisions = True
    task = asyncio.create_task(loop.run())
    try:
        loop.state.notify()
        await recorder.full_done.wait()
        recorder.ran.clear()
        await recorder.ran.wait()
        assert recorder.calls == ["relist", "config", "decision", "full", "decision"]
    finally:
        task.cancel()


def suspended_job(name: str, version: int) -> dict[str, Any]:
    body = job_object(name)
    body["metadata"]["resourceVersion"] = str(version)
    return body


def test_the_decision_pass_is_told_what_changed_and_starts_over_when_it_fails() -> None:
    """The first decision pass takes every workload, the next only those that changed; one
    that fails loses what it was told, so the one after takes every workload again."""
    settings = LoopSettings(namespace="ns")
    loop = SchedulingLoop(client.ApiClient(), ClusterState(), Elector(True), settings)  # type: ignore[arg-type]
    loop.state.on_workload("ADDED", suspended_job("a", 1))
    loop.state.on_workload("ADDED", suspended_job("b", 2))
    told: list[Any] = []
    decide = loop.passes.decision_pass.decide

    def spy(snapshot: Any, changed: Any = None) -> Any:
        told.append(None if changed is None else sorted(changed))
        return decide(snapshot, changed)

    loop.passes.decision_pass.decide = spy  # type: ignore[method-assign]
    loop.passes._decide()
    loop.state.on_workload("ADDED", suspended_job("c", 3))
    loop.passes._decide()
    assert told == [None, ["ns/c"]]
    assert sorted(loop.passes.decision_pass.views) == ["ns/a", "ns/b", "ns/c"]

    def fail(snapshot: Any, changed: Any = None) -> Any:
        raise RuntimeError("a pass that fails")

    loop.passes.decision_pass.decide = fail  # type: ignore[method-assign]
    loop.state.on_workload("DELETED", suspended_job("a", 4))
    with pytest.raises(RuntimeError):
        loop.passes._decide()
    taken, *_ = loop.passes._decide()  # a new decision pass: every workload again
    assert sorted(loop.passes.decision_pass.views) == ["ns/b", "ns/c"]
    assert sorted(j.key for j in taken.snapshot.workloads) == ["ns/b", "ns/c"]
