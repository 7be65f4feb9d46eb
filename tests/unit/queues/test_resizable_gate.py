"""The gate of a resizable workload's pods at the door (docs/elastic.md, *Grown through the
queue*): its templates labelled sluice.dev/resizable, its pods gated at creation, the gate
and the label kept until sluice releases them."""

from __future__ import annotations

from typing import Any

from test_min_size_rules import ALICE, OPERATOR, fixture, job, update

from sluice.api.workloads.kubeflow import PYTORCH_JOB
from sluice.queues.jobs import JOB_POD_LABELS, check_pod_update, job_settings
from sluice.queues.pods import job_pod_settings, pod_settings

RESIZABLE = "sluice.dev/resizable"
GATE = "sluice.dev/admission"


def labels_set(settings: list[Any]) -> dict[tuple[Any, ...], Any]:
    return {keys: value for keys, value in settings if keys[-1] == RESIZABLE}


def job_pod(*, label: bool = True, gates: list[str] | None = None) -> dict[str, Any]:
    labels = {"sluice.dev/queue-name": "team", **({RESIZABLE: "true"} if label else {})}
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if gates is not None:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-x",
            "namespace": "ns",
            "labels": labels,
            "ownerReferences": [{"kind": "Job", "name": "train", "uid": "u", "controller": True}],
        },
        "spec": spec,
    }


def test_the_templates_of_a_workload_with_a_minimum_are_labelled_resizable() -> None:
    assert labels_set(job_settings(job(meta="4"), "team", None)) == {
        ("spec", "template", "metadata", "labels", RESIZABLE): "true"
    }
    assert labels_set(job_settings(job(template="4"), "team", None)) != {}
    assert labels_set(job_settings(job(), "team", None)) == {}
    elastic = fixture("pytorchjobs.yaml", "elastic-resnet")
    assert len(labels_set(job_settings(elastic, "team", None, PYTORCH_JOB))) == 1  # one template


def test_a_pod_of_a_resizable_job_is_gated_at_creation_after_its_own_gates() -> None:
    assert job_pod_settings(job_pod()) == [(("spec", "schedulingGates"), [{"name": GATE}])]
    own = job_pod(gates=["other"])
    assert job_pod_settings(own) == [
        (("spec", "schedulingGates"), [{"name": "other"}, {"name": GATE}])
    ]
    assert job_pod_settings(job_pod(gates=[GATE])) == []
    assert job_pod_settings(job_pod(label=False)) == []  # any other job's pod passes
    assert pod_settings(job_pod(label=False), "team") == [
        (("spec", "schedulingGates"), [{"name": GATE}])
    ]  # a plain pod's gate is added as before


def test_only_sluice_removes_the_gate_of_a_job_pod() -> None:
    gated, released = job_pod(gates=["other", GATE]), job_pod(gates=["other"])
    refused = check_pod_update(gated, released, "ns", ALICE)
    assert not refused.allowed and refused.rule == "pod-ungate"
    assert check_pod_update(gated, released, "ns", OPERATOR).allowed
    assert check_pod_update(released, job_pod(gates=[]), "ns", ALICE).allowed  # its own gate


def test_a_pod_cannot_be_relabelled_out_of_its_gate() -> None:
    assert RESIZABLE in JOB_POD_LABELS
    verdict = check_pod_update(
        job_pod(gates=[GATE]), job_pod(label=False, gates=[GATE]), "ns", ALICE
    )
    assert not verdict.allowed and verdict.rule == "pod-job-label"


# Growth through the queue --------------------------------------------------------------------

RECORDED = '{"main":{"admitted":6,"asked":8,"fields":{"spec.parallelism":8}}}'


def running(
    parallelism: int, *, record: bool = True, minimum: str | None = "4", label: bool = True
) -> Any:
    """An admitted Job, its template labelled resizable as the door labels it at creation
    when it declares a minimum (``label``)."""
    obj = job(held=False, meta=minimum)
    obj["spec"]["parallelism"] = parallelism
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    if label and minimum is not None:
        obj["spec"]["template"]["metadata"]["labels"] = {RESIZABLE: "true"}
    if record:
        obj["metadata"]["annotations"]["sluice.dev/admitted-size"] = RECORDED
    return obj


def test_a_resizable_workload_with_a_record_grows_through_the_queue() -> None:
    assert update(running(6), running(8)).allowed


def test_growth_is_refused_without_a_record_or_a_minimum_or_in_a_pods_request() -> None:
    for old, new in (
        (running(6, record=False), running(8, record=False)),  # nothing to count it from
        (running(6, minimum=None), running(8, minimum=None)),  # its pods are not gated
    ):
        verdict = update(old, new)
        assert not verdict.allowed and verdict.rule == "job-grows-past-admission"
    bigger = running(6)
    bigger["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
    verdict = update(running(6), bigger)
    assert not verdict.allowed and verdict.rule == "job-grows-past-admission"


def test_a_size_lowered_below_its_record_is_not_raised_back_without_the_queue() -> None:
    # Recorded at 6, lowered to 5 (its quota freed at once), raised to 8: refused.
    verdict = update(running(5), running(8))
    assert not verdict.allowed and verdict.rule == "job-grows-past-admission"


def test_growth_is_refused_when_its_new_pods_would_not_be_gated() -> None:
    # A minimum written while the Job waited, after its creation: its template never got the
    # label, so its pods are not gated, and it may not grow while it runs.
    verdict = update(running(6, label=False), running(8, label=False))
    assert not verdict.allowed and verdict.rule == "job-grows-past-admission"


def elastic_pytorchjob(*, admitted: bool, label: bool) -> Any:
    obj = fixture("pytorchjobs.yaml", "elastic-resnet")
    obj["spec"]["runPolicy"] = {"suspend": not admitted}
    worker = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    labels = worker.setdefault("metadata", {}).setdefault("labels", {})
    if label:
        labels[RESIZABLE] = "true"
    return obj


def test_the_label_stays_on_a_mutable_template_while_the_workload_is_admitted() -> None:
    # A PyTorchJob's templates may change while it runs: its Worker pods made after the
    # label went would not be gated.
    admitted, taken_off = (elastic_pytorchjob(admitted=True, label=x) for x in (True, False))
    verdict = update(admitted, taken_off, PYTORCH_JOB)
    assert not verdict.allowed and verdict.rule == "job-template-labels"
    assert verdict.message == (
        "pytorchjob ns/elastic-resnet: the pod template of Worker keeps the label"
        " sluice.dev/resizable=true while it runs: it holds its pods at the door; suspend it"
        " (spec.runPolicy.suspend: true) to change it"
    )
    # Suspended in the same write, by the operator, or while it waits: its own to change.
    suspended = elastic_pytorchjob(admitted=False, label=False)
    assert update(admitted, suspended, PYTORCH_JOB).allowed
    assert update(admitted, taken_off, PYTORCH_JOB, OPERATOR).allowed
    waiting = elastic_pytorchjob(admitted=False, label=True)
    assert update(waiting, suspended, PYTORCH_JOB).allowed


def test_a_resizable_workloads_pod_is_not_resized_up_gated_or_released() -> None:
    # Growth goes through the pod set's size, never through a pod's request.
    for gates in ([GATE], []):
        small, big = job_pod(gates=gates), job_pod(gates=gates)
        small["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
        big["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
        verdict = check_pod_update(small, big, "ns", ALICE)
        assert not verdict.allowed and verdict.rule == "pod-grows-past-admission"
        assert check_pod_update(big, small, "ns", ALICE).allowed  # shrinking frees quota
