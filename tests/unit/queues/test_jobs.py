"""The job rules: queue access, protected annotations, no growth past admission, orphaning,
and the pods of managed jobs. Each denial is checked word for word."""

from __future__ import annotations

from typing import Any

import pytest
from queue_builders import cluster, q

from sluice.api.selector import LabelSelector
from sluice.queues.jobs import (
    Writer,
    check_job_create,
    check_job_delete,
    check_job_queue,
    check_job_update,
    check_pod_update,
    job_settings,
    namespace_refusal,
    needs_namespace_labels,
)

OPERATOR = Writer("system:serviceaccount:sluice-system:sluice-operator", operator=True)
PROTECTORS = ("platform-admin", "sluice-admins")
ALICE = Writer("alice", ("system:authenticated",), protectors=PROTECTORS)
ADMIN = Writer("platform-admin", ("system:authenticated",), protectors=PROTECTORS)
GROUPIE = Writer("bob", ("sluice-admins", "system:authenticated"), protectors=PROTECTORS)
QUEUES = cluster(q("team"), q("team-a", namespaceSelector={"matchLabels": {"team": "a"}}))
DONE = {"conditions": [{"type": "Complete", "status": "True"}]}


def job(
    queue: str | None = "team",
    *,
    suspend: bool = True,
    parallelism: int = 1,
    cpu: str = "1",
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    finalizers: list[str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "j", "namespace": "ns"}
    if queue:
        meta["labels"] = {"sluice.dev/queue-name": queue}
    if annotations:
        meta["annotations"] = annotations
    if finalizers:
        meta["finalizers"] = finalizers
    obj: dict[str, Any] = {
        "metadata": meta,
        "spec": {
            "suspend": suspend,
            "parallelism": parallelism,
            "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
            },
        },
    }
    if status:
        obj["status"] = status
    return obj


def update(old: dict[str, Any], new: dict[str, Any], writer: Writer = ALICE) -> Any:
    labels = {"team": "a"}
    return check_job_update(old, new, "ns", QUEUES, labels, writer)


# Queues ------------------------------------------------------------------------------------


def test_jobs_go_to_existing_open_leaf_queues_only() -> None:
    queues = cluster(q("dept"), q("team", "dept"), q("shut", state="Closed", status="Closing"))
    assert check_job_queue("team", queues).allowed
    assert check_job_queue("nope", queues).message == "queue nope does not exist"
    assert check_job_queue("root", queues).rule == "job-root"
    v = check_job_queue("dept", queues)
    assert v.rule == "job-not-leaf" and "(team)" in v.message
    assert (
        check_job_queue("shut", queues).message == "queue shut is Closing; it accepts no new jobs"
    )


def test_a_queue_is_open_to_jobs_as_its_spec_says_not_as_its_status_last_said() -> None:
    queues = cluster(
        q("shut", state="Closed", status="Open"),  # closed a moment ago
        q("back", status="Closed"),  # reopened a moment ago
        q("dept", state="Closed", status="Closing"),
        q("team", "dept", status="Open"),  # the cascade has not closed it yet
    )
    v = check_job_queue("shut", queues)
    assert (v.rule, v.message) == (
        "job-queue-not-open",
        "queue shut is Closing; it accepts no new jobs",
    )
    assert check_job_queue("back", queues).allowed
    assert check_job_queue("team", queues).message == (
        "queue team is Closing because its ancestor dept is Closed; it accepts no new jobs"
    )


# Access ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "labels", "allowed"),
    [
        (None, {}, True),
        ({}, {}, True),
        ({"matchLabels": {"team": "a"}}, {"team": "a"}, True),
        ({"matchLabels": {"team": "a"}}, {"team": "b"}, False),
        (
            {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]},
            {"team": "b"},
            True,
        ),
        ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["b"]}]}, {}, True),
        ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, {}, False),
        (
            {"matchExpressions": [{"key": "legacy", "operator": "DoesNotExist"}]},
            {"legacy": ""},
            False,
        ),
        # The API server's name label is always there, even where a dump leaves it out.
        ({"matchLabels": {"kubernetes.io/metadata.name": "ns"}}, {}, True),
    ],
)
def test_namespace_selector_matches_as_kubernetes_does(
    selector: dict[str, Any] | None, labels: dict[str, str], allowed: bool
) -> None:
    spec = {} if selector is None else {"namespaceSelector": selector}
    assert (namespace_refusal(q("t", **spec), "ns", labels) is None) is allowed


