"""Leader election through a coordination.k8s.io/v1 Lease: only the holder writes.

Every replica keeps its caches warm; the holder renews every ``renew_seconds``; a follower
takes the Lease over once ``renewTime + leaseDurationSeconds`` has passed, trying again right
then rather than at its next round, so a crash costs the Lease's duration and little more.
Every update carries the resourceVersion it read, so two replicas never both believe they won.
Every Lease call gives up after the margin a leader may write in (``call_timeout``): a
connection that swallows requests (a network partition) must not hold a round, nor the
release at shutdown, for as long as the kernel keeps a dead TCP connection open. Every other
write is sent only while ``holds()`` and gives up after ``write_timeout``, so that none is
still on its way when another replica may take the Lease (docs/operations.md, "A replica
that loses its Lease").
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client

from sluice.kube.errors import API_ERRORS, Failure, classify, message

log = logging.getLogger("sluice.operator.leader")

RETRY_SECONDS = 1.0
"""How soon a round that failed is tried again."""


def _now() -> datetime:
    return datetime.now(UTC)


def _micro(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


class Listeners:
    """Called on the event loop when leadership changes: a new holder acts at once, not at
    the next event."""

    def __init__(self) -> None:
        self.called: list[Callable[[], None]] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        """Where they are told; set when the elector starts."""

    def append(self, listener: Callable[[], None]) -> None:
        self.called.append(listener)

    def tell_soon(self) -> None:
        """From any thread: the listeners are told on the event loop."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._tell)

    def _tell(self) -> None:
        for listener in self.called:
            listener()


