"""A living local cluster for the end-to-end tests: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and KWOK (hack/controlplane).

One cluster per pytest session (per xdist worker), started from the binaries
hack/build-binaries caches, with the CRDs from crds/ installed. Jobs get pods,
kube-scheduler binds them, KWOK runs them on fake nodes (kwok.fake_node) and the
Job controller completes a Job whose pods succeed (kwok.pod_template's
complete_after). Garbage collection runs and namespaces finish deleting, so a
test's namespace is deleted after it; cluster-scoped objects (nodes, queues)
still carry unique names, as tests share the cluster.

Missing binaries fail the tests rather than skip them: CI counts a skip as a
failure, and a silently skipped e2e suite proves nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from .helpers import CRD_DIR, SUMMARY, Kubectl, controlplane, unique_name


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in terminalreporter.config.stash.get(SUMMARY, []):
        terminalreporter.write_line(line)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.Cluster]:
    """The running cluster: server URL, admin kubeconfig, CA, binaries."""
    try:
        controlplane.find_binaries()
    except controlplane.BinariesMissing as error:
        pytest.fail(f"{error}. The e2e tests need them and do not skip.", pytrace=False)
    # Everything under pytest's temp dir, and the processes die with pytest: an
    # interrupted session leaves nothing running and nothing outside that dir.
    state_dir = tmp_path_factory.mktemp("controlplane")
    plane = controlplane.ControlPlane(state_dir, tie_to_parent=True, data_root=state_dir)
    cluster = plane.up()
    try:
        controlplane.install_crds(cluster, CRD_DIR)
        yield cluster
    finally:
        plane.down()


@pytest.fixture(scope="session")
def kubectl(control_plane: controlplane.Cluster) -> Kubectl:
    """kubectl as the cluster admin (group system:masters)."""
    return Kubectl(control_plane.kubectl, control_plane.kubeconfig)


@pytest.fixture(scope="session")
def helm(control_plane: controlplane.Cluster) -> Path:
    return control_plane.helm


@pytest.fixture(scope="session")
def as_user(
    control_plane: controlplane.Cluster,
) -> Callable[..., Kubectl]:
    """as_user("alice", groups=["team-a"]) -> kubectl authenticated as alice.

    Authentication is a client certificate (CN=user, O=groups) signed by the
    cluster CA; what alice may do is up to RBAC, as in a real cluster.
    """

    def make(user: str, groups: Sequence[str] = ()) -> Kubectl:
        path = controlplane.user_kubeconfig(control_plane, user, list(groups))
        return Kubectl(control_plane.kubectl, path)

    return make


@pytest.fixture(scope="session")
def as_service_account(
    control_plane: controlplane.Cluster,
) -> Callable[[str, str], Kubectl]:
    """as_service_account(namespace, name) -> kubectl with a TokenRequest token.

    Creates the namespace and ServiceAccount when missing.
    """

    def make(namespace: str, name: str) -> Kubectl:
        path = controlplane.service_account_kubeconfig(control_plane, namespace, name)
        return Kubectl(control_plane.kubectl, path)

    return make


@pytest.fixture
def namespace(kubectl: Kubectl) -> Iterator[str]:
    """A fresh namespace for one test, deleted (with its Jobs and pods) after it."""
    name = unique_name("e2e")
    kubectl.run("create", "namespace", name)
    yield name
    kubectl.delete("namespace", name)


@pytest.fixture
def kubeconfig_env(control_plane: controlplane.Cluster, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point KUBECONFIG at the admin kubeconfig for in-process clients (Kopf, kubernetes)."""
    monkeypatch.setenv("KUBECONFIG", str(control_plane.kubeconfig))
    return control_plane.kubeconfig
