"""Writing a cycle's results: order, preconditions, repeat-safety and what is never written."""

from __future__ import annotations

from datetime import UTC, datetime

from operator_fakes import fake_writer, job, queue

from sluice.api.resources import Resources
from sluice.operator.apply import POSITION_REFRESH, apply_result, basis, cause
from sluice.queues.lifecycle import QueueAction
from sluice.scheduler.model import CycleResult, Decision, PendingJob, QueueResult

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def result(
    *decisions: Decision, pending: tuple[PendingJob, ...] = (), **extra: object
) -> CycleResult:
    return CycleResult(queue_order=(), queues={}, decisions=decisions, pending=pending, **extra)  # type: ignore[arg-type]


def annotations(obj: dict[str, object]) -> dict[str, str]:
    return obj["metadata"].get("annotations") or {}  # type: ignore[attr-defined,no-any-return]


async def test_victims_are_suspended_before_anything_is_admitted() -> None:
    writer, cluster, state = fake_writer()
    job(cluster, state, "victim")
    cluster.objects["job/ns/victim"]["spec"]["suspend"] = False
    state.on_job("MODIFIED", dict(cluster.objects["job/ns/victim"]))
    job(cluster, state, "starving")
    done = await apply_result(
        writer,
        result(
            Decision("admit", "ns/starving", "a", "fits"),
            Decision("reclaim", "ns/victim", "b", "b over its share", for_job="ns/starving"),
        ),
        NOW,
    )
    assert done
    writes = [key for verb, key in cluster.calls if verb == "patch"]
    assert writes == ["job/ns/victim", "job/ns/starving"]
    victim = cluster.objects["job/ns/victim"]
    assert victim["spec"]["suspend"] is True
    assert annotations(victim)["sluice.dev/reclaimed-by"] == "ns/starving"
    admitted = cluster.objects["job/ns/starving"]
    assert admitted["spec"]["suspend"] is False
    assert annotations(admitted)["sluice.dev/admitted-at"] == "2026-01-01T12:00:00Z"
    assert sorted(e["reason"] for e in cluster.events) == ["Admitted", "Reclaimed"]
    # Every decision is on its Job before any Event is posted about it.
    assert [verb for verb, _ in cluster.calls] == ["patch", "patch", "event", "event"]


async def test_a_victim_that_could_not_be_suspended_defers_every_admission() -> None:
    writer, cluster, state = fake_writer()
    job(cluster, state, "victim")
    job(cluster, state, "starving")
    job(cluster, state, "other")
    cluster.refuse.add("job/ns/victim")
    state.wake.clear()
    done = await apply_result(
        writer,
        result(
            Decision("reclaim", "ns/victim", "b", "", for_job="ns/starving"),
            Decision("admit", "ns/starving", "a", ""),
            Decision("admit", "ns/other", "c", ""),
        ),
        NOW,
    )
    assert not done
    assert cluster.objects["job/ns/starving"]["spec"]["suspend"] is True
    assert cluster.objects["job/ns/other"]["spec"]["suspend"] is True
    assert state.wake.is_set()  # the loop decides again on a fresh view


async def test_a_write_based_on_a_stale_view_fails_instead_of_acting() -> None:
    writer, cluster, state = fake_writer()
    job(cluster, state, "j")
    # Someone changed the job after the operator saw it (e.g. it was deleted and recreated).
    cluster.patch("job/ns/j", {"metadata": {"labels": {"x": "y"}}})
    await apply_result(writer, result(Decision("admit", "ns/j", "team", "")), NOW)
    assert cluster.objects["job/ns/j"]["spec"]["suspend"] is True
    assert writer.stats.conflicts == 1
    assert cluster.events == []


async def test_a_job_changed_while_the_cycle_decided_is_not_admitted_as_it_now_is() -> None:
    """The watch may deliver a tenant's change (another queue, a bigger size) while the cycle
    runs: the admission must be conditional on the version the cycle decided on, not on the
    newer one the state holds by the time it is written."""
    writer, cluster, state = fake_writer()
    job(cluster, state, "j")
    decided = {"ns/j": basis(state.jobs["ns/j"])}
    moved = cluster.patch("job/ns/j", {"metadata": {"labels": {"sluice.dev/queue-name": "b"}}})
    state.on_job("MODIFIED", moved)  # delivered before the write
    await apply_result(writer, result(Decision("admit", "ns/j", "a", "")), NOW, decided_on=decided)
    assert cluster.objects["job/ns/j"]["spec"]["suspend"] is True
    assert writer.stats.conflicts == 1
    grown = cluster.patch("job/ns/j", {"metadata": {"generation": 2}, "spec": {"parallelism": 9}})
    state.on_job("MODIFIED", grown)
    decided = {"ns/j": (1, "b")}
    await apply_result(writer, result(Decision("admit", "ns/j", "b", "")), NOW, decided_on=decided)
    assert cluster.objects["job/ns/j"]["spec"]["suspend"] is True


