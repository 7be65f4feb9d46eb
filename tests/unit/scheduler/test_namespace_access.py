"""A queue's namespaceSelector in the cycle: waiting jobs from other namespaces are never
admitted and say why; what already runs is left alone; nothing else is held back."""

from __future__ import annotations

from dataclasses import replace

from builders import job, node, queue, running, snapshot

from sluice.api.views import NamespaceView
from sluice.scheduler.cycle import run_cycle

TEAM_A_ONLY = {"matchLabels": {"team": "a"}}


def namespaced(view, namespace: str):  # type: ignore[no-untyped-def]
    return replace(view, namespace=namespace)


def test_a_job_from_a_namespace_the_queue_does_not_take_waits_with_the_reason() -> None:
    queues = [queue("team-a", namespaceSelector=TEAM_A_ONLY)]
    jobs = [
        namespaced(job("theirs", "team-a", created=0), "team-b"),
        namespaced(job("ours", "team-a", created=1), "team-a"),
    ]
    namespaces = [NamespaceView("team-a", labels={"team": "a"}), NamespaceView("team-b")]
    snap = replace(snapshot(queues, jobs, [node(cpu=10)]), namespaces=namespaces)
    result = run_cycle(snap)
    assert [d.job for d in result.decisions] == ["team-a/ours"]
    (waiting,) = result.pending
    assert (waiting.job, waiting.reason) == (
        "team-b/theirs",
        "position 1 in team-a; queue team-a takes jobs only from namespaces matching team=a"
        " (spec.namespaceSelector); namespace team-b does not match",
    )
    assert result.queues["team-a"].pending == 1


def test_a_selector_changed_after_admission_evicts_nothing() -> None:
    queues = [queue("team-a", capability={"cpu": 2}, namespaceSelector=TEAM_A_ONLY)]
    jobs = [namespaced(running("old", "team-a", cpu=2), "team-b")]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=10)]))
    assert result.decisions == ()
    assert result.queues["team-a"].running == 1


def test_a_namespace_missing_from_the_snapshot_still_has_its_name_label() -> None:
    by_name = {"matchLabels": {"kubernetes.io/metadata.name": "ml"}}
    queues = [queue("team-a", namespaceSelector=by_name)]
    jobs = [namespaced(job("j", "team-a"), "ml"), namespaced(job("k", "team-a"), "web")]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=10)]))
    assert [d.job for d in result.decisions] == ["ml/j"]
    assert "namespace web does not match" in result.pending[0].reason


def test_refused_jobs_claim_no_share_of_the_parent() -> None:
    """Proportion splits the parent by what each child could use: a child whose only jobs
    it cannot take must not be handed a share it would then lend and reclaim."""
    queues = [
        queue("a", weight=1, namespaceSelector=TEAM_A_ONLY),
        queue("b", weight=1),
    ]
    jobs = [namespaced(job(f"x{i}", "a", cpu=2), "team-b") for i in range(3)]
    jobs += [job(f"y{i}", "b", cpu=2, created=i) for i in range(5)]
    result = run_cycle(snapshot(queues, jobs, [node(cpu=10)]))
    assert sorted(d.job for d in result.decisions) == [f"ns/y{i}" for i in range(5)]
    assert result.queues["a"].deserved.get_amount("cpu") == 0