@dataclass
class LeaseElector:
    api: client.ApiClient
    namespace: str
    name: str
    identity: str
    lease_seconds: int = 15
    renew_seconds: float = 5.0
    is_leader: bool = False

    def __post_init__(self) -> None:
        self.coordination = client.CoordinationV1Api(self.api)
        self.renewed_at = float("-inf")  # monotonic start of the last successful round
        self.listeners = Listeners()
        self._stop = threading.Event()
        self._round = threading.Lock()  # a round, or the release: never both at once
        self.rounded = threading.Event()
        """Set once the first round is over, whatever its outcome."""
        self.led_since = float("inf")
        """When the round that took the Lease began (monotonic); infinity while not leading."""
        self.expires_in: float | None = None
        """Seconds until another holder's Lease expires, as last read (None: not known)."""

    @property
    def call_timeout(self) -> float:
        """How long a Lease call may take: the margin a leader may write in after a renewal
        began (a renewal that lands later is of no use: the leader has stopped by then)."""
        return max(1.0, self.lease_seconds - self.renew_seconds)

    @property
    def write_timeout(self) -> float:
        """How long any other write may take (``sluice.kube.writer``): half of
        ``renew_seconds``. A write is sent only while ``holds()``, that is less than
        ``lease_seconds - renew_seconds`` after the last renewal began, and no other replica
        may take the Lease before ``lease_seconds`` after it: a write that ends within
        ``renew_seconds`` ends before then. The other half is for what lies between the
        check and the request leaving (a busy interpreter) and for the replicas' clocks,
        which the Lease's times are read against."""
        return self.renew_seconds / 2

    def holds(self) -> bool:
        """Whether writing is still safe: the last successful renewal started less than
        ``lease_seconds - renew_seconds`` ago. A replica that stalled (a long pause, an
        unreachable API server) stops writing before any follower may take the Lease over."""
        margin = self.lease_seconds - self.renew_seconds
        return self.is_leader and time.monotonic() - self.renewed_at < margin

    async def until(self, holding: bool) -> None:
        """Until ``holds()`` is ``holding``, looked at every 0.1 s: holding also ends with no
        round to say so, when a renewal is late."""
        while self.holds() != holding:
            await asyncio.sleep(0.1)

    def _body(self, acquire: datetime | None, transitions: int) -> dict[str, Any]:
        now = _now()
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_seconds,
            "acquireTime": _micro(acquire or now),
            "renewTime": _micro(now),
            "leaseTransitions": transitions,
        }

    def try_acquire_or_renew(self) -> bool:
        """One round; returns whether this replica holds the Lease afterwards."""
        try:
            lease = self.coordination.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=self.call_timeout
            )
        except API_ERRORS as err:
            if classify(err) is not Failure.GONE:
                raise
            body: Any = {  # the client takes plain JSON as well as its models
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._body(None, 0),
            }
            try:
                self.coordination.create_namespaced_lease(
                    self.namespace, body, _request_timeout=self.call_timeout
                )
            except API_ERRORS as create_err:
                if classify(create_err) is Failure.CONFLICT:
                    return False
                raise
            return True
        spec = lease.spec
        holder = spec.holder_identity if spec else None
        renewed = _parse(spec.renew_time) if spec else None
        duration = (spec.lease_duration_seconds if spec else None) or self.lease_seconds
        expires = renewed + timedelta(seconds=duration) if renewed is not None else None
        expired = expires is None or expires < _now()
        if holder not in (self.identity, None, "") and not expired:
            assert expires is not None
            self.expires_in = (expires - _now()).total_seconds()
            return False
        self.expires_in = None
        transitions = (spec.lease_transitions or 0) if spec else 0
        if holder != self.identity:
            transitions += 1
            acquire = None
        else:
            acquire = _parse(spec.acquire_time) if spec else None
        replacement: Any = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "resourceVersion": lease.metadata.resource_version if lease.metadata else None,
            },
            "spec": self._body(acquire, transitions),
        }
        try:
            self.coordination.replace_namespaced_lease(
                self.name, self.namespace, replacement, _request_timeout=self.call_timeout
            )
        except API_ERRORS as err:
            if classify(err) is Failure.CONFLICT:
                return False  # someone else wrote it first
            raise
        return True

    def confirm(self) -> bool:
        """Whether the Lease, read now, still names this replica: asked before a cycle's
        decisions are written. A Lease written over by another holder (by hand, or by a
        replica whose clock runs ahead) is otherwise found only at the next renewal, and a
        decision written before then would be a second writer's. A Lease that names another
        ends this term as a lost renewal does; one that cannot be read writes nothing now."""
        with self._round:
            try:
                lease = self.coordination.read_namespaced_lease(
                    self.name, self.namespace, _request_timeout=self.call_timeout
                )
            except API_ERRORS as err:
                log.warning("event=lease-confirm-failed error=%s", message(err))
                return False
            holder = lease.spec.holder_identity if lease.spec else None
            if holder == self.identity:
                return self.holds()
            if self.is_leader:
                self.is_leader = False
                log.info(
                    "event=lost-leadership identity=%s lease=%s/%s holder=%s",
                    self.identity,
                    self.namespace,
                    self.name,
                    holder,
                )
                self.listeners.tell_soon()
            return False

    def release(self) -> None:
        """Give the Lease up at shutdown so a follower need not wait for it to expire (no
        round runs after this one)."""
        self._stop.set()
        with self._round:
            self._release()

    def _release(self) -> None:
        if not self.is_leader:
            return
        try:
            lease = self.coordination.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=self.call_timeout
            )
            if lease.spec and lease.spec.holder_identity == self.identity:
                lease.spec.holder_identity = None
                lease.spec.lease_duration_seconds = 1
                self.coordination.replace_namespaced_lease(
                    self.name, self.namespace, lease, _request_timeout=self.call_timeout
                )
        except API_ERRORS as err:
            log.warning("event=lease-release-failed error=%s", message(err))
        self.is_leader = False

    async def run(self) -> None:
        """Take or renew the Lease every round, forever, on a thread of its own: a renewal
        must not wait for the event loop, which can be busy for many seconds (tens of
        thousands of watch events as the watches start) while the replica is able to act."""
        loop = self.listeners.loop = asyncio.get_running_loop()
        renewer = ThreadPoolExecutor(1, thread_name_prefix="sluice-lease")
        try:
            await loop.run_in_executor(renewer, self._rounds)
        finally:
            self._stop.set()
            renewer.shutdown(wait=False)  # its round ends by itself, seeing the stop

    def _rounds(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            with self._round:
                if self._stop.is_set():
                    return  # stopped, perhaps released, while this round waited
                failed = False
                try:
                    leading = self.try_acquire_or_renew()
                except Exception as err:  # noqa: BLE001 - an unreachable API server: not leading
                    log.warning("event=lease-error error=%r", err)
                    leading, failed = False, True
            if leading:
                self.renewed_at = started
            if leading != self.is_leader:
                self.is_leader = leading
                self.led_since = started if leading else float("inf")
                log.info(
                    "event=%s identity=%s lease=%s/%s",
                    "became-leader" if leading else "lost-leadership",
                    self.identity,
                    self.namespace,
                    self.name,
                )
                self.listeners.tell_soon()
            self.rounded.set()
            self._stop.wait(self.next_round(leading, failed))

    def next_round(self, leading: bool, failed: bool = False) -> float:
        """Seconds to the next round: the renewal interval, or for a follower the moment the
        holder's Lease expires if that comes sooner. After a round that failed (the API server
        slow or away, a call that timed out) again within a second: one more full interval
        could use up the margin a leader may write in, so a stall shorter than the margin
        would cost a change of leader."""
        if failed:
            return min(self.renew_seconds, RETRY_SECONDS)
        if leading or self.expires_in is None:
            return self.renew_seconds
        return min(self.renew_seconds, max(self.expires_in, 0.0) + 0.05)
