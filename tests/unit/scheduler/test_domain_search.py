"""The bounded search by domain ranks domains by room arithmetic alone (docs/scheduler.md,
*Reclaim and preempt by domain*): a domain whose victims could not free it even all gone is
never searched, the victims it counts are a bound no search beats, and at most ``limit``
domains are searched, a domain its victims could not make room in not counted. Where the
arithmetic says one victim, the pods' fit node by node with that victim gone says whether
one really does.
"""

from __future__ import annotations

from dataclasses import replace

from builders import gang, node

from sluice.scheduler.actions.domain_search import (
    Held,
    Rank,
    Searched,
    best_domain,
    one_victim_rank,
    refined,
    room_rank,
)
from sluice.scheduler.actions.reclaim_rules import ByDomain
from sluice.scheduler.actions.victims import Victims
from sluice.scheduler.domain_room import Domain
from sluice.scheduler.placement import Placement
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
    assert room_rank(RACK, {"cpu": 2}, {"cpu": 8}, {}, small) is None
    elsewhere = held(victim("c", 0, {1: 8}), allowed={0})
    assert room_rank(RACK, {"cpu": 2}, {"cpu": 8}, {}, elsewhere) is None
    # The cluster lacks 10 cpu: victims holding 8 in all cannot free it, whatever the rack.
    enough = held(victim("d", 0, {0: 8}))
    assert room_rank(RACK, {"cpu": 2}, {"cpu": 8}, {"cpu": 10}, enough) is None


def test_the_rank_counts_the_fewest_victims_and_their_lowest_priorities() -> None:
    """6 cpu lacking: one victim holding 6 could alone; victims of 4 need two at least."""
    one = held(victim("a", 5, {0: 6}), victim("b", 0, {1: 1}))
    assert room_rank(RACK, {"cpu": 2}, {"cpu": 8}, {}, one)[:2] == (1, 0)
    two = held(victim("a", 5, {0: 4}), victim("b", 3, {1: 4}))
    assert room_rank(RACK, {"cpu": 2}, {"cpu": 8}, {}, two)[:2] == (2, 6)


def test_the_bound_counts_the_largest_holdings_first_not_the_largest_alone() -> None:
    """7 cpu lacking on victims holding 5, 1, 1 and 1: the largest alone would say two, but
    two cover at most 6, so no search takes fewer than three."""
    amounts = {"a": 5, "b": 1, "c": 1, "d": 1}
    listed = held(*(victim(n, 0, {k % 2: a}) for k, (n, a) in enumerate(amounts.items())))
    assert room_rank(RACK, {"cpu": 1}, {"cpu": 8}, {}, listed)[0] == 3
    # What the cluster lacks counts alike: 7 lacking there, the rack short of nothing.
    assert room_rank(RACK, {"cpu": 8}, {"cpu": 8}, {"cpu": 7}, listed)[0] == 3


def test_merged_victims_hold_what_they_hold_added_one_by_one() -> None:
    """Reclaim merges what each queue subtree's victims on a domain hold: the same totals,
    most held by one and lowest priority as adding every victim to one ``Held``, the room on
    a node the pods may not go on left out either way."""
    a, b, c = victim("a", 5, {0: 2, 1: 6}), victim("b", 1, {1: 3}), victim("c", 3, {0: 7})
    for allowed in (ALL_NODES, {0}):
        merged = held(a, allowed=allowed)
        merged.merge(held(b, c, allowed=allowed))
        merged.merge(Held())
        whole = held(a, b, c, allowed=allowed)
        for got, want in (
            (merged, whole),
            (held(b, c, allowed=allowed), held(c, b, allowed=allowed)),
        ):
            assert (got.on, got.most_on, got.total, got.most, got.low) == (
                want.on,
                want.most_on,
                want.total,
                want.most,
                want.low,
            )
    assert merged.on == {"cpu": 9} and merged.most_on == {"cpu": 7} and merged.low == 1
    assert merged.total == {"cpu": 18} and merged.most == {"cpu": 8}


