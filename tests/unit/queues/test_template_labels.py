"""At the door: while a workload runs, each pod template keeps the labels sluice put there
(docs/elastic.md, *What the tenancy guarantees become*). The queue label sends its pods to
the pod webhooks, and sluice.dev/resizable gates the pods of a resizable workload: a
template without them makes pods no webhook holds, and for a kind whose templates stay
mutable (a PyTorchJob) its new pods would then run ungated past what its queue admitted."""

from __future__ import annotations

import copy
import json
from typing import Any

from queue_builders import cluster, q

from sluice.api.workloads import BY_KIND
from sluice.queues.jobs import Writer, check_job_update

PYTORCH_JOB = BY_KIND["PyTorchJob"]
OPERATOR = Writer("system:serviceaccount:sluice-system:sluice-operator", operator=True)
ALICE = Writer("alice", ("system:authenticated",))
QUEUES = cluster(q("team"))
LABELS = {"sluice.dev/queue-name": "team", "sluice.dev/resizable": "true"}
RECORD = json.dumps({"Worker": {"admitted": 2, "asked": 2, "fields": {}}})


def template() -> dict[str, Any]:
    pod = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    return {"metadata": {"labels": dict(LABELS)}, "spec": pod}


def elastic(held: bool = False) -> dict[str, Any]:
    """An elastic PyTorchJob as the door leaves it, admitted with its record unless held."""
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "labels": {"sluice.dev/queue-name": "team"},
            "annotations": {"sluice.dev/admitted-size": RECORD},
        },
        "spec": {
            "runPolicy": {"suspend": held},
            "elasticPolicy": {"minReplicas": 1, "maxReplicas": 4},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template()},
                "Worker": {"replicas": 2, "template": template()},
            },
        },
    }


def update(old: dict[str, Any], new: dict[str, Any], writer: Writer = ALICE) -> Any:
    return check_job_update(old, new, "ns", QUEUES, None, writer, PYTORCH_JOB)


def stripped(obj: dict[str, Any], label: str, replicas: int = 2) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    worker = out["spec"]["pytorchReplicaSpecs"]["Worker"]
    del worker["template"]["metadata"]["labels"][label]
    worker["replicas"] = replicas
    return out


def test_a_running_workload_keeps_each_label_sluice_put_on_its_templates() -> None:
    old = elastic()
    for label in LABELS:
        for replicas in (2, 4):  # alone, and with the growth it would let run ungated
            verdict = update(old, stripped(old, label, replicas))
            assert not verdict.allowed
            assert verdict.rule == "job-template-labels"
            assert verdict.message == (
                "pytorchjob ns/train: the pod template of Worker keeps the label"
                f" {label}={LABELS[label]} while it runs: it holds its pods at the door;"
                " suspend it (spec.runPolicy.suspend: true) to change it"
            )


def test_a_held_workload_the_write_that_suspends_it_and_the_operator_may_change_them() -> None:
    held = elastic(held=True)
    assert update(held, stripped(held, "sluice.dev/resizable")).allowed
    suspending = stripped(elastic(), "sluice.dev/resizable")
    suspending["spec"]["runPolicy"]["suspend"] = True
    assert update(elastic(), suspending).allowed
    assert update(elastic(), stripped(elastic(), "sluice.dev/resizable"), OPERATOR).allowed


def test_a_label_the_template_never_had_is_not_asked_for() -> None:
    old = stripped(elastic(), "sluice.dev/resizable")
    grown = copy.deepcopy(old)
    grown["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["metadata"]["labels"]["x"] = "y"
    assert update(old, grown).allowed
