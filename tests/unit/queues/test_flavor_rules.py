"""Quotas per flavor (spec.flavors): the hierarchy rules hold in each flavor, the queue's own
fields bound the sum over its flavors, and the door refuses a flavor listed twice or one that
does not exist, naming the queue, the flavor and the resource."""

from __future__ import annotations

from typing import Any

from queue_builders import cluster, q

from sluice.api.queue import Queue
from sluice.queues import rules
from sluice.queues.admission import ClusterFacts, check_queue_create, check_queue_update
from sluice.queues.flavors import flavor_tree
from sluice.queues.tree import QueueTree

GPU = "nvidia.com/gpu"
FLAVORS = ClusterFacts(flavors=frozenset({"a100", "h100"}))


def fl(name: str, **fields: Any) -> dict[str, Any]:
    """One spec.flavors entry; ``guarantee`` given as a plain map."""
    entry: dict[str, Any] = {"name": name}
    for key, value in fields.items():
        entry[key] = {"resource": value} if key == "guarantee" else value
    return entry


def test_a_flavor_entry_is_read_in_order_and_written_back() -> None:
    queue = q("t", flavors=[fl("h100", capability={GPU: "8"}), fl("a100", deserved={GPU: "4"})])
    assert [f.name for f in queue.spec.flavors] == ["h100", "a100"]
    h100 = queue.spec.flavor("h100")
    assert h100 is not None and h100.capability[GPU] == 8000
    assert queue.spec.flavor("l4") is None
    assert queue.to_object()["spec"]["flavors"][0] == {
        "name": "h100",
        "guarantee": {"resource": {}},
        "deserved": {},
        "capability": {GPU: "8"},
    }
    assert "flavors" not in q("plain").to_object()["spec"]


def test_a_flavor_capability_of_zero_allows_none() -> None:
    entry = q("t", flavors=[fl("h100", capability={GPU: "0"})]).spec.flavor("h100")
    assert entry is not None and GPU in entry.capability and entry.capability[GPU] == 0


def test_a_childs_flavor_capability_is_held_against_the_nearest_ancestor_naming_it() -> None:
    # mid names no flavor: it is transparent, team is held against org.
    tree = QueueTree(
        cluster(
            q("org", flavors=[fl("h100", capability={GPU: "8"})]),
            q("mid", "org"),
            q("team", "mid", flavors=[fl("h100", capability={GPU: "12"})]),
        )
    )
    (breach,) = [b for b in rules.breaches(tree, 5) if b.rule == "capability-over-ancestor"]
    assert (breach.queue, breach.ancestor, breach.flavor, breach.excess) == (
        "team",
        "org",
        "h100",
        4000,
    )
    assert breach.message() == (
        "queue team: in flavor h100, capability nvidia.com/gpu 12 exceeds the capability"
        " nvidia.com/gpu 8 of its ancestor org"
    )
    assert breach.message("org").startswith("queue org: in flavor h100, capability")


def test_a_flavor_cap_holds_only_in_that_flavor() -> None:
    tree = QueueTree(
        cluster(
            q("org", flavors=[fl("h100", capability={GPU: "8"})]),
            q("team", "org", flavors=[fl("a100", capability={GPU: "32"})]),
        )
    )
    assert rules.breaches(tree, 5) == []


def test_childrens_flavor_guarantees_fit_in_the_parents_flavor_guarantee() -> None:
    tree = QueueTree(
        cluster(
            q("org", flavors=[fl("h100", guarantee={GPU: "8"}, deserved={GPU: "8"})]),
            q("a", "org", flavors=[fl("h100", guarantee={GPU: "6"}, deserved={GPU: "6"})]),
            q("b", "org", flavors=[fl("h100", guarantee={GPU: "4"}, deserved={GPU: "4"})]),
        )
    )
    found = {(b.rule, b.queue, b.flavor, b.amount, b.limit) for b in rules.breaches(tree, 5)}
    assert found == {
        ("guarantee-sum", "org", "h100", 10000, 8000),
        ("deserved-sum", "org", "h100", 10000, 8000),
    }
    assert rules.tree_violations(tree, 5) == {
        "org": "queue org: in flavor h100, the queues nearest below org that name it would have"
        " guarantee nvidia.com/gpu 10 in total, more than org's guarantee nvidia.com/gpu 8"
    }


