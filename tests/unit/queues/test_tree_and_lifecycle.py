"""The queue tree, derived states and the cascades, including property-based checks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from queue_builders import cluster, q

from sluice.api.constants import CLOSED_BY_PARENT_ANNOTATION
from sluice.api.queue import Queue
from sluice.queues import rules
from sluice.queues.admission import (
    ClusterFacts,
    check_queue_create,
    check_queue_update,
)
from sluice.queues.defaults import queue_with_defaults
from sluice.queues.lifecycle import derive_states, lifecycle_actions
from sluice.queues.rules import tree_violations
from sluice.queues.tree import QueueTree


def test_tree_walks() -> None:
    t = QueueTree(cluster(q("d"), q("a", "d"), q("b", "d"), q("x", "a")))
    assert t.ancestors("x") == ("a", "d", "root")
    assert t.depth("x") == 3 and t.depth("root") == 0
    assert t.children("d") == ("a", "b")
    assert t.descendants("d") == ("a", "x", "b")
    assert t.is_leaf("x") and not t.is_leaf("d")


def test_broken_trees_are_recorded_not_raised() -> None:
    t = QueueTree(cluster(q("p", "r"), q("r", "p"), q("orphan", "gone")))
    problems = t.problems()
    assert "cycle" in problems["p"] and "cycle" in problems["r"]
    assert problems["orphan"] == "queue orphan: parent gone does not exist"
    assert "root" not in problems


def test_closed_queue_is_closing_while_a_descendant_has_unfinished_jobs() -> None:
    t = QueueTree(cluster(q("d", state="Closed"), q("a", "d", state="Closed"), q("b", "d")))
    states = derive_states(t, {"a": 1})
    assert states["d"] == "Closing" and states["a"] == "Closing"
    assert states["b"] == "Closed"  # still spec Open, but its parent is closed and it is idle
    assert derive_states(t, {})["d"] == "Closed"
    assert states["root"] == "Open" and states["default"] == "Open"


def test_cascade_close_and_reopen_exactly_those_closed_by_the_parent() -> None:
    closed_by_hand = q("b", "d", state="Closed")
    t = QueueTree(cluster(q("d", state="Closed"), q("a", "d"), closed_by_hand))
    assert [(a.action, a.queue, a.reason) for a in lifecycle_actions(t)] == [("close", "a", "d")]

    closed_a = Queue.from_object(
        {
            "metadata": {"name": "a", "annotations": {CLOSED_BY_PARENT_ANNOTATION: "d"}},
            "spec": {"parent": "d", "state": "Closed"},
        }
    )
    reopened = QueueTree(cluster(q("d"), closed_a, closed_by_hand))
    assert [(a.action, a.queue) for a in lifecycle_actions(reopened)] == [("reopen", "a")]


def test_deleting_a_parent_deletes_its_subtree_deepest_first() -> None:
    deleting = Queue.from_object(
        {"metadata": {"name": "d", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": {}}
    )
    t = QueueTree(cluster(deleting, q("a", "d"), q("x", "a"), q("b", "d")))
    assert [(a.action, a.queue) for a in lifecycle_actions(t)] == [
        ("delete", "b"),
        ("delete", "x"),
        ("delete", "a"),
    ]


def test_missing_root_and_default_are_created_root_first() -> None:
    actions = lifecycle_actions(QueueTree({"a": q("a")}))
    assert [(a.action, a.queue) for a in actions] == [("create", "root"), ("create", "default")]


def test_defaults_fill_every_field_but_never_give_root_a_parent() -> None:
    filled = queue_with_defaults({"metadata": {"name": "t"}, "spec": {"weight": 3}})
    assert filled["spec"] == {
        "weight": 3,
        "reclaimable": True,
        "state": "Open",
        "dequeueStrategy": "traverse",
        "parent": "root",
    }
    assert "parent" not in queue_with_defaults({"metadata": {"name": "root"}})["spec"]


# Properties -------------------------------------------------------------------------------

names = st.sampled_from([f"q{i}" for i in range(8)])


@st.composite
def trees(draw: st.DrawFn) -> tuple[dict[str, Queue], dict[str, int]]:
    queues: dict[str, Queue] = {"root": q("root")}
    for name in draw(st.lists(names, unique=True, max_size=8)):
        parent = draw(st.sampled_from(sorted(queues)))
        state = draw(st.sampled_from(["Open", "Closed"]))
        queues[name] = q(name, parent, state=state)
    jobs = draw(st.dictionaries(st.sampled_from(sorted(queues)), st.integers(0, 3)))
    return queues, jobs


@settings(max_examples=200, deadline=None)
@given(trees())
def test_never_closed_while_a_descendant_has_unfinished_jobs(
    case: tuple[dict[str, Queue], dict[str, int]],
) -> None:
    queues, jobs = case
    tree = QueueTree(queues)
    states = derive_states(tree, jobs)
    for name, state in states.items():
        if state == "Closed":
            assert jobs.get(name, 0) == 0
            assert all(jobs.get(d, 0) == 0 for d in tree.descendants(name))
            assert all(states[d] == "Closed" for d in tree.descendants(name))


quantities = st.integers(0, 16).map(str)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(names, names, quantities, quantities, st.booleans()), max_size=10))
def test_a_tree_built_through_the_rules_keeps_the_sum_invariants(
    steps: list[tuple[str, str, str, str, bool]],
) -> None:
    existing: dict[str, Queue] = {"root": q("root")}
    for name, parent, guarantee, deserved, under_root in steps:
        new = q(
            name,
            "root" if under_root or parent not in existing else parent,
            guarantee={"cpu": guarantee},
            deserved={"cpu": deserved},
        )
        if check_queue_create(new, existing, ClusterFacts()).allowed:
            existing[name] = new
    tree = QueueTree(existing)
    for parent in existing:
        kids = tree.children(parent)
        if parent == "root" or not kids:
            continue
        spec = existing[parent].spec
        total_g = sum(existing[k].spec.guarantee.resource.get_amount("cpu") for k in kids)
        total_d = sum(existing[k].spec.deserved.get_amount("cpu") for k in kids)
        # A map the parent does not set (or sets to zero) does not constrain its children.
        if spec.guarantee.resource:
            assert total_g <= spec.guarantee.resource.get_amount("cpu")
        if spec.deserved:
            assert total_d <= spec.deserved.get_amount("cpu")


caps = st.sampled_from([None, "2", "8"])
small = st.sampled_from(["0", "1", "2"])


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_updates_the_rules_allow_keep_a_valid_tree_valid(data: st.DataObject) -> None:
    """Creates build a valid tree; then moves and edits of capability and guarantee that the
    rules allow never leave a queue the operator would mark invalid, and those they refuse
    for a rule between queues break that rule as the catalogue finds it."""
    facts = ClusterFacts(max_queue_depth=3)

    def build(name: str, parent: str) -> Queue:
        spec: dict[str, object] = {"guarantee": {"cpu": data.draw(small)}}
        if (cap := data.draw(caps)) is not None:
            spec["capability"] = {"cpu": cap}
        return q(name, parent, **spec)

    existing: dict[str, Queue] = {"root": q("root")}
    for name in data.draw(st.lists(names, unique=True, max_size=6)):
        new = build(name, data.draw(st.sampled_from(sorted(existing))))
        if check_queue_create(new, existing, facts).allowed:
            existing[name] = new
    assert tree_violations(QueueTree(existing), facts.max_queue_depth) == {}
    movable = sorted(set(existing) - {"root"})
    for _ in range(data.draw(st.integers(0, 6)) if movable else 0):
        name = data.draw(st.sampled_from(movable))
        new = build(name, data.draw(st.sampled_from(sorted(existing))))
        verdict = check_queue_update(existing[name], new, existing, facts)
        after = QueueTree({**existing, name: new})
        found = rules.breaches(after, facts.max_queue_depth) if not after.problems() else []
        if verdict.allowed:
            assert found == []
            existing[name] = new
        elif verdict.rule in CATALOGUE_RULES:
            # Refused for a rule of the catalogue: the catalogue finds it, said the same way.
            assert verdict in [b.refusal(name) for b in found]
        assert tree_violations(QueueTree(existing), facts.max_queue_depth) == {}


CATALOGUE_RULES = {"max-depth", "capability-over-ancestor", "capability-under-descendant"} | {
    "guarantee-sum",
    "deserved-sum",
}
