"""The size a workload is admitted at when its whole size does not fit (docs/elastic.md,
*Admitted smaller*).

Pure: what fits is a predicate the caller gives (its quota and its placement on the nodes),
asked about a size per pod set. The search asks it about the whole size first, then the
minimum, then bisects between them, so a workload of a thousand pods costs a dozen
questions, not a thousand. It rests on what fits being monotone: a workload that fits at a
size fits at every smaller one, which holds for quota (requests only add up) and for
placement (fewer pods of the same shapes place wherever more did).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from sluice.api.admitted_size import SizeRecord
from sluice.api.resources import Resources
from sluice.api.views import PodSet, WorkloadView, as_asked

Sizes = tuple[int, ...]
"""A count of pods per pod set, in the workload's order."""


@dataclass(frozen=True, slots=True)
class SizeRange:
    """The sizes one pod set may be admitted at: ``min_count`` to ``count`` pods, in steps of
    ``step`` pods (a Ray worker group's replica of numOfHosts pods)."""

    count: int
    min_count: int
    step: int = 1

    @property
    def span(self) -> int:
        """How many steps it may give up."""
        return (self.count - self.min_count) // self.step


def ranges_of(pod_sets: Sequence[PodSet]) -> tuple[SizeRange, ...]:
    return tuple(SizeRange(s.count, s.min_count, s.count_step) for s in pod_sets)


def view_at(view: WorkloadView, sizes: Sizes, request: Resources | None = None) -> WorkloadView:
    """The workload as admitted at ``sizes``, for ``fits`` to test as it tests a whole one:
    each pod set at its size (starting no more pods than before), the request theirs plus
    the claims its pods name directly, which count once whatever the size."""
    if all(s.count == n for s, n in zip(view.pod_sets, sizes, strict=True)):
        return view
    pod_sets = tuple(
        s if s.count == n else replace(s, count=n, pod_count=min(n, s.pod_count))
        for s, n in zip(view.pod_sets, sizes, strict=True)
    )
    asked = request if request is not None else request_at(view, sizes)
    return replace(view, pod_sets=pod_sets, request=asked)


def request_at(view: WorkloadView, sizes: Sizes) -> Resources:
    """What the workload asks at ``sizes``: its pod sets' requests at those sizes plus the
    claims its pods name directly, which count once whatever the size (``view_at``'s,
    which may be given it when it is known already)."""
    out = dict(view.claimed.amounts)
    for pod_set, n in zip(view.pod_sets, sizes, strict=True):
        for r, a in pod_set.pod.request.amounts.items():
            out[r] = out.get(r, 0) + a * n
    return Resources(out)


def smallest_request(request: Resources, pod_sets: Sequence[PodSet]) -> Resources:
    """What a workload asking ``request`` asks at its minimums: without the pods of each pod
    set above its minimum. What no admission of it can ask less than."""
    for s in pod_sets:
        if s.resizable:
            request = request - s.pod.request.scale(s.count - s.min_count)
    return request


def admitted_smaller(view: WorkloadView, sizes: Sequence[tuple[str, int, int]]) -> WorkloadView:
    """The workload once the operator wrote its admission at ``sizes`` (a decision's: per pod
    set admitted smaller, its name, pods asked and admitted): its pod sets at those sizes,
    and the record of them."""
    if not sizes:
        return view
    admitted = {name: n for name, _, n in sizes}
    smaller = view_at(view, tuple(admitted.get(s.name, s.count) for s in view.pod_sets))
    return replace(smaller, sized=tuple(SizeRecord(n, asked, a) for n, asked, a in sizes))


def whole_sizes(view: WorkloadView) -> tuple[tuple[str, int, int], ...]:
    """What the admission of a resizable workload at its whole size carries: per pod set
    that may shrink or declares its minimum (one equal to its size too), (its name, pods
    asked, pods admitted), equal. The record written from it is what its gated pods are
    released up to and its growth is counted from (docs/elastic.md, *Grown through the
    queue*)."""
    return tuple((s.name, s.count, s.count) for s in view.pod_sets if s.resizable or s.min_declared)


def restored(view: WorkloadView) -> WorkloadView:
    """A suspended workload once the operator gave it the sizes it asked back."""
    if not view.sized:
        return view
    pod_sets = as_asked(view.pod_sets, view.sized)
    whole = view_at(view, tuple(s.count for s in pod_sets))
    return replace(whole, pod_sets=pod_sets, sized=())


def sizes_at(ranges: Sequence[SizeRange], cut: int) -> Sizes:
    """The sizes after giving up ``cut`` of the workload's steps (0: whole; the sum of the
    spans: every pod set at its minimum). Each pod set keeps its share of what is left, in
    proportion to its span, rounded down: pod sets shrink together, none to its minimum
    while another is untouched, and a larger ``cut`` never makes any pod set larger."""
    total = sum(r.span for r in ranges)
    if total == 0:
        return tuple(r.count for r in ranges)
    left = total - cut
    return tuple(r.min_count + (r.span * left // total) * r.step for r in ranges)


def smallest_passing(low: int, high: int, passes: Callable[[int], bool]) -> int:
    """The smallest n in (low, high] for which ``passes`` holds, given that it fails at
    ``low``, holds at ``high``, and once it holds it holds for every larger n."""
    while high - low > 1:
        middle = (low + high) // 2
        if passes(middle):
            high = middle
        else:
            low = middle
    return high


def shrink_to_fit(ranges: Sequence[SizeRange], fits: Callable[[Sizes], bool]) -> Sizes | None:
    """The largest sizes at or above the minimums that ``fits`` takes, along the path on
    which pod sets shrink together (``sizes_at``); the whole sizes when they fit, and only
    then anything smaller; None when even the minimums do not fit."""
    if fits(sizes_at(ranges, 0)):
        return sizes_at(ranges, 0)
    total = sum(r.span for r in ranges)
    if total == 0 or not fits(sizes_at(ranges, total)):
        return None
    cut = smallest_passing(0, total, lambda c: fits(sizes_at(ranges, c)))
    return sizes_at(ranges, cut)
