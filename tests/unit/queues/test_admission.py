"""Every create/update/delete rule of design section 4, allowed and denied."""

from __future__ import annotations

import pytest
from queue_builders import cluster, q

from sluice.api.queue import Queue
from sluice.api.resources import Resources
from sluice.queues.admission import (
    ClusterFacts,
    check_queue_create,
    check_queue_delete,
    check_queue_update,
    job_facts_needed,
)
from sluice.queues.rules import tree_violations
from sluice.queues.tree import QueueTree

FACTS = ClusterFacts()


def test_a_plain_queue_under_root_is_allowed() -> None:
    assert check_queue_create(q("team"), cluster(), FACTS).allowed


def test_guarantee_must_not_exceed_deserved_nor_deserved_capability() -> None:
    v = check_queue_create(q("t", guarantee={"cpu": "6"}, deserved={"cpu": "4"}), cluster(), FACTS)
    assert (v.allowed, v.rule) == (False, "guarantee-over-deserved")
    assert v.message == (
        "queue t: guarantee cpu 6 exceeds its deserved cpu 4; guarantee must be <= deserved"
    )
    v = check_queue_create(
        q("t", deserved={"memory": "8Gi"}, capability={"memory": "4Gi"}), cluster(), FACTS
    )
    assert v.rule == "deserved-over-capability" and "deserved memory 8Gi" in v.message
    assert "capability memory 4Gi" in v.message


GI = 2**30 * 1000  # milli-units in a Gi

QUANTITY_MESSAGES = [
    (
        q("t", capability={"memory": "-512Mi"}),
        cluster(),
        "queue t: capability memory -512Mi is negative; quantities must be >= 0",
    ),
    (
        q("t", guarantee={"cpu": "750m"}, deserved={"cpu": "500m"}),
        cluster(),
        "queue t: guarantee cpu 750m exceeds its deserved cpu 500m; guarantee must be <= deserved",
    ),
    (
        q("t", deserved={"memory": "1.5Gi"}, capability={"memory": "1Gi"}),
        cluster(),
        "queue t: deserved memory 1536Mi exceeds its capability memory 1Gi;"
        " deserved must be <= capability",
    ),
    (
        q("b", "dept", guarantee={"memory": "6Gi"}),
        cluster(
            q("dept", guarantee={"memory": "8Gi"}), q("a", "dept", guarantee={"memory": "4Gi"})
        ),
        "queue b: the children of dept would have guarantee memory 10Gi in total,"
        " more than dept's guarantee memory 8Gi",
    ),
    (
        q("b", "dept", deserved={"cpu": "1500m"}),
        cluster(q("dept", deserved={"cpu": "2"}), q("a", "dept", deserved={"cpu": "1"})),
        "queue b: the children of dept would have deserved cpu 2500m in total,"
        " more than dept's deserved cpu 2",
    ),
    (
        q("b", "dept", capability={"cpu": "2500m", "memory": "16Gi"}),
        cluster(q("dept", capability={"cpu": "2", "memory": "8Gi"})),
        "queue b: capability cpu 2500m exceeds the capability cpu 2 of its ancestor dept",
    ),
]


@pytest.mark.parametrize(("new", "queues", "message"), QUANTITY_MESSAGES)
def test_refusals_write_quantities_as_kubernetes_does(
    new: Queue, queues: dict[str, Queue], message: str
) -> None:
    v = check_queue_create(new, queues, FACTS)
    assert (v.allowed, v.message) == (False, message)


def test_capability_and_warning_messages_write_memory_in_binary_units() -> None:
    queues = cluster(
        q("dept", capability={"memory": "8Gi"}), q("a", "dept", capability={"memory": "6Gi"})
    )
    v = check_queue_update(queues["dept"], q("dept", capability={"memory": "4Gi"}), queues, FACTS)
    assert v.message == (
        "queue dept: capability memory 4Gi is below the capability memory 6Gi of its descendant a"
    )
    facts = ClusterFacts(cluster_capacity=Resources({"memory": 64 * GI}))
    queues = cluster(q("a", guarantee={"memory": "32Gi"}))
    v = check_queue_create(q("b", guarantee={"memory": "48Gi"}), queues, facts)
    assert v.warnings == (
        "the guarantees of root's children add up to memory 80Gi, more than the cluster's"
        " current memory 64Gi; they cannot all be honoured",
        "queue b: guarantee memory 48Gi is more than its weighted share of the cluster's current"
        " capacity, memory 22906492245 (weight 1 of 3 under root); its siblings get less than"
        " their weights promise",
    )


