"""The bounded search by domain ranks domains by room arithmetic alone (docs/scheduler.md,
*Reclaim and preempt by domain*): a domain whose victims could not free it even all gone is
never searched, the victims it counts are a bound no search beats, domains of the same
bound go by the most free room, and at most ``limit`` domains are searched, a domain its
victims could not make room in not counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from builders import gang

from sluice.scheduler.actions.domain_search import (
    Held,
    Rank,
    Searched,
    best_domain,
    rank,
    room_rank,
)
from sluice.scheduler.actions.reclaim_rules import ByDomain
from sluice.scheduler.actions.victims import Victims
from sluice.scheduler.domain_room import Domain
from sluice.scheduler.records import JobInfo

RACK = Domain("example.com/rack", "r0", (0, 1))
ALL_NODES = {0, 1}


def victim(
    name: str, priority: int, on: dict[int, int]
) -> tuple[JobInfo, dict[int, dict[str, int]]]:
    """An admitted job holding ``on[i]`` cpu on node i, and its room on the rack's nodes."""
    footprint = {i: {"cpu": cpu} for i, cpu in on.items()}
    info = JobInfo(
        view=gang(name, "b", 1, cpu=sum(on.values())),
        priority=priority,
        request={"cpu": sum(on.values())},
        admitted=True,
        admitted_at=None,
        finished=False,
        key=f"ns/{name}",
        queue="b",
        held={"cpu": sum(on.values())},
        footprint=footprint,
    )
    return info, footprint


def held(
    *victims: tuple[JobInfo, dict[int, dict[str, int]]], allowed: set[int] = ALL_NODES
) -> Held:
    out = Held()
    for info, footprint in victims:
        out.add(info, footprint, allowed)
    return out


def test_a_rack_its_victims_could_not_free_even_all_gone_is_not_ranked() -> None:
    """8 cpu asked, 2 free: victims holding 4 in all fall short; so does one holding 8 on a
    node the pods may not go on (its room there does not count)."""
    small = held(victim("a", 0, {0: 2}), victim("b", 0, {1: 2}))
    assert room_rank({"cpu": 2}, {"cpu": 8}, {}, small) is None
    elsewhere = held(victim("c", 0, {1: 8}), allowed={0})
    assert room_rank({"cpu": 2}, {"cpu": 8}, {}, elsewhere) is None
    # The cluster lacks 10 cpu: victims holding 8 in all cannot free it, whatever the rack.
    enough = held(victim("d", 0, {0: 8}))
    assert room_rank({"cpu": 2}, {"cpu": 8}, {"cpu": 10}, enough) is None


def test_the_rank_counts_the_fewest_victims_and_their_lowest_priorities() -> None:
    """6 cpu lacking: one victim holding 6 could alone; victims of 4 need two at least."""
    one = held(victim("a", 5, {0: 6}), victim("b", 0, {1: 1}))
    assert room_rank({"cpu": 2}, {"cpu": 8}, {}, one)[:2] == (1, 0)
    two = held(victim("a", 5, {0: 4}), victim("b", 3, {1: 4}))
    assert room_rank({"cpu": 2}, {"cpu": 8}, {}, two)[:2] == (2, 6)


def test_the_bound_counts_the_largest_holdings_first_not_the_largest_alone() -> None:
    """7 cpu lacking on victims holding 5, 1, 1 and 1: the largest alone would say two, but
    two cover at most 6, so no search takes fewer than three."""
    amounts = {"a": 5, "b": 1, "c": 1, "d": 1}
    listed = held(*(victim(n, 0, {k % 2: a}) for k, (n, a) in enumerate(amounts.items())))
    assert room_rank({"cpu": 1}, {"cpu": 8}, {}, listed)[0] == 3
    # What the cluster lacks counts alike: 7 lacking there, the rack short of nothing.
    assert room_rank({"cpu": 8}, {"cpu": 8}, {"cpu": 7}, listed)[0] == 3


def test_at_most_limit_domains_are_searched_and_a_domain_without_room_does_not_count() -> None:
    """Three racks ranked; the first has no room even with its victims gone (not counted),
    so with a limit of 1 the second is searched, and the third never is."""
    racks = [Domain("example.com/rack", f"r{k}", (k,)) for k in range(3)]
    ranked: list[tuple[Rank, Domain]] = [((1, 0, 0.0, d.value), d) for d in racks]
    found = Victims.__new__(Victims)
    found.chosen = []
    asked: list[str] = []

    def search(domain: Domain) -> Searched:
        asked.append(domain.value)
        return (domain.value != "r0"), (found if domain.value != "r0" else None)

    result, could = best_domain(ranked, search, 1)
    assert asked == ["r0", "r1"]
    assert result is found and could


def found_in(*values: str, victims: int = 1, priority: int = 0) -> Callable[[Domain], Searched]:
    """A search that finds ``victims`` victims of ``priority`` each in the domains named, and
    nothing (with room) elsewhere; it records the domains asked in ``asked`` and what it
    found in ``made``."""
    asked: list[str] = []
    made: dict[str, Victims] = {}

    def search(domain: Domain) -> Searched:
        asked.append(domain.value)
        if domain.value not in values:
            return True, None
        found = Victims.__new__(Victims)
        found.chosen = [victim(f"v{k}", priority, {0: 1})[0] for k in range(victims)]
        made[domain.value] = found
        return True, found

    search.asked = asked  # type: ignore[attr-defined]
    search.made = made  # type: ignore[attr-defined]
    return search


