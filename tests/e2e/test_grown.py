"""A resizable Job grown while it runs, on the living cluster (docs/elastic.md, *Grown
through the queue*): its parallelism raised through the webhooks, its new pods gated while
its queue has no room, then admitted as growth and run under the real Job controller."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from .components import Operator, sluice_system
from .helpers import Kubectl, controlplane, wait_for
from .scenario import Scenario, kwok
from .test_admitted_smaller import capability

GATE = "sluice.dev/admission"


@pytest.fixture(scope="module")
def system(
    control_plane: controlplane.Cluster,
    kubectl: Kubectl,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Operator]:
    workdir = tmp_path_factory.mktemp("grown")
    with sluice_system(control_plane, kubectl, workdir, "grown") as op:
        yield op


@pytest.fixture
def s(system: Operator, kubectl: Kubectl, namespace: str) -> Scenario:
    return Scenario(kubectl, namespace)


def work_queue_job(s: Scenario, pods: int, minimum: int) -> None:
    """A Job ``train`` of ``pods`` workers on a queue of work (no completions: its size is
    its parallelism alone), that may run with ``minimum`` of them, in queue team."""
    manifest = kwok.job(
        "train",
        kwok.pod_template({s.resource: 1}),
        namespace=s.namespace,
        queue=s.name("team"),
        pods=pods,
        suspend=True,
    )
    del manifest["spec"]["completions"]
    manifest["metadata"]["annotations"] = {"sluice.dev/min-parallelism": str(minimum)}
    s.kubectl.create(manifest)


def gated(pod: dict[str, Any]) -> bool:
    return any(g.get("name") == GATE for g in pod["spec"].get("schedulingGates") or ())


def raised_to_8_with_2_gated(s: Scenario) -> None:
    """Raise train's parallelism to 8 and wait for its 2 new pods, gated."""
    s.kubectl.run(
        "patch", "job", "train", "-n", s.namespace, "--type=merge",
        "-p", '{"spec":{"parallelism":8}}',
    )  # fmt: skip

    def two_gated() -> list[dict[str, Any]] | None:
        pods = [p for p in s.pods("train") if not p["metadata"].get("deletionTimestamp")]
        waiting = [p for p in pods if gated(p)]
        return pods if len(pods) == 8 and len(waiting) == 2 else None

    wait_for(two_gated, timeout=30, what="2 new pods of train gated")


def running_whole(s: Scenario, pods: int) -> None:
    """train (minimum 4) admitted whole at ``pods`` in a queue of that many, its pods running
    and its record saying so."""
    s.node(16)
    s.queue("team", capability={s.resource: str(pods)})
    work_queue_job(s, pods, 4)
    s.wait_admitted("train")
    s.wait_pods_running("train", pods)
    assert record(s) == {"main": {"admitted": pods, "asked": pods, "fields": {}}}


def record(s: Scenario) -> Any:
    return json.loads(s.annotation("train", "admitted-size") or "null")


def test_a_job_grown_from_6_to_8_waits_gated_until_its_queue_has_room_then_runs_8(
    s: Scenario,
) -> None:
    running_whole(s, 6)
    raised_to_8_with_2_gated(s)
    assert record(s)["main"]["admitted"] == 6  # its growth waits for its queue
    assert s.admitted("train")
    said = wait_for(
        lambda: s.annotation("train", "pending-reason"), timeout=30, what="growth's reason"
    )
    assert said.startswith(f"growth of 2 pods waiting: position 1 in {s.name('team')}; ")
    capability(s, "team", 8)
    wait_for(lambda: record(s)["main"]["admitted"] == 8, timeout=30, what="growth admitted")
    assert s.annotation("train", "pending-reason") is None  # gone with its admission
    pods = s.wait_pods_running("train", 8, timeout=60)
    assert not any(gated(p) for p in pods)


def test_a_job_lowered_then_raised_again_grows_through_its_queue(s: Scenario) -> None:
    # Admitted whole at 8 (minimum 4) in a queue of 8; its owner lowers it to 6, which frees
    # 2 at once for another job of the queue, and its record follows. Raised back to 8, its
    # 2 new pods wait gated until the queue has room again: never the old record's 8.
    running_whole(s, 8)
    s.kubectl.run(
        "patch", "job", "train", "-n", s.namespace, "--type=merge",
        "-p", '{"spec":{"parallelism":6}}',
    )  # fmt: skip
    wait_for(lambda: record(s)["main"]["admitted"] == 6, timeout=30, what="the record lowered")
    assert record(s) == {"main": {"admitted": 6, "asked": 6, "fields": {}}}
    s.wait_pods_running("train", 6, timeout=60)
    s.job("other", "team", 1, pods=2)
    s.wait_admitted("other", timeout=30)
    raised_to_8_with_2_gated(s)
    said = wait_for(
        lambda: s.annotation("train", "pending-reason"), timeout=30, what="growth's reason"
    )
    assert said.startswith(f"growth of 2 pods waiting: position 1 in {s.name('team')}; ")
    assert record(s)["main"]["admitted"] == 6
    live = [p for p in s.pods("train") if not p["metadata"].get("deletionTimestamp")]
    assert len([p for p in live if not gated(p)]) == 6
    s.kubectl.run("delete", "job", "other", "-n", s.namespace, "--wait=false")
    wait_for(lambda: record(s)["main"]["admitted"] == 8, timeout=30, what="growth admitted")
    pods = s.wait_pods_running("train", 8, timeout=60)
    assert not any(gated(p) for p in pods)
