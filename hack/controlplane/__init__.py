"""A local Kubernetes cluster for sluice's tests and local development: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, and KWOK running pods on fake nodes.

Used by hack/cluster-up, hack/cluster-down, hack/dev-up, hack/demo, the tests/e2e fixtures
and the benchmarks. The binaries come from hack/build-binaries; see the module docstrings for
layout.
"""

from . import kwok
from .binaries import BinariesMissing, build, find_binaries
from .clients import (
    install_crds,
    issue_serving_cert,
    service_account_kubeconfig,
    user_kubeconfig,
)
from .cluster import Cluster, ControlPlane, ControlPlaneError

__all__ = [
    "BinariesMissing",
    "Cluster",
    "ControlPlane",
    "ControlPlaneError",
    "build",
    "find_binaries",
    "install_crds",
    "issue_serving_cert",
    "kwok",
    "service_account_kubeconfig",
    "user_kubeconfig",
]