def test_a_job_from_a_namespace_the_selector_excludes_is_refused_naming_all_three() -> None:
    queues = cluster(
        q(
            "team-a",
            namespaceSelector={
                "matchLabels": {"team": "a"},
                "matchExpressions": [{"key": "env", "operator": "In", "values": ["dev", "prod"]}],
            },
        )
    )
    v = check_job_create(job("team-a"), "ns", queues, {"team": "b"}, ALICE)
    assert (v.rule, v.message) == (
        "job-namespace-not-allowed",
        "job ns/j: queue team-a takes jobs only from namespaces matching team=a,env in"
        " (dev,prod) (spec.namespaceSelector); namespace ns does not match",
    )
    assert check_job_create(job("team-a"), "ns", queues, {"team": "a", "env": "dev"}, ALICE).allowed


def test_namespace_labels_are_asked_for_only_for_queues_with_a_selector() -> None:
    assert needs_namespace_labels("team-a", QUEUES)
    assert not needs_namespace_labels("team", QUEUES)
    assert not needs_namespace_labels("missing", QUEUES)
    assert not needs_namespace_labels(None, QUEUES)


def test_moving_a_pending_job_to_a_queue_that_excludes_its_namespace_is_refused() -> None:
    v = check_job_update(job("team"), job("team-a"), "ns", QUEUES, {"team": "b"}, ALICE)
    assert v.rule == "job-namespace-not-allowed"


def test_the_selector_describes_itself_as_kubectl_does() -> None:
    selector = LabelSelector.model_validate(
        {
            "matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [
                {"key": "x", "operator": "NotIn", "values": ["p", "q"]},
                {"key": "y", "operator": "Exists"},
                {"key": "z", "operator": "DoesNotExist"},
            ],
        }
    )
    assert selector.describe() == "a=1,b=2,x notin (p,q),y,!z"
    assert LabelSelector().describe() == "<any>"


