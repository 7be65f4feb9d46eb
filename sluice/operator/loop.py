"""The scheduling loop: the writer of workloads and their pods (admit, reclaim, preempt,
requeue, pending reasons).

Woken by watch events (see ``_woken``) or by the periodic resync; only the Lease holder runs
cycles. The pure cycle runs in a thread so that watches keep flowing meanwhile; its result
becomes a plan of writes (``plan.py``) that the executor carries out, and is then handed to
``decided`` (the Queue reconciler, which writes the Queues' statuses).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from sluice.api.config import load_scheduler_config
from sluice.api.constants import CONFIGMAP_KEY, CONFIGMAP_NAME
from sluice.api.errors import ConfigError
from sluice.api.queue import QueueUsage
from sluice.kube.errors import API_ERRORS, Failure, classify, message
from sluice.operator import metrics
from sluice.operator.executor import Executor, execute
from sluice.operator.leader import LeaseElector
from sluice.operator.memory import CollectorPacer
from sluice.operator.plan import EventSpec, Plan, plan
from sluice.operator.state import ClusterState
from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.model import CycleResult

log = logging.getLogger("sluice.operator.loop")


@dataclass
class LoopSettings:
    namespace: str
    config_map_name: str = CONFIGMAP_NAME
    debounce_seconds: float = 0.1
    batch_seconds: float = 1.0
    resync_seconds: float = 10.0
    max_queue_depth: int = 5


class SchedulingLoop:
    def __init__(
        self,
        api: client.ApiClient,
        state: ClusterState,
        elector: LeaseElector,
        settings: LoopSettings,
        relist: Callable[[], None] | None = None,
        decided: Callable[[CycleResult, datetime], None] = lambda result, now: None,
    ) -> None:
        self.api = api
        self.relist = relist
        self.decided = decided
        self.unreadable: Mapping[str, str] = {}
        """The objects the latest snapshot left out (each is logged once)."""
        self.core = client.CoreV1Api(api)
        self.state = state
        self.elector = elector
        self.settings = settings
        self.executor = Executor(api, state)
        self.synced = asyncio.Event()
        self.cycles = 0
        self.heartbeat = time.monotonic()  # last loop iteration, for the liveness endpoint
        self.config_text: str | None = None  # None until the ConfigMap has been read once
        self._leading = False
        self.memory = CollectorPacer()
        self.usage: dict[str, QueueUsage] = {}
        """Queue -> usage as the last cycle sampled it (the usage plugin); empty when not
        leading, so that a new term resumes from the Queues' status.usage."""

    def read_config(self) -> None:
        """Load the scheduler ConfigMap; on error keep the last good configuration."""
        cm: Any = None
        try:
            cm = self.core.read_namespaced_config_map(
                self.settings.config_map_name, self.settings.namespace
            )
            text = (cm.data or {}).get(CONFIGMAP_KEY, "")
        except API_ERRORS as err:
            if classify(err) is not Failure.GONE:
                log.warning("event=config-read-failed error=%s", message(err))
                return
            text = ""
        if text == self.config_text:
            return
        self.config_text = text
        try:
            config = load_scheduler_config(text)
        except ConfigError as err:
            self.state.config_error = str(err)
            metrics.CONFIG_ERRORS.inc()
            log.error("event=config-refused error=%r keeping=last-good", str(err))
            self._config_event(
                cm, "ConfigRefused", [f"{err}; the last good configuration stays in use"]
            )
            return
        self.state.config = config
        self.state.config_error = ""
        log.info(
            "event=%s configmap=%s/%s",
            "config-loaded" if text else "config-default",
            self.settings.namespace,
            self.settings.config_map_name,
        )
        for warning in config.warnings:
            log.warning("event=config-ignored warning=%r", warning)
        if config.warnings:
            self._config_event(cm, "ConfigIgnored", list(config.warnings))

    def _config_event(self, cm: Any, reason: str, messages: list[str]) -> None:
        """One Event on the ConfigMap per message (a refusal, or each ignored name)."""
        if cm is None:
            return  # no ConfigMap, nothing refused or ignored
        obj: dict[str, Any] = self.api.sanitize_for_serialization(cm)  # type: ignore[no-untyped-call]
        obj.setdefault("apiVersion", "v1")
        for text in messages:
            self.executor.post_event(obj, EventSpec(reason, text, warning=True), "ConfigMap")

    async def run(self) -> None:
        await self.synced.wait()
        last_config = 0.0
        while True:
            await self._woken()
            self.state.wake.clear()
            self.state.urgent.clear()
            self.heartbeat = time.monotonic()
            self.memory.tick()
            leading = self.elector.holds()
            metrics.LEADER.set(1 if leading else 0)
            if not leading:
                self._leading = False
                self.usage = {}
                continue
            if not self._leading and self.relist is not None:
                # A new leader first lists everything, so its first cycle also sees the
                # writes of the previous leader that its watches may not have delivered yet.
                try:
                    await asyncio.to_thread(self.relist)
                    self.memory.settle()
                except API_ERRORS as err:
                    # The API server away (restarting, unreachable): said in one line, and
                    # tried again; a traceback is for what no outage explains.
                    log.warning("event=relist-failed error=%s", message(err))
                    await asyncio.sleep(1)
                    self.state.wake.set()
                    continue
                except Exception:
                    log.exception("event=relist-failed")
                    await asyncio.sleep(1)
                    self.state.wake.set()
                    continue
            self._leading = True
            try:
                if time.monotonic() - last_config > self.settings.resync_seconds:
                    await asyncio.to_thread(self.read_config)
                    last_config = time.monotonic()
                if self.config_text is None:
                    # Never schedule with the built-in defaults merely because the
                    # configured policy could not be read yet.
                    log.warning("event=cycle-postponed reason=config-unread")
                    last_config = 0.0
                    await asyncio.sleep(1)
                    self.state.notify()
                    continue
                await self.cycle()
            except Exception:
                # One bad cycle must not stop scheduling: log it and try again next wake.
                log.exception("event=cycle-failed")
                await asyncio.sleep(1)

    async def _woken(self) -> None:
        """Until a change calls for a cycle, or the resync is due: a change that may let a
        job in at once (after a short pause that folds a burst into one cycle), the others
        after at most ``batch_seconds``, so that a cycle is free for the next job that comes."""
        state, settings = self.state, self.settings
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(state.wake.wait(), settings.resync_seconds)
            if not state.urgent.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(state.urgent.wait(), settings.batch_seconds)
            await asyncio.sleep(settings.debounce_seconds)

    async def cycle(self) -> CycleResult | None:
        executor = self.executor
        if executor.unsure and not await asyncio.to_thread(executor.reread_unsure):
            metrics.UNSURE_JOBS.set(len(executor.unsure))
            log.warning("event=cycle-postponed reason=unsure-writes jobs=%d", len(executor.unsure))
            await asyncio.sleep(1)
            self.state.notify()
            return None
        now = datetime.now(UTC)
        started = time.perf_counter()
        taken = await asyncio.to_thread(self.state.snapshot, now, self.settings.max_queue_depth)
        for key in set(taken.unreadable) - set(self.unreadable):
            log.warning("event=unreadable-object object=%s error=%r", key, taken.unreadable[key])
        self.unreadable = taken.unreadable
        snapshot = replace(taken.snapshot, usage=self.usage)
        result = await asyncio.to_thread(run_cycle, snapshot)
        metrics.CYCLE_SECONDS.observe(time.perf_counter() - started)
        if not self.elector.holds():
            return result  # lost the Lease while deciding: write nothing
        if result.decisions and not await asyncio.to_thread(self.elector.confirm):
            self.state.notify()  # decided again once the Lease is sure (or by the next holder)
            return result
        self.usage = {n: q.usage for n, q in result.queues.items() if q.usage is not None}
        written = time.perf_counter()
        before = dict(executor.stats.by_kind)
        conflicts = executor.stats.conflicts
        clock = executor.clock()
        positions = dict(executor.positions_written)

        def planned() -> Plan:
            # Each decision rests on the spec generation and queue the cycle saw.
            decided_on = {job.key: (job.generation, job.queue) for job in snapshot.workloads}
            pods = taken.pod_workloads
            return plan(result, self.state.workloads, decided_on, now, clock, positions, pods)

        writes = await asyncio.to_thread(planned)
        running = asyncio.get_running_loop()

        def decided() -> None:
            # The Queues' statuses are written while the pending reasons are still written.
            running.call_soon_threadsafe(self.decided, result, now)

        await execute(executor, writes, self.elector.holds, decided)
        metrics.APPLY_SECONDS.observe(time.perf_counter() - written)
        for kind, count in executor.stats.by_kind.items():
            if count != before.get(kind, 0):
                metrics.API_WRITES.labels(kind).inc(count - before.get(kind, 0))
        metrics.STALE_WRITES.inc(executor.stats.conflicts - conflicts)
        metrics.UNSURE_JOBS.set(len(executor.unsure))
        for decision in result.decisions:
            metrics.DECISIONS.labels(decision.action).inc()
        await asyncio.to_thread(metrics.publish, result, snapshot.queues, snapshot.workloads, now)
        self.cycles += 1
        if result.decisions:
            log.info(
                "event=cycle decisions=%d pending=%d seconds=%.3f",
                len(result.decisions),
                len(result.pending),
                time.perf_counter() - started,
            )
        return result