def test_domains_of_the_same_bound_go_by_the_most_free_room_then_by_name() -> None:
    """Three racks bound at one victim of priority 0 (r2 at two): r1 has the most cpu free
    for the pods, then r0 and r3 alike (a share of the cluster's 100 cpu), so they come r1,
    r0, r3, then r2."""
    bound = (1, 0)
    total, ask = {"cpu": 100}, {"cpu": 8}
    racks = {v: Domain("example.com/rack", v, (k,)) for k, v in enumerate(("r0", "r1", "r2", "r3"))}
    ranks = [
        rank(racks["r0"], bound, {"cpu": 2}, ask, total),
        rank(racks["r1"], bound, {"cpu": 5}, ask, total),
        rank(racks["r2"], (2, 0), {"cpu": 7}, ask, total),
        rank(racks["r3"], bound, {"cpu": 2, "memory": 9}, ask, total),
    ]
    assert [r[3] for r in sorted(ranks)] == ["r1", "r0", "r3", "r2"]
    assert ranks[1] == (1, 0, -0.05, "r1")


def test_a_result_at_the_next_bound_ends_a_bounded_search_but_not_an_exhaustive_one() -> None:
    """r1 (the most room) and r0 are bound at one victim of priority 0; r1's search finds
    one. While fewer than all the domains may be searched, nothing left can beat it but by
    name: r0 is not searched. With every domain searchable, ties go by name: r0, searched
    too, is taken."""
    racks = {v: Domain("example.com/rack", v, (k,)) for k, v in enumerate(("r0", "r1", "r2"))}
    ranked: list[tuple[Rank, Domain]] = [
        ((1, 0, -0.5, "r1"), racks["r1"]),
        ((1, 0, -0.1, "r0"), racks["r0"]),
        ((2, 0, -0.9, "r2"), racks["r2"]),
    ]
    search = found_in("r0", "r1")
    result, could = best_domain(ranked, search, 2)
    assert search.asked == ["r1"] and could  # type: ignore[attr-defined]
    assert result is search.made["r1"]  # type: ignore[attr-defined]
    search = found_in("r0", "r1")
    exact, _ = best_domain(ranked, search, 3)
    assert search.asked == ["r1", "r0"]  # type: ignore[attr-defined]
    assert exact is search.made["r0"]  # type: ignore[attr-defined]
    # Two victims found in r1: r0's bound (one) may still beat it, so r0 is searched.
    search = found_in("r1", victims=2)
    best_domain(ranked, search, 2)
    assert search.asked == ["r1", "r0"]  # type: ignore[attr-defined]


def test_the_bound_reads_the_same_after_victims_are_taken_off() -> None:
    """The running sums of the holdings are dropped when a victim is taken off: the bound
    counts what is left (7 lacking: 4 and 3 of 4, 3, 1, then 3, 1 and no more once the 4 is
    gone)."""
    a, b, c = victim("a", 0, {0: 4}), victim("b", 0, {1: 3}), victim("c", 0, {0: 1})
    kept = Held()
    for info, footprint in (a, b, c):
        kept.add_on(info, footprint, ALL_NODES)
    assert room_rank({}, {"cpu": 7}, {}, kept) == (2, 0)
    assert room_rank({}, {"cpu": 8}, {}, kept) == (3, 0)
    kept.remove_on(a[1], ALL_NODES)
    assert room_rank({}, {"cpu": 4}, {}, kept) == (2, 0)
    assert room_rank({}, {"cpu": 5}, {}, kept) is None


def test_a_victim_taken_off_leaves_what_the_others_hold_added_up() -> None:
    """What every victim holds on a domain is kept for the cycle, a victim's room taken off
    as it is taken: the same sums, largest holding and holdings as adding up the others
    (the largest recomputed when it is the one taken off); its lowest priority stays, a
    bound still."""
    a, b, c = victim("a", 5, {0: 2, 1: 6}), victim("b", 1, {1: 3}), victim("c", 3, {0: 7})
    for allowed in (ALL_NODES, {0}):
        kept = Held()
        for info, footprint in (a, b, c):
            kept.add_on(info, footprint, allowed)
        kept.remove_on(c[1], allowed)
        rest = Held()
        for info, footprint in (a, b):
            rest.add_on(info, footprint, allowed)
        assert kept.on == rest.on and kept.most_on == rest.most_on, allowed
        assert {r: sorted(x) for r, x in kept.each_on.items() if x} == {
            r: sorted(x) for r, x in rest.each_on.items()
        }
        assert kept.low == 1
    assert kept.on == {"cpu": 2} and kept.most_on == {"cpu": 2}


def test_a_part_taken_leaves_its_workload_counted_with_the_rest() -> None:
    """What every victim holds on a domain counts a workload with its victims above its
    minimum: taking one of them (4 of the workload's 10 cpu) leaves the workload counted
    with its other 6, and taking the workload after it (shrunk: the session takes the
    part's room off its footprint) leaves the others'."""
    whole, on = victim("w", 0, {0: 8, 1: 2})
    other, other_on = victim("o", 0, {1: 3})
    part = replace(whole, key="ns/w (part)", held={"cpu": 4}, footprint={0: {"cpu": 4}})
    part.part_of = whole
    held = Held()
    for info, footprint in ((whole, on), (other, other_on)):
        held.add_on(info, footprint, ALL_NODES)
    kept = ByDomain()
    kept.of_node["rack"] = {0: "r0", 1: "r0"}
    kept.anyone[("rack", "r0", ())] = (held, ALL_NODES)
    kept.constraints_on[("rack", "r0")] = [()]
    kept.taken(part)
    assert held.on == {"cpu": 9} and held.most_on == {"cpu": 6}
    assert sorted(held.each_on["cpu"]) == [3, 6]
    assert room_rank({}, {"cpu": 9}, {}, held) == (2, 0)
    on[0]["cpu"] -= 4
    kept.taken(whole)
    assert held.on == {"cpu": 3} and held.each_on["cpu"] == [3] and held.most_on == {"cpu": 3}
