"""The Helm chart: rendered with non-default values, installed into the real API server with
the components running locally (webhook.url), RBAC exactly as needed, upgrade and uninstall."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .components import Operator, webhook_server
from .helpers import REPO, Kubectl, KubectlError, controlplane, wait_for
from .scenario import Scenario

CHART = REPO / "charts" / "sluice"
RELEASE, NAMESPACE = "sluice", "sluice-system"


def helm_run(helm: Path, cluster: controlplane.Cluster, *args: str) -> str:
    result = subprocess.run(
        [str(helm), f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def render(helm: Path, *sets: str) -> list[dict[str, Any]]:
    args = [str(helm), "template", RELEASE, str(CHART), "-n", NAMESPACE]
    for item in sets:
        args += ["--set", item]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def test_default_render_is_secure_and_complete(helm: Path) -> None:
    docs = render(helm)
    deployments = {d["metadata"]["name"]: d for d in by_kind(docs, "Deployment")}
    assert set(deployments) == {"sluice-operator", "sluice-webhooks"}
    for deployment in deployments.values():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        container = pod["containers"][0]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert deployment["spec"]["replicas"] == 2
        # Ready once the caches are listed; live while the process works: two endpoints.
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    secret = by_kind(docs, "Secret")[0]
    assert set(secret["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    for config in by_kind(docs, "ValidatingWebhookConfiguration") + by_kind(
        docs, "MutatingWebhookConfiguration"
    ):
        for hook in config["webhooks"]:
            assert hook["clientConfig"]["service"]["name"] == "sluice-webhooks"
            assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
            assert hook["failurePolicy"] == "Fail" and hook["timeoutSeconds"] == 5
            excluded = hook["namespaceSelector"]["matchExpressions"][0]["values"]
            assert excluded == ["kube-system", NAMESPACE]
    assert by_kind(docs, "PodDisruptionBudget")[0]["spec"]["minAvailable"] == 1


def test_non_default_values_render_cert_manager_resources_and_tolerations(helm: Path) -> None:
    docs = render(
        helm,
        "certificates.certManager.enabled=true",
        "certificates.certManager.issuerRef.name=corp-ca",
        "operator.resources.limits.memory=3Gi",
        "webhooks.tolerations[0].key=dedicated",
        "webhooks.tolerations[0].operator=Exists",
        "operator.tolerations[0].key=dedicated",
        "operator.tolerations[0].operator=Exists",
        "scheduler.config=actions: enqueue\\, allocate",
    )
    assert by_kind(docs, "Secret") == []
    certificate = by_kind(docs, "Certificate")[0]
    assert certificate["spec"]["issuerRef"]["name"] == "corp-ca"
    assert "sluice-webhooks.sluice-system.svc" in certificate["spec"]["dnsNames"]
    for config in by_kind(docs, "ValidatingWebhookConfiguration"):
        assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
            "sluice-system/sluice-webhooks"
        )
        assert all("caBundle" not in h["clientConfig"] for h in config["webhooks"])
    deployments = {d["metadata"]["name"]: d for d in by_kind(docs, "Deployment")}
    operator = deployments["sluice-operator"]["spec"]["template"]["spec"]
    assert operator["containers"][0]["resources"]["limits"]["memory"] == "3Gi"
    for deployment in deployments.values():
        tolerations = deployment["spec"]["template"]["spec"]["tolerations"]
        assert tolerations == [{"key": "dedicated", "operator": "Exists"}]
    config_map = by_kind(docs, "ConfigMap")[0]
    assert config_map["data"]["scheduler.yaml"] == "actions: enqueue, allocate"


@pytest.fixture(scope="module")
def installed(
    control_plane: controlplane.Cluster,
    kubectl: Kubectl,
    helm: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[int]:
    """The chart installed with both components off and the API server pointed at a webhook
    server on 127.0.0.1; the CRD the fixture installed is adopted by the release."""
    kubectl.run("create", "namespace", NAMESPACE, check=False)
    crd = "queues.scheduling.sluice.dev"
    kubectl.run("label", "crd", crd, "app.kubernetes.io/managed-by=Helm", "--overwrite")
    kubectl.run(
        "annotate",
        "crd",
        crd,
        f"meta.helm.sh/release-name={RELEASE}",
        f"meta.helm.sh/release-namespace={NAMESPACE}",
        "--overwrite",
    )
    workdir = tmp_path_factory.mktemp("chart")
    ca = base64.b64encode(control_plane.ca_cert.read_bytes()).decode()
    with webhook_server(control_plane, workdir) as port:
        values = workdir / "values.yaml"
        values.write_text(
            json.dumps(
                {
                    "operator": {"enabled": False},
                    "webhooks": {
                        "enabled": False,
                        "url": f"https://127.0.0.1:{port}",
                        "caBundle": base64.b64decode(ca).decode(),
                    },
                }
            )
        )
        helm_run(
            helm,
            control_plane,
            "install",
            RELEASE,
            str(CHART),
            "-n",
            NAMESPACE,
            "-f",
            str(values),
            "--wait",
        )
        try:
            yield port
        finally:
            helm_run(helm, control_plane, "uninstall", RELEASE, "-n", NAMESPACE)


def test_install_then_each_account_can_do_exactly_what_it_needs(
    installed: int, kubectl: Kubectl, as_service_account: Any
) -> None:
    crd = kubectl.get("crd", "queues.scheduling.sluice.dev")
    assert any(
        c["type"] == "Established" and c["status"] == "True" for c in crd["status"]["conditions"]
    )
    operator = as_service_account(NAMESPACE, "sluice-operator")
    webhooks = as_service_account(NAMESPACE, "sluice-webhooks")
    assert operator.can_i("patch", "jobs.batch", "default")
    assert operator.can_i("patch", "queues.scheduling.sluice.dev/status")
    assert operator.can_i("update", "leases.coordination.k8s.io", NAMESPACE)
    assert not operator.can_i("delete", "pods", "default")  # forbidden: not its business
    assert not operator.can_i("get", "secrets", NAMESPACE)
    assert webhooks.can_i("list", "queues.scheduling.sluice.dev")
    assert not webhooks.can_i("patch", "jobs.batch", "default")  # forbidden: only the operator
    assert not webhooks.can_i("update", "queues.scheduling.sluice.dev/status")


def test_the_journey_with_the_charts_rbac_and_webhooks(
    installed: int,
    control_plane: controlplane.Cluster,
    kubectl: Kubectl,
    namespace: str,
    tmp_path: Path,
) -> None:
    # The operator runs locally as the chart's service account: its RBAC must be enough.
    kubeconfig = controlplane.service_account_kubeconfig(
        control_plane, NAMESPACE, "sluice-operator"
    )
    op = Operator.with_kubeconfig(control_plane, kubeconfig, tmp_path, "chart-operator")
    try:
        wait_for(
            lambda: kubectl.run("get", "queue", "root", "--ignore-not-found", "-o", "name"),
            timeout=30,
            what="root, created by the operator",
        )
        s = Scenario(kubectl, namespace)
        s.node(4)
        s.queue("team", capability={s.resource: "2"})
        s.job("fits", "team", 2)
        s.job("waits", "team", 2)
        s.wait_admitted("fits", timeout=40)
        reason = wait_for(lambda: s.annotation("waits", "pending-reason"), what="a reason")
        assert "capability 2" in reason
        with pytest.raises(KubectlError) as refused:
            kubectl.run(
                "patch",
                "job",
                "waits",
                "-n",
                namespace,
                "--type=merge",
                "-p",
                '{"spec":{"suspend":false}}',
            )
        assert "only sluice may clear spec.suspend" in str(refused.value)
        kubectl.run(
            "patch", "queue", s.name("team"), "--type=merge", "-p", '{"spec":{"state":"Closed"}}'
        )
        wait_for(lambda: s.queue_status("team").get("state") == "Closing", what="Closing")
        with pytest.raises(KubectlError) as closed:
            s.job("late", "team", 1)
        assert "it accepts no new jobs" in str(closed.value)
    finally:
        op.stop()


def test_upgrade_then_uninstall_leaves_no_webhook_behind(
    installed: int, control_plane: controlplane.Cluster, helm: Path, kubectl: Kubectl
) -> None:
    helm_run(
        helm,
        control_plane,
        "upgrade",
        RELEASE,
        str(CHART),
        "-n",
        NAMESPACE,
        "--reuse-values",
        "--set",
        "webhooks.timeoutSeconds=7",
    )
    config = kubectl.get("validatingwebhookconfiguration", f"{RELEASE}-sluice")
    assert {h["timeoutSeconds"] for h in config["webhooks"]} == {7}
    helm_run(helm, control_plane, "uninstall", RELEASE, "-n", NAMESPACE)
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        assert not kubectl.run(
            "get", kind, f"{RELEASE}-sluice", "--ignore-not-found", "-o", "name"
        ).strip()
    assert kubectl.get("crd", "queues.scheduling.sluice.dev")  # kept: Queues survive
    # put it back for the module fixture's own uninstall
    helm_run(
        helm,
        control_plane,
        "install",
        RELEASE,
        str(CHART),
        "-n",
        NAMESPACE,
        "--set",
        "operator.enabled=false",
        "--set",
        "webhooks.enabled=false",
        "--set",
        "crds.install=false",
    )
