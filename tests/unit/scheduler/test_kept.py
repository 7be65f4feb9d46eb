"""What a session keeps for the next one (sluice/scheduler/kept.py): it is taken only where
its inputs are the same, and a session handed it works out what one without it does.
The decision pass's property test (test_decision_pass.py) checks the decisions on random events;
these check what is kept itself."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest
from builders import job, node, pod, queue, snapshot

from sluice.api.queue import QueueStatus
from sluice.api.resources import EMPTY
from sluice.api.views import JobPhase
from sluice.scheduler import session as session_module
from sluice.scheduler.kept import Kept
from sluice.scheduler.plugins import deserved as deserved_plugins
from sluice.scheduler.records import QueueInfo
from sluice.scheduler.session import Session

BUILT = {"name", "queue", "parent", "children", "depth", "priority", "weight", "guarantee"}
BUILT |= {"capability", "invalid_reason", "blocked_by", "passed_on"}
"""The fields ``Session._build_queues`` sets from the tree: kept as they are."""

QUEUES = [
    queue("d0"),
    queue("d1"),
    queue("a", "d0", weight=2),
    queue("b", "d0"),
    queue("c", "d1"),
    queue("e", "d1", guarantee={"cpu": 1}),
]


def test_a_cleared_queue_record_is_as_built() -> None:
    """Every field a session changes goes back to its default; a new field must be named
    here as built from the tree or be cleared, else a kept record carries one session's
    jobs into the next."""
    built = Session(snapshot(QUEUES, [], [node(cpu=8)])).queues["a"]
    used = Session(
        snapshot(
            QUEUES,
            [job("x", "a", cpu=1, phase=JobPhase.RUNNING), job("y", "a", cpu=20)],
            [node(cpu=8)],
        )
    ).queues["a"]
    used.over_capability = {"cpu": (2, 1)}
    used.grown = [("ns/x", EMPTY)]
    used.completed = 3
    changed = {f.name for f in fields(QueueInfo) if getattr(used, f.name) != getattr(built, f.name)}
    assert changed >= {"allocated", "pending_jobs", "admitted_jobs", "request", "deserved"}
    assert not changed & BUILT
    used.clear()
    for f in fields(QueueInfo):
        if f.name not in BUILT:
            default = f.default_factory() if callable(f.default_factory) else f.default
            assert getattr(used, f.name) == default, f.name


def derived(session: Session) -> dict[str, tuple[Any, ...]]:
    return {
        name: (info.request, info.deserved, info.real_capability, dict(info.allocated))
        for name, info in session.queues.items()
    }


def test_a_new_job_splits_again_only_the_parents_whose_inputs_moved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Room for everyone: a job more in leaf a moves the request of a, d0 and root, so root
    and d0 are split again; d1's deserved did not move, so its split is the kept one."""
    split = deserved_plugins.split
    parents: list[str] = []

    def counted(plugin: Any, total: Any, claims: Any) -> Any:
        names = {c.name for c in claims}
        parents.append(next(q.spec.parent or "root" for q in QUEUES if q.name in names))
        return split(plugin, total, claims)

    monkeypatch.setattr(deserved_plugins, "split", counted)
    jobs = [job("x", "a", cpu=1), job("y", "c", cpu=2), job("z", "e", cpu=1)]
    kept = Kept()
    Session(snapshot(QUEUES, jobs, [node(cpu=64)]), kept)
    assert sorted(parents) == ["d0", "d1", "root"]
    parents.clear()
    more = snapshot(QUEUES, [*jobs, job("w", "a", cpu=3)], [node(cpu=64)])
    again = Session(more, kept)
    assert sorted(parents) == ["d0", "root"]
    parents.clear()
    assert derived(again) == derived(Session(more))


def test_the_pods_are_taken_again_when_they_change() -> None:
    """What the pods take is kept while they are the same pods; a pod more, one finished,
    an admitted job's pod asking more than it was admitted with, are taken into account as
    a session without anything kept does."""
    running = replace(job("x", "a", cpu=2, phase=JobPhase.RUNNING), uid="uid-x")
    kept = Kept()
    nodes = [node("n1", cpu=4), node("n2", cpu=4)]
    other = pod("p1", "n1", cpu=1)
    steps = [
        [other],
        [other, pod("p2", "n2", cpu=3)],
        [other, pod("p2", "n2", cpu=3, finished=True), pod("x-0", "n1", owner=running, cpu=3)],
        [replace(other, finished=True), pod("x-0", "n1", owner=running, cpu=3)],
    ]
    for sight, pods in enumerate(step for step in steps for _ in range(2)):
        snap = snapshot(QUEUES, [running], nodes, pods=list(pods))
        with_kept, alone = Session(snap, kept), Session(snap)
        assert with_kept.placement.free == alone.placement.free
        assert {r: a for r, a in with_kept.used.items() if a} == alone.used
        assert derived(with_kept) == derived(alone)
        (held,) = with_kept.admitted_at_start
        assert (kept.pods_taken is not None) == (sight % 2 == 1)  # kept from the second sight
        assert (held.held, held.footprint) == (
            alone.admitted_at_start[0].held,
            alone.admitted_at_start[0].footprint,
        )


def test_a_status_written_keeps_what_follows_from_the_specs_and_shows_the_new_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a full pass nearly every queue's status is written: the tree's walk, its
    violations, realCapability and the queue records follow from the specs alone, so they
    are kept, each record over the queue's new view; a spec changed works all out again."""
    walks: list[int] = []
    built = session_module.QueueTree.__init__

    def walked(tree: Any, queues: Any) -> None:
        walks.append(len(queues))
        built(tree, queues)

    monkeypatch.setattr(session_module.QueueTree, "__init__", walked)
    jobs = [job("x", "a", cpu=1, phase=JobPhase.RUNNING), job("y", "c", cpu=2)]
    kept = Kept()
    first = Session(snapshot(QUEUES, jobs, [node(cpu=64)]), kept)
    status = QueueStatus(state="Open", running=1)
    written = [q.model_copy(update={"status": status}) if q.name == "a" else q for q in QUEUES]
    after = Session(snapshot(written, jobs, [node(cpu=64)]), kept)
    assert len(walks) == 1  # the same walk, over the new views
    assert after.violations is first.violations and after.tree is not first.tree
    assert after.queues["a"].queue.status.running == 1  # the record shows the new status
    assert derived(after) == derived(Session(snapshot(written, jobs, [node(cpu=64)])))
    reweighed = [queue("a", "d0", weight=5) if q.name == "a" else q for q in written]
    walked_before = len(walks)  # the session without ``kept`` above walked its own
    again = Session(snapshot(reweighed, jobs, [node(cpu=64)]), kept)
    assert len(walks) == walked_before + 1  # a spec changed: walked again
    assert again.violations is not first.violations and again.queues["a"].weight == 5
    assert derived(again) == derived(Session(snapshot(reweighed, jobs, [node(cpu=64)])))
