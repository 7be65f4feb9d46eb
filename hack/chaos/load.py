"""What the soak runs: 22 fake nodes, a queue tree with guarantees, capabilities and a
reclaimable queue, and a steady, seeded stream of workloads from two tenants:

- Jobs of 1 to 3 pods (team-a's research queues and team-b's batch queue) that complete
  through the Job controller and KWOK after 15 to 45 s, deleted a minute after they finish;
- pod groups of 3 gated plain pods (team-b's serving queue), completing the same way;
- Deployments of 2 replicas whose pods queue one by one (team-b's serving queue), deleted
  after 40 to 90 s.

The tenants' writes go through the webhooks as theirs (client certificates of their own);
the hot tenant changes every minute, so queues borrow and reclaim in turn.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import controlplane
from controlplane import kwok
from kubernetes import client, config

QUEUE_LABEL = "sluice.dev/queue-name"
GROUP_LABEL = "sluice.dev/pod-group"
GROUP_TOTAL = "sluice.dev/pod-group-total-count"
KIND_LABEL = "chaos.sluice.dev/kind"
NODES = 22
NODE_CPU = 2
TOLERATE_SECONDS = 8
"""Pods leave a NotReady node this soon (the default, added by the API server, is 300 s)."""

TENANTS = {"alice": "team-a", "bob": "team-b"}

QUEUES: list[dict[str, Any]] = [
    {"name": "research", "spec": {"parent": "root", "weight": 1,
     "guarantee": {"resource": {"cpu": "12"}}, "capability": {"cpu": "30"}}},
    {"name": "vision", "spec": {"parent": "research", "reclaimable": True,
     "capability": {"cpu": "16"}, "namespaceSelector": {"matchLabels": {"tenant": "team-a"}}}},
    {"name": "nlp", "spec": {"parent": "research", "capability": {"cpu": "20"},
     "namespaceSelector": {"matchLabels": {"tenant": "team-a"}}}},
    {"name": "production", "spec": {"parent": "root", "weight": 1,
     "guarantee": {"resource": {"cpu": "16"}}, "capability": {"cpu": "30"}}},
    {"name": "batch", "spec": {"parent": "production", "reclaimable": True,
     "capability": {"cpu": "20"}, "namespaceSelector": {"matchLabels": {"tenant": "team-b"}}}},
    {"name": "serving", "spec": {"parent": "production", "capability": {"cpu": "12"},
     "namespaceSelector": {"matchLabels": {"tenant": "team-b"}}}},
]  # fmt: skip

TOLERATIONS = [
    {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": TOLERATE_SECONDS}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
]


def api_client(kubeconfig: Path) -> client.ApiClient:
    made: client.ApiClient = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    return made


def node(name: str) -> Any:
    """A fake node of NODE_CPU cpus (a plain body, which the client takes as its models)."""
    return kwok.fake_node(name, {"cpu": str(NODE_CPU), "memory": "16Gi", "pods": "20"})


def setup(admin: client.ApiClient, cluster: controlplane.Cluster) -> dict[str, client.ApiClient]:
    """Nodes, namespaces, queues and tenant RBAC; the tenants' API clients by user."""
    core, rbac = client.CoreV1Api(admin), client.RbacAuthorizationV1Api(admin)
    objects = client.CustomObjectsApi(admin)
    for index in range(NODES):
        core.create_node(node(f"node-{index:02d}"))
    for namespace in TENANTS.values():
        namespace_body: Any = {"metadata": {"name": namespace, "labels": {"tenant": namespace}}}
        core.create_namespace(namespace_body)
    for queue in QUEUES:
        body = {"apiVersion": "scheduling.sluice.dev/v1beta1", "kind": "Queue",
                "metadata": {"name": queue["name"]}, "spec": queue["spec"]}  # fmt: skip
        for _ in range(100):  # the webhooks may still be on their way in
            try:
                objects.create_cluster_custom_object(
                    "scheduling.sluice.dev", "v1beta1", "queues", body
                )
                break
            except client.ApiException as err:
                if err.status == 409:
                    break
                time.sleep(0.3)
        else:
            raise RuntimeError(f"queue {queue['name']} could not be created")
    tenants = {}
    for user, namespace in TENANTS.items():
        rules = [
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["*"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]},
        ]
        role: Any = {"metadata": {"name": "tenant"}, "rules": rules}
        rbac.create_namespaced_role(namespace, role)
        binding: Any = {
            "metadata": {"name": "tenant"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"},
            "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
        }
        rbac.create_namespaced_role_binding(namespace, binding)
        path = controlplane.user_kubeconfig(
            cluster, user, ["tenants"], cluster.state_dir / f"{user}.kubeconfig"
        )
        tenants[user] = api_client(path)
    return tenants


@dataclass
class Submission:
    """One tenant write the stream made: what, when (wall clock), and whether it was taken."""

    kind: str
    key: str
    at: float
    accepted: bool
    error: str = ""


@dataclass
class Stream:
    tenants: dict[str, client.ApiClient]
    admin: client.ApiClient
    rng: random.Random
    interval: float = 1.0
    submissions: list[Submission] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _cleanup: list[tuple[float, Callable[[], object]]] = field(default_factory=list)
    _count: int = 0

    def start(self) -> None:
        threading.Thread(target=self._run, name="stream", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            minute = int((time.monotonic() - started) // 60)
            hot = "alice" if minute % 2 == 0 else "bob"
            user = hot if self.rng.random() < 0.7 else self.rng.choice(list(TENANTS))
            try:
                self._submit(user)
            except Exception as err:  # noqa: BLE001 - the stream must outlive any one error
                # No answer at all (the API server away): not taken.
                self.submissions.append(Submission("unanswered", "", time.time(), False, repr(err)))
            self._tidy()
            self._stop.wait(self.rng.uniform(0.5, 1.5) * self.interval)

    def _submit(self, user: str) -> None:
        self._count += 1
        namespace = TENANTS[user]
        api = self.tenants[user]
        cpu = self.rng.choice(["500m", "1"])
        if user == "alice":
            queue = self.rng.choice(["vision", "nlp"])
            self._job(api, namespace, queue, cpu)
            return
        roll = self.rng.random()
        if roll < 0.6:
            self._job(api, namespace, "batch", cpu)
        elif roll < 0.85:
            self._group(api, namespace)
        else:
            self._deployment(api, namespace)

    def _record(self, kind: str, key: str, write: Callable[[], object]) -> bool:
        at = time.time()
        try:
            write()
        except client.ApiException as err:
            self.submissions.append(Submission(kind, key, at, False, f"{err.status} {err.reason}"))
            return False
        self.submissions.append(Submission(kind, key, at, True))
        return True

    def _job(self, api: client.ApiClient, namespace: str, queue: str, cpu: str) -> None:
        name = f"job-{self._count:05d}"
        template = kwok.pod_template(
            {"cpu": cpu}, complete_after=f"{self.rng.randint(15, 45)}s", tolerations=TOLERATIONS
        )
        body: Any = kwok.job(name, template, namespace=namespace, queue=queue,
                        pods=self.rng.randint(1, 3), labels={KIND_LABEL: "job"})  # fmt: skip
        body["spec"]["ttlSecondsAfterFinished"] = 60
        batch = client.BatchV1Api(api)
        self._record("job", f"{namespace}/{name}",
                     lambda: batch.create_namespaced_job(namespace, body))  # fmt: skip

    def _group(self, api: client.ApiClient, namespace: str) -> None:
        group = f"group-{self._count:05d}"
        core = client.CoreV1Api(api)
        for index in range(3):
            pod = kwok.pod_template(
                {"cpu": "500m"},
                complete_after=f"{self.rng.randint(8, 20)}s",
                labels={QUEUE_LABEL: "serving", GROUP_LABEL: group, KIND_LABEL: "group"},
                annotations={GROUP_TOTAL: "3"},
                tolerations=TOLERATIONS,
            )
            name = f"{group}-{index}"
            body: Any = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {**pod["metadata"], "name": name}, "spec": pod["spec"]}  # fmt: skip

            def create(body: Any = body) -> object:
                return core.create_namespaced_pod(namespace, body)

            if not self._record("group-pod", f"{namespace}/{name}", create):
                break
        admin = client.CoreV1Api(self.admin)
        selector = f"{GROUP_LABEL}={group}"
        self._later(
            120, lambda: admin.delete_collection_namespaced_pod(namespace, label_selector=selector)
        )

    def _deployment(self, api: client.ApiClient, namespace: str) -> None:
        name = f"deploy-{self._count:05d}"
        template = kwok.pod_template(
            {"cpu": "500m"}, restart_policy="Always", tolerations=TOLERATIONS,
            labels={QUEUE_LABEL: "serving", KIND_LABEL: "deployment"},
        )  # fmt: skip
        body: Any = kwok.deployment(name, template, namespace=namespace, replicas=2)
        apps = client.AppsV1Api(api)
        if self._record("deployment", f"{namespace}/{name}",
                        lambda: apps.create_namespaced_deployment(namespace, body)):  # fmt: skip
            admin = client.AppsV1Api(self.admin)
            self._later(
                self.rng.randint(40, 90),
                lambda: admin.delete_namespaced_deployment(
                    name, namespace, propagation_policy="Foreground"
                ),
            )

    def _later(self, seconds: float, action: Callable[[], object]) -> None:
        self._cleanup.append((time.monotonic() + seconds, action))

    def _tidy(self) -> None:
        now = time.monotonic()
        due = [(t, a) for t, a in self._cleanup if t <= now]
        self._cleanup = [(t, a) for t, a in self._cleanup if t > now]
        for when, action in due:
            try:
                action()
            except client.ApiException as err:
                if err.status != 404:
                    self._cleanup.append((when + 5, action))
            except Exception:  # noqa: BLE001 - the API server may be down: try again later
                self._cleanup.append((when + 5, action))