def test_negative_quantities_are_refused() -> None:
    v = check_queue_create(q("t", capability={"cpu": "-1"}), cluster(), FACTS)
    assert v.rule == "negative-quantity" and "capability cpu -1" in v.message


def test_parent_must_exist_and_not_be_the_queue_itself() -> None:
    v = check_queue_create(q("t", "nowhere"), cluster(), FACTS)
    assert v.message == "queue t: parent nowhere does not exist"
    v = check_queue_create(q("t", "t"), cluster(), FACTS)
    assert v.rule == "parent-self"


def test_a_parent_change_that_makes_a_cycle_is_refused() -> None:
    queues = cluster(q("a"), q("b", "a"), q("c", "b"))
    v = check_queue_update(queues["a"], q("a", "c"), queues, FACTS)
    assert v.rule == "parent-cycle" and "would form a cycle through" in v.message


def test_depth_is_limited() -> None:
    queues = cluster(q("l1"), q("l2", "l1"), q("l3", "l2"))
    v = check_queue_create(q("l4", "l3"), queues, ClusterFacts(max_queue_depth=3))
    assert v.rule == "max-depth" and "4 levels deep" in v.message and "maximum 3" in v.message
    assert check_queue_create(q("l4", "l3"), queues, ClusterFacts(max_queue_depth=4)).allowed


def test_a_parent_that_holds_jobs_cannot_get_its_first_child() -> None:
    queues = cluster(q("team"))
    needed = job_facts_needed(None, q("sub", "team"), queues)
    assert needed == frozenset({"team"})
    v = check_queue_create(q("sub", "team"), queues, ClusterFacts(queues_holding_jobs=needed))
    assert v.rule == "parent-holds-jobs" and "parent team holds jobs" in v.message
    assert check_queue_create(q("sub", "team"), queues, FACTS).allowed


def test_children_guarantees_and_deserved_must_fit_the_parent() -> None:
    queues = cluster(
        q("dept", guarantee={"cpu": "4"}, deserved={"cpu": "8"}),
        q("a", "dept", guarantee={"cpu": "3"}),
    )
    v = check_queue_create(q("b", "dept", guarantee={"cpu": "2"}), queues, FACTS)
    assert v.rule == "guarantee-sum"
    assert v.message == (
        "queue b: the children of dept would have guarantee cpu 5 in total,"
        " more than dept's guarantee cpu 4"
    )
    v = check_queue_create(q("b", "dept", deserved={"cpu": "9"}), queues, FACTS)
    assert v.rule == "deserved-sum"
    assert check_queue_create(q("b", "dept", guarantee={"cpu": "1"}), queues, FACTS).allowed


def test_guarantees_must_fit_what_a_parent_without_one_can_ever_hold() -> None:
    # Two children guaranteed cpu 4 each under a parent capped at cpu 6 with no guarantee.
    queues = cluster(q("dept", capability={"cpu": "6"}), q("a", "dept", guarantee={"cpu": "4"}))
    v = check_queue_create(q("b", "dept", guarantee={"cpu": "4"}), queues, FACTS)
    assert v.rule == "guarantee-sum"
    assert v.message == (
        "queue b: the children of dept would have guarantee cpu 8 in total,"
        " more than all dept can ever hold, its capability cpu 6"
    )
    assert check_queue_create(q("b", "dept", guarantee={"cpu": "2"}), queues, FACTS).allowed


