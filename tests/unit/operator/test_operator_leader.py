"""Leader election through a Lease: a missing Lease is taken, a live one left alone, an
expired one taken over with its version as precondition, a renewal that fails is tried again
soon, a replica that could not renew stops writing before the Lease can pass on, and the
renewals go on while the event loop is busy."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sluice.kube.errors import API_ERRORS
from sluice.operator.leader import LeaseElector


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
