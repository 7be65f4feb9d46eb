"""Plain pods and pod groups on the living cluster: held by sluice's scheduling gate until
admitted, then scheduled by kube-scheduler and run by KWOK; groups admitted whole; a
Deployment's pods queued one by one; reclaim deletes pods and their controller's new ones
wait behind the gate."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .components import sluice_system
from .helpers import Kubectl, KubectlError, controlplane, wait_for
from .scenario import Scenario, kwok

GATE = "sluice.dev/admission"


@pytest.fixture(scope="module")
def system(
    control_plane: controlplane.Cluster,
    kubectl: Kubectl,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    with sluice_system(control_plane, kubectl, tmp_path_factory.mktemp("pods"), "pods"):
        yield


@pytest.fixture
def s(system: None, kubectl: Kubectl, namespace: str) -> Scenario:
    return Scenario(kubectl, namespace)


def template(s: Scenario, queue: str, amount: int, **labels: str) -> dict[str, Any]:
    pod = kwok.pod_template({s.resource: amount}, restart_policy="Always")
    pod["metadata"] = {"labels": {"sluice.dev/queue-name": s.name(queue), **labels}}
    return pod


def create_pod(
    s: Scenario, name: str, queue: str, amount: int = 1, group: str = "", total: int = 0
) -> None:
    pod = template(s, queue, amount, **({"sluice.dev/pod-group": group} if group else {}))
    pod["metadata"] |= {"name": name, "namespace": s.namespace}
    if group:
        pod["metadata"]["annotations"] = {"sluice.dev/pod-group-total-count": str(total)}
    s.kubectl.create({"apiVersion": "v1", "kind": "Pod", **pod})


def pods(s: Scenario, selector: str) -> list[dict[str, Any]]:
    found = s.kubectl.json("get", "pods", "-n", s.namespace, "-l", selector)["items"]
    return [p for p in found if not p["metadata"].get("deletionTimestamp")]


def gated(pod: dict[str, Any]) -> bool:
    return any(g["name"] == GATE for g in pod["spec"].get("schedulingGates") or [])


def running(pod: dict[str, Any]) -> bool:
    return bool(pod["spec"].get("nodeName")) and pod["status"].get("phase") == "Running"


def reason(pod: dict[str, Any]) -> str | None:
    return (pod["metadata"].get("annotations") or {}).get("sluice.dev/pending-reason")


def wait_pods(s: Scenario, selector: str, running_count: int, gated_count: int) -> list[Any]:
    """Until exactly so many pods of the selector run and so many wait behind the gate."""

    def probe() -> list[dict[str, Any]] | None:
        found = pods(s, selector)
        ok = (
            sum(1 for p in found if running(p)) == running_count
            and sum(1 for p in found if gated(p)) == gated_count
            and len(found) == running_count + gated_count
        )
        return found if ok else None

    return wait_for(
        probe, timeout=30, what=f"{running_count} running, {gated_count} gated of {selector}"
    )


def test_a_gated_pod_stays_unscheduled_until_admitted_then_runs_on_a_fake_node(
    s: Scenario,
) -> None:
    node = s.node(4)
    team = s.queue("team", capability={s.resource: "1"})
    create_pod(s, "first", "team")
    create_pod(s, "second", "team")
    selector = f"sluice.dev/queue-name={team}"
    first, second = sorted(wait_pods(s, selector, 1, 1), key=lambda p: p["metadata"]["name"])
    assert first["spec"]["nodeName"] == node
    assert first["metadata"]["annotations"]["sluice.dev/admitted-at"]
    waiting = wait_for(lambda: reason(s.kubectl.get("pod", "second", s.namespace)), what="why")
    assert waiting == f"position 1 in {team}; {team} would use {s.resource} 2 > capability 1"
    assert not second["spec"].get("nodeName")
    scheduled = next(c for c in second["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "SchedulingGated")
    s.kubectl.run("delete", "pod", "first", "-n", s.namespace, "--wait=false")
    (now,) = wait_pods(s, selector, 1, 0)
    assert now["metadata"]["name"] == "second" and now["spec"]["nodeName"] == node


def test_a_group_of_four_is_admitted_whole_or_not_at_all(s: Scenario) -> None:
    s.node(8)
    team = s.queue("team", capability={s.resource: "6"})
    for i in range(3):
        create_pod(s, f"g-{i}", "team", group="g", total=4)
    wait_for(
        lambda: (
            [reason(p) for p in pods(s, "sluice.dev/pod-group=g")]
            == ["3 of 4 pods of group g exist"] * 3
        ),
        what="the incomplete group's reason",
    )
    assert all(gated(p) for p in pods(s, "sluice.dev/pod-group=g"))
    create_pod(s, "g-3", "team", group="g", total=4)
    wait_pods(s, "sluice.dev/pod-group=g", 4, 0)
    # Only 2 of the queue's 6 are left: a second group of 4 waits, not one pod of it runs.
    for i in range(4):
        create_pod(s, f"h-{i}", "team", group="h", total=4)
    expected = f"position 1 in {team}; {team} would use {s.resource} 8 > capability 6"
    wait_for(
        lambda: [reason(p) for p in pods(s, "sluice.dev/pod-group=h")] == [expected] * 4,
        what="the second group's reason",
    )
    wait_pods(s, "sluice.dev/pod-group=h", 0, 4)


def deployment(s: Scenario, name: str, queue: str, replicas: int) -> None:
    pod = template(s, queue, 1, app=name)
    s.kubectl.create(kwok.deployment(name, pod, namespace=s.namespace, replicas=replicas))


def test_a_deployment_scaled_past_its_quota_leaves_the_extra_pods_gated(s: Scenario) -> None:
    s.node(4)
    team = s.queue("team", capability={s.resource: "2"})
    deployment(s, "serve", "team", 2)
    wait_pods(s, "app=serve", 2, 0)
    s.kubectl.run("scale", "deployment", "serve", "-n", s.namespace, "--replicas=3")
    found = wait_pods(s, "app=serve", 2, 1)
    extra = next(p for p in found if gated(p))
    expected = f"position 1 in {team}; {team} would use {s.resource} 3 > capability 2"
    name = extra["metadata"]["name"]
    assert wait_for(lambda: reason(s.kubectl.get("pod", name, s.namespace)), what="why") == expected


def test_reclaim_deletes_a_lower_queues_pods_and_their_replacements_wait_gated(
    s: Scenario,
) -> None:
    node = s.node(4)
    s.queue("lender")
    s.queue("owed")
    deployment(s, "serve", "lender", 4)
    wait_pods(s, "app=serve", 4, 0)
    # owed deserves half the node; lender holds it all.
    for i in range(2):
        create_pod(s, f"train-{i}", "owed", group="train", total=2)
    trained = wait_pods(s, "sluice.dev/pod-group=train", 2, 0)
    assert {p["spec"]["nodeName"] for p in trained} == {node}
    # The Deployment created two pods for the two sluice deleted: they wait behind the gate.
    found = wait_pods(s, "app=serve", 2, 2)
    for pod in (p for p in found if gated(p)):
        name = pod["metadata"]["name"]
        assert wait_for(lambda n=name: reason(s.kubectl.get("pod", n, s.namespace)), what="why")
        assert not s.kubectl.get("pod", name, s.namespace)["spec"].get("nodeName")


def test_a_namespaces_default_queue_takes_its_pods_and_only_sluice_ungates_them(
    s: Scenario,
) -> None:
    s.node(4)
    team = s.queue("team", capability={s.resource: "1"})
    s.kubectl.run("label", "namespace", s.namespace, f"sluice.dev/default-queue={team}")
    for name in ("first", "second"):
        pod = kwok.pod_template({s.resource: 1}, restart_policy="Always")
        pod["metadata"] = {"name": name, "namespace": s.namespace}
        s.kubectl.create({"apiVersion": "v1", "kind": "Pod", **pod})
    found = wait_pods(s, f"sluice.dev/queue-name={team}", 1, 1)
    held = next(p["metadata"]["name"] for p in found if gated(p))
    ungate = '[{"op": "remove", "path": "/spec/schedulingGates/0"}]'
    with pytest.raises(KubectlError) as refused:
        s.kubectl.run("patch", "pod", held, "-n", s.namespace, "--type=json", "-p", ungate)
    assert (
        f"pod {s.namespace}/{held}: only sluice may remove the scheduling gate"
        f" sluice.dev/admission of a pod of queue {team}"
    ) in str(refused.value)
    with pytest.raises(KubectlError) as refused:
        create_pod(s, "lost", "nowhere")
    assert f"pod {s.namespace}/lost: queue {s.name('nowhere')} does not exist" in str(refused.value)
