"""Reclaim and preempt by domain search at most ``maxDomains`` domains (docs/scheduler.md,
*Reclaim and preempt by domain*). However few that is, no decision breaks a rule: the nodes
are not overcommitted, no victim queue goes below its guarantee, victims are whole admitted
workloads inside the one domain the job goes in. And a job no domain could hold even with
every victim it may take gone takes nothing, and its reason says so.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from builders import gang, node, pod, queue, snapshot
from test_cycle_invariants import check
from test_topology_equivalence import ALL, BLOCK, CLASSES, RACK, cluster

from sluice.api.config import parse_scheduler_config
from sluice.api.topology import TopologyRequest, TopologyView
from sluice.api.views import JobPhase
from sluice.scheduler.actions.outcome import unfreeable
from sluice.scheduler.cycle import _act, run_cycle
from sluice.scheduler.model import Snapshot
from sluice.scheduler.session import Session


def bounded(snap: Snapshot, max_domains: int | None) -> Snapshot:
    """The same cluster with maxDomains as given (None: its default)."""
    raw: dict[str, object] = {"actions": ALL}
    if max_domains is not None:
        raw["configurations"] = [
            {"name": a, "arguments": {"maxDomains": max_domains}} for a in ("reclaim", "preempt")
        ]
    return replace(snap, config=parse_scheduler_config(raw))


@pytest.mark.parametrize("max_domains", [None, 1, 2])
def test_no_decision_of_the_bounded_search_breaks_a_rule(max_domains: int | None) -> None:
    decided: Counter[str] = Counter()
    for seed in range(200):
        snap = bounded(cluster(seed), max_domains)
        result = run_cycle(snap)
        check(snap, result)
        session = Session(snap)
        jobs = [j for info in session.queues.values() for j in info.admitted_jobs]
        held = {j.key: dict(j.held) for j in jobs}  # before eviction forgets them
        footprints = {j.key: set(j.footprint) for j in jobs}
        before = [dict(room) for room in session.placement.free]
        guarantees = {name: info.guarantee for name, info in session.queues.items()}
        _act(session)
        # The nodes: no room handed out twice (victims' room given back first).
        for i, room in enumerate(session.placement.free):
            for r, a in room.items():
                assert a >= min(0, before[i].get(r, 0)), (seed, i, r)
        victims = [d for d in result.decisions if d.action in ("reclaim", "preempt")]
        for d in victims:
            # A victim queue keeps its guarantee in what its victims held.
            after = session.queues[d.queue].allocated
            for r, g in guarantees[d.queue].items():
                if g > 0 and held[d.job].get(r, 0) > 0:
                    assert after.get(r, 0) >= g, (seed, d.job, r)
        by_job = {d.job: d for d in result.decisions if d.action == "admit"}
        for d in victims:
            admitted = by_job[d.for_job]
            if admitted.domain and ": " not in admitted.domain:  # the whole workload's
                level, _, value = admitted.domain.partition("=")
                domain = next(d for d in session.domains.domains(level) if d.value == value)
                # Every victim holds room inside the one domain the job goes in.
                assert footprints[d.job] & set(domain.nodes), (seed, d.job)
            decided[d.action] += 1
        decided["in a domain"] += sum(1 for d in by_job.values() if d.domain)
    assert decided["reclaim"] >= 10 and decided["preempt"] >= 10, decided


def test_a_job_no_domain_could_hold_even_with_every_victim_gone_takes_nothing() -> None:
    """Two racks of one 8-cpu node, each filled by a job of queue b (two pods of 4 cpu). A
    job of queue a asking 12 cpu in one rack fits in none even were every job that may be a
    victim gone: no victim is taken, and its reason says so. The same job asking 8 cpu
    takes one of them, the one of the lowest priority (v, in r0)."""
    nodes = [node(f"n{r}", labels={BLOCK: "b0", RACK: f"r{r}"}, cpu=8) for r in range(2)]
    victim = replace(
        gang("v", "b", 2, admitted=0, priority_class="low", cpu=4), phase=JobPhase.RUNNING
    )
    other = replace(gang("w", "b", 2, admitted=1, cpu=4), phase=JobPhase.RUNNING)
    queues = [queue("a", weight=3), queue("b")]
    topology = (TopologyView("default", (BLOCK, RACK)),)
    ask = TopologyRequest(RACK, True)

    def run(cpu: int) -> tuple[list[tuple[str, str]], str]:
        job = replace(gang("j", "a", 1, created=5, cpu=cpu), topology=ask)
        snap = replace(
            snapshot(queues, [victim, other, job], nodes, config={"actions": ALL},
                     priority_classes=CLASSES),
            topologies=topology,
        )  # fmt: skip
        result = run_cycle(snap)
        reason = next((p.reason for p in result.pending if p.job == "ns/j"), "")
        return [(d.action, d.job) for d in result.decisions], reason

    decisions, reason = run(12)
    assert decisions == []
    assert reason.endswith(unfreeable(RACK)), reason
    decisions, reason = run(8)
    assert decisions == [("reclaim", "ns/v"), ("admit", "ns/j")]
    assert reason == ""


def test_a_rack_one_victim_frees_only_on_paper_comes_after_one_it_really_frees() -> None:
    """Rack r0's lowest-priority victim p holds 8 cpu there, more than the 6 the job's pod
    asks, but 4 on each of two nodes: gone, no node has room for the pod, so a search there
    takes a second victim. Rack r1's one victim q frees a whole node. With one domain
    searched, r1 is the one (as the exact choice over both racks), not r0, whose victims
    the arithmetic over the rack alone ranks first (the lower priority)."""
    nodes = [
        node("n0a", labels={BLOCK: "b0", RACK: "r0"}, cpu=8),
        node("n0b", labels={BLOCK: "b0", RACK: "r0"}, cpu=8),
        node("n1", labels={BLOCK: "b0", RACK: "r1"}, cpu=8),
    ]
    running = JobPhase.RUNNING
    p = replace(gang("p", "b", 2, admitted=0, priority_class="low", cpu=4), phase=running)
    w0 = replace(gang("w0", "b", 1, admitted=1, cpu=4), phase=running)
    w1 = replace(gang("w1", "b", 1, admitted=2, cpu=4), phase=running)
    q = replace(gang("q", "b", 1, admitted=3, cpu=8), phase=running)
    pods = [
        pod("p-0", "n0a", owner=p),
        pod("p-1", "n0b", owner=p),
        pod("w0-0", "n0a", owner=w0),
        pod("w1-0", "n0b", owner=w1),
        pod("q-0", "n1", owner=q),
    ]
    job = replace(gang("j", "a", 1, created=5, cpu=6), topology=TopologyRequest(RACK, True))
    queues = [queue("a", weight=3), queue("b")]
    base = snapshot(
        queues, [p, w0, w1, q, job], nodes, config={"actions": ALL},
        priority_classes=CLASSES, pods=pods,
    )  # fmt: skip
    base = replace(base, topologies=(TopologyView("default", (BLOCK, RACK)),))
    for max_domains in (1, 2):
        result = run_cycle(bounded(base, max_domains))
        decisions = [(d.action, d.job, d.domain) for d in result.decisions]
        assert decisions == [("reclaim", "ns/q", ""), ("admit", "ns/j", f"{RACK}=r1")], (
            max_domains,
            decisions,
        )
