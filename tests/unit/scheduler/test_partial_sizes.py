"""The largest size at or above its minimum a workload fits at, found by bisection over a
fits(sizes) predicate (docs/elastic.md, *Admitted smaller*)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from sluice.api.constraints import PodSpecView
from sluice.api.resources import Resources
from sluice.api.views import JobPhase, PodSet, WorkloadView
from sluice.scheduler.partial import SizeRange, ranges_of, shrink_to_fit, sizes_at, view_at

Sizes = tuple[int, ...]


def counting(fits: Callable[[Sizes], bool]) -> tuple[Callable[[Sizes], bool], list[Sizes]]:
    """``fits``, and the list of sizes it was asked about."""
    asked: list[Sizes] = []

    def wrapped(sizes: Sizes) -> bool:
        asked.append(sizes)
        return fits(sizes)

    return wrapped, asked


def at_most(pods: int) -> Callable[[Sizes], bool]:
    return lambda sizes: sum(sizes) <= pods


def test_the_whole_size_is_taken_when_it_fits_and_nothing_else_is_tried() -> None:
    fits, asked = counting(at_most(8))
    assert shrink_to_fit((SizeRange(8, 4),), fits) == (8,)
    assert asked == [(8,)]


def test_the_largest_size_that_fits_is_found() -> None:
    assert shrink_to_fit((SizeRange(8, 4),), at_most(6)) == (6,)
    assert shrink_to_fit((SizeRange(8, 4),), at_most(4)) == (4,)
    assert shrink_to_fit((SizeRange(8, 1),), at_most(1)) == (1,)


def test_nothing_when_even_the_minimum_does_not_fit() -> None:
    fits, asked = counting(at_most(3))
    assert shrink_to_fit((SizeRange(8, 4),), fits) is None
    assert asked == [(8,), (4,)]


def test_a_workload_that_cannot_shrink_is_tried_whole_only() -> None:
    fits, asked = counting(at_most(5))
    assert shrink_to_fit((SizeRange(8, 8), SizeRange(1, 1)), fits) is None
    assert asked == [(8, 1)]


def test_sizes_move_in_steps_of_a_replica() -> None:
    # A Ray worker group of 3 replicas of 2 hosts, at least 1 replica: 6, 4 or 2 pods.
    assert shrink_to_fit((SizeRange(6, 2, 2),), at_most(5)) == (4,)
    assert shrink_to_fit((SizeRange(6, 2, 2),), at_most(3)) == (2,)
    assert sizes_at((SizeRange(6, 2, 2),), 1) == (4,)


def test_pod_sets_shrink_together_by_their_share_and_fixed_ones_stay_whole() -> None:
    ranges = (SizeRange(1, 1), SizeRange(8, 4), SizeRange(4, 2))
    # Spans 0, 4 and 2: the largest pod set gives up twice as many pods as the other.
    assert sizes_at(ranges, 0) == (1, 8, 4)
    assert sizes_at(ranges, 3) == (1, 6, 3)
    assert sizes_at(ranges, 6) == (1, 4, 2)
    found = shrink_to_fit(ranges, at_most(10))
    assert found == (1, 6, 3)


def test_the_search_asks_about_logarithmically_many_sizes() -> None:
    fits, asked = counting(at_most(700))
    assert shrink_to_fit((SizeRange(1024, 1),), fits) == (700,)
    # Whole, minimum, then bisection over 1023 cuts: at most 2 + 10 questions.
    assert len(asked) <= 12


@pytest.mark.parametrize("seed", range(40))
def test_bisection_finds_what_a_scan_of_every_cut_finds(seed: int) -> None:
    rng = random.Random(seed)
    ranges = []
    for _ in range(rng.randint(1, 3)):
        step = rng.choice((1, 1, 2, 4))
        count = step * rng.randint(1, 12)
        ranges.append(SizeRange(count, step * rng.randint(0, count // step), step))
    room = rng.randint(0, sum(r.count for r in ranges))
    total = sum(r.span for r in ranges)
    fitting = [cut for cut in range(total + 1) if sum(sizes_at(ranges, cut)) <= room]
    expected = sizes_at(ranges, min(fitting)) if fitting else None
    assert shrink_to_fit(ranges, at_most(room)) == expected


def test_ranges_of_pod_sets_read_their_minimum_and_step() -> None:
    pod = PodSpecView(Resources({"cpu": 1000}))
    sets = (
        PodSet("head", 1, pod),
        PodSet("workers", 6, pod, min_count=2, count_step=2),
    )
    assert ranges_of(sets) == (SizeRange(1, 1, 1), SizeRange(6, 2, 2))


def workload(claimed: Resources | None = None) -> WorkloadView:
    one = PodSpecView(Resources({"cpu": 1000}))
    two = PodSpecView(Resources({"cpu": 2000}))
    sets = (
        PodSet("head", 1, one),
        PodSet("workers", 6, two, pod_count=5, min_count=2, count_step=2),
    )
    request = Resources({"cpu": 13000})
    extra = claimed or Resources({})
    return WorkloadView(
        "ns", "ray", "team", request + extra, JobPhase.PENDING, pod_sets=sets, claimed=extra
    )


def test_a_view_at_smaller_sizes_asks_for_those_pods_only() -> None:
    smaller = view_at(workload(), (1, 4))
    assert [(s.name, s.count, s.pod_count) for s in smaller.pod_sets] == [
        ("head", 1, 1),
        ("workers", 4, 4),
    ]
    assert smaller.request == Resources({"cpu": 9000})
    assert smaller.pod_count == 5
    assert smaller.pod_sets[1].min_count == 2 and smaller.pod_sets[1].count_step == 2


def test_a_view_at_smaller_sizes_keeps_its_claims_counted_once() -> None:
    gpus = Resources({"example.com/gpu": 8000})
    smaller = view_at(workload(gpus), (1, 2))
    assert smaller.request == Resources({"cpu": 5000, "example.com/gpu": 8000})


def test_a_view_at_its_own_sizes_is_itself() -> None:
    whole = workload()
    assert view_at(whole, (1, 6)) is whole