async def test_a_status_update_while_the_cycle_decided_does_not_stop_its_decision() -> None:
    """The Job controller rewrites a fresh job's status again and again; a victim chosen on
    the version before must still be suspended."""
    writer, cluster, state = fake_writer()
    job(cluster, state, "j")
    decided = {"ns/j": basis(state.jobs["ns/j"])}
    touched = cluster.patch("job/ns/j", {"status": {"active": 2}})
    state.on_job("MODIFIED", touched)
    await apply_result(writer, result(Decision("admit", "ns/j", "a", "")), NOW, decided_on=decided)
    assert cluster.objects["job/ns/j"]["spec"]["suspend"] is False


async def test_repeating_a_cycle_after_its_writes_changes_nothing() -> None:
    """The loop remembers what the API server returned, so the same decision on the next
    cycle (before the watch delivers) is refused by the precondition, not applied twice."""
    writer, cluster, state = fake_writer()
    job(cluster, state, "j")
    cycle = result(Decision("admit", "ns/j", "team", ""))
    await apply_result(writer, cycle, NOW)
    stored = state.jobs["ns/j"]
    assert stored["spec"]["suspend"] is False  # the cache already reflects the write
    assert (
        stored["metadata"]["resourceVersion"]
        == cluster.objects["job/ns/j"]["metadata"]["resourceVersion"]
    )
    # A watch event older than the write arrives late: it must not undo it.
    state.on_job("MODIFIED", {**stored, "metadata": {**stored["metadata"], "resourceVersion": "1"}})
    assert state.jobs["ns/j"]["spec"]["suspend"] is False


async def test_a_write_whose_answer_was_lost_is_read_back_before_the_next_decision() -> None:
    writer, cluster, state = fake_writer()
    job(cluster, state, "j")
    job(cluster, state, "gone")
    cluster.lose_answer |= {"job/ns/j", "job/ns/gone"}
    await apply_result(
        writer,
        result(Decision("admit", "ns/j", "team", ""), Decision("admit", "ns/gone", "team", "")),
        NOW,
    )
    assert cluster.objects["job/ns/j"]["spec"]["suspend"] is False  # it did happen
    assert state.jobs["ns/j"]["spec"]["suspend"] is True  # but the operator cannot know
    assert writer.unsure == {"ns/j", "ns/gone"}
    del cluster.objects["job/ns/gone"]
    assert writer.reread_unsure()
    assert state.jobs["ns/j"]["spec"]["suspend"] is False
    assert "ns/gone" not in state.jobs
    assert writer.unsure == set()


async def test_no_phase_runs_once_the_lease_is_no_longer_held() -> None:
    writer, cluster, state = fake_writer()
    job(cluster, state, "j")
    done = await apply_result(
        writer, result(Decision("admit", "ns/j", "team", "")), NOW, may_write=lambda: False
    )
    assert not done and cluster.calls == []


async def test_pending_reason_written_when_it_changes_event_only_when_its_cause_does() -> None:
    writer, cluster, state = fake_writer()
    now = [1000.0]
    writer.clock = lambda: now[0]
    job(cluster, state, "j")

    async def pending(reason: str) -> None:
        await apply_result(writer, result(pending=(PendingJob("ns/j", "team", reason, 1),)), NOW)

    def stored() -> str:
        return annotations(cluster.objects["job/ns/j"])["sluice.dev/pending-reason"]

    await pending("position 3 in team; team would use cpu 6 > capability 4")
    await pending("position 3 in team; team would use cpu 6 > capability 4")
    # Moving up the queue alone is not worth a write per admission ahead of it...
    await pending("position 2 in team; team would use cpu 6 > capability 4")
    assert stored() == "position 3 in team; team would use cpu 6 > capability 4"
    # ...a new cause is written at once, with its Event...
    await pending("position 2 in team; no node has room")
    assert stored() == "position 2 in team; no node has room"
    # ...and the position catches up once the refresh interval has passed.
    await pending("position 1 in team; no node has room")
    assert stored() == "position 2 in team; no node has room"
    now[0] += POSITION_REFRESH
    await pending("position 1 in team; no node has room")
    assert stored() == "position 1 in team; no node has room"
    assert [verb for verb, _ in cluster.calls if verb == "patch"] == ["patch"] * 3
    assert [e["message"] for e in cluster.events] == [
        "position 3 in team; team would use cpu 6 > capability 4",
        "position 2 in team; no node has room",
    ]
    assert {e["reason"] for e in cluster.events} == {"Pending"}
    # An admitted job is forgotten.
    await apply_result(writer, result(), NOW)
    assert writer.position_written == {}