def test_what_a_parent_can_hold_is_its_real_capability_under_a_capped_ancestor() -> None:
    # org is capped at 10 and x's guarantee of 4 leaves dept at most 6, whatever dept's own
    # (larger, or absent) capability says.
    queues = cluster(
        q("org", capability={"cpu": "10"}),
        q("x", "org", guarantee={"cpu": "4"}),
        q("dept", "org"),
        q("a", "dept", guarantee={"cpu": "4"}),
    )
    v = check_queue_create(q("b", "dept", guarantee={"cpu": "4"}), queues, FACTS)
    assert v.message == (
        "queue b: the children of dept would have guarantee cpu 8 in total, more than all dept"
        " can ever hold, its realCapability cpu 6 (the capabilities above it less the"
        " guarantees beside it)"
    )
    # A change above that shrinks what dept can hold is refused for dept's children's sake.
    queues["b"] = q("b", "dept", guarantee={"cpu": "2"})
    v = check_queue_update(queues["x"], q("x", "org", guarantee={"cpu": "5"}), queues, FACTS)
    assert v.rule == "guarantee-sum" and v.message.startswith("queue x: the children of dept")
    v = check_queue_update(queues["org"], q("org", capability={"cpu": "9"}), queues, FACTS)
    assert v.rule == "guarantee-sum" and "realCapability cpu 5" in v.message
    assert check_queue_update(
        queues["org"], q("org", capability={"cpu": "12"}), queues, FACTS
    ).allowed


def test_a_parent_guarantee_bounds_only_the_resources_it_names() -> None:
    # dept guarantees GPUs only: its children's cpu guarantees fit what dept can hold.
    queues = cluster(
        q(
            "dept",
            guarantee={"nvidia.com/gpu": "4"},
            capability={"cpu": "8", "nvidia.com/gpu": "8"},
        ),
        q("a", "dept", guarantee={"cpu": "4", "nvidia.com/gpu": "2"}),
    )
    child = q("b", "dept", guarantee={"cpu": "4", "nvidia.com/gpu": "2"})
    assert check_queue_create(child, queues, FACTS).allowed
    v = check_queue_create(q("b", "dept", guarantee={"nvidia.com/gpu": "3"}), queues, FACTS)
    assert "more than dept's guarantee nvidia.com/gpu 4" in v.message
    v = check_queue_create(q("b", "dept", guarantee={"cpu": "5"}), queues, FACTS)
    assert "more than all dept can ever hold, its capability cpu 8" in v.message
    # Nothing caps an uncapped department under root: any guarantee can be honoured there.
    queues = cluster(q("free"), q("a", "free", guarantee={"cpu": "400"}))
    assert check_queue_create(q("b", "free", guarantee={"cpu": "400"}), queues, FACTS).allowed


def test_the_operator_marks_a_parent_whose_children_are_guaranteed_more_than_it_can_hold() -> None:
    queues = cluster(
        q("dept", capability={"cpu": "6"}),
        q("a", "dept", guarantee={"cpu": "4"}),
        q("b", "dept", guarantee={"cpu": "4"}),
    )
    assert tree_violations(QueueTree(queues), max_queue_depth=5) == {
        "dept": "queue dept: the children of dept would have guarantee cpu 8 in total,"
        " more than all dept can ever hold, its capability cpu 6"
    }


def test_a_parent_cannot_shrink_below_its_childrens_guarantees() -> None:
    queues = cluster(q("dept", guarantee={"cpu": "4"}), q("a", "dept", guarantee={"cpu": "3"}))
    v = check_queue_update(queues["dept"], q("dept", guarantee={"cpu": "2"}), queues, FACTS)
    assert v.rule == "guarantee-sum"


def test_root_children_guarantees_over_the_cluster_only_warn() -> None:
    facts = ClusterFacts(cluster_capacity=Resources({"cpu": 10_000}))
    queues = cluster(q("a", guarantee={"cpu": "8"}))
    v = check_queue_create(q("b", guarantee={"cpu": "4"}), queues, facts)
    assert v.allowed
    assert v.warnings == (
        "the guarantees of root's children add up to cpu 12, more than the cluster's current"
        " cpu 10; they cannot all be honoured",
        "queue b: guarantee cpu 4 is more than its weighted share of the cluster's current"
        " capacity, cpu 3333m (weight 1 of 3 under root); its siblings get less than their"
        " weights promise",
    )


