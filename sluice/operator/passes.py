"""The scheduling loop's two passes (docs/scheduler.md, *Two passes: the decision pass and
the full pass*), each on a thread of its own (its *lane*):

- the decision pass (``decision``): sluice/scheduler/decision_pass.py takes the full
  cycle's decisions from only the waiting jobs that may be decided, and they are written at
  once (victims, then admissions); then the queues' statuses as they stand after them go to
  ``decided`` (the Queue reconciler writes those that changed), so a completion, a deletion
  or an admission shows in its queue's status at once;
- the full pass (``full``): the whole cycle, for every waiting job's position and reason,
  the Queues' statuses (``decided`` too: the reconciler keeps the newer of the two) and the
  metrics. It never writes a decision and never holds one up.

A lane is one thread, so that a decision never queues behind the full pass's work (its
thousands of reason writes) in the event loop's shared pool, and the watches keep flowing
while the pure core runs. Results become plans of writes (``plan.py``) that the executor
carries out. When to run which is the loop's (``loop.py``, ``pacing.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

from sluice.api.queue import QueueUsage
from sluice.api.views import WorkloadView
from sluice.operator import metrics
from sluice.operator.executor import BACKGROUND_WRITERS, Executor
from sluice.operator.leader import LeaseElector
from sluice.operator.memory import paused
from sluice.operator.plan import Plan, plan, written_on
from sluice.operator.state import ClusterSnapshot, ClusterState
from sluice.scheduler.cycle import run_cycle
from sluice.scheduler.decision_pass import DecisionPass, DecisionResult
from sluice.scheduler.kept import SpecMemo
from sluice.scheduler.model import CycleResult, Snapshot

# The loop's logger: the passes' log lines read as they always have.
log = logging.getLogger("sluice.operator.loop")
T = TypeVar("T")

Decided = Callable[[CycleResult, datetime], None]
"""Takes a pass's result and its time: the Queue reconciler's ``publish``."""

LANES = ("decision", "full")


class Passes:
    def __init__(
        self,
        state: ClusterState,
        elector: LeaseElector,
        executor: Executor,
        max_queue_depth: int,
        decided: Decided,
        retry_seconds: float = 1.0,
    ) -> None:
        self.state = state
        self.elector = elector
        self.executor = executor
        self.max_queue_depth = max_queue_depth
        self.decided = decided
        self.retry_seconds = retry_seconds
        self.lanes = {
            lane: ThreadPoolExecutor(1, thread_name_prefix=f"sluice-{lane}") for lane in LANES
        }
        self.unreadable: Mapping[str, str] = {}
        """The objects the latest snapshot left out (each is logged once)."""
        self.decision_pass = DecisionPass()
        self.specs = SpecMemo()  # the full pass's own: the decision pass keeps its own
        self.formed: dict[str, WorkloadView] = {}
        """The workloads of plain pods the last decision pass saw, by key: they are formed
        anew each pass, so the pass compares them with these to find those that changed."""
        self.usage: dict[str, QueueUsage] = {}
        """Queue -> usage as the last decision pass sampled it (the usage plugin), with the
        entry penalties of the decisions it wrote; empty when not leading, so that a new term
        resumes from the Queues' status.usage. Each pass carries it forward with the
        allocation it sees, so it is sampled at every decision pass, not only by the full
        pass (whose decisions are never written, and which may run seconds apart)."""
        self.decided_since: set[str] = set()
        """Jobs the decision passes wrote about since the running full pass took its
        snapshot: what it says of them is out of date."""
        self.published: tuple[dict[str, int], int] = ({}, 0)
        """The executor's write and conflict counts as last added to the metrics."""

    def forget(self) -> None:
        """Not leading: what a term carries from pass to pass starts over with the next."""
        self.usage = {}
        self.decision_pass = DecisionPass()
        self.formed = {}

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
            await asyncio.sleep(self.retry_seconds)
            self.state.notify()
            return False
        return True

    def _noted(self, taken: ClusterSnapshot, whole: bool = True) -> ClusterSnapshot:
        """The snapshot, with each object it newly leaves out logged once. Not ``whole``:
        the decision pass's, which says nothing of the workloads (their unreadable ones are
        kept till the next full pass says them)."""
        for key in set(taken.unreadable) - set(self.unreadable):
            log.warning("event=unreadable-object object=%s error=%r", key, taken.unreadable[key])
        self.unreadable = taken.unreadable if whole else {**self.unreadable, **taken.unreadable}
        return taken

    async def _taken(self, lane: str) -> ClusterSnapshot | None:
        """The cluster as stored now, or None when it may not be taken yet (``_sure``)."""
        if not await self._sure(lane):
            return None
        now = datetime.now(UTC)
        return self._noted(await self._in(lane, self.state.snapshot, now, self.max_queue_depth))

    def _decide(self) -> tuple[ClusterSnapshot, Snapshot, DecisionResult, float]:
        """On the decision lane, in one hop: the cluster as stored now, the decision pass's
        decisions on it, and when the snapshot was taken (perf_counter). The workloads are
        taken whole only by a new decision pass; after that, only those whose read changed
        (``ClusterState.decision_snapshot``), and the plain pods' that differ from the last
        pass's."""
        whole = not self.decision_pass.views
        taken, changed = self.state.decision_snapshot(
            datetime.now(UTC), self.max_queue_depth, whole
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
            return taken, snapshot, paused(self.decision_pass.decide, snapshot, changed), took
        except BaseException:
            # What it was told is gone from the log: the next pass takes every workload.
            self.decision_pass, self.formed = DecisionPass(), {}
            raise

    def _write(self, result: CycleResult, taken: ClusterSnapshot, snapshot: Snapshot) -> bool:
        """On the decision lane, in one hop: the decisions written (who waits is the full
        pass's to say), once the Lease as read now says they are this replica's to write;
        False when it does not."""
        if result.decisions and not self.elector.confirm():
            return False
        writes = self._plan(result, taken, snapshot, self.decision_pass.views, explains=False)
        self.executor.run(replace(writes, reasons=(), pending=None), self.elector.holds)
        return True

    def _plan(
        self,
        result: CycleResult,
        taken: ClusterSnapshot,
        snapshot: Snapshot,
        seen: Mapping[str, WorkloadView] | None = None,
        explains: bool = True,
    ) -> Plan:
        """``seen``: the snapshot's jobs by key, when the pass has them so (the decision pass);
        ``explains``: the result says who waits (the full pass's)."""
        # Each decision rests on the spec generation and queue the pass saw.
        jobs = {written_on(d) for d in result.decisions}
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
            {flavor.name: flavor for flavor in snapshot.flavors},
            explains,
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

    def _sampled(self, outcome: DecisionResult) -> None:
        """The usage the pass sampled, once what it decided is written (or it decided
        nothing): the next pass carries it forward from then."""
        if outcome.usage:
            self.usage = dict(outcome.usage)

    async def decision(self, waited: float = 0.0) -> CycleResult | None:
        """The decision pass: the full cycle's decisions, from only the jobs that may be
        decided, written at once, then the queues' statuses as they stand after them
        (``decided``). ``waited``: how long the change that woke it waited for it (s), for the
        log."""
        started = time.perf_counter()
        if not await self._sure("decision"):
            return None
        taken, snapshot, outcome, took = await self._in("decision", self._decide)
        self._noted(taken, whole=False)
        decided_at = time.perf_counter()
        metrics.DECISION_SECONDS.observe(decided_at - started)
        result = CycleResult(queue_order=(), queues={}, decisions=outcome.decisions)
        stragglers = any(w.stragglers for w in taken.pod_workloads.values())
        if not self.elector.holds():
            return result
        if not (result.decisions or stragglers):
            self._sampled(outcome)
            return await self._statuses(result, outcome, snapshot.now)
        # Before the write: a full pass running now says nothing more of these jobs.
        self.decided_since.update(d.job for d in result.decisions)
        if not await self._in("decision", self._write, result, taken, snapshot):
            self.state.notify()  # decided again once the Lease is sure (or by the next holder)
            return result
        self._sampled(outcome)
        self._count_writes()
        written = time.perf_counter()
        result = await self._statuses(result, outcome, snapshot.now)
        if result.decisions:
            log.info(
                "event=decided decisions=%d listed=%d runs=%d seconds=%.3f waited=%.3f"
                " snapshot=%.3f fast=%.3f written=%.3f statuses=%.3f",
                len(result.decisions),
                outcome.listed,
                outcome.runs,
                time.perf_counter() - started,
                waited,
                took - started,
                decided_at - took,
                written - decided_at,
                time.perf_counter() - written,
            )
        return result

    async def _statuses(
        self, result: CycleResult, outcome: DecisionResult, now: datetime
    ) -> CycleResult:
        """The queues' statuses after the pass's decisions, worked out on its lane once they
        are written, handed to ``decided`` (the Queue reconciler writes those that changed)."""
        queues = await self._in("decision", outcome.queues)
        shown = replace(result, queues=queues)
        self.decided(shown, now)
        return shown

    async def full(self) -> bool:
        """The full pass: every waiting job's position and reason, the Queues' statuses and
        the metrics, from the whole cycle. Its decisions are the decision passes' to write:
        what it says of a job they decided about since its snapshot is left out. Whether it
        found decisions no decision pass took since its snapshot (they may have been taken
        before it): one more decision pass then makes sure."""
        self.decided_since = set()
        started = time.perf_counter()
        taken = await self._taken("full")
        if taken is None:
            return False
        snapshot = replace(taken.snapshot, usage=self.usage)
        full: CycleResult = await self._in("full", paused, run_cycle, snapshot, self.specs)
        metrics.CYCLE_SECONDS.observe(time.perf_counter() - started)
        if not self.elector.holds():
            return False  # lost the Lease while explaining: write nothing
        written = time.perf_counter()
        decided = {d.job for d in full.decisions} | self.decided_since
        result = replace(
            full, decisions=(), pending=tuple(p for p in full.pending if p.job not in decided)
        )
        writes = await self._in("full", self._plan, result, taken, snapshot)
        running = asyncio.get_running_loop()

        def publish() -> None:
            # The Queues' statuses are written while the pending reasons are still written.
            running.call_soon_threadsafe(self.decided, full, snapshot.now)

        await self._in(
            "full", self.executor.run, writes, self.elector.holds, publish, BACKGROUND_WRITERS
        )
        metrics.APPLY_SECONDS.observe(time.perf_counter() - written)
        self._count_writes()
        await self._in("full", metrics.publish, full, snapshot.queues, snapshot.workloads)
        log.info(
            "event=explained pending=%d seconds=%.3f",
            len(result.pending),
            time.perf_counter() - started,
        )
        return bool(decided - self.decided_since)
