"""The parts of the local cluster that make it live: kube-controller-manager, kube-scheduler and
KWOK (which plays the kubelet on fake nodes).

Each runs as its own identity with a client certificate from the cluster CA, as in a kubeadm
cluster: the controller manager as system:kube-controller-manager (its controllers then use
their own service accounts, bound to Kubernetes' bootstrap roles), the scheduler as
system:kube-scheduler, and KWOK as `kwok-controller`, bound to the least it needs
(kwok_rbac below). This module only builds command lines, configuration and manifests;
hack/controlplane/cluster.py starts, watches and stops the processes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CONTROLLER_MANAGER_USER = "system:kube-controller-manager"
SCHEDULER_USER = "system:kube-scheduler"
KWOK_USER = "kwok-controller"

# What a batch cluster needs and tests look at; everything else (endpoints, volumes,
# certificates, quotas, service accounts) stays off. The node-lifecycle controller is what
# lifts the not-ready taint the API server puts on every new node once the node is Ready, and
# taints (then, by the taint-eviction controller, empties) a node whose heartbeat stops, as
# in a real cluster: KWOK renews each fake node's Lease as its heartbeat. The resourceclaim
# controller makes a pod's ResourceClaims from its ResourceClaimTemplates, records their names
# in the pod's status, and, once the pod is done, takes the pod off each claim's reservedFor
# and deletes the claims it made: without it such a pod stays Pending and its devices stay
# allocated. (kube-scheduler allocates the devices; DRA's API, resource.k8s.io/v1, and the
# scheduler's DynamicResources plugin are on by default.)
CONTROLLERS = (
    "job-controller",
    "pod-garbage-collector-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "deployment-controller",
    "replicaset-controller",
    "daemonset-controller",
    "clusterrole-aggregation-controller",
    "ttl-after-finished-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "resourceclaim-controller",
)

# Client-side rate limits for the controller manager and the scheduler. The defaults (20 and
# 50 requests per second) would make a burst of a thousand pods wait on the clients rather
# than on the cluster; production clusters of this size raise them too.
CLIENT_QPS = 200
CLIENT_BURST = 400

KWOK_STAGES = Path(__file__).with_name("kwok-stages.yaml")
# Pod IPs KWOK hands out: clear of the service range (10.0.0.0/24), room for 65k pods.
POD_CIDR = "10.244.0.0/16"
# The address every fake node reports (KWOK's convention: one for all).
NODE_IP = "10.240.0.1"
FAKE_NODE_SELECTOR = "kwok.x-k8s.io/node=fake"
# A kubelet's default: the Lease is renewed every quarter of it.
NODE_LEASE_SECONDS = 40


def _serving(port: int, kubeconfig: Path, ca: Path, cert: Path, key: Path) -> list[str]:
    """A component's own HTTPS endpoint (health, metrics) on 127.0.0.1, its callers checked as
    the API server checks them: client certificates from the cluster CA, RBAC through
    SubjectAccessReviews. The CA is given rather than looked up from kube-system, where this
    API server publishes no front-proxy CA to go with it."""
    return [
        f"--authentication-kubeconfig={kubeconfig}",
        "--authentication-skip-lookup=true",
        f"--client-ca-file={ca}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={cert}",
        f"--tls-private-key-file={key}",
    ]


def controller_manager_command(
    binary: Path, port: int, kubeconfig: Path, ca: Path, cert: Path, key: Path
) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        *_serving(port, kubeconfig, ca, cert, key),
        f"--controllers={','.join(CONTROLLERS)}",
        "--use-service-account-credentials=true",
        # One instance: leader election would only add a Lease write every two seconds.
        "--leader-elect=false",
        f"--kube-api-qps={CLIENT_QPS}",
        f"--kube-api-burst={CLIENT_BURST}",
        "--profiling=false",
    ]


def scheduler_configuration(kubeconfig: Path) -> str:
    """KubeSchedulerConfiguration: the flags for the same settings are deprecated."""
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {
            "kubeconfig": str(kubeconfig),
            "qps": CLIENT_QPS,
            "burst": CLIENT_BURST,
        },
        "leaderElection": {"leaderElect": False},
        "enableProfiling": False,
    }
    return json.dumps(config, indent=2) + "\n"


def scheduler_command(
    binary: Path, port: int, config: Path, kubeconfig: Path, ca: Path, cert: Path, key: Path
) -> list[str]:
    return [str(binary), f"--config={config}", *_serving(port, kubeconfig, ca, cert, key)]


def kwok_command(binary: Path, port: int, kubeconfig: Path) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--config={KWOK_STAGES}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={FAKE_NODE_SELECTOR}",
        f"--cidr={POD_CIDR}",
        f"--node-ip={NODE_IP}",
        f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
        # Health checks only; KWOK's kubelet-like API (logs, exec) has nothing to serve here.
        f"--server-address=127.0.0.1:{port}",
    ]


def kwok_rbac() -> list[dict[str, Any]]:
    """What KWOK reads and writes in place of kubelets, and nothing else: nodes and their
    pods cluster-wide, the nodes' Leases in kube-node-lease."""
    rules = [
        {
            "apiGroups": [""],
            "resources": ["nodes"],
            "verbs": ["get", "list", "watch", "patch", "update"],
        },
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch", "update"]},
        {
            "apiGroups": [""],
            "resources": ["pods"],
            "verbs": ["get", "list", "watch", "patch", "update", "delete"],
        },
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch", "update"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]
    name = "sluice-e2e:kwok-controller"
    subjects = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": KWOK_USER}]
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": subjects,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "verbs": ["get", "list", "watch", "create", "update", "patch"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": subjects,
        },
    ]
