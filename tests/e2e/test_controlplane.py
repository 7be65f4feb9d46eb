"""The e2e control plane is real: CRD schema, CEL, RBAC and webhooks are enforced
by a real kube-apiserver, and the chart renders into objects it accepts."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .helpers import (
    CRD_DIR,
    REPO,
    Kubectl,
    KubectlError,
    controlplane,
    queue,
    review_server,
    unique_name,
    wait_for,
)

QUEUE_CRD = "queues.scheduling.sluice.dev"
CHART = REPO / "charts" / "sluice"


def _crd_manifest() -> dict[str, Any]:
    for path in sorted(CRD_DIR.glob("*.y*ml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and document.get("metadata", {}).get("name") == QUEUE_CRD:
                return dict(document)
    raise AssertionError(f"no CRD named {QUEUE_CRD} in {CRD_DIR}")


def _cel_rules(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield from node.get("x-kubernetes-validations", [])
        for value in node.values():
            yield from _cel_rules(value)
    elif isinstance(node, list):
        for value in node:
            yield from _cel_rules(value)


def _cel_message(applies: Callable[[str], bool]) -> str:
    """The message of the CRD's own CEL rule whose expression satisfies `applies`."""
    for rule in _cel_rules(_crd_manifest()):
        if applies(rule.get("rule", "")) and "message" in rule:
            return str(rule["message"])
    raise AssertionError("the Queue CRD has no such CEL rule with a message")


def _spec_defaults() -> dict[str, Any]:
    """Every default the CRD declares for a top-level spec field."""
    schema = _crd_manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    fields = schema["properties"]["spec"]["properties"]
    return {name: field["default"] for name, field in fields.items() if "default" in field}


# -- the CRD ---------------------------------------------------------------------------------


def test_queue_crd_is_established(kubectl: Kubectl) -> None:
    crd = kubectl.get("crd", QUEUE_CRD)
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions.get("Established") == "True"
    assert conditions.get("NamesAccepted") == "True"
    assert crd["spec"]["scope"] == "Cluster"
    assert "sq" in crd["spec"]["names"]["shortNames"]
    served = {v["name"] for v in crd["spec"]["versions"] if v["served"]}
    assert "v1beta1" in served


def test_the_api_server_reports_the_pinned_release(kubectl: Kubectl) -> None:
    pinned = controlplane.binaries.pins().kubernetes
    version = kubectl.json("version")
    assert version["serverVersion"]["gitVersion"] == pinned
    assert version["clientVersion"]["gitVersion"] == pinned


def test_valid_queue_is_stored_with_schema_defaults(kubectl: Kubectl) -> None:
    name = unique_name("defaults")
    kubectl.apply(queue(name, capability={"cpu": "4", "memory": "8Gi"}))
    stored = kubectl.get("sq", name)["spec"]
    assert stored["weight"] == 1
    assert stored["reclaimable"] is True
    assert stored["state"] == "Open"
    assert stored["dequeueStrategy"] == "traverse"
    assert stored["capability"] == {"cpu": "4", "memory": "8Gi"}
    for field, default in _spec_defaults().items():
        assert stored[field] == default, field
    kubectl.delete("queue", name)


def test_explicit_values_are_kept(kubectl: Kubectl) -> None:
    name = unique_name("explicit")
    kubectl.apply(
        queue(
            name,
            weight=65535,
            state="Closed",
            dequeueStrategy="fifo",
            priority=0,
            reclaimable=False,
            guarantee={"resource": {"cpu": "500m"}},
        )
    )
    stored = kubectl.get("queue", name)["spec"]
    assert (stored["weight"], stored["state"], stored["dequeueStrategy"]) == (
        65535,
        "Closed",
        "fifo",
    )
    assert stored["reclaimable"] is False
    assert stored["guarantee"] == {"resource": {"cpu": "500m"}}
    kubectl.delete("queue", name)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"state": "Paused"},
            ['spec.state: Unsupported value: "Paused"', '"Open"', '"Closed"'],
            id="state-not-in-enum",
        ),
        pytest.param(
            {"weight": 0},
            ["spec.weight: Invalid value: 0", "greater than or equal to 1"],
            id="weight-zero",
        ),
        pytest.param(
            {"weight": 65536},
            ["spec.weight: Invalid value: 65536", "less than or equal to 65535"],
            id="weight-too-big",
        ),
        pytest.param(
            {"dequeueStrategy": "random"},
            ['spec.dequeueStrategy: Unsupported value: "random"'],
            id="dequeue-strategy-not-in-enum",
        ),
        pytest.param(
            {"priority": -1},
            ["spec.priority: Invalid value: -1", "greater than or equal to 0"],
            id="negative-priority",
        ),
        pytest.param(
            {"capability": {"cpu": "four"}},
            ["spec.capability.cpu: Invalid value"],
            id="malformed-capability-quantity",
        ),
        pytest.param(
            {"deserved": {"memory": "1GB!"}},
            ["spec.deserved.memory: Invalid value"],
            id="malformed-deserved-quantity",
        ),
        pytest.param(
            {"guarantee": {"resource": {"cpu": "1.2.3"}}},
            ["spec.guarantee.resource.cpu: Invalid value"],
            id="malformed-guarantee-quantity",
        ),
    ],
)
def test_invalid_queue_is_refused_by_the_schema(
    kubectl: Kubectl, spec: dict[str, Any], expected: list[str]
) -> None:
    name = unique_name("invalid")
    with pytest.raises(KubectlError) as refused:
        kubectl.create(queue(name, **spec))
    message = str(refused.value)
    assert f'The Queue "{name}" is invalid' in message
    for fragment in expected:
        assert fragment in message
    assert not kubectl.run("get", "queue", name, "--ignore-not-found").strip()


