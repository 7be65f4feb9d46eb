"""Which flavors a queue's workloads may be given, in order (sluice/queues/flavors.py)."""

from __future__ import annotations

from queue_builders import q

from sluice.queues.flavors import flavor_list
from sluice.queues.tree import QueueTree

GPU = "nvidia.com/gpu"


def tree() -> QueueTree:
    return QueueTree(
        {
            "root": q("root"),
            "org": q("org", flavors=[{"name": "h100"}, {"name": "a100"}]),
            "team": q("team", "org"),
            "sub": q("sub", "team"),
            "own": q("own", "org", flavors=[{"name": "a100", "capability": {GPU: "4"}}]),
            "plain": q("plain"),
        }
    )


def test_a_queue_uses_its_own_list_in_its_order() -> None:
    assert flavor_list(tree(), "org") == ("h100", "a100")
    assert flavor_list(tree(), "own") == ("a100",)


def test_a_queue_without_flavors_takes_its_nearest_ancestors_list() -> None:
    assert flavor_list(tree(), "team") == ("h100", "a100")
    assert flavor_list(tree(), "sub") == ("h100", "a100")


def test_a_queue_with_no_flavors_above_it_has_none() -> None:
    assert flavor_list(tree(), "plain") == ()
    assert flavor_list(tree(), "root") == ()
    assert flavor_list(tree(), "missing") == ()


def test_a_flavor_listed_twice_is_tried_once_at_its_first_place() -> None:
    twice = QueueTree(
        {
            "root": q("root"),
            "t": q("t", flavors=[{"name": "h100"}, {"name": "a100"}, {"name": "h100"}]),
        }
    )
    assert flavor_list(twice, "t") == ("h100", "a100")
