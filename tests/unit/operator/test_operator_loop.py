"""The loop's wake-ups and the Lease: bursts coalesce, followers never write, a new leader
lists first, and a replica that could not renew stops writing before the Lease can pass on."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from operator_fakes import job_object
from urllib3.exceptions import MaxRetryError, ProtocolError

from sluice.kube.errors import API_ERRORS
from sluice.operator.leader import LeaseElector
from sluice.operator.loop import LoopSettings, SchedulingLoop
from sluice.operator.state import ClusterState
from sluice.scheduler.model import CycleResult


class Elector:
    def __init__(self, leading: bool) -> None:
        self.leading = leading
        self.is_leader = leading
        self.led_since = 0.0 if leading else float("inf")

    def holds(self) -> bool:
        return self.leading


class Recorder:
    """Stands in for the two passes and the relist, recording their order."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.ran = asyncio.Event()
        self.explained = asyncio.Event()
        self.hold_explaining = asyncio.Event()
        self.hold_explaining.set()
        self.config_readable = True
        self.loop: SchedulingLoop

    async def decide(self) -> CycleResult:
        self.calls.append("decide")
        self.ran.set()
        return CycleResult(queue_order=(), queues={})

    async def explain(self) -> CycleResult:
        self.calls.append("explain")
        await self.hold_explaining.wait()
        self.explained.set()
        return CycleResult(queue_order=(), queues={})

    def relist(self) -> None:
        self.calls.append("relist")

    def read_config(self) -> None:
        self.calls.append("config")
        if self.config_readable:
            self.loop.config_text = ""


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
    )
    loop = SchedulingLoop(client.ApiClient(), state, elector, settings, relist=recorder.relist)  # type: ignore[arg-type]
    recorder.loop = loop
    loop.decide = recorder.decide  # type: ignore[method-assign]
    loop.explain = recorder.explain  # type: ignore[method-assign]
    loop.read_config = recorder.read_config  # type: ignore[method-assign]
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
        assert recorder.calls[:3] == ["relist", "config", "decide"]
        assert recorder.calls.count("decide") == 1
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
        await asyncio.wait_for(recorder.ran.wait(), timeout=10)
    finally:
        task.cancel()
    assert recorder.calls[:2] == ["config", "decide"]
    loop.state.listed_at = 99.5  # began before it took the Lease: listed again
    loop._leading = False
    recorder.ran.clear()
    task = asyncio.create_task(loop.run())
    try:
        loop.state.notify(urgent=False)
        await asyncio.wait_for(recorder.ran.wait(), timeout=10)
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
            await asyncio.wait_for(recorder.ran.wait(), timeout=10)
    finally:
        task.cancel()
    assert recorder.calls[:5] == ["relist", "relist", "relist", "config", "decide"]
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
        assert recorder.calls[:3] == ["relist", "config", "decide"]
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
        assert recorder.calls[:3] == ["relist", "config", "decide"]
        assert recorder.calls.count("decide") == 1
        assert not loop.state.wake.is_set()  # both folded into that one pass
    finally:
        task.cancel()


async def test_a_new_leaders_first_wake_decides_even_for_a_change_only_statuses_show() -> None:
    loop, recorder = start(Elector(leading=True), debounce=0, batch=0.05)
    task = asyncio.create_task(loop.run())
    try:
        loop.state.notify(urgent=False)
        await asyncio.wait_for(recorder.ran.wait(), 10)
        assert recorder.calls[:3] == ["relist", "config", "decide"]
    finally:
        task.cancel()


async def test_no_cycle_runs_before_the_configured_policy_could_be_read() -> None:
    loop, recorder = start(Elector(leading=True), debounce=0)
    recorder.config_readable = False
    task = asyncio.create_task(loop.run())
    try:
        loop.state.notify()
        while recorder.calls.count("config") < 2:  # it keeps trying, about once a second
            await asyncio.sleep(0.05)
        assert "decide" not in recorder.calls
        recorder.config_readable = True
        await recorder.ran.wait()
        assert recorder.calls[-2:] == ["config", "decide"]
    finally:
        task.cancel()