@pytest.mark.parametrize(
    "bad",
    [
        {"key": "x", "operator": "In"},
        {"key": "x", "operator": "Exists", "values": ["a"]},
        {"key": "x", "operator": "Equals", "values": ["a"]},
    ],
)
def test_malformed_selectors_are_not_read(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        LabelSelector.model_validate({"matchExpressions": [bad]})


# Annotations -------------------------------------------------------------------------------


def test_a_tenant_cannot_protect_a_job_and_is_told_who_can() -> None:
    protected = job(annotations={"sluice.dev/preemptable": "false"})
    v = check_job_create(protected, "ns", QUEUES, None, ALICE)
    assert (v.rule, v.message) == (
        "job-protected-annotation",
        "job ns/j: annotation sluice.dev/preemptable can be set or changed only by the sluice"
        " operator and the users and groups in webhooks.protectedJobUsers (platform-admin,"
        " sluice-admins); alice is not one of them",
    )
    assert not update(job(), protected).allowed
    assert not update(
        job(suspend=False), job(suspend=False, annotations={"sluice.dev/preemptable": "true"})
    ).allowed


def test_protectors_by_name_or_group_and_the_operator_may_protect() -> None:
    protected = job(annotations={"sluice.dev/preemptable": "false"})
    for writer in (ADMIN, GROUPIE, OPERATOR):
        assert check_job_create(protected, "ns", QUEUES, None, writer).allowed
        assert update(job(), protected, writer).allowed
        assert update(protected, job(), writer).allowed


def test_no_protectors_configured_says_so() -> None:
    alone = Writer("alice")
    v = check_job_create(
        job(annotations={"sluice.dev/preemptable": "false"}), "ns", QUEUES, None, alone
    )
    assert "webhooks.protectedJobUsers (no one else: the list is empty)" in v.message


@pytest.mark.parametrize(
    "key",
    [
        "sluice.dev/admitted-at",
        "sluice.dev/reclaimed-by",
        "sluice.dev/pending-reason",
        "sluice.dev/anything",
    ],
)
def test_the_operators_annotations_are_the_operators_alone(key: str) -> None:
    v = check_job_create(job(annotations={key: "x"}), "ns", QUEUES, None, ADMIN)
    assert (v.rule, v.message) == (
        "job-operator-annotation",
        f"job ns/j: annotation {key} is written by the sluice operator only (sluice.dev/"
        " annotations record its decisions); platform-admin cannot set or change it",
    )
    written = job(suspend=False, annotations={key: "x"})
    assert not update(written, job(suspend=False, annotations={key: "y"})).allowed
    assert not update(written, job(suspend=False)).allowed  # removing is changing
    assert update(job(), written, OPERATOR).allowed
    other = dict(written, metadata={**written["metadata"], "annotations": {key: "x", "mine": "1"}})
    assert update(written, other).allowed  # their own annotations are theirs


def test_labelling_a_job_into_a_queue_judges_the_annotations_it_already_had() -> None:
    unmanaged = job(None, annotations={"sluice.dev/preemptable": "false"})
    managed = job("team", annotations={"sluice.dev/preemptable": "false"})
    assert update(unmanaged, managed).rule == "job-protected-annotation"
    assert update(unmanaged, managed, ADMIN).allowed


def test_unmanaged_jobs_are_not_sluices_business() -> None:
    assert update(job(None, suspend=False), job(None, suspend=False, parallelism=9)).allowed


# Growth ------------------------------------------------------------------------------------


def test_an_admitted_job_cannot_grow() -> None:
    v = update(job(suspend=False), job(suspend=False, parallelism=50))
    assert (v.rule, v.message) == (
        "job-grows-past-admission",
        "job ns/j: an admitted job cannot grow past what it was admitted with: cpu 1 -> 50"
        " (parallelism 1 -> 50); lower it, or suspend the job (spec.suspend: true) to queue"
        " it again at its new size",
    )


def test_lowering_is_fine_and_raising_back_is_growth() -> None:
    assert update(job(suspend=False, parallelism=4), job(suspend=False, parallelism=2)).allowed
    v = update(job(suspend=False, parallelism=2), job(suspend=False, parallelism=4))
    assert v.rule == "job-grows-past-admission"


def test_growth_through_the_pod_template_counts_too() -> None:
    v = update(job(suspend=False, cpu="1"), job(suspend=False, cpu="2"))
    assert "cpu 1 -> 2;" in v.message


def test_a_suspended_job_may_change_size_and_so_may_a_job_suspending_itself() -> None:
    assert update(job(), job(parallelism=50)).allowed
    assert update(job(suspend=False), job(suspend=True, parallelism=50)).allowed


def test_a_finished_job_is_not_admitted_any_more() -> None:
    done = job(suspend=False, status=DONE)
    assert update(done, job(suspend=False, parallelism=9, status=DONE)).allowed


def test_only_the_operator_may_unsuspend_and_an_admitted_job_keeps_its_queue() -> None:
    v = update(job("team"), job("team", suspend=False))
    assert v.rule == "job-unsuspend"
    assert update(job("team"), job("team", suspend=False), OPERATOR).allowed
    assert update(job("team"), job("team", suspend=False), ADMIN).rule == "job-unsuspend"
    v = update(job("team", suspend=False), job("team-a", suspend=False))
    assert v.rule == "job-queue-immutable" and "from team to team-a" in v.message
    assert update(job("team"), job("team-a")).allowed
    assert update(job(None), job(None, suspend=False)).allowed


def test_a_running_job_cannot_join_a_queue_but_a_finished_one_may_change_its_label() -> None:
    v = update(job(None, suspend=False), job("team", suspend=False))
    assert (v.allowed, v.rule) == (False, "job-queue-immutable")
    assert v.message == (
        "job ns/j: a running job cannot join queue team (label sluice.dev/queue-name); sluice"
        " admits only jobs that wait suspended: suspend it first"
    )
    assert update(job(None), job("team")).allowed
    finished = job("team", suspend=False, status=DONE)
    assert update(finished, job("team-a", suspend=False, status=DONE)).allowed
    assert update(finished, job(None, suspend=False, status=DONE)).allowed


def test_the_queue_label_stays_on_an_unfinished_job() -> None:
    v = update(job("team"), job(None))
    assert (v.rule, v.message) == (
        "job-queue-label-removed",
        "job ns/j: the label sluice.dev/queue-name (team) cannot be removed from an unfinished"
        " job; move it to another queue or delete it",
    )


# Orphaning ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "allowed"),
    [
        ({"propagationPolicy": "Background"}, True),
        ({"propagationPolicy": "Foreground"}, True),
        ({"orphanDependents": False}, True),
        ({"propagationPolicy": "Orphan"}, False),
        ({"orphanDependents": True}, False),
        ({}, False),
        (None, False),
    ],
)
def test_an_admitted_job_is_deleted_with_its_pods(
    options: dict[str, Any] | None, allowed: bool
) -> None:
    v = check_job_delete(job(suspend=False), "ns", options, ALICE)
    assert v.allowed is allowed
    assert check_job_delete(job(suspend=True), "ns", options, ALICE).allowed
    assert check_job_delete(job(None, suspend=False), "ns", options, ALICE).allowed
    assert check_job_delete(job(suspend=False, status=DONE), "ns", options, ALICE).allowed


