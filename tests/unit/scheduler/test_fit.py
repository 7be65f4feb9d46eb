"""One limit function: the breaches it finds, and the fit, the reason text and the overage
that come from them."""

from __future__ import annotations

from builders import job, node, queue, running, snapshot

from sluice.scheduler.fit import LimitBreach, fits, limits, queue_failure, queue_overage
from sluice.scheduler.records import JobInfo
from sluice.scheduler.session import Session

ELASTIC_OFF = {
    "tiers": [
        {"plugins": [{"name": "priority"}]},
        {"plugins": [{"name": "proportion_optimize", "arguments": {"ElasticEnable": False}}]},
    ]
}


def waiting(session: Session, name: str) -> JobInfo:
    return next(j for q in session.queues.values() for j in q.pending_jobs if j.view.name == name)


def test_the_department_that_sets_a_limit_comes_first() -> None:
    queues = [
        queue("dept", capability={"cpu": 4}),
        queue("team", "dept", capability={"cpu": 3}),
    ]
    jobs = [running("r", "team", cpu=2), job("big", "team", cpu=3)]
    session = Session(snapshot(queues, jobs, [node(cpu=10)]))
    big = waiting(session, "big")
    assert list(limits(session, big)) == [
        LimitBreach("dept", "cpu", 5000, 4000, "capability"),
        LimitBreach("team", "cpu", 5000, 3000, "capability"),
    ]
    assert queue_failure(session, big) == ("dept (parent of team) would use cpu 5 > capability 4")
    assert queue_overage(session, big) == {"team": {"cpu": 2000}, "dept": {"cpu": 1000}}
    assert not fits(session, big)


def test_without_elasticity_deserved_is_a_limit_too() -> None:
    jobs = [running("r", "a", cpu=1), job("more", "a", cpu=5), job("other", "b", cpu=8)]
    session = Session(snapshot([queue("a"), queue("b")], jobs, [node(cpu=10)], config=ELASTIC_OFF))
    more = waiting(session, "more")
    (breach,) = limits(session, more)  # a deserves half the cluster: it would use 6 of 5
    assert breach == LimitBreach("a", "cpu", 6000, 5000, "deserved")
    assert str(queue_failure(session, more)).endswith("(ElasticEnable is false)")
    assert queue_overage(session, more) == {"a": {"cpu": 1000}}


def test_a_job_within_every_limit_fits() -> None:
    session = Session(snapshot([queue("a", capability={"cpu": 4})], [job("j", "a")], [node(cpu=2)]))
    small = waiting(session, "j")
    assert list(limits(session, small)) == []
    assert queue_failure(session, small) is None and queue_overage(session, small) == {}
    assert fits(session, small)
