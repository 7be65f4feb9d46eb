"""A local Kubernetes control plane (etcd + kube-apiserver) for sluice's tests.

Used by hack/cluster-up, hack/cluster-down and the tests/e2e fixtures. The
binaries come from hack/build-binaries; see the module docstrings for layout.
"""

from .binaries import BinariesMissing, build, find_binaries
from .cluster import (
    Cluster,
    ControlPlane,
    ControlPlaneError,
    install_crds,
    issue_serving_cert,
    service_account_kubeconfig,
    user_kubeconfig,
)

__all__ = [
    "BinariesMissing",
    "Cluster",
    "ControlPlane",
    "ControlPlaneError",
    "build",
    "find_binaries",
    "install_crds",
    "issue_serving_cert",
    "service_account_kubeconfig",
    "user_kubeconfig",
]
