"""The Helm chart: `helm lint --strict`, values refused by the schema, rendered with
non-default values and name overrides, two releases in one namespace, installed into the real
API server with the components running locally (webhook.url) and its NOTES printed, RBAC
exactly as needed, upgrade and uninstall."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluice.api.config import DEFAULT_CONFIG, load_scheduler_config

from .components import Operator, webhook_server
from .helpers import REPO, Kubectl, KubectlError, controlplane, wait_for
from .scenario import Scenario

CHART = REPO / "charts" / "sluice"
RELEASE, NAMESPACE = "sluice", "sluice-system"
FULLNAME = "sluice"  # the release's name already contains the chart's: no -sluice suffix


def helm_run(helm: Path, cluster: controlplane.Cluster, *args: str) -> str:
    result = subprocess.run(
        [str(helm), f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def template_args(helm: Path, release: str, sets: tuple[str, ...]) -> list[str]:
    args = [str(helm), "template", release, str(CHART), "-n", NAMESPACE]
    for item in sets:
        args += ["--set", item]
    return args


def render(helm: Path, *sets: str, release: str = RELEASE) -> list[dict[str, Any]]:
    args = template_args(helm, release, sets)
    out = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def refusal(helm: Path, *sets: str) -> str:
    """What `helm template` says when it refuses these values."""
    result = subprocess.run(
        template_args(helm, RELEASE, sets), capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0, f"rendered despite {sets}"
    return result.stderr


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in by_kind(docs, kind) if d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {[d['metadata']['name'] for d in by_kind(docs, kind)]}"
    return found[0]


def args_of(deployment: dict[str, Any]) -> list[str]:
    return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])


def selects(selector: dict[str, str], deployment: dict[str, Any]) -> bool:
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    return selector == deployment["spec"]["selector"]["matchLabels"] and all(
        labels.get(k) == v for k, v in selector.items()
    )


def assert_references_resolve(docs: list[dict[str, Any]]) -> None:
    """Every name one rendered object gives for another is an object of the render: the
    names are built in one place, whatever the overrides."""
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    secrets = {n for k, n in names if k == "Secret"} | {
        c["spec"]["secretName"] for c in by_kind(docs, "Certificate")
    }
    deployments = by_kind(docs, "Deployment")
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        assert ("ServiceAccount", pod["serviceAccountName"]) in names
        for volume in pod["volumes"]:
            if "secret" in volume:
                assert volume["secret"]["secretName"] in secrets
    for binding in by_kind(docs, "RoleBinding") + by_kind(docs, "ClusterRoleBinding"):
        assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) in names
        for subject in binding["subjects"]:
            if subject["kind"] == "ServiceAccount":
                assert ("ServiceAccount", subject["name"]) in names
    for config in by_kind(docs, "ValidatingWebhookConfiguration") + by_kind(
        docs, "MutatingWebhookConfiguration"
    ):
        for hook in config["webhooks"]:
            if "service" in hook["clientConfig"]:
                assert ("Service", hook["clientConfig"]["service"]["name"]) in names
    for kind in ("Service", "PodDisruptionBudget"):
        for obj in by_kind(docs, kind):
            selector = obj["spec"]["selector"]
            selector = selector.get("matchLabels", selector)
            assert [d for d in deployments if selects(selector, d)], f"{kind} selects no pods"
    for monitor in by_kind(docs, "ServiceMonitor"):
        wanted = monitor["spec"]["selector"]["matchLabels"]
        scraped = [
            s for s in by_kind(docs, "Service") if wanted.items() <= s["metadata"]["labels"].items()
        ]
        ports = {port["name"] for s in scraped for port in s["spec"]["ports"]}
        for endpoint in monitor["spec"]["endpoints"]:
            assert endpoint["port"] in ports, f"no Service scraped has port {endpoint['port']}"
            if "tlsConfig" in endpoint:
                assert endpoint["tlsConfig"]["ca"]["secret"]["name"] in secrets
                assert endpoint["tlsConfig"]["serverName"].split(".")[0] in {
                    s["metadata"]["name"] for s in scraped
                }
    for operator in [d for d in deployments if args_of(d)[:2] == ["operator", "run"]]:
        flags = dict(a.removeprefix("--").split("=", 1) for a in args_of(operator)[2:])
        assert ("ConfigMap", flags["config-map-name"]) in names
        assert ("ServiceAccount", operator["spec"]["template"]["spec"]["serviceAccountName"]) in (
            names
        )
        role = [
            r
            for r in by_kind(docs, "Role")
            if r["metadata"]["name"] == operator["metadata"]["name"]
        ]
        granted = {
            (resource, name)
            for rule in role[0]["rules"]
            for resource in rule["resources"]
            for name in rule.get("resourceNames", [])
        }
        assert granted == {
            ("configmaps", flags["config-map-name"]),
            ("leases", flags["lease-name"]),
        }


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
    for component in ("operator", "webhooks"):
        budget = named(docs, "PodDisruptionBudget", f"{FULLNAME}-{component}")
        assert budget["spec"]["minAvailable"] == 1  # of 2 replicas: a drain goes one at a time
    assert_references_resolve(docs)


def test_each_kind_of_workload_turned_on_gets_its_rules_watch_and_rbac(helm: Path) -> None:
    def hooks(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
        return {h["name"]: h for h in by_kind(docs, kind)[0]["webhooks"]}

    default = render(helm)
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert not [n for n in hooks(default, kind) if "workloads" in n]
    for name in ("sluice-operator", "sluice-webhooks"):
        kinds = [a for a in args_of(named(default, "Deployment", name)) if "workload-kind" in a]
        assert kinds == ["--workload-kind=Job"]
    docs = render(helm, "workloads.jobset.enabled=true", "workloads.pytorchjob.enabled=true")
    for name in ("sluice-operator", "sluice-webhooks"):
        kinds = [a for a in args_of(named(docs, "Deployment", name)) if "workload-kind" in a]
        assert kinds == [
            "--workload-kind=Job",
            "--workload-kind=JobSet",
            "--workload-kind=PyTorchJob",
        ]
    validating = hooks(docs, "ValidatingWebhookConfiguration")["validate-workloads.sluice.dev"]
    assert validating["clientConfig"]["service"]["path"] == "/validate/workloads"
    assert [(r["apiGroups"], r["apiVersions"], r["resources"]) for r in validating["rules"]] == [
        (["jobset.x-k8s.io"], ["v1alpha2"], ["jobsets"]),
        (["kubeflow.org"], ["v1"], ["pytorchjobs", "pytorchjobs/scale"]),
    ]
    mutating = hooks(docs, "MutatingWebhookConfiguration")["mutate-workloads.sluice.dev"]
    assert [r["operations"] for r in mutating["rules"]] == [["CREATE"], ["CREATE"]]
    role = named(docs, "ClusterRole", "sluice-operator")
    granted = {(r["apiGroups"][0], r["resources"][0]): r["verbs"] for r in role["rules"]}
    assert granted[("jobset.x-k8s.io", "jobsets")] == ["get", "list", "watch", "patch"]
    assert granted[("kubeflow.org", "pytorchjobs")] == ["get", "list", "watch", "patch"]
    assert ("ray.io", "rayjobs") not in granted
    # The webhooks list them: a queue that holds any may not be deleted.
    role = named(docs, "ClusterRole", "sluice-webhooks")
    granted = {(r["apiGroups"][0], r["resources"][0]): r["verbs"] for r in role["rules"]}
    assert granted[("jobset.x-k8s.io", "jobsets")] == ["list"]
    assert granted[("kubeflow.org", "pytorchjobs")] == ["list", "get"]  # for its /scale
    assert "validate-rayclusters.sluice.dev" not in hooks(docs, "ValidatingWebhookConfiguration")
    assert_references_resolve(docs)
    # RayJobs: the operator reads the RayClusters they run, whose writes the webhook reviews.
    ray = render(helm, "workloads.rayjob.enabled=true")
    role = named(ray, "ClusterRole", "sluice-operator")
    granted = {(r["apiGroups"][0], r["resources"][0]): r["verbs"] for r in role["rules"]}
    assert granted[("ray.io", "rayclusters")] == ["get", "list", "watch"]
    clusters = hooks(ray, "ValidatingWebhookConfiguration")["validate-rayclusters.sluice.dev"]
    assert clusters["clientConfig"]["service"]["path"] == "/validate/rayclusters"
    assert [(r["resources"], r["operations"]) for r in clusters["rules"]] == [
        (["rayclusters"], ["UPDATE"])
    ]
    assert clusters["objectSelector"]["matchExpressions"] == [
        {"key": "sluice.dev/queue-name", "operator": "Exists"}
    ]
    assert_references_resolve(ray)


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
    config_map = named(docs, "ConfigMap", "sluice-scheduler")
    assert config_map["data"]["scheduler.yaml"] == "actions: enqueue, allocate"


_MAPPING = (
    "scheduler.deviceClassMappings[0].name=nvidia.com/gpu",
    "scheduler.deviceClassMappings[0].deviceClassNames[0]=gpu.nvidia.com",
    "scheduler.deviceClassMappings[0].deviceClassNames[1]=a100.nvidia.com",
    "scheduler.deviceClassMappings[1].name=nvidia.com/mig-1g.10gb",
    "scheduler.deviceClassMappings[1].deviceClassNames[0]=mig-1g.10gb.nvidia.com",
)
_MAPPED = {
    "gpu.nvidia.com": "nvidia.com/gpu",
    "a100.nvidia.com": "nvidia.com/gpu",
    "mig-1g.10gb.nvidia.com": "nvidia.com/mig-1g.10gb",
}


@pytest.mark.parametrize(
    ("config", "written", "actions"),
    [
        ("", "", DEFAULT_CONFIG.actions),
        ("actions: enqueue\\, allocate", "actions: enqueue, allocate\n", ("enqueue", "allocate")),
        ("actions: allocate\n", "actions: allocate\n", ("allocate",)),
    ],
)
def test_device_class_mappings_are_written_into_scheduler_yaml(
    helm: Path, config: str, written: str, actions: tuple[str, ...]
) -> None:
    plain = named(render(helm, f"scheduler.config={config}"), "ConfigMap", "sluice-scheduler")
    assert "deviceClassMappings" not in plain["data"]["scheduler.yaml"]
    docs = render(helm, f"scheduler.config={config}", *_MAPPING)
    text = named(docs, "ConfigMap", "sluice-scheduler")["data"]["scheduler.yaml"]
    assert text.startswith(written + "deviceClassMappings:\n")
    loaded = load_scheduler_config(text)  # as the operator and `sluice simulate` read it
    assert dict(loaded.device_mapping.resources) == _MAPPED
    assert loaded.actions == actions and loaded.warnings == ()


def test_operator_reads_dra_objects_and_the_webhooks_do_not(helm: Path) -> None:
    docs = render(helm)
    operator = named(docs, "ClusterRole", "sluice-operator")
    dra = [r for r in operator["rules"] if r["apiGroups"] == ["resource.k8s.io"]]
    assert dra == [
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": [
                "deviceclasses",
                "resourceslices",
                "resourceclaims",
                "resourceclaimtemplates",
            ],
            "verbs": ["get", "list", "watch"],
        }
    ]
    webhooks = named(docs, "ClusterRole", "sluice-webhooks")
    assert not [r for r in webhooks["rules"] if "resource.k8s.io" in r["apiGroups"]]


def test_helm_lint_strict_passes(helm: Path) -> None:
    for sets in (
        (),
        ("certificates.certManager.enabled=true", "certificates.certManager.issuerRef.name=ca"),
        ("operator.enabled=false", "webhooks.enabled=false", "webhooks.url=https://127.0.0.1:1"),
    ):
        result = subprocess.run(
            [str(helm), "lint", "--strict", str(CHART), *(f"--set={s}" for s in sets)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (("operator.replicas=two",), "at '/operator/replicas': got string, want integer"),
        (("webhooks.replicas=0",), "at '/webhooks/replicas': minimum: got 0, want 1"),
        (
            ("webhooks.failurePolicy=Sometimes",),
            "at '/webhooks/failurePolicy': value must be one of 'Fail', 'Ignore'",
        ),
        (("operator.logLevel=verbose",), "at '/operator/logLevel': value must be one of 'debug'"),
        (
            ("webhooks.timeoutSeconds=31",),
            "at '/webhooks/timeoutSeconds': maximum: got 31, want 30",
        ),
        (("operator.metricsPort=0",), "at '/operator/metricsPort': minimum: got 0, want 1"),
        (("crds.keep=yes",), "at '/crds/keep': got string, want boolean"),
        (("operator.replica=3",), "at '/operator': additional properties 'replica' not allowed"),
        (("webhooks.url=http://127.0.0.1:8443",), "at '/webhooks/url': 'http://127.0.0.1:8443'"),
        (
            ("certificates.certManager.enabled=true",),
            "at '/certificates/certManager/issuerRef/name': minLength: got 0, want 1",
        ),
        (
            ("operator.replicas=1",),
            "operator.podDisruptionBudget.minAvailable (1) must be below operator.replicas (1)",
        ),
        (
            ("scheduler.deviceClassMappings[0].name=nvidia.com/gpu",),
            "at '/scheduler/deviceClassMappings/0': missing property 'deviceClassNames'",
        ),
        (
            (
                "scheduler.config=deviceClassMappings: []",
                *_MAPPING,
            ),
            "scheduler.config already holds deviceClassMappings; give the mapping in one place",
        ),
        (
            ("scheduler.config=- allocate", *_MAPPING),
            "scheduler.config must be a block-style YAML mapping to add deviceClassMappings to",
        ),
    ],
)
def test_a_wrong_value_is_refused_naming_it(
    helm: Path, sets: tuple[str, ...], message: str
) -> None:
    assert message in refusal(helm, *sets)


def test_name_overrides_reach_every_name_and_reference(helm: Path) -> None:
    docs = render(helm, "fullnameOverride=corp-queues")
    assert_references_resolve(docs)
    own = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
    assert all(d["metadata"]["name"].startswith("corp-queues") for d in own)
    assert named(docs, "ConfigMap", "corp-queues-scheduler")
    webhooks = named(docs, "Deployment", "corp-queues-webhooks")
    assert "--operator-user=system:serviceaccount:sluice-system:corp-queues-operator" in args_of(
        webhooks
    )

    docs = render(helm, "nameOverride=queues", release="team-b")
    assert_references_resolve(docs)
    own = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
    assert all(d["metadata"]["name"].startswith("team-b-queues") for d in own)
    assert {d["metadata"]["labels"]["app.kubernetes.io/name"] for d in docs} == {"queues"}
    operator = named(docs, "Deployment", "team-b-queues-operator")
    assert operator["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "queues"
    assert "--lease-name=team-b-queues-operator" in args_of(operator)


def test_two_releases_in_one_namespace_share_no_name(helm: Path) -> None:
    first = render(helm)
    second = render(helm, "crds.install=false", release="team-b")
    for docs in (first, second):
        assert_references_resolve(docs)
    names = [{(d["kind"], d["metadata"]["name"]) for d in docs} for docs in (first, second)]
    assert not names[0] & names[1]
    assert named(second, "ConfigMap", "team-b-sluice-scheduler")
    operator = named(second, "Deployment", "team-b-sluice-operator")
    assert "--config-map-name=team-b-sluice-scheduler" in args_of(operator)
    assert "--lease-name=team-b-sluice-operator" in args_of(operator)
    leased = render(helm, "operator.leaseName=corp-lease")
    assert "--lease-name=corp-lease" in args_of(named(leased, "Deployment", "sluice-operator"))
    assert_references_resolve(leased)


def test_pod_metadata_priority_spread_budget_and_metrics_service(helm: Path) -> None:
    sets = ["operator.metricsPort=9191", "webhooks.podDisruptionBudget.minAvailable=50%"]
    for component in ("operator", "webhooks"):
        sets += [
            f"{component}.podAnnotations.team=ml",
            f"{component}.podLabels.cost-center=cc-7",
            # an extra label cannot take the pods out of their own selector
            f"{component}.podLabels.app\\.kubernetes\\.io/component=evil",
            f"{component}.priorityClassName=sluice-critical",
            f"{component}.topologySpreadConstraints[0].maxSkew=1",
            f"{component}.topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
            f"{component}.topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
        ]
    docs = render(helm, *sets)
    assert_references_resolve(docs)
    for component in ("operator", "webhooks"):
        deployment = named(docs, "Deployment", f"{FULLNAME}-{component}")
        selector = deployment["spec"]["selector"]["matchLabels"]
        template = deployment["spec"]["template"]
        assert template["metadata"]["annotations"]["team"] == "ml"
        assert template["metadata"]["labels"]["cost-center"] == "cc-7"
        assert template["metadata"]["labels"]["app.kubernetes.io/component"] == component
        assert template["spec"]["priorityClassName"] == "sluice-critical"
        [spread] = template["spec"]["topologySpreadConstraints"]
        assert spread["labelSelector"] == {"matchLabels": selector}
        assert spread["topologyKey"] == "topology.kubernetes.io/zone"
        budget = named(docs, "PodDisruptionBudget", f"{FULLNAME}-{component}")
        assert budget["spec"]["selector"]["matchLabels"] == selector
    assert named(docs, "PodDisruptionBudget", "sluice-webhooks")["spec"]["minAvailable"] == "50%"
    operator = named(docs, "Deployment", "sluice-operator")
    # the checksum that restarts the operator on a new scheduler.yaml stays beside them
    assert "checksum/scheduler-config" in operator["spec"]["template"]["metadata"]["annotations"]
    container = operator["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "metrics", "containerPort": 9191} in container["ports"]
    service = named(docs, "Service", "sluice-operator-metrics")
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9191, "targetPort": "metrics"}]
    assert service["spec"]["selector"] == operator["spec"]["selector"]["matchLabels"]

    off = render(
        helm,
        "operator.replicas=1",
        "operator.podDisruptionBudget.enabled=false",
        "operator.metricsService.enabled=false",
    )
    assert [d["metadata"]["name"] for d in by_kind(off, "PodDisruptionBudget")] == [
        "sluice-webhooks"
    ]
    assert "sluice-operator-metrics" not in [d["metadata"]["name"] for d in by_kind(off, "Service")]


def test_the_service_monitor_scrapes_the_operator_and_the_webhooks(helm: Path) -> None:
    docs = render(helm, "metrics.serviceMonitor.enabled=true")
    assert_references_resolve(docs)
    [monitor] = by_kind(docs, "ServiceMonitor")
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics", "https"]
    https = monitor["spec"]["endpoints"][1]
    assert https["scheme"] == "https" and https["path"] == "/metrics"
    assert https["tlsConfig"]["serverName"] == "sluice-webhooks.sluice-system.svc"
    # the webhook server runs elsewhere: nothing of it to scrape here
    docs = render(
        helm,
        "metrics.serviceMonitor.enabled=true",
        "webhooks.enabled=false",
        "webhooks.url=https://127.0.0.1:8443",
    )
    assert_references_resolve(docs)
    [monitor] = by_kind(docs, "ServiceMonitor")
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]


@dataclass(frozen=True)
class Installed:
    webhook_port: int
    printed: str  # what `helm install` printed, NOTES included


@pytest.fixture(scope="module")
def installed(
    control_plane: controlplane.Cluster,
    kubectl: Kubectl,
    helm: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Installed]:
    """The chart installed with both components off and the API server pointed at a webhook
    server on 127.0.0.1; the CRDs the fixture installed are adopted by the release."""
    kubectl.run("create", "namespace", NAMESPACE, check=False)
    for crd in (
        "flavors.scheduling.sluice.dev",
        "queues.scheduling.sluice.dev",
        "topologies.scheduling.sluice.dev",
    ):
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
        printed = helm_run(
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
            yield Installed(port, printed)
        finally:
            helm_run(helm, control_plane, "uninstall", RELEASE, "-n", NAMESPACE)


def test_install_prints_what_it_installed_and_the_next_commands(installed: Installed) -> None:
    notes = installed.printed.split("NOTES:", 1)[1]
    assert f"release {RELEASE} in namespace {NAMESPACE}." in notes
    # both components off, the API server sent to the local webhook server
    assert "Operator:  not run in the cluster (operator.enabled=false)" in notes
    assert (
        f"sluice operator run --namespace {NAMESPACE} --lease-name sluice-operator "
        "--config-map-name sluice-scheduler"
    ) in notes
    assert (
        f"the API server calls https://127.0.0.1:{installed.webhook_port} (webhooks.url)" in notes
    )
    assert "Scheduler: ConfigMap sluice-scheduler, the built-in default" in notes
    crds = (
        "flavors.scheduling.sluice.dev, queues.scheduling.sluice.dev,"
        " topologies.scheduling.sluice.dev"
    )
    assert f"CRDs:      {crds}, kept on uninstall." in notes
    after = notes.split("\nNext:\n", 1)[1]
    commands = [line.strip() for line in after.splitlines() if line.startswith("       ")]
    assert commands == [
        "kubectl get sq",
        "kubectl apply -f examples/demo/queues.yaml",
        "sluice queue create team-a --capability cpu=32,memory=128Gi",
        "sluice job list -n NAMESPACE",
        "kubectl sluice job why NAMESPACE/JOB",
    ]
    assert (REPO / "examples" / "demo" / "queues.yaml").exists()


def test_a_second_release_shares_the_namespace(
    installed: Installed,
    control_plane: controlplane.Cluster,
    helm: Path,
    kubectl: Kubectl,
    as_service_account: Any,
) -> None:
    """Helm refuses to install an object another release owns: installing a second release
    beside the first proves that no name is shared; each operator reads only its own."""
    second = "team-b"
    helm_run(
        helm,
        control_plane,
        "install",
        second,
        str(CHART),
        "-n",
        NAMESPACE,
        "--set=crds.install=false",
        "--set=operator.enabled=false",
        "--set=webhooks.enabled=false",
        "--set-string=scheduler.config=actions: enqueue\\, allocate",
    )
    try:
        config_maps = {
            c["metadata"]["name"]: c["data"]["scheduler.yaml"]
            for c in kubectl.json("get", "configmaps", "-n", NAMESPACE)["items"]
            if c["metadata"]["name"].endswith("scheduler")
        }
        assert config_maps == {
            "sluice-scheduler": "",
            "team-b-sluice-scheduler": "actions: enqueue, allocate",
        }
        operator = as_service_account(NAMESPACE, "team-b-sluice-operator")
        assert operator.can_i("get", "configmaps/team-b-sluice-scheduler", NAMESPACE)
        assert not operator.can_i("get", "configmaps/sluice-scheduler", NAMESPACE)
        assert operator.can_i(
            "update", "leases.coordination.k8s.io/team-b-sluice-operator", NAMESPACE
        )
        assert not operator.can_i("update", "leases.coordination.k8s.io/sluice-operator", NAMESPACE)
    finally:
        helm_run(helm, control_plane, "uninstall", second, "-n", NAMESPACE)
    assert kubectl.get("configmap", "sluice-scheduler", NAMESPACE)


def test_an_install_with_a_wrong_value_fails_before_touching_the_cluster(
    installed: Installed, control_plane: controlplane.Cluster, helm: Path
) -> None:
    result = subprocess.run(
        [
            str(helm),
            f"--kubeconfig={control_plane.kubeconfig}",
            "install",
            "wrong",
            str(CHART),
            "-n",
            NAMESPACE,
            "--set=webhooks.timeoutSeconds=fast",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "at '/webhooks/timeoutSeconds': got string, want integer" in result.stderr
    releases = helm_run(helm, control_plane, "list", "-n", NAMESPACE, "-q").split()
    assert releases == [RELEASE]


def test_install_then_each_account_can_do_exactly_what_it_needs(
    installed: Installed, kubectl: Kubectl, as_service_account: Any
) -> None:
    crd = kubectl.get("crd", "queues.scheduling.sluice.dev")
    assert any(
        c["type"] == "Established" and c["status"] == "True" for c in crd["status"]["conditions"]
    )
    operator = as_service_account(NAMESPACE, "sluice-operator")
    webhooks = as_service_account(NAMESPACE, "sluice-webhooks")
    assert operator.can_i("patch", "jobs.batch", "default")
    assert operator.can_i("patch", "queues.scheduling.sluice.dev/status")
    # Flavors: watched, and their status (the nodes that match) written; never their spec.
    flavors = ("flavors.scheduling.sluice.dev", "--subresource=status")
    assert operator.can_i("watch", "flavors.scheduling.sluice.dev")
    assert operator.run("auth", "can-i", "patch", *flavors, check=False).strip() == "yes"
    assert not operator.can_i("patch", "flavors.scheduling.sluice.dev")
    assert webhooks.run("auth", "can-i", "patch", *flavors, check=False).strip() == "no"
    # its own Lease and scheduler ConfigMap, by name: not another release's
    assert operator.can_i("update", "leases.coordination.k8s.io/sluice-operator", NAMESPACE)
    assert operator.can_i("create", "leases.coordination.k8s.io", NAMESPACE)
    assert not operator.can_i(
        "update", "leases.coordination.k8s.io/team-b-sluice-operator", NAMESPACE
    )
    assert operator.can_i("get", "configmaps/sluice-scheduler", NAMESPACE)
    assert not operator.can_i("get", "configmaps/team-b-sluice-scheduler", NAMESPACE)
    # Plain pods: admitted by removing their gate, reclaimed by deleting them.
    assert operator.can_i("patch", "pods", "default")
    assert operator.can_i("delete", "pods", "default")
    assert not operator.can_i("create", "pods", "default")  # forbidden: not its business
    assert not operator.can_i("delete", "jobs.batch", "default")
    assert not operator.can_i("get", "secrets", NAMESPACE)
    # DRA: what devices pods ask and nodes have, read only.
    for kind in ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates"):
        assert operator.can_i("watch", f"{kind}.resource.k8s.io", "default")
        assert not operator.can_i("create", f"{kind}.resource.k8s.io", "default")
        assert not webhooks.can_i("list", f"{kind}.resource.k8s.io", "default")
    assert webhooks.can_i("list", "queues.scheduling.sluice.dev")
    assert not webhooks.can_i("patch", "jobs.batch", "default")  # forbidden: only the operator
    assert not webhooks.can_i("update", "queues.scheduling.sluice.dev/status")


def test_the_journey_with_the_charts_rbac_and_webhooks(
    installed: Installed,
    control_plane: controlplane.Cluster,
    kubectl: Kubectl,
    namespace: str,
    tmp_path: Path,
) -> None:
    # The operator runs locally as the chart's service account: its RBAC must be enough.
    kubeconfig = controlplane.service_account_kubeconfig(
        control_plane, NAMESPACE, "sluice-operator"
    )
    # on the Lease and ConfigMap the chart names: its Role grants no other
    op = Operator.with_kubeconfig(
        control_plane, kubeconfig, tmp_path, "chart-operator", lease_name="sluice-operator"
    )
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
    installed: Installed, control_plane: controlplane.Cluster, helm: Path, kubectl: Kubectl
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
    config = kubectl.get("validatingwebhookconfiguration", FULLNAME)
    assert {h["timeoutSeconds"] for h in config["webhooks"]} == {7}
    helm_run(helm, control_plane, "uninstall", RELEASE, "-n", NAMESPACE)
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        assert not kubectl.run("get", kind, FULLNAME, "--ignore-not-found", "-o", "name").strip()
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
