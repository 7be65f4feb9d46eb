"""The catalogue of tree rules, one rule at a time: what each finds, whom it blames, and how a
breach is said to the queue that breaks it and to the other queues a request may change."""

from __future__ import annotations

from queue_builders import cluster, q

from sluice.queues import rules
from sluice.queues.tree import QueueTree


def test_depth_names_every_queue_too_deep_the_deepest_first() -> None:
    tree = QueueTree(cluster(q("l1"), q("l2", "l1"), q("l3", "l2"), q("side", "l1")))
    found = list(rules.depth(tree, max_queue_depth=1))
    assert [(b.queue, b.amount, b.excess) for b in found] == [
        ("l3", 3, 2),
        ("l2", 2, 1),
        ("side", 2, 1),
    ]
    assert found[0].message() == (
        "queue l3: the tree would be 3 levels deep under root (maximum 1, set by --max-queue-depth)"
    )
    assert found[0].message("l1").startswith("queue l1: the tree would be 3 levels deep")
    assert list(rules.depth(tree, max_queue_depth=3)) == []


def test_amounts_are_a_queues_own() -> None:
    bad = q("t", guarantee={"cpu": "-1"}, deserved={"cpu": "4"}, capability={"cpu": "2"})
    found = list(rules.amounts(bad))
    assert [(b.rule, b.resource, b.amount, b.limit) for b in found] == [
        ("negative-quantity", "cpu", -1000, 0),
        ("deserved-over-capability", "cpu", 4000, 2000),
    ]
    assert (
        found[0].message()
        == "queue t: guarantee.resource cpu -1 is negative; quantities must be >= 0"
    )
    assert found[1].message() == (
        "queue t: deserved cpu 4 exceeds its capability cpu 2; deserved must be <= capability"
    )
    assert list(rules.amounts(q("t", guarantee={"cpu": "1"}, capability={"cpu": "1"}))) == []


def test_capability_is_held_against_the_nearest_ancestor_capping_it() -> None:
    tree = QueueTree(
        cluster(
            q("dept", capability={"cpu": "8"}),
            q("mid", "dept"),
            q("team", "mid", capability={"cpu": "10", "memory": "1Gi"}),
        )
    )
    (breach,) = rules.capability(tree)
    assert (breach.queue, breach.ancestor, breach.excess) == ("team", "dept", 2000)
    assert breach.key == ("capability-over-ancestor", "team", "dept", "cpu", "")
    # One breach, said to each queue on the way from the one that breaks it to its ancestor.
    assert breach.refusal("team").rule == "capability-over-ancestor"
    assert breach.message("team") == (
        "queue team: capability cpu 10 exceeds the capability cpu 8 of its ancestor dept"
    )
    under = breach.refusal("dept")
    assert under.rule == "capability-under-descendant"
    assert under.message == (
        "queue dept: capability cpu 8 is below the capability cpu 10 of its descendant team"
    )
    assert breach.message("mid") == (
        "queue mid: its descendant team has capability cpu 10, more than the capability cpu 8"
        " of dept"
    )
    # Within the nearest cap, a farther one is not asked: the nearest answers for it.
    nested = QueueTree(
        cluster(
            q("dept", capability={"cpu": "8"}),
            q("mid", "dept", capability={"cpu": "12"}),
            q("team", "mid", capability={"cpu": "10"}),
        )
    )
    assert [(b.queue, b.ancestor) for b in rules.capability(nested)] == [("mid", "dept")]


def test_sums_blame_the_parent_and_name_what_bounds_it() -> None:
    tree = QueueTree(
        cluster(
            q("g", guarantee={"cpu": "4"}),
            q("g1", "g", guarantee={"cpu": "3"}),
            q("g2", "g", guarantee={"cpu": "3"}),
            q("c", capability={"cpu": "6"}),
            q("c1", "c", guarantee={"cpu": "4"}, capability={"cpu": "5"}),
            q("c2", "c", guarantee={"cpu": "4"}),
            q("r", "c1"),
            q("r1", "r", guarantee={"cpu": "9"}),
            q("d", deserved={"cpu": "2"}),
            q("d1", "d", deserved={"cpu": "3"}),
        )
    )
    found = {b.queue: b for b in rules.sums(tree)}
    assert set(found) == {"g", "c", "r", "d"}
    assert found["g"].message() == (
        "queue g: the children of g would have guarantee cpu 6 in total, more than g's"
        " guarantee cpu 4"
    )
    assert found["c"].message("c2") == (
        "queue c2: the children of c would have guarantee cpu 8 in total, more than all c can"
        " ever hold, its capability cpu 6"
    )
    # r can hold what c1 can: min(its capability 5, max(6 - 8, 0) + its guarantee 4) = 4.
    assert found["r"].message() == (
        "queue r: the children of r would have guarantee cpu 9 in total, more than all r can"
        " ever hold, its realCapability cpu 4 (the capabilities above it less the guarantees"
        " beside it)"
    )
    assert found["d"].message() == (
        "queue d: the children of d would have deserved cpu 3 in total, more than d's"
        " deserved cpu 2"
    )


def test_roots_children_may_be_guaranteed_anything_here() -> None:
    tree = QueueTree(cluster(q("a", guarantee={"cpu": "400"}), q("b", guarantee={"cpu": "400"})))
    assert list(rules.sums(tree)) == []


def test_violations_give_each_queue_its_first_breach_after_its_place_in_the_tree() -> None:
    tree = QueueTree(
        cluster(
            q("dept", capability={"cpu": "2"}),
            q("deep", "dept", capability={"cpu": "4"}, guarantee={"cpu": "-1"}),
            q("lost", "nowhere", capability={"cpu": "-1"}),
        )
    )
    assert rules.tree_violations(tree, max_queue_depth=1) == {
        "deep": "queue deep: the tree would be 2 levels deep under root"
        " (maximum 1, set by --max-queue-depth)",
        "lost": "queue lost: parent nowhere does not exist",
    }
    assert rules.tree_violations(tree, max_queue_depth=2)["deep"] == (
        "queue deep: guarantee.resource cpu -1 is negative; quantities must be >= 0"
    )