def test_flavor_guarantees_fit_in_what_the_parent_can_ever_hold_in_it() -> None:
    tree = QueueTree(
        cluster(
            q("org", flavors=[fl("h100", capability={GPU: "6"})]),
            q("a", "org", flavors=[fl("h100", guarantee={GPU: "4"})]),
            q("b", "org", flavors=[fl("h100", guarantee={GPU: "4"})]),
        )
    )
    (breach,) = rules.breaches(tree, 5)
    assert (breach.rule, breach.against, breach.flavor) == ("guarantee-sum", "capability", "h100")


def test_root_may_carry_flavor_quota_and_is_unlimited_in_the_flavors_it_names_not() -> None:
    queues = cluster(
        q("a", flavors=[fl("h100", capability={GPU: "12"})]),
        q("b", flavors=[fl("a100", capability={GPU: "99"})]),
    )
    assert rules.breaches(QueueTree(queues), 5) == []
    queues["root"] = q("root", flavors=[fl("h100", capability={GPU: "8"})])
    (breach,) = rules.breaches(QueueTree(queues), 5)
    assert (breach.rule, breach.queue, breach.ancestor, breach.flavor) == (
        "capability-over-ancestor",
        "a",
        "root",
        "h100",
    )


def test_a_parent_without_the_flavor_leaves_its_childrens_sums_to_the_ancestor_naming_it() -> None:
    # a and b are under different parents that name no flavor: org bounds them together.
    tree = QueueTree(
        cluster(
            q("org", flavors=[fl("h100", deserved={GPU: "8"})]),
            q("x", "org"),
            q("y", "org"),
            q("a", "x", flavors=[fl("h100", deserved={GPU: "5"})]),
            q("b", "y", flavors=[fl("h100", deserved={GPU: "5"})]),
        )
    )
    projected = flavor_tree(tree, "h100")
    assert projected.children("org") == ("a", "b")
    assert set(projected.queues) == {"root", "org", "a", "b"}
    (breach,) = rules.breaches(tree, 5)
    assert (breach.rule, breach.queue, breach.amount) == ("deserved-sum", "org", 10000)


def test_a_childs_flavor_quota_under_parents_without_flavors_is_bounded_by_nothing_else() -> None:
    tree = QueueTree(
        cluster(
            q("org", capability={GPU: "4"}),
            q("team", "org", flavors=[fl("h100", guarantee={GPU: "2"}, capability={GPU: "2"})]),
        )
    )
    assert rules.breaches(tree, 5) == []


def test_a_flavor_listed_twice_is_refused() -> None:
    new = q("t", flavors=[fl("h100"), fl("a100"), fl("h100", capability={GPU: "1"})])
    v = check_queue_create(new, cluster(), FLAVORS)
    assert (v.allowed, v.rule) == (False, "flavor-listed-twice")
    assert v.message == (
        "queue t: flavor h100 is listed twice in spec.flavors; list each flavor once"
    )


def test_a_flavors_own_amounts_keep_guarantee_under_deserved_under_capability() -> None:
    new = q("t", flavors=[fl("h100", guarantee={GPU: "4"}, deserved={GPU: "2"})])
    v = check_queue_create(new, cluster(), FLAVORS)
    assert (v.allowed, v.rule) == (False, "guarantee-over-deserved")
    assert v.message == (
        "queue t: in flavor h100, guarantee nvidia.com/gpu 4 exceeds its deserved"
        " nvidia.com/gpu 2; guarantee must be <= deserved"
    )


def test_the_queues_own_fields_bound_the_sum_over_its_flavors() -> None:
    new = q(
        "t",
        guarantee={GPU: "8"},
        deserved={GPU: "8"},
        flavors=[
            fl("h100", guarantee={GPU: "4"}, deserved={GPU: "4"}),
            fl("a100", guarantee={GPU: "6"}, deserved={GPU: "6"}),
        ],
    )
    found = [(b.rule, b.what, b.against, b.amount) for b in rules.own(new)]
    assert found == [
        ("flavors-over-own", "guarantee", "guarantee", 10000),
        ("flavors-over-own", "deserved", "deserved", 10000),
    ]
    v = check_queue_create(new, cluster(), FLAVORS)
    assert (v.allowed, v.rule) == (False, "flavors-over-own")
    assert v.message == (
        "queue t: the guarantee of its flavors (h100 nvidia.com/gpu 4, a100 nvidia.com/gpu 6)"
        " add up to nvidia.com/gpu 10, more than its own guarantee nvidia.com/gpu 8, which"
        " bounds the sum over its flavors"
    )


