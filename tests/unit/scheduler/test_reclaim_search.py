"""The reclaim search (best-first down the tree, with cached subtree bounds) yields exactly
the victims, in exactly the order, that design section 5 defines when spelled out naively."""

from __future__ import annotations

import random

from builders import job, node, queue, running, snapshot

from sluice.api.views import WorkloadView
from sluice.scheduler.actions.outcome import Outcome
from sluice.scheduler.actions.reclaim import _Reclaim
from sluice.scheduler.fit import short_resources
from sluice.scheduler.records import JobInfo
from sluice.scheduler.session import Session

CAPACITY = {
    "actions": "enqueue, allocate, reclaim",
    "tiers": [{"plugins": [{"name": "priority"}]}, {"plugins": [{"name": "capacity"}]}],
}


def random_cluster(seed: int) -> tuple[Session, list[JobInfo]]:
    rng = random.Random(seed)
    queues, leaves = [], []
    for d in range(3):
        queues.append(queue(f"d{d}", deserved={"cpu": 18, "nvidia.com/gpu": 3}))
        for t in range(rng.randint(1, 3)):
            team = f"d{d}t{t}"
            owed = rng.choice(({"cpu": 6}, {"cpu": 6, "nvidia.com/gpu": 2}))
            queues.append(queue(team, f"d{d}", deserved=owed))
            for q in range(rng.randint(1, 3)):
                name = f"{team}q{q}"
                # Deserved naming cpu, the GPUs, both or nothing: a resource it leaves out
                # neither counts as over the share nor stops a reclaim.
                owed = rng.choice(
                    (
                        {"cpu": 1},
                        {"cpu": 2},
                        {"nvidia.com/gpu": 1},
                        {},
                        {"cpu": 1, "nvidia.com/gpu": 1},
                    )
                )
                spec = {"deserved": owed, "priority": rng.choice((0, 5))}
                queues.append(queue(name, team, **spec))
                leaves.append(name)
    jobs: list[WorkloadView] = []
    for i in range(40):
        where = rng.choice(leaves)
        cpu, gpu = rng.choice(((1, 0), (2, 0), (1, 0), (2, 0), (1, 1), (0, 1)))
        if rng.random() < 0.6:
            at = rng.randint(0, 500)
            jobs.append(running(f"r{i}", where, cpu=cpu, nvidia_com_gpu=gpu, admitted=at))
        else:
            jobs.append(job(f"p{i}", where, cpu=cpu, nvidia_com_gpu=gpu, created=i))
    snap = snapshot(queues, jobs, [node(cpu=34, nvidia_com_gpu=7)], config=CAPACITY)
    session = Session(snap)
    pending = [j for info in session.queues.values() for j in info.pending_jobs]
    return session, pending


def naive_order(search: _Reclaim, job: JobInfo, short: dict[str, int]) -> list[str]:
    session = search.session
    chain = session.chain(job.queue)
    out: list[str] = []
    for level in range(1, len(chain)):
        if not search.within_deserved(job, chain[level - 1]):
            break
        common, own = chain[level], chain[level - 1]
        found = []
        for leaf in session.leaves_under(common):
            path = session.chain(leaf)
            path = path[: path.index(common)]
            if own in path or not set(search.excess.get(leaf, {})) & set(short):
                continue
            for victim in search.victims_for(leaf, frozenset(short)):
                if not all(search.gives_up(q, victim, {}, short) for q in path):
                    continue
                found.append((session.queues[leaf].priority, search.order(victim), victim.key))
        out.extend(key for *_, key in sorted(found))
    return out


def test_the_search_matches_the_definition_on_random_trees() -> None:
    compared = taken = 0
    for seed in range(150):
        session, pending = random_cluster(seed)
        outcome = Outcome()
        search = _Reclaim(session, outcome)
        for pending_job in pending:
            short = short_resources(session, pending_job)
            if not short:
                continue
            found = [v.key for v in search.candidates(pending_job, short, {})]
            assert found == naive_order(search, pending_job, short), f"seed {seed}"
            compared += len(found)
            # Take the victims, so later jobs search a changed tree with cached bounds.
            placed = search.reclaim_where(pending_job, short)
            if placed is not None:
                outcome.admit(session, pending_job, "", placed[0])
                search.admitted(pending_job)
                taken += 1
    assert compared > 200 and taken > 30  # the random clusters do exercise the search