def test_the_orphaning_refusal_says_how_to_delete() -> None:
    v = check_job_delete(job(suspend=False), "ns", {"propagationPolicy": "Orphan"}, ALICE)
    assert (v.rule, v.message) == (
        "job-orphans-pods",
        "job ns/j of queue team is admitted; deleting it with propagationPolicy Orphan would"
        " leave its pods running outside the queue's quota: delete it with propagationPolicy"
        " Background or Foreground (kubectl delete --cascade=background)",
    )


def test_the_orphan_finalizer_is_orphaning_too() -> None:
    v = update(job(suspend=False), job(suspend=False, finalizers=["orphan"]))
    assert v.rule == "job-orphans-pods" and "with the finalizer orphan" in v.message


# Pods --------------------------------------------------------------------------------------


def pod(cpu: str = "1", **labels: str) -> dict[str, Any]:
    base = {
        "sluice.dev/queue-name": "team",
        "batch.kubernetes.io/controller-uid": "u1",
        "batch.kubernetes.io/job-name": "j",
        "controller-uid": "u1",
        "job-name": "j",
    }
    return {
        "metadata": {"name": "j-x", "namespace": "ns", "labels": {**base, **labels}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
    }


@pytest.mark.parametrize(
    "key",
    ["sluice.dev/queue-name", "batch.kubernetes.io/controller-uid", "controller-uid", "job-name"],
)
def test_a_pod_cannot_leave_its_job(key: str) -> None:
    v = check_pod_update(pod(), pod(**{key: "other"}), "ns", ALICE)
    assert (v.rule, v.message) == (
        "pod-job-label",
        f"pod ns/j-x belongs to a job of queue team; its label {key} cannot change (it would"
        " leave its job and run outside the queue's quota)",
    )


def test_a_pod_cannot_be_resized_up_but_may_shrink() -> None:
    v = check_pod_update(pod("1"), pod("2"), "ns", ALICE)
    assert (v.rule, v.message) == (
        "pod-grows-past-admission",
        "pod ns/j-x belongs to a job of queue team; its request cannot grow past what the job"
        " was admitted with: cpu 1 -> 2",
    )
    assert check_pod_update(pod("2"), pod("1"), "ns", ALICE).allowed
    assert check_pod_update(pod(), pod(extra="label"), "ns", ALICE).allowed
    assert check_pod_update(pod("1"), pod("2"), "ns", OPERATOR).allowed


def test_the_webhooks_indexed_queue_set_answers_as_a_plain_map() -> None:
    from sluice.queues.tree import QueueSet

    queues = cluster(q("dept"), q("b", "dept"), q("a", "dept"), q("team"))
    indexed = QueueSet(queues)
    for name in ("dept", "team", "root", "nope"):
        assert check_job_queue(name, indexed) == check_job_queue(name, queues)
    assert "(a, b)" in check_job_queue("dept", indexed).message
    assert indexed.children("dept") == ("a", "b") and indexed.children("team") == ()


def test_a_new_job_is_held_and_named_and_gets_its_queues_class_when_its_pods_have_none() -> None:
    labelled = {"metadata": {"labels": {"sluice.dev/queue-name": "team"}}, "spec": {}}
    assert job_settings(labelled, "team", q("team")) == [
        (("spec", "suspend"), True),
        (("spec", "template", "metadata", "labels", "sluice.dev/queue-name"), "team"),
    ]
    classed = q("team", priorityClassName="high")
    from_namespace: dict[str, Any] = {"metadata": {}, "spec": {"template": {"spec": {}}}}
    assert job_settings(from_namespace, "team", classed) == [
        (("metadata", "labels", "sluice.dev/queue-name"), "team"),
        (("spec", "suspend"), True),
        (("spec", "template", "metadata", "labels", "sluice.dev/queue-name"), "team"),
        (("spec", "template", "spec", "priorityClassName"), "high"),
    ]
    own = {"metadata": {}, "spec": {"template": {"spec": {"priorityClassName": "low"}}}}
    assert len(job_settings(own, "team", classed)) == 3
    assert len(job_settings(from_namespace, "gone", None)) == 3
