"""A resizable Job on the living cluster (docs/elastic.md, *Admitted smaller*): admitted at
what its queue has room for, run at that size by the real Job controller, and given the size
it asked back once it waits again; through the webhooks, as a tenant's Job is."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from .components import Operator, sluice_system
from .helpers import Kubectl, controlplane, wait_for
from .scenario import Scenario, kwok


@pytest.fixture(scope="module")
def system(
    control_plane: controlplane.Cluster,
    kubectl: Kubectl,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Operator]:
    workdir = tmp_path_factory.mktemp("admitted-smaller")
    with sluice_system(control_plane, kubectl, workdir, "admitted-smaller") as op:
        yield op


@pytest.fixture
def s(system: Operator, kubectl: Kubectl, namespace: str) -> Scenario:
    return Scenario(kubectl, namespace)


def resizable_job(s: Scenario, short: str, queue: str, pods: int, minimum: int) -> None:
    """A Job of ``pods`` pods of one of the scenario's resource that may run with
    ``minimum`` of them (sluice.dev/min-parallelism)."""
    manifest = kwok.job(
        short,
        kwok.pod_template({s.resource: 1}),
        namespace=s.namespace,
        queue=s.name(queue),
        pods=pods,
        suspend=True,
    )
    manifest["metadata"]["annotations"] = {"sluice.dev/min-parallelism": str(minimum)}
    s.kubectl.create(manifest)


def capability(s: Scenario, queue: str, amount: int) -> None:
    body = json.dumps({"spec": {"capability": {s.resource: str(amount)}}})
    s.kubectl.run("patch", "queue", s.name(queue), "--type=merge", "-p", body)


def test_a_job_is_admitted_at_6_of_8_runs_6_pods_and_gets_8_back_when_it_waits_again(
    s: Scenario,
) -> None:
    s.node(16)  # room for every pod, and for the next ones while the last still terminate
    team = s.queue("team", capability={s.resource: "6"})
    resizable_job(s, "train", "team", 8, 4)
    s.wait_admitted("train")
    spec = s.get_job("train")["spec"]
    assert (spec["parallelism"], spec["completions"]) == (6, 8)
    assert json.loads(s.annotation("train", "admitted-size") or "") == {
        "main": {"admitted": 6, "asked": 8, "fields": {"spec.parallelism": 8}}
    }
    s.wait_pods_running("train", 6)
    (admitted,) = [e["message"] for e in s.events("train") if e["reason"] == "Admitted"]
    assert admitted.endswith(
        f"admitted 6 of 8 workers (min 4): no room for more in queue {team}'s capability"
    )
    # Its queue now holds less than its minimum, and the Job is suspended (as reclaim,
    # preempt and requeue do): it waits, and sluice gives it the size it asked back.
    capability(s, "team", 2)
    s.job("probe", "team", 3)  # once it waits for the capability, sluice has seen it
    wait_for(lambda: s.annotation("probe", "pending-reason"), what="probe's reason")
    s.kubectl.run(
        "patch",
        "job",
        "train",
        "-n",
        s.namespace,
        "--type=merge",
        "-p",
        '{"spec":{"suspend":true}}',
    )
    wait_for(
        lambda: (
            s.get_job("train")["spec"]["parallelism"] == 8
            and s.annotation("train", "admitted-size") is None
        ),
        what="train's size given back",
    )
    assert not s.admitted("train")
    s.wait_no_pods("train")
    # With room for all of it, it is admitted whole, recorded whole, and runs its 8 pods.
    s.kubectl.run("delete", "job", "probe", "-n", s.namespace)
    capability(s, "team", 8)
    s.wait_admitted("train", timeout=30)
    assert s.get_job("train")["spec"]["parallelism"] == 8, s.events("train")
    # Recorded whole: its growth is counted from the record.
    assert json.loads(s.annotation("train", "admitted-size") or "") == {
        "main": {"admitted": 8, "asked": 8, "fields": {}}
    }
    s.wait_pods_running("train", 8)