def test_flavor_guarantees_fit_in_the_queues_own_capability() -> None:
    new = q("t", capability={GPU: "8"}, flavors=[fl("h100", guarantee={GPU: "9"})])
    [breach] = rules.own(new)
    assert (breach.rule, breach.against, breach.limit) == ("flavors-over-own", "capability", 8000)


def test_own_fields_leave_resources_no_flavor_names_and_unset_bounds_alone() -> None:
    new = q(
        "t",
        capability={"cpu": "4"},
        flavors=[fl("h100", guarantee={GPU: "8"}), fl("a100", capability={GPU: "64"})],
    )
    assert list(rules.own(new)) == []


def test_a_flavor_that_does_not_exist_is_refused() -> None:
    new = q("t", flavors=[fl("h100"), fl("l4", capability={GPU: "2"})])
    v = check_queue_create(new, cluster(), FLAVORS)
    assert (v.allowed, v.rule) == (False, "flavor-missing")
    assert v.message == (
        "queue t: flavor l4 does not exist (flavors: a100, h100); create the Flavor first"
    )
    none = check_queue_create(new, cluster(), ClusterFacts(flavors=frozenset()))
    assert "flavor h100 does not exist (flavors: none exists)" in none.message
    assert check_queue_create(q("t", flavors=[fl("h100")]), cluster(), FLAVORS).allowed


def test_a_flavor_deleted_since_the_queue_named_it_does_not_block_its_other_changes() -> None:
    old = q("t", weight=1, flavors=[fl("gone")])
    new = q("t", weight=2, flavors=[fl("gone")])
    assert check_queue_update(old, new, cluster(old), FLAVORS).allowed
    added = q("t", weight=2, flavors=[fl("gone"), fl("l4")])
    v = check_queue_update(old, added, cluster(old), FLAVORS)
    assert (v.rule, "flavor l4 does not exist" in v.message) == ("flavor-missing", True)


def test_a_request_is_refused_for_a_flavor_breach_it_makes_not_for_one_it_keeps() -> None:
    org = q("org", flavors=[fl("h100", deserved={GPU: "8"})])
    a = q("a", "org", flavors=[fl("h100", deserved={GPU: "6"})])
    b = q("b", "org", flavors=[fl("h100", deserved={GPU: "4"})])
    existing = cluster(org, a, b)  # already over: 10 > 8
    reweighted = q("a", "org", weight=3, flavors=[fl("h100", deserved={GPU: "6"})])
    assert check_queue_update(a, reweighted, existing, FLAVORS).allowed
    grown = q("a", "org", flavors=[fl("h100", deserved={GPU: "7"})])
    v = check_queue_update(a, grown, existing, FLAVORS)
    assert (v.allowed, v.rule) == (False, "deserved-sum")
    assert v.message.startswith("queue a: in flavor h100, the queues nearest below org")
    assert "deserved nvidia.com/gpu 11 in total" in v.message


def test_a_breach_in_one_flavor_is_not_excused_by_the_same_breach_in_another() -> None:
    org = q("org", flavors=[fl("h100", deserved={GPU: "8"}), fl("a100", deserved={GPU: "8"})])
    a = q("a", "org", flavors=[fl("h100", deserved={GPU: "9"}), fl("a100", deserved={GPU: "1"})])
    existing = cluster(org, a)  # over in h100 only
    worse = q(
        "a", "org", flavors=[fl("h100", deserved={GPU: "9"}), fl("a100", deserved={GPU: "9"})]
    )
    v = check_queue_update(a, worse, existing, FLAVORS)
    assert (v.allowed, v.rule) == (False, "deserved-sum")
    assert "in flavor a100" in v.message


def test_a_parent_with_flavors_takes_children_without_them() -> None:
    org = q("org", flavors=[fl("h100", guarantee={GPU: "8"}, capability={GPU: "8"})])
    child = q("team", "org", capability={GPU: "100"})
    assert check_queue_create(child, cluster(org), FLAVORS).allowed


def test_queues_whose_place_is_broken_are_left_out_of_every_flavor() -> None:
    orphan = Queue.from_object(
        {
            "metadata": {"name": "lost"},
            "spec": {"parent": "gone", "flavors": [fl("h100", capability={GPU: "1"})]},
        }
    )
    tree = QueueTree(cluster(q("org", flavors=[fl("h100")]), orphan))
    assert set(flavor_tree(tree, "h100").queues) == {"root", "org"}