def test_the_cause_of_a_pending_reason_leaves_out_the_position() -> None:
    assert cause("position 12 in a; a would use cpu 2 > capability 1") == (
        "a would use cpu 2 > capability 1"
    )
    assert cause("reclaimed for ns/x") == "reclaimed for ns/x"
    assert cause(None) is None


async def test_queue_status_removes_resources_no_longer_allocated_and_is_not_rewritten() -> None:
    writer, cluster, state = fake_writer()
    queue(cluster, state, "root", status={"state": "Open"})
    queue(cluster, state, "team", status={"allocated": {"cpu": "2", "nvidia.com/gpu": "1"}})
    status = QueueResult(
        state="Open", parent="root", weight=1, priority=0, allocated=Resources.parse({"cpu": "1"})
    )
    cycle = CycleResult(queue_order=("team",), queues={"team": status})
    await apply_result(writer, cycle, NOW)
    stored = cluster.objects["queue/team"]["status"]
    assert stored["allocated"] == {"cpu": "1"}
    assert stored["state"] == "Open" and stored["observedGeneration"] == 1
    assert stored["conditions"][0]["type"] == "Valid"
    writes = len(cluster.calls)
    await apply_result(writer, cycle, NOW)
    assert [c for c in cluster.calls[writes:] if c[0] == "status"] == []


async def test_a_deleted_parent_keeps_its_finalizer_until_its_children_are_gone() -> None:
    writer, cluster, state = fake_writer()
    queue(cluster, state, "root", metadata={"finalizers": ["sluice.dev/subtree"]})
    queue(
        cluster,
        state,
        "dept",
        metadata={
            "finalizers": ["sluice.dev/subtree"],
            "deletionTimestamp": "2026-01-01T00:00:00Z",
        },
    )
    queue(cluster, state, "team", spec={"parent": "dept"})
    cycle = result(queue_actions=(QueueAction("delete", "team", "parent dept deleted"),))
    await apply_result(writer, cycle, NOW)
    assert ("delete", "queue/team") in cluster.calls
    assert cluster.objects["queue/team"]["metadata"]["finalizers"] == ["sluice.dev/subtree"]
    assert cluster.objects["queue/dept"]["metadata"]["finalizers"] == ["sluice.dev/subtree"]
    # The child is gone (its own finalizer released, the watch reports the deletion).
    state.on_queue("DELETED", cluster.objects.pop("queue/team"))
    await apply_result(writer, result(), NOW)
    assert cluster.objects["queue/dept"]["metadata"]["finalizers"] == []


async def test_closing_marks_the_child_with_the_ancestor_and_reopening_clears_it() -> None:
    writer, cluster, state = fake_writer()
    queue(cluster, state, "root", metadata={"finalizers": ["sluice.dev/subtree"]})
    queue(cluster, state, "team", metadata={"finalizers": ["sluice.dev/subtree"]})
    await apply_result(writer, result(queue_actions=(QueueAction("close", "team", "dept"),)), NOW)
    team = cluster.objects["queue/team"]
    assert team["spec"]["state"] == "Closed"
    assert annotations(team) == {"sluice.dev/closed-by-parent": "dept"}
    await apply_result(writer, result(queue_actions=(QueueAction("reopen", "team", ""),)), NOW)
    assert team["spec"]["state"] == "Open" and annotations(team) == {}


async def test_root_and_default_are_created_once() -> None:
    writer, cluster, _ = fake_writer()
    actions = (QueueAction("create", "root"), QueueAction("create", "default"))
    await apply_result(writer, result(queue_actions=actions), NOW)
    await apply_result(writer, result(queue_actions=actions), NOW)  # a repeat is harmless
    assert cluster.objects["queue/default"]["spec"] == {"parent": "root"}
    assert cluster.objects["queue/root"]["spec"] == {}
    assert [key for verb, key in cluster.calls if verb == "create"] == [
        "queue/root",
        "queue/default",
        "queue/root",
        "queue/default",
    ]
    assert writer.stats.by_kind["create"] == 2
