"""The fault soak's verdicts (hack/chaos): each invariant flags what breaks it and passes
what keeps it, so `make chaos` reporting 0 violations means something."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chaos import audit, checks, observe
from chaos.faults import Fault
from chaos.load import Submission


def job(name: str, queue: str, pods: int, cpu: str, **extra: Any) -> dict[str, Any]:
    admitted = extra.pop("admitted", True)
    notes = {observe.ADMITTED_AT: "2026-01-01T00:00:00Z"} if admitted else {}
    return {
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a", "resourceVersion": "1",
                     "labels": {observe.QUEUE_LABEL: queue}, "annotations": notes},
        "spec": {"parallelism": pods, "completions": pods, "suspend": not admitted,
                 "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": cpu}}}]}}},
        "status": extra.pop("status", {}),
    }  # fmt: skip


def test_admitted_jobs_count_in_their_queue_and_every_ancestor() -> None:
    jobs = [job("a", "vision", 3, "1"), job("b", "nlp", 2, "500m")]
    used = observe.usage_by_queue(iter(jobs), iter([]))
    assert used == {"vision": 3000, "nlp": 1000, "research": 4000}
    assert observe.over_capability(used) == []


def test_a_queue_over_its_capability_is_a_breach_but_pending_and_finished_jobs_hold_nothing() -> (
    None
):
    jobs = [job(f"j{i}", "vision", 3, "1") for i in range(6)]  # 18 cpu in a 16-cpu queue
    jobs += [job("waiting", "vision", 3, "1", admitted=False)]
    jobs += [job("done", "vision", 3, "1", status={"succeeded": 3, "conditions": [
        {"type": "Complete", "status": "True"}]})]  # fmt: skip
    breaches = observe.over_capability(observe.usage_by_queue(iter(jobs), iter([])))
    assert breaches == ["vision holds 18000m cpu over its capability 16"]


def test_a_parents_capability_binds_its_children_together() -> None:
    jobs = [job(f"v{i}", "vision", 3, "1") for i in range(5)]  # 15 of vision's 16
    jobs += [job(f"n{i}", "nlp", 3, "1") for i in range(6)]  # 18 of nlp's 20
    breaches = observe.over_capability(observe.usage_by_queue(iter(jobs), iter([])))
    assert breaches == ["research holds 33000m cpu over its capability 30"]


def test_a_job_holds_only_the_pods_it_still_runs() -> None:
    partly = job("p", "vision", 3, "1", status={"succeeded": 2})
    assert observe.job_usage(partly) == 1000


def test_released_plain_pods_count_and_gated_ones_do_not() -> None:
    def pod(name: str, gated: bool) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "labels": {observe.QUEUE_LABEL: "serving"},
                         "annotations": {} if gated else {observe.ADMITTED_AT: "t"}},
            "spec": {"containers": [{"resources": {"requests": {"cpu": "500m"}}}],
                     "schedulingGates": [{"name": observe.GATE}] if gated else []},
            "status": {"phase": "Pending" if gated else "Running"},
        }  # fmt: skip

    used = observe.usage_by_queue(iter([]), iter([pod("a", False), pod("b", True)]))
    assert used == {"serving": 500, "production": 500}


def test_a_job_admitted_again_while_admitted_is_a_violation() -> None:
    seen = observe.Observer(api=None, log=lambda _: None)  # type: ignore[arg-type]
    first = job("a", "vision", 1, "1")
    again = json.loads(json.dumps(first))
    again["metadata"]["annotations"][observe.ADMITTED_AT] = "2026-01-01T00:00:09Z"
    seen._seen("ADDED", first, seen.jobs)
    seen._seen("MODIFIED", first, seen.jobs)
    assert seen.violations == []
    seen._seen("MODIFIED", again, seen.jobs)
    assert len(seen.violations) == 1 and "admitted again" in seen.violations[0]


def test_a_suspended_job_without_a_reason_is_unaccounted() -> None:
    seen = observe.Observer(api=None, log=lambda _: None)  # type: ignore[arg-type]
    waiting = job("w", "vision", 1, "1", admitted=False)
    seen.jobs["Job:team-a/w"] = waiting
    assert checks.unaccounted(seen) == ["Job:team-a/w suspended with no reason"]
    waiting["metadata"]["annotations"][observe.PENDING_REASON] = "queue vision is full"
    assert checks.unaccounted(seen) == []


def test_a_tenant_write_taken_while_no_webhook_ran_is_a_violation() -> None:
    fault = Fault("webhooks-down", began=100.0, healed=112.0, closed=(100.0, 108.0))
    writes = [
        Submission("job", "team-a/before", 99.0, True),
        Submission("job", "team-a/refused", 104.0, False),
        Submission("job", "team-a/taken", 105.0, True),
        Submission("job", "team-a/after", 109.0, True),
        Submission("deployment", "team-b/web", 106.0, True),  # its pods are judged, not it
    ]
    found = checks.taken_without_webhooks([fault], writes)
    assert found == ["job team-a/taken accepted at 105.000 while no webhook ran"]


def _audit(path: Path, entries: list[tuple[str, str, str, str, int]]) -> Path:
    lines = []
    for when, identity, verb, resource, code in entries:
        lines.append(json.dumps({
            "stage": "ResponseComplete", "userAgent": f"sluice-operator/{identity}",
            "verb": verb, "objectRef": {"resource": resource, "namespace": "n", "name": "x"},
            "responseStatus": {"code": code}, "stageTimestamp": f"2026-01-01T00:00:{when}Z",
        }))  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_replica_writing_before_taking_the_lease_is_two_writers(tmp_path: Path) -> None:
    log = _audit(tmp_path / "audit.log", [
        ("01.000000", "a", "update", "leases", 200),
        ("02.000000", "a", "patch", "jobs", 200),
        ("20.000000", "b", "update", "leases", 200),
        ("20.500000", "b", "patch", "jobs", 200),
        ("21.000000", "a", "patch", "jobs", 200),  # a, cut off, still writing: two writers
        ("22.000000", "a", "patch", "jobs", 409),  # refused writes did not happen
    ])  # fmt: skip
    problems = checks.two_writers(log)
    assert len(problems) == 1 and problems[0].startswith("a wrote patch jobs")


def test_an_event_posted_after_another_replica_took_the_lease_is_two_writers(
    tmp_path: Path,
) -> None:
    log = _audit(tmp_path / "audit.log", [
        ("01.000000", "a", "update", "leases", 200),
        ("02.000000", "a", "patch", "jobs", 200),
        ("20.000000", "b", "update", "leases", 200),
        ("21.000000", "a", "create", "events", 201),  # a's Event, still queued: a write too
    ])  # fmt: skip
    problems = checks.two_writers(log)
    assert len(problems) == 1 and problems[0].startswith("a wrote create events")


def test_a_clean_handover_is_measured_from_the_last_write_to_the_next_leaders(
    tmp_path: Path,
) -> None:
    log = _audit(tmp_path / "audit.log", [
        ("01.000000", "a", "update", "leases", 200),
        ("03.000000", "a", "patch", "jobs", 200),
        ("18.000000", "b", "update", "leases", 200),
        ("18.500000", "b", "patch", "jobs", 200),
    ])  # fmt: skip
    found = audit.writes(log)
    assert audit.interleaved(found) == []
    start = found[0].at
    moved = audit.handover(found, "a", since=start + 1.5, until=start + 60)
    assert moved is not None and moved.new == "b"
    assert round(moved.first_new - moved.last_old, 3) == 15.0
    assert round(moved.first_decision - moved.last_old, 3) == 15.5


def test_an_admitted_job_with_no_pod_since_its_admission_must_be_requeued_in_time() -> None:
    """As sluice's own rule: no pod made since the admission counts; pods made and lost
    since (evicted, their node gone) are the Job controller's to make again."""
    seen = observe.Observer(api=None, log=lambda _: None)  # type: ignore[arg-type]
    late = job("late", "vision", 1, "1")
    late["metadata"]["annotations"][observe.ADMITTED_AT] = "2026-01-01T00:01:00Z"
    lost = json.loads(json.dumps(late))
    lost["metadata"]["name"] = "lost"
    for one in (late, lost):
        seen._seen("ADDED", one, seen.jobs)
    evicted = {
        "kind": "Pod",
        "metadata": {"name": "lost-x", "namespace": "team-a", "creationTimestamp":
                     "2026-01-01T00:01:01Z", "labels": {observe.QUEUE_LABEL: "vision"},
                     "ownerReferences": [{"kind": "Job", "name": "lost"}]},
        "spec": {"nodeName": "node-03", "containers": []},
        "status": {"phase": "Running"},
    }  # fmt: skip
    seen._seen("ADDED", evicted, seen.pods)
    seen._seen("DELETED", evicted, seen.pods)
    check = checks.Unscheduled(seen, [])
    admitted = seen.history["Job:team-a/late"].admissions[-1]
    check.check(admitted + 30)
    assert seen.violations == []  # within podsReadyTimeout and its allowance
    check.check(admitted + check.allowance(admitted, admitted + 200) + 1)
    assert len(seen.violations) == 1
    assert seen.violations[0].startswith("Job:team-a/late admitted, no pod created for")