def test_capability_within_the_nearest_ancestor_that_sets_it() -> None:
    queues = cluster(q("dept", capability={"cpu": "8"}), q("team", "dept"))
    v = check_queue_create(
        q("sub", "team", capability={"cpu": "10", "memory": "1Ti"}), queues, FACTS
    )
    assert v.rule == "capability-over-ancestor"
    assert "capability cpu 10 exceeds the capability cpu 8 of its ancestor dept" in v.message


def test_a_parent_capability_not_below_a_descendant() -> None:
    queues = cluster(q("dept", capability={"cpu": "8"}), q("team", "dept", capability={"cpu": "6"}))
    v = check_queue_update(queues["dept"], q("dept", capability={"cpu": "4"}), queues, FACTS)
    assert v.rule == "capability-under-descendant" and "descendant team" in v.message


def test_moving_a_subtree_under_a_capped_parent_checks_the_descendants_capability() -> None:
    queues = cluster(
        q("dept", capability={"cpu": "8"}),
        q("team"),
        q("sub", "team", capability={"cpu": "10", "memory": "8Gi"}),
    )
    v = check_queue_update(queues["team"], q("team", "dept"), queues, FACTS)
    assert v.rule == "capability-over-ancestor"
    assert v.message == (
        "queue team: its descendant sub has capability cpu 10, more than the capability cpu 8"
        " of dept"
    )
    # A queue in between that caps the resource shields the descendant from dept.
    capped = q("team", "dept", capability={"cpu": "8"})
    assert check_queue_update(queues["team"], capped, queues, FACTS).rule == (
        "capability-under-descendant"
    )
    assert check_queue_update(
        queues["team"],
        q("team", "dept"),
        cluster(
            q("dept", capability={"cpu": "8"}), q("team"), q("sub", "team", capability={"cpu": "8"})
        ),
        FACTS,
    ).allowed


def test_a_breach_already_in_the_tree_does_not_block_an_update_that_leaves_it_alone() -> None:
    # Stored before the webhooks: dept's children add up to cpu 6 against its guarantee of 4.
    queues = cluster(
        q("dept", guarantee={"cpu": "4"}),
        q("a", "dept", guarantee={"cpu": "6"}),
        q("b", "dept"),
    )
    assert check_queue_update(queues["b"], q("b", "dept", weight=3), queues, FACTS).allowed
    dept = q("dept", guarantee={"cpu": "4"}, weight=2)
    assert check_queue_update(queues["dept"], dept, queues, FACTS).allowed
    shrinking = q("a", "dept", guarantee={"cpu": "5"})
    assert check_queue_update(queues["a"], shrinking, queues, FACTS).allowed
    # Making the breach bigger, from any side, is still refused.
    v = check_queue_update(queues["b"], q("b", "dept", guarantee={"cpu": "1"}), queues, FACTS)
    assert v.rule == "guarantee-sum" and "guarantee cpu 7 in total" in v.message
    v = check_queue_update(queues["dept"], q("dept", guarantee={"cpu": "3"}), queues, FACTS)
    assert v.rule == "guarantee-sum" and "more than dept's guarantee cpu 3" in v.message
    assert not check_queue_create(q("c", "dept", guarantee={"cpu": "1"}), queues, FACTS).allowed
    # A queue that adds nothing to the sum may still join or leave the over-committed parent.
    assert check_queue_create(q("c", "dept"), queues, FACTS).allowed
    queues["c"] = q("c")
    assert check_queue_update(queues["c"], q("c", "dept"), queues, FACTS).allowed


def test_a_lowered_depth_limit_or_a_capability_breach_below_does_not_block_unrelated_edits() -> (
    None
):
    deep = cluster(q("l1"), q("l2", "l1"), q("l3", "l2"), q("l4", "l3"))
    facts = ClusterFacts(max_queue_depth=3)  # the tree was built under a limit of 4
    assert check_queue_update(deep["l1"], q("l1", weight=2), deep, facts).allowed
    deep["x"] = q("x")
    v = check_queue_update(deep["x"], q("x", "l3"), deep, facts)
    assert v.rule == "max-depth" and "4 levels deep" in v.message

    capped = cluster(q("dept", capability={"cpu": "4"}), q("team", "dept", capability={"cpu": "6"}))
    dept = q("dept", capability={"cpu": "4"}, weight=2)
    assert check_queue_update(capped["dept"], dept, capped, FACTS).allowed
    v = check_queue_update(capped["dept"], q("dept", capability={"cpu": "3"}), capped, FACTS)
    assert v.rule == "capability-under-descendant"