def test_priority_and_priority_class_name_together_are_refused_by_cel(kubectl: Kubectl) -> None:
    name = unique_name("both-priorities")
    with pytest.raises(KubectlError) as refused:
        kubectl.create(queue(name, priority=10, priorityClassName="high"))
    message = str(refused.value)
    assert f'The Queue "{name}" is invalid' in message
    assert _cel_message(lambda rule: "priorityClassName" in rule) in message
    # Either one alone is fine.
    kubectl.create(queue(name, priority=10), "--dry-run=server")
    kubectl.create(queue(name, priorityClassName="high"), "--dry-run=server")


def test_quantity_rules_are_checked_by_cel(kubectl: Kubectl) -> None:
    """CEL's quantity library runs in the API server: only a real one proves these rules."""
    name = unique_name("quantities")
    with pytest.raises(KubectlError) as refused:
        kubectl.create(queue(name, capability={"cpu": "4"}, deserved={"cpu": "8"}))
    deserved_rule = _cel_message(
        lambda rule: (
            "self.deserved" in rule and "self.capability" in rule and "guarantee" not in rule
        )
    )
    assert deserved_rule in str(refused.value)

    with pytest.raises(KubectlError) as refused:
        kubectl.create(queue(name, capability={"memory": "-1Gi"}))
    assert 'spec.capability[memory]: Invalid value: "-1Gi"' in str(refused.value)
    assert _cel_message(lambda rule: "isLessThan" in rule) in str(refused.value)

    # 2000m == 2: equal quantities in different forms are within the limit.
    kubectl.create(
        queue(name, capability={"cpu": "2"}, deserved={"cpu": "2000m"}), "--dry-run=server"
    )


# -- RBAC ------------------------------------------------------------------------------------


def test_rbac_is_enforced_for_a_user(kubectl: Kubectl, as_user: Callable[..., Kubectl]) -> None:
    user = unique_name("tenant")
    tenant = as_user(user, groups=["sluice-e2e-tenants"])
    assert tenant.run("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}") == user

    with pytest.raises(KubectlError) as refused:
        tenant.create(queue(unique_name("forbidden")))
    assert "Forbidden" in str(refused.value)
    assert f'User "{user}" cannot create resource "queues"' in str(refused.value)
    assert 'in API group "scheduling.sluice.dev" at the cluster scope' in str(refused.value)

    # Granting the right makes the same request pass: authentication is real and
    # the refusal above came from RBAC, not from a broken identity.
    role = unique_name("queue-creator")
    kubectl.run("create", "clusterrole", role, "--verb=create,get", "--resource=queues")
    kubectl.run("create", "clusterrolebinding", role, f"--clusterrole={role}", f"--user={user}")
    allowed = unique_name("allowed")
    wait_for(lambda: tenant.can_i("create", "queues.scheduling.sluice.dev"), what="RBAC grant")
    tenant.create(queue(allowed))
    assert tenant.get("queue", allowed)["metadata"]["name"] == allowed
    assert not tenant.can_i("delete", "queues.scheduling.sluice.dev")
    kubectl.delete("queue", allowed)


