"""A full pass as metrics: pending by queue and class of reason, per-queue numbers replaced
whole; a decision written as metrics: admission waits, evictions by reason."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import generate_latest

from sluice.api.queue import Queue
from sluice.api.resources import Resources
from sluice.api.workloads import workload_from_object
from sluice.operator import metrics
from sluice.scheduler.model import CycleResult, Decision, PendingJob, QueueResult

NOW = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)


def result(queue: str) -> CycleResult:
    return CycleResult(
        queue_order=[queue],
        queues={
            queue: QueueResult(
                state="Open",
                parent="root",
                weight=1,
                priority=0,
                allocated=Resources({"cpu": 2000}),
                guarantee=Resources({"cpu": 1000}),
            )
        },
        decisions=[
            Decision("admit", "ns/new", queue),
            Decision("reclaim", "ns/old", queue, for_job="ns/other"),
        ],
        pending=[
            PendingJob("ns/a", queue, 1, f"{queue} would use cpu 9 > cap 8"),
            PendingJob("ns/b", queue, 2, "waiting behind ns/a, the first"),
            PendingJob("ns/c", queue, 3, "reclaimed for ns/other"),
        ],
    )


def sample(name: str, **labels: str) -> float | None:
    value = metrics.REGISTRY.get_sample_value(name, labels)
    return value


def test_reason_classes() -> None:
    assert metrics.reason_class("q would use cpu 9 > capability 8") == "quota"
    assert metrics.reason_class("cluster has cpu 0 free, job requests cpu 1") == "cluster"
    assert (
        metrics.reason_class("queue q takes jobs only from namespaces matching a=b (x)")
        == "namespace"
    )
    assert metrics.reason_class("reclaimed for ns/x") == "victim"
    assert metrics.reason_class("something new") == "other"


def test_a_cycle_becomes_metrics_and_a_gone_queue_leaves_none() -> None:
    queue = Queue.from_object({"metadata": {"name": "mq-a"}, "spec": {"capability": {"cpu": "8"}}})
    waits = sample("sluice_admission_wait_seconds_count", queue="mq-a") or 0
    evictions = sample("sluice_evictions_total", queue="mq-a", reason="reclaim") or 0
    metrics.publish(result("mq-a"), [queue])
    assert sample("sluice_pending_jobs", queue="mq-a", reason="quota") == 1
    assert sample("sluice_pending_jobs", queue="mq-a", reason="fifo") == 1
    assert sample("sluice_pending_jobs", queue="mq-a", reason="victim") == 1
    # The result's decisions are the writes' to count, not the full pass's.
    assert (sample("sluice_admission_wait_seconds_count", queue="mq-a") or 0) == waits
    assert (sample("sluice_evictions_total", queue="mq-a", reason="reclaim") or 0) == evictions
    assert sample("sluice_queue_guarantee", queue="mq-a", resource="cpu") == 1
    assert sample("sluice_queue_capability", queue="mq-a", resource="cpu") == 8
    assert sample("sluice_queue_over_capability", queue="mq-a", resource="cpu") is None
    assert sample("sluice_queue_info", queue="mq-a", parent="root", state="Open") == 1
    metrics.publish(result("mq-b"), [])
    assert sample("sluice_queue_info", queue="mq-a", parent="root", state="Open") is None
    assert sample("sluice_pending_jobs", queue="mq-a", reason="quota") is None
    assert b"sluice_build_info{" in generate_latest(metrics.REGISTRY)


def test_a_decision_written_is_counted_once_by_what_it_did() -> None:
    waits = sample("sluice_admission_wait_seconds_count", queue="mq-w") or 0
    admits = sample("sluice_decisions_total", action="admit") or 0
    created = datetime.now(UTC) - timedelta(seconds=42)
    metrics.decision_written(Decision("admit", "ns/new", "mq-w"), created)
    assert sample("sluice_admission_wait_seconds_count", queue="mq-w") == waits + 1
    assert sample("sluice_admission_wait_seconds_sum", queue="mq-w") >= 42  # type: ignore[operator]
    assert sample("sluice_decisions_total", action="admit") == admits + 1
    for action in ("reclaim", "preempt", "requeue"):
        before = sample("sluice_evictions_total", queue="mq-w", reason=action) or 0
        metrics.decision_written(Decision(action, "ns/old", "mq-w", for_job="ns/x"), None)
        assert sample("sluice_evictions_total", queue="mq-w", reason=action) == before + 1
    assert sample("sluice_admission_wait_seconds_count", queue="mq-w") == waits + 1


def test_a_shrink_is_a_decision_but_no_eviction() -> None:
    # Reclaim took pods above the workload's minimum: it runs on, at 6 of 8.
    evictions = sample("sluice_evictions_total", queue="mq-s", reason="reclaim") or 0
    decided = sample("sluice_decisions_total", action="reclaim") or 0
    shrink = Decision("reclaim", "ns/big", "mq-s", for_job="ns/x", sizes=(("main", 8, 6),))
    metrics.decision_written(shrink, None)
    assert (sample("sluice_evictions_total", queue="mq-s", reason="reclaim") or 0) == evictions
    assert sample("sluice_decisions_total", action="reclaim") == decided + 1


def test_an_admission_at_a_smaller_size_is_counted_by_its_queue() -> None:
    before = sample("sluice_partial_admissions_total", queue="mq-p") or 0
    metrics.decision_written(Decision("admit", "ns/whole", "mq-p"), None)
    recorded = Decision("admit", "ns/resizable", "mq-p", sizes=(("main", 8, 8),))
    metrics.decision_written(recorded, None)  # a resizable workload admitted whole
    assert (sample("sluice_partial_admissions_total", queue="mq-p") or 0) == before
    smaller = Decision("admit", "ns/small", "mq-p", sizes=(("main", 8, 6),))
    metrics.decision_written(smaller, None)
    assert sample("sluice_partial_admissions_total", queue="mq-p") == before + 1


def test_a_growth_admitted_is_no_partial_admission() -> None:
    # Admitted at 6 of 8, raised by its owner to 7: its growth's record says 7 of 8.
    before = sample("sluice_partial_admissions_total", queue="mq-g") or 0
    growth = Decision("admit", "ns/small (growth)", "mq-g", sizes=(("main", 8, 7),))
    metrics.decision_written(growth, None)
    assert (sample("sluice_partial_admissions_total", queue="mq-g") or 0) == before


def resizable(
    name: str, parallelism: int, record: str | None, *, done: bool = False, minimum: str = "4"
) -> Any:
    """A Job of ``minimum`` in queue mq-w (none for ""): admitted with ``record``, else
    waiting."""
    annotations = {"sluice.dev/min-parallelism": minimum} if minimum else {}
    if record is not None:
        annotations["sluice.dev/admitted-size"] = record
    status: dict[str, Any] = {"active": parallelism} if record is not None else {}
    if done:
        status = {"conditions": [{"type": "Complete", "status": "True"}]}
    view = workload_from_object(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": name,
                "labels": {"sluice.dev/queue-name": "mq-w"},
                "annotations": annotations,
            },
            "spec": {
                "suspend": record is None and not done,
                "parallelism": parallelism,
                "template": {"spec": {"containers": [{"name": "c"}]}},
            },
            "status": status,
        }
    )
    assert view is not None
    return view


def workload_pods(gauge: str, name: str) -> float | None:
    labels = {"namespace": "ns", "name": name, "queue": "mq-w"}
    return metrics.REGISTRY.get_sample_value(f"sluice_workload_{gauge}_pods", labels)


def test_a_resizable_workload_has_its_pods_admitted_and_waiting_until_it_goes() -> None:
    grown = resizable("grown", 8, '{"main":{"admitted":6,"asked":6,"fields":{}}}')
    waiting = resizable("waiting", 8, None)
    plain = resizable("plain", 8, None, minimum="")
    metrics.publish(result("mq-w"), [], [grown, waiting, plain])
    pods = {
        (name, gauge): workload_pods(gauge, name)
        for name in ("grown", "waiting", "plain")
        for gauge in ("admitted", "waiting")
    }
    assert pods == {
        ("grown", "admitted"): 6,
        ("grown", "waiting"): 2,
        ("waiting", "admitted"): 0,
        ("waiting", "waiting"): 8,
        ("plain", "admitted"): None,
        ("plain", "waiting"): None,
    }
    done = resizable("grown", 8, '{"main":{"admitted":6,"asked":6,"fields":{}}}', done=True)
    metrics.publish(result("mq-w"), [], [done])
    assert all(workload_pods(gauge, name) is None for name, gauge in pods)


def test_a_queue_over_its_capability_shows_by_how_much() -> None:
    # Its workloads' pods ask cpu 2 while its capability is cpu 1.5.
    spec = {"metadata": {"name": "mq-over"}, "spec": {"capability": {"cpu": "1500m"}}}
    metrics.publish(result("mq-over"), [Queue.from_object(spec)])
    assert sample("sluice_queue_over_capability", queue="mq-over", resource="cpu") == 0.5
    within = {"metadata": {"name": "mq-over"}, "spec": {"capability": {"cpu": "2"}}}
    metrics.publish(result("mq-over"), [Queue.from_object(within)])
    assert sample("sluice_queue_over_capability", queue="mq-over", resource="cpu") is None


def test_event_loop_lag_is_how_long_the_loop_was_held() -> None:
    """A loop blocked for 0.3 s wakes a 0.1 s probe at least 0.2 s late."""

    async def hold_the_loop() -> None:
        probe = asyncio.create_task(metrics.probe_event_loop_lag())
        await asyncio.sleep(0)  # the probe starts its first sleep
        time.sleep(0.3)  # a cycle's work done on the loop itself
        await asyncio.sleep(0.05)  # the probe observes its late wake-up, sleeps again
        probe.cancel()

    before = sample("sluice_event_loop_lag_seconds_sum") or 0.0
    counted = sample("sluice_event_loop_lag_seconds_count") or 0.0
    asyncio.run(hold_the_loop())
    assert sample("sluice_event_loop_lag_seconds_count") == counted + 1
    assert (sample("sluice_event_loop_lag_seconds_sum") or 0.0) - before >= 0.2