def test_at_most_limit_domains_are_searched_and_a_domain_without_room_does_not_count() -> None:
    """Three racks ranked; the first has no room even with its victims gone (not counted),
    so with a limit of 1 the second is searched, and the third never is."""
    racks = [Domain("example.com/rack", f"r{k}", (k,)) for k in range(3)]
    ranked = [((1, 0, d.value), d) for d in racks]
    found = Victims.__new__(Victims)
    found.chosen = []
    asked: list[str] = []

    def search(domain: Domain) -> Searched:
        asked.append(domain.value)
        return (domain.value != "r0"), (found if domain.value != "r0" else None)

    result, could = best_domain(ranked, search, 1)
    assert asked == ["r0", "r1"]
    assert result is found and could


def test_one_victim_ranks_first_only_where_it_alone_makes_room_for_the_pods() -> None:
    """A rack of two 8-cpu nodes, full; one pod of 6 cpu asked. Victim a holds 4 on each
    node: 8 in the rack, enough on paper, but gone it leaves no node with 6 free, so the
    rack needs two victims at the least. Victims b (7 on one node) and c (6 on the other)
    alone each free the rack, and the rank takes the lower priority, c's; but where the
    cluster lacks 6.5, c alone holds too little, and the rank takes b's."""
    placement = Placement([node("n0", cpu=8), node("n1", cpu=8)])
    for i in (0, 1):
        placement.hold({i: {"cpu": 8000}})
    inside = gang("j", "a", 1, cpu=6)
    rank: Rank = (1, -5, "r0")
    a, _ = victim("a", -5, {0: 4000, 1: 4000})
    b, _ = victim("b", 3, {0: 7000})
    c, _ = victim("c", 1, {1: 6000})
    need = {"cpu": 6500}
    assert one_victim_rank(placement, inside, RACK, ALL_NODES, [a], {}, rank) == (2, -10, "r0")
    assert one_victim_rank(placement, inside, RACK, ALL_NODES, [a, b, c], need, rank) == (
        1,
        3,
        "r0",
    )
    assert one_victim_rank(placement, inside, RACK, ALL_NODES, [a, b, c], {}, rank) == (1, 1, "r0")
    # The room on a node the pods may not go on does not count.
    assert one_victim_rank(placement, inside, RACK, {1}, [a, b], {}, rank) == (2, -10, "r0")
    # A rank of more than one victim is kept as it is.
    assert one_victim_rank(placement, inside, RACK, ALL_NODES, [a], {}, (2, 0, "r0")) == (
        2,
        0,
        "r0",
    )


def test_refined_domains_come_in_the_order_of_their_new_ranks_each_asked_when_due() -> None:
    """Ranked r0, r1, r2 at one victim; r0 and r2 turn out to need two. The new order is
    r1, then r0 and r2; r2 is refined only once r0's new rank came up against it."""
    racks = [Domain("example.com/rack", f"r{k}", (k,)) for k in range(3)]
    given = iter([((1, 0, d.value), d) for d in racks])
    asked: list[str] = []

    def refine(rank: Rank, domain: Domain) -> Rank:
        asked.append(domain.value)
        return rank if domain.value == "r1" else (2, 0, domain.value)

    order = refined(given, refine)
    assert next(order)[1].value == "r1"
    assert asked == ["r0", "r1"]
    assert [(rank, d.value) for rank, d in order] == [((2, 0, "r0"), "r0"), ((2, 0, "r2"), "r2")]
    assert asked == ["r0", "r1", "r2"]


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
    assert room_rank(RACK, {}, {"cpu": 9}, {}, held)[:2] == (2, 0)
    on[0]["cpu"] -= 4
    kept.taken(whole)
    assert held.on == {"cpu": 3} and held.each_on["cpu"] == [3] and held.most_on == {"cpu": 3}
