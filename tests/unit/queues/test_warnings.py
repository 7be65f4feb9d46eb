"""Weighted shares behind the guarantee warning: level by level from root, broken chains
give no warning rather than a wrong one."""

from __future__ import annotations

from typing import Any

from sluice.api.queue import Queue
from sluice.api.resources import Resources
from sluice.queues.tree import QueueTree
from sluice.queues.warnings import share_warnings, weighted_share


def q(name: str, parent: str | None = "root", weight: int = 1, **spec: Any) -> Queue:
    body: dict[str, Any] = {"weight": weight, **spec}
    if parent is not None:
        body["parent"] = parent
    return Queue.from_object({"metadata": {"name": name}, "spec": body})


def tree(*queues: Queue) -> dict[str, Queue]:
    return {x.name: x for x in (q("root", parent=None), q("default"), *queues)}


CAPACITY = Resources({"cpu": 8000, "nvidia.com/gpu": 4000})


def test_shares_split_by_weight_at_every_level() -> None:
    queues = tree(q("dept"), q("t1", "dept"), q("t2", "dept", weight=3))
    built = QueueTree.build(queues)
    assert weighted_share(built, "dept", CAPACITY) == {"cpu": 4000, "nvidia.com/gpu": 2000}
    assert weighted_share(built, "t2", CAPACITY) == {"cpu": 3000, "nvidia.com/gpu": 1500}


def test_a_queue_cut_off_from_root_has_no_share() -> None:
    queues = tree(q("orphan", "missing"))
    assert weighted_share(QueueTree.build(queues), "orphan", CAPACITY) is None
    greedy = q("orphan", "missing", guarantee={"resource": {"cpu": "8"}})
    assert share_warnings(greedy, queues, CAPACITY) == ()


def test_only_guaranteed_resources_over_the_share_are_named() -> None:
    new = q("t1", "dept", guarantee={"resource": {"cpu": "1", "nvidia.com/gpu": "2"}})
    warnings = share_warnings(new, tree(q("dept"), q("t2", "dept", weight=3)), CAPACITY)
    assert warnings == (
        "queue t1: guarantee nvidia.com/gpu 2 is more than its weighted share of the cluster's"
        " current capacity, nvidia.com/gpu 500m (weight 1 of 4 under dept); its siblings get"
        " less than their weights promise",
    )


def test_unknown_capacity_warns_about_nothing() -> None:
    new = q("t1", guarantee={"resource": {"cpu": "100"}})
    assert share_warnings(new, tree(), None) == ()


def test_a_memory_share_is_written_in_whole_bytes_never_in_milli_units() -> None:
    capacity = Resources({"cpu": 12_000, "memory": 64 * 2**30 * 1000, "hugepages-2Mi": 11_000})
    spec = {"guarantee": {"resource": {"memory": "20Gi", "hugepages-2Mi": "4"}}}
    warnings = share_warnings(q("b", **spec), tree(q("a", weight=3)), capacity)
    # root's children: default (weight 1), a (3) and b (1); b's share is a fifth.
    assert [w.split(", ")[1].split(" (")[0] for w in warnings] == [
        "hugepages-2Mi 2",
        "memory 13743895347",
    ]
