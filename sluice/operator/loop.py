"""The scheduling loop: the writer of workloads and their pods (admit, reclaim, preempt,
requeue, pending reasons).

Woken by watch events (see ``_woken``) or by the periodic resync; only the Lease holder
writes. Two passes share the work (docs/architecture.md, *Two passes*):

- the decision pass (``decide``) runs on every change that may let a job in or must be acted
  on, and at each resync (never for one that only statuses show): the fast pass of
  sluice/scheduler/fast.py, which takes the full cycle's decisions from only the waiting jobs
  that may be decided, and writes them (victims, then admissions) at once; then it hands the
  queues' statuses as they stand after them to ``decided`` (the Queue reconciler writes those
  that changed), so a completion, a deletion or an admission shows in its queue's status at
  once;
- the full pass (``explain``) runs the whole cycle in the background, at most every
  ``full_pass_seconds`` and once more after the last change, when the changes that may let
  a job in pause (``_explain_at``): it writes every waiting job's position and reason, hands
  its result to ``decided`` too (the reconciler keeps the newer of the two) and sets the
  metrics. It never writes a decision and never holds one up.

Both run the pure core in a thread so that watches keep flowing meanwhile; their results
become plans of writes (``plan.py``) that the executor carries out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

from kubernetes import client

from sluice.api.config import load_scheduler_config
from sluice.api.constants import CONFIGMAP_KEY, CONFIGMAP_NAME
from sluice.api.errors import ConfigError
from sluice.api.queue import QueueUsage
from sluice.api.views import WorkloadView
from sluice.kube.errors import API_ERRORS, Failure, classify, message
from sluice.operator import metrics
from sluice.operator.executor import BACKGROUND_WRITERS, Executor
from sluice.operator.leader import LeaseElector
from sluice.operator.memory import CollectorPacer, paused
from sluice.operator.plan import EventSpec, Plan, plan
from sluice.operator.state import ClusterState, Taken
from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.fast import FastPath, FastResult
from sluice.scheduler.kept import SpecMemo
from sluice.scheduler.model import CycleResult, Snapshot

log = logging.getLogger("sluice.operator.loop")
T = TypeVar("T")


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
    ) -> None:
        """``writer``: the client the executor writes through (``sluice.kube.writer``);
        ``api`` reads."""
        self.api = api
        self.relist = relist
        self.decided = decided
        self.unreadable: Mapping[str, str] = {}
        """The objects the latest snapshot left out (each is logged once)."""
        self.core = client.CoreV1Api(api)
        self.state = state
        self.elector = elector
        self.settings = settings
        self.executor = Executor(api, state, writer)
        self.synced = asyncio.Event()
        self.cycles = 0
        self.heartbeat = time.monotonic()  # last loop iteration, for the liveness endpoint
        self.config_text: str | None = None  # None until the ConfigMap has been read once
        self._leading = False
        self.memory = CollectorPacer()
        self.usage: dict[str, QueueUsage] = {}
        """Queue -> usage as the last decision pass sampled it (the usage plugin), with the
        entry penalties of the decisions it wrote; empty when not leading, so that a new term
        resumes from the Queues' status.usage. Each pass carries it forward with the
        allocation it sees, so it is sampled at every decision pass, not only by the full
        pass (whose decisions are never written, and which may run seconds apart)."""
        self.fast = FastPath()
        self.specs = SpecMemo()  # the full pass's own: the fast pass keeps its in ``fast``
        self.formed: dict[str, WorkloadView] = {}
        """The workloads of plain pods the last decision pass saw, by key: they are formed
        anew each pass, so the pass compares them with these to find those that changed."""
        self.published: tuple[dict[str, int], int] = ({}, 0)
        """The executor's write and conflict counts as last added to the metrics."""
        self.explaining: asyncio.Task[CycleResult | None] | None = None
        """The full pass running in the background, if one is."""
        self.explain_due = True
        """Something changed since the last full pass started."""
        self.explained_at = float("-inf")  # when the last full pass started (monotonic)
        self.decide_due = False
        """A full pass found decisions no decision pass took since its snapshot: the next
        wake runs a decision pass, whatever woke it."""
        self.lanes = {
            lane: ThreadPoolExecutor(1, thread_name_prefix=f"sluice-{lane}")
            for lane in ("decide", "explain")
        }
        """One thread for each pass: a decision never queues behind the full pass's work (its
        thousands of reason writes) in the event loop's shared pool."""
        self.waited = 0.0
        """How long the change that woke the current pass waited for it (s)."""
        self.urgent_at = float("-inf")
        """When the last change that may let a job in arrived (monotonic)."""
        self.decided_since: set[str] = set()
        """Jobs the decision passes wrote about since the running full pass took its
        snapshot: what it says of them is out of date."""

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
        try:
            await self._passes()
        finally:
            # The full pass running in the background ends with the loop: Kopf, stopping,
            # would otherwise wait for it as for any task it did not start.
            if self.explaining is not None:
                self.explaining.cancel()

    async def _passes(self) -> None:
        await self.synced.wait()
        last_config = 0.0
        last_decided = float("-inf")
        while True:
            changed, urgent = await self._woken()
            if urgent:
                self.urgent_at = self.state.urgent_since
                self.waited = time.monotonic() - self.urgent_at
            else:
                self.waited = 0.0
            self.state.wake.clear()
            self.state.urgent.clear()
            self.heartbeat = time.monotonic()
            self.memory.tick()
            leading = self.elector.holds()
            metrics.LEADER.set(1 if leading else 0)
            if not leading:
                self._leading = False
                self.usage = {}
                self.fast = FastPath()
                self.formed = {}
                continue
            if not self._leading:
                if self.relist is not None and self._behind():
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
                changed = urgent = True  # a new leader decides at once
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
                now = time.monotonic()
                resync = now - last_decided >= self.settings.resync_seconds
                # What only statuses show (pods starting, the answers to a pass's own writes)
                # is explained by the resync's full pass, not by one of its own, and decides
                # nothing: a decision pass for it would only hold the processor from the
                # watches (each of 40,000 pending reasons written).
                stale = now - self.explained_at >= self.settings.resync_seconds
                if urgent or ((changed or resync) and stale):
                    self.explain_due = True
                if urgent or resync or self.decide_due:
                    last_decided = now
                    self.decide_due = False
                    await self.decide()
                self._explain_when_due()
            except Exception:
                # One bad pass must not stop scheduling: log it and try again next wake.
                log.exception("event=cycle-failed")
                await asyncio.sleep(1)

    def _behind(self) -> bool:
        """Whether this new leader must list everything again before its first pass, so it
        also sees the writes of the previous leader that its watches may not have delivered
        yet: unless its last listing began after it took the Lease (a replica that takes it
        as it starts lists once; at 40,000 stored jobs a second listing beside the watches'
        first held its first decision for most of a minute)."""
        return self.state.listed_at < self.elector.led_since

    async def _woken(self) -> tuple[bool, bool]:
        """Until a change calls for a decision, the resync is due, or a full pass is: a
        change that may let a job in at once (after a short pause that folds a burst into
        one pass), the others after at most ``batch_seconds``. Whether a change woke it, and
        whether one that may let a job in did."""
        state, settings = self.state, self.settings
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(state.wake.wait(), self._until_due())
            if not state.urgent.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(state.urgent.wait(), settings.batch_seconds)
            await asyncio.sleep(settings.debounce_seconds)
        return state.wake.is_set(), state.urgent.is_set()

    def _until_due(self) -> float:
        """Seconds until the resync, or until the next full pass may start when one is due."""
        wait = self.settings.resync_seconds
        if self.explain_due and self._leading:
            if self.explaining is not None:
                return min(wait, 0.2)  # look again soon: it may be over by then
            wait = min(wait, max(self._explain_at() - time.monotonic(), 0.0))
        return wait

    def _explain_at(self) -> float:
        """When a due full pass may start (monotonic): ``full_pass_seconds`` after the last
        one started, and once the changes that may let a job in have paused for a fifth of
        that, so that a stream of them is decided without a full pass beside each decision
        for the processor; while they do not pause, ``resync_seconds`` later at the latest."""
        settings = self.settings
        earliest = self.explained_at + settings.full_pass_seconds
        quiet = self.urgent_at + settings.full_pass_seconds / 5
        return max(earliest, min(quiet, earliest + settings.resync_seconds))

    def _explain_when_due(self) -> None:
        """Start the full pass in the background when one is due and allowed."""
        if self.explaining is not None and self.explaining.done():
            self.explaining = None
        if not self.explain_due or self.explaining is not None:
            return
        if time.monotonic() < self._explain_at():
            return
        self.explain_due = False
        self.explained_at = time.monotonic()
        self.decided_since = set()
        self.explaining = asyncio.create_task(self._explain_logged())

    async def _explain_logged(self) -> CycleResult | None:
        try:
            return await self.explain()
        except Exception:
            # One bad full pass must not go unsaid: another is due (the loop is woken).
            log.exception("event=full-pass-failed")
            self.explain_due = True
            self.state.notify(urgent=False)
            return None

    async def _in(self, lane: str, call: Callable[..., T], *args: Any) -> T:
        """``call(*args)`` on the pass's own thread."""
        return await asyncio.get_running_loop().run_in_executor(
            self.lanes[lane], partial(call, *args)
        )

    async def _sure(self, lane: str) -> bool:
        """Whether a pass may take the cluster as stored: not while writes of uncertain
        outcome are still to be read again (the loop is then woken to try again)."""
        executor = self.executor
        if executor.unsure and not await self._in(lane, executor.reread_unsure):
            metrics.UNSURE_JOBS.set(len(executor.unsure))
            log.warning("event=cycle-postponed reason=unsure-writes jobs=%d", len(executor.unsure))
            await asyncio.sleep(1)
            self.state.notify()
            return False
        return True

    def _noted(self, taken: Taken, whole: bool = True) -> Taken:
        """The snapshot, with each object it newly leaves out logged once. Not ``whole``:
        the decision pass's, which says nothing of the workloads (their unreadable ones are
        kept till the next full pass says them)."""
        for key in set(taken.unreadable) - set(self.unreadable):
            log.warning("event=unreadable-object object=%s error=%r", key, taken.unreadable[key])
        self.unreadable = taken.unreadable if whole else {**self.unreadable, **taken.unreadable}
        return taken

    async def _taken(self, lane: str) -> Taken | None:
        """The cluster as stored now, or None when it may not be taken yet (``_sure``)."""
        if not await self._sure(lane):
            return None
        return self._noted(
            await self._in(
                lane, self.state.snapshot, datetime.now(UTC), self.settings.max_queue_depth
            )
        )

    def _fast(self) -> tuple[Taken, Snapshot, FastResult, float]:
        """On the decision lane, in one hop: the cluster as stored now, the fast pass's
        decisions on it, and when the snapshot was taken (perf_counter). The workloads are
        taken whole only by a new fast pass; after that, only those whose read changed
        (``ClusterState.decision_snapshot``), and the plain pods' that differ from the last
        pass's."""
        whole = not self.fast.views
        taken, changed = self.state.decision_snapshot(
            datetime.now(UTC), self.settings.max_queue_depth, whole
        )
        snapshot = replace(taken.snapshot, usage=self.usage)
        formed = {k: w.view for k, w in taken.pod_workloads.items() if w.view is not None}
        if changed is not None:
            last = self.formed
            for key in formed.keys() | last.keys():
                if formed.get(key) != last.get(key):
                    changed[key] = formed.get(key)
        self.formed = formed
        took = time.perf_counter()
        try:
            return taken, snapshot, paused(self.fast.decide, snapshot, changed), took
        except BaseException:
            # What it was told is gone from the log: the next pass takes every workload.
            self.fast, self.formed = FastPath(), {}
            raise

    def _write(self, result: CycleResult, taken: Taken, snapshot: Snapshot) -> bool:
        """On the decision lane, in one hop: the decisions written (who waits is the full
        pass's to say), once the Lease as read now says they are this replica's to write;
        False when it does not."""
        if result.decisions and not self.elector.confirm():
            return False
        writes = self._plan(result, taken, snapshot, self.fast.views)
        self.executor.run(replace(writes, reasons=(), pending=None), self.elector.holds)
        return True

    def _plan(
        self,
        result: CycleResult,
        taken: Taken,
        snapshot: Snapshot,
        seen: Mapping[str, WorkloadView] | None = None,
    ) -> Plan:
        """``seen``: the snapshot's jobs by key, when the pass has them so (the fast pass)."""
        # Each decision rests on the spec generation and queue the pass saw.
        jobs = {d.job for d in result.decisions}
        if seen is None:
            seen = {job.key: job for job in snapshot.workloads if job.key in jobs}
        decided_on = {
            key: (job.generation, job.queue) for key in jobs if (job := seen.get(key)) is not None
        }
        executor = self.executor
        return plan(
            result,
            self.state.workloads,
            self.state.workload_views,
            decided_on,
            snapshot.now,
            executor.clock(),
            dict(executor.positions_written),
            taken.pod_workloads,
        )

    def _count_writes(self) -> None:
        """Add the writes since the last count to the metrics (both passes write)."""
        stats = self.executor.stats
        counted, conflicts = self.published
        for kind, count in stats.by_kind.items():
            if count != counted.get(kind, 0):
                metrics.API_WRITES.labels(kind).inc(count - counted.get(kind, 0))
        metrics.STALE_WRITES.inc(stats.conflicts - conflicts)
        metrics.UNSURE_JOBS.set(len(self.executor.unsure))
        self.published = (dict(stats.by_kind), stats.conflicts)

    def _sampled(self, fast: FastResult) -> None:
        """The usage the pass sampled, once what it decided is written (or it decided
        nothing): the next pass carries it forward from then."""
        if fast.usage:
            self.usage = dict(fast.usage)

    async def decide(self) -> CycleResult | None:
        """The decision pass: the full cycle's decisions from the fast pass, written at once,
        then the queues' statuses as they stand after them (``decided``)."""
        started = time.perf_counter()
        if not await self._sure("decide"):
            return None
        taken, snapshot, fast, took = await self._in("decide", self._fast)
        self._noted(taken, whole=False)
        fasted = time.perf_counter()
        metrics.DECISION_SECONDS.observe(fasted - started)
        result = CycleResult(queue_order=(), queues={}, decisions=fast.decisions)
        stragglers = any(w.stragglers for w in taken.pod_workloads.values())
        if not self.elector.holds():
            return result
        if not (result.decisions or stragglers):
            self._sampled(fast)
            return await self._statuses(result, fast, snapshot.now)
        # Before the write: a full pass running now says nothing more of these jobs.
        self.decided_since.update(d.job for d in result.decisions)
        if not await self._in("decide", self._write, result, taken, snapshot):
            self.state.notify()  # decided again once the Lease is sure (or by the next holder)
            return result
        self._sampled(fast)
        self._count_writes()
        written = time.perf_counter()
        result = await self._statuses(result, fast, snapshot.now)
        if not result.decisions:
            return result
        log.info(
            "event=decided decisions=%d listed=%d runs=%d seconds=%.3f waited=%.3f"
            " snapshot=%.3f fast=%.3f written=%.3f statuses=%.3f",
            len(result.decisions),
            fast.listed,
            fast.runs,
            time.perf_counter() - started,
            self.waited,
            took - started,
            fasted - took,
            written - fasted,
            time.perf_counter() - written,
        )
        return result

    async def _statuses(self, result: CycleResult, fast: FastResult, now: datetime) -> CycleResult:
        """The queues' statuses after the pass's decisions, worked out on its lane once they
        are written, handed to ``decided`` (the Queue reconciler writes those that changed)."""
        queues = await self._in("decide", fast.queues)
        shown = replace(result, queues=queues)
        self.decided(shown, now)
        return shown

    async def explain(self) -> CycleResult | None:
        """The full pass: every waiting job's position and reason, the Queues' statuses and
        the metrics, from the whole cycle. Its decisions are the decision passes' to write:
        what it says of a job they decided about since its snapshot is left out."""
        started = time.perf_counter()
        taken = await self._taken("explain")
        if taken is None:
            return None
        snapshot = replace(taken.snapshot, usage=self.usage)
        now = snapshot.now
        full: CycleResult = await self._in("explain", paused, run_cycle, snapshot, self.specs)
        metrics.CYCLE_SECONDS.observe(time.perf_counter() - started)
        if not self.elector.holds():
            return full  # lost the Lease while explaining: write nothing
        written = time.perf_counter()
        decided = {d.job for d in full.decisions} | self.decided_since
        result = replace(
            full, decisions=(), pending=tuple(p for p in full.pending if p.job not in decided)
        )
        writes = await self._in("explain", self._plan, result, taken, snapshot)
        running = asyncio.get_running_loop()

        def publish() -> None:
            # The Queues' statuses are written while the pending reasons are still written.
            running.call_soon_threadsafe(self.decided, full, now)

        await self._in(
            "explain", self.executor.run, writes, self.elector.holds, publish, BACKGROUND_WRITERS
        )
        metrics.APPLY_SECONDS.observe(time.perf_counter() - written)
        self._count_writes()
        await self._in("explain", metrics.publish, full, snapshot.queues)
        self.cycles += 1
        log.info(
            "event=explained pending=%d seconds=%.3f",
            len(result.pending),
            time.perf_counter() - started,
        )
        if decided - self.decided_since:
            # It found decisions no decision pass took since its snapshot (they may have
            # been taken before it): one more decision pass makes sure.
            self.decide_again()
        return full

    def decide_again(self) -> None:
        """Run a decision pass at the next wake, which this is, though no change that may let
        a job in is there to start one."""
        self.decide_due = True
        self.state.notify(urgent=False)
