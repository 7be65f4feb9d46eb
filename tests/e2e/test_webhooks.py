"""The webhooks registered with a real API server: kubectl is refused with sluice's message,
and defaults appear on stored objects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .components import registered_webhooks, webhook_server
from .helpers import Kubectl, KubectlError, controlplane, queue, unique_name, wait_for


@pytest.fixture(scope="module")
def webhooks(
    control_plane: controlplane.Cluster, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[int]:
    workdir: Path = tmp_path_factory.mktemp("webhooks")
    # root and default exist in every sluice cluster (the operator creates them).
    for name, spec in (("root", {}), ("default", {"parent": "root"})):
        if not kubectl.run("get", "queue", name, "--ignore-not-found", "-o", "name").strip():
            kubectl.create(queue(name, **spec))
    with (
        webhook_server(control_plane, workdir) as port,
        registered_webhooks(kubectl, port, control_plane.ca_cert.read_bytes()),
    ):
        # The API server picks up new webhook configurations asynchronously.
        probe = unique_name("probe")

        def active() -> bool:
            try:
                kubectl.create(queue(probe, parent="nowhere"))
            except KubectlError as err:
                return "does not exist" in str(err)
            kubectl.delete("queue", probe)
            return False

        wait_for(active, timeout=20, what="the sluice webhooks to take effect")
        yield port


def job(name: str, namespace: str, queue_name: str | None) -> dict[str, object]:
    labels = {"sluice.dev/queue-name": queue_name} if queue_name else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": "1"}},
                        }
                    ],
                }
            }
        },
    }


def test_defaults_appear_on_a_created_queue(webhooks: int, kubectl: Kubectl) -> None:
    name = unique_name("q")
    kubectl.create(queue(name, weight=2))
    spec = kubectl.get("queue", name)["spec"]
    assert spec["parent"] == "root"
    assert spec["weight"] == 2 and spec["state"] == "Open" and spec["reclaimable"] is True


def test_kubectl_is_refused_with_the_rule_and_numbers(webhooks: int, kubectl: Kubectl) -> None:
    dept = unique_name("dept")
    kubectl.create(queue(dept, guarantee={"resource": {"cpu": "4"}}))
    with pytest.raises(KubectlError) as refused:
        kubectl.create(
            queue(unique_name("team"), parent=dept, guarantee={"resource": {"cpu": "6"}})
        )
    assert f"the children of {dept} would have guarantee cpu 6 in total" in str(refused.value)
    assert "validate-queues.sluice.dev" in str(refused.value)


def test_an_open_queue_cannot_be_deleted(webhooks: int, kubectl: Kubectl) -> None:
    name = unique_name("q")
    kubectl.create(queue(name))
    with pytest.raises(KubectlError) as refused:
        kubectl.delete("queue", name)
    assert "only a Closed queue can be deleted" in str(refused.value)


def test_jobs_are_suspended_and_checked_against_their_queue(
    webhooks: int, kubectl: Kubectl, namespace: str
) -> None:
    leaf = unique_name("leaf")
    kubectl.create(queue(leaf))
    kubectl.create(job("ok", namespace, leaf))
    stored = kubectl.get("job", "ok", namespace)
    assert stored["spec"]["suspend"] is True
    with pytest.raises(KubectlError) as refused:
        kubectl.create(job("lost", namespace, "no-such-queue"))
    assert f"job {namespace}/lost: queue no-such-queue does not exist" in str(refused.value)


def test_a_tenant_cannot_unsuspend_a_managed_job(
    webhooks: int, kubectl: Kubectl, namespace: str
) -> None:
    leaf = unique_name("leaf")
    kubectl.create(queue(leaf))
    kubectl.create(job("held", namespace, leaf))
    with pytest.raises(KubectlError) as refused:
        kubectl.run(
            "patch",
            "job",
            "held",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"spec":{"suspend":false}}',
        )
    assert "only sluice may clear spec.suspend" in str(refused.value)


def test_unlabelled_jobs_in_a_default_queue_namespace_join_that_queue(
    webhooks: int, kubectl: Kubectl, namespace: str
) -> None:
    leaf = unique_name("leaf")
    kubectl.create(queue(leaf))
    kubectl.run("label", "namespace", namespace, f"sluice.dev/default-queue={leaf}")
    kubectl.create(job("plain", namespace, None))
    stored = kubectl.get("job", "plain", namespace)
    assert stored["metadata"]["labels"]["sluice.dev/queue-name"] == leaf
    assert stored["spec"]["suspend"] is True


def test_closing_a_parent_stops_jobs_in_its_subtree_at_once(
    webhooks: int, kubectl: Kubectl, namespace: str
) -> None:
    """No operator runs here: nothing cascades the close to the leaf nor writes a status, and
    the leaf must still refuse jobs from the moment its parent is closed."""
    dept, mid, leaf = unique_name("dept"), unique_name("mid"), unique_name("leaf")
    kubectl.create(queue(dept))
    kubectl.create(queue(mid, parent=dept))
    kubectl.create(queue(leaf, parent=mid))
    kubectl.create(job("before", namespace, leaf))
    kubectl.run("patch", "queue", dept, "--type=merge", "-p", '{"spec":{"state":"Closed"}}')
    with pytest.raises(KubectlError) as refused:
        kubectl.create(job("after", namespace, leaf))
    assert (
        f"job {namespace}/after: queue {leaf} is Closing because its ancestor {dept} is Closed"
        in str(refused.value)
    )
    with pytest.raises(KubectlError) as refused:
        kubectl.create(queue(unique_name("sub"), parent=mid))
    assert f"while its ancestor {dept} is Closed; open {dept} first" in str(refused.value)
