"""A local Kubernetes cluster for sluice's tests and local development: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, and KWOK running pods on fake nodes.

Used by hack/cluster-up, hack/cluster-down, hack/dev-up, hack/demo, the tests/e2e fixtures
and the benchmarks. The binaries come from hack/build-binaries; see the module docstrings for
layout.
"""

from . import kwok
from .binaries import (
    CONTROLLERS,
    BinariesMissing,
    Controller,
    build,
    build_controllers,
    crd_files,
    find_binaries,
    find_controller,
    module_source,
)
from .clients import (
    install_crds,
    issue_serving_cert,
    service_account_kubeconfig,
    user_kubeconfig,
)
from .cluster import Cluster, ControlPlane, ControlPlaneError

__all__ = [
    "CONTROLLERS",
    "BinariesMissing",
    "Cluster",
    "ControlPlane",
    "ControlPlaneError",
    "Controller",
    "build",
    "build_controllers",
    "crd_files",
    "find_binaries",
    "find_controller",
    "install_crds",
    "issue_serving_cert",
    "kwok",
    "module_source",
    "service_account_kubeconfig",
    "user_kubeconfig",
]
