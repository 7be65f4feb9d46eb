"""The scheduling loop: the writer of workloads and their pods (admit, reclaim, preempt,
requeue, pending reasons).

Woken by watch events (see ``_woken``) or by the periodic resync; only the Lease holder
writes. At each wake it asks its pacing (``pacing.py``) what is due: the scheduler
configuration read again, a decision pass, a full pass (``passes.py``; docs/scheduler.md,
*Two passes*). The decision pass runs in the loop's turn; the full pass runs in the
background beside it and never holds a decision up. Its threads and what
they read and write: docs/architecture.md, *Threads and tasks*.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from kubernetes import client

from sluice.api.constants import CONFIGMAP_NAME
from sluice.kube.errors import API_ERRORS, message
from sluice.operator import metrics
from sluice.operator.executor import Executor
from sluice.operator.leader import LeaseElector
from sluice.operator.memory import CollectorPacer
from sluice.operator.pacing import Clock, Pacing, Timing
from sluice.operator.passes import Passes
from sluice.operator.scheduler_config import ConfigReader
from sluice.operator.state import ClusterState
from sluice.scheduler.model import CycleResult

log = logging.getLogger("sluice.operator.loop")


@dataclass
class LoopSettings:
    namespace: str
    config_map_name: str = CONFIGMAP_NAME
    debounce_seconds: float = 0.02
    """The pause after a change before the decision pass, that folds a burst into one."""
    batch_seconds: float = 1.0
    resync_seconds: float = 10.0
    max_queue_depth: int = 5
    full_pass_seconds: float = 5.0
    """The full pass (positions, pending reasons, the Queues' statuses) starts at most this
    often, and once more after the last change that may let a job in (after one that only
    statuses show, within ``resync_seconds``), once such changes have paused for a fifth of
    this (for at most ``resync_seconds`` more); decisions never wait for it."""
    retry_seconds: float = 1.0
    """How soon what could not run (a relist, a pass, the first configuration read) runs
    again."""

    @property
    def timing(self) -> Timing:
        return Timing(
            debounce_seconds=self.debounce_seconds,
            batch_seconds=self.batch_seconds,
            resync_seconds=self.resync_seconds,
            full_pass_seconds=self.full_pass_seconds,
            retry_seconds=self.retry_seconds,
        )


class SchedulingLoop:
    def __init__(
        self,
        api: client.ApiClient,
        state: ClusterState,
        elector: LeaseElector,
        settings: LoopSettings,
        relist: Callable[[], object] | None = None,
        decided: Callable[[CycleResult, datetime], None] = lambda result, now: None,
        writer: client.ApiClient | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        """``writer``: the client the executor writes through (``sluice.kube.writer``);
        ``api`` reads. ``clock``: what the pacing and the heartbeat read."""
        self.state = state
        self.elector = elector
        self.settings = settings
        self.relist = relist
        executor = Executor(api, state, writer)
        self.passes = Passes(
            state, elector, executor, settings.max_queue_depth, decided, settings.retry_seconds
        )
        self.config = ConfigReader(
            api, state, settings.namespace, settings.config_map_name, executor.post_event
        )
        self.pacing = Pacing(settings.timing, clock)
        self.synced = asyncio.Event()
        self.heartbeat = clock()  # last loop iteration, for the liveness endpoint
        self._leading = False
        self.memory = CollectorPacer()
        self.full_task: asyncio.Task[None] | None = None
        """The full pass running in the background, if one is."""

    async def run(self) -> None:
        try:
            await self._passes()
        finally:
            # The full pass running in the background ends with the loop: Kopf, stopping,
            # would otherwise wait for it as for any task it did not start.
            if self.full_task is not None:
                self.full_task.cancel()

    async def _passes(self) -> None:
        await self.synced.wait()
        while True:
            changed, urgent = await self._woken()
            if not self._wake(urgent):
                continue
            if not self._leading:
                if not await self._take_lead():
                    continue
                changed = urgent = True  # a new leader decides at once
            self._leading = True
            try:
                await self._pass(changed, urgent)
            except Exception:
                # One bad pass must not stop scheduling: log it and try again next wake.
                log.exception("event=cycle-failed")
                await asyncio.sleep(self.settings.retry_seconds)

    def _wake(self, urgent: bool) -> bool:
        """What every wake does, leading or not; whether this replica leads."""
        self.pacing.woken(urgent, self.state.urgent_since)
        self.state.wake.clear()
        self.state.urgent.clear()
        self.heartbeat = self.pacing.clock()
        self.memory.tick()
        leading = self.elector.holds()
        metrics.LEADER.set(1 if leading else 0)
        if not leading:
            self._leading = False
            self.passes.forget()
        return leading

    async def _take_lead(self) -> bool:
        """A new leader lists everything again first when it is behind (``_behind``); whether
        it may go on (a failed listing is tried again at the next wake, which it asks for)."""
        if self.relist is None or not self._behind():
            return True
        try:
            await asyncio.to_thread(self.relist)
            self.memory.settle()
            return True
        except API_ERRORS as err:
            # The API server away (restarting, unreachable): said in one line, and tried
            # again; a traceback is for what no outage explains.
            log.warning("event=relist-failed error=%s", message(err))
        except Exception:
            log.exception("event=relist-failed")
        await asyncio.sleep(self.settings.retry_seconds)
        self.state.wake.set()
        return False

    async def _pass(self, changed: bool, urgent: bool) -> None:
        """The leader's wake: the configuration read when due, a decision pass when one is
        due, and a full pass started in the background when one is."""
        pacing = self.pacing
        if pacing.config_due():
            await asyncio.to_thread(self.config.read)
            pacing.config_read()
        if self.config.text is None:
            # Never schedule with the built-in defaults merely because the configured policy
            # could not be read yet.
            log.warning("event=cycle-postponed reason=config-unread")
            pacing.config_unread()
            await asyncio.sleep(self.settings.retry_seconds)
            self.state.notify()
            return
        if pacing.decides(changed, urgent):
            await self.passes.decision(pacing.waited)
        self._full_when_due()

    def _behind(self) -> bool:
        """Whether this new leader must list everything again before its first pass, so it
        also sees the writes of the previous leader that its watches may not have delivered
        yet: unless its last listing began after it took the Lease (a replica that takes it
        as it starts lists once, instead of a second listing beside the watches' first that
        would hold its first decision back)."""
        return self.state.listed_at < self.elector.led_since

    async def _woken(self) -> tuple[bool, bool]:
        """Until a change calls for a decision, the resync is due, or a full pass is: a
        change that may let a job in at once (after a short pause that folds a burst into
        one pass), the others after at most ``batch_seconds``. Whether a change woke it, and
        whether one that may let a job in did."""
        state, timing = self.state, self.pacing.timing
        until = self.pacing.until_due(self._leading, self.full_task is not None)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(state.wake.wait(), until)
            if not state.urgent.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(state.urgent.wait(), timing.batch_seconds)
            await asyncio.sleep(timing.debounce_seconds)
        return state.wake.is_set(), state.urgent.is_set()

    def _full_when_due(self) -> None:
        """Start the full pass in the background when one is due and allowed."""
        if self.full_task is not None and self.full_task.done():
            self.full_task = None
        if self.full_task is None and self.pacing.full_due_now():
            self.full_task = asyncio.create_task(self._full_logged())

    async def _full_logged(self) -> None:
        try:
            if await self.passes.full():
                self.decide_again()
        except Exception:
            # One bad full pass must not go unsaid: another is due (the loop is woken).
            log.exception("event=full-pass-failed")
            self.pacing.full_again()
            self.state.notify(urgent=False)

    def decide_again(self) -> None:
        """Run a decision pass at the next wake, which this is, though no change that may let
        a job in is there to start one."""
        self.pacing.decide_again()
        self.state.notify(urgent=False)
