"""A queue's figures per flavor after the cycle (QueueResult.flavors), as its status, the
queue tree, the FLAVORS column and the metrics show them."""

from __future__ import annotations

from builders import queue
from test_flavor_choice import BORROWER, CAPACITY, GPU, cycle, entry, gpus, holding

from sluice.api.resources import Resources
from sluice.scheduler.model import FlavorFigures


def test_each_flavor_of_the_list_carries_allocated_deserved_and_real_capability() -> None:
    held = holding(gpus("held", 1, 2), "h100")
    result = cycle([BORROWER], [held, gpus("j", 1, 1)], **CAPACITY)
    figures = result.queues["team-a"].flavors
    assert [f.name for f in figures] == ["h100", "a100"]
    h100, a100 = figures
    assert h100.allocated[GPU] == 3000  # the held 2 and the admitted 1
    assert h100.deserved[GPU] == 4000
    assert h100.real_capability[GPU] == 16000  # the two H100 nodes
    assert a100.allocated == Resources()
    assert a100.deserved[GPU] == 8000
    assert h100.summary() == "h100 nvidia.com/gpu 3/4"
    assert a100.summary() == "a100 nvidia.com/gpu 0/8"


def test_a_child_without_entries_shows_what_it_holds_in_its_parents_flavors() -> None:
    org = queue("org", flavors=[entry("h100", deserved={GPU: "8"})])
    child = queue("team-b", "org")
    held = holding(gpus("held", 1, 2, queue_name="team-b"), "h100")
    result = cycle([org, child], [held], **CAPACITY)
    assert result.queues["org"].flavors[0].allocated[GPU] == 2000
    (figure,) = result.queues["team-b"].flavors
    assert figure == FlavorFigures("h100", Resources({GPU: 2000}), named=False)
    assert figure.summary() == "h100 nvidia.com/gpu 2"


def test_a_queue_without_flavors_has_no_figures() -> None:
    result = cycle([queue("team-a")], [gpus("j", 1, 1)], flavors=())
    assert result.queues["team-a"].flavors == ()
