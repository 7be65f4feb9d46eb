"""Growth through the queue (docs/elastic.md, *Grown through the queue*): an admitted
resizable workload asking more than its record admitted is held at what was admitted, and
the pods beyond it wait as an entry of their own, admitted by the rules a new workload meets."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from builders import NOW, T0, gang, job, node, pod, queue, snapshot

from sluice.api.admitted_size import SizeRecord
from sluice.api.views import JobPhase, PodView, WorkloadView
from sluice.scheduler.cycle import apply_decisions, run_cycle
from sluice.scheduler.decision_pass import DecisionPass
from sluice.scheduler.growth import (
    GatedPods,
    gates_to_release,
    grown_records,
    grown_workload,
    growth_key,
    growth_seen_at,
    rejoined,
    split_growth,
    with_growth,
)
from sluice.scheduler.model import CycleResult, Decision

ONLY_ADMIT = {"actions": "enqueue, allocate, backfill"}
RECORD = SizeRecord("main", 8, 6, (("spec.parallelism", 8),))


def admitted(
    name: str, pods: int, record: SizeRecord | None = RECORD, **kw: object
) -> WorkloadView:
    """A Job running ``pods`` pods of 1 cpu in queue team, minimum 4, recorded as ``record``."""
    base = gang(name, "team", pods, cpu=1, phase=JobPhase.RUNNING, admitted=5, **kw)
    (pod_set,) = base.pod_sets
    sized = (record,) if record else ()
    return replace(base, pod_sets=(replace(pod_set, min_count=4),), sized=sized)


def split(view: WorkloadView, seconds: int = 30) -> list[WorkloadView]:
    held, growth = split_growth(view, T0 + timedelta(seconds=seconds))
    return [held] if growth is None else [held, growth]


def admitted_keys(result: CycleResult) -> set[str]:
    return {d.job for d in result.decisions if d.action == "admit"}


def test_a_raised_size_is_held_at_the_admitted_size_and_the_rest_waits_as_its_growth() -> None:
    train = admitted("train", 10, priority_class="high")
    held, growth = split_growth(train, T0 + timedelta(seconds=30))
    assert held.pod_sets[0].count == 6
    assert held.request.get_amount("cpu") == 6000
    assert growth is not None
    assert growth.key == "ns/train (growth)" == growth_key(train.key)
    assert grown_workload(growth.key) == "ns/train"
    assert grown_workload(train.key) is None
    assert growth.phase is JobPhase.PENDING
    assert [(s.name, s.count, s.min_count) for s in growth.pod_sets] == [("main", 4, 4)]
    assert growth.request.get_amount("cpu") == 4000
    assert growth.priority_class_name == "high"
    assert growth.queue == "team"
    assert growth.queued_at == T0 + timedelta(seconds=30)
    assert growth.admitted_at is None and growth.sized == () and growth.uid == ""


def test_no_growth_without_a_record_or_while_waiting_or_at_the_admitted_size() -> None:
    at = T0 + timedelta(seconds=30)
    for view in (
        admitted("whole", 10, record=None),
        replace(admitted("waiting", 10), phase=JobPhase.PENDING),
        admitted("same", 6),
    ):
        assert split_growth(view, at) == (view, None)


def test_a_lowered_size_frees_its_quota_at_once() -> None:
    held, growth = split_growth(admitted("train", 4), T0)
    assert growth is None
    assert held.request.get_amount("cpu") == 4000


def test_the_growth_waits_with_a_position_and_a_reason_while_its_queue_has_no_room() -> None:
    queues = [queue("team", capability={"cpu": 8})]
    result = run_cycle(snapshot(queues, split(admitted("train", 10)), [node(cpu=64)]))
    assert admitted_keys(result) == set()
    (waiting,) = [p for p in result.pending if p.job == "ns/train (growth)"]
    assert waiting.position == 1
    assert "capability" in waiting.reason
    assert result.queues["team"].allocated.get_amount("cpu") == 6000


def test_the_growth_is_admitted_when_its_queue_has_room() -> None:
    queues = [queue("team", capability={"cpu": 10})]
    result = run_cycle(snapshot(queues, split(admitted("train", 10)), [node(cpu=64)]))
    assert admitted_keys(result) == {"ns/train (growth)"}
    assert result.queues["team"].allocated.get_amount("cpu") == 10000


def test_the_growth_queues_behind_the_jobs_already_waiting() -> None:
    # Room for 2 cpus more: a job of 2 waiting before the growth was seen goes first, one
    # created after it goes after it.
    queues = [queue("team", capability={"cpu": 8})]
    grown = split(admitted("train", 8), seconds=30)
    for created, first in ((10, "ns/other"), (50, "ns/train (growth)")):
        other = job("other", "team", cpu=2, created=created)
        result = run_cycle(snapshot(queues, [*grown, other], [node(cpu=64)], config=ONLY_ADMIT))
        assert admitted_keys(result) == {first}


def test_the_growth_places_its_pods_only_where_its_template_selects() -> None:
    # The workload was admitted into rack a (its template's nodeSelector): its growth waits
    # for room there, however much room rack b has.
    nodes = [node("a1", cpu=7, labels={"rack": "a"}), node("b1", cpu=64, labels={"rack": "b"})]
    train = admitted("train", 8, selector={"rack": "a"})
    result = run_cycle(snapshot([queue("team")], split(train), nodes, config=ONLY_ADMIT))
    assert admitted_keys(result) == set()
    wider = [replace(nodes[0], allocatable=nodes[1].allocatable), nodes[1]]
    result = run_cycle(snapshot([queue("team")], split(train), wider, config=ONLY_ADMIT))
    assert admitted_keys(result) == {"ns/train (growth)"}


def test_the_record_once_growth_is_admitted() -> None:
    assert grown_records([RECORD], [("main", 2)]) == (
        SizeRecord("main", 8, 8, (("spec.parallelism", 8),)),
    )
    assert grown_records([RECORD], [("main", 4)]) == (
        SizeRecord("main", 10, 10, (("spec.parallelism", 8),)),
    )
    assert grown_records([RECORD], [("other", 4)]) == (RECORD,)


def test_once_its_growth_is_admitted_the_workload_is_held_at_its_grown_size() -> None:
    train = admitted("train", 10)
    _, growth = split_growth(train, T0)
    assert growth is not None
    grown = with_growth(train, growth)
    held, more = split_growth(grown, T0)
    assert more is None
    assert held.request.get_amount("cpu") == 10000
    assert grown.sized == (SizeRecord("main", 10, 10, (("spec.parallelism", 8),)),)


def test_rejoined_is_the_workload_as_its_object_asks() -> None:
    train = admitted("train", 10)
    held, growth = split_growth(train, T0)
    assert growth is not None
    assert rejoined(held, growth) == train


def test_an_admitted_growth_joins_its_workload_once_written() -> None:
    queues = [queue("team", capability={"cpu": 10})]
    before = snapshot(queues, split(admitted("train", 10)), [node(cpu=64)])
    after = apply_decisions(before, run_cycle(before), before.now)
    (train,) = after.workloads
    assert train.key == "ns/train"
    assert train.phase is JobPhase.RUNNING
    assert train.request.get_amount("cpu") == 10000
    assert train.sized == (SizeRecord("main", 10, 10, (("spec.parallelism", 8),)),)
    assert split_growth(train, T0)[1] is None


def test_a_growth_left_waiting_stays_an_entry_of_its_own() -> None:
    queues = [queue("team", capability={"cpu": 8})]
    before = snapshot(queues, split(admitted("train", 10)), [node(cpu=64)])
    after = apply_decisions(before, run_cycle(before), before.now)
    assert [j.key for j in after.workloads] == ["ns/train", "ns/train (growth)"]
    assert tuple(after.workloads) == tuple(before.workloads)


def test_a_suspended_workload_takes_its_growth_back_and_asks_its_whole_size() -> None:
    before = snapshot([queue("team")], split(admitted("train", 10)), [node(cpu=64)])
    result = CycleResult(
        queue_order=(), queues={}, decisions=(Decision("reclaim", "ns/train", "team"),)
    )
    (train,) = apply_decisions(before, result, before.now).workloads
    assert train.phase is JobPhase.PENDING
    assert train.pod_sets[0].count == 10
    assert train.request.get_amount("cpu") == 10000
    assert train.sized == ()


def test_the_growth_is_seen_at_the_creation_of_the_oldest_pod_still_gated() -> None:
    train = admitted("train", 10)
    pods = [
        replace(pod("train-0", "n1", owner=train, created=5), gated=False),
        replace(pod("gone", None, owner=train, created=10, terminating=True), gated=True),
        replace(pod("train-7", None, owner=train, created=40), gated=True),
        replace(pod("train-6", None, owner=train, created=30), gated=True),
    ]
    assert growth_seen_at(pods, NOW) == T0 + timedelta(seconds=30)
    assert growth_seen_at(pods[:1], NOW) == NOW


def test_a_workloads_gated_pods_are_found_by_its_uid_or_its_labels_in_its_namespace() -> None:
    train = admitted("train", 10)
    ray = replace(admitted("ray", 10), uid="", pods_by=(("ray.io/cluster", "ray-c"),))
    pods = [
        replace(pod("train-6", None, owner=train, created=30), gated=True),
        replace(pod("train-0", "n1", owner=train, created=5), gated=False),
        replace(pod("elsewhere", None, owner=train), namespace="other", gated=True),
        replace(pod("ray-w1", None, created=20), named_by=(("ray.io/cluster", "ray-c"),)),
        replace(pod("ray-w2", None, created=25), named_by=(("ray.io/cluster", "ray-c"),)),
        replace(pod("other-ray", None), named_by=(("ray.io/cluster", "other"),)),
    ]
    pods[3:] = [replace(p, gated=True) for p in pods[3:]]
    gated = GatedPods(pods)
    assert [p.name for p in gated.of(train)] == ["train-6"]
    assert sorted(p.name for p in gated.of(ray)) == ["ray-w1", "ray-w2"]
    assert gated.of(admitted("none", 10)) == []


def test_the_gated_pods_of_its_growth_hold_nothing_for_the_workload() -> None:
    # 6 pods running as admitted, 4 more made and gated, no room for them: its queue holds
    # 6, not 10, and the growth waits.
    def allocated(view: WorkloadView) -> int:
        pods = [pod(f"train-{i}", "n1", owner=view) for i in range(6)]
        made = [pod(f"train-{i}", None, owner=view, created=3590) for i in range(6, 10)]
        pods += [replace(p, gated=True) for p in made]
        jobs = split(view) if view.sized else [view]
        queues = [queue("team", capability={"cpu": 6})]
        result = run_cycle(snapshot(queues, jobs, [node(cpu=64)], pods=pods, config=ONLY_ADMIT))
        assert admitted_keys(result) == set()
        return result.queues["team"].allocated.get_amount("cpu")

    assert allocated(admitted("train", 10)) == 6000
    assert allocated(admitted("train", 6, record=None)) == 10000  # any other workload's count


# The cycle splits each workload itself: a snapshot holds workloads as their objects are.


def test_the_cycle_splits_a_raised_workload_and_its_growth_waits_in_its_queue() -> None:
    queues = [queue("team", capability={"cpu": 8})]
    result = run_cycle(snapshot(queues, [admitted("train", 10)], [node(cpu=64)]))
    assert admitted_keys(result) == set()
    (waiting,) = result.pending
    assert (waiting.job, waiting.position) == ("ns/train (growth)", 1)
    assert "capability" in waiting.reason
    assert result.queues["team"].allocated.get_amount("cpu") == 6000
    assert (result.queues["team"].pending, result.queues["team"].running) == (1, 1)


def test_the_admission_of_a_growth_carries_the_raised_record() -> None:
    queues = [queue("team", capability={"cpu": 10})]
    result = run_cycle(snapshot(queues, [admitted("train", 10)], [node(cpu=64)]))
    (decision,) = result.decisions
    assert (decision.action, decision.job) == ("admit", "ns/train (growth)")
    assert decision.sizes == (("main", 10, 10),)
    assert result.queues["team"].allocated.get_amount("cpu") == 10000


def test_the_growth_is_placed_at_its_oldest_gated_pod() -> None:
    # Room for 2 cpus more; the growth's pods were made 30s after T0: a job created before
    # goes first, one created after goes after it.
    queues = [queue("team", capability={"cpu": 8})]
    train = admitted("train", 8)
    pods = [pod(f"train-{i}", "n1", owner=train) for i in range(6)]
    made = [pod(f"train-{i}", None, owner=train, created=30 + i) for i in range(6, 8)]
    pods += [replace(p, gated=True) for p in made]
    for created, first in ((10, "ns/other"), (50, "ns/train (growth)")):
        other = job("other", "team", cpu=2, created=created)
        snap = snapshot(queues, [train, other], [node(cpu=64)], pods=pods, config=ONLY_ADMIT)
        assert admitted_keys(run_cycle(snap)) == {first}


def test_the_decision_pass_admits_a_growth_as_the_full_cycle_does() -> None:
    queues = [queue("team", capability={"cpu": 12})]
    serve = admitted("serve", 2, record=None)
    snap = snapshot(queues, [admitted("train", 10), serve], [node(cpu=64)])
    full = run_cycle(snap).decisions
    fast = DecisionPass(first=2).decide(snap).decisions
    assert [(d.job, d.sizes) for d in fast] == [(d.job, d.sizes) for d in full]
    assert [d.job for d in fast] == ["ns/train (growth)"]


def test_a_simulated_run_follows_the_growth_from_the_object_as_it_asks() -> None:
    queues = [queue("team", capability={"cpu": 10})]
    before = snapshot(queues, [admitted("train", 10)], [node(cpu=64)])
    (train,) = apply_decisions(before, run_cycle(before), before.now).workloads
    assert train.key == "ns/train" and train.phase is JobPhase.RUNNING
    assert train.request.get_amount("cpu") == 10000
    assert train.sized == (SizeRecord("main", 10, 10, (("spec.parallelism", 8),)),)


def test_a_workload_requeued_takes_its_growth_back_in_the_same_cycle() -> None:
    # Admitted long ago, one of its 6 pods never scheduled: requeued; its growth, which has
    # room, is not admitted after it, and waits no more apart from it.
    train = admitted("train", 8)
    pods = [pod(f"train-{i}", "n1", owner=train) for i in range(5)]
    pods.append(pod("train-5", None, owner=train, unschedulable="no room"))
    snap = snapshot([queue("team")], [train], [node(cpu=64)], pods=pods)
    result = run_cycle(snap)
    assert [(d.action, d.job) for d in result.decisions] == [("requeue", "ns/train")]
    assert [p.job for p in result.pending] == ["ns/train"]


def _gated(view: WorkloadView, name: str, created: int) -> PodView:
    made = pod(name, None, owner=view, created=created)
    return replace(made, gated=True, gate_index=0, resizable=True)


def test_gates_are_released_oldest_first_up_to_the_recorded_size() -> None:
    # Recorded at 8 (its growth of 2 admitted), 5 pods released and running, 1 finished,
    # 1 being deleted, 5 gated: 3 more may run, the 3 oldest gated.
    train = admitted("train", 10, record=SizeRecord("main", 10, 8))
    pods = [pod(f"train-{i}", "n1", owner=train) for i in range(5)]
    pods.append(pod("done", "n1", owner=train, finished=True))
    pods.append(pod("leaving", "n1", owner=train, terminating=True))
    gated = [_gated(train, f"g{i}", 40 - i) for i in range(5)]
    released = gates_to_release(train, [*pods, *gated])
    assert [p.name for p in released] == ["g4", "g3", "g2"]
    # Without a record, up to what it asks (a minimum equal to its size writes none); a
    # gated pod not gated for its size (a plain pod's) is never released here.
    whole = admitted("whole", 7, record=None)
    assert [p.name for p in gates_to_release(whole, [*pods, *gated])] == ["g4", "g3"]
    plain = [replace(p, resizable=False) for p in gated]
    assert gates_to_release(train, [*pods, *plain]) == []


def test_the_cycle_releases_the_gates_its_record_admits_and_not_those_of_its_growth() -> None:
    queues = [queue("team", capability={"cpu": 6})]
    for record, released in ((SizeRecord("main", 8, 8), ["g0", "g1"]), (RECORD, [])):
        train = admitted("train", 8, record=record)
        pods = [pod(f"train-{i}", "n1", owner=train) for i in range(6)]
        pods += [_gated(train, f"g{i}", 30 + i) for i in range(2)]
        snap = snapshot(queues, [train], [node(cpu=64)], pods=pods, config=ONLY_ADMIT)
        result = run_cycle(snap)
        assert [(k, [p.name for p in gated]) for k, gated in result.releases] == (
            [("ns/train", released)] if released else []
        )
