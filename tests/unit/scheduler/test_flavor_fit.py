"""Which flavors a pod set may be given by what its pods select (sluice/scheduler/flavor_fit.py)."""

from __future__ import annotations

import pytest
from builders import node

from sluice.api.constraints import NodeRequirement, PodSpecView, Toleration
from sluice.api.constraints import Taint as NodeTaint
from sluice.api.flavor import FlavorView, Taint
from sluice.api.resources import Resources
from sluice.scheduler.flavor_fit import flavor_refusal, flavors_for, in_flavor
from sluice.scheduler.placement import refusal

MODEL = "gpu.example.com/model"
POOL = "pool"
H100 = FlavorView("h100", {MODEL: "H100"}, (Taint("nvidia.com/gpu", "present", "NoSchedule"),))
A100 = FlavorView("a100", {MODEL: "A100"})
SPOT_H100 = FlavorView("spot-h100", {MODEL: "H100", POOL: "spot"})
ANY = FlavorView("any", {})


def with_affinity(*terms: tuple[NodeRequirement, ...]) -> PodSpecView:
    return PodSpecView(Resources(), affinity=terms)


def req(key: str, operator: str, *values: str, on_field: bool = False) -> NodeRequirement:
    return NodeRequirement(key, operator, values, on_field)


def test_a_pod_that_selects_nothing_may_be_given_every_flavor_in_order() -> None:
    may, refused = flavors_for(PodSpecView(Resources()), [H100, A100, ANY])
    assert [f.name for f in may] == ["h100", "a100", "any"]
    assert refused == ()


def test_a_node_selector_on_the_flavor_key_keeps_only_the_flavors_it_names() -> None:
    pod = PodSpecView(Resources(), node_selector=((MODEL, "A100"),))
    may, refused = flavors_for(pod, [H100, A100, SPOT_H100, ANY])
    assert [f.name for f in may] == ["a100", "any"]
    assert [name for name, _ in refused] == ["h100", "spot-h100"]
    assert refused[0][1] == (f"flavor h100 has {MODEL}=H100, its nodeSelector asks {MODEL}=A100")


def test_keys_the_flavor_does_not_set_are_left_to_placement() -> None:
    pod = PodSpecView(Resources(), node_selector=(("zone", "a"), (POOL, "spot")))
    assert flavor_refusal(pod, H100) is None
    assert flavor_refusal(pod, SPOT_H100) is None
    assert flavor_refusal(pod, FlavorView("reserved", {POOL: "reserved"})) is not None


def test_taints_do_not_rule_a_flavor_out() -> None:
    # The pods admitted into a flavor are given tolerations for its taints.
    assert flavor_refusal(PodSpecView(Resources()), H100) is None
    tolerating = PodSpecView(Resources(), tolerations=(Toleration("other", "Exists"),))
    assert flavor_refusal(tolerating, H100) is None


@pytest.mark.parametrize(
    ("requirement", "h100", "a100"),
    [
        (req(MODEL, "In", "H100", "H200"), True, False),
        (req(MODEL, "NotIn", "H100"), False, True),
        (req(MODEL, "Exists"), True, True),
        (req(MODEL, "DoesNotExist"), False, False),
        (req("other", "DoesNotExist"), True, True),
        (req("metadata.name", "In", "node-1", on_field=True), True, True),
    ],
)
def test_required_affinity_on_the_flavor_keys(
    requirement: NodeRequirement, h100: bool, a100: bool
) -> None:
    pod = with_affinity((requirement,))
    assert (flavor_refusal(pod, H100) is None) is h100
    assert (flavor_refusal(pod, A100) is None) is a100


def test_affinity_numbers_compare_as_integers() -> None:
    memory = FlavorView("big", {"gpu.example.com/memory": "80"})
    assert (
        flavor_refusal(with_affinity((req("gpu.example.com/memory", "Gt", "40"),)), memory) is None
    )
    assert flavor_refusal(with_affinity((req("gpu.example.com/memory", "Lt", "40"),)), memory)


def test_one_affinity_term_that_may_hold_is_enough() -> None:
    pod = with_affinity((req(MODEL, "In", "A100"),), (req(MODEL, "In", "H100"),))
    assert flavor_refusal(pod, H100) is None
    assert flavor_refusal(pod, A100) is None
    both = with_affinity(
        (req(MODEL, "In", "H100"), req(POOL, "In", "on-demand")),
    )
    assert flavor_refusal(both, H100) is None
    assert flavor_refusal(both, SPOT_H100) == (
        f"flavor spot-h100 has {MODEL}=H100, {POOL}=spot, which its node affinity rules out"
    )


def test_an_empty_affinity_term_is_not_the_flavors_to_refuse() -> None:
    assert flavor_refusal(with_affinity(()), H100) is None


def test_a_flavor_of_every_node_refuses_nothing() -> None:
    pod = with_affinity((req(MODEL, "In", "A100"),))
    assert flavor_refusal(pod, ANY) is None
    assert flavor_refusal(PodSpecView(Resources(), node_selector=((MODEL, "A100"),)), ANY) is None


GPU_TAINT = NodeTaint("nvidia.com/gpu", "present", "NoSchedule")
H100_NODE = node("h1", labels={MODEL: "H100"}, taints=(GPU_TAINT,))
A100_NODE = node("a1", labels={MODEL: "A100"})


def test_in_a_flavor_a_pod_goes_only_on_its_nodes_and_through_their_taints() -> None:
    pod = PodSpecView(Resources.parse({"cpu": "1"}))
    assert refusal(pod, H100_NODE) is not None  # the taint, before
    assert refusal(pod, A100_NODE) is None
    flavored = in_flavor(pod, H100)
    assert flavored.node_selector == ((MODEL, "H100"),)
    assert flavored.tolerations == (Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule"),)
    assert flavored.request == pod.request
    assert refusal(flavored, H100_NODE) is None
    assert refusal(flavored, A100_NODE) == "not matching its nodeSelector"


def test_in_a_flavor_what_the_pod_has_already_is_kept_and_not_repeated() -> None:
    own = Toleration("nvidia.com/gpu", "Exists")
    pod = PodSpecView(Resources(), node_selector=(("zone", "a"),), tolerations=(own,))
    flavored = in_flavor(pod, SPOT_H100)
    assert flavored.node_selector == ((MODEL, "H100"), (POOL, "spot"), ("zone", "a"))
    assert in_flavor(pod, H100).tolerations == (own,)
    already = PodSpecView(Resources(), node_selector=((MODEL, "H100"),), tolerations=(own,))
    assert in_flavor(already, H100) is already
    assert in_flavor(pod, ANY) is pod


def test_the_same_pod_in_two_flavors_is_two_shapes() -> None:
    pod = PodSpecView(Resources.parse({"cpu": "1"}))
    assert in_flavor(pod, H100) != in_flavor(pod, A100)
    assert in_flavor(pod, A100) is in_flavor(PodSpecView(Resources.parse({"cpu": "1"})), A100)
