"""A pod set as a workload of its own (``set_domains.alone``) is remembered in a memo table,
so ``memo.uncached`` turns it off as it does every other table."""

from __future__ import annotations

from builders import res

from sluice.api import memo
from sluice.api.constraints import PodSpecView
from sluice.api.topology import TopologyRequest
from sluice.api.views import PodSet
from sluice.scheduler.set_domains import alone

POD_SET = PodSet(
    "workers", 4, PodSpecView(res(cpu=1)), topology=TopologyRequest("rack", required=True)
)


def test_alone_is_remembered_per_pod_set() -> None:
    assert alone(POD_SET) is alone(POD_SET)


def test_uncached_makes_alone_anew_each_time_and_the_same_view() -> None:
    remembered = alone(POD_SET)
    with memo.uncached():
        fresh = alone(POD_SET)
        assert fresh is not remembered and fresh is not alone(POD_SET)
        assert fresh == remembered
    assert alone(POD_SET) is remembered  # the table is back as it was