async def test_decisions_never_wait_for_the_full_pass_which_runs_at_most_so_often() -> None:
    loop, recorder = start(Elector(leading=True), debounce=0, full_pass=0.3)
    recorder.hold_explaining.clear()  # the full pass takes its time
    task = asyncio.create_task(loop.run())
    try:
        loop.state.notify()
        while "explain" not in recorder.calls:
            await asyncio.sleep(0.01)
        assert recorder.calls == ["relist", "config", "decide", "explain"]
        for _ in range(3):  # changes while the full pass runs are decided at once
            recorder.ran.clear()
            loop.state.notify()
            await asyncio.wait_for(recorder.ran.wait(), 5)
        assert recorder.calls.count("decide") == 4
        assert recorder.calls.count("explain") == 1
        started = time.monotonic()
        recorder.hold_explaining.set()
        while recorder.calls.count("explain") < 2:  # the changes are explained once more
            await asyncio.sleep(0.01)
        assert recorder.calls.count("explain") == 2
        assert time.monotonic() - loop.explained_at < 0.5
        await asyncio.sleep(0.5)
        assert recorder.calls.count("explain") == 2  # nothing changed since: no other pass
        assert started <= loop.explained_at
    finally:
        task.cancel()


async def stream(loop: SchedulingLoop, seconds: float, every: float) -> None:
    """Changes that may let a job in, one every ``every`` seconds for ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        loop.state.notify()
        await asyncio.sleep(every)


async def test_the_full_pass_waits_for_a_pause_in_the_changes() -> None:
    """Changes decided one after another: the next full pass waits until they pause for a
    fifth of full_pass_seconds (here 0.4 s), not beside every decision."""
    loop, recorder = start(Elector(leading=True), debounce=0, full_pass=2.0)
    task = asyncio.create_task(loop.run())
    try:
        await stream(loop, 3.0, 0.05)
        assert recorder.calls.count("explain") == 1  # the new leader's first, at once
        assert recorder.calls.count("decide") > 10
        stopped = time.monotonic()
        while recorder.calls.count("explain") < 2:
            await asyncio.sleep(0.01)
        assert time.monotonic() - stopped >= 0.3
    finally:
        task.cancel()


async def test_the_full_pass_waits_for_a_pause_no_longer_than_the_resync() -> None:
    loop, recorder = start(Elector(leading=True), debounce=0, full_pass=0.5, resync=1.0)
    task = asyncio.create_task(loop.run())
    try:
        await stream(loop, 3.4, 0.02)  # never a pause of 0.1 s
        assert recorder.calls.count("explain") >= 2  # at 0, then after 1.5 s at the latest
    finally:
        task.cancel()


async def test_a_full_pass_that_fails_is_run_again() -> None:
    loop, recorder = start(Elector(leading=True), debounce=0, batch=0.1, full_pass=0.1)
    failing = recorder.explain

    async def explain() -> CycleResult:
        if recorder.calls.count("explain") == 0:
            recorder.calls.append("explain")
            raise RuntimeError("a bad full pass")
        return await failing()

    loop.explain = explain  # type: ignore[method-assign]
    task = asyncio.create_task(loop.run())
    try:
        loop.state.notify()
        await asyncio.wait_for(recorder.explained.wait(), 5)
        # Run again on its own: the wake it asks for is not one a decision pass is for.
        assert recorder.calls == ["relist", "config", "decide", "explain", "explain"]
    finally:
        task.cancel()


async def test_a_change_only_statuses_show_is_left_to_the_resyncs_full_pass() -> None:
    """The answers to a pass's own writes (each of 40,000 pending reasons) must not start a
    full pass after every full pass, nor a decision pass each: they decide nothing."""
    loop, recorder = start(Elector(leading=True), debounce=0, batch=0.05, full_pass=0.1)
    task = asyncio.create_task(loop.run())
    try:
        loop.state.notify()
        await asyncio.wait_for(recorder.explained.wait(), 5)
        for _ in range(3):
            loop.state.notify(urgent=False)
            await asyncio.sleep(0.2)
        assert recorder.calls == ["relist", "config", "decide", "explain"]
        loop.state.notify()  # one that may let a job in: explained again
        while recorder.calls.count("explain") < 2:
            await asyncio.sleep(0.01)
    finally:
        task.cancel()


async def test_a_full_pass_that_found_decisions_not_taken_gets_a_decision_pass() -> None:
    loop, recorder = start(Elector(leading=True), debounce=0, batch=0.05, full_pass=0.1)
    task = asyncio.create_task(loop.run())
    try:
        loop.state.notify()
        await asyncio.wait_for(recorder.explained.wait(), 5)
        await asyncio.sleep(0.3)
        assert recorder.calls == ["relist", "config", "decide", "explain"]
        recorder.ran.clear()
        loop.decide_again()  # what the full pass does when it decided what none took
        await asyncio.wait_for(recorder.ran.wait(), 5)
        await asyncio.sleep(0.3)
        assert recorder.calls == ["relist", "config", "decide", "explain", "decide"]
    finally:
        task.cancel()


def lease(holder: str, renewed_ago: float, duration: int = 15) -> client.V1Lease:
    renewed = datetime.now(UTC) - timedelta(seconds=renewed_ago)
    return client.V1Lease(
        metadata=client.V1ObjectMeta(name="l", namespace="ns", resource_version="7"),
        spec=client.V1LeaseSpec(
            holder_identity=holder,
            lease_duration_seconds=duration,
            renew_time=renewed,
            acquire_time=renewed,
            lease_transitions=2,
        ),
    )


class Coordination:
    def __init__(self, stored: client.V1Lease | None, conflict: bool = False) -> None:
        self.stored = stored
        self.conflict = conflict
        self.written: list[dict[str, Any]] = []

    def read_namespaced_lease(self, name: str, namespace: str, **_: Any) -> client.V1Lease:
        if self.stored is None:
            raise ApiException(status=404)
        return self.stored

    def create_namespaced_lease(self, namespace: str, body: dict[str, Any], **_: Any) -> None:
        self.written.append(body)

    def replace_namespaced_lease(
        self, name: str, namespace: str, body: dict[str, Any], **_: Any
    ) -> None:
        if self.conflict:
            raise ApiException(status=409)
        self.written.append(body)


def elector(coordination: Coordination) -> LeaseElector:
    found = LeaseElector(client.ApiClient(), "ns", "l", "me", lease_seconds=15, renew_seconds=5)
    found.coordination = coordination  # type: ignore[assignment]
    return found


def test_a_missing_lease_is_created_and_held() -> None:
    fake = Coordination(None)
    assert elector(fake).try_acquire_or_renew()
    assert fake.written[0]["spec"]["holderIdentity"] == "me"


def test_a_live_lease_of_another_replica_is_left_alone() -> None:
    fake = Coordination(lease("other", renewed_ago=3))
    assert not elector(fake).try_acquire_or_renew()
    assert fake.written == []


def test_a_follower_tries_again_when_the_holders_lease_expires_not_later() -> None:
    """Lease 15 s renewed 12 s ago: the next try is in about 3 s, not the 5 s round."""
    found = elector(Coordination(lease("other", renewed_ago=12)))
    assert not found.try_acquire_or_renew()
    assert 2.5 < found.next_round(leading=False) < 3.2
    found = elector(Coordination(lease("other", renewed_ago=1)))
    assert not found.try_acquire_or_renew()
    assert found.next_round(leading=False) == 5  # expiry farther than a round: a round
    assert found.next_round(leading=True) == 5


def test_a_round_that_failed_is_tried_again_within_a_second() -> None:
    """A leader whose renewal failed (the API server restarting) tries again at once rather
    than a full round later, when its margin to write could already be spent."""
    found = elector(Coordination(None))
    assert found.next_round(leading=False, failed=True) == 1.0
    assert found.next_round(leading=True) == 5


def test_an_expired_lease_is_taken_over_with_its_version_as_precondition() -> None:
    fake = Coordination(lease("other", renewed_ago=20))
    assert elector(fake).try_acquire_or_renew()
    written = fake.written[0]
    assert written["metadata"]["resourceVersion"] == "7"
    assert written["spec"]["holderIdentity"] == "me"
    assert written["spec"]["leaseTransitions"] == 3


def test_two_replicas_taking_over_at_once_only_one_wins() -> None:
    assert not elector(
        Coordination(lease("other", renewed_ago=20), conflict=True)
    ).try_acquire_or_renew()


def test_a_leader_that_could_not_renew_in_time_stops_writing_before_the_lease_expires() -> None:
    found = elector(Coordination(None))
    found.is_leader = True
    found.renewed_at = time.monotonic()
    assert found.holds()
    found.renewed_at = time.monotonic() - 11  # lease 15 s, renew 5 s: at most 10 s of writing
    assert not found.holds()


def test_decisions_are_written_only_while_the_lease_read_now_names_this_replica() -> None:
    """A Lease written over by another holder is found before the next decision is written,
    not at the next renewal; a Lease that cannot be read writes nothing now and ends no term."""
    fake = Coordination(lease("me", renewed_ago=1))
    found = elector(fake)
    found.is_leader, found.renewed_at = True, time.monotonic()
    assert found.confirm()
    fake.stored = lease("someone-else", renewed_ago=0)
    assert not found.confirm()
    assert not found.is_leader and not found.holds()
    unreadable = elector(Coordination(None))
    unreadable.is_leader, unreadable.renewed_at = True, time.monotonic()
    unreadable.coordination.read_namespaced_lease = _unreachable  # type: ignore[method-assign]
    assert not unreadable.confirm()
    assert unreadable.is_leader


def _unreachable(name: str, namespace: str, **_: Any) -> client.V1Lease:
    raise ApiException(status=503)


def test_a_lease_call_into_a_connection_that_swallows_everything_gives_up_in_the_margin() -> None:
    """A network partition that blackholes the leader's connection (no reset, no answer): the
    renewal fails after the margin a leader may write in (the Lease less the renewal
    interval) instead of waiting for the kernel to give up on the connection (many minutes),
    which would also hold the release at shutdown, so the replica could neither exit nor come
    back."""
    blackhole = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def swallow() -> None:
        with contextlib.suppress(OSError):
            while True:
                accepted.append(blackhole.accept()[0])  # read nothing, answer nothing

    threading.Thread(target=swallow, daemon=True).start()
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{blackhole.getsockname()[1]}"
    configuration.retries = False
    found = LeaseElector(
        client.ApiClient(configuration), "ns", "l", "me", lease_seconds=3, renew_seconds=1
    )
    assert found.call_timeout == 2
    outcome: list[BaseException | bool] = []

    def attempt() -> None:
        try:
            outcome.append(found.try_acquire_or_renew())
        except Exception as err:  # noqa: BLE001 - the failure is what is looked at
            outcome.append(err)

    started = time.monotonic()
    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(timeout=10)
    try:
        assert not worker.is_alive(), "the Lease call still waits after 10 s"
        assert isinstance(outcome[0], API_ERRORS)
        assert time.monotonic() - started < 5
    finally:
        blackhole.close()
        for sock in accepted:
            sock.close()


async def test_taking_the_lease_wakes_the_new_holder_at_once() -> None:
    """Without this the new holder idled until a watch event or the resync (up to 10 s)."""
    found = elector(Coordination(lease("other", renewed_ago=20)))
    woken: list[bool] = []
    found.listeners.append(lambda: woken.append(found.is_leader))
    task = asyncio.create_task(found.run())
    for _ in range(50):
        if woken:
            break
        await asyncio.sleep(0.02)
    task.cancel()
    assert woken == [True]


async def test_the_lease_is_renewed_while_the_event_loop_is_busy() -> None:
    """Tens of thousands of watch events can hold the event loop for seconds; the holder is
    able to act all along, so its renewals must not wait for the loop."""
    fake = Coordination(None)
    found = elector(fake)
    found.renew_seconds = 0.05
    task = asyncio.create_task(found.run())
    await asyncio.sleep(0.1)  # the first round: created, held
    rounds = len(fake.written)
    time.sleep(0.5)  # the event loop held by other work
    assert len(fake.written) >= rounds + 3
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    found.release()


def suspended_job(name: str, version: int) -> dict[str, Any]:
    body = job_object(name)
    body["metadata"]["resourceVersion"] = str(version)
    return body


def test_the_decision_pass_is_told_what_changed_and_starts_over_when_it_fails() -> None:
    """The first decision pass takes every workload, the next only those that changed; one
    that fails loses what it was told, so the one after takes every workload again."""
    loop, _ = start(Elector(True))
    loop.state.on_workload("ADDED", suspended_job("a", 1))
    loop.state.on_workload("ADDED", suspended_job("b", 2))
    told: list[Any] = []
    decide = loop.fast.decide

    def spy(snapshot: Any, changed: Any = None) -> Any:
        told.append(None if changed is None else sorted(changed))
        return decide(snapshot, changed)

    loop.fast.decide = spy  # type: ignore[method-assign]
    loop._fast()
    loop.state.on_workload("ADDED", suspended_job("c", 3))
    loop._fast()
    assert told == [None, ["ns/c"]]
    assert sorted(loop.fast.views) == ["ns/a", "ns/b", "ns/c"]

    def fail(snapshot: Any, changed: Any = None) -> Any:
        raise RuntimeError("a pass that fails")

    loop.fast.decide = fail  # type: ignore[method-assign]
    loop.state.on_workload("DELETED", suspended_job("a", 4))
    with pytest.raises(RuntimeError):
        loop._fast()
    taken, *_ = loop._fast()  # a new fast pass: every workload again
    assert sorted(loop.fast.views) == ["ns/b", "ns/c"]
    assert sorted(j.key for j in taken.snapshot.workloads) == ["ns/b", "ns/c"]
