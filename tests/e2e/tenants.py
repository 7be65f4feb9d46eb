"""Tenants for the e2e tests: real users (client certificates, service accounts) with rights
only in their namespace, the chart's queue-reader role, and sluice running as in a cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import devenv
import pytest
import yaml

from .components import sluice_system
from .helpers import Kubectl, KubectlError, controlplane, unique_name, wait_for

TENANTS = "e2e-tenants"
CHART = Path(__file__).parents[2] / "charts" / "sluice"
PROTECTORS = devenv.PROTECTED_JOB_USERS[1]


@pytest.fixture(scope="module")
def system(
    control_plane: controlplane.Cluster,
    kubectl: Kubectl,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    # The chart's own queue-reader role, bound to the tenants' group.
    rendered = subprocess.run(
        [
            str(control_plane.helm),
            "template",
            "e2e",
            str(CHART),
            "--show-only=templates/rbac.yaml",
            f"--set=tenants.queueReaderGroups={{{TENANTS}}}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    readers = [
        doc
        for doc in yaml.safe_load_all(rendered)
        if doc and doc["metadata"]["name"] == "e2e-sluice-queue-reader"
    ]
    assert [d["kind"] for d in readers] == ["ClusterRole", "ClusterRoleBinding"]
    for doc in readers:
        kubectl.apply(doc)
    with sluice_system(control_plane, kubectl, tmp_path_factory.mktemp("tenancy"), "tenancy"):
        yield


def namespace_role(kubectl: Kubectl, namespace: str, subjects: list[dict[str, str]]) -> None:
    """What a tenant may do in their namespace, and nothing cluster-wide: Jobs, their pods
    (including resize) and Events."""
    kubectl.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "tenant", "namespace": namespace},
            "rules": [
                {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["*"]},
                {
                    "apiGroups": [""],
                    "resources": ["pods", "pods/resize"],
                    "verbs": ["get", "list", "watch", "patch", "update"],
                },
                {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]},
            ],
        }
    )
    kubectl.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "tenant", "namespace": namespace},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "tenant",
            },
            "subjects": subjects,
        }
    )


class Tenant:
    def __init__(self, kubectl: Kubectl, namespace: str) -> None:
        self.kubectl = kubectl
        self.namespace = namespace

    def sluice(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        """The CLI as this tenant, installed as a kubectl plugin (`kubectl sluice ...`)."""
        bin_dir = str(Path(sys.executable).parent)
        result = subprocess.run(
            [str(self.kubectl.binary), "sluice", *args, f"--kubeconfig={self.kubectl.kubeconfig}"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"},
        )
        if ok:
            assert result.returncode == 0, result.stderr
        return result

    def refused(self, *args: str) -> str:
        with pytest.raises(KubectlError) as err:
            self.kubectl.run(*args)
        return str(err.value)


@pytest.fixture
def alice(
    system: None,
    kubectl: Kubectl,
    namespace: str,
    as_user: Callable[..., Kubectl],
) -> Tenant:
    user = unique_name("alice")
    namespace_role(
        kubectl,
        namespace,
        [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    )
    tenant = as_user(user, groups=[TENANTS])
    wait_for(lambda: tenant.can_i("create", "jobs", namespace), what="alice's role")
    return Tenant(tenant, namespace)