def test_root_and_default_keep_their_place() -> None:
    queues = cluster(q("x"))
    v = check_queue_update(queues["default"], q("default", "x"), queues, FACTS)
    assert v.rule == "reserved-parent"
    v = check_queue_update(queues["root"], q("root", state="Closed"), queues, FACTS)
    assert v.message == "queue root cannot be closed"


def test_parent_changes_only_while_the_queue_holds_no_jobs() -> None:
    queues = cluster(q("x"), q("y"), q("team", "x"))
    new = q("team", "y")
    needed = job_facts_needed(queues["team"], new, queues)
    assert "team" in needed
    holding = ClusterFacts(queues_holding_jobs=frozenset({"team"}))
    v = check_queue_update(queues["team"], new, queues, holding)
    assert v.rule == "parent-change-with-jobs"
    assert check_queue_update(queues["team"], new, queues, FACTS).allowed


def test_a_child_cannot_be_opened_under_a_closed_parent() -> None:
    queues = cluster(q("dept", state="Closed"), q("team", "dept", state="Closed"))
    v = check_queue_update(queues["team"], q("team", "dept", state="Open"), queues, FACTS)
    assert v.rule == "parent-closed"
    assert v.message == "queue team cannot be Open while its parent dept is Closed; open dept first"


def test_no_queue_is_opened_under_a_closed_ancestor_but_an_open_one_can_still_be_edited() -> None:
    # dept is closed; the cascade has not reached team yet.
    queues = cluster(q("dept", state="Closed"), q("team", "dept"))
    v = check_queue_create(q("sub", "team"), queues, FACTS)
    assert v.rule == "parent-closed"
    assert (
        v.message == "queue sub cannot be Open while its ancestor dept is Closed; open dept first"
    )
    assert check_queue_create(q("sub", "team", state="Closed"), queues, FACTS).allowed
    assert check_queue_update(queues["team"], q("team", "dept", weight=2), queues, FACTS).allowed
    queues["x"] = q("x")
    assert check_queue_update(queues["x"], q("x", "team"), queues, FACTS).rule == "parent-closed"


def test_metadata_only_updates_are_never_blocked() -> None:
    # A tree already broken (children over the parent) must still accept annotations.
    queues = cluster(q("dept", guarantee={"cpu": "1"}), q("a", "dept", guarantee={"cpu": "3"}))
    assert check_queue_update(queues["a"], queues["a"], queues, FACTS).allowed


def test_only_closed_queues_can_be_deleted_and_never_root_or_default() -> None:
    queues = cluster(
        q("open", status="Open"), q("closing", status="Closing"), q("gone", status="Closed")
    )
    assert check_queue_delete(queues["gone"]).allowed
    v = check_queue_delete(queues["closing"])
    assert v.rule == "delete-not-closed" and "queue closing is Closing" in v.message
    assert check_queue_delete(queues["root"]).message == "queue root cannot be deleted"
    assert not check_queue_delete(q("default", status="Closed")).allowed


def test_tree_violations_name_the_queue_to_fix() -> None:
    queues = cluster(
        q("dept", guarantee={"cpu": "1"}),
        q("a", "dept", guarantee={"cpu": "3"}),
        q("deep1"),
        q("deep2", "deep1"),
        q("lost", "nowhere"),
    )
    found = tree_violations(QueueTree(queues), max_queue_depth=1)
    assert set(found) == {"dept", "a", "deep2", "lost"}
    assert "children of dept" in found["dept"]
    assert "2 levels deep" in found["deep2"]
    assert found["lost"] == "queue lost: parent nowhere does not exist"