def test_rbac_is_enforced_for_a_service_account(
    kubectl: Kubectl, as_service_account: Callable[[str, str], Kubectl], namespace: str
) -> None:
    operator = as_service_account(namespace, "sluice-operator")
    identity = operator.run("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    assert identity == f"system:serviceaccount:{namespace}:sluice-operator"
    with pytest.raises(KubectlError, match="Forbidden"):
        operator.run("get", "queues")
    # Aggregated roles such as `view` stay empty here (no controller-manager aggregates
    # them), so grant an explicit role.
    role = unique_name("job-reader")
    kubectl.run("create", "role", role, "-n", namespace, "--verb=get,list", "--resource=jobs")
    kubectl.run(
        "create",
        "rolebinding",
        role,
        "-n",
        namespace,
        f"--role={role}",
        f"--serviceaccount={namespace}:sluice-operator",
    )
    wait_for(lambda: operator.can_i("list", "jobs.batch", namespace), what="RBAC grant")
    operator.run("get", "jobs", "-n", namespace)
    assert not operator.can_i("list", "jobs.batch", "default")


# -- admission webhooks ----------------------------------------------------------------------


@pytest.fixture
def denying_webhook(
    control_plane: controlplane.Cluster, tmp_path: Path
) -> Iterator[tuple[int, bytes]]:
    """An HTTPS admission webhook on 127.0.0.1 that refuses every object it is asked about,
    naming it."""

    def deny(request: dict[str, Any]) -> dict[str, Any]:
        message = f"e2e webhook refuses {request['name']}"
        return {"allowed": False, "status": {"code": 403, "message": message}}

    with review_server(control_plane, tmp_path, deny) as port:
        yield port, control_plane.ca_cert.read_bytes()


def test_validating_webhook_on_loopback_is_called(
    kubectl: Kubectl, denying_webhook: tuple[int, bytes]
) -> None:
    port, ca_bundle = denying_webhook
    label = unique_name("deny")
    config = unique_name("e2e-deny")
    kubectl.create(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": config},
            "webhooks": [
                {
                    "name": "deny.e2e.sluice.dev",
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{port}/validate/queues",
                        "caBundle": base64.b64encode(ca_bundle).decode(),
                    },
                    "rules": [
                        {
                            "apiGroups": ["scheduling.sluice.dev"],
                            "apiVersions": ["v1beta1"],
                            "operations": ["CREATE"],
                            "resources": ["queues"],
                        }
                    ],
                    # Only objects carrying this run's label: other tests are unaffected.
                    "objectSelector": {"matchLabels": {"e2e.sluice.dev/deny": label}},
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "timeoutSeconds": 5,
                }
            ],
        }
    )
    try:
        marked = queue(unique_name("marked"))
        marked["metadata"]["labels"] = {"e2e.sluice.dev/deny": label}

        def refused() -> str | None:
            try:
                kubectl.create(marked, "--dry-run=server")
            except KubectlError as error:
                return str(error)
            return None

        message = wait_for(refused, timeout=20, what="the webhook to take effect")
        assert f"e2e webhook refuses {marked['metadata']['name']}" in message
        assert 'admission webhook "deny.e2e.sluice.dev" denied the request' in message
        kubectl.create(queue(unique_name("unmarked")), "--dry-run=server")
    finally:
        kubectl.delete("validatingwebhookconfiguration", config)


# -- the chart -------------------------------------------------------------------------------


def _helm(helm: Path, *args: str) -> str:
    result = subprocess.run([str(helm), *args], text=True, capture_output=True, timeout=60)
    assert result.returncode == 0, f"helm {' '.join(args)} failed:\n{result.stdout}{result.stderr}"
    return result.stdout


def test_helm_lint_passes(helm: Path) -> None:
    output = _helm(helm, "lint", "--strict", str(CHART))
    assert "1 chart(s) linted, 0 chart(s) failed" in output


def test_helm_template_renders_the_crds_from_crds_dir(helm: Path, kubectl: Kubectl) -> None:
    rendered = _helm(helm, "template", "sluice", str(CHART))
    documents = [d for d in yaml.safe_load_all(rendered) if d]
    crds = [d for d in documents if d["kind"] == "CustomResourceDefinition"]
    names = [c["metadata"]["name"] for c in crds]
    assert names == ["flavors.scheduling.sluice.dev", QUEUE_CRD, "topologies.scheduling.sluice.dev"]
    assert crds[1]["spec"] == _crd_manifest()["spec"]
    assert all(c["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep" for c in crds)
    # The rendered chart is acceptable to the API server as it stands.
    kubectl.apply(rendered, "--server-side", "--force-conflicts", "--dry-run=server")


def test_helm_template_can_leave_crds_out(helm: Path) -> None:
    rendered = _helm(helm, "template", "sluice", str(CHART), "--set", "crds.install=false")
    kinds = [d["kind"] for d in yaml.safe_load_all(rendered) if d]
    assert "CustomResourceDefinition" not in kinds
