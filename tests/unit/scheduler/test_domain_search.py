"""The bounded search by domain ranks domains by room arithmetic alone (docs/scheduler.md,
*Reclaim and preempt by domain*): a domain whose victims could not free it even all gone is
never searched, the victims it counts are a bound no search beats, and at most ``limit``
domains are searched, a domain its victims could not make room in not counted.
"""

from __future__ import annotations

from builders import gang

from sluice.scheduler.actions.domain_search import Held, Searched, best_domain, room_rank
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
